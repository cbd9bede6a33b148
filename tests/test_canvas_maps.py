"""The canvas maps: 8-bit codes (`display.quantize`), the attention grid and the bias grid as
MapSets (`figures.heads.attention_grid_maps`, `figures.bias.bias_grid_maps`), the component's
payload (`canvas_maps.data`), and the Model heads page and the bias explorer drawing their
first figure with it."""

import base64
import json
import zlib

import numpy as np
import pytest

from alibi_viz import alibi_slopes
from alibi_viz.alibi import alibi_bias
from alibi_viz.display import CODE_MASKED, IMAGE_PIXEL_BUDGET, StackView, masked_pixels, quantize
from alibi_viz.figures.bias import CLIP_LOGITS, bias_grid_maps
from alibi_viz.figures.heads import attention_grid_maps, log_floor
from alibi_viz.figures.render import bar_ticks
from alibi_viz_app import canvas_maps
from alibi_viz_app.testing import figure_keys, run_app


def test_quantize_spreads_the_scale_over_255_codes_and_marks_what_has_no_value():
    """vmin is code 0, vmax code 254, values outside are clipped, NaN and inf are 255, and a
    code reads back to within half a step."""
    values = np.array([-6.0, -5.0, -2.5, 0.0, 1.0, np.nan, -np.inf], dtype=np.float32)
    codes = quantize(values, -5.0, 0.0)
    assert codes.dtype == np.uint8
    assert codes.tolist() == [0, 0, 127, 254, 254, CODE_MASKED, CODE_MASKED]
    grid = np.linspace(-5, 0, 1001, dtype=np.float32)
    back = -5 + quantize(grid, -5, 0) / 254 * 5
    assert np.abs(back - grid).max() <= 0.5 * 5 / 254 + 1e-6


def test_bar_ticks_are_round_values_inside_the_bar():
    """The colour bar's ticks: every decade of a log scale, fifths of a linear one."""
    assert [label for _at, label in bar_ticks(-5, 0)] == ["−5", "−4", "−3", "−2", "−1", "0"]
    ticks = bar_ticks(0, 1)
    assert ticks[0] == (0.0, "0.0") and ticks[-1] == (1.0, "1.0") and len(ticks) == 6


def causal_view(heads: int, T: int, side: int) -> StackView:
    """Pooled maps of a causal layer (each query row uniform over its keys), as analyze_heads
    keeps them: `side` pixels a side."""
    rng = np.random.default_rng(0)
    images = rng.uniform(1e-4, 1, size=(heads, side, side)).astype(np.float32)
    images[:, masked_pixels(T, side, side)] = 0.0
    positions = np.arange(4)
    return StackView(images=images, hover=np.zeros((heads, 4, 4), np.float32),
                     hover_rows=positions, hover_cols=positions, seq_len=T,
                     reduced="block max" if side < T else None)


def test_attention_grid_maps_codes_the_layer_s_pixels_with_the_mask_grey():
    """Every head's pixels, log10-coloured down to log_floor(T), masked pixels 255, the
    layer's title and the slopes in the panel titles, the training length marked."""
    view = causal_view(heads=4, T=200, side=64)
    maps = attention_grid_maps(view, [f"t{i}" for i in range(200)], 1,
                               slopes=[0.5, 0.25, 0.125, 0.0625], train_seq_len=128)
    assert maps.codes.shape == (4, 64, 64)
    assert (maps.codes[:, masked_pixels(200, 64, 64)] == CODE_MASKED).all()
    assert (maps.vmin, maps.vmax, maps.reads) == (log_floor(200), 0.0, "log10")
    assert maps.title.startswith("Layer 2:") and "block max to 64 px" in maps.title
    assert maps.panel_titles[1] == "head 2: m=0.25" and maps.marker == 128
    linear = attention_grid_maps(view, [f"t{i}" for i in range(200)], 0, scale="linear")
    assert (linear.vmin, linear.vmax, linear.reads, linear.marker) == (0.0, 1.0, "linear", None)


def test_the_payload_carries_codes_not_floats_and_stays_small_at_2048_tokens():
    """At 2,048 tokens the payload is the pooled codes deflated (they read back exactly), a
    byte a pixel at most, tokens cut to TOKEN_CHARS, and plain JSON."""
    T, heads = 2048, 8
    side = int(np.sqrt(IMAGE_PIXEL_BUDGET / heads))
    tokens = ["x" * 30] + [f"tok{i}" for i in range(1, T)]
    maps = attention_grid_maps(causal_view(heads, T, side), tokens, 0)
    payload = canvas_maps.data(maps, filename="attention_L1")
    codes = np.frombuffer(zlib.decompress(base64.b64decode(payload["codes"])), np.uint8)
    assert np.array_equal(codes.reshape(heads, side, side), maps.codes)
    assert (payload["panels"], payload["rows"], payload["cols"]) == (heads, side, side)
    assert payload["tokens"][0] == "x" * (canvas_maps.TOKEN_CHARS - 1) + "…"
    assert len(payload["lut"]) == 256 * 6
    assert len(json.dumps(payload)) < 4 / 3 * heads * side * side + 60_000


def codes_of(payload: dict) -> np.ndarray:
    codes = np.frombuffer(zlib.decompress(base64.b64decode(payload["codes"])), np.uint8)
    return codes.reshape(payload["panels"], payload["rows"], payload["cols"])


