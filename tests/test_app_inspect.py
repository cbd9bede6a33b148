"""The Inspect a model page under AppTest: the shipped model's facts and slopes, local folders
(good, bad, Falcon's departures, non-ALiBi), restricted deployments, and folders that break
while the app runs."""

import shutil

import pytest

from alibi_viz import assets
from alibi_viz.models.zoo import broken_model
from alibi_viz.tiny_models import save_tiny_model
from alibi_viz_app.testing import (
    INSPECT_HEADS_FIGURES,
    figure_keys,
    figure_titles,
    figures,
    run_app,
    warnings,
)

SHIPPED = assets.MODELS_DIR / "alibi"
SHORT = "def add(a, b):\n    return a + b\n"


def info_table(at) -> str:
    return next(m.value for m in at.markdown if m.value.startswith("| property"))


@pytest.fixture(autouse=True)
def custom_paths_on(monkeypatch):
    """AppTest runs without a server address, which the app treats as a shared server (custom
    paths off); these tests load local folders, so they turn them on as an operator would."""
    monkeypatch.setenv("ALIBI_VIZ_ALLOW_CUSTOM_PATHS", "1")


@pytest.fixture(scope="module")
def tiny_bloom(tmp_path_factory):
    return save_tiny_model(tmp_path_factory.mktemp("bloom") / "bloom", "bloom")


def test_shipped_model_facts_slopes_and_heads():
    """Default: the shipped ALiBi model's table, slopes vs schedules, then the three views."""
    at = run_app("inspect_model", {"text": SHORT})
    assert not at.exception and not at.error
    assert "BloomForCausalLM" in info_table(at) and "128 tokens" in info_table(at)
    assert figure_titles(at)[0].startswith("Slopes of BloomForCausalLM")
    assert figure_keys(at) == ["im_fig_slopes", *INSPECT_HEADS_FIGURES]  # each figure, by key
    assert at.query_params["source"] == "shipped" and at.query_params["model"] == "alibi"


def test_local_folder_from_url(tiny_bloom):
    """?path=<folder> loads that folder; its heads are drawn, head selection works."""
    at = run_app("inspect_model", {"path": str(tiny_bloom), "text": SHORT})
    assert not at.exception and not at.error
    assert at.radio(key="im_source").value == "folder"
    assert figure_keys(at) == ["im_fig_slopes", *INSPECT_HEADS_FIGURES]
    at.selectbox(key="im_head").set_value(3).run()
    assert figures(at)[2]["layout"]["title"]["text"].startswith("Layer 1, head 3")
    assert at.query_params["path"] == str(tiny_bloom) and "model" not in at.query_params


def test_typing_a_folder_loads_it(tiny_bloom):
    """Switching to a local folder asks for a path; typing one loads it."""
    at = run_app("inspect_model", {"text": SHORT})
    at.radio(key="im_source").set_value("folder").run()
    assert any("Type the path" in i.value for i in at.info)
    at.text_input(key="im_path").set_value(str(tiny_bloom)).run()
    assert not at.error and figure_keys(at) == ["im_fig_slopes", *INSPECT_HEADS_FIGURES]


def test_bad_folder_path_gives_a_message(tmp_path):
    """A folder that does not exist: a plain error saying what to check, no traceback."""
    at = run_app("inspect_model", {"path": str(tmp_path / "nowhere")})
    assert not at.exception
    assert "No model folder at" in at.error[0].value
    assert any("What to check" in m.value for m in at.markdown)
    assert not figures(at)


def test_folder_without_config_gives_a_message(tmp_path):
    """An existing folder that is not a model: the error names the missing config.json."""
    at = run_app("inspect_model", {"path": str(tmp_path)})
    assert not at.exception and "has no config.json" in at.error[0].value


