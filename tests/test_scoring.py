"""The one next-token loss (models/scoring.py) against log-softmax read by hand, and the
training loss, perplexity and reach built on it."""

import math

import numpy as np
import torch

from alibi_viz.models import scoring
from alibi_viz.models.scoring import next_token_nll
from alibi_viz.tiny_models import tiny_model
from experiments import train


def reference_nll(model, windows: torch.Tensor) -> torch.Tensor:
    """-log p(next token) from each prefix's own forward, in float64: position t of row b is
    scored by a forward of windows[b, : t + 1] alone."""
    B, T1 = windows.shape
    out = torch.empty(B, T1 - 1, dtype=torch.float64)
    with torch.inference_mode():
        for b in range(B):
            for t in range(T1 - 1):
                logits = model(input_ids=windows[b : b + 1, : t + 1]).logits[0, -1].double()
                out[b, t] = -torch.log_softmax(logits, -1)[windows[b, t + 1]]
    return out


def test_next_token_nll_is_minus_log_p_of_each_next_token():
    model = tiny_model("bloom").eval()
    windows = torch.randint(3, model.config.vocab_size, (2, 9), generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        nll = next_token_nll(model, windows)
    assert nll.shape == (2, 8) and nll.dtype == torch.float32
    torch.testing.assert_close(nll.double(), reference_nll(model, windows), rtol=1e-5, atol=1e-5)


def test_training_loss_and_perplexity_are_its_mean():
    model = tiny_model("bloom").eval()
    ids = torch.randint(3, model.config.vocab_size, (33,), generator=torch.Generator().manual_seed(1))
    expected = reference_nll(model, ids[None]).mean().item()
    with torch.inference_mode():
        assert math.isclose(train.lm_loss(model, ids[None]).item(), expected, rel_tol=1e-5)
    scored = scoring.perplexity(model, ids.numpy(), length=32)
    assert scored["tokens"] == 32
    assert math.isclose(scored["nll"], expected, rel_tol=1e-5)
    assert math.isclose(scored["ppl"], math.exp(expected), rel_tol=1e-5)
    np.testing.assert_allclose(np.mean(scored["chunk_nll"]), expected, rtol=1e-5)


def test_nll_in_batches_scores_every_row_as_one_batch_would():
    """Batches of at most `tokens_per_batch` input tokens (here 2 rows of 9, then 1, or one row
    at a time when a row alone is longer) give each row the loss the reference reads."""
    model = tiny_model("bloom").train()  # it scores in eval mode whatever the model was in
    windows = torch.randint(3, model.config.vocab_size, (3, 9), generator=torch.Generator().manual_seed(2))
    expected = reference_nll(model.eval(), windows)
    model.train()
    for tokens_per_batch in (18, 4, 1 << 16):
        nll = scoring.nll_in_batches(model, windows, tokens_per_batch)
        assert nll.shape == (3, 8) and not nll.requires_grad
        torch.testing.assert_close(nll.double(), expected, rtol=1e-5, atol=1e-5)


def test_an_unknown_protocol_is_named_by_every_scorer():
    """perplexity, protocol_plan and live_token_cap each refuse a protocol that is not one of
    PROTOCOLS with the typed error that lists them."""
    import pytest

    from alibi_viz.errors import AlibiVizError

    model = tiny_model("bloom").eval()
    calls = [lambda: scoring.perplexity(model, np.arange(3, 40), 16, protocol="strided"),
             lambda: scoring.protocol_plan("strided", 64),
             lambda: scoring.live_token_cap(128, "strided")]
    for call in calls:
        with pytest.raises(AlibiVizError, match="nonoverlapping, sliding, got 'strided'"):
            call()
