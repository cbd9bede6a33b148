"""What `python -m experiments.reach` found, read back from assets/results/reach.json: a
context-reach curve as `alibi_viz.models.context_reach.context_reach` measures it (where the loss is
lowest and where it settles), and the sentences written from the shipped curves and from a
text's attention beyond a distance. Plain Python and numpy, no torch."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from alibi_viz.alibi import half_life
from alibi_viz.assets import model_label
from alibi_viz.i18n import _, number, percent, significant, small_percent, tokens
from alibi_viz.results.evaluation import signed


@dataclass
class ReachResult:
    """Per-token loss of the same scored tokens against the context given (nats per token).

    contexts: (C,) tokens of context before each scored token (at least; see context_reach).
    nll: (C,) mean nll. nll_sd: (C,) spread of the chunk means scaled to one chunk's size
    (sd x sqrt(chunks)), a rough per-chunk sd. tokens: scored tokens (the same at every c).
    """

    contexts: np.ndarray
    nll: np.ndarray
    nll_sd: np.ndarray
    tokens: int

    def as_dict(self) -> dict:
        return {"contexts": self.contexts.tolist(), "nll": np.round(self.nll, 4).tolist(),
                "nll_sd": np.round(self.nll_sd, 4).tolist(), "tokens": self.tokens}

    @classmethod
    def from_dict(cls, entry: dict) -> ReachResult:
        """A curve as `as_dict` wrote it (assets/results/reach.json)."""
        return cls(np.array(entry["contexts"]), np.array(entry["nll"]),
                   np.array(entry["nll_sd"]), entry["tokens"])

    def lowest_context(self) -> int:
        """The context at which the loss is lowest."""
        return int(self.contexts[int(np.argmin(self.nll))])

    def settled_context(self, tolerance: float = 0.01) -> int | None:
        """The smallest context from which the loss stays within `tolerance` nats of its lowest
        at every longer context; None when even the longest context is further off."""
        near = self.nll <= self.nll.min() + tolerance  # (C,)
        if not near[-1]:
            return None
        outside = np.flatnonzero(~near)
        return int(self.contexts[outside[-1] + 1 if outside.size else 0])


def reach_summary(reach: dict, train_seq_len: int, tolerance: float = 0.01) -> list[str]:
    """Plain sentences on the shipped reach curves, computed from them: per model, the context
    at which the loss is lowest, the context from which it stays within `tolerance` nats of
    that at every longer context (when there is one before the longest), how the loss moves
    from the training length to the longest context, and the copy gain at the nearest and
    farthest distance. In the current language."""
    lines = []
    for name, entry in reach.get("models", {}).items():
        r = ReachResult.from_dict(entry["reach"])
        by_c = dict(zip(r.contexts.tolist(), r.nll.tolist(), strict=True))
        longest = int(r.contexts.max())
        settled = r.settled_context(tolerance)
        gains = dict(zip(entry["copy"]["distances"], entry["copy"]["gain"], strict=True))
        near, far = min(gains), max(gains)
        values = {"model": model_label(name), "context": number(r.lowest_context()),
                  "loss": number(float(r.nll.min()), 3),
                  "settled": "" if settled is None or settled >= longest else _(
                      ", and within {tolerance} nats of that at every context from {settled} "
                      "tokens on").format(tolerance=number(tolerance), settled=number(settled)),
                  "near_gain": number(gains[near], 2), "near": number(near),
                  "far_gain": number(gains[far], 2), "far": number(far)}
        if train_seq_len in by_c and longest > train_seq_len:
            lines.append(_("{model}: lowest at {context} tokens of context ({loss} nats/token)"
                           "{settled}; from {train_seq_len} to {longest} tokens of context its "
                           "loss moves by {delta} nats; a repeated span gains {near_gain} "
                           "nats/token at {near} tokens and {far_gain} at {far}.").format(
                train_seq_len=number(train_seq_len), longest=number(longest),
                delta=signed(by_c[longest] - by_c[train_seq_len], 3), **values))
        else:
            lines.append(_("{model}: lowest at {context} tokens of context ({loss} nats/token)"
                           "{settled}; a repeated span gains {near_gain} nats/token at {near} "
                           "tokens and {far_gain} at {far}.").format(**values))
    return lines


def reach_answer(reach: dict, train_seq_len: int, slopes, name: str = "alibi") -> str | None:
    """The lesson's answer on reach (step 7), in the current language, every clause computed
    from the shipped curves and said only where the data bear it out: where `name`'s loss is
    lowest; where every model's is, and whether each is higher at the training length than
    there; what `name`'s gentlest slope (from `slopes`, (heads,)) still gives a key that far
    back; how little its loss moves from its lowest to the longest context, and whether every
    other model's loss is higher at every context past the training length than at it; the
    copy gain at the nearest and farthest distance. None without `name`'s curve."""
    models = reach.get("models", {})
    if name not in models:
        return None
    curves = {n: ReachResult.from_dict(e["reach"]) for n, e in models.items()}
    own = curves[name]
    low = own.lowest_context()
    by_c = {n: dict(zip(r.contexts.tolist(), r.nll.tolist(), strict=True))
            for n, r in curves.items()}
    longest = int(own.contexts.max())
    lows = "; ".join(_("{model} at {lengths}").format(model=model_label(n),
                                                    lengths=number(r.lowest_context()))
                     for n, r in curves.items())
    inside = all(r.lowest_context() <= train_seq_len for r in curves.values())
    higher = all(train_seq_len in by_c[n] and by_c[n][train_seq_len] > float(r.nll.min())
                 for n, r in curves.items())
    parts = [_("Its loss is lowest at {context} tokens of context ({loss} nats/token).").format(
        context=number(low), loss=number(float(own.nll.min()), 3))]
    if inside:
        parts.append(_("Every shipped model's is lowest within the training window ({lows})"
                       "{higher}.").format(lows=lows, higher=_(
                           ", and each is higher at {train_seq_len} tokens than at its lowest"
                       ).format(train_seq_len=number(train_seq_len)) if higher else ""))
    else:
        parts.append(_("The shipped models' losses are lowest at: {lows}.").format(lows=lows))
    m = float(np.min(slopes))
    weight = math.exp(-m * low)
    if weight > 0.5:  # the gentlest head has barely begun to decay there
        life = float(half_life([m])[0])
        parts.append(_("That limit is not ALiBi's bias: its gentlest head (m = {m}, half-life "
                       "{half_life}) still gives a key {context} tokens back {weight} of the "
                       "weight of the newest one.").format(
            m=significant(m), half_life=tokens(life, number(life, 0)), context=number(low),
            weight=percent(weight)))
    past = [c for c in own.contexts.tolist() if c >= low]
    spread = max(by_c[name][c] for c in past) - float(own.nll.min())
    others = {n: [v for c, v in by_c[n].items() if c > train_seq_len]
              for n in curves if n != name}
    rise = bool(others) and all(
        values and all(v > by_c[n][train_seq_len] for v in values) for n, values in others.items())
    far_losses = [by_c[n][longest] for n in others if longest in by_c[n]]
    parts.append(_("What ALiBi changes comes past {train_seq_len} tokens: from {context} to "
                   "{longest} tokens of context its loss stays within {spread} nats of its "
                   "lowest{others}.").format(
        train_seq_len=number(train_seq_len), context=number(low), longest=number(longest),
        spread=number(spread, 3),
        others=_(", while every other model's loss is higher at each context past "
                 "{train_seq_len} than at {train_seq_len} ({low}-{high} nats at {longest})"
                 ).format(train_seq_len=number(train_seq_len), longest=number(longest),
                          low=number(min(far_losses), 2), high=number(max(far_losses), 2))
        if rise and far_losses else ""))
    gains = dict(zip(models[name]["copy"]["distances"], models[name]["copy"]["gain"],
                     strict=True))
    near, far = min(gains), max(gains)
    parts.append(_("Its copy gain is {near_gain} nats at {near} tokens and {far_gain} at "
                   "{far}.").format(near_gain=number(gains[near], 2), near=number(near),
                                    far_gain=number(gains[far], 2), far=number(far)))
    return " ".join(parts)