def test_falcon_departures_are_warned(tmp_path):
    """A Falcon ALiBi checkpoint: its double bias and bfloat16 slopes show as warnings, and
    the slopes figure adds the slope it really applies."""
    folder = save_tiny_model(tmp_path / "falcon", "falcon")
    at = run_app("inspect_model", {"path": str(folder), "text": SHORT})
    assert not at.exception
    assert any("adds the ALiBi bias twice" in w for w in warnings(at))
    names = [t.get("name") for t in figures(at)[0]["data"]]
    assert "per-token slope from the config (eager)" in names


def test_model_without_alibi_explains_its_positions(tmp_path):
    """A GPT-2 folder: no slopes figure, a note on learned positions, heads still drawn."""
    folder = save_tiny_model(tmp_path / "gpt2", "gpt2")
    at = run_app("inspect_model", {"path": str(folder), "text": SHORT})
    assert not at.exception and not at.error
    assert any("No ALiBi slopes" in i.value and "learned" in i.value for i in at.info)
    assert figure_keys(at) == INSPECT_HEADS_FIGURES  # no slopes figure


def test_restricted_deployment_refuses_custom_folders(tiny_bloom, monkeypatch):
    """ALIBI_VIZ_ALLOW_CUSTOM_PATHS=0: a local folder is refused with the reason."""
    monkeypatch.setenv("ALIBI_VIZ_ALLOW_CUSTOM_PATHS", "0")
    at = run_app("inspect_model", {"path": str(tiny_bloom)})
    assert not at.exception
    assert "Only the shipped models can be loaded" in at.error[0].value


def test_shared_server_refuses_paths_by_default_and_says_nothing_of_them(monkeypatch):
    """No setting and a server that listens beyond loopback (AppTest sets no address): a typed
    /etc is refused with a message that does not say whether it exists or what it is."""
    monkeypatch.delenv("ALIBI_VIZ_ALLOW_CUSTOM_PATHS", raising=False)
    monkeypatch.delenv("ALIBI_VIZ_MODEL_ROOT", raising=False)
    at = run_app("inspect_model", {"path": "/etc"})
    message = at.error[0].value
    assert "Only the shipped models can be loaded" in message
    assert not any(word in message for word in ("exist", "is a file", "config.json", "/etc"))


def test_operator_setting_allows_paths_as_before():
    """ALIBI_VIZ_ALLOW_CUSTOM_PATHS=1 (this module's default fixture): /etc is looked at and
    refused for what it is, as on a local server."""
    at = run_app("inspect_model", {"path": "/etc"})
    assert "has no config.json" in at.error[0].value


def test_loopback_server_allows_paths(monkeypatch):
    """The app's policy: a loopback server.address allows custom paths without any setting."""
    import streamlit as st

    from alibi_viz_app import ui

    monkeypatch.delenv("ALIBI_VIZ_ALLOW_CUSTOM_PATHS", raising=False)
    monkeypatch.delenv("ALIBI_VIZ_MODEL_ROOT", raising=False)
    for address, allowed in (("localhost", True), ("127.0.0.1", True), ("::1", True),
                             ("0.0.0.0", False), ("", False), ("10.0.0.5", False)):
        monkeypatch.setattr(st.config, "get_option",
                            lambda name, a=address: a if name == "server.address" else None)
        assert ui.custom_paths_allowed() is allowed, address


@pytest.fixture
def hub_cache(tmp_path, monkeypatch):
    """A Hugging Face cache layout in a temporary HF_HUB_CACHE: org/name (a tiny BLOOM saved
    with save_pretrained under snapshots/<rev>, refs/main pointing at it) and org/pickled
    (pickle-only weights)."""
    cache = tmp_path / "hub"
    rev = "0123456789abcdef0123456789abcdef01234567"
    good = cache / "models--org--name"
    save_tiny_model(good / "snapshots" / rev, "bloom")
    (good / "refs").mkdir()
    (good / "refs" / "main").write_text(rev)
    bad = cache / "models--org--pickled" / "snapshots" / rev
    bad.mkdir(parents=True)
    (bad / "config.json").write_text('{"model_type": "bloom", "architectures": ["BloomForCausalLM"]}')
    (bad / "pytorch_model.bin").write_bytes(b"not really")
    (cache / "models--org--pickled" / "refs").mkdir()
    (cache / "models--org--pickled" / "refs" / "main").write_text(rev)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    return cache, good / "snapshots" / rev


