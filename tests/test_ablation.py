"""Head ablation (alibi_viz.models.head_ablation) finds the one head that matters."""

import copy

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from alibi_viz.errors import AlibiVizError
from alibi_viz.models.head_ablation import head_ablation, output_projections
from alibi_viz.tiny_models import tiny_model

IDS = torch.randint(3, 200, (4, 33), generator=torch.Generator().manual_seed(0))


def zero_head_weights(projection, kind: str, head: int, num_heads: int) -> None:
    """Zero the weights through which `head` writes to the residual stream: its columns of the
    output projection's (out, in) weight; GPT-2's Conv1D keeps (in, out), so its rows there."""
    with torch.no_grad():
        weight = projection.weight
        width = weight.shape[0] if kind == "gpt2" else weight.shape[1]
        head_dim = width // num_heads
        cols = slice(head * head_dim, (head + 1) * head_dim)
        if kind == "gpt2":
            weight[cols, :] = 0
        else:
            weight[:, cols] = 0


def keep_only_head(model, kind: str, num_heads: int) -> None:
    """Zero what every head but layer 1, head 2 writes to the residual stream, by construction:
    the output projection's weights that read the other heads' outputs."""
    for layer, module in enumerate(output_projections(model)):
        for head in range(num_heads):
            if (layer, head) != (0, 1):
                zero_head_weights(module, kind, head, num_heads)


@pytest.mark.parametrize("kind", ["bloom", "gpt2", "gpt_neox", "mpt", "llama"])
def test_only_the_head_that_writes_matters(kind):
    """With every other head's output projected to nothing, zeroing any other head changes the
    loss by nothing, and zeroing layer 1, head 2 changes it."""
    model = tiny_model(kind, vocab_size=259)
    layers, heads = model.config.num_hidden_layers, model.config.num_attention_heads
    keep_only_head(model, kind, heads)
    base, increase = head_ablation(model, IDS, heads)
    assert increase.shape == (layers, heads) and np.isfinite(base)
    others = np.delete(increase.ravel(), 1)
    assert np.abs(others).max() < 1e-6
    assert abs(increase[0, 1]) > 1e-4


def test_ablation_restores_the_model():
    """After an ablation the model computes what it computed before (every hook removed)."""
    model = tiny_model("bloom", vocab_size=259)
    before = model(input_ids=IDS[:, :-1]).logits
    head_ablation(model, IDS, model.config.n_head)
    assert torch.equal(model(input_ids=IDS[:, :-1]).logits, before)


def test_a_head_count_that_does_not_divide_is_refused():
    with pytest.raises(AlibiVizError):
        head_ablation(tiny_model("bloom", vocab_size=259), IDS, 5)


def reference_loss(model, ids: torch.Tensor) -> float:
    """Mean next-token cross-entropy (nats) of windows (N, T + 1), from the logits by hand."""
    with torch.no_grad():
        logits = model(input_ids=ids[:, :-1]).logits  # (N, T, vocab)
    return float(F.cross_entropy(logits.flatten(0, 1).float(), ids[:, 1:].flatten()))


def test_zeroing_a_head_is_silencing_its_values():
    """On a tiny BLOOM, each head's increase from head_ablation equals the loss increase when
    that head's value vectors are made zero in a copy of the model (its rows of
    query_key_value, which BLOOM reads as (heads, 3, head_dim)): a path that never touches the
    output projection, since attention over zero values outputs zero."""
    model = tiny_model("bloom", vocab_size=259)
    layers, heads = model.config.n_layer, model.config.n_head
    head_dim = model.config.hidden_size // heads
    base, increase = head_ablation(model, IDS, heads)
    assert base == pytest.approx(reference_loss(model, IDS), abs=1e-5)
    expected = np.zeros((layers, heads))
    for layer in range(layers):
        for head in range(heads):
            silenced = copy.deepcopy(model)
            qkv = silenced.transformer.h[layer].self_attention.query_key_value
            values = slice((3 * head + 2) * head_dim, (3 * head + 3) * head_dim)
            with torch.no_grad():
                qkv.weight[values] = 0
                qkv.bias[values] = 0
            expected[layer, head] = reference_loss(silenced, IDS) - base
    assert np.abs(expected).min() > 1e-4  # every head matters, so a wrong head would show
    np.testing.assert_allclose(increase, expected, atol=1e-5)


PROJECTION = {  # kind -> layer i's attention output projection, by transformers' own names
    "bloom": lambda model, i: model.transformer.h[i].self_attention.dense,
    "gpt2": lambda model, i: model.transformer.h[i].attn.c_proj,
    "gpt_neox": lambda model, i: model.gpt_neox.layers[i].attention.dense,
    "mpt": lambda model, i: model.transformer.blocks[i].attn.out_proj,
    "llama": lambda model, i: model.model.layers[i].self_attn.o_proj,
}


@pytest.mark.parametrize("kind", list(PROJECTION))
def test_zeroing_a_heads_input_is_removing_its_weight_columns(kind):
    """For every architecture, each head's increase from head_ablation equals the loss increase
    of a copy of the model whose output projection has that head's input columns set to zero
    (its weights, not its input at run time; rows in GPT-2's Conv1D), with the projection found
    by transformers' own module names, not by output_projections."""
    model = tiny_model(kind, vocab_size=259)
    layers, heads = model.config.num_hidden_layers, model.config.num_attention_heads
    base, increase = head_ablation(model, IDS, heads)
    expected = np.zeros((layers, heads))
    for layer in range(layers):
        for head in range(heads):
            cut = copy.deepcopy(model)
            zero_head_weights(PROJECTION[kind](cut, layer), kind, head, heads)
            expected[layer, head] = reference_loss(cut, IDS) - base
    np.testing.assert_allclose(increase, expected, atol=1e-5)


def test_shipped_ablation_is_what_the_shipped_model_gives():
    """The ALiBi model's shipped intact loss, and the shipped increase of its costliest and its
    cheapest head, are what the model gives now on the held-out windows the measurement used,
    each head silenced by the library's own hook (zeroed_head, which head_ablation runs)."""
    from alibi_viz.assets import load_ablation_results, shipped_models, shipped_train_seq_len
    from alibi_viz.models.head_ablation import zeroed_head
    from alibi_viz.models.loading import load_eval_model
    from alibi_viz.results.ablation import ablation_summary
    from experiments.ablation import heldout_windows

    torch.set_num_threads(min(2, torch.get_num_threads()))
    entry = load_ablation_results()["models"]["alibi"]
    folder = shipped_models()["alibi"]
    model = load_eval_model(folder, for_attentions=True)
    windows = torch.as_tensor(heldout_windows(seq_len=shipped_train_seq_len(folder)))
    base = reference_loss(model, windows)
    assert base == pytest.approx(entry["loss"], abs=1e-4)
    increase = np.asarray(entry["increase"])
    top = ablation_summary(entry)["top"][:2]  # the head the page names
    cheapest = np.unravel_index(np.argmin(increase), increase.shape)
    head_dim = model.config.hidden_size // model.config.n_head
    for layer, head in (top, cheapest):
        with zeroed_head(output_projections(model)[layer], int(head), head_dim):
            cost = reference_loss(model, windows) - base
        assert cost == pytest.approx(increase[layer, head], abs=1e-4), (layer, head)


def test_rank_correlation_is_spearmans():
    from alibi_viz.results.ablation import rank_correlation

    assert rank_correlation([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert rank_correlation([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert rank_correlation([1, 2, 3, 4], [1, 1, 1, 1]) == 0.0
