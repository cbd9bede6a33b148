"""Scoring a causal LM on text: the next-token loss, and the per-token perplexity of the
extrapolation experiments at one window length under either protocol the ALiBi paper
distinguishes (Press et al. 2021, section 4 and appendix B):

  nonoverlapping  the text is cut into consecutive windows of `length` tokens and every token
                  is scored. Tokens early in a window see little context (the "early token
                  curse"), so this understates what a long window gives.
  sliding         windows of `length` tokens advance by `stride` tokens and only the last
                  `stride` tokens of each window are scored, so every scored token sees between
                  length - stride + 1 and length tokens of context (the paper slid by one token,
                  stride 1, so that each sees exactly `length`; a larger stride is cheaper).
                  More expensive: length / stride forward tokens per scored token.

`next_token_nll` is the one place a model's predictions are scored against its text: training
(`experiments.train.lm_loss`), the perplexity here (the lab's live runs and `python -m
experiments.evaluate`), the copy and context-reach measurements (`models.reach`) and head
ablation all use it. Perplexity is exp(mean negative log-likelihood per token); tokens are
bytes in the shipped models.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from alibi_viz import data
from alibi_viz.alibi import check_int, check_seq_len
from alibi_viz.errors import AlibiVizError
from alibi_viz.i18n import _, number
from alibi_viz.results.evaluation import CHUNKS, DEFAULT_STRIDE, LENGTHS, PROTOCOLS

NONOVERLAPPING_TOKENS = 16384  # 4 windows at 4096
SLIDING_TOKENS = 512  # scored tokens of a one-passage sliding run (live runs, rescale)
# The shipped sliding-window results score PASSAGES disjoint passages spread evenly through each
# held-out text, PASSAGE_TOKENS targets each, and take one mean nll per passage: passages far
# apart (other documents) are close to independent, which adjacent chunks of one passage are not.
# Each scored token costs length / stride forward tokens, so the cost grows with the tokens,
# not with how many passages they are cut into.
PASSAGES = 16
PASSAGE_TOKENS = 64
TOKENS_PER_BATCH = 4096  # windows of one length batched up to this many input tokens
LIVE_CELL_BUDGET = 2048 * 4096  # attention cells (query x key) a live run may compute
LIVE_MAX_TOKENS = 4096          # scored tokens of a live run, whatever the length



def check_protocol(protocol: str) -> str:
    """`protocol` if it is one of PROTOCOLS, else AlibiVizError naming them."""
    if protocol not in PROTOCOLS:
        raise AlibiVizError(_("protocol must be one of {choices}, got {value}.").format(
            choices=", ".join(PROTOCOLS), value=repr(protocol)))
    return protocol

def next_token_nll(model, windows: torch.Tensor) -> torch.Tensor:
    """Negative log-likelihood (nats, float32) of each next token of `windows` (B, T + 1):
    the model reads windows[:, :-1] and is scored on windows[:, 1:]. Returns (B, T).

    Gradients flow when called outside `torch.inference_mode()` (training)."""
    logits = model(input_ids=windows[:, :-1]).logits.float()  # (B, T, V)
    return F.cross_entropy(logits.transpose(1, 2), windows[:, 1:], reduction="none")


def nll_in_batches(model, inputs: torch.Tensor, tokens_per_batch: int) -> torch.Tensor:
    """`next_token_nll` of every row of `inputs` (N, T) -> (N, T - 1), in eval mode without
    gradients, in batches of at most tokens_per_batch input tokens (at least one row)."""
    model.eval()
    device = next(model.parameters()).device
    rows = max(1, tokens_per_batch // inputs.shape[1])
    out = []
    with torch.inference_mode():
        for start in range(0, inputs.shape[0], rows):
            out.append(next_token_nll(model, inputs[start:start + rows].to(device)).cpu())
    return torch.cat(out)


def _windows(n_targets: int, length: int, protocol: str, stride: int, score_from: int):
    """(input_start, input_end, scored) per window, for a stream whose targets are positions
    1 .. n_targets. Window [a, b) reads ids[a:b], predicts ids[a+1:b+1] and scores the last
    `scored` of those predictions."""
    windows = []
    if protocol == "nonoverlapping":
        for a in range(0, n_targets, length):
            b = min(a + length, n_targets)
            windows.append((a, b, b - a))
        return windows
    # sliding: targets score_from .. n_targets, `stride` per window, each window as long as
    # the text before it allows (at most `length`)
    first = score_from
    while first <= n_targets:
        last = min(first + stride - 1, n_targets)  # targets first..last, predicted by inputs
        b = last  # input end (exclusive) so that the last prediction is target `last`
        a = max(0, b - length)
        windows.append((a, b, last - first + 1))
        first = last + 1
    return windows


def perplexity(model, token_ids: Sequence[int] | np.ndarray | torch.Tensor, length: int,
               protocol: str = "nonoverlapping", stride: int = DEFAULT_STRIDE,
               score_from: int = 1, max_tokens: int | None = None,
               tokens_per_batch: int = TOKENS_PER_BATCH,
               progress: Callable[[int, int], None] | None = None) -> dict:
    """Per-token perplexity of a causal LM on one token stream at one window length.

    token_ids: 1-D ids, shape (n,). Targets are positions 1 .. n - 1 (each predicted from the
        tokens before it, within its window); max_tokens keeps only the first max_tokens + 1 ids.
    length: window length in tokens (the model's context at evaluation).
    protocol: "nonoverlapping" (all targets scored, windows cut at multiples of `length`) or
        "sliding" (targets score_from .. n - 1, `stride` per window, each seeing up to `length`
        tokens; pass score_from >= the longest length you compare so every window is full).
    progress: called as progress(windows_done, windows_total) after each batch.
    Returns {"ppl", "nll" (mean, nats per token), "tokens" (targets scored), "windows",
    "chunk_nll" (mean nll of each of `CHUNKS` contiguous runs of the scored targets, in order:
    the spread over disjoint pieces of text that `confidence_interval` turns into an interval)}.
    Runs under torch.inference_mode(); batches windows of equal length, up to
    `tokens_per_batch` input tokens per forward pass.
    """
    check_protocol(protocol)
    ids = torch.as_tensor(np.asarray(token_ids), dtype=torch.long).reshape(-1)
    if max_tokens is not None:
        ids = ids[: max_tokens + 1]
    n_targets = ids.numel() - 1
    if length < 1 or stride < 1:
        raise AlibiVizError(_("length and stride must be positive, got {length} and "
                              "{stride}.").format(length=length, stride=stride))
    if protocol == "sliding" and not 1 <= score_from <= n_targets:
        raise AlibiVizError(_("score_from ({score_from}) must be in [1, {n}].").format(
            score_from=score_from, n=n_targets))
    if n_targets < 1:
        raise AlibiVizError(_("Need at least two tokens to score one prediction."))
    stride = min(stride, length)
    windows = _windows(n_targets, length, protocol, stride, score_from)

    model.eval()
    device = next(model.parameters()).device
    scored_nll, done = [], 0  # per-target nll, in target order
    with torch.inference_mode():
        i = 0
        while i < len(windows):
            width = windows[i][1] - windows[i][0]
            j = i  # gather a batch of windows of the same input width
            while (j < len(windows) and windows[j][1] - windows[j][0] == width
                   and (j - i + 1) * width <= max(tokens_per_batch, width)):
                j += 1
            batch = windows[i:j]
            # each window's inputs and the token after its last: (B, width + 1)
            spans = torch.stack([ids[a : b + 1] for a, b, _scored in batch]).to(device)
            nll = next_token_nll(model, spans)  # (B, width)
            for row, (_start, _end, scored) in enumerate(batch):
                scored_nll.append(nll[row, width - scored :].double())
            done += len(batch)
            if progress is not None:
                progress(done, len(windows))
            i = j
    per_token = torch.cat(scored_nll).numpy()  # (tokens,)
    mean = float(per_token.mean())
    chunks = [float(c.mean()) for c in np.array_split(per_token, min(CHUNKS, per_token.size))]
    return {"ppl": math.exp(mean), "nll": mean, "tokens": int(per_token.size),
            "windows": len(windows), "chunk_nll": chunks}


def evaluation_stream(n_tokens: int, kind: str = "python") -> np.ndarray:
    """The first n_tokens + 1 ids of the shipped held-out text of `kind` (targets 1 ..
    n_tokens)."""
    stream = data.heldout_ids(kind, max_tokens=n_tokens + 1)
    if stream.size < n_tokens + 1:
        raise AlibiVizError(_("The held-out split has only {n} tokens.").format(
            n=number(stream.size)))
    return stream


def protocol_plan(protocol: str, tokens: int, max_length: int = max(LENGTHS)) -> dict:
    """The perplexity() arguments that make every length up to max_length score the same
    `tokens` targets: nonoverlapping scores targets 1 .. tokens; sliding scores the `tokens`
    targets after the first max_length tokens, so every window is full (a live run at one
    length passes max_length=length)."""
    if check_protocol(protocol) == "nonoverlapping":
        return {"max_tokens": tokens, "score_from": 1}
    return {"max_tokens": max_length - 1 + tokens, "score_from": max_length}  # sliding


def evaluate_length(model, length: int, protocol: str = "nonoverlapping",
                    tokens: int | None = None, stride: int = DEFAULT_STRIDE,
                    max_length: int = max(LENGTHS), progress=None, kind: str = "python") -> dict:
    """One cell of extrapolation-<kind>.json, computed live: perplexity of `model` on the
    held-out text of `kind` at `length` under `protocol`, on the same targets as `python -m
    experiments.evaluate` (tokens defaults to NONOVERLAPPING_TOKENS or SLIDING_TOKENS). Returns
    perplexity()'s dict.
    """
    if tokens is None:
        tokens = NONOVERLAPPING_TOKENS if protocol == "nonoverlapping" else SLIDING_TOKENS
    plan = protocol_plan(protocol, tokens, max_length)
    stream = evaluation_stream(plan["max_tokens"], kind)
    return perplexity(model, stream, length, protocol, stride=stride, progress=progress, **plan)


def passage_starts(stream_size: int, passages: int = PASSAGES, tokens: int = PASSAGE_TOKENS,
                   max_length: int = max(LENGTHS)) -> list[int]:
    """Where each passage starts in a stream of `stream_size` ids: `passages` disjoint spans of
    max_length + tokens ids (max_length - 1 of context, then the `tokens` targets), evenly
    spread from the stream's start to its end. AlibiVizError when they do not fit disjoint."""
    span = max_length + tokens
    if passages < 1 or tokens < 1:
        raise AlibiVizError(_("Need at least one passage of at least one token."))
    if passages * span > stream_size:
        raise AlibiVizError(_("The held-out split has only {n} tokens.").format(
            n=number(stream_size)))
    last = stream_size - span
    return [round(i * last / max(1, passages - 1)) for i in range(passages)]


def passage_perplexity(model, stream: np.ndarray, length: int, starts: Sequence[int],
                       tokens: int = PASSAGE_TOKENS, stride: int = DEFAULT_STRIDE,
                       max_length: int = max(LENGTHS),
                       progress: Callable[[int, int], None] | None = None) -> dict:
    """Sliding-window perplexity at `length` over disjoint passages of `stream`: in each, the
    `tokens` targets that follow max_length - 1 ids of its own text, so every length up to
    max_length scores the same targets with full windows. Returns perplexity()'s dict, with
    "chunk_nll" holding one mean nll per passage (in `starts` order) and "passages"."""
    per_passage, windows = [], 0
    for k, start in enumerate(starts):
        out = perplexity(model, stream[start : start + max_length + tokens], length, "sliding",
                         stride=stride, score_from=max_length)
        per_passage.append(out["nll"])
        windows += out["windows"]
        if progress is not None:
            progress(k + 1, len(starts))
    mean = float(np.mean(per_passage))  # equal tokens per passage: the mean over all targets
    return {"ppl": math.exp(mean), "nll": mean, "tokens": tokens * len(starts),
            "windows": windows, "chunk_nll": per_passage, "passages": len(starts)}


def live_token_cap(length: int, protocol: str = "nonoverlapping", stride: int = 64,
                   cell_budget: int = LIVE_CELL_BUDGET, max_tokens: int = LIVE_MAX_TOKENS) -> int:
    """Most tokens a live run scores at `length`, so its attention costs about `cell_budget`
    query x key cells (one 2,048-token window pair; eager attention time grows with cells).

    nonoverlapping: each scored token costs `length` cells; sliding: each window of `length`
    tokens costs length^2 cells and scores `stride` tokens. Never less than one full window
    (`length` tokens, or `stride` for sliding: the length is the point of the run) and never
    more than `max_tokens`.
    """
    length = check_seq_len(length, "length")
    stride = min(check_int(stride, "stride", 1, 1 << 24), length)
    if check_protocol(protocol) == "nonoverlapping":
        cap = cell_budget // length
        return int(min(max(cap, length), max(max_tokens, length)))
    windows = max(1, cell_budget // (length * length))  # sliding
    return int(min(windows * stride, max_tokens))