def test_cache_lists_models_and_greys_out_pickles(hub_cache):
    """The cache source lists both repos; the pickle-only one says why it cannot be inspected."""
    at = run_app("inspect_model", {"source": "cache"})
    assert not at.exception
    table = at.dataframe[0].value
    rows = {r["repo id"]: r for r in table.to_dict("records")}
    assert rows["org/name"]["can inspect"] == "yes"
    assert rows["org/pickled"]["can inspect"].startswith("no: pickle-only")
    assert at.selectbox(key="im_repo").options == ["org/name (main)"]


def test_repo_in_the_url_loads_the_cached_model(hub_cache):
    """?repo=org/name opens the cached model, offline, and keeps repo in the URL."""
    at = run_app("inspect_model", {"repo": "org/name", "text": SHORT})
    assert not at.exception and not at.error
    assert at.radio(key="im_source").value == "cache"
    assert "BloomForCausalLM" in info_table(at)
    assert at.query_params["repo"] == "org/name"


def test_folder_removed_after_loading_gives_a_message(tmp_path):
    """The folder deleted after its model was loaded and cached: an error, no traceback."""
    folder = save_tiny_model(tmp_path / "gone", "bloom")
    at = run_app("inspect_model", {"path": str(folder), "text": SHORT})
    assert figure_keys(at) == ["im_fig_slopes", *INSPECT_HEADS_FIGURES]
    shutil.rmtree(folder)
    at.run()
    assert not at.exception
    assert "No model folder at" in at.error[0].value


def test_corrupted_weights_after_loading_give_a_message(tmp_path):
    """model.safetensors truncated after loading: the reload refuses it with a message."""
    folder = save_tiny_model(tmp_path / "broken", "bloom")
    at = run_app("inspect_model", {"path": str(folder), "text": SHORT})
    assert figure_keys(at) == ["im_fig_slopes", *INSPECT_HEADS_FIGURES]
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    at.run()
    assert not at.exception
    assert "not a valid safetensors file" in at.error[0].value


# ----------------------------------------------------------------------------- issue 27 fixes

def test_uncached_repo_in_the_url_warns_and_loads_nothing_else(hub_cache):
    """?repo= a model that is not cached: a warning with the download command, no other model
    loaded in its place, and the URL keeps the repo asked for."""
    at = run_app("inspect_model", {"repo": "bigscience/bloom-560m", "text": SHORT})
    assert not at.exception and not at.error
    assert any("`bigscience/bloom-560m` is not in the local Hugging Face cache" in w
               for w in warnings(at))
    assert [c.value for c in at.code][0] == ('huggingface-cli download bigscience/bloom-560m '
                                             '--include "*.safetensors" "*.json" "tokenizer*"')
    assert not figures(at) and not any(m.value.startswith("| property") for m in at.markdown)
    assert at.selectbox(key="im_repo").value is None
    assert at.query_params["repo"] == "bigscience/bloom-560m"


def test_cached_repo_that_cannot_run_warns_with_both_remedies(hub_cache):
    """?repo= a cached repo with pickle weights only: warned (with the reason), the download
    command and the conversion recipe as code blocks; nothing loaded; a pick loads a model."""
    at = run_app("inspect_model", {"repo": "org/pickled", "text": SHORT})
    assert not at.exception and not at.error
    assert any("`org/pickled` is in the Hugging Face cache but cannot be inspected" in w
               and "pickle-only weights" in w.replace("\\", "") for w in warnings(at))
    code = [c.value for c in at.code]
    assert code[0].startswith("huggingface-cli download org/pickled --include")
    assert code[1].startswith("from transformers import AutoModelForCausalLM\n")
    assert not figures(at) and at.query_params["repo"] == "org/pickled"
    at.selectbox(key="im_repo").set_value("org/name").run()
    assert not at.exception and not at.warning and "BloomForCausalLM" in info_table(at)
    assert at.query_params["repo"] == "org/name"


