"""Helpers for Streamlit AppTest tests: run a page, read its plotly figures."""

from __future__ import annotations

import json
from pathlib import Path

from streamlit.testing.v1 import AppTest

MAIN = str(Path(__file__).resolve().parents[1] / "app" / "main.py")


def run_app(path: str = "", params: dict | None = None, timeout: float = 120) -> AppTest:
    """Run the app at URL path `path` ("" is the landing page) with query parameters."""
    at = AppTest.from_file(MAIN, default_timeout=timeout)
    for key, value in (params or {}).items():
        at.query_params[key] = value
    at.run()
    if path:
        at.switch_page(f"{path}.py" if not path.endswith(".py") else path).run()
    return at


def figures(at: AppTest) -> list[dict]:
    """Every plotly chart on the page, as its figure dict."""
    return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


def figure_titles(at: AppTest) -> list[str]:
    return [(fig.get("layout", {}).get("title") or {}).get("text", "") for fig in figures(at)]


def warnings(at: AppTest) -> list[str]:
    return [w.value for w in at.warning]
