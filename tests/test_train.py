"""Training data, the training CLI and the perplexity evaluation, on tiny random models."""

import json
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from transformers import AutoModelForCausalLM, AutoTokenizer

from alibi_viz import data
from alibi_viz.errors import AlibiVizError
from alibi_viz.models.scoring import evaluate_length, evaluation_stream, perplexity
from experiments import train
from experiments.evaluate import merge_results

TINY = dict(layers=1, heads=2, hidden=16)


@pytest.fixture(scope="module")
def tiny_alibi():
    torch.manual_seed(0)
    return train.build_model("alibi", attn_implementation="eager", **TINY).eval()


@pytest.fixture(scope="module")
def ids():
    return torch.randint(3, data.VOCAB_SIZE, (101,), generator=torch.Generator().manual_seed(1))


def test_bytes_to_ids_matches_tokenizer():
    """The fast corpus encoding gives the tokenizer's ids (minus its trailing eos)."""
    text = "def f(x):\n    return x ** 2  # é, ü, 😀\n"
    expected = data.make_tokenizer()(text)["input_ids"]
    assert expected[-1] == data.EOS_ID
    assert data.bytes_to_ids(text.encode()).tolist() == expected[:-1]


def test_tokenizer_round_trips_and_reloads(tmp_path):
    """The byte tokenizer decodes what it encodes, has 259 ids, and reloads from save_pretrained."""
    tok = data.make_tokenizer()
    text = data.CODE_EXAMPLE + "naïve ∑"
    assert len(tok) == data.VOCAB_SIZE
    assert tok.decode(tok(text)["input_ids"], skip_special_tokens=True) == text
    tok.save_pretrained(tmp_path)
    again = AutoTokenizer.from_pretrained(tmp_path, local_files_only=True)
    assert again(text)["input_ids"] == tok(text)["input_ids"]


def test_random_batches_are_reproducible():
    """The same seed gives the same windows, each seq_len + 1 consecutive tokens of the stream."""
    stream = np.arange(1000, dtype=np.int64)
    a = next(data.random_batches(stream, 4, 8, seed=3))
    b = next(data.random_batches(stream, 4, 8, seed=3))
    assert a.shape == (4, 9) and torch.equal(a, b)
    assert torch.equal(a[:, 1:] - a[:, :-1], torch.ones(4, 8, dtype=torch.long))


def test_learning_rate_warms_up_then_decays():
    """Linear warmup to the peak, cosine decay to lr * min_lr_ratio at the last step."""
    cfg = train.TrainConfig(arch="alibi", out="", steps=100, warmup=10, lr=1.0, min_lr_ratio=0.1)
    assert train.lr_at(0, cfg) == pytest.approx(0.1)
    assert train.lr_at(9, cfg) == pytest.approx(1.0)
    assert train.lr_at(100, cfg) == pytest.approx(0.1)


@pytest.fixture
def small_corpus(monkeypatch):
    """The shipped held-out text stands in for the local corpus build (`make corpus`), which a
    fresh clone does not have."""
    def stream(split="train", max_tokens=None, root=None):
        return data.heldout_mixture_ids(max_tokens or 1 << 16)

    monkeypatch.setattr(data, "mixture_ids", stream)


@pytest.mark.parametrize("arch", train.ARCHS)
def test_training_cli_writes_a_loadable_model(tmp_path, arch, small_corpus):
    """A few CLI steps on a tiny config save a model, tokenizer, training.json and card that load."""
    out = tmp_path / arch
    train.main(["--arch", arch, "--out", str(out), "--steps", "3", "--seq-len", "16",
                "--layers", "1", "--heads", "2", "--hidden", "16", "--batch-size", "2",
                "--warmup", "1", "--log-every", "2", "--threads", "1"])
    model = AutoModelForCausalLM.from_pretrained(out, local_files_only=True)
    tok = AutoTokenizer.from_pretrained(out, local_files_only=True)
    info = json.loads((out / "training.json").read_text())
    assert model.config.vocab_size == len(tok) == data.VOCAB_SIZE
    assert info["arch"] == arch and info["train_seq_len"] == 16 and info["steps"] == 3
    assert [p["step"] for p in info["loss_curve"]] == [2, 3]
    assert info["command"].startswith("python -m experiments.train --arch " + arch)
    assert (out / "training.log").is_file() and "## Regenerate" in (out / "README.md").read_text()


