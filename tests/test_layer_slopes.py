"""Per-layer ALiBi slopes (alibi_viz.models.layer_slopes): the learnable-slope variant,
checked against transformers' own BLOOM bias."""

import json

import numpy as np
import pytest
import torch
from transformers.models.bloom import modeling_bloom

from alibi_viz import assets, data
from alibi_viz.alibi import alibi_slopes
from alibi_viz.errors import AlibiVizError
from alibi_viz.models import layer_slopes
from alibi_viz.models.conformance import check_alibi
from alibi_viz.models.loading import load_model
from alibi_viz.results import learnable_slopes
from alibi_viz.tiny_models import save_tiny_model, tiny_model
from experiments import train

IDS = torch.tensor([list(range(3, 3 + 24))])
FACTORS = np.array([[1.0], [0.5], [1.7]])  # layer l's slopes: the official ones times this


def flat_model():
    """A 3-layer tiny BLOOM whose queries and keys are zero: each layer's attention is then the
    softmax of its bias alone, whatever the earlier layers did."""
    model = tiny_model("bloom", vocab_size=259, n_layer=3)
    with torch.no_grad():
        heads = model.config.n_head
        for block in model.transformer.h:
            qkv = block.self_attention.query_key_value  # rows: (heads, 3 = q k v, head_dim)
            qkv.weight.view(heads, 3, -1, qkv.in_features)[:, :2].zero_()
            qkv.bias.view(heads, 3, -1)[:, :2].zero_()
    return model


def attentions(model) -> list[torch.Tensor]:
    with torch.inference_mode():
        return model(input_ids=IDS, output_attentions=True).attentions  # layers x (1, H, T, T)


def transformers_attention(model, slopes: np.ndarray, layer: int) -> torch.Tensor:
    """Layer `layer`'s attention when transformers' own builder makes `slopes` for every layer."""
    original = modeling_bloom._get_alibi_slopes
    modeling_bloom._get_alibi_slopes = lambda heads, device: torch.tensor(slopes, dtype=torch.float32)
    try:
        return attentions(model)[layer]
    finally:
        modeling_bloom._get_alibi_slopes = original


def test_qk_is_zero_in_the_flat_model():
    """The premise of the next tests: every row of a layer's attention is the bias's softmax,
    so two layers with the same slopes attend alike."""
    maps = attentions(flat_model())
    torch.testing.assert_close(maps[0], maps[2])


def test_official_slopes_in_every_layer_change_nothing():
    model = tiny_model("bloom", vocab_size=259)
    before = model(input_ids=IDS).logits
    layer_slopes.attach(model)
    torch.testing.assert_close(model(input_ids=IDS).logits, before, rtol=0, atol=0)


def test_each_layer_applies_its_own_slopes_as_transformers_would():
    """Layer l attends as BLOOM does when transformers' builder makes layer l's slopes."""
    model = flat_model()
    heads = model.config.n_head
    slopes = alibi_slopes(heads)[None, :] * FACTORS  # (layers, heads)
    slopes[2, 1] *= 3
    expected = [transformers_attention(model, slopes[layer], layer) for layer in range(3)]
    layer_slopes.attach(model, slopes)
    for layer, got in enumerate(attentions(model)):
        torch.testing.assert_close(got, expected[layer], rtol=1e-5, atol=1e-7)


def test_trainable_slopes_get_gradients_and_stay_out_of_the_weights():
    model = tiny_model("bloom", vocab_size=259)
    keys = set(model.state_dict())
    slopes = layer_slopes.attach(model, trainable=True)
    model(input_ids=IDS).logits.sum().backward()
    assert slopes.log_slopes.grad is not None and slopes.log_slopes.grad.abs().sum() > 0
    assert set(model.state_dict()) == keys
    assert all(p is not slopes.log_slopes for p in model.parameters())


def test_attaching_again_replaces_the_slopes():
    model = tiny_model("bloom", vocab_size=259)
    before = model(input_ids=IDS).logits
    layer_slopes.attach(model, np.tile(alibi_slopes(model.config.n_head) * 2, (2, 1)))
    layer_slopes.attach(model)
    torch.testing.assert_close(model(input_ids=IDS).logits, before, rtol=0, atol=0)


@pytest.mark.parametrize("bad", [np.zeros((2, 4)), -np.ones((2, 4)), np.ones((3, 4)),
                                 np.full((2, 4), np.nan)])
def test_bad_slopes_are_a_typed_error(bad):
    with pytest.raises(AlibiVizError):
        layer_slopes.attach(tiny_model("bloom", vocab_size=259), bad)


def test_only_bloom_takes_per_layer_slopes():
    with pytest.raises(AlibiVizError):
        layer_slopes.attach(tiny_model("gpt2", vocab_size=259))


