"""The library's imports: no cycle, and every import inside a function says why it is there.

An import placed inside a function hides from a reader what a module depends on, and can hide
a cycle that the layers contract in pyproject.toml (import-linter) would otherwise show. Such
an import stays only where it is heavy at a command's start or in a module that must import
fast (torch, transformers, babel's catalogs, ...), or optional (the Redis client), with a
comment saying so (issue 37).
"""

from __future__ import annotations

import ast
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "alibi_viz"


def test_no_import_cycle_among_library_modules():
    """No alibi_viz module reaches itself through its imports, those inside functions
    included (grimp reads every import statement of a module, wherever it stands)."""
    graph = grimp.build_graph("alibi_viz")
    cycles = [f"{importer} -> {imported} -> ... -> {importer}"
              for importer in sorted(graph.modules)
              for imported in sorted(graph.find_modules_directly_imported_by(importer))
              if graph.chain_exists(importer=imported, imported=importer)]
    assert cycles == []


def uncommented_function_imports(source: str) -> list[int]:
    """Line numbers of the imports inside functions of `source` that carry no comment: one on
    the import's first line or the line above, or on the first import of the run of
    consecutive import statements it belongs to."""
    lines = source.splitlines()

    def commented(node: ast.stmt) -> bool:
        above = lines[node.lineno - 2].strip() if node.lineno > 1 else ""
        return "#" in lines[node.lineno - 1] or above.startswith("#")

    missing = set()
    for function in ast.walk(ast.parse(source)):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(function):  # every statement list: bodies of if, try, with, ...
            for field in ("body", "orelse", "finalbody"):
                statements = getattr(node, field, None)
                covered = False
                for statement in statements if isinstance(statements, list) else []:
                    if not isinstance(statement, (ast.Import, ast.ImportFrom)):
                        covered = False
                        continue
                    covered = covered or commented(statement)
                    if not covered:
                        missing.add(statement.lineno)
    return sorted(missing)


def test_every_function_level_import_says_why():
    """Each import inside a function of alibi_viz/ has a comment (why it is not at the
    module's top: heavy, optional, or kept out of a module that must import fast)."""
    missing = [f"{path.relative_to(ROOT)}:{line}"
               for path in sorted(PACKAGE.rglob("*.py"))
               for line in uncommented_function_imports(path.read_text(encoding="utf-8"))]
    assert missing == []


def test_the_scan_sees_imports_in_nested_blocks_and_runs():
    """The scan above finds an uncommented import inside a try block, and lets a commented
    run of imports (split by a blank line, as ruff sorts them) pass."""
    source = ("def f():\n"
              "    try:\n"
              "        import json\n"
              "    except ImportError:\n"
              "        pass\n"
              "    import torch  # heavy\n"
              "\n"
              "    from alibi_viz import data\n"
              "    x = 1\n"
              "    import re\n")
    assert uncommented_function_imports(source) == [3, 10]
