"""Models in the local Hugging Face cache, found by repo id, loaded offline and safely."""

import numpy as np
import pytest

from alibi_viz.errors import ModelLoadError
from alibi_viz.models.attention import attention_maps
from alibi_viz.models.hub_cache import list_cached_models, parse_repo_id, positional_from_config
from alibi_viz.models.loading import load_model
from alibi_viz.tiny_models import save_tiny_model

REV = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """models--org--name/refs/main -> snapshots/<rev>/ holding a tiny BLOOM (save_pretrained)."""
    root = tmp_path / "hub"
    repo = root / "models--org--name"
    snapshot = save_tiny_model(repo / "snapshots" / REV, "bloom")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(REV)
    monkeypatch.setenv("HF_HUB_CACHE", str(root))
    monkeypatch.delenv("ALIBI_VIZ_ALLOW_CUSTOM_PATHS", raising=False)
    monkeypatch.delenv("ALIBI_VIZ_MODEL_ROOT", raising=False)
    return snapshot


def test_repo_id_loads_offline_with_the_snapshots_maps(cache):
    """load_model("org/name") loads the cached snapshot, and its attention maps equal those of
    loading the snapshot folder itself."""
    by_repo, tokenizer, info = load_model("org/name")
    by_folder, _, _ = load_model(cache)
    assert info.path == str(cache.resolve())
    a = attention_maps(by_repo, tokenizer, "def f(x): return x")
    b = attention_maps(by_folder, tokenizer, "def f(x): return x")
    for x, y in zip(a.maps, b.maps, strict=True):
        np.testing.assert_array_equal(x, y)


def test_revision_by_branch_and_by_commit_prefix(cache):
    """org/name@main and org/name@<commit prefix> resolve to the same snapshot."""
    assert load_model("org/name@main")[2].path == load_model(f"org/name@{REV[:8]}")[2].path


def test_uncached_repo_says_what_to_run(cache):
    """A repo id that is not cached: a message with the download command and the cache path."""
    with pytest.raises(ModelLoadError, match="huggingface-cli download acme/tiny-bloom"):
        load_model("acme/tiny-bloom")


def test_repo_ids_are_refused_when_custom_paths_are_off(cache, monkeypatch):
    """With custom paths off, names are looked up among the shipped models only: a cached
    repo id is not found there, and the message says nothing about the cache."""
    monkeypatch.setenv("ALIBI_VIZ_ALLOW_CUSTOM_PATHS", "0")
    with pytest.raises(ModelLoadError) as refused:
        load_model("org/name")
    assert "cache" not in str(refused.value) and "huggingface" not in str(refused.value)
    with pytest.raises(ModelLoadError, match="Only the shipped models"):
        load_model(str(cache))


def test_listing_reads_architecture_position_and_size(cache):
    """The cache lists org/name at main with its architecture, ALiBi, a size, runnable."""
    [model] = list_cached_models()
    assert (model.repo_id, model.revision, model.architecture, model.positional) == (
        "org/name", "main", "BloomForCausalLM", "alibi")
    assert model.runnable and model.size_bytes > 0 and model.source == "org/name"


def test_remote_code_and_unknown_types_are_not_runnable(cache):
    """A config with auto_map (remote code) is listed but not runnable, with the reason."""
    (cache / "config.json").write_text('{"model_type": "bloom", "auto_map": {"x": "y"}}')
    [model] = list_cached_models()
    assert not model.runnable and "remote code" in model.reason


@pytest.mark.parametrize(("text", "parsed"), [("org/name", ("org/name", None)),
                                              ("org/name@v1.0", ("org/name", "v1.0")),
                                              ("/etc/passwd", None), ("name", None)])
def test_parse_repo_id(text, parsed):
    """org/name[@revision] is a repo id; absolute paths and bare names are not."""
    assert parse_repo_id(text) == parsed


@pytest.mark.parametrize(("config", "kind"), [({"model_type": "bloom"}, "alibi"),
                                              ({"model_type": "falcon", "alibi": True}, "alibi"),
                                              ({"model_type": "falcon"}, "rope"),
                                              ({"model_type": "gpt2"}, "learned"),
                                              ({"model_type": "llama"}, "rope")])
def test_positional_scheme_from_config(config, kind):
    """The position scheme is read from config.json alone."""
    assert positional_from_config(config) == kind
