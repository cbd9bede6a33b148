"""What every experiment's command shares (experiments.program)."""

import json

import torch

from experiments.program import parse, parser, write_results


def test_threads_reach_torch_and_other_options_parse(monkeypatch):
    set_to = []
    monkeypatch.setattr(torch, "set_num_threads", set_to.append)
    p = parser("python -m alibi_viz.example", "an example")
    p.add_argument("--out", default="x.json")
    args = parse(p, ["--threads", "3", "--out", "y.json"])
    assert (args.threads, args.out, set_to) == (3, "y.json", [3])
    assert parse(p, []).threads == 2 and set_to[-1] == 2


def test_results_are_written_where_asked_folder_and_all(tmp_path, capsys):
    out = tmp_path / "new" / "results.json"
    results = {"lengths": [128, 256], "models": {"alibi": {"ppl": 3.25}}}
    write_results(out, results)
    assert json.loads(out.read_text()) == results
    assert out.read_text().endswith("\n")
    assert f"wrote {out}" in capsys.readouterr().out
