"""How far back does a model really look? Copy at a distance and context reach.

Two measurements on held-out text, for any causal LM (the shipped family or a loaded model):

* `copy_at_distance`: a span of held-out text is planted twice, d tokens apart (d counted from
  the start of one copy to the start of the other, so every repeated token has its twin
  exactly d tokens back), both copies out of their own context as in the copy curriculum. The
  repeat is compared with a control: the same sequence with the first copy replaced by other
  held-out text, so the span sits at the same position but has nothing to be copied from. The
  gain (control minus repeat, nats per token) is what retrieval gives at distance d, and
  position alone cannot make it: past the training length a learned or sinusoidal model breaks
  on the control as much as on the repeat. For ALiBi every key d tokens back is pushed down by
  m_h d logits, so the gain must fall with d.
* `context_reach`: per-token loss of the same scored tokens when the model is given only the
  tokens before each of them up to c, c = 1, 2, 4, ..., so the curve shows where extra context
  stops helping (and, past the training length, whether it starts to hurt). Every scored token
  sees at most c tokens (between c - c // 16 and c), so at c = 128 no token is past 128. The
  scored tokens are passages spread through the text, one mean per passage, so the sentences
  can test a change between two contexts with a paired interval over the passages.

Both are plain forward passes (copy batched up to `tokens_per_batch`, reach one passage at a
time); no attention maps.
Which heads copy (`copy_heads`, `own_span`) and how much attention goes beyond a distance
(`attention_beyond`) read attention maps. `python -m experiments.reach` (experiments.reach)
writes the shipped curves; alibi_viz.results.reach reads them back and writes the sentences.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from alibi_viz.errors import AlibiVizError
from alibi_viz.i18n import _, number
from alibi_viz.models.attention import attention_maps_of_ids, mean_mass_beyond, special_prefix
from alibi_viz.models.behaviour import twin_next_attention
from alibi_viz.models.scoring import nll_in_batches, passage_perplexity, passage_starts
from alibi_viz.results.reach import ReachResult

COPY_SPAN = 16  # tokens in each planted span
COPY_PREFIX = 16  # held-out tokens before the first copy, so it is read in context too
COPY_SAMPLES = 16  # spans per distance
# The last distance keeps prefix + distance + span at 4,096 tokens, the longest input the
# shipped GPT-2 models' position tables allow.
COPY_DISTANCES = (16, 32, 64, 128, 256, 512, 1024, 2048, 4064)
REACH_CONTEXTS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
# A reach curve scores REACH_PASSAGES passages of REACH_PASSAGE_TOKENS targets spread evenly
# through the stream: passages far apart are close to independent, so their per-passage means
# give a t interval with REACH_PASSAGES - 1 degrees of freedom, which adjacent chunks of one
# run of tokens do not. The cost is the scored tokens', however they are cut.
REACH_PASSAGES = 16
REACH_PASSAGE_TOKENS = 64
REACH_TOKENS = REACH_PASSAGES * REACH_PASSAGE_TOKENS  # scored tokens of a reach curve
TOKENS_PER_BATCH = 16384  # input tokens per forward pass


@dataclass
class CopyResult:
    """Loss on a planted span and on its repeat, per distance (nats per token).

    distances: (D,) int. first, repeat, control: (D,) mean nll over the span's tokens and
    samples, on the first copy, on the repeat, and on the span at the repeat's place when the
    first copy is replaced by other text. gain: control - repeat (positive: the earlier copy
    helps). gain_sd: spread (sd) of the per-sample gain. span, samples: the setting.
    """

    distances: np.ndarray
    first: np.ndarray
    repeat: np.ndarray
    control: np.ndarray
    gain: np.ndarray
    gain_sd: np.ndarray
    span: int
    samples: int

    def as_dict(self) -> dict:
        return {"distances": self.distances.tolist(), "first": np.round(self.first, 4).tolist(),
                "repeat": np.round(self.repeat, 4).tolist(),
                "control": np.round(self.control, 4).tolist(),
                "gain": np.round(self.gain, 4).tolist(),
                "gain_sd": np.round(self.gain_sd, 4).tolist(),
                "span": self.span, "samples": self.samples}


def copy_sequences(stream: np.ndarray, distance: int, span: int = COPY_SPAN,
                   samples: int = COPY_SAMPLES, prefix: int = COPY_PREFIX,
                   seed: int = 0, longest: int | None = None
                   ) -> tuple[torch.Tensor, torch.Tensor, int, int]:
    """`samples` token sequences, each: prefix | span | filler | span. The two spans are the
    same piece of held-out text taken from elsewhere in the stream and planted at both places,
    `distance` tokens apart, as the copy curriculum plants them in training; prefix and filler
    are the held-out text that surrounds them. So the first copy is as unexpected as the
    second, and only the second can be copied. The controls are the same sequences with the
    first copy replaced by another piece of held-out text. Returns (ids (samples, T), controls
    (samples, T), first start, repeat start); T = prefix + distance + span. The draws depend
    only on `seed` and `longest` (default T), so calls with the same `longest` plant the same
    spans at every distance.
    """
    if distance < span:
        raise AlibiVizError(_("distance ({distance}) must be at least the span ({span}).").format(
            distance=distance, span=span))
    length = prefix + distance + span
    longest = max(length, longest or length)
    if stream.size < longest + span + 1:
        raise AlibiVizError(_("Need at least {needed} held-out tokens, have {have}.").format(
            needed=number(longest + span + 1), have=number(stream.size)))
    rng = np.random.default_rng(seed)
    starts = rng.integers(0, stream.size - longest, samples)
    sources = rng.integers(0, stream.size - span, samples)
    others = rng.integers(0, stream.size - span, samples)
    ids = np.stack([stream[a:a + length] for a in starts]).copy()  # (samples, T)
    pieces = np.stack([stream[s:s + span] for s in sources])  # (samples, span)
    ids[:, prefix + distance:] = pieces  # the repeat
    controls = ids.copy()
    ids[:, prefix:prefix + span] = pieces  # the first copy
    controls[:, prefix:prefix + span] = np.stack([stream[o:o + span] for o in others])
    return (torch.from_numpy(ids.astype(np.int64)), torch.from_numpy(controls.astype(np.int64)),
            prefix, prefix + distance)


def copy_at_distance(model, stream: np.ndarray, distances: Sequence[int] = COPY_DISTANCES,
                     span: int = COPY_SPAN, samples: int = COPY_SAMPLES, seed: int = 0,
                     tokens_per_batch: int = TOKENS_PER_BATCH,
                     progress: Callable[[int, int], None] | None = None) -> CopyResult:
    """Loss on the first copy, the repeat and the control of planted spans at each distance.

    The same spans (same seed) at every distance. A token is scored as the prediction made
    for it, so the first token of each copy counts too (the repeat's first token cannot be
    known from the copy; it is part of what a reader would pay). progress(done, total) after
    each distance.
    """
    distances = [int(d) for d in distances]
    longest = COPY_PREFIX + max(distances) + span
    first, repeat, control, gain, sd = [], [], [], [], []
    for k, d in enumerate(distances):
        ids, controls, a, b = copy_sequences(stream, d, span, samples, seed=seed, longest=longest)
        # (2 samples, T - 1): the sequences, then their controls; nll[:, t - 1] is token t
        nll = nll_in_batches(model, torch.cat([ids, controls]), tokens_per_batch)
        f = nll[:samples, a - 1:a - 1 + span].mean(dim=1).double()
        r = nll[:samples, b - 1:b - 1 + span].mean(dim=1).double()
        c = nll[samples:, b - 1:b - 1 + span].mean(dim=1).double()
        first.append(f.mean().item())
        repeat.append(r.mean().item())
        control.append(c.mean().item())
        gain.append((c - r).mean().item())
        sd.append((c - r).std().item() if samples > 1 else 0.0)
        if progress is not None:
            progress(k + 1, len(distances))
    return CopyResult(np.array(distances), np.array(first), np.array(repeat), np.array(control),
                      np.array(gain), np.array(sd), span, samples)


def context_reach(model, stream: np.ndarray, contexts: Sequence[int] = REACH_CONTEXTS,
                  passages: int = REACH_PASSAGES, tokens: int = REACH_PASSAGE_TOKENS,
                  progress: Callable[[int, int], None] | None = None) -> ReachResult:
    """Loss of the same held-out targets given at most c tokens of context, for each c:
    `passages` passages of `tokens` targets each, spread evenly through `stream`
    (scoring.passage_starts), each target preceded by max(contexts) - 1 ids of its own passage.

    Each target sees between c - c // 16 and c tokens before it (exactly c up to c = 15): for
    context c the targets are scored c // 16 + 1 at a time, in sliding windows of c tokens
    (scoring.perplexity's sliding protocol, stride c // 16 + 1), so no scored token is past
    position c. Exact windows of c + 1 tokens per target cost a forward pass each, about 60x
    more at c = 1,024. The targets are the same at every c. progress(done, total) per context.
    """
    contexts = sorted(int(c) for c in contexts)
    if not contexts or contexts[0] < 1:
        raise AlibiVizError(_("contexts must be positive token counts."))
    top = contexts[-1]
    starts = passage_starts(stream.size, passages, tokens, max_length=top)
    per_passage = []  # (C, P)
    for k, c in enumerate(contexts):
        out = passage_perplexity(model, stream, c, starts, tokens=tokens, stride=c // 16 + 1,
                                 max_length=top)
        per_passage.append(out["chunk_nll"])
        if progress is not None:
            progress(k + 1, len(contexts))
    nll = np.array(per_passage, dtype=np.float64)
    return ReachResult(np.array(contexts), nll.mean(axis=1), nll.std(axis=1, ddof=1),
                       passages * tokens, passage_nll=nll)


def copy_attention(model, ids, first: int, repeat: int, span: int) -> np.ndarray:
    """Per (layer, head), the mean attention from each token of the repeat (positions
    repeat .. repeat + span - 2) to the token after its twin in the first copy (first + t + 1):
    what an induction head does to copy. ids: one sequence (T,). Returns (layers, heads)."""
    queries = repeat + np.arange(span - 1)
    return np.stack([twin_next_attention(m, queries, repeat - first).mean(axis=1)
                     for m in attention_maps_of_ids(model, ids)])  # (layers, heads)


def plant_span(tokenizer, text: str, span: str, max_tokens: int = 4096):
    """A user's own copy test: span + text + span, token ids with the special prefix.

    Returns (ids (T,), first, repeat, span_tokens): the span's first token sits at `first`
    and at `repeat` (repeat - first is the distance), so `copy_attention` and a loss
    comparison can use them. Raises AlibiVizError for an empty span or text, or a sequence
    longer than max_tokens.
    """
    if not isinstance(span, str) or not span.strip():
        raise AlibiVizError(_("Type a span of text to plant (a few words)."))
    if not isinstance(text, str) or not text.strip():
        raise AlibiVizError(_("Type a text to put between the two copies."))
    prefix = special_prefix(tokenizer)
    span_ids = tokenizer(span, add_special_tokens=False)["input_ids"]
    text_ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    ids = prefix + span_ids + text_ids + span_ids
    if len(ids) > max_tokens:
        raise AlibiVizError(_("Span + text + span is {n} tokens; keep it under {limit}.").format(
            n=number(len(ids)), limit=number(max_tokens)))
    first = len(prefix)
    return np.array(ids), first, first + len(span_ids) + len(text_ids), len(span_ids)


def span_losses(model, ids, first: int, repeat: int, span: int) -> tuple[float, float]:
    """Mean loss (nats per token) on the first copy of a planted span and on its repeat."""
    nll = nll_in_batches(model, torch.as_tensor(np.asarray(ids), dtype=torch.long)[None],
                       TOKENS_PER_BATCH)[0]  # (T - 1,): nll[t - 1] is the loss on token t
    lo = max(first, 1)
    return (float(nll[lo - 1:first - 1 + span].mean()),
            float(nll[repeat - 1:repeat - 1 + span].mean()))


def copy_heads(model, stream: np.ndarray, distance: int, span: int = COPY_SPAN
               ) -> tuple[np.ndarray, tuple[float, float, float]]:
    """Which heads copy one planted span of held-out text `distance` tokens back: the first
    sample of `copy_sequences(stream, distance, span, samples=1)`. Returns ((layers, heads)
    `copy_attention` on it, (loss on the first copy, on the repeat, on the control's span at
    the repeat's place), nats per token)."""
    ids, controls, first, repeat = copy_sequences(stream, distance, span, samples=1)
    values = copy_attention(model, ids[0].numpy(), first, repeat, span)
    first_loss, repeat_loss = span_losses(model, ids[0].numpy(), first, repeat, span)
    _first, control_loss = span_losses(model, controls[0].numpy(), first, repeat, span)
    return values, (first_loss, repeat_loss, control_loss)


@dataclass
class SpanCopy:
    """A user's own planted span, measured (`own_span`). span: its tokens; distance: repeat
    start - first start; first, repeat: mean loss on each copy (nats per token); heads:
    (layers, heads) `copy_attention`, None for a one-token span (no token after a twin)."""

    span: int
    distance: int
    first: float
    repeat: float
    heads: np.ndarray | None


def own_span(model, tokenizer, text: str, span: str) -> SpanCopy:
    """The loss on both copies of `span` planted before and after `text` (`plant_span`), and
    which heads copy it. Raises AlibiVizError as `plant_span` does."""
    ids, first, repeat, n = plant_span(tokenizer, text, span)
    first_loss, repeat_loss = span_losses(model, ids, first, repeat, n)
    heads = copy_attention(model, ids, first, repeat, n) if n > 1 else None
    return SpanCopy(n, repeat - first, first_loss, repeat_loss, heads)


def attention_beyond(maps, distance: int) -> np.ndarray:
    """Per (layer, head), the mean share of attention that the queries past `distance` give
    keys more than `distance` tokens back (`heads.mean_mass_beyond`), from one text's maps
    (one (heads, T, T) array per layer). Returns (layers, heads)."""
    return np.array([[mean_mass_beyond(head, distance) for head in layer] for layer in maps])