def saved_variant(folder, slopes=None):
    """A tiny BLOOM checkpoint whose config.json declares per-layer slopes."""
    model = flat_model()
    slopes = alibi_slopes(model.config.n_head)[None, :] * FACTORS if slopes is None else slopes
    layer_slopes.store(model, layer_slopes.attach(model, slopes))
    model.save_pretrained(folder)
    data.make_tokenizer().save_pretrained(folder)
    return slopes


def test_the_loader_reads_the_slopes_from_config(tmp_path, monkeypatch):
    monkeypatch.setenv("ALIBI_VIZ_ALLOW_CUSTOM_PATHS", "1")
    slopes = saved_variant(tmp_path)
    model, _tok, info = load_model(tmp_path)
    assert info.per_layer and info.slope_schedule is None
    np.testing.assert_allclose(np.array(info.slopes), slopes, rtol=1e-6)
    np.testing.assert_allclose(info.slopes_of(2), slopes[2], rtol=1e-6)
    assert any("alibi_viz_slopes" in note for note in info.notes)
    np.testing.assert_allclose(layer_slopes.attached(model), slopes, rtol=1e-6)


def test_conformance_checks_each_layer_against_its_own_slopes(tmp_path, monkeypatch):
    monkeypatch.setenv("ALIBI_VIZ_ALLOW_CUSTOM_PATHS", "1")
    saved_variant(tmp_path)
    model, tokenizer, _info = load_model(tmp_path)
    check = check_alibi(model, tokenizer)
    assert check.verdict == "conforms", [f.summary for f in check.diagnosis]
    np.testing.assert_allclose(check.measured(),
                               np.array([[h.expected_slope for h in row] for row in check.heads]),
                               rtol=1e-3)


def test_a_variant_run_without_its_slopes_does_not_conform(tmp_path, monkeypatch):
    """Plain transformers applies the official slopes in every layer: layers 2 and 3 are off."""
    monkeypatch.setenv("ALIBI_VIZ_ALLOW_CUSTOM_PATHS", "1")
    saved_variant(tmp_path)
    model, tokenizer, _info = load_model(tmp_path)
    layer_slopes.detach(model)
    check = check_alibi(model, tokenizer, decode=False)
    assert check.verdict != "conforms"
    assert sorted({layer for f in check.diagnosis for layer in f.layers}) == [1, 2]


