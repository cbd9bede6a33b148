"""Slopes rescaled at inference (alibi_viz.models.slope_scale), against transformers' own bias."""

import threading

import numpy as np
import pytest
import torch
from transformers.models.bloom.modeling_bloom import build_alibi_tensor

from alibi_viz.errors import AlibiVizError
from alibi_viz.models.attention import attention_maps_of_ids
from alibi_viz.models.slope_scale import slope_scale
from alibi_viz.results.rescale import interpolation_scale
from alibi_viz.tiny_models import tiny_model

IDS = list(range(3, 3 + 24))


def measured_slopes(model) -> np.ndarray:
    """The slope each head applies, read from a model run on one repeated token: with equal
    content scores the attention of the last query decays as exp(-m d)."""
    maps = attention_maps_of_ids(model, [7] * 24)[0]  # layer 1: (heads, T, T)
    row = maps[:, -1, :]  # (heads, T): the last query
    return np.log(row[:, -1] / row[:, -2])


def test_scaled_slopes_are_the_scale_times_transformers_slopes():
    """Within slope_scale(model, s) every head's slope is s times the one transformers'
    build_alibi_tensor gives (a repeated token makes every content score equal)."""
    model = tiny_model("bloom", vocab_size=259)
    heads = model.config.n_head
    reference = build_alibi_tensor(torch.ones(1, 2), heads, torch.float64)[:, 0, 1].numpy()
    np.testing.assert_allclose(measured_slopes(model), reference, rtol=1e-4)
    with slope_scale(model, 0.25):
        np.testing.assert_allclose(measured_slopes(model), 0.25 * reference, rtol=1e-4)
    np.testing.assert_allclose(measured_slopes(model), reference, rtol=1e-4)


def test_a_scale_in_one_thread_does_not_reach_another():
    """Two sessions share one cached model: a scale set in one thread leaves the other's run
    as trained."""
    model = tiny_model("bloom", vocab_size=259)
    before = measured_slopes(model)
    seen, inside, done = {}, threading.Event(), threading.Event()

    def scaled():
        with slope_scale(model, 0.5):
            inside.set()
            done.wait(30)

    worker = threading.Thread(target=scaled)
    worker.start()
    inside.wait(30)
    seen["other"] = measured_slopes(model)
    done.set()
    worker.join()
    np.testing.assert_allclose(seen["other"], before, rtol=1e-6)


def test_interpolation_scale_is_train_length_over_length():
    assert interpolation_scale(128, 1024) == 0.125
    assert interpolation_scale(128, 64) == 1.0


def test_only_bloom_models_and_sane_scales():
    with pytest.raises(AlibiVizError):
        with slope_scale(tiny_model("gpt2", vocab_size=259), 0.5):
            pass
    with pytest.raises(AlibiVizError):
        with slope_scale(tiny_model("bloom", vocab_size=259), 0.0):
            pass


def test_shipped_sweep_at_s_1_is_the_shipped_evaluation():
    """The sweep's non-overlapping cells score the evaluation's own targets: at s = 1 each is
    the shipped extrapolation result for that kind and length. (Its sliding cells score one
    passage of scoring.SLIDING_TOKENS, the family's results passages spread through the text.)"""
    from alibi_viz.assets import load_extrapolation_results, load_rescale_results

    sweep = load_rescale_results()
    shipped = load_extrapolation_results(sweep["kind"])["models"]["alibi"]["perplexity"]
    for length, values in sweep["perplexity"]["nonoverlapping"].items():
        assert values["1"] == pytest.approx(shipped["nonoverlapping"][length], rel=1e-4)


def test_lab_states_the_sweeps_best_scales():
    """Section 5 of the lab states, per protocol and length, the best scale and the
    interpolation scale's change, computed from the shipped sweep."""
    from alibi_viz.assets import load_rescale_results
    from alibi_viz.results.evaluation import protocol_name, relative_change
    from alibi_viz.results.rescale import rescale_summary, scale_label
    from alibi_viz_app.testing import run_app

    summary = rescale_summary(load_rescale_results())
    c = summary["cells"][("nonoverlapping", 1024)]
    at = run_app("extrapolation")
    assert not at.exception
    text = " ".join(m.value for m in at.markdown)
    assert (f"{protocol_name('nonoverlapping')}, 1,024 tokens: best s = {scale_label(c['best'])} "
            f"({relative_change(c['best_ratio'])} against s = 1)") in text