def test_default_cached_revision_is_main_labelled_by_its_refs(hub_cache):
    """A repo with a newer tagged revision beside main: the picker opens on main, and each
    revision is named by its branch or tag (org/name@v2), not by a bare commit hash."""
    cache, _main = hub_cache
    tagged = "fedcba9876543210fedcba9876543210fedcba98"
    repo = cache / "models--org--name"
    save_tiny_model(repo / "snapshots" / tagged, "bloom", seed=1)
    (repo / "refs" / "v2").write_text(tagged)
    at = run_app("inspect_model", {"source": "cache", "text": SHORT})
    assert not at.exception and not at.error
    picker = at.selectbox(key="im_repo")
    assert picker.value == "org/name" and picker.options[:2] == ["org/name (main)",
                                                                  "org/name (v2)"]
    assert at.query_params["repo"] == "org/name"
    picker.set_value("org/name@v2").run()
    assert not at.exception and at.query_params["repo"] == "org/name@v2"
    assert tagged in info_table(at).replace("\\", "")


def test_falcon_warnings_keep_their_stars(tmp_path):
    """Falcon's warnings show (QK^T + m*j)/sqrt(d) as written: the * escaped, not italics."""
    folder = save_tiny_model(tmp_path / "falcon", "falcon")
    at = run_app("inspect_model", {"path": str(folder), "text": SHORT})
    twice = next(w for w in warnings(at) if "adds the ALiBi bias twice" in w)
    assert r"m\*j" in twice and r"2\*m" in twice


def test_pickle_recipe_is_a_code_block(tmp_path):
    """A folder with pickle weights only: the conversion recipe is a fenced code block in the
    error, one statement a line, not run into one paragraph."""
    folder = save_tiny_model(tmp_path / "pickled", "bloom")
    (folder / "model.safetensors").rename(folder / "pytorch_model.bin")
    at = run_app("inspect_model", {"path": str(folder)})
    assert not at.exception
    error = at.error[0].value
    assert "This folder has only pickle weights" in error
    assert ("```python\nfrom transformers import AutoModelForCausalLM\n"
            "model = AutoModelForCausalLM.from_pretrained(FOLDER)") in error


def test_statistics_explanation_sits_under_section_3():
    """The explanation of the head statistics (fitted slope, R², content reliance) comes right
    after section 3's figure, before the gallery (section 4) and the conformance check (5)."""
    at = run_app("inspect_model", {"text": SHORT})
    order = [(el.value if hasattr(el, "value") else "") for el in at.main
             if el.type in ("subheader", "markdown")]
    explanation = next(i for i, t in enumerate(order) if str(t).startswith("**Fitted slope**"))
    section = {n: next(i for i, t in enumerate(order) if str(t).startswith(f"{n}. "))
               for n in (3, 4, 5)}
    assert section[3] < explanation < section[4] < section[5]


def test_verdicts_are_in_the_page_as_text():
    """After the check, every head's verdict, slopes and detail are a plain table (not only in
    the grid's hover); for a broken model it is open, with the detail of each head."""
    at = run_app("inspect_model")
    at.selectbox(key="im_zoo_bug").set_value("twice").run()
    at.button(key="im_zoo_check_run").click().run()
    assert not at.exception
    table = at.table[0].value
    assert list(table.columns) == ["layer", "head", "verdict", "expected m", "measured m",
                                   "ratio", "offset (logits)", "clip at", "detail"]
    config = broken_model("twice").config  # the model the page checks
    rows = [(int(layer), int(head)) for layer, head in table[["layer", "head"]].values]
    assert rows == [(layer, head) for layer in range(1, config.n_layer + 1)
                    for head in range(1, config.n_head + 1)]  # one row per layer and head
    assert set(table["verdict"]) == {"scaled"}
    assert all(r.startswith("2") for r in table["ratio"])


