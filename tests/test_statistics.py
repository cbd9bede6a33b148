"""The statistics behind the printed intervals and tests, against references worked out by
hand or from scipy's own tests, and the passages the sliding-window results score."""

import math

import numpy as np
import pytest
import torch
from scipy import stats

from alibi_viz.errors import AlibiVizError
from alibi_viz.models.scoring import passage_perplexity, passage_starts
from alibi_viz.statistics import holm, mean_interval, p_below, t_quantile
from alibi_viz.tiny_models import tiny_model


def test_t_quantiles_are_the_printed_table():
    """Student's t, two-sided 95%, from a printed table (3 decimals): 12.706 for 1 degree of
    freedom, 3.182 for 3, 2.131 for 15, 2.040 for 31; the normal 1.96 only in the limit."""
    for df, table in ((1, 12.706), (3, 3.182), (15, 2.131), (31, 2.040)):
        assert t_quantile(df) == pytest.approx(table, abs=5e-4)
    assert t_quantile(100_000) == pytest.approx(1.960, abs=5e-4)


def test_mean_interval_is_worked_out_by_hand():
    """[1.0, 1.2, 0.8, 1.1]: mean 1.025, squares of the deviations 0.0875, sd sqrt(0.0875 / 3)
    = 0.17078, standard error 0.08539, half-width 3.182 x 0.08539 = 0.27175."""
    mean, low, high = mean_interval([1.0, 1.2, 0.8, 1.1])
    assert mean == pytest.approx(1.025)
    assert (low, high) == pytest.approx((1.025 - 0.27175, 1.025 + 0.27175), abs=2e-4)


def test_mean_interval_covers_the_true_mean_95_percent_of_the_time_with_five_units():
    """Over 4,000 draws of 5 normal values the t interval holds the mean in 93-97% of draws; a
    z interval (1.96) would cover P(|t_4| < 1.96) = 87.9%, 10 standard errors outside."""
    samples = np.random.default_rng(0).normal(1.3, 0.4, (4000, 5))
    covered = [low <= 1.3 <= high for _m, low, high in map(mean_interval, samples)]
    assert 0.93 <= np.mean(covered) <= 0.97


def test_p_below_is_scipys_one_sided_t_test():
    """The p-value is scipy.stats.ttest_1samp's with alternative="less"."""
    values = np.random.default_rng(1).normal(-0.01, 0.02, 16)
    expected = stats.ttest_1samp(values, math.log(0.999), alternative="less").pvalue
    assert p_below(values, math.log(0.999)) == pytest.approx(expected, rel=1e-9)


def test_holm_is_worked_out_by_hand():
    """At 5%, sorted p-values are compared with 0.05/4, 0.05/3, 0.05/2 and 0.05/1 in turn.
    0.001, 0.012, 0.02, 0.04 pass every step, so all four fall (Bonferroni, 0.0125 each, keeps
    only two). 0.001, 0.011, 0.026, 0.03: 0.026 > 0.025 stops the procedure, so 0.03 stands
    although it is below 0.05."""
    assert holm([0.012, 0.02, 0.04, 0.001]) == [True, True, True, True]
    assert holm([0.001, 0.03, 0.026, 0.011]) == [True, False, False, True]
    assert holm([0.2, 0.5]) == [False, False]


def test_an_interval_needs_two_units():
    with pytest.raises(AlibiVizError):
        mean_interval([1.0])


def test_passages_are_disjoint_and_spread_through_the_stream():
    starts = passage_starts(10_000, passages=5, tokens=64, max_length=512)
    assert starts[0] == 0 and starts[-1] == 10_000 - (512 + 64)
    assert all(b - a >= 512 + 64 for a, b in zip(starts, starts[1:], strict=False))
    with pytest.raises(AlibiVizError):
        passage_starts(2_000, passages=5, tokens=64, max_length=512)


def test_passage_perplexity_scores_each_target_with_exactly_its_window():
    """With stride 1 every scored target is predicted from exactly the `length` tokens before
    it: the reference runs the model on each such window and reads the last position."""
    model = tiny_model("bloom")
    stream = np.random.default_rng(2).integers(3, 60, 400)
    length, tokens, max_length = 8, 5, 16
    starts = passage_starts(stream.size, passages=3, tokens=tokens, max_length=max_length)
    out = passage_perplexity(model, stream, length, starts, tokens, stride=1,
                             max_length=max_length)
    per_passage = []
    with torch.inference_mode():
        for start in starts:
            nll = []
            for target in range(start + max_length, start + max_length + tokens):
                window = torch.as_tensor(stream[target - length:target])[None]
                logits = model(input_ids=window).logits[0, -1].float()
                nll.append(-torch.log_softmax(logits, -1)[stream[target]].item())
            per_passage.append(np.mean(nll))
    assert out["chunk_nll"] == pytest.approx(per_passage, abs=1e-5)
    assert out["tokens"] == 3 * tokens and out["passages"] == 3
    assert out["ppl"] == pytest.approx(math.exp(np.mean(per_passage)), rel=1e-6)
