"""Helpers for Streamlit AppTest tests: run a page, read its plotly figures."""

from __future__ import annotations

import json
from pathlib import Path

from streamlit.testing.v1 import AppTest

MAIN = str(Path(__file__).resolve().parents[1] / "app" / "main.py")


def run_app(path: str = "", params: dict | None = None, timeout: float = 180) -> AppTest:
    """Run the app on page `path` ("" is the landing page) with `params` in the URL.

    AppTest must run once before it can switch pages (before a first run it knows pages only
    by file name, not by their url_path), and that first run on the landing page writes the
    landing page's own state into the URL; so for another page the URL is set afresh just
    before switching, as a browser opening /path?params would have it. A `lang` in `params` is
    in the URL from the first run on, since a session takes its language from its first URL.
    """
    at = AppTest.from_file(MAIN, default_timeout=timeout)
    if path:
        if "lang" in (params or {}):
            at.query_params["lang"] = params["lang"]
        at.run()
        at.query_params.clear()
        at.switch_page(path if path.endswith(".py") else f"app_pages/{path}.py")
    for key, value in (params or {}).items():
        at.query_params[key] = value
    return at.run()


def figures(at: AppTest) -> list[dict]:
    """Every plotly chart on the page, as its figure dict."""
    return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


def figure_titles(at: AppTest) -> list[str]:
    """Each figure's title as one line (pages break long titles with <br> to fit the screen)."""
    return [(fig.get("layout", {}).get("title") or {}).get("text", "").replace("<br>", " ")
            for fig in figures(at)]


def warnings(at: AppTest) -> list[str]:
    return [w.value for w in at.warning]


def figure_keys(at: AppTest) -> list[str]:
    """The widget key of every plotly chart on the page, in page order (e.g. "mh_fig_grid"):
    which figures a page drew, by name. Streamlit's element id ends with the key."""
    return [chart.proto.id.split("-", 2)[-1] for chart in at.get("plotly_chart")]


# The figures each page draws on its first screen, by key.
HEADS_FIGURES = ["mh_fig_grid", "mh_fig_row", "mh_fig_stats", "mh_fig_gallery",
                 "mh_fig_gallery_map"]
# the shipped ALiBi model: which heads matter, and its training snapshots
MODEL_HEADS_FIGURES = [*HEADS_FIGURES, "mh_fig_ablation", "mh_fig_training"]
INSPECT_HEADS_FIGURES = [key.replace("mh_", "im_") for key in HEADS_FIGURES]