def test_precision_lens_draws_what_the_softmax_sees_of_the_content():
    """After the check, the precision lens in bfloat16 (BLOOM's row-constant form) draws the
    content error beside the bias error, its sentence naming the largest error; Falcon's
    builder form draws no content error (it is not added that way)."""
    at = run_app("inspect_model")
    at.button(key="im_zoo_check_run").click().run()
    at.selectbox(key="im_zoo_lens_dtype").set_value("bfloat16").run()
    assert not at.exception
    keys = figure_keys(at)
    assert "im_zoo_fig_precision" in keys and "im_zoo_fig_precision_content" in keys
    assert any("Largest error:" in c.value and "logits of 3" in c.value for c in at.caption)
    title = figures(at)[keys.index("im_zoo_fig_precision_content")]["layout"]["title"]["text"]
    assert title == "bfloat16: what the softmax sees of a content score of 3"
    at.selectbox(key="im_zoo_lens_form").set_value("falcon").run()
    assert not at.exception and "im_zoo_fig_precision_content" not in figure_keys(at)


def test_cached_repo_messages_name_the_model_not_a_folder(hub_cache, tmp_path):
    """A cached repo id that fails to load is named as the model it is, with what to download:
    no tokenizer in the cache (on the page), pickle weights only (the loader itself)."""
    from alibi_viz.errors import ModelLoadError
    from alibi_viz.models.loading import load_model

    cache, _main = hub_cache
    rev = "0123456789abcdef0123456789abcdef01234567"
    repo = cache / "models--org--notok"
    save_tiny_model(repo / "snapshots" / rev, "bloom", tokenizer=False)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(rev)
    at = run_app("inspect_model", {"repo": "org/notok"})
    assert not at.exception
    error = at.error[0].value
    assert "this model (org/notok) has no tokenizer files in the Hugging Face cache" in error
    assert "huggingface-cli download org/notok" in error and "folder" not in error.lower()
    with pytest.raises(ModelLoadError) as refused:
        load_model("org/pickled")
    assert str(refused.value).startswith("This model (org/pickled) has only pickle weights")
    assert "huggingface-cli download org/pickled" in str(refused.value)


CODE_NAMES = ("row_constant", "sign_flip", "sqrt_d", "off_by_one", "row_shift", "shift_all",
              "max_tokens")


@pytest.mark.parametrize("lang", ["en", "ru"])
def test_lens_and_zoo_show_no_code_names(lang):
    """The precision lens's form dropdown offers translated labels ("m·j, as BLOOM adds it"),
    its error panel's title names the form the same way, and the zoo's bug list shows each bug
    described, never a code name such as row_constant or sign_flip."""
    from alibi_viz import i18n
    from alibi_viz.figures.heads import FORM_TITLES
    from alibi_viz.models.zoo import BUGS, HARMLESS

    i18n.set_language(lang)  # AppTest formats a widget's value with its format_func here too
    try:
        at = run_app("inspect_model", {"lang": lang})
        at.button(key="im_zoo_check_run").click().run()
        assert not at.exception
        form = at.selectbox(key="im_zoo_lens_form")
        bugs = at.selectbox(key="im_zoo_bug")
        assert form.options == [i18n._(FORM_TITLES[f]) for f in ("row_constant", "textbook",
                                                                 "falcon")]
        assert bugs.options == [i18n._(BUGS[b]) for b in BUGS]
        harmless = [i18n._(BUGS[b]) for b in HARMLESS]
    finally:
        i18n.set_language("en")
    keys = figure_keys(at)
    fig = figures(at)[keys.index("im_zoo_fig_precision")]
    titles = [a["text"] for a in fig["layout"]["annotations"]]
    shown = " ".join([*form.options, *bugs.options, form.help or "", *titles])
    assert not [name for name in CODE_NAMES if name in shown], shown
    assert "m·j" in titles[0] and not set(form.options) & {"textbook", "falcon"}
    assert all(("harmless" if lang == "en" else "безвредн") in text for text in harmless)
