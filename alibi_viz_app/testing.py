"""Helpers for testing and benchmarking the app: its server, Debian's chromium, the class
deployment, and AppTest runs of a page with its plotly figures read back.

Like `streamlit.testing`, they ship with the package, so the tests and the benchmarks import
them as the installed project (`from alibi_viz_app.testing import start_streamlit`) and no
script edits sys.path. `start_streamlit` runs this package's own main.py; the class stack runs
the checkout's deploy/run.sh.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from streamlit.testing.v1 import AppTest

MAIN = str(Path(__file__).resolve().parent / "main.py")


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


# ----------------------------------------------------------------------------- the server

ROOT = Path(__file__).resolve().parents[1]  # the checkout, for an editable install
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
# Lighthouse's mobile profile's browser (a Moto G Power): "Mobile" in it, as in every phone's,
# so the app starts a page as it does for a phone (`ui.on_phone`).
PHONE_UA = ("Mozilla/5.0 (Linux; Android 11; moto g power (2022)) AppleWebKit/537.36 "
            "(KHTML, like Gecko) Chrome/120.0.0.0 Mobile Safari/537.36")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_streamlit(port: int, env: dict | None = None, log_name: str = "streamlit.log"):
    """Start `streamlit run` of this package's main.py on 127.0.0.1:port; return (process, base url)."""
    ARTIFACTS.mkdir(exist_ok=True)
    log = open(ARTIFACTS / log_name, "w")  # noqa: SIM115 (closed with the process)
    cmd = [sys.executable, "-m", "streamlit", "run", MAIN, "--server.port", str(port),
           "--server.headless", "true", "--server.address", "127.0.0.1",
           "--server.fileWatcherType", "none", "--browser.gatherUsageStats", "false"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                            env={**os.environ, **(env or {})})
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"streamlit exited early; see {ARTIFACTS / log_name}")
        try:
            with urllib.request.urlopen(url + "/_stcore/health", timeout=2) as response:
                if response.read().strip() == b"ok":
                    return proc, url
        except OSError:
            time.sleep(0.3)
    proc.kill()
    raise RuntimeError("streamlit did not become healthy within 60 s")


def stop_streamlit(proc) -> None:
    """Stop a server started by start_streamlit: terminate, then kill after 10 s."""
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()


# ----------------------------------------------------------------------------- class deployment

DEPLOY = ROOT / "deploy" / "run.sh"
NGINX = "/usr/sbin/nginx"


@dataclass
class ClassStack:
    """A running `deploy/run.sh` stack: nginx at `url` in front of `replica_ports`; `timing`
    is the replicas' ALIBI_VIZ_TIMING_LOG when one was given."""

    url: str
    run_dir: Path
    replica_ports: list[int]
    env: dict = field(repr=False, default_factory=dict)
    timing: Path | None = None

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        """Run `deploy/run.sh ARGS` against this stack (status, kill-replica K, stop...)."""
        done = subprocess.run([str(DEPLOY), *args], cwd=ROOT, env=self.env,
                              capture_output=True, text=True, timeout=300)
        if check and done.returncode != 0:  # what run.sh said, not only its exit status
            raise AssertionError(f"deploy/run.sh {' '.join(args)} exited {done.returncode}:\n"
                                 f"{done.stdout}{done.stderr}")
        return done

    def pids(self) -> dict[str, int]:
        """The pid of each replica (r1, r2, ...) and of nginx's master, from the pid files."""
        return {f.stem: int(f.read_text()) for f in sorted(self.run_dir.glob("*.pid"))
                if f.read_text().strip()}


def start_class_stack(run_dir: Path, replicas: int = 2, env: dict | None = None) -> ClassStack:
    """Start `deploy/run.sh start` on free loopback ports, its files in `run_dir`."""
    ports: list[int] = []
    while len(ports) < replicas + 1:
        port = free_port()
        if port not in ports:
            ports.append(port)
    listen, replica_ports = ports[0], ports[1:]
    env = {**os.environ, **(env or {}), "ALIBI_VIZ_RUN_DIR": str(run_dir),
           "ALIBI_VIZ_REPLICA_PORTS": " ".join(map(str, replica_ports)),
           "ALIBI_VIZ_PYTHON": sys.executable}
    timing = env.get("ALIBI_VIZ_TIMING_LOG")
    stack = ClassStack(f"http://127.0.0.1:{listen}", run_dir, replica_ports, env,
                       Path(timing) if timing else None)
    done = stack.run("start", "--replicas", str(replicas), "--port", str(listen),
                     "--listen", "127.0.0.1", check=False)
    if done.returncode != 0:
        raise RuntimeError(f"deploy/run.sh start failed:\n{done.stdout}{done.stderr}")
    return stack


def stop_class_stack(stack: ClassStack) -> None:
    """`deploy/run.sh stop`: nginx and every replica, no process left behind."""
    stack.run("stop", check=False)
