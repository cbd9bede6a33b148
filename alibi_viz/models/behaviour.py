"""What does each head do? Behaviour scores for every layer and head, with fixed probe texts.

Each score is a number in [0, 1] (a share of attention, averaged over the queries where the
behaviour can show) except `content_kl` and the reaches, in nats and tokens. Definitions, for
one head's causal attention map A (rows: queries i, columns: keys j, rows sum to 1):

  previous_token  mean over i >= 1 of A[i, i - 1]: attention to the token just before.
  local           mean over i of sum_{i - j <= k} A[i, j]: mass within k tokens (k = 8).
  sink            mean over i >= 1 of A[i, 0]: attention parked on the first token. Measured
                  on natural text and, as a control, on one token repeated (Gu et al. 2025,
                  "When attention sink emerges": a sink that needs the first token to be
                  special vanishes there; for ALiBi the control is pure bias).
  content_kl      mean over i of KL(A[i] || bias-only attention), nats (`heads.head_statistics`):
                  how far content moves the head from what its slope alone would do (ALiBi).
  span90          the 90% span: mean over i of the smallest D with sum_{i - j <= D} A[i, j]
                  >= 0.9, tokens (`alibi.attention_span` is one query's, for the bias alone,
                  in closed form); beside it `bias_span`, the same for the bias-only attention.
  induction       on a random sequence of printable tokens repeated twice (r, r), mean over the
                  second copy of
                  the attention from position n + t to position t + 1, the token that followed
                  the current one last time (Olsson et al. 2022; TransformerLens's induction
                  score): a copying head.
  delimiter       on code with brackets and quotes, mean over closing ')', ']', '}' of the
                  attention to its matching opener.
  newline         on code, mean over each newline of the attention to the previous newline:
                  following lines and indentation.

`behaviour_scores` runs the model on the probes and returns a `HeadBehaviour`; `strongest`
names each head's most salient behaviour for the gallery.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from alibi_viz.alibi import implied_attention_map
from alibi_viz.errors import AlibiVizError
from alibi_viz.i18n import N_, _, number
from alibi_viz.models.attention import (
    attention_maps,
    attention_maps_of_ids,
    check_attention,
    head_statistics,
    special_prefix,
    token_labels,
)

LOCAL_K = 8
MIN_SHARE = 0.1  # a share of attention below this is not a head's behaviour
MIN_KL = 0.5  # nats: content moves a head less than this, it is not content-driven
INDUCTION_LENGTH = 48  # random tokens per copy in the induction probe
SINK_CONTROL_LENGTH = 64
BEHAVIOURS = ("previous_token", "local", "sink", "induction", "delimiter", "newline",
              "content")
# Names the app shows (translated where shown: `_(BEHAVIOUR_TITLES[name])`).
BEHAVIOUR_TITLES = {
    "previous_token": N_("previous token"), "local": N_("local (within 8)"),
    "sink": N_("first-token sink"), "induction": N_("copying"),
    "delimiter": N_("bracket matching"), "newline": N_("newline following"),
    "content": N_("content-driven"),
}
OPENERS = {")": "(", "]": "[", "}": "{"}
CODE_PROBE = '''def area(shape, scale=1.0):
    """Area of a shape {"kind": ..., "size": [w, h]}."""
    if shape["kind"] == "rect":
        w, h = shape["size"][0], shape["size"][1]
        return (w * h) * scale
    return sum([area(part, scale) for part in shape.get("parts", [])])
'''


# ----------------------------------------------------------------------------- scores of one map

def previous_token_score(attention) -> float:
    """Mean over queries i >= 1 of A[i, i - 1]."""
    a = check_attention(attention)
    return float(np.diagonal(a, offset=-1).mean()) if a.shape[0] > 1 else float("nan")


def local_score(attention, k: int = LOCAL_K) -> float:
    """Mean over queries of the attention within k tokens back (0 <= i - j <= k)."""
    a = check_attention(attention)
    band = np.tril(np.triu(a, k=-k))  # keeps -k <= j - i <= 0
    return float(band.sum(axis=1).mean())


def sink_score(attention) -> float:
    """Mean over queries i >= 1 of A[i, 0]."""
    a = check_attention(attention)
    return float(a[1:, 0].mean()) if a.shape[0] > 1 else float("nan")


def span90(attention) -> float:
    """The 90% span of a head's map: mean over queries of the smallest D with the attention on
    keys i - D .. i >= 0.9 (`alibi.attention_span` gives one query's for the bias alone)."""
    a = check_attention(attention)
    T = a.shape[0]
    spans = []
    for i in range(T):
        within = np.cumsum(a[i, : i + 1][::-1])  # mass on keys i, i-1, ..., 0
        spans.append(int(np.argmax(within >= 0.9 - 1e-6)))
    return float(np.mean(spans))


def twin_next_attention(attention, queries, period: int) -> np.ndarray:
    """What an induction head attends to: from each query q of a repeat, the attention to the
    token after q's twin `period` tokens earlier, A[..., q, q - period + 1]. attention
    (..., T, T); queries: positions of the repeat (each >= period). Returns (..., queries)."""
    queries = np.asarray(queries, dtype=int)
    return np.asarray(attention)[..., queries, queries - period + 1]


def induction_score(attention, period: int) -> float:
    """On a sequence whose second half repeats the first (period tokens each), mean over the
    second copy's queries n + t (t >= 0, n + t < T) of A[n + t, t + 1]
    (`twin_next_attention`); nan when there is no such query (period 1, or no repeat)."""
    a = check_attention(attention)
    if not 2 <= period < a.shape[0]:
        return float("nan")
    return float(twin_next_attention(a, np.arange(period, a.shape[0]), period).mean())


def matching_pairs(text: str) -> list[tuple[int, int]]:
    """(closer position, opener position) of every matched bracket pair in `text`, by
    character (the byte tokenizer's positions for ASCII text)."""
    stack, pairs = [], []
    for i, c in enumerate(text):
        if c in "([{":
            stack.append((c, i))
        elif c in OPENERS and stack and stack[-1][0] == OPENERS[c]:
            pairs.append((i, stack.pop()[1]))
    return pairs


def delimiter_score(attention, pairs) -> float:
    """Mean over (closer, opener) pairs of A[closer, opener]."""
    a = check_attention(attention)
    pairs = [(i, j) for i, j in pairs if i < a.shape[0]]
    return float(np.mean([a[i, j] for i, j in pairs])) if pairs else float("nan")


def newline_pairs(text: str) -> list[tuple[int, int]]:
    """(newline position, previous newline position) for every newline after the first."""
    lines = [i for i, c in enumerate(text) if c == "\n"]
    return list(zip(lines[1:], lines[:-1], strict=True))


def token_position(tokenizer, text: str, char: int) -> int:
    """Position (in the model's input, special prefix included) of the token that holds
    character `char` of `text`: the count of tokens of text[:char + 1], minus one. Exact for
    a byte tokenizer; for BPE it follows how the prefix is cut, which is close enough to
    find a bracket or a newline."""
    ids = tokenizer(text[: char + 1], add_special_tokens=False)["input_ids"]
    return len(special_prefix(tokenizer)) + len(ids) - 1


def token_pairs(tokenizer, text: str, pairs) -> list[tuple[int, int]]:
    """(query token, key token) for character pairs (later char, earlier char), dropping pairs
    that land in one token."""
    out = []
    for i, j in pairs:
        ti, tj = token_position(tokenizer, text, i), token_position(tokenizer, text, j)
        if ti > tj:
            out.append((ti, tj))
    return out


# ----------------------------------------------------------------------------- every head

@dataclass
class HeadBehaviour:
    """Scores of every head, each (layers, heads) float64 (NaN where undefined).

    scores: behaviour name -> array, for BEHAVIOURS except "content" (that is content_kl).
    sink_control: the sink score on one repeated token. span: span90 on the code probe;
    bias_span: the same for the bias-only attention (None without slopes). content_kl:
    KL from the bias-only attention (None without slopes). probes: probe name ("code",
    "induction") -> (token labels, maps: one (heads, T, T) per layer); pairs: "delimiter" and
    "newline" -> the (query, key) token positions scored on the code probe.
    """

    scores: dict
    sink_control: np.ndarray
    span: np.ndarray
    bias_span: np.ndarray | None
    content_kl: np.ndarray | None
    probes: dict = field(default_factory=dict)
    pairs: dict = field(default_factory=dict)

    def example(self, layer: int, head: int, behaviour: str) -> tuple[str, int]:
        """(probe name, query position) that best shows `behaviour` for this head: the
        bracket or newline it attends to most from, the middle of the repeated copy for
        induction, otherwise the last token of the code probe."""
        if behaviour == "induction":
            _tokens, maps = self.probes["induction"]
            return "induction", maps[layer].shape[-1] - 1
        _tokens, maps = self.probes["code"]
        a = maps[layer][head]
        if behaviour in ("delimiter", "newline") and self.pairs.get(behaviour):
            return "code", max(self.pairs[behaviour], key=lambda p: a[p[0], p[1]])[0]
        return "code", a.shape[-1] - 1

    def score_texts(self, layer: int, head: int) -> list[str]:
        """Head (layer, head)'s scores as the app shows them, one "name: value" each
        (behaviour titles and the content KL in the current language)."""
        texts = [f"{_(BEHAVIOUR_TITLES[b])}: {number(self.scores[b][layer, head], 2)}"
                 for b in BEHAVIOURS if b != "content"]
        if self.content_kl is not None:
            texts.append(_("content KL: {kl} nats").format(
                kl=number(self.content_kl[layer, head], 2)))
        return texts

    def values(self, behaviour: str) -> np.ndarray | None:
        """(layers, heads) scores of one behaviour: the content KL for "content" (None for a
        model without slopes), else its score."""
        return self.content_kl if behaviour == "content" else self.scores[behaviour]

    def best_head(self, behaviour: str) -> tuple[int, int] | None:
        """(layer, head), 0-based, with the highest score for `behaviour`, or None when no head
        has one (e.g. no bracket pair survives the tokenizer, or "content" without slopes)."""
        values = self.values(behaviour)
        if values is None or np.all(np.isnan(values)):
            return None
        layer, head = np.unravel_index(np.nanargmax(values), values.shape)
        return int(layer), int(head)

    def strongest(self) -> np.ndarray:
        """Per head, its most salient behaviour, object array (layers, heads) of names: the
        score with the largest value relative to that score's maximum over all heads (each
        behaviour judged against the heads that do it best), counting only scores of at least
        MIN_SHARE of the attention (MIN_KL nats for content) so that a behaviour no head really
        has names no head. "local" is the fallback: every head attends somewhere near."""
        names = [b for b in BEHAVIOURS if b != "content"]
        stack = [self.scores[b] for b in names]
        floors = [MIN_SHARE] * len(names)
        if self.content_kl is not None:
            names.append("content")
            stack.append(self.content_kl)
            floors.append(MIN_KL)
        rel = []
        for s, floor in zip(stack, floors, strict=True):
            s = np.nan_to_num(np.asarray(s, dtype=np.float64))
            top = s.max()
            rel.append(np.where(s >= floor, s / top, 0.0) if top > 0 else np.zeros_like(s))
        rel = np.stack(rel)  # (B, layers, heads)
        rel[names.index("local")] = np.maximum(rel[names.index("local")], 1e-9)
        return np.array(names, dtype=object)[rel.argmax(axis=0)]


def _bias_only(slope: float, T: int) -> np.ndarray:
    return implied_attention_map([slope], T)[0]


def behaviour_scores(model, tokenizer, slopes=None, seed: int = 0) -> HeadBehaviour:
    """Run `model` on the three probes and score every head.

    Probes: CODE_PROBE (local, previous token, sink, delimiters, newlines, 90% span, content),
    a random token sequence repeated twice (induction), and one token repeated (sink control).
    slopes: per-head slopes from the config (ALiBi models: `ModelInfo.config_slopes`) for
    content_kl and the bias-only span.
    """
    code = attention_maps(model, tokenizer, CODE_PROBE)
    pairs = token_pairs(tokenizer, CODE_PROBE, matching_pairs(CODE_PROBE))
    lines = token_pairs(tokenizer, CODE_PROBE, newline_pairs(CODE_PROBE))
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    vocab = [t for t in range(getattr(tokenizer, "vocab_size", 256)) if t not in special]
    printable = [t for t in vocab[:5000] if _printable(tokenizer, t)]
    vocab = printable if len(printable) >= INDUCTION_LENGTH else vocab
    if len(vocab) < 2:
        raise AlibiVizError(_("The tokenizer has too few ordinary tokens for the probes."))
    rng = np.random.default_rng(seed)
    chunk = rng.choice(vocab, size=INDUCTION_LENGTH, replace=len(vocab) < INDUCTION_LENGTH)
    repeated = attention_maps_of_ids(model, np.concatenate([chunk, chunk]))
    control = attention_maps_of_ids(model, np.full(SINK_CONTROL_LENGTH, chunk[0]))

    layers, heads = len(code.maps), code.maps[0].shape[0]
    scores = {b: np.full((layers, heads), np.nan) for b in BEHAVIOURS if b != "content"}
    sink_control = np.full((layers, heads), np.nan)
    span = np.full((layers, heads), np.nan)
    for layer in range(layers):
        for h in range(heads):
            a = code.maps[layer][h]
            scores["previous_token"][layer, h] = previous_token_score(a)
            scores["local"][layer, h] = local_score(a)
            scores["sink"][layer, h] = sink_score(a)
            scores["delimiter"][layer, h] = delimiter_score(a, pairs)
            scores["newline"][layer, h] = delimiter_score(a, lines)
            scores["induction"][layer, h] = induction_score(repeated[layer][h], INDUCTION_LENGTH)
            sink_control[layer, h] = sink_score(control[layer][h])
            span[layer, h] = span90(a)
    content_kl = bias_span = None
    if slopes is not None:
        slopes = np.asarray(slopes, dtype=np.float64)
        content_kl = head_statistics(code.maps, slopes=slopes).content_kl
        T = code.maps[0].shape[-1]
        by_slope = [span90(_bias_only(m, T)) for m in slopes.reshape(-1)]  # (heads,) or (L, H)
        bias_span = np.broadcast_to(np.reshape(by_slope, slopes.shape), (layers, heads)).copy()
    induction_tokens = token_labels(tokenizer, np.concatenate([chunk, chunk]).tolist())
    return HeadBehaviour(scores=scores, sink_control=sink_control, span=span,
                         bias_span=bias_span, content_kl=content_kl,
                         probes={"code": (code.tokens, code.maps),
                                 "induction": (induction_tokens, repeated)},
                         pairs={"delimiter": pairs, "newline": lines})


def _printable(tokenizer, token_id: int) -> bool:
    """Whether a token decodes to visible ASCII text: the induction probe draws its random
    tokens from these, so a model trained on text reads it as (odd) text."""
    text = tokenizer.decode([token_id])
    return bool(text.strip()) and text.isascii() and text.isprintable()
