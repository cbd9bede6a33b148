"""The project as a wheel: every module of the tree is in it, and imports from it.

An editable install (`make run`) reads the source tree, so a subpackage missing from
pyproject.toml would only show in a real install; this test builds one.
"""

import os
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