def test_bias_grid_maps_code_the_bias_with_the_mask_as_255():
    """8 heads, 64 tokens, clipped: one pixel a position, the bias read back from its code
    within half a step of the closed form clipped at -10, every key after its query 255, a
    plain title (no plotly markup); symmetric has no masked pixel."""
    slopes = alibi_slopes(8)
    maps = bias_grid_maps(slopes, 64, "causal")
    assert maps.codes.shape == (8, 64, 64) and maps.sampled and maps.key_len is None
    truth = alibi_bias(slopes, 64)
    above = np.triu(np.ones((64, 64), bool), 1)
    assert (maps.codes[:, above] == CODE_MASKED).all()
    assert (maps.codes[:, ~above] != CODE_MASKED).all()
    back = -CLIP_LOGITS + maps.codes[:, ~above] / 254 * CLIP_LOGITS
    assert np.abs(back - np.maximum(truth[:, ~above], -CLIP_LOGITS)).max() <= CLIP_LOGITS / 254
    assert maps.title.startswith("ALiBi bias Bᵢⱼ (causal") and "<" not in maps.title
    assert maps.panel_titles[0] == "head 1: m=0.5"
    assert not (bias_grid_maps(slopes, 64, "symmetric").codes == CODE_MASKED).any()


def test_bias_grid_maps_read_back_the_bias_on_each_head_s_own_scale_and_in_a_decoding_step():
    """Per head: each panel spans [-1, 0] and its scale m (L - 1) comes along, so the hover
    reads the bias; a decoding step is 16 query rows against the keys, whose count it names,
    the last of them unmasked."""
    slopes = alibi_slopes(8)
    maps = bias_grid_maps(slopes, 64, "causal", scale="per_head")
    assert maps.vmin == -1.0 and maps.panel_scales == pytest.approx(slopes * 63)
    maps = bias_grid_maps(slopes, 16, "causal", key_len=512)
    assert maps.codes.shape[:2] == (8, 16) and maps.key_len == 512 and maps.seq_len == 16
    assert not (maps.codes[:, -1] == CODE_MASKED).any()  # the newest query sees every key
    assert (maps.codes[:, 0, -1] == CODE_MASKED).all()  # query 496 does not see key 511


@pytest.mark.parametrize("heads", [12, 32, 40, 64, 128])
def test_bias_payload_of_many_heads_at_65536_tokens_is_codes_at_display_size(heads):
    """Any head count at 65,536 tokens: panels pooled to display size (the pixel budget shared
    by the heads), codes that read back as sent, the mask still 255 above the diagonal, and a
    payload of at most a byte and a third a pixel."""
    maps = bias_grid_maps(alibi_slopes(heads), 65_536, "causal")
    payload = canvas_maps.data(maps, filename="bias")
    side = payload["rows"]
    assert payload["panels"] == heads and side == payload["cols"]
    assert heads * side * side <= IMAGE_PIXEL_BUDGET
    codes = codes_of(payload)
    assert np.array_equal(codes, maps.codes)
    assert (codes[:, masked_pixels(65_536, side, side)] == CODE_MASKED).all()
    assert len(json.dumps(payload)) < 4 / 3 * heads * side * side + 30_000


def test_bias_explorer_draws_its_matrices_on_the_canvas_and_plotly_on_demand():
    """On a laptop / draws the bias matrices through the canvas component (8 panels, the mask
    coded 255) and, with *Interactive charts* on, its plotly charts (slopes, the same grid,
    decay) as before; turned off, no plotly chart is left, the canvas stays and the slopes and
    the decay are still pictures."""
    at = run_app()
    assert not at.exception
    assert at.toggle(key="be_interactive").value is True
    (maps,) = at.get("bidi_component")
    assert maps.key == "be_maps_grid"
    payload = json.loads(maps.proto.json)
    assert payload["panels"] == 8 and payload["title"].startswith("ALiBi bias")
    assert (codes_of(payload)[:, 0, 1:] == CODE_MASKED).all()
    assert figure_keys(at) == ["be_fig_slopes", "be_fig_grid", "be_fig_decay"]
    at.toggle(key="be_interactive").set_value(False).run()
    assert not at.exception
    assert figure_keys(at) == []
    assert [e.key for e in at.get("bidi_component")] == ["be_maps_grid"]
    stills = [h.proto.body for h in at.get("html") if "avz-still" in h.proto.body]
    assert len(stills) == 2 and all("data:image/svg+xml;base64," in body for body in stills)
    at.number_input(key="be_heads").set_value(64).run()
    assert json.loads(at.get("bidi_component")[0].proto.json)["panels"] == 64



def test_model_heads_draws_its_grid_on_the_canvas_and_plotly_on_demand():
    """On a laptop (no phone in the user agent) /model draws the canvas grid and, with
    *Interactive charts* on, its plotly charts as before; turned off, no plotly chart is
    left and the canvas stays."""
    at = run_app("model_heads", {"text": "def add(a, b):\n    return a + b\n"})
    assert not at.exception
    assert at.toggle(key="mh_interactive").value is True
    assert [e.key for e in at.get("bidi_component")] == ["mh_maps_grid"]
    assert figure_keys(at)[:3] == ["mh_fig_grid", "mh_fig_row", "mh_fig_stats"]
    at.toggle(key="mh_interactive").set_value(False).run()
    assert not at.exception
    assert figure_keys(at) == []
    assert [e.key for e in at.get("bidi_component")] == ["mh_maps_grid"]
