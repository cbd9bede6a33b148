"""The next-token loss: the one place a causal LM's predictions are scored against its text.

Training (`train.lm_loss`), the perplexity of the extrapolation experiments
(`evaluate.perplexity`), the copy and context-reach measurements (`reach`) and head ablation
all score text with `next_token_nll`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def next_token_nll(model, windows: torch.Tensor) -> torch.Tensor:
    """Negative log-likelihood (nats, float32) of each next token of `windows` (B, T + 1):
    the model reads windows[:, :-1] and is scored on windows[:, 1:]. Returns (B, T).

    Gradients flow when called outside `torch.inference_mode()` (training)."""
    logits = model(input_ids=windows[:, :-1]).logits.float()  # (B, T, V)
    return F.cross_entropy(logits.transpose(1, 2), windows[:, 1:], reduction="none")
