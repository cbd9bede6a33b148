"""load_model: safe local loading, what ModelInfo reports, every refusal, path restrictions."""

import json
import os

import numpy as np
import pytest
import torch
from transformers import BertConfig, BertModel, T5Config
from transformers.models.bloom.modeling_bloom import build_alibi_tensor as bloom_alibi
from transformers.models.falcon.modeling_falcon import build_alibi_tensor as falcon_alibi
from transformers.models.mpt.modeling_mpt import build_mpt_alibi_tensor

from alibi_viz import assets
from alibi_viz.alibi import alibi_slopes
from alibi_viz.errors import ModelLoadError
from alibi_viz.models import loading
from alibi_viz.models.attention import attention_modules
from alibi_viz.models.loading import describe_model, load_model, resolve_model_path
from alibi_viz.tiny_models import KINDS, byte_tokenizer, save_tiny_model, tiny_model

POSITIONAL = {"bloom": "alibi", "mpt": "alibi", "falcon": "alibi", "falcon_mq": "alibi",
              "falcon_new": "alibi", "gpt2": "learned", "llama": "rope", "gpt_neox": "rope"}


@pytest.fixture(autouse=True)
def no_restrictions(monkeypatch):
    """Each test starts without the deployment's path restrictions."""
    monkeypatch.delenv(loading.MODEL_ROOT_ENV, raising=False)
    monkeypatch.delenv(loading.ALLOW_CUSTOM_ENV, raising=False)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """One saved tiny checkpoint per kind."""
    root = tmp_path_factory.mktemp("models")
    return {kind: save_tiny_model(root / kind, kind) for kind in KINDS}


# ----------------------------------------------------------------------------- loading works

@pytest.mark.parametrize("kind", KINDS)
def test_loads_every_kind_eager_in_eval_mode(folders, kind):
    """Each tiny checkpoint loads with eager attention, in eval mode, described correctly."""
    model, tokenizer, info = load_model(folders[kind])
    assert model.config._attn_implementation == "eager"
    assert not model.training
    assert (info.num_layers, info.num_heads, info.head_dim, info.hidden_size) == (2, 4, 8, 32)
    assert info.positional == POSITIONAL[kind]
    assert info.dtype == "float32" and info.device == "cpu"
    assert info.num_params == sum(p.numel() for p in model.parameters())
    assert info.path == os.path.realpath(folders[kind])
    assert tokenizer("ab", add_special_tokens=False)["input_ids"] == [100, 101]


@pytest.mark.parametrize("kind", ["gpt2", "llama", "gpt_neox"])
def test_models_without_alibi_have_no_slopes(folders, kind):
    """Non-ALiBi models report no slopes, no schedule and no warnings."""
    _, _, info = load_model(folders[kind])
    assert info.slopes is None and info.slope_schedule is None and info.warnings == ()


def test_gpt2_reports_its_learned_position_limit(folders):
    """A learned position table is a hard input limit, and ModelInfo says how long."""
    _, _, info = load_model(folders["gpt2"])
    assert info.max_positions == 128 and info.declared_context == 128


def test_dtype_auto_keeps_checkpoint_dtype(tmp_path):
    """dtype='auto' keeps a bfloat16 checkpoint in bfloat16; the default loads float32."""
    folder = save_tiny_model(tmp_path / "bf16", "bloom")
    model = tiny_model("bloom").to(torch.bfloat16)
    model.save_pretrained(folder)
    assert load_model(folder, dtype="auto")[2].dtype == "bfloat16"
    assert load_model(folder)[2].dtype == "float32"


# ----------------------------------------------------------------------------- slopes

def _runtime_bias(model, seq_len=5):
    """The positional tensor the model's forward hands its first attention module."""
    captured = {}
    module = attention_modules(model)[0]
    handle = module.register_forward_pre_hook(
        lambda mod, args, kwargs: captured.update(kwargs), with_kwargs=True)
    with torch.inference_mode():
        model(torch.arange(3, 3 + seq_len)[None], use_cache=False)
    handle.remove()
    return captured


