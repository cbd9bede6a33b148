"""`make run`'s server: the app, with the first visitor's costs paid as it starts.

    python -m alibi_viz_app.serve [streamlit run options]     # e.g. --server.port 8501

A just-started `streamlit run alibi_viz_app/main.py` makes its first visitor wait for everything a
process does once: importing torch, transformers and the plotting stack (alibi_viz_app/preload.py),
loading the shipped models, and the Model heads page's analyses of its default text, which
every later visitor reads from the caches. Measured on 2 cores (bench/bench_interactions.py),
that first chart of /model took 2.2x as long as on a warm server. Here:

1. the heavy imports happen before the server opens its port (so they are paid before
   anyone can connect);
2. once the server answers, a background thread runs each page once with its default URL
   over Streamlit's websocket, as a browser would (alibi_viz_app/warm_up.py, which the class
   deployment runs for each replica), so the models are loaded and the default analyses
   cached by the time a student arrives. A visitor who comes earlier shares the work in
   progress (Streamlit's caches compute each value once) instead of starting it again.

ALIBI_VIZ_WARM_UP=0 skips step 2.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
import urllib.request
from pathlib import Path

from streamlit.web import cli

import alibi_viz_app.preload  # noqa: F401 (the imports every first run needs, paid before the port opens)
from alibi_viz_app.warm_up import TIMEOUT_S as WARM_UP_TIMEOUT_S
from alibi_viz_app.warm_up import warm_up as warm_up_page

HERE = Path(__file__).resolve().parent
# URL paths: the landing page first (most students open it first, and it is quick), then the
# heaviest first
PAGES = ("", "model", "lesson", "extrapolation", "compare", "inspect")


def _port(args: list[str]) -> int:
    for i, arg in enumerate(args):
        if arg.startswith("--server.port="):
            return int(arg.split("=", 1)[1])
        if arg == "--server.port" and i + 1 < len(args):
            return int(args[i + 1])
    return 8501


def warm_up(port: int, log=print) -> None:
    """Wait for the server on `port`, then run every page once (alibi_viz_app/warm_up.py)."""
    for _ in range(600):
        try:
            if urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health",
                                      timeout=1).read() == b"ok":
                break
        except OSError:
            time.sleep(0.2)
    start = time.perf_counter()
    for page in PAGES:
        try:
            ok = asyncio.run(asyncio.wait_for(warm_up_page(port, page, ""), WARM_UP_TIMEOUT_S))
        except (OSError, TimeoutError) as exc:
            ok = False
            log(f"alibi-viz: warming up /{page} failed: {exc!r}")
        if not ok:
            log(f"alibi-viz: warming up /{page}: the run did not finish cleanly")
    log(f"alibi-viz: every page warmed up in {time.perf_counter() - start:.1f} s")


def main() -> None:
    args = sys.argv[1:]
    if os.environ.get("ALIBI_VIZ_WARM_UP", "1") != "0":
        threading.Thread(target=warm_up, args=(_port(args),), daemon=True).start()
    sys.argv = ["streamlit", "run", str(HERE / "main.py"), *args]
    sys.exit(cli.main())


if __name__ == "__main__":
    main()
