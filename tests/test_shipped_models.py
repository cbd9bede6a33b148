"""The shipped model family under assets/models and its results in assets/results/."""

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from transformers.models.bloom.modeling_bloom import build_alibi_tensor

from alibi_viz import data
from alibi_viz.alibi import alibi_slopes
from alibi_viz.assets import (
    ASSETS_DIR,
    DEFAULT_MODEL,
    MODEL_ORDER,
    load_extrapolation_results,
    shipped_models,
    training_info,
)
from alibi_viz.evaluate import load_eval_model, perplexity
from alibi_viz.positional import sinusoidal_table
from alibi_viz.reach import copy_at_distance

NAMES = MODEL_ORDER  # alibi, sinusoidal, rope, learned, nope
# Held-out perplexity at the training length, first 64 windows of 128 validation tokens (the
# model cards' protocol). Measured on the shipped weights (Python 3.11.7): alibi 2.224,
# sinusoidal 2.358, rope 2.163, learned 2.272, nope 2.798; the limits leave 15% of margin for
# other Python versions' files and other machines.
IN_DISTRIBUTION_PPL_LIMIT = {"alibi": 2.56, "sinusoidal": 2.71, "rope": 2.49, "learned": 2.61,
                             "nope": 3.22}


@pytest.fixture(scope="module")
def models():
    torch.set_num_threads(min(2, torch.get_num_threads()))
    return {name: load_eval_model(path) for name, path in shipped_models().items()}


@pytest.fixture(scope="module")
def results():
    return load_extrapolation_results()


def test_the_five_models_are_shipped_alibi_first():
    """assets/models holds the five models, and the ALiBi one is the default."""
    assert set(NAMES) <= set(shipped_models())
    assert next(iter(shipped_models())) == DEFAULT_MODEL == "alibi"


@pytest.mark.parametrize("name", NAMES)
def test_model_and_tokenizer_load_offline(name):
    """from_pretrained loads each shipped model and its byte tokenizer with no network."""
    path = shipped_models()[name]
    model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True,
                                                 attn_implementation="eager")
    tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    assert model.config.vocab_size == len(tok) == data.VOCAB_SIZE
    assert tok.decode(tok("x = 1")["input_ids"], skip_special_tokens=True) == "x = 1"


def test_alibi_model_uses_the_canonical_slopes():
    """transformers' own build_alibi_tensor on the shipped config gives alibi_slopes(num_heads)."""
    model = AutoModelForCausalLM.from_pretrained(shipped_models()["alibi"], local_files_only=True)
    heads = model.config.n_head
    assert model.config.model_type == "bloom" and heads == 8
    alibi = build_alibi_tensor(torch.ones(1, 3), heads, torch.float64)  # (heads, 1, 3): m_h * j
    np.testing.assert_allclose(alibi[:, 0, 1].numpy(), alibi_slopes(heads), rtol=1e-6)


def test_the_five_models_share_every_training_setting():
    """Same depth, width, heads, data, curriculum, steps, batches, schedule and training length."""
    keys = ("layers", "heads", "hidden", "steps", "train_seq_len", "batch_size", "lr", "seed",
            "warmup", "min_lr_ratio", "weight_decay", "plant_fraction", "corpus", "curriculum")
    infos = {n: training_info(shipped_models()[n]) for n in NAMES}
    differing = {k: {n: info.get(k) for n, info in infos.items()} for k in keys
                 if len({repr(info.get(k)) for info in infos.values()}) > 1}
    assert differing == {}
    infos = list(infos.values())
    assert infos[0]["train_seq_len"] == 128 and infos[0]["steps"] >= 3000


def test_sinusoidal_model_holds_the_sinusoidal_table():
    """The shipped sinusoidal model's wpe is the sinusoidal formula times SINUSOIDAL_SCALE, bit
    for bit: frozen through training."""
    from alibi_viz.train import SINUSOIDAL_SCALE

    model = AutoModelForCausalLM.from_pretrained(shipped_models()["sinusoidal"],
                                                 local_files_only=True)
    wpe = model.transformer.wpe.weight.detach().numpy()
    np.testing.assert_array_equal(wpe, sinusoidal_table(*wpe.shape) * SINUSOIDAL_SCALE)


def test_nope_model_has_a_zero_position_table():
    """The shipped NoPE model's position table is all zeros: it gets no position information."""
    model = AutoModelForCausalLM.from_pretrained(shipped_models()["nope"], local_files_only=True)
    assert not model.transformer.wpe.weight.any()


