"""The notebook surface (alibi_viz/notebook.py): each show_* call returns one plotly figure, and
the example notebook runs top to bottom in a real Jupyter kernel of this interpreter, every
figure in its outputs as plotly's mime type, no errors."""

import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest

import alibi_viz
from alibi_viz.errors import AlibiVizError
from alibi_viz.tiny_models import byte_tokenizer, tiny_model

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "examples" / "inspect_a_model.ipynb"
PLOTLY_MIME = "application/vnd.plotly.v1+json"
SHORT = "def add(a, b):\n    return a + b\n"


@pytest.fixture(scope="module")
def bloom():
    return tiny_model("bloom", n_layer=3), byte_tokenizer()


def test_show_heads_every_layer_under_a_slider(bloom):
    """layer=None: one figure, one slider step per layer, each step showing that layer's traces
    only and its title."""
    model, tokenizer = bloom
    layers = model.config.n_layer
    fig = alibi_viz.show_heads(model, tokenizer, SHORT * 4)
    [slider] = fig.layout.sliders
    assert [s.label for s in slider.steps] == [str(layer) for layer in range(1, layers + 1)]
    shown = [t.visible for t in fig.data]
    assert shown == list(slider.steps[0].args[0]["visible"]) and sum(shown) == len(shown) // layers
    assert slider.steps[-1].args[1]["title.text"].startswith(f"Layer {layers}:")
    assert fig.layout.title.text.startswith("Layer 1:")


def test_show_heads_one_layer_is_that_layers_grid(bloom):
    """layer=k (0-based): the plain grid of layer k+1, no slider; a layer the model lacks is a
    typed error that names the range."""
    model, tokenizer = bloom
    last = model.config.n_layer - 1
    fig = alibi_viz.show_heads(model, tokenizer, SHORT, layer=last)
    assert fig.layout.title.text.startswith(f"Layer {last + 1}:") and not fig.layout.sliders
    with pytest.raises(AlibiVizError, match=f"from 0 to {last}"):
        alibi_viz.show_heads(model, tokenizer, SHORT, layer=last + 1)
    with pytest.raises(AlibiVizError, match="tokenizer"):
        alibi_viz.show_heads(model, None, SHORT)


def test_show_heads_payload_is_bounded_for_many_layers():
    """24 layers x 16 heads at 256 tokens: images, never T x T hover floats; a few MB at most."""
    from alibi_viz.notebook import attention_layers_figure

    rng = np.random.default_rng(0)
    maps = [np.tril(rng.random((16, 256, 256), dtype=np.float32)) for _ in range(24)]
    fig = attention_layers_figure(maps, ["a"] * 256, list(range(24)))
    assert {t.type for t in fig.data} == {"image", "scatter", "heatmap"}
    assert len(fig.to_json()) < 3_000_000


def test_show_bias_check_and_gallery_return_figures(bloom):
    """show_bias draws one panel per head; show_check states the verdict in the subtitle and
    refuses what is not an AlibiCheck; show_gallery colours every head."""
    model, tokenizer = bloom
    heads = 8
    bias = alibi_viz.show_bias(heads, 64)
    assert "ALiBi bias" in bias.layout.title.text and len(bias.data[1].text) == heads
    check = alibi_viz.check_alibi(model, tokenizer, decode=False)
    fig = alibi_viz.show_check(check)
    assert fig.layout.title.subtitle.text.startswith("Conforms")
    with pytest.raises(AlibiVizError, match="AlibiCheck"):
        alibi_viz.show_check(check.to_dict())
    gallery = alibi_viz.show_gallery(model, tokenizer)
    cells = sum(len(t.x) for t in gallery.data if t.name)
    assert cells == model.config.n_layer * model.config.n_head


def kernel_manager(folder: Path):
    """A kernel of this very interpreter (sys.executable), from a kernel spec written into
    `folder`: it does not depend on any kernel registered on the machine (a fresh clone has
    none, and a user's `python3` kernel may be another Python)."""
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager

    spec = folder / "kernels" / "alibi-viz-test"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "alibi-viz test", "language": "python"}))
    specs = KernelSpecManager(kernel_dirs=[str(folder / "kernels")], ensure_native_kernel=False)
    return KernelManager(kernel_name="alibi-viz-test", kernel_spec_manager=specs)


def test_example_notebook_runs_with_plotly_figures(tmp_path):
    """examples/inspect_a_model.ipynb executed by nbclient in a kernel of this interpreter,
    from a scratch folder: no cell errors, every show_* cell's output is one plotly figure
    (application/vnd.plotly.v1+json), its last expression's; a show_* call that is not a
    cell's last expression shows nothing, since alibi_viz.notebook displays nothing itself."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    calls = [c for c in notebook.cells if c.cell_type == "code" and "show_" in c.source]
    silent = nbformat.v4.new_code_cell("fig = alibi_viz.show_bias(num_heads=4, seq_len=16)")
    notebook.cells.append(silent)
    notebook.cells.append(nbformat.v4.new_code_cell("import sys; print(sys.executable)"))
    client = nbclient.NotebookClient(notebook, km=kernel_manager(tmp_path), timeout=180,
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()  # raises CellExecutionError on the first cell that fails

    def figures(cell) -> list[dict]:
        return [o for o in cell.outputs if PLOTLY_MIME in o.get("data", {})]

    assert not figures(silent)  # assigned, not the cell's value: nothing shown
    for cell in calls:
        # Jupyter displays a cell's last expression and show_* nothing by itself: one figure
        assert len(figures(cell)) == 1, cell.source
        assert figures(cell)[0]["data"][PLOTLY_MIME]["data"], cell.source
    # every show_* function of alibi_viz.notebook is shown at least once
    assert {name for cell in calls for name in re.findall(r"\bshow_\w+", cell.source)} == {
        name for name in vars(alibi_viz.notebook) if name.startswith("show_")}
    errors = [o for c in notebook.cells if c.cell_type == "code" for o in c.outputs
              if o.output_type == "error"]
    assert not errors
    printed = "".join(o.get("text", "") for o in notebook.cells[-1].outputs)
    assert printed.strip() == sys.executable
