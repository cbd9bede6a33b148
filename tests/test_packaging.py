"""The project as a wheel: every module of the tree is in it, and imports from it.

An editable install (`make run`) reads the source tree, so a subpackage missing from
pyproject.toml would only show in a real install; this test builds one.
"""

import os
import re
import runpy
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("alibi_viz", "app")


def tree_modules() -> set[str]:
    """Dotted names of every .py file under the project's packages."""
    return {".".join(path.relative_to(ROOT).with_suffix("").parts)
            for package in PACKAGES for path in (ROOT / package).rglob("*.py")}


@pytest.fixture(scope="module")
def wheel_site(tmp_path_factory) -> Path:
    """The wheel built from a copy of the tree (no build isolation: nothing is downloaded; a
    copy, so that no stale build/ folder can lend it modules), unpacked."""
    out = tmp_path_factory.mktemp("wheel")
    source = out / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", *PACKAGES):
        copy = shutil.copytree if (ROOT / name).is_dir() else shutil.copy2
        copy(ROOT / name, source / name, **({"ignore": shutil.ignore_patterns("__pycache__")}
                                            if (ROOT / name).is_dir() else {}))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                    "--no-build-isolation", "-w", str(out), str(source)],
                   check=True, capture_output=True, timeout=300)
    (wheel,) = out.glob("alibi_viz-*.whl")
    site = out / "site"
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(site)
    return site


def test_the_wheel_holds_every_module_of_the_tree(wheel_site):
    """Each .py file of alibi_viz/ and app/ is in the wheel, the subpackages' too."""
    shipped = {".".join(path.relative_to(wheel_site).with_suffix("").parts)
               for package in PACKAGES for path in (wheel_site / package).rglob("*.py")}
    assert tree_modules() - shipped == set()


def test_the_wheel_ships_the_translation_catalogs(wheel_site):
    """The .po catalogs the app reads at run time are package data of the wheel."""
    for lang in ("es", "ru"):
        assert (wheel_site / "alibi_viz" / "locale" / lang / "LC_MESSAGES" / "messages.po").is_file()


def test_every_library_module_imports_from_the_wheel(wheel_site):
    """Importing every alibi_viz module from the unpacked wheel (not the source tree) works.
    The pages (`app`) import streamlit and run on import, so only their package is imported."""
    modules = sorted(m for m in tree_modules() if m.startswith("alibi_viz"))
    code = ("import importlib, sys\n"
            f"for name in {modules!r}:\n"
            "    module = importlib.import_module(name)\n"
            f"    assert module.__file__.startswith({str(wheel_site)!r}), module.__file__\n"
            "import app, app.app_pages\n"
            "print(len(sys.modules))\n")
    env = {**os.environ, "PYTHONPATH": str(wheel_site)}
    result = subprocess.run([sys.executable, "-c", code], cwd=wheel_site, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]


RECORDED = re.compile(r"python -m (alibi_viz[a-z_.]*)")


def recorded_commands() -> list[str]:
    """Every `python -m alibi_viz...` program the Makefile runs or a shipped model card or
    results file records."""
    texts = [(ROOT / "Makefile").read_text()]
    texts += [p.read_text() for p in (ROOT / "assets").rglob("*") if p.suffix in {".md", ".json"}]
    return sorted({m for text in texts for m in RECORDED.findall(text)})


@pytest.mark.filterwarnings("ignore:.*found in sys.modules:RuntimeWarning")  # imported already
@pytest.mark.parametrize("module", recorded_commands())
def test_every_recorded_command_still_runs(module, monkeypatch, capsys):
    """`python -m MODULE --help` answers with its usage for every recorded command (moved
    experiments keep their old names as thin aliases), run as `python -m` runs it (runpy,
    __main__) in this process."""
    monkeypatch.setattr(sys, "argv", [module, "--help"])
    with pytest.raises(SystemExit) as exit_:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    assert exit_.value.code == 0
    assert "usage:" in capsys.readouterr().out


def test_readme_architecture_table_lists_every_module():
    """The README's table of the library's layers names every module of alibi_viz/ (but the
    packages' __init__), and no module that is not there ('compare.py' after
    'figures/bias.py' in one row is figures/compare.py)."""
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
    package = ROOT / "alibi_viz"
    modules = {str(p.relative_to(package)) for p in package.rglob("*.py")
               if p.name != "__init__.py"}
    assert named == modules, (sorted(modules - named), sorted(named - modules))


# ----------------------------------------------------------------------------- the layers contract

def _lint_imports_on_a_copy(tmp_path, plant: dict[str, str]) -> subprocess.CompletedProcess:
    """lint-imports (the contracts in pyproject.toml) run on a copy of alibi_viz/ and app/ with
    `plant` {path: line} appended to the named files: the copy comes first on the path."""
    for folder in ("alibi_viz", "app"):
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
    """`make lint` runs import-linter's contracts: the unchanged copy keeps both; a results
    module importing a model loader inside a function (a lower layer importing a higher one),
    and a page importing an experiment, each break theirs, named by module and line."""
    kept = _lint_imports_on_a_copy(tmp_path / "kept", {})
    assert kept.returncode == 0, kept.stdout[-2000:]
    assert "2 kept, 0 broken" in kept.stdout
    broken = _lint_imports_on_a_copy(tmp_path / "broken", {
        "alibi_viz/results/reach.py":
            "def _planted():\n    from alibi_viz.models.loading import load_eval_model  # noqa",
        "app/ui.py": "from alibi_viz.experiments import cards  # noqa"})
    assert broken.returncode == 1
    assert "0 kept, 2 broken" in broken.stdout
    assert "alibi_viz.results.reach -> alibi_viz.models.loading" in broken.stdout
    assert "app.ui -> alibi_viz.experiments.cards" in broken.stdout
