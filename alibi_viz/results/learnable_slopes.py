"""What the learnable-slope comparison found: the shipped variant's results
(assets/results/learnable-slopes.json, written by `experiments.learnable_slopes`)
read back, and the sentences the pages and the model card say about them. No torch."""

from __future__ import annotations

import numpy as np

from alibi_viz.errors import AlibiVizError
from alibi_viz.i18n import _, number, percent

COMPARE_FACTORS = (1, 2, 8, 32)  # evaluation lengths, in training lengths


def slope_history(training: dict) -> tuple[list[int], np.ndarray]:
    """(steps, slopes (steps, layers, heads)) from a learnable-slope model's training.json: the
    initial schedule at step 0, then the slopes logged with every point of the loss curve."""
    points = [p for p in training.get("loss_curve", []) if "slopes" in p]
    if not points or not training.get("initial_slopes"):
        raise AlibiVizError(_("This training.json logs no slopes: it is not a learnable-slope "
                              "model."))
    steps = [0] + [int(p["step"]) for p in points]
    slopes = np.array([training["initial_slopes"]] + [p["slopes"] for p in points], dtype=np.float64)
    return steps, slopes


def drift(initial, final) -> dict:
    """How far the slopes moved: per layer, the largest relative change |m / m0 - 1| and its
    head (0-based), and the signed log2 change of every head (layers, heads)."""
    initial, final = np.asarray(initial, dtype=np.float64), np.asarray(final, dtype=np.float64)
    relative = final / initial - 1  # (layers, heads)
    worst = np.abs(relative).argmax(axis=1)
    rows = np.arange(len(relative))
    return {"largest_relative": relative[rows, worst].tolist(), "head": worst.tolist(),
            "log2_change": np.log2(final / initial).tolist()}


def cell_key(kind: str, protocol: str, length: int) -> str:
    return f"{kind}/{protocol}/{length}"


def cell(results: dict, kind: str, protocol: str, length: int) -> dict:
    """One comparison cell of the shipped results (learnable, fixed, their intervals, ratio)."""
    try:
        return results["cells"][cell_key(kind, protocol, length)]
    except KeyError:
        raise AlibiVizError(_("No learnable-slope result for {kind}, {protocol}, {length} tokens.")
                            .format(kind=kind, protocol=protocol, length=length)) from None


def verdict(ratio_interval) -> str:
    """"worse", "better" or "same": where the paired 95% interval of learnable / fixed lies."""
    _ratio, low, high = ratio_interval
    return "worse" if low > 1 else "better" if high < 1 else "same"


def summary(results: dict, kind: str, protocol: str = "nonoverlapping") -> dict:
    """What the shipped comparison shows on one kind of text: per length factor the ratio
    learnable / fixed with its interval and verdict; whether the gap narrows with length (the
    ratio on one side of 1 at every factor, and no nearer 1 at any factor than at the next);
    the slopes' largest move (layer, head, relative change) and how many slopes ended steeper
    than they started."""
    cells = {f: cell(results, kind, protocol, n)
             for f, n in zip(results["factors"], results["lengths"], strict=True)}
    moved = results["drift"]
    layer = int(np.argmax(np.abs(moved["largest_relative"])))
    change = np.asarray(moved["log2_change"])
    gaps = [c["ratio"][0] - 1 for c in cells.values()]  # in factor order
    narrows = (all(g < 0 for g in gaps) or all(g > 0 for g in gaps)) and all(
        abs(b) <= abs(a) for a, b in zip(gaps[:-1], gaps[1:], strict=True)) and abs(gaps[-1]) < abs(gaps[0])
    return {"ratios": {f: c["ratio"] for f, c in cells.items()},
            "verdicts": {f: verdict(c["ratio"]) for f, c in cells.items()},
            "narrows": bool(narrows),
            "largest": {"layer": layer, "head": int(moved["head"][layer]),
                        "relative": float(moved["largest_relative"][layer])},
            "steeper": int((change > 0).sum()), "slopes": int(change.size)}


def run_summary(results: dict) -> str:
    """One sentence on the shipped run in non-overlapping windows, over every kind of text and
    length factor, in the current language: the range of learnable / fixed, how many paired intervals lie below 1
    (and that none lies above it, when so), and whether on every kind the learnable-slope
    model's perplexity at the longest factor is below its own at 1x (it kept extrapolating)."""
    protocol = "nonoverlapping"
    factors, lengths = results["factors"], results["lengths"]
    cells = [cell(results, kind, protocol, n) for kind in results["kinds"] for n in lengths]
    ratios = [c["ratio"][0] for c in cells]
    verdicts = [verdict(c["ratio"]) for c in cells]
    # Name each length evaluated: the run scores a few factors (1x, 2x, 8x, 32x), not a range.
    values = {"low_factor": factors[0], "high_factor": factors[-1],
              "lengths": number(len(factors)),
              "factors": ", ".join(_("{factor}x").format(factor=f) for f in factors),
              "below": verdicts.count("better"), "n": len(cells),
              "kinds": number(len(results["kinds"]))}
    if max(ratios) < 1:
        text = _("In this project's run, in non-overlapping windows, the learnable-slope model's "
                 "perplexity is {low} to {high} below the fixed-slope model's at each of the {lengths} "
                 "lengths evaluated ({factors}) on all {kinds} kinds of held-out text ({below} of the {n} paired "
                 "95% intervals lie below 1").format(low=percent(1 - max(ratios), 1), high=percent(1 - min(ratios), 1),
                             **values)
    else:
        text = _("In this project's run, in non-overlapping windows, the learnable-slope model's "
                 "perplexity is {low} to {high} times the fixed-slope model's at each of the {lengths} "
                 "lengths evaluated ({factors}) on all {kinds} kinds of held-out text ({below} of the {n} paired "
                 "95% intervals lie below 1").format(low=number(min(ratios), 3), high=number(max(ratios), 3), **values)
    text += (_(", none above it)") if "worse" not in verdicts else ")")
    first, last = lengths[0], lengths[-1]
    kept = all(cell(results, kind, protocol, last)["learnable"]
               < cell(results, kind, protocol, first)["learnable"] for kind in results["kinds"])
    if kept:
        text += _("; on every kind its perplexity at {high_factor}x is below its own at "
                  "{low_factor}x: it kept extrapolating").format(**values)
    return text + "."