def test_a_malformed_config_value_is_a_typed_error(tmp_path, monkeypatch):
    monkeypatch.setenv("ALIBI_VIZ_ALLOW_CUSTOM_PATHS", "1")
    save_tiny_model(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    config[layer_slopes.CONFIG_KEY] = [[0.5, "steep"]]
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(AlibiVizError):
        load_model(tmp_path)


def test_drift_is_the_largest_relative_change_per_layer():
    initial = [[0.5, 0.25], [0.5, 0.25]]
    moved = learnable_slopes.drift(initial, [[0.55, 0.25], [0.5, 0.125]])
    assert moved["largest_relative"] == pytest.approx([0.1, -0.5])
    assert moved["head"] == [0, 1]
    assert moved["log2_change"][1] == pytest.approx([0.0, -1.0])


@pytest.mark.parametrize(("interval", "verdict"), [((1.1, 1.05, 1.2), "worse"),
                                                   ((0.9, 0.8, 0.95), "better"),
                                                   ((1.01, 0.98, 1.03), "same")])
def test_the_verdict_is_where_the_interval_lies(interval, verdict):
    assert learnable_slopes.verdict(interval) == verdict


def test_training_with_learnable_slopes_logs_and_stores_them(tmp_path, monkeypatch):
    monkeypatch.setattr(data, "mixture_ids",
                        lambda split="train", max_tokens=None, root=None:
                        data.heldout_mixture_ids(max_tokens or 1 << 16))
    out = tmp_path / "variant"
    train.main(["--arch", "alibi", "--learn-slopes", "--out", str(out), "--steps", "3",
                "--seq-len", "16", "--layers", "2", "--heads", "2", "--hidden", "16",
                "--batch-size", "2", "--warmup", "1", "--log-every", "1", "--threads", "1",
                "--lr", "0.05"])
    info = json.loads((out / "training.json").read_text())
    steps, history = learnable_slopes.slope_history(info)
    assert steps == [0, 1, 2, 3] and history.shape == (4, 2, 2)
    np.testing.assert_allclose(history[0], [alibi_slopes(2)] * 2)
    assert not np.allclose(history[-1], history[0])  # they trained
    np.testing.assert_allclose(layer_slopes.read(out), info["final_slopes"])
    np.testing.assert_allclose(history[-1], info["final_slopes"], rtol=1e-4)
    assert "learnable slopes" in (out / "README.md").read_text()


def test_learnable_slopes_need_the_alibi_model(tmp_path):
    with pytest.raises(AlibiVizError):
        train.train(train.TrainConfig(arch="rope", out=str(tmp_path), learn_slopes=True), "")


# ----------------------------------------------------------------------------- shipped variant

@pytest.fixture(scope="module")
def shipped():
    results = assets.load_learnable_slopes_results()
    if not results:
        pytest.skip("no shipped learnable-slope results")
    return results


def test_shipped_fixed_column_is_the_shipped_alibi_evaluation(shipped):
    """The comparison's fixed-slope non-overlapping numbers are what `experiments.evaluate`
    shipped for ALiBi (the same targets); its sliding cells score one passage of
    SLIDING_TOKENS (evaluate_length), where the family's results score passages spread through
    the text, so there the two differ by design."""
    from alibi_viz.models.scoring import SLIDING_TOKENS

    for kind in shipped["kinds"]:
        family = assets.load_extrapolation_results(kind)["models"]["alibi"]["perplexity"]
        for n in shipped["lengths"]:
            got = learnable_slopes.cell(shipped, kind, "nonoverlapping", n)["fixed"]
            assert got == pytest.approx(family["nonoverlapping"][str(n)], rel=1e-4)
            assert learnable_slopes.cell(shipped, kind, "sliding", n)["tokens"] == SLIDING_TOKENS


def test_shipped_slopes_are_the_shipped_models(shipped):
    """The last logged slopes are the shipped config's, the first the official schedule, and
    the drift is recomputed from them."""
    stored = layer_slopes.read(assets.LEARNABLE_SLOPES_DIR)
    history = np.asarray(shipped["slopes"])
    np.testing.assert_allclose(history[-1], stored, rtol=1e-4)
    np.testing.assert_allclose(history[0], np.tile(alibi_slopes(stored.shape[1]),
                                                   (len(stored), 1)), rtol=1e-4)
    assert shipped["drift"] == learnable_slopes.drift(history[0], stored) or np.allclose(
        shipped["drift"]["largest_relative"],
        learnable_slopes.drift(history[0], stored)["largest_relative"], rtol=1e-3)


def test_shipped_variant_loads_with_its_slopes_and_conforms(shipped):
    model, tokenizer, info = load_model(assets.LEARNABLE_SLOPES_DIR)
    assert info.per_layer
    np.testing.assert_allclose(np.array(info.slopes), layer_slopes.read(assets.LEARNABLE_SLOPES_DIR))
    assert check_alibi(model, tokenizer, decode=False).verdict == "conforms"


def test_shipped_variant_trained_as_long_as_the_alibi_model(shipped):
    """Same recipe, same steps; its wall time is recorded beside the ALiBi model's."""
    variant = assets.training_info(assets.LEARNABLE_SLOPES_DIR)
    fixed = assets.training_info(assets.MODELS_DIR / "alibi")
    for key in ("steps", "batch_size", "seq_len", "layers", "heads", "hidden", "lr", "seed",
                "plant_fraction", "warmup"):
        assert variant[key] == fixed[key], key
    assert variant["learn_slopes"] and shipped["training"]["learnable_s"] == variant["wall_time_s"]


def test_readme_states_the_shipped_variant_as_measured(shipped):
    """The README's paragraph on the variant quotes the shipped results."""
    readme = " ".join((assets.ASSETS_DIR.parent / "README.md").read_text().split())
    found = learnable_slopes.summary(shipped, "en")
    largest = found["largest"]
    start = shipped["slopes"][0][largest["layer"]][largest["head"]]
    assert f"{found['steeper']} of its {found['slopes']} slopes ended steeper" in readme
    assert (f"the largest by {1 + largest['relative']:.1f}x (layer {largest['layer'] + 1}, head "
            f"{largest['head'] + 1}: {start:.3f} to {start * (1 + largest['relative']):.3f})"
            in readme)
    assert f"{found['ratios'][1][0]:.3f} of it at 1x, {found['ratios'][32][0]:.3f} at 32x" in readme
    variant = assets.training_info(assets.LEARNABLE_SLOPES_DIR)["wall_time_s"] / 60
    assert f"{variant:.1f} min on 2 cores" in readme


def test_a_gap_that_narrows_only_at_its_ends_does_not_narrow():
    """learnable / fixed at 0.97, 0.99, 0.975, 0.985: nearer 1 at 32x than at 1x, but it widens
    from 2x to 8x, so summary's "narrows" is False; 0.97, 0.98, 0.98, 0.99 narrows."""
    def results(ratios):
        factors = [1, 2, 8, 32]
        return {"factors": factors, "lengths": [128 * f for f in factors],
                "cells": {f"en/nonoverlapping/{128 * f}": {"ratio": [r, r - 0.01, r + 0.01]}
                          for f, r in zip(factors, ratios, strict=True)},
                "drift": {"largest_relative": [0.5], "head": [0], "log2_change": [[0.5]]}}

    assert not learnable_slopes.summary(results([0.97, 0.99, 0.975, 0.985]), "en")["narrows"]
    assert learnable_slopes.summary(results([0.97, 0.98, 0.98, 0.99]), "en")["narrows"]
