"""The project as its users install it: a wheel built from the tree, installed in a fresh venv.

An editable install (`make run`) reads the source tree, so a subpackage or a dependency missing
from pyproject.toml shows only in a real install; these tests build the wheel with `build` and
install it with pip into a venv of its own (no editable install, no system packages), the
versions held to the app's lock, as `pip install alibi-viz` and `pip install alibi-viz[app]` do.
"""

import importlib
import os
import re
import runpy
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import alibi_viz

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("alibi_viz", "alibi_viz_app")
PAGES = ("bias_explorer", "compare", "model_heads", "inspect_model", "extrapolation", "lesson")


def tree_modules(packages=PACKAGES) -> set[str]:
    """Dotted names of every .py file under the project's packages."""
    return {".".join(path.relative_to(ROOT).with_suffix("").parts)
            for package in packages for path in (ROOT / package).rglob("*.py")}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel `python -m build --wheel` makes of a copy of the tree (no build isolation:
    nothing is downloaded; a copy, so that no stale build/ folder can lend it modules)."""
    out = tmp_path_factory.mktemp("wheel")
    source = out / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", *PACKAGES):
        copy = shutil.copytree if (ROOT / name).is_dir() else shutil.copy2
        copy(ROOT / name, source / name, **({"ignore": shutil.ignore_patterns("__pycache__")}
                                            if (ROOT / name).is_dir() else {}))
    subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir",
                    str(out), str(source)], check=True, capture_output=True, timeout=300)
    (built,) = out.glob("alibi_viz-*.whl")
    return built


@pytest.fixture(scope="module")
def wheel_site(wheel) -> Path:
    """The wheel, unpacked."""
    site = wheel.parent / "site"
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(site)
    return site


class Venv:
    """A fresh venv (python -m venv: no system site packages) in `folder`."""

    def __init__(self, folder: Path):
        subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True, timeout=300)
        self.bin = folder / "bin"

    def pip_install(self, requirement: str) -> None:
        """pip install `requirement`, every version held to the app's lock (the CPU torch)."""
        done = subprocess.run([str(self.bin / "python"), "-m", "pip", "install", "--quiet",
                               "--no-compile", "-c", str(ROOT / "requirements.lock"), requirement],
                              capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]

    def run(self, *argv: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
        """A command of the venv (python, alibi-viz) run in `cwd`, with no PYTHONPATH: only what
        was installed is imported."""
        env = {**{k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")},
               **(env or {})}
        return subprocess.run([str(self.bin / argv[0]), *argv[1:]], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory) -> Venv:
    return Venv(tmp_path_factory.mktemp("venv") / "venv")


def test_the_wheel_holds_every_module_of_the_tree(wheel_site):
    """Each .py file of alibi_viz/ and alibi_viz_app/ is in the wheel, the subpackages' too;
    the wheel installs no other top-level package (no `app`, no `experiments`, no `tests`)."""
    shipped = {".".join(path.relative_to(wheel_site).with_suffix("").parts)
               for package in PACKAGES for path in (wheel_site / package).rglob("*.py")}
    assert tree_modules() - shipped == set()
    top = {p.name for p in wheel_site.iterdir() if not p.name.endswith(".dist-info")}
    assert top == set(PACKAGES)


def test_the_wheel_ships_the_catalogs_and_the_lesson_files(wheel_site):
    """The .po catalogs and the Lesson's style sheets and script are package data."""
    for lang in ("es", "ru"):
        assert (wheel_site / "alibi_viz" / "locale" / lang / "LC_MESSAGES" / "messages.po").is_file()
    pages = wheel_site / "alibi_viz_app" / "app_pages"
    assert {p.name for p in pages.glob("*.css")} | {p.name for p in pages.glob("*.js")} == {
        p.name for p in (ROOT / "alibi_viz_app" / "app_pages").glob("*.[cj]s*")}


# The two installs share one venv, the library first: installing torch again for the second
# would double the test's time and show nothing the first does not.
def test_pip_install_gives_the_library_and_its_check_without_streamlit(venv, wheel, tmp_path):
    """`pip install alibi-viz` (the wheel, no extra) in a fresh venv: every module of the
    library imports from the venv and none of them imports streamlit, and `alibi-viz check`
    on a tiny BLOOM exits 0 with its verdict."""
    venv.pip_install(str(wheel))
    modules = sorted(m.removesuffix(".__init__") for m in tree_modules(("alibi_viz",)))
    code = ("import importlib, sys\n"
            f"for name in {modules!r}:\n"
            "    module = importlib.import_module(name)\n"
            "    assert 'site-packages' in module.__file__, module.__file__\n"
            "assert 'streamlit' not in sys.modules, 'a library module imported streamlit'\n"
            "assert importlib.util.find_spec('streamlit') is None\n"
            "from alibi_viz.tiny_models import save_tiny_model\n"
            f"save_tiny_model({str(tmp_path / 'bloom')!r}, 'bloom')\n")
    done = venv.run("python", "-c", code, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    check = venv.run("alibi-viz", "check", str(tmp_path / "bloom"), cwd=tmp_path)
    assert check.returncode == 0, check.stdout[-2000:] + check.stderr[-2000:]
    assert "conforms" in check.stdout


def test_pip_install_app_extra_gives_a_server_whose_every_page_opens(venv, wheel, tmp_path):
    """`pip install alibi-viz[app]` in the same venv: every page runs in Streamlit's AppTest
    from the installed package with no exception, in a folder of its own (so nothing of the
    checkout is imported), the shipped models read from the checkout's assets/
    (ALIBI_VIZ_ASSETS_DIR)."""
    venv.pip_install(f"{wheel}[app]")
    code = ("import sys\n"
            "from alibi_viz_app.testing import run_app\n"
            f"for page in {PAGES!r}:\n"
            "    at = run_app(page)\n"
            "    assert not at.exception, (page, [e.value for e in at.exception])\n"
            "    assert 'site-packages' in sys.modules['alibi_viz_app'].__file__\n"
            "    print(page, 'opened')\n")
    done = venv.run("python", "-c", code, cwd=tmp_path,
                    env={"ALIBI_VIZ_ASSETS_DIR": str(ROOT / "assets")})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert done.stdout.count("opened") == len(PAGES)


def test_every_name_in_all_resolves():
    """`from alibi_viz import *` gives every name `__all__` promises, the lazy ones included."""
    for name in alibi_viz.__all__:
        assert getattr(alibi_viz, name) is not None, name
    assert sorted(alibi_viz.__all__) == sorted(set(alibi_viz.__all__))


def test_no_alias_module_is_left():
    """One command per program: no module of the library runs another by name (runpy), and
    none of the old aliases is there."""
    for path in (ROOT / "alibi_viz").rglob("*.py"):
        assert "runpy" not in path.read_text(), path
    for old in ("train", "evaluate", "reach", "snapshots", "corpus", "experiments"):
        assert importlib.util.find_spec(f"alibi_viz.{old}") is None, old


RECORDED = re.compile(r"python -m ((?:alibi_viz|experiments)(?:\.[a-z_]+)+)")


def recorded_commands() -> list[str]:
    """Every `python -m ...` program of the project the Makefile or the README runs, or a
    shipped model card or results file records."""
    texts = [(ROOT / "Makefile").read_text(), (ROOT / "README.md").read_text()]
    texts += [p.read_text() for p in (ROOT / "assets").rglob("*") if p.suffix in {".md", ".json"}]
    return sorted({m for text in texts for m in RECORDED.findall(text)})


@pytest.mark.filterwarnings("ignore:.*found in sys.modules:RuntimeWarning")  # imported already
@pytest.mark.parametrize("module", recorded_commands())
def test_every_recorded_command_still_runs(module, monkeypatch, capsys):
    """`python -m MODULE --help` answers with its usage for every recorded command, run as
    `python -m` runs it (runpy, __main__) in this process, from the checkout's root."""
    monkeypatch.setattr(sys, "argv", [module, "--help"])
    with pytest.raises(SystemExit) as exit_:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    assert exit_.value.code == 0
    assert "usage:" in capsys.readouterr().out


def test_readme_architecture_table_lists_every_module():
    """The README's table of the three products' layers names every module of alibi_viz/,
    alibi_viz_app/ and experiments/ (but the packages' __init__), and no module that is not
    there ('compare.py' after 'alibi_viz/figures/bias.py' in one row is
    alibi_viz/figures/compare.py)."""
    readme = (ROOT / "README.md").read_text()
    table = readme[readme.index("| layer | module | its one job |"):]
    table = table[:table.index("\n\n")]
    named = set()
    for row in table.splitlines()[2:]:
        folder = ""
        for name in re.findall(r"`([\w/]+\.py)`", row.split("|")[2]):
            if "/" in name:
                folder = name.rsplit("/", 1)[0] + "/"
                named.add(name)
            else:
                named.add(folder + name)
    modules = {str(p.relative_to(ROOT)) for package in (*PACKAGES, "experiments")
               for p in (ROOT / package).rglob("*.py") if p.name != "__init__.py"}
    assert named == modules, (sorted(modules - named), sorted(named - modules))


# ----------------------------------------------------------------------------- the layers contract

def _lint_imports_on_a_copy(tmp_path, plant: dict[str, str]) -> subprocess.CompletedProcess:
    """lint-imports (the contracts in pyproject.toml) run on a copy of alibi_viz/ and alibi_viz_app/ with
    `plant` {path: line} appended to the named files: the copy comes first on the path."""
    for folder in ("alibi_viz", "alibi_viz_app", "experiments"):
        shutil.copytree(ROOT / folder, tmp_path / folder,
                        ignore=shutil.ignore_patterns("__pycache__", "locale"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    for path, line in plant.items():
        with open(tmp_path / path, "a") as f:
            f.write("\n" + line + "\n")
    lint = Path(sys.executable).with_name("lint-imports")
    return subprocess.run([str(lint), "--no-cache"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(tmp_path)})


def test_the_contracts_hold_on_the_tree_and_break_on_an_upward_import(tmp_path):
    """`make lint` runs import-linter's contracts: the unchanged copy keeps all four; a
    results module importing a model loader inside a function (a lower layer importing a
    higher one), a page importing an experiment, and a figure importing the app each break
    theirs, named by module and line."""
    kept = _lint_imports_on_a_copy(tmp_path / "kept", {})
    assert kept.returncode == 0, kept.stdout[-2000:]
    assert "4 kept, 0 broken" in kept.stdout
    broken = _lint_imports_on_a_copy(tmp_path / "broken", {
        "alibi_viz/results/reach.py":
            "def _planted():\n    from alibi_viz.models.loading import load_eval_model  # noqa",
        "alibi_viz_app/ui.py": "from experiments import cards  # noqa",
        "alibi_viz/figures/bias.py": "from alibi_viz_app import glossary  # noqa"})
    assert broken.returncode == 1
    assert "1 kept, 3 broken" in broken.stdout
    assert "alibi_viz.figures.bias -> alibi_viz_app.glossary" in broken.stdout
    assert "alibi_viz.results.reach -> alibi_viz.models.loading" in broken.stdout
    assert "alibi_viz_app.ui -> experiments.cards" in broken.stdout


def test_no_two_modules_share_a_name_but_a_page_and_its_figures():
    """Each module of the library and the app has a name of its own: the one exception is a
    page (alibi_viz_app/app_pages/X.py) and the figures it draws (alibi_viz/figures/X.py)."""
    places: dict[str, list[str]] = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if path.name != "__init__.py":
                places.setdefault(path.stem, []).append(str(path.relative_to(ROOT).parent))
    shared = {name: sorted(folders) for name, folders in places.items() if len(folders) > 1}
    page_and_figures = sorted(["alibi_viz/figures", "alibi_viz_app/app_pages"])
    assert {n: f for n, f in shared.items() if f != page_and_figures} == {}
