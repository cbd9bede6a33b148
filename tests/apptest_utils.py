"""Helpers for Streamlit AppTest tests: run a page, read its plotly figures."""

from __future__ import annotations

import json
from pathlib import Path

from streamlit.testing.v1 import AppTest

MAIN = str(Path(__file__).resolve().parents[1] / "app" / "main.py")


def run_app(path: str = "", params: dict | None = None, timeout: float = 120) -> AppTest:
    """Run the app at URL path `path` ("" is the landing page) with query parameters.

    AppTest always starts on the landing page, which rewrites the URL with its own controls;
    for another page the parameters are set after that first run, just before switching, as
    a browser opening /path?params would have them.
    """
    at = AppTest.from_file(MAIN, default_timeout=timeout)
    if not path:
        for key, value in (params or {}).items():
            at.query_params[key] = value
        return at.run()
    at.run()
    at.query_params.clear()
    for key, value in (params or {}).items():
        at.query_params[key] = value
    return at.switch_page(path if path.endswith(".py") else f"{path}.py").run()


def figures(at: AppTest) -> list[dict]:
    """Every plotly chart on the page, as its figure dict."""
    return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


def figure_titles(at: AppTest) -> list[str]:
    return [(fig.get("layout", {}).get("title") or {}).get("text", "") for fig in figures(at)]


def warnings(at: AppTest) -> list[str]:
    return [w.value for w in at.warning]
