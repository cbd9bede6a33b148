"""What `python -m experiments.rescale` found, read back from
assets/results/rescale.json: the shipped ALiBi model's perplexity and reach with every slope
multiplied by s, and the sentences written from it. Plain Python and numpy, no torch."""

from __future__ import annotations

from alibi_viz import paper
from alibi_viz.assets import text_kind_in_sentence
from alibi_viz.errors import AlibiVizError
from alibi_viz.i18n import _, significant
from alibi_viz.results.evaluation import relative_change
from alibi_viz.results.reach import ReachResult


def interpolation_scale(train_seq_len: int, length: int) -> float:
    """s = L_train / L: position interpolation for ALiBi (1 at or below the training length)."""
    if train_seq_len < 1 or length < 1:
        raise AlibiVizError(_("Lengths must be positive token counts."))
    return min(1.0, train_seq_len / length)


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
        text=text_kind_in_sentence(results["kind"]), changes=changes)