def test_training_saves_fp16_snapshots_at_the_steps_asked(tmp_path, small_corpus):
    """--snapshots 0,2,3 saves the model before training, after 2 steps and at the end, each in
    fp16 with its tokenizer and snapshot.json; the shipped weights are fp16 too, and the card
    says where the snapshots are."""
    from safetensors import safe_open

    out = tmp_path / "alibi"
    train.main(["--arch", "alibi", "--out", str(out), "--steps", "3", "--seq-len", "16",
                "--layers", "1", "--heads", "2", "--hidden", "16", "--batch-size", "2",
                "--warmup", "1", "--log-every", "2", "--threads", "1", "--snapshots", "0,2,3"])
    found = sorted((out / "snapshots").iterdir())
    assert [f.name for f in found] == ["step-00000", "step-00002", "step-00003"]
    for folder in found:
        record = json.loads((folder / "snapshot.json").read_text())
        assert record["step"] == int(folder.name[5:]) and record["valid_loss"] > 0
        with safe_open(folder / "model.safetensors", "pt") as f:
            assert {f.get_tensor(k).dtype for k in f.keys()} == {torch.float16}
        AutoTokenizer.from_pretrained(folder, local_files_only=True)
    with safe_open(out / "model.safetensors", "pt") as f:
        assert {f.get_tensor(k).dtype for k in f.keys()} == {torch.float16}
    assert "Training snapshots (fp16) at steps 0,2,3" in (out / "README.md").read_text()


def test_snapshot_steps_outside_the_run_are_refused(tmp_path):
    with pytest.raises(AlibiVizError):
        train.snapshot_schedule(train.TrainConfig(arch="alibi", out=str(tmp_path), steps=3,
                                                  snapshots="0,4"))


def test_learned_baseline_can_be_evaluated_at_4096():
    """The learned-position baseline has a position table long enough for the longest evaluation."""
    assert train.model_config("learned", **TINY).n_positions >= 4096