@pytest.mark.parametrize("distance", [32, 64])
def test_alibi_model_copies_a_repeated_span(models, distance):
    """A planted span of held-out code repeated 32 or 64 tokens later is predicted at least 0.5
    nat per byte better than its first occurrence (the copy curriculum made copying heads)."""
    stream = data.corpus_ids("valid", max_tokens=1 << 16)
    result = copy_at_distance(models["alibi"], stream, [distance])
    assert result.gain[0] >= 0.5


@pytest.mark.parametrize("name", NAMES)
def test_in_distribution_perplexity_is_low(models, name):
    """Held-out perplexity at the training length is below the measured limit (with margin)."""
    ids = data.corpus_ids("valid", max_tokens=64 * 128 + 1)
    ppl = perplexity(models[name], ids, 128)["ppl"]
    assert ppl < IN_DISTRIBUTION_PPL_LIMIT[name]


@pytest.mark.parametrize("name", NAMES)
def test_check_slice_reproduces_the_results_file(models, results, name):
    """Re-evaluating the slice stored in extrapolation.json gives the perplexity stored with it."""
    check = results["check"]
    ppl = perplexity(models[name], check["token_ids"], check["length"], check["protocol"])["ppl"]
    assert ppl == pytest.approx(check["ppl"][name], rel=1e-4)


def test_results_cover_every_model_length_and_protocol(results):
    """Both protocols, lengths 128 .. 4096, and the same number of scored tokens at each length."""
    assert results["lengths"] == [128, 256, 512, 1024, 2048, 4096]
    assert set(NAMES) <= set(results["models"])
    for entry in results["models"].values():
        for protocol in ("nonoverlapping", "sliding"):
            assert len(set(entry["tokens"][protocol].values())) == 1
            assert set(entry["perplexity"][protocol]) == {str(n) for n in results["lengths"]}


def test_alibi_extrapolates_and_the_baselines_do_not(results):
    """Train short, test long: ALiBi at 8x the training length is within 2% of 1x (or better);
    sinusoidal, rotary and learned positions are at least 2x worse (non-overlapping windows)."""
    ppl = {n: results["models"][n]["perplexity"]["nonoverlapping"] for n in NAMES}
    assert ppl["alibi"]["1024"] <= 1.02 * ppl["alibi"]["128"]
    for name in ("sinusoidal", "rope", "learned"):
        assert ppl[name]["1024"] >= 2 * ppl[name]["128"], name


def test_results_carry_intervals(results):
    """Every perplexity has a 95% interval around it and the chunk nlls it came from."""
    for entry in results["models"].values():
        for protocol, cells in entry["perplexity"].items():
            for length, ppl in cells.items():
                low, high = entry["ci95"][protocol][length]
                assert low < ppl < high
                assert len(entry["chunk_nll"][protocol][length]) == results["chunks"]


def test_assets_stay_small():
    """Everything under assets/ fits in 40 MB."""
    size = sum(p.stat().st_size for p in ASSETS_DIR.rglob("*") if p.is_file())
    assert size < 40 * 2**20


def test_alibi_reaches_the_in_distribution_target(models):
    """The ALiBi model's held-out perplexity at its training length is at most 2.3 per byte,
    measured as the training card measures it (and as the issue's 5.55 -> 2.10 was): the first
    64 non-overlapping windows of 128 held-out tokens. Recomputed here, and equal to the card's
    number. (The 16,384 tokens of extrapolation.json include harder files: 2.59 there.)"""
    ids = data.corpus_ids("valid", max_tokens=64 * 128 + 1)
    ppl = perplexity(models["alibi"], ids, 128)["ppl"]
    assert ppl <= 2.3
    card = training_info(shipped_models()["alibi"])["valid_ppl_at_train_len"]
    assert ppl == pytest.approx(card, rel=1e-3)


def test_reach_results_cover_every_model():
    """assets/results/reach.json holds a reach curve and a copy curve for every shipped model,
    with the same scored tokens at every context."""
    from alibi_viz.assets import load_reach_results

    reach = load_reach_results()
    assert set(reach["models"]) == set(NAMES)
    for entry in reach["models"].values():
        assert len(entry["reach"]["nll"]) == len(reach["reach"]["contexts"])
        assert len(entry["copy"]["gain"]) == len(reach["copy"]["distances"])