@pytest.mark.parametrize("heads", [4, 6, 12])
def test_bloom_slopes_are_what_its_forward_adds(heads):
    """BLOOM's slopes in ModelInfo equal the bias its forward adds at key 1 (+m*j)."""
    model = tiny_model("bloom", hidden_size=48, n_head=heads)
    info = describe_model(model)
    alibi = _runtime_bias(model)["alibi"].view(heads, 1, -1)
    np.testing.assert_allclose(info.slopes, alibi[:, 0, 1].double().numpy(), rtol=0)
    np.testing.assert_allclose(info.slopes, bloom_alibi(torch.ones(1, 2), heads, torch.float32)[:, 0, 1])


@pytest.mark.parametrize("heads", [4, 6, 12])
def test_mpt_slopes_are_what_its_forward_adds(heads):
    """MPT's slopes equal minus its runtime bias at the key one before the last: m*(j-(L-1))."""
    model = tiny_model("mpt", d_model=48, n_heads=heads)
    info = describe_model(model)
    bias = _runtime_bias(model)["position_bias"]  # (H, 1, max_seq_len)
    np.testing.assert_allclose(info.slopes, -bias[:, 0, -2].double().numpy(), rtol=1e-7)


@pytest.mark.parametrize("heads", [4, 6, 12])
def test_falcon_slopes_are_bf16_builder_slopes(heads):
    """Falcon's slopes are its bfloat16 builder's, and its slope from the config, per token on
    the eager logits, is 2m/sqrt(d)."""
    model = tiny_model("falcon", hidden_size=48, num_attention_heads=heads)
    info = describe_model(model)
    alibi = _runtime_bias(model)["alibi"].view(heads, -1)
    np.testing.assert_allclose(info.slopes, alibi[:, 1].double().numpy(), rtol=0)
    np.testing.assert_allclose(info.config_slopes, 2 * np.array(info.slopes) / np.sqrt(48 // heads))


@pytest.mark.parametrize(("kind", "heads", "schedule"), [
    ("bloom", 6, ("official", "mpt")), ("mpt", 6, ("mpt", "official")),
    ("falcon", 6, ("official", "mpt")), ("bloom", 4, ("official", "geometric", "mpt")),
    ("mpt", 4, ("mpt", "official", "geometric")),
])
def test_slope_schedule_is_recognised(kind, heads, schedule):
    """Each architecture's slopes match alibi_slopes' schedule of its name, listed first; the
    paper's geometric formula differs for 6 heads (official and MPT's order coincide)."""
    key = {"bloom": "n_head", "mpt": "n_heads", "falcon": "num_attention_heads"}[kind]
    hidden = {"bloom": "hidden_size", "mpt": "d_model", "falcon": "hidden_size"}[kind]
    info = describe_model(tiny_model(kind, **{key: heads, hidden: 48}))
    assert info.matching_schedules == schedule
    assert info.slope_schedule == schedule[0]


def test_official_slopes_match_bloom_builder_for_many_head_counts():
    """alibi_slopes('official') equals transformers' BLOOM builder for 1..40 heads."""
    for heads in range(1, 41):
        built = bloom_alibi(torch.ones(1, 2), heads, torch.float32)[:, 0, 1].double().numpy()
        np.testing.assert_allclose(alibi_slopes(heads), built, rtol=1e-6)
        mpt = -build_mpt_alibi_tensor(heads, 2)[:, 0, 0].double().numpy()
        np.testing.assert_allclose(alibi_slopes(heads, "mpt"), mpt, rtol=1e-6)


def test_falcon_is_flagged_and_bloom_is_not():
    """Falcon's double, scaled, bfloat16 bias is flagged; BLOOM's paper-equivalent bias is not."""
    falcon = describe_model(tiny_model("falcon"))
    assert any("twice" in w and "2*m/sqrt(d)" in w for w in falcon.warnings)
    assert any("bfloat16" in w for w in falcon.warnings)
    assert describe_model(tiny_model("bloom")).warnings == ()


def test_falcon_bf16_error_at_2048_tokens():
    """Falcon's bfloat16 bias is off from exact by about 1.0 at 2048 tokens for 4 heads."""
    mask = torch.ones(1, 2048, dtype=torch.long)  # as FalconModel builds it without a mask
    built = falcon_alibi(mask, 4, torch.float32)[:, 0, :].double().numpy()
    exact = alibi_slopes(4)[:, None] * np.arange(2048)
    assert np.abs(built - exact).max() == pytest.approx(loading.falcon_bf16_error(4))
    assert 0.5 <= loading.falcon_bf16_error(4) <= 2.0


def test_mpt_config_flags_are_reported():
    """MPT's ignored alibi_bias_max and alibi=False are flagged as departures."""
    info = describe_model(tiny_model("mpt", attn_config={"alibi_bias_max": 4, "alibi": False}))
    assert any("alibi_bias_max=4" in w for w in info.warnings)
    assert any("alibi=False" in w for w in info.warnings)


def test_mpt_max_seq_len_is_raised_at_load(folders):
    """load_model raises MPT's max_seq_len (64 here) and keeps the training length."""
    model, _, info = load_model(folders["mpt"])
    assert model.config.max_seq_len == loading.MPT_MAX_SEQ_LEN
    assert info.declared_context == 64 and any("max_seq_len" in n for n in info.notes)
    with torch.inference_mode():
        model(torch.full((1, 200), 50), use_cache=False)  # longer than 64: would crash otherwise
    assert load_model(folders["mpt"], max_seq_len=500)[0].config.max_seq_len == 500


# ----------------------------------------------------------------------------- refusals

def test_missing_path(tmp_path):
    """A path that does not exist is refused with a clear message."""
    with pytest.raises(ModelLoadError, match="No model folder"):
        load_model(tmp_path / "nope")


def test_file_instead_of_folder(tmp_path):
    """A file path is refused: the folder is needed."""
    (tmp_path / "f.txt").write_text("x")
    with pytest.raises(ModelLoadError, match="is a file"):
        load_model(tmp_path / "f.txt")


def test_empty_path():
    """An empty path is refused before anything is looked up."""
    with pytest.raises(ModelLoadError, match="empty"):
        load_model("  ")


def test_folder_without_config(tmp_path):
    """A folder without config.json is refused."""
    with pytest.raises(ModelLoadError, match="config.json"):
        load_model(tmp_path)


def test_config_that_is_not_json(tmp_path):
    """A config.json that is not JSON is refused."""
    (tmp_path / "config.json").write_text("{oops")
    with pytest.raises(ModelLoadError, match="JSON"):
        load_model(tmp_path)


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_corrupt_safetensors(tmp_path, damage):
    """Garbage or truncated model.safetensors is refused as corrupt."""
    folder = save_tiny_model(tmp_path / "m", "bloom")
    weights = folder / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(b"\x00garbage" * 100 if damage == "garbage" else data[: len(data) // 2])
    with pytest.raises(ModelLoadError, match="corrupt"):
        load_model(folder)


def test_pickle_only_weights_are_refused_without_unpickling(tmp_path, monkeypatch):
    """A folder with only pytorch_model.bin is refused, says why and how to convert, never unpickles."""
    folder = save_tiny_model(tmp_path / "m", "bloom")
    torch.save(tiny_model("bloom").state_dict(), folder / "pytorch_model.bin")
    (folder / "model.safetensors").unlink()

    def no_unpickling(*args, **kwargs):
        raise AssertionError("torch.load was called")

    monkeypatch.setattr(torch, "load", no_unpickling)
    with pytest.raises(ModelLoadError, match="pickle") as error:
        load_model(folder)
    assert "safe_serialization=True" in str(error.value)
    assert "arbitrary code" in str(error.value)


def test_config_pointing_at_pickle_weights_is_refused(tmp_path):
    """config.json's transformers_weights cannot redirect loading to a pickle file."""
    folder = save_tiny_model(tmp_path / "m", "bloom")
    config = json.loads((folder / "config.json").read_text())
    config["transformers_weights"] = "pytorch_model.bin"
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelLoadError, match="not safetensors"):
        load_model(folder)


def test_no_weights_at_all(tmp_path):
    """A folder with a config but no weights is refused."""
    folder = save_tiny_model(tmp_path / "m", "bloom")
    (folder / "model.safetensors").unlink()
    with pytest.raises(ModelLoadError, match="No weights"):
        load_model(folder)


def test_encoder_only_model_is_unsupported(tmp_path):
    """A BERT (encoder-only) checkpoint is refused as not a causal LM."""
    config = BertConfig(vocab_size=259, hidden_size=32, num_attention_heads=4,
                        num_hidden_layers=1, intermediate_size=64)
    BertModel(config).save_pretrained(tmp_path)
    byte_tokenizer().save_pretrained(tmp_path)
    with pytest.raises(ModelLoadError, match="encoder-only"):
        load_model(tmp_path)


def test_encoder_decoder_model_is_unsupported(tmp_path):
    """A T5 (encoder-decoder) config is refused."""
    T5Config(vocab_size=259, d_model=32, num_layers=1, num_heads=4).save_pretrained(tmp_path)
    with pytest.raises(ModelLoadError, match="encoder-decoder"):
        load_model(tmp_path)


def test_custom_code_is_never_run(tmp_path):
    """A config that needs trust_remote_code is refused (its code is never imported)."""
    (tmp_path / "config.json").write_text(json.dumps(
        {"model_type": "evil", "auto_map": {"AutoConfig": "evil.EvilConfig"}}))
    (tmp_path / "evil.py").write_text("raise SystemExit('custom code ran')\n")
    with pytest.raises(ModelLoadError, match="Unsupported"):
        load_model(tmp_path)


def test_tokenizer_missing(tmp_path):
    """A checkpoint saved without its tokenizer is refused with a hint to save it."""
    folder = save_tiny_model(tmp_path / "m", "bloom", tokenizer=False)
    with pytest.raises(ModelLoadError, match="Tokenizer missing"):
        load_model(folder)


def test_unreadable_tokenizer(tmp_path):
    """A broken tokenizer file is refused as unreadable."""
    folder = save_tiny_model(tmp_path / "m", "bloom", tokenizer=False)
    (folder / "tokenizer.json").write_text("{broken")
    with pytest.raises(ModelLoadError, match="Tokenizer"):
        load_model(folder)


def test_unknown_device(folders):
    """A device name torch does not know is refused."""
    with pytest.raises(ModelLoadError, match="device"):
        load_model(folders["bloom"], device="warp-drive")


@pytest.mark.skipif(loading.importlib.util.find_spec("accelerate") is not None,
                    reason="accelerate is installed")
def test_device_map_without_accelerate(folders):
    """device_map='auto' without accelerate says which package to install."""
    with pytest.raises(ModelLoadError, match="pip install accelerate"):
        load_model(folders["bloom"], device_map="auto")


# ----------------------------------------------------------------------------- path restrictions

@pytest.fixture
def model_root(tmp_path, monkeypatch):
    """A model root holding one model, and a model outside it."""
    root = tmp_path / "root"
    save_tiny_model(root / "inside", "bloom")
    save_tiny_model(tmp_path / "outside", "bloom")
    monkeypatch.setenv(loading.MODEL_ROOT_ENV, str(root))
    return root


def test_root_allows_folders_inside(model_root):
    """With a model root, a name relative to it loads."""
    _, _, info = load_model("inside")
    assert info.path == os.path.realpath(model_root / "inside")


def test_root_refuses_dotdot_escape(model_root):
    """'../' cannot climb out of the model root."""
    with pytest.raises(ModelLoadError, match="inside"):
        load_model("../outside")
    with pytest.raises(ModelLoadError, match="inside"):
        resolve_model_path("inside/../../outside")


def test_root_refuses_absolute_path_outside(model_root):
    """An absolute path outside the model root is refused."""
    with pytest.raises(ModelLoadError, match="inside"):
        load_model(model_root.parent / "outside")


def test_root_refuses_symlink_out(model_root):
    """A symlink inside the root that points outside it is refused (realpath)."""
    os.symlink(model_root.parent / "outside", model_root / "link")
    with pytest.raises(ModelLoadError, match="inside"):
        load_model("link")


def test_root_refusal_does_not_reveal_existence(model_root):
    """Refusals outside the root read the same whether or not the folder exists."""
    messages = []
    for name in ("outside", "nothing"):
        with pytest.raises(ModelLoadError) as error:
            load_model(model_root.parent / name)
        messages.append(str(error.value).replace(f"/{name}'", "/X'"))
    assert messages[0] == messages[1]


@pytest.fixture
def shipped(tmp_path, monkeypatch):
    """Custom paths off, with a shipped-models folder holding one model."""
    folder = tmp_path / "shipped"
    save_tiny_model(folder / "alibi", "bloom")
    save_tiny_model(tmp_path / "custom", "bloom")
    monkeypatch.setattr(assets, "MODELS_DIR", folder)
    monkeypatch.setenv(loading.ALLOW_CUSTOM_ENV, "0")
    return folder


def test_custom_paths_off_allows_shipped_models(shipped):
    """With custom paths off, a shipped model loads by name or by full path."""
    assert load_model("alibi")[2].path == os.path.realpath(shipped / "alibi")
    assert resolve_model_path(shipped / "alibi") == (shipped / "alibi").resolve()


def test_custom_paths_off_refuses_other_folders(shipped):
    """With custom paths off, any other folder, absolute or '../', is refused."""
    with pytest.raises(ModelLoadError, match="shipped"):
        load_model(shipped.parent / "custom")
    with pytest.raises(ModelLoadError, match="shipped"):
        load_model("../custom")


@pytest.mark.parametrize("value", ["1", "true", ""])
def test_custom_paths_on_unless_switched_off(tmp_path, monkeypatch, value):
    """Only an explicit 0/false/no/off switches custom paths off."""
    monkeypatch.setenv(loading.ALLOW_CUSTOM_ENV, value)
    assert resolve_model_path(tmp_path) == tmp_path.resolve()


def test_disk_offload_gives_the_in_memory_maps(tmp_path):
    """device_map="auto" with almost no memory offloads the shipped model's layers to disk
    (accelerate); its attention maps and decomposition equal the in-memory run's."""
    from alibi_viz.assets import shipped_models
    from alibi_viz.models.attention import attention_maps, score_decomposition

    folder = shipped_models()["alibi"]
    text = "def f(x):\n    return x * 2\n"
    memory, tokenizer, _ = load_model(folder)
    offloaded, _, _ = load_model(folder, device_map="auto", max_memory={"cpu": "1MB"},
                                 offload_folder=tmp_path / "offload")
    assert any(p.device.type == "meta" for p in offloaded.parameters()) or any(
        (tmp_path / "offload").iterdir())
    for a, b in zip(attention_maps(memory, tokenizer, text).maps,
                    attention_maps(offloaded, tokenizer, text).maps, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-6)
    d1 = score_decomposition(memory, tokenizer, text, 1)
    d2 = score_decomposition(offloaded, tokenizer, text, 1)
    np.testing.assert_allclose(d1.probs, d2.probs, atol=1e-6)


def test_position_tables_are_told_apart():
    """A GPT-2 table of zeros is no position information, one proportional to the sinusoidal
    formula is sinusoidal, a random one learned; all three still cap the input length."""
    from alibi_viz.positional import sinusoidal_table
    from alibi_viz.tiny_models import tiny_model as factory_model

    kinds = {}
    for name, fill in (("none", lambda w: w.zero_()),
                       ("sinusoidal", lambda w: w.copy_(torch.from_numpy(
                           sinusoidal_table(*w.shape) * 0.03))),
                       ("learned", lambda w: None)):
        model = factory_model("gpt2")
        with torch.no_grad():
            fill(model.transformer.wpe.weight)
        info = describe_model(model)
        kinds[name] = (info.positional, info.max_positions)
    assert kinds == {"none": ("none", 128), "sinusoidal": ("sinusoidal", 128),
                     "learned": ("learned", 128)}


def test_position_parameters_are_counted_by_the_position_tables_name():
    """A learned GPT-2 has n_positions x n_embd position parameters; BLOOM (ALiBi) has none."""
    from alibi_viz.models.loading import position_parameter_count

    gpt2, bloom = tiny_model("gpt2"), tiny_model("bloom")
    assert position_parameter_count(gpt2) == gpt2.config.n_positions * gpt2.config.n_embd
    assert position_parameter_count(bloom) == 0


def _through_load_model(folder):
    return load_model(str(folder))[0]


def _through_eval(folder):
    from alibi_viz.models.loading import load_eval_model

    return load_eval_model(folder)


def _through_snapshot(folder):
    from alibi_viz.models.loading import load_snapshot, snapshot_folders

    snapshots = list(snapshot_folders().values())
    if not snapshots:
        pytest.skip("no shipped training snapshots")
    return load_snapshot(snapshots[hash(folder.name) % len(snapshots)])[0]


@pytest.mark.parametrize("load_through", [_through_load_model, _through_eval, _through_snapshot],
                         ids=["load_model", "load_eval_model", "load_snapshot"])
def test_models_loaded_in_eight_threads_at_once_all_load(load_through):
    """A class on one server loads models in several sessions at once (a cache entry evicted,
    a cold server, two students starting live runs): eight threads loading the shipped models
    together, three times, through each of the project's loading paths, all get working models
    with no parameter left on the meta device. Without the one lock (models/pretrained.py)
    transformers' loading left 21 of 24 on the meta device through load_model, and 24 of 24
    through the lab's live runs."""
    import threading

    from alibi_viz import assets

    folders = list(assets.shipped_models().values())
    if not folders:
        pytest.skip("no shipped models")
    errors, loaded = [], []

    def load(folder):
        try:
            model = load_through(folder)
            loaded.append(sorted({p.device.type for p in model.parameters()}))
        except Exception as exc:  # noqa: BLE001 (each failure is the finding)
            errors.append(f"{type(exc).__name__}: {exc}")

    for _ in range(3):
        threads = [threading.Thread(target=load, args=(folders[k % len(folders)],))
                   for k in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert errors == [] and loaded == [["cpu"]] * 24


def test_every_model_load_goes_through_the_one_locked_loader():
    """The eight-thread test above covers the app's, the lab's and the snapshots' paths; the
    rest (training's `halve`, anything added later) is held to the same loader by reading the
    code: no `.from_pretrained(` of a model anywhere in alibi_viz/ or alibi_viz_app/ but the one in
    models/pretrained.py (configs and tokenizers load without building a model)."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    calls = []
    for path in [*(root / "alibi_viz").rglob("*.py"), *(root / "alibi_viz_app").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "from_pretrained"):
                owner = ast.unparse(node.func.value)
                if not owner.endswith(("AutoConfig", "AutoTokenizer")):
                    calls.append(f"{path.relative_to(root)}:{node.lineno}: {owner}")
    assert calls == ["alibi_viz/models/pretrained.py:25: AutoModelForCausalLM"], calls
