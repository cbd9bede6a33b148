"""The server holds each model once, whichever pages show it."""

from alibi_viz import assets
from alibi_viz.models import loading
from alibi_viz_app import ui
from alibi_viz_app.testing import run_app


def test_every_page_that_shows_the_shipped_alibi_model_shares_one_object(monkeypatch):
    """Model heads, the Lesson's real-head step and the Extrapolation lab load the shipped ALiBi
    model once between them (their cache keys were once built from different arguments, so
    the server held it twice)."""
    loads = []
    real_load = loading.load_model

    def counting_load(path, *args, **kwargs):
        loads.append(str(path))
        return real_load(path, *args, **kwargs)

    monkeypatch.setattr(loading, "load_model", counting_load)
    ui._cached_model.clear()
    for page, params in [("model_heads", {}), ("lesson", {"step": "5"}), ("extrapolation", {})]:
        at = run_app(page, params)
        assert not at.exception, (page, at.exception)
    alibi = str((assets.MODELS_DIR / assets.DEFAULT_MODEL).resolve())
    assert loads.count(alibi) == 1, loads
