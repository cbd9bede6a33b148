"""The models shipped under assets/models and the results in assets/results/extrapolation.json."""

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
    load_extrapolation_results,
    shipped_models,
    training_info,
)
from alibi_viz.evaluate import load_eval_model, perplexity

NAMES = ("alibi", "learned", "rope")
# Held-out perplexity at the training length (128), first 16 windows of the validation stream.
# Measured on the shipped weights (Python 3.11.7): alibi 5.89, learned 6.98, rope 3.60; the
# limits leave about 15% of margin for other Python versions' files and other machines.
IN_DISTRIBUTION_PPL_LIMIT = {"alibi": 6.8, "learned": 8.0, "rope": 4.15}


@pytest.fixture(scope="module")
def models():
    torch.set_num_threads(min(2, torch.get_num_threads()))
    return {name: load_eval_model(path) for name, path in shipped_models().items()}


@pytest.fixture(scope="module")
def results():
    return load_extrapolation_results()


def test_the_three_models_are_shipped_alibi_first():
    """assets/models holds alibi, learned and rope, and the ALiBi one is the default."""
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


def test_the_three_models_differ_only_in_positions():
    """Same depth, width, heads, data, steps, batches, learning rate and training length."""
    keys = ("layers", "heads", "hidden", "steps", "train_seq_len", "batch_size", "lr", "seed",
            "warmup", "corpus")
    infos = [training_info(shipped_models()[n]) for n in NAMES]
    assert all(info[k] == infos[0][k] for info in infos for k in keys)
    assert infos[0]["train_seq_len"] == 128


@pytest.mark.parametrize("name", NAMES)
def test_in_distribution_perplexity_is_low(models, name):
    """Held-out perplexity at the training length is below the measured limit (with margin)."""
    ids = data.corpus_ids("valid", max_tokens=16 * 128 + 1)
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
    """Train short, test long: ALiBi at 8x the training length is within 5% of 1x; learned
    positions and RoPE are at least 2x worse (non-overlapping windows)."""
    ppl = {n: results["models"][n]["perplexity"]["nonoverlapping"] for n in NAMES}
    assert ppl["alibi"]["1024"] == pytest.approx(ppl["alibi"]["128"], rel=0.05)
    assert ppl["learned"]["1024"] >= 2 * ppl["learned"]["128"]
    assert ppl["rope"]["1024"] >= 2 * ppl["rope"]["128"]


def test_assets_stay_small():
    """Everything under assets/ fits in 40 MB."""
    size = sum(p.stat().st_size for p in ASSETS_DIR.rglob("*") if p.is_file())
    assert size < 40 * 2**20
