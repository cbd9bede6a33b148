"""Head ablation (alibi_viz.models.ablation) finds the one head that matters."""

import numpy as np
import pytest
import torch
from model_factory import tiny_model

from alibi_viz.errors import AlibiVizError
from alibi_viz.models.ablation import head_ablation, output_projections

IDS = torch.randint(3, 200, (4, 33), generator=torch.Generator().manual_seed(0))


def keep_only_head(model, kind: str, num_heads: int) -> None:
    """Zero what every head but layer 1, head 2 writes to the residual stream, by construction:
    the output projection's weights that read the other heads' outputs."""
    with torch.no_grad():
        for layer, module in enumerate(output_projections(model)):
            weight = module.weight  # (out, in); GPT-2's Conv1D: (in, out)
            width = weight.shape[0] if kind == "gpt2" else weight.shape[1]
            head_dim = width // num_heads
            for head in range(num_heads):
                if (layer, head) == (0, 1):
                    continue
                cols = slice(head * head_dim, (head + 1) * head_dim)
                if kind == "gpt2":
                    weight[cols, :] = 0
                else:
                    weight[:, cols] = 0


@pytest.mark.parametrize("kind", ["bloom", "gpt2", "gpt_neox", "mpt", "llama"])
def test_only_the_head_that_writes_matters(kind):
    """With every other head's output projected to nothing, zeroing any other head changes the
    loss by nothing, and zeroing layer 1, head 2 changes it."""
    model = tiny_model(kind, vocab_size=259)
    heads = 4
    keep_only_head(model, kind, heads)
    base, increase = head_ablation(model, IDS, heads)
    assert increase.shape == (2, heads) and np.isfinite(base)
    others = np.delete(increase.ravel(), 1)
    assert np.abs(others).max() < 1e-6
    assert abs(increase[0, 1]) > 1e-4


def test_ablation_restores_the_model():
    """After an ablation the model computes what it computed before (every hook removed)."""
    model = tiny_model("bloom", vocab_size=259)
    before = model(input_ids=IDS[:, :-1]).logits
    head_ablation(model, IDS, 4)
    assert torch.equal(model(input_ids=IDS[:, :-1]).logits, before)


def test_a_head_count_that_does_not_divide_is_refused():
    with pytest.raises(AlibiVizError):
        head_ablation(tiny_model("bloom", vocab_size=259), IDS, 5)


def test_shipped_ablation_is_what_the_shipped_model_gives():
    """The shipped result for the ALiBi model's costliest head is what zeroing it costs now, on
    the same held-out windows; the intact loss too."""
    from alibi_viz.assets import load_ablation_results, shipped_models
    from alibi_viz.evaluate import load_eval_model
    from alibi_viz.models.ablation import ablation_summary, heldout_windows

    torch.set_num_threads(min(2, torch.get_num_threads()))
    entry = load_ablation_results()["models"]["alibi"]
    layer, head, cost, _slope = ablation_summary(entry)["top"]
    model = load_eval_model(shipped_models()["alibi"], for_attentions=True)
    windows = torch.as_tensor(heldout_windows())
    from alibi_viz.models.ablation import _loss

    base = _loss(model, windows)
    assert base == pytest.approx(entry["loss"], abs=1e-4)
    module = output_projections(model)[layer]
    width = module.in_features // 8

    def zero(_m, args):
        x = args[0].clone()
        x[..., head * width:(head + 1) * width] = 0
        return (x,)

    handle = module.register_forward_pre_hook(zero)
    try:
        assert _loss(model, windows) - base == pytest.approx(cost, abs=1e-4)
    finally:
        handle.remove()


def test_rank_correlation_is_spearmans():
    from alibi_viz.models.ablation import rank_correlation

    assert rank_correlation([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert rank_correlation([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert rank_correlation([1, 2, 3, 4], [1, 1, 1, 1]) == 0.0
