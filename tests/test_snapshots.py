"""The shipped ALiBi model's training snapshots and what the app says about them (issue 23)."""

import numpy as np
import pytest
import torch

from alibi_viz import data
from alibi_viz.assets import load_snapshot_results, shipped_models, training_info
from alibi_viz.figures.training import snapshot_figure
from alibi_viz.models.behaviour import behaviour_scores
from alibi_viz.models.loading import describe_model, load_snapshot, snapshot_folders
from alibi_viz.results.snapshots import SnapshotCurves
from experiments.snapshots import heldout_loss

STEPS = [0, 30, 100, 300, 600, 1000, 2000, 3000]


@pytest.fixture(scope="module")
def results():
    return load_snapshot_results()


def test_eight_log_spaced_snapshots_ship_with_the_alibi_model():
    """Snapshots at 0, 30, 100, ..., the last training step, as the model card says."""
    assert list(snapshot_folders()) == STEPS
    assert STEPS[-1] == training_info(shipped_models()["alibi"])["steps_done"]


def test_results_cover_every_snapshot(results):
    assert results["steps"] == STEPS
    layers, heads = np.array(results["scores"]["induction"][0]).shape
    assert (layers, heads) == (4, 8)
    assert set(results["heldout_loss"]) == set(data.CORPUS_KINDS)


@pytest.mark.parametrize("step", [30, 3000])
def test_shipped_numbers_are_those_of_the_snapshot(results, step):
    """Re-measuring a snapshot gives the held-out loss and the copying scores stored for it."""
    torch.set_num_threads(min(2, torch.get_num_threads()))
    model, tokenizer = load_snapshot(snapshot_folders()[step])
    k = results["steps"].index(step)
    assert heldout_loss(model, "python", results["seq_len"]) == pytest.approx(
        results["heldout_loss"]["python"][k], abs=1e-4)
    scores = behaviour_scores(model, tokenizer, describe_model(model).config_slopes)
    assert np.allclose(scores.scores["induction"], results["scores"]["induction"][k], atol=1e-4)


def test_training_lowers_the_loss_and_forms_a_copying_head(results):
    """Step 0 is the random model (loss near ln 259 = 5.56 nats); by the end every kind's loss
    has fallen below 2 nats and one head copies (score 0.25 at step 3,000, from 0.01)."""
    curves = SnapshotCurves.from_dict(results)
    for kind, loss in curves.heldout_loss.items():
        assert loss[0] > 5 and loss[-1] < 2, kind
    layer, head = curves.best_copying_head()
    assert curves.scores["induction"][-1, layer, head] > 0.2
    assert curves.scores["induction"][0].max() < 0.1


def test_phase_change_is_the_largest_rise_between_snapshots(results):
    curves = SnapshotCurves.from_dict(results)
    before, after, share = curves.phase_change()
    layer, head = curves.best_copying_head()
    curve = curves.scores["induction"][:, layer, head]
    k = STEPS.index(before)
    assert STEPS[k + 1] == after
    assert share == pytest.approx((curve[k + 1] - curve[k]) / (curve.max() - curve[0]))


def test_the_figure_reads_numbers_and_runs_no_model(results, monkeypatch):
    """The training figure is drawn from the shipped numbers alone: with every torch module
    call refused, it still draws one line per head and one per kind of text."""
    def refuse(*args, **kwargs):
        raise AssertionError("the figure ran a model")

    monkeypatch.setattr(torch.nn.Module, "__call__", refuse)
    fig = snapshot_figure(SnapshotCurves.from_dict(results), step=300)
    assert len(fig.data) == 4 * 8 + len(data.CORPUS_KINDS)
    assert fig.layout.xaxis.ticktext[0] == "0"
