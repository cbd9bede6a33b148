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


def test_seed_runs_are_found_by_name_and_those_without_weights_left_out(tmp_path, capsys):
    """Runs trained again are folders <model>-seed<N>; a clone has their config and card but
    not their weights, so re-evaluating leaves those out (and says so) while their cards are
    still rewritten from the shipped results."""
    from experiments.evaluate import seed_folders

    for name in ("alibi-seed1", "alibi-seed2", "sinusoidal-seed2", "alibi-seedling", "notes"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text("{}")
    (tmp_path / "alibi-seed2" / "model.safetensors").write_bytes(b"")
    (tmp_path / "sinusoidal-seed2" / "model.safetensors").write_bytes(b"")
    assert seed_folders(tmp_path) == {
        "alibi": {1: tmp_path / "alibi-seed1", 2: tmp_path / "alibi-seed2"},
        "sinusoidal": {2: tmp_path / "sinusoidal-seed2"}}
    assert seed_folders(tmp_path, with_weights=True) == {
        "alibi": {2: tmp_path / "alibi-seed2"}, "sinusoidal": {2: tmp_path / "sinusoidal-seed2"}}
    assert "alibi-seed1: no weights, left out" in capsys.readouterr().out