def test_sinusoidal_table_is_vaswanis_formula():
    """The sinusoidal model's wpe is SINUSOIDAL_SCALE x PE, PE[p, 2i] = sin(p / 10000^(2i/d)),
    PE[p, 2i+1] = cos(...) (Vaswani et al. 2017, sec. 3.5, written out here independently),
    and it is frozen."""
    model = train.build_model("sinusoidal", attn_implementation="sdpa", **TINY)
    wpe = model.transformer.wpe.weight / train.SINUSOIDAL_SCALE
    d = wpe.shape[1]
    p = torch.arange(wpe.shape[0], dtype=torch.float64)[:, None]
    i = torch.arange(d // 2, dtype=torch.float64)[None, :]
    angle = p / 10000 ** (2 * i / d)
    torch.testing.assert_close(wpe[:, 0::2].double(), torch.sin(angle), atol=1e-6, rtol=0)
    torch.testing.assert_close(wpe[:, 1::2].double(), torch.cos(angle), atol=1e-6, rtol=0)
    assert not wpe.requires_grad


def test_nope_table_is_zero_and_frozen():
    """The NoPE model's position table holds zeros and is not trained."""
    wpe = train.build_model("nope", attn_implementation="sdpa", **TINY).transformer.wpe.weight
    assert not wpe.any() and not wpe.requires_grad


def test_parameter_counts_match_without_the_position_table():
    """At the shipped size the five models have the same parameters to within 0.1% once the
    GPT-2 position table is left out, and the differences the cards list are these counts:
    BLOOM's embedding LayerNorm (2 x hidden) and the 4096 x hidden GPT-2 table."""
    from alibi_viz.assets import REMAINING_DIFFERENCES

    cfg = train.TrainConfig(arch="alibi", out="")
    models = {arch: train.build_model(arch, cfg.layers, cfg.heads, cfg.hidden,
                                      "sdpa" if arch != "alibi" else "eager")
              for arch in train.ARCHS}
    counts = {arch: train.parameter_count(m, include_positions=False) for arch, m in models.items()}
    assert max(counts.values()) <= 1.001 * min(counts.values())
    layernorm = sum(p.numel() for p in models["alibi"].transformer.word_embeddings_layernorm.parameters())
    assert counts["alibi"] - counts["rope"] == layernorm
    assert f"{layernorm} parameters" in REMAINING_DIFFERENCES[0]
    table = models["learned"].transformer.wpe.weight
    assert f"{table.shape[0]} x {table.shape[1]} position table ({table.numel():,} entries)" \
        in REMAINING_DIFFERENCES[1]


def test_planted_span_appears_twice_without_overlap():
    """plant_repeats writes one span of the stream at two non-overlapping places of a window."""
    stream = torch.arange(10_000)
    gen = torch.Generator().manual_seed(0)
    batch = torch.zeros(64, 129, dtype=torch.long) - 1
    data.plant_repeats(batch, stream, gen, fraction=1.0)
    for row in batch:
        planted = torch.nonzero(row >= 0).flatten()
        n = planted.numel() // 2
        assert 2 * n == planted.numel() and 16 <= n <= 48
        first, second = row[planted[:n]], row[planted[n:]]
        assert torch.equal(first, second)
        assert torch.equal(first, torch.arange(int(first[0]), int(first[0]) + n))  # a real span


def test_training_batches_are_reproducible():
    """The same seed gives the same windows and the same planted spans."""
    stream = np.arange(5000, dtype=np.int64)
    a = next(data.training_batches(stream, 8, 64, seed=2))
    b = next(data.training_batches(stream, 8, 64, seed=2))
    assert torch.equal(a, b)


@pytest.mark.parametrize("arch", ["sinusoidal", "rope", "learned", "nope"])
def test_sdpa_gives_eager_logits(arch):
    """Evaluation may use sdpa for the baselines: it gives the eager path's logits."""
    torch.manual_seed(0)
    eager = train.build_model(arch, attn_implementation="eager", **TINY).eval()
    sdpa = train.build_model(arch, attn_implementation="sdpa", **TINY).eval()
    sdpa.load_state_dict(eager.state_dict())
    x = torch.randint(3, data.VOCAB_SIZE, (2, 40))
    with torch.inference_mode():
        torch.testing.assert_close(sdpa(input_ids=x).logits, eager(input_ids=x).logits,
                                   rtol=1e-5, atol=1e-5)


def _reference_nll(model, ids, target, start):
    """-log p(ids[target]) reading ids[start:target] in one forward pass."""
    with torch.inference_mode():
        logits = model(input_ids=ids[start:target][None]).logits[0, -1]
    return F.cross_entropy(logits[None], ids[target][None]).item()


@pytest.mark.parametrize("length", [7, 16, 100, 200])
def test_nonoverlapping_matches_window_by_window_loop(tiny_alibi, ids, length):
    """Non-overlapping: every target is scored once, with context back to its window's start."""
    nll = [_reference_nll(tiny_alibi, ids, t, ((t - 1) // length) * length)
           for t in range(1, ids.numel())]
    out = perplexity(tiny_alibi, ids, length, tokens_per_batch=20)
    assert out["tokens"] == ids.numel() - 1
    assert out["ppl"] == pytest.approx(np.exp(np.mean(nll)), rel=1e-5)


@pytest.mark.parametrize(("length", "stride", "score_from"), [(16, 4, 16), (16, 1, 20), (32, 16, 1)])
def test_sliding_matches_token_by_token_loop(tiny_alibi, ids, length, stride, score_from):
    """Sliding: each target is scored once, in the window that ends with its block of `stride`."""
    nll = []
    for t in range(score_from, ids.numel()):
        last = min(score_from + (t - score_from) // stride * stride + stride - 1, ids.numel() - 1)
        nll.append(_reference_nll(tiny_alibi, ids, t, max(0, last - length)))
    out = perplexity(tiny_alibi, ids, length, "sliding", stride=stride, score_from=score_from)
    assert out["tokens"] == len(nll)
    assert out["ppl"] == pytest.approx(np.exp(np.mean(nll)), rel=1e-5)


@pytest.mark.parametrize("protocol", ["nonoverlapping", "sliding"])
def test_every_length_scores_the_same_tokens(tiny_alibi, ids, protocol):
    """With score_from at the longest length, every length scores the same targets."""
    counts = {perplexity(tiny_alibi, ids, n, protocol, stride=4, score_from=32)["tokens"]
              for n in (8, 16, 32)}
    assert len(counts) == 1


def test_progress_reports_every_window(tiny_alibi, ids):
    """The progress callback ends at (total, total)."""
    calls = []
    perplexity(tiny_alibi, ids, 10, progress=lambda done, total: calls.append((done, total)))
    assert calls[-1] == (10, 10)


def test_bad_protocol_is_a_typed_error(tiny_alibi, ids):
    """An unknown protocol raises AlibiVizError naming the valid ones."""
    with pytest.raises(AlibiVizError, match="nonoverlapping"):
        perplexity(tiny_alibi, ids, 16, protocol="strided")


@pytest.mark.parametrize("protocol", ["nonoverlapping", "sliding"])
def test_evaluate_length_scores_the_requested_held_out_tokens(tiny_alibi, protocol):
    """evaluate_length (the app's live call) scores `tokens` held-out targets at any length."""
    out = evaluate_length(tiny_alibi, 16, protocol, tokens=48, stride=8, max_length=32)
    assert out["tokens"] == 48 and np.isfinite(out["ppl"])


def test_evaluate_length_is_the_perplexity_of_the_held_out_windows(tiny_alibi):
    """Non-overlapping at 16: exp of the mean next-token loss over 3 windows of 16 targets of
    the held-out stream, computed here with a plain forward and cross-entropy."""
    out = evaluate_length(tiny_alibi, 16, "nonoverlapping", tokens=48, max_length=32)
    stream = torch.as_tensor(np.asarray(evaluation_stream(48)), dtype=torch.long)
    losses = []
    with torch.no_grad():
        for start in range(0, 48, 16):
            window = stream[start:start + 17][None]  # (1, 17): 16 inputs, 16 targets
            logits = tiny_alibi(window[:, :-1]).logits[0]  # (16, vocab)
            losses.append(torch.nn.functional.cross_entropy(logits, window[0, 1:],
                                                            reduction="sum"))
    assert out["ppl"] == pytest.approx(math.exp(float(sum(losses)) / 48), rel=1e-5)


def test_merge_keeps_other_models_evaluated_with_the_same_settings():
    """Re-evaluating one model keeps the others' rows if lengths, protocols and tokens agree."""
    base = {"lengths": [8], "protocols": {}, "stride": 4, "corpus": {},
            "check": {"token_ids": [1, 2], "ppl": {"a": 1.0}}, "models": {"a": {}}}
    new = {**base, "check": {"token_ids": [1, 2], "ppl": {"b": 2.0}}, "models": {"b": {}}}
    assert list(merge_results(base, new)["models"]) == ["a", "b"]
    assert merge_results(base, new)["check"]["ppl"] == {"a": 1.0, "b": 2.0}
    assert list(merge_results({**base, "stride": 2}, new)["models"]) == ["b"]