NEAR_SHARE = 0.01  # a head "keeps to training distances" when it puts less than this beyond


def beyond_summary(shares, distance: int, seq_len: int) -> str:
    """One sentence on `attention_beyond`'s (layers, heads) shares, in the current language:
    the heads that put under NEAR_SHARE of their attention beyond `distance` in every layer,
    and for each other head the range of its share over the layers."""
    shares = np.asarray(shares, dtype=np.float64)
    near = [h for h in range(shares.shape[1]) if (shares[:, h] < NEAR_SHARE).all()]
    far = [h for h in range(shares.shape[1]) if h not in near]

    def heads_text(ids):  # "1-4, 6": runs of consecutive heads, 1-based
        runs = []
        for h in ids:
            if runs and h == runs[-1][1] + 1:
                runs[-1][1] = h
            else:
                runs.append([h, h])
        return ", ".join(f"{a + 1}" if a == b else f"{a + 1}-{b + 1}" for a, b in runs)

    ranges = "; ".join(_("head {head} {low} to {high}").format(
        head=h + 1, low=small_percent(shares[:, h].min()), high=small_percent(shares[:, h].max()))
        for h in far)
    if near and far:
        return _("Read at {seq_len} tokens, heads {near} put under {share} of their attention "
                 "more than {distance} tokens back in every layer, the others, over the "
                 "layers: {ranges}.").format(
            seq_len=number(seq_len), near=heads_text(near), share=small_percent(NEAR_SHARE),
            distance=number(distance), ranges=ranges)
    if near:
        return _("Read at {seq_len} tokens, every head puts under {share} of its attention more "
                 "than {distance} tokens back in every layer.").format(
            seq_len=number(seq_len), share=small_percent(NEAR_SHARE), distance=number(distance))
    return _("Read at {seq_len} tokens, the share of attention more than {distance} tokens back "
             "is, over the layers: {ranges}.").format(seq_len=number(seq_len),
                                                     distance=number(distance), ranges=ranges)
