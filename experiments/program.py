"""What every experiment's command shares: its arguments, with `--threads` (the CPU threads
torch may use), and how it writes its results file."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch


def parser(prog: str, description: str) -> argparse.ArgumentParser:
    """An experiment's argument parser, with --threads (default 2) already on it."""
    p = argparse.ArgumentParser(prog=prog, description=description)
    p.add_argument("--threads", type=int, default=2, help="CPU threads torch may use")
    return p


def parse(p: argparse.ArgumentParser, argv=None) -> argparse.Namespace:
    """The parsed arguments, with torch's thread count set from --threads."""
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    return args


def write_results(path, results: dict) -> None:
    """Write `results` as indented JSON to `path` (its folder made if missing) and say so."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=1) + "\n")
    print(f"wrote {path}")
