"""Slopes rescaled at inference: run an ALiBi (BLOOM) model with every slope multiplied by s.

    with slope_scale(model, 0.125):
        out = evaluate_length(model, 1024, kind="en")

s = 1 is the model as trained. s = L_train / L shrinks every slope by the factor the input grew,
so the bias a query gives its farthest key at length L equals what it gave the farthest key at
the training length: the interpolation that Al-Khateeb et al. 2023 (arXiv:2310.13017) apply to
ALiBi, which the official repository's README points to (`paper.ALIBI_INTERPOLATION`).

transformers' BLOOM builds its bias from the head count alone, with the module function
`_get_alibi_slopes` (whether or not an attention mask is given), so the scale is applied there:
the function is wrapped once, and the wrapper multiplies the slopes by the scale of the current
context (a ContextVar; 1 outside `slope_scale`, so nothing else changes). A Streamlit session runs in its own
thread, so a scale set in one session never reaches another session's model, even when both
hold the same cached model object.

`python -m experiments.rescale` (experiments.rescale) sweeps the shipped ALiBi
model's scales -> assets/results/rescale.json; alibi_viz.results.rescale reads it back.
"""

from __future__ import annotations

import contextlib
from contextvars import ContextVar

from alibi_viz.errors import AlibiVizError
from alibi_viz.i18n import _

_SCALE: ContextVar[float] = ContextVar("alibi_viz_slope_scale", default=1.0)
SCALE_RANGE = (1 / 64, 4.0)  # the scales a page accepts


def _install() -> None:
    from transformers.models.bloom import modeling_bloom  # heavy: only when a scale is applied

    original = modeling_bloom._get_alibi_slopes
    if getattr(original, "_alibi_viz_scaled", False):
        return

    def _get_alibi_slopes(num_heads, device):
        slopes = original(num_heads, device)  # (heads,)
        scale = _SCALE.get()
        return slopes if scale == 1.0 else slopes * scale

    _get_alibi_slopes._alibi_viz_scaled = True
    modeling_bloom._get_alibi_slopes = _get_alibi_slopes


@contextlib.contextmanager
def slope_scale(model, scale: float):
    """Within the block, `model` (a BLOOM model) runs with every ALiBi slope times `scale`."""
    if getattr(getattr(model, "config", None), "model_type", None) != "bloom":
        raise AlibiVizError(_("Slopes can be rescaled only in BLOOM models (the shipped ALiBi "
                              "model is one)."))
    low, high = SCALE_RANGE
    if not (isinstance(scale, (int, float)) and low <= scale <= high):
        raise AlibiVizError(_("The slope scale must be a number from {low} to {high}.").format(
            low=low, high=high))
    _install()
    token = _SCALE.set(float(scale))
    try:
        yield model
    finally:
        _SCALE.reset(token)
