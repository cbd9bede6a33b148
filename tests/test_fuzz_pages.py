"""Fuzzing every page's URL: whatever the query string, no exception reaches the page."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from alibi_viz_app.testing import run_app, warnings

PAGES = {
    "": ["heads", "len", "mode", "schedule", "max_bias", "show", "scale", "decode"],
    "compare": ["methods", "len", "mode", "xscale", "alibi.slope", "t5.num_buckets"],
    "model_heads": ["model", "layer", "head", "text", "example", "bias"],
    "inspect_model": ["source", "model", "path", "repo", "layer", "head", "text"],
    "extrapolation": ["model", "layer", "head", "length"],
    "lesson": ["step", "present"],
}
JUNK = st.one_of(
    st.sampled_from(["-3", "0", "-1", "99", "1e12", str(10**12), "2.5", "nan", "inf", "abc", "",
                     "١٢", "😀", "../../etc", "/etc/passwd", "%00", "<script>", "true", " 1 "]),
    st.integers(-10**15, 10**15).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(str),
    st.text(max_size=30),
)


def query(names):
    """A dict of 1-3 parameters of the page, each a junk value or a repeated key (a list)."""
    return st.dictionaries(st.sampled_from(names), st.one_of(JUNK, st.lists(JUNK, min_size=2, max_size=3)),
                           min_size=1, max_size=3)


@pytest.mark.slow
@pytest.mark.parametrize("path", list(PAGES))
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_query_string_keeps_the_page_alive(path, data):
    """Negative, huge, float, non-numeric, unicode and repeated values never raise on a page."""
    params = data.draw(query(PAGES[path]))
    at = run_app(path, params)
    assert not at.exception, (path, params, [e.value for e in at.exception])


@pytest.mark.parametrize("path,params", [
    ("", {"heads": "-3"}), ("", {"len": str(10**12)}), ("compare", {"len": "abc"}),
    ("model_heads", {"layer": "99"}), ("model_heads", {"head": "-1"}),
    ("extrapolation", {"length": "1e12"}), ("lesson", {"step": "99"}),
])
def test_known_bad_values_warn(path, params):
    """An out-of-range or non-numeric value shows a visible warning on its page."""
    at = run_app(path, params)
    assert not at.exception
    assert any("URL parameter" in w or "ignored" in w or "out of range" in w.lower()
               for w in warnings(at)), warnings(at)
