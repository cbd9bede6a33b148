"""The one `from_pretrained` of a model: every load of a checkpoint in this project goes here.

transformers' from_pretrained builds a model on the meta device and then fills it in, and that
is not safe in two threads at once: of 24 loads of the shipped models, 8 threads at a time,
21 failed ("NotImplementedError: Cannot copy out of meta tensor"); a class on one server
evicting and reloading models met it on /extrapolation (706 of 3,942 visits in a 10-minute
soak), and the lab's live runs met it in 24 of 24 concurrent loads while they loaded without
the lock. So loads in one process take turns (tests/test_loading.py loads through every path
in eight threads at once).
"""

from __future__ import annotations

import threading

LOADING = threading.RLock()  # re-entrant: a loader may call another under it


def from_pretrained(folder, **kwargs):
    """`AutoModelForCausalLM.from_pretrained(folder, local_files_only=True, **kwargs)`, one
    load at a time in this process (see the module's docstring)."""
    from transformers import AutoModelForCausalLM  # heavy: only when a model is loaded

    with LOADING:
        return AutoModelForCausalLM.from_pretrained(folder, local_files_only=True, **kwargs)
