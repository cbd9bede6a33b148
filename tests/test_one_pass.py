"""analyze_heads reads a text in one pass of the model's body, reducing each layer inside it
(issue 40): it gives what the pages drew before, from every layer's maps held at once
(attention_maps + head_statistics + stack_view, and decomposition_views for the split), on
tiny BLOOM, MPT, Falcon, GPT-2, LLaMA and GPT-NeoX models and on the shipped models; it runs
the body once, never the LM head; and its token cap follows one layer's maps."""

import numpy as np
import pytest
import torch

from alibi_viz import assets
from alibi_viz.display import stack_view
from alibi_viz.errors import BudgetError
from alibi_viz.models import attention as heads
from alibi_viz.models.attention import (
    GRID_HOVER_CELLS,
    RECOMPUTE,
    analyze_heads,
    attention_maps,
    decomposition_views,
    head_statistics,
)
from alibi_viz.models.loading import load_model
from alibi_viz.tiny_models import KINDS, byte_tokenizer, tiny_model

TEXT = "def add(a, b):\n    return a + b  # (a + b) * 2\n" * 3


def reference(model, tokenizer, text, slopes=None, split_layers=(), max_tokens=None):
    """What the pages drew before: every layer's maps at once, then reduced."""
    result = attention_maps(model, tokenizer, text, max_tokens=max_tokens)
    hover_side = max(2, int(np.sqrt(GRID_HOVER_CELLS / len(result.maps[0]))))
    views = [stack_view(m, hover_side=hover_side, reduce="max") for m in result.maps]
    splits = (decomposition_views(model, tokenizer, text, split_layers, max_tokens=max_tokens,
                                  bias_shown=heads.BIAS_SHOWN) if split_layers else {})
    return result, head_statistics(result.maps, slopes=slopes), views, splits


def assert_same(analysis, ref) -> None:
    result, stats, views, splits = ref
    assert analysis.tokens == result.tokens and analysis.seq_len == len(result.tokens)
    assert analysis.truncated == result.truncated
    for name in ("mean_distance", "entropy", "local_share", "fitted_slope", "slope_fit_r2",
                 "config_slope", "content_kl"):
        got, want = getattr(analysis.stats, name), getattr(stats, name)
        assert (got is None) == (want is None), name
        if want is not None:
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9, err_msg=name)
    assert len(analysis.layers) == len(views)
    for got, want in zip(analysis.layers, views, strict=True):
        np.testing.assert_array_equal(got.images, want.images)
        np.testing.assert_array_equal(got.hover, want.hover)
        assert got.reduced == want.reduced
    assert set(analysis.splits) == set(splits)
    for layer, forms in splits.items():
        for form, want in forms.items():
            got = analysis.splits[layer][form]
            assert got.max_abs_error == want.max_abs_error
            for part in heads.DECOMPOSITION_PARTS:
                np.testing.assert_array_equal(got.parts[part].images, want.parts[part].images)
                np.testing.assert_array_equal(got.ranges[part], want.ranges[part])


@pytest.mark.parametrize("kind", KINDS)
def test_one_pass_gives_what_every_map_at_once_gave(kind):
    """Maps, statistics (with slopes for the ALiBi kinds) and the split of layer 2 where the
    architecture can be split: the same numbers as from all maps held at once."""
    torch.set_num_threads(1)
    model, tokenizer = tiny_model(kind), byte_tokenizer()
    slopes = np.linspace(0.5, 0.01, 4) if kind in ("bloom", "mpt", "falcon") else None
    split = (1,) if kind in RECOMPUTE or kind.startswith("falcon") else ()
    analysis = analyze_heads(model, tokenizer, TEXT, slopes=slopes, split_layers=split,
                             bias_shown=heads.BIAS_SHOWN)
    assert_same(analysis, reference(model, tokenizer, TEXT, slopes, split))


def test_shipped_models_read_the_same_in_one_pass():
    """Every shipped model at 300 tokens, its first and last layer split, slopes from the config."""
    torch.set_num_threads(1)
    for folder in assets.shipped_models().values():
        model, tokenizer, info = load_model(folder)
        split = (0, info.num_layers - 1) if model.config.model_type in RECOMPUTE else ()
        analysis = analyze_heads(model, tokenizer, TEXT * 3, max_tokens=300, info=info,
                                 slopes=info.config_slopes, split_layers=split,
                                 bias_shown=heads.BIAS_SHOWN)
        assert analysis.seq_len == 300
        assert_same(analysis, reference(model, tokenizer, TEXT * 3, info.config_slopes, split,
                                        max_tokens=300))


