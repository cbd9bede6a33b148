"""Where the shipped models and results live, and small readers for them.

    assets/models/<name>/           one trained model per folder (save_pretrained + training.json)
    assets/results/extrapolation.json   written by `python -m alibi_viz.evaluate`

The ALiBi model is the default one the app opens; "learned" and "rope" are the baselines of the
train-short-test-long experiment (see `alibi_viz.train`).
"""

from __future__ import annotations

import json
from pathlib import Path

ASSETS_DIR = Path(__file__).resolve().parent.parent / "assets"
MODELS_DIR = ASSETS_DIR / "models"
RESULTS_PATH = ASSETS_DIR / "results" / "extrapolation.json"
DEFAULT_MODEL = "alibi"
MODEL_ORDER = ("alibi", "learned", "rope")  # shown in this order; other folders follow by name


def shipped_models() -> dict[str, Path]:
    """Name -> folder of every model under assets/models that has a config.json, the default
    (ALiBi) model first. Empty if none are shipped."""
    if not MODELS_DIR.is_dir():
        return {}
    found = {p.name: p for p in sorted(MODELS_DIR.iterdir()) if (p / "config.json").is_file()}
    order = [n for n in MODEL_ORDER if n in found] + [n for n in found if n not in MODEL_ORDER]
    return {n: found[n] for n in order}


def training_info(path) -> dict:
    """The training.json of a model folder (settings, wall time, loss curve); {} if missing."""
    file = Path(path) / "training.json"
    if not file.is_file():
        return {}
    return json.loads(file.read_text())


def load_extrapolation_results(path=RESULTS_PATH) -> dict:
    """The results `python -m alibi_viz.evaluate` wrote (see that module); {} if missing."""
    path = Path(path)
    if not path.is_file():
        return {}
    return json.loads(path.read_text())
