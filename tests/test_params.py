"""URL parameter parsing: any string in, a valid value (and a warning when bad) out."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from alibi_viz.positional import DEFAULT_METHODS
from alibi_viz_app.query_params import (
    UrlParam,
    format_head_selection,
    parse_head_selection,
    parse_methods,
    parse_param,
)

HEADS = UrlParam("heads", "int", 8, 1, 128)
MAX_BIAS = UrlParam("max_bias", "float", 8.0, 0.5, 16.0)
MODE = UrlParam("mode", "choice", "causal", choices=("causal", "symmetric"))


def test_valid_int_is_used_without_warning():
    """A valid value is returned as an int with no warning."""
    assert parse_param(HEADS, "12") == (12, None)


@pytest.mark.parametrize("raw", ["-3", "0", "abc", "1e12", str(10**12), "12.5", "", "١٢", "NaN"])
def test_bad_int_falls_back_with_warning(raw):
    """Negative, zero, non-numeric, float, huge and unicode digits fall back to the default."""
    value, warning = parse_param(HEADS, raw)
    assert value == 8 and "heads" in warning


def test_float_rejects_nan_and_inf():
    """NaN and infinity are not numbers a slider can show."""
    for raw in ("nan", "inf", "-inf"):
        assert parse_param(MAX_BIAS, raw)[0] == 8.0


def test_choice_is_case_insensitive_and_strict():
    """Choices match case-insensitively; unknown ones warn."""
    assert parse_param(MODE, "Symmetric") == ("symmetric", None)
    value, warning = parse_param(MODE, "bidirectional")
    assert value == "causal" and "causal, symmetric" in warning


def test_repeated_key_uses_last_value_and_warns():
    """?heads=4&heads=16 uses 16 and says the key was repeated."""
    value, warning = parse_param(HEADS, ["4", "16"])
    assert value == 16 and "2 times" in warning


def test_overlong_value_is_refused():
    """A 10,000-character value is refused before parsing."""
    value, warning = parse_param(HEADS, "9" * 10_000)
    assert value == 8 and "too long" in warning


@given(st.one_of(st.text(max_size=50), st.lists(st.text(max_size=10), max_size=4)))
def test_any_input_gives_valid_value(raw):
    """Whatever arrives, the value is within range and never raises."""
    value, _ = parse_param(HEADS, raw)
    assert isinstance(value, int) and 1 <= value <= 128
    value, _ = parse_param(MAX_BIAS, raw)
    assert 0.5 <= value <= 16.0


def test_head_selection_ranges():
    """"1-3,8" selects heads 1, 2, 3 and 8 (returned 0-based)."""
    assert parse_head_selection("1-3,8", 8) == ([0, 1, 2, 7], None)


def test_head_selection_out_of_range_warns():
    """Heads beyond the head count are dropped with a warning; nothing left means all heads."""
    heads, warning = parse_head_selection("9-12", 8)
    assert heads == list(range(8)) and "not valid" in warning


@given(st.text(max_size=30), st.integers(1, 128))
def test_head_selection_never_raises(text, num_heads):
    """Any text gives a non-empty list of valid head indices."""
    heads, _ = parse_head_selection(text, num_heads)
    assert heads and all(0 <= h < num_heads for h in heads)


def test_head_selection_round_trips():
    """format_head_selection writes what parse_head_selection reads."""
    for heads in ([0, 1, 2, 7], [3], list(range(8))):
        assert parse_head_selection(format_head_selection(heads, 8), 8)[0] == heads


def test_parse_methods_never_raises():
    """Known names pass, unknown ones are dropped with a warning, only unknown -> defaults."""
    assert parse_methods("alibi, T5,alibi") == (["alibi", "t5"], None)
    names, warning = parse_methods("alibi,bogus")
    assert names == ["alibi"] and "'bogus'" in warning and "dropped" in warning
    names, warning = parse_methods("<script>")
    assert names == list(DEFAULT_METHODS) and "defaults" in warning
    assert parse_methods("") == ([], None)
