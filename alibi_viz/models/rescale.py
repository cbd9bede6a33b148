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
"""

from __future__ import annotations

import argparse
import contextlib
import json
import time
from contextvars import ContextVar

import numpy as np

from alibi_viz import assets, paper
from alibi_viz.assets import DEFAULT_MODEL, shipped_models, shipped_train_seq_len
from alibi_viz.errors import AlibiVizError
from alibi_viz.i18n import _, significant
from alibi_viz.results.reach import ReachResult

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


def interpolation_scale(train_seq_len: int, length: int) -> float:
    """s = L_train / L: position interpolation for ALiBi (1 at or below the training length)."""
    if train_seq_len < 1 or length < 1:
        raise AlibiVizError(_("Lengths must be positive token counts."))
    return min(1.0, train_seq_len / length)


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


# ----------------------------------------------------------------------------- the shipped sweep

SWEEP_SCALES = (1.0, 1 / 2, 1 / 4, 1 / 8, 1 / 32)  # holds L_train / L for each of SWEEP_FACTORS
SWEEP_FACTORS = (2, 8, 32)  # evaluation lengths, in training lengths
SWEEP_KIND = "en"  # the held-out text of the sweep


def rescale_sweep(model, train_seq_len: int, kind: str = SWEEP_KIND, scales=SWEEP_SCALES,
                  factors=SWEEP_FACTORS, log=print) -> dict:
    """Perplexity (both protocols, on evaluate's targets) at each length factor x train_seq_len
    and the reach curve, for each slope scale: what assets/results/rescale.json holds."""
    # heavy: torch, through data, evaluate and reach; this module imports none at its top
    from alibi_viz import data
    from alibi_viz.evaluate import PROTOCOLS, confidence_interval, evaluate_length
    from alibi_viz.reach import REACH_CONTEXTS, context_reach

    lengths = [f * train_seq_len for f in factors]
    out = {"command": "python -m alibi_viz.models.rescale", "kind": kind,
           "train_seq_len": train_seq_len, "scales": [float(s) for s in scales],
           "lengths": lengths, "perplexity": {p: {} for p in PROTOCOLS}, "ci95": {p: {} for p in PROTOCOLS},
           "reach": {}, "seconds": {}}
    stream = data.heldout_mixture_ids(max_tokens=1 << 16)
    for scale in scales:
        t0 = time.perf_counter()
        key = f"{scale:.6g}"
        with slope_scale(model, scale):
            for protocol in PROTOCOLS:
                for length in lengths:
                    cell = evaluate_length(model, length, protocol, max_length=max(lengths),
                                           kind=kind)
                    out["perplexity"][protocol].setdefault(str(length), {})[key] = round(
                        cell["ppl"], 5)
                    out["ci95"][protocol].setdefault(str(length), {})[key] = [
                        round(v, 5) for v in confidence_interval(cell["chunk_nll"])]
            reach = context_reach(model, stream, [c for c in REACH_CONTEXTS if c <= 1024])
        out["reach"][key] = reach.as_dict()
        out["seconds"][key] = round(time.perf_counter() - t0, 1)
        log(f"s={key}: " + ", ".join(
            f"{p} {n}: {out['perplexity'][p][str(n)][key]:.3f}" for p in PROTOCOLS for n in lengths)
            + f"; reach at 1,024 {np.round(reach.nll[-1], 3)} ({out['seconds'][key]} s)")
    return out


def main(argv=None) -> None:
    # heavy: torch, once the sweep runs (not for --help)
    import torch

    from alibi_viz.evaluate import load_eval_model

    p = argparse.ArgumentParser(prog="python -m alibi_viz.models.rescale",
                                description="The shipped ALiBi model with its slopes rescaled -> "
                                            "assets/results/rescale.json.")
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    folder = shipped_models()[DEFAULT_MODEL]
    results = rescale_sweep(load_eval_model(folder), shipped_train_seq_len(folder))
    assets.RESCALE_PATH.write_text(json.dumps(results, indent=1) + "\n")
    print(f"wrote {assets.RESCALE_PATH}")


def scale_label(scale: float) -> str:
    """1, 1/2, 1/32: a scale as the page writes it."""
    return "1" if scale == 1 else f"1/{round(1 / scale)}" if (1 / scale).is_integer() else f"{scale:.3g}"


def rescale_summary(results: dict) -> dict:
    """What the sweep shows, computed: per protocol and length, the best scale and its
    perplexity against s = 1 (ratio), and the ratio of the interpolation scale L_train / L;
    per scale, the reach curve's loss at its longest context against s = 1's, and the context
    at which it is lowest (`ReachResult.lowest_context`)."""
    train = results["train_seq_len"]
    scales = results["scales"]
    key = {s: f"{s:.6g}" for s in scales}
    cells = {}
    for protocol, by_length in results["perplexity"].items():
        for length, values in by_length.items():
            base = values[key[1.0]]
            best = min(scales, key=lambda s: values[key[s]])
            interp = interpolation_scale(train, int(length))
            cells[(protocol, int(length))] = {
                "best": best, "best_ratio": values[key[best]] / base,
                "interpolation": interp,
                "interpolation_ratio": (values[key[interp]] / base if key.get(interp) in values
                                        else None)}
    reach = {s: ReachResult.from_dict(results["reach"][key[s]]) for s in scales}
    longest = {s: float(r.nll[-1]) for s, r in reach.items()}
    return {"cells": cells,
            "reach": {s: {"longest_loss": longest[s], "change": longest[s] - longest[1.0],
                          "lowest_context": reach[s].lowest_context()} for s in scales},
            "longest_context": int(reach[1.0].contexts.max())}


def interpolation_note(results: dict, parameters: int, factors=(8, 32)) -> str | None:
    """The sentence that sets the official repository's pointer to position interpolation
    beside what the shipped sweep measured, in the current language: the change that
    s = L_train / L makes to the non-overlapping perplexity at each of `factors` times the
    training length, against s = 1, on a model of `parameters` parameters. None when the sweep
    lacks one of those cells."""
    # heavy: torch, through data and evaluate; this module imports none at its top
    from alibi_viz import data
    from alibi_viz.evaluate import relative_change

    summary = rescale_summary(results)
    train = results["train_seq_len"]
    cells = [summary["cells"].get(("nonoverlapping", f * train)) for f in factors]
    if any(c is None or c["interpolation_ratio"] is None for c in cells):
        return None
    changes = ", ".join(_("{change} at {factor}x").format(
        change=relative_change(c["interpolation_ratio"], factor_decimals=1), factor=f)
        for f, c in zip(factors, cells, strict=True))
    return _("The official repository points to position interpolation for ALiBi "
             "({interpolation}) to make a model use a longer context. That work reports its "
             "gains on large pretrained models; on this byte-level model of {parameters} million "
             "parameters, with no further training, s = L_train / L changes the non-overlapping "
             "perplexity on {text} by {changes}, against s = 1 (section 5).").format(
        interpolation=paper.ALIBI_INTERPOLATION, parameters=significant(parameters / 1e6, 2),
        text=data.text_kind_in_sentence(results["kind"]), changes=changes)


if __name__ == "__main__":
    main()