def test_one_pass_runs_the_body_once_and_never_the_lm_head():
    """One call of the body's forward, none of the LM head's, and progress after each layer."""
    model, tokenizer = tiny_model("bloom", n_layer=3), byte_tokenizer()
    calls = {"body": 0, "head": 0}
    model.transformer.register_forward_hook(lambda *a: calls.__setitem__("body", calls["body"] + 1))
    model.lm_head.register_forward_hook(lambda *a: calls.__setitem__("head", calls["head"] + 1))
    seen = []
    analyze_heads(model, tokenizer, TEXT, split_layers=(2,), progress=lambda d, n: seen.append((d, n)))
    assert calls == {"body": 1, "head": 0}
    assert seen == [(1, 3), (2, 3), (3, 3)]


def test_the_token_cap_follows_one_layer_not_the_model():
    """The cap is set by one layer's heads x T^2 (LAYER_ARRAYS of them), not layers x heads:
    24 layers cap no lower than 2."""
    tokenizer = byte_tokenizer()
    text = "x" * 3000
    budget = heads.LAYER_ARRAYS * 4 * 4 * 600**2  # 600 tokens of one 4-head layer
    deep = analyze_heads(tiny_model("bloom", n_layer=24), tokenizer, text, budget_bytes=budget)
    shallow = analyze_heads(tiny_model("bloom", n_layer=2), tokenizer, text, budget_bytes=budget)
    assert deep.seq_len == shallow.seq_len == 600
    assert "600" in deep.truncated
    with pytest.raises(BudgetError):
        analyze_heads(tiny_model("bloom"), tokenizer, text, budget_bytes=8)


def test_memory_budget_is_a_share_of_what_is_free_or_the_fixed_one(monkeypatch):
    """Default: a quarter of the memory psutil reports available; ALIBI_VIZ_MEMORY_BUDGET_MB
    fixes it (a class server); a bad value is a typed error naming the variable."""
    import psutil

    from alibi_viz.errors import AlibiVizError

    monkeypatch.delenv(heads.MEMORY_BUDGET_ENV, raising=False)
    available = psutil.virtual_memory().available
    assert abs(heads.memory_budget() - available // heads.MEMORY_SHARE) < 256 << 20
    monkeypatch.setenv(heads.MEMORY_BUDGET_ENV, "512")
    assert heads.memory_budget() == 512 << 20
    for bad in ("lots", "-1", "0"):
        monkeypatch.setenv(heads.MEMORY_BUDGET_ENV, bad)
        with pytest.raises(AlibiVizError, match=heads.MEMORY_BUDGET_ENV):
            heads.memory_budget()


def test_sessions_reading_texts_at_once_get_their_own_results():
    """Four threads (four students' new texts) run the one pass on one shared model at once,
    two texts between them: each gets what it gets alone (the hooks act only in the thread
    that registered them)."""
    import threading

    torch.set_num_threads(1)
    model, tokenizer = tiny_model("bloom", n_layer=3), byte_tokenizer()
    texts = [TEXT, "x = [1, 2, 3]\nprint(sum(x))\n" * 4]
    alone = [analyze_heads(model, tokenizer, t, split_layers=(1,)) for t in texts]
    got, errors = {}, []

    def run(k):
        try:
            for _ in range(3):
                got[k] = analyze_heads(model, tokenizer, texts[k % 2], split_layers=(1,))
        except Exception as exc:  # noqa: BLE001 (each failure is the finding)
            errors.append(repr(exc))

    threads = [threading.Thread(target=run, args=(k,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    for k, analysis in got.items():
        want = alone[k % 2]
        assert analysis.tokens == want.tokens
        np.testing.assert_array_equal(analysis.stats.mean_distance, want.stats.mean_distance)
        for a, b in zip(analysis.layers, want.layers, strict=True):
            np.testing.assert_array_equal(a.images, b.images)
        np.testing.assert_array_equal(analysis.splits[1]["textbook"].parts["total"].images,
                                      want.splits[1]["textbook"].parts["total"].images)
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in model.modules())


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("kind", ["bloom", "mpt", "falcon"])
def test_one_pass_in_16_bit_gives_what_every_map_at_once_gave(kind, dtype):
    """The same equality for ALiBi models in bfloat16 and float16 (the maps are read as
    float32 from the model's 16-bit probabilities, and the split reproduces them)."""
    torch.set_num_threads(1)
    model, tokenizer = tiny_model(kind).to(dtype), byte_tokenizer()
    analysis = analyze_heads(model, tokenizer, TEXT, split_layers=(1,), bias_shown=heads.BIAS_SHOWN)
    assert sorted(analysis.splits) == [1]
    assert_same(analysis, reference(model, tokenizer, TEXT, None, (1,)))
