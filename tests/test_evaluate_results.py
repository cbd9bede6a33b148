"""Reading the shipped results: summaries computed from the numbers, tables, live-run plans."""

import math

import numpy as np
import pytest
from fake_results import RESULTS

from alibi_viz.models.scoring import LIVE_CELL_BUDGET, live_token_cap, perplexity, protocol_plan
from alibi_viz.results.evaluation import (
    confidence_interval,
    extrapolation_summary,
    paired_ratio_interval,
    results_table,
)
from alibi_viz.tiny_models import tiny_model


def test_summary_names_rope_best_in_distribution_when_it_is():
    """At the training length RoPE (3.1) is named best, though ALiBi wins at the longest length."""
    sentences = extrapolation_summary(RESULTS, "nonoverlapping")
    assert "lowest perplexity is RoPE's" in sentences[0]
    assert sentences[-1] == ("Lowest perplexity by length (several models where they are within "
                             "the paired 95% interval of the lowest): RoPE at 128, ALiBi at "
                             "256-512.")


def test_table_has_one_row_per_model_and_protocol():
    """Three models x two protocols give six rows carrying the stored values."""
    rows = results_table(RESULTS)
    assert len(rows) == 6
    assert rows[0] == {"model": "ALiBi", "protocol": "nonoverlapping", "128": 3.2, "256": 3.1,
                       "512": 3.05}


# ----------------------------------------------------------------------------- live runs

@pytest.mark.parametrize("length", [128, 512, 1024, 2048, 4096])
@pytest.mark.parametrize("protocol", ["nonoverlapping", "sliding"])
def test_live_cap_is_at_least_one_window_and_within_budget(length, protocol):
    """The cap scores at least one full window and, above that, costs at most the cell budget."""
    cap = live_token_cap(length, protocol, stride=64)
    one_window = length if protocol == "nonoverlapping" else 64
    assert cap >= one_window
    cells = cap * length if protocol == "nonoverlapping" else math.ceil(cap / 64) * length**2
    assert cap == one_window or cells <= LIVE_CELL_BUDGET


@pytest.mark.parametrize("protocol", ["nonoverlapping", "sliding"])
def test_protocol_plan_at_one_length_scores_the_requested_tokens(protocol):
    """scoring.perplexity with protocol_plan(max_length=length)'s arguments scores exactly the requested targets."""
    model = tiny_model("bloom")
    ids = np.arange(3, 3 + 200) % 250 + 3
    out = perplexity(model, ids, 32, protocol, stride=16,
                     **protocol_plan(protocol, 48, max_length=32))
    assert out["tokens"] == 48




def test_confidence_interval_is_the_t_interval_of_the_mean_nll():
    """The interval is exp of the mean chunk nll +- t(3) x its standard error, with t(3) =
    3.182 from a printed table (tests/test_statistics.py works the numbers out by hand)."""
    chunks = [1.0, 1.2, 0.8, 1.1]
    se = np.std(chunks, ddof=1) / math.sqrt(len(chunks))
    low, high = confidence_interval(chunks)
    assert low == pytest.approx(math.exp(np.mean(chunks) - 3.182 * se), rel=1e-4)
    assert high == pytest.approx(math.exp(np.mean(chunks) + 3.182 * se), rel=1e-4)


def test_confidence_interval_covers_the_true_perplexity_95_percent_of_the_time():
    """Over 4,000 draws of 6 normal chunk nlls (so log-normal chunk perplexities), the interval
    holds the true perplexity exp(mu) in 93-97% of draws; a z interval (1.96) would cover
    P(|t_5| < 1.96) = 89.3%, sd / chunks far less, a one-sd interval 64%."""
    mu, sigma, chunks, draws = 1.3, 0.4, 6, 4000
    samples = np.random.default_rng(0).normal(mu, sigma, (draws, chunks))
    covered = [low <= math.exp(mu) <= high
               for low, high in (confidence_interval(sample) for sample in samples)]
    assert 0.93 <= np.mean(covered) <= 0.97


def test_paired_interval_is_tight_when_one_model_is_uniformly_better():
    """Chunks that differ by a constant 0.1 nats give a ratio e^0.1 with a zero-width interval,
    however much the chunks themselves vary."""
    a = [1.0, 2.0, 0.5, 3.0]
    ratio, low, high = paired_ratio_interval(a, [x - 0.1 for x in a])
    assert ratio == pytest.approx(math.exp(0.1)) and low == pytest.approx(high)


def test_the_lesson_compares_at_8x_when_evaluated_there_else_at_the_longest():
    """8 x the training length when the results hold it; the longest length otherwise."""
    from alibi_viz.results.evaluation import comparison_length

    assert comparison_length({"lengths": [128, 256, 1024, 4096]}, 128) == 1024
    assert comparison_length({"lengths": [128, 256, 512]}, 128) == 512


def test_useful_context_finds_the_last_significant_gain_not_the_first_flat_step():
    """Sliding chunks where 512 is significantly better than 128 but, through noise, not than
    256: the last significant gain is 128 -> 512, and "no longer window is significantly better"
    is said from 512 on. The earlier rule (the first length no later one beats) stopped at
    256, before the gain."""
    from alibi_viz.results.evaluation import context_use_sentence, useful_context

    rng = np.random.default_rng(0)
    base = rng.uniform(1.0, 2.0, 16)
    chunks = {128: base, 256: base - 0.02 + rng.normal(0, 0.2, 16), 512: base - 0.03,
              1024: base - 0.03}
    results = {"lengths": list(chunks), "models": {"alibi": {
        "train_seq_len": 128,
        "perplexity": {"sliding": {str(n): float(np.exp(c.mean())) for n, c in chunks.items()}},
        "chunk_nll": {"sliding": {str(n): c.tolist() for n, c in chunks.items()}},
        "tokens": {"sliding": {str(n): 512 for n in chunks}}}}}
    use = useful_context(results, "alibi")
    assert use.last_gain == (128, 512) and use.flat_from == 512
    sentence = context_use_sentence(use)
    assert ("from 512 tokens on no longer window is better than a shorter one by 0.1% or more "
            "with significance") in sentence
    assert "its last significant gain" not in sentence  # the gain starts at the training length
