"""Per-layer ALiBi slopes in a BLOOM model: the learnable-slope variant.

    slopes = attach(model, trainable=True)       # m[layer, head], initialised to the official schedule
    ... train: slopes.log_slopes is one more parameter ...
    save(model, slopes, folder)                  # config.json gains "alibi_viz_slopes"
    model, tokenizer, info = alibi_viz.load_model(folder)   # attaches them again

transformers' BLOOM builds one bias tensor from the head count alone (`_get_alibi_slopes`, the
official schedule) and hands the same tensor to every block. This module leaves that code as it
is and rescales the tensor on its way into each block, with a forward pre-hook:

    alibi_l = alibi * m[l] / m_official          (per head; alibi holds m_official * j)

so layer l's head h adds m[l, h] * j: the same row-constant form (softmax is unchanged by a
constant per row), the same masking, padding and KV cache as BLOOM's own path. Nothing of
transformers is patched and no remote code runs: the slopes are a plain list in config.json
(`CONFIG_KEY`, layers x heads), which `alibi_viz.models.loading.load_model` reads. Loaded by
plain transformers instead, the model silently uses the official slopes in every layer: only
alibi-viz's loader runs it as trained (its model card says so).

While training, the slopes are parameterised by their logarithms (`log_slopes`), so that they
stay positive and Adam moves every head by the same relative step whatever its size (from 1/2
to 1/256, a factor 128). They are kept off the model's own parameters (`model.parameters()`
and its state dict do not hold them), so `save_pretrained` writes a plain BLOOM checkpoint.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from torch import nn

from alibi_viz.alibi import alibi_slopes
from alibi_viz.errors import AlibiVizError
from alibi_viz.i18n import _

CONFIG_KEY = "alibi_viz_slopes"  # config.json: per-layer slopes, [[m_h for each head] for each layer]
_ATTR = "_alibi_viz_layer_slopes"  # the attached LayerSlopes, on the model object


class LayerSlopes(nn.Module):
    """m[layer, head] = exp(log_slopes), and the hooks that apply them."""

    def __init__(self, slopes: np.ndarray, trainable: bool):
        super().__init__()
        official = alibi_slopes(slopes.shape[1])  # (heads,) what BLOOM's builder puts in alibi
        self.register_buffer("official", torch.tensor(official, dtype=torch.float32))
        self.log_slopes = nn.Parameter(torch.tensor(np.log(slopes), dtype=torch.float32),
                                       requires_grad=trainable)  # (layers, heads)
        self.handles = []

    def slopes(self) -> np.ndarray:
        """(layers, heads) float64: the slopes the model applies now."""
        return self.log_slopes.detach().double().exp().numpy()

    def hook(self, layer: int):
        def rescale(_module, args, kwargs):
            alibi = kwargs["alibi"]  # (batch * heads, 1, keys): m_official * j
            heads = self.official.numel()
            ratio = (self.log_slopes[layer].exp() / self.official).to(alibi.dtype)  # (heads,)
            scaled = alibi.view(-1, heads, *alibi.shape[1:]) * ratio[None, :, None, None]
            kwargs["alibi"] = scaled.view_as(alibi)
            return args, kwargs
        return rescale


def _blocks(model):
    if getattr(model.config, "model_type", None) != "bloom":
        raise AlibiVizError(_("Per-layer slopes work only in BLOOM models."))
    return model.transformer.h


def attach(model, slopes=None, trainable: bool = False) -> LayerSlopes:
    """Give every layer of `model` (a BLOOM model) its own slopes: `slopes` (layers, heads), or
    the official schedule in every layer. Returns the LayerSlopes (its log_slopes is the
    parameter to train when trainable). Attaching again replaces the earlier slopes."""
    blocks = _blocks(model)
    heads = int(model.config.n_head)
    if slopes is None:
        slopes = np.tile(alibi_slopes(heads), (len(blocks), 1))
    slopes = np.asarray(slopes, dtype=np.float64)
    if slopes.shape != (len(blocks), heads) or not (np.isfinite(slopes).all() and (slopes > 0).all()):
        raise AlibiVizError(_("Per-layer slopes must be {layers} x {heads} positive numbers, got "
                              "shape {shape}.").format(layers=len(blocks), heads=heads,
                                                       shape=tuple(slopes.shape)))
    detach(model)
    module = LayerSlopes(slopes, trainable).to(next(model.parameters()).device)
    module.handles = [block.register_forward_pre_hook(module.hook(i), with_kwargs=True)
                      for i, block in enumerate(blocks)]
    object.__setattr__(model, _ATTR, module)  # not a submodule: kept out of the state dict
    return module


def detach(model) -> None:
    """Remove attached per-layer slopes (the model then applies BLOOM's official schedule)."""
    module = getattr(model, _ATTR, None)
    if module is not None:
        for handle in module.handles:
            handle.remove()
        object.__delattr__(model, _ATTR)


def attached(model) -> np.ndarray | None:
    """(layers, heads) slopes attached to `model`, or None when it has none."""
    module = getattr(model, _ATTR, None)
    return None if module is None else module.slopes()


def from_config(config) -> np.ndarray | None:
    """(layers, heads) slopes a config.json declares (CONFIG_KEY), or None."""
    value = getattr(config, CONFIG_KEY, None)
    if value is None:
        return None
    try:
        return np.asarray(value, dtype=np.float64).reshape(len(value), -1)
    except (TypeError, ValueError):
        raise AlibiVizError(_("config.json's {key} must be a list of per-layer slope lists.")
                            .format(key=CONFIG_KEY)) from None


def attach_from_config(model) -> np.ndarray | None:
    """Attach the slopes the model's config declares, if it declares any; returns them."""
    slopes = from_config(model.config)
    if slopes is not None:
        attach(model, slopes)
    return slopes


def store(model, module: LayerSlopes) -> None:
    """Write the current slopes into the model's config (saved with `save_pretrained`)."""
    setattr(model.config, CONFIG_KEY, module.slopes().tolist())


def logged(slopes) -> list:
    """(layers, heads) slopes as nested lists to 5 significant digits, as training.json logs
    them and the shipped results keep them."""
    return [[float(f"{m:.5g}") for m in row] for row in np.asarray(slopes)]


def read(folder) -> np.ndarray | None:
    """(layers, heads) slopes of a saved model folder's config.json, or None."""
    value = json.loads((Path(folder) / "config.json").read_text()).get(CONFIG_KEY)
    return None if value is None else np.asarray(value, dtype=np.float64)


# ----------------------------------------------------------------------------- the shipped variant

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


def compare(variant, fixed, train_seq_len: int, kinds=None, factors=COMPARE_FACTORS,
            log=print) -> dict:
    """Perplexity of the learnable-slope model and the fixed-slope one, side by side on the
    same held-out targets (evaluate's), at each length factor x train_seq_len, on each kind of
    text and both protocols, with their 95% intervals and the paired ratio variant / fixed."""
    import time

    from alibi_viz import data
    from alibi_viz.evaluate import (
        PROTOCOLS,
        confidence_interval,
        evaluate_length,
        paired_ratio_interval,
    )

    kinds = tuple(kinds or data.TEXT_KINDS)
    lengths = [f * train_seq_len for f in factors]
    out = {"command": "python -m alibi_viz.models.layer_slopes", "train_seq_len": train_seq_len,
           "factors": list(factors), "lengths": lengths, "kinds": list(kinds),
           "protocols": list(PROTOCOLS), "cells": {}, "seconds": {}}
    for kind in kinds:
        t0 = time.perf_counter()
        for protocol in PROTOCOLS:
            for length in lengths:
                a, b = (evaluate_length(m, length, protocol, max_length=max(lengths), kind=kind)
                        for m in (variant, fixed))
                out["cells"][_cell_key(kind, protocol, length)] = {
                    "learnable": round(a["ppl"], 5), "fixed": round(b["ppl"], 5),
                    "learnable_ci95": [round(v, 5) for v in confidence_interval(a["chunk_nll"])],
                    "fixed_ci95": [round(v, 5) for v in confidence_interval(b["chunk_nll"])],
                    "ratio": [round(v, 5) for v in paired_ratio_interval(a["chunk_nll"],
                                                                         b["chunk_nll"])],
                    "tokens": a["tokens"]}
        out["seconds"][kind] = round(time.perf_counter() - t0, 1)
        log(f"{kind}: " + ", ".join(
            f"{p} {n}: {out['cells'][_cell_key(kind, p, n)]['ratio'][0]:.3f}x"
            for p in PROTOCOLS for n in lengths) + f" ({out['seconds'][kind]} s)")
    return out


def _cell_key(kind: str, protocol: str, length: int) -> str:
    return f"{kind}/{protocol}/{length}"


def cell(results: dict, kind: str, protocol: str, length: int) -> dict:
    """One comparison cell of the shipped results (learnable, fixed, their intervals, ratio)."""
    try:
        return results["cells"][_cell_key(kind, protocol, length)]
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
    from alibi_viz.i18n import number, percent

    protocol = "nonoverlapping"
    factors, lengths = results["factors"], results["lengths"]
    cells = [cell(results, kind, protocol, n) for kind in results["kinds"] for n in lengths]
    ratios = [c["ratio"][0] for c in cells]
    verdicts = [verdict(c["ratio"]) for c in cells]
    values = {"low_factor": factors[0], "high_factor": factors[-1],
              "below": verdicts.count("better"), "n": len(cells),
              "kinds": number(len(results["kinds"]))}
    if max(ratios) < 1:
        text = _("In this project's run, in non-overlapping windows, the learnable-slope model's "
                 "perplexity is {low} to {high} below the fixed-slope model's at every length from {low_factor}x to "
                 "{high_factor}x on all {kinds} kinds of held-out text ({below} of the {n} paired "
                 "95% intervals lie below 1").format(low=percent(1 - max(ratios), 1), high=percent(1 - min(ratios), 1),
                             **values)
    else:
        text = _("In this project's run, in non-overlapping windows, the learnable-slope model's "
                 "perplexity is {low} to {high} times the fixed-slope model's at the lengths from {low_factor}x to "
                 "{high_factor}x on all {kinds} kinds of held-out text ({below} of the {n} paired "
                 "95% intervals lie below 1").format(low=number(min(ratios), 3), high=number(max(ratios), 3), **values)
    text += (_(", none above it)") if "worse" not in verdicts else ")")
    first, last = lengths[0], lengths[-1]
    kept = all(cell(results, kind, protocol, last)["learnable"]
               < cell(results, kind, protocol, first)["learnable"] for kind in results["kinds"])
    if kept:
        text += _("; on every kind its perplexity at {high_factor}x is below its own at "
                  "{low_factor}x: it kept extrapolating").format(**values)
    return text + "."


def main(argv=None) -> None:
    import argparse

    from alibi_viz.assets import (
        DEFAULT_MODEL,
        LEARNABLE_SLOPES_DIR,
        LEARNABLE_SLOPES_PATH,
        shipped_models,
        shipped_train_seq_len,
        training_info,
    )
    from alibi_viz.evaluate import load_eval_model

    p = argparse.ArgumentParser(prog="python -m alibi_viz.models.layer_slopes",
                                description="The learnable-slope variant against the shipped "
                                            "ALiBi model -> assets/results/learnable-slopes.json.")
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    folder = shipped_models()[DEFAULT_MODEL]
    training = training_info(LEARNABLE_SLOPES_DIR)
    steps, history = slope_history(training)
    results = compare(load_eval_model(LEARNABLE_SLOPES_DIR), load_eval_model(folder),
                      shipped_train_seq_len(folder))
    results.update(steps=steps, slopes=[logged(step) for step in history],
                   drift=drift(history[0], read(LEARNABLE_SLOPES_DIR)),
                   training={"learnable_s": training["wall_time_s"],
                             "fixed_s": training_info(folder).get("wall_time_s")})
    LEARNABLE_SLOPES_PATH.write_text(json.dumps(results, indent=1) + "\n")
    print(f"wrote {LEARNABLE_SLOPES_PATH}")


if __name__ == "__main__":
    main()
