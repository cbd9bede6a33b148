"""Inspect a model: what a checkpoint is, how it adds position, and its heads on any text."""

import os
import textwrap
from pathlib import Path

import streamlit as st

from alibi_viz import i18n
from alibi_viz.assets import DEFAULT_MODEL, model_title, shipped_models
from alibi_viz.errors import AlibiVizError
from alibi_viz.figures.heads import model_slopes_figure
from alibi_viz.i18n import _, number
from alibi_viz.models.hub_cache import (
    PICKLE_SUFFIXES,
    download_command,
    hub_cache_dir,
    list_cached_models,
)
from alibi_viz.models.loading import (
    ALLOW_CUSTOM_ENV,
    CONVERT_CODE,
    MODEL_ROOT_ENV,
    localized,
    model_info_rows,
)
from alibi_viz.models.zoo import BUGS, broken_model
from alibi_viz_app import conformance_view, heads_view, ui
from alibi_viz_app.query_params import UrlParam

PREFIX = "im"
SOURCES = ("shipped", "cache", "folder")
SOURCE_TITLES = {"shipped": _("A shipped model"), "cache": _("The Hugging Face cache"),
                 "folder": _("A local folder")}


@st.cache_data(ttl=60, show_spinner=_("Reading the Hugging Face cache..."))
def cached_models(cache_dir: str, lang: str):
    """The local hub cache's models (re-read at most once a minute); reasons in `lang`."""
    return list_cached_models(cache_dir)


def size_text(n: int) -> str:
    return f"{number(n / 2**30, 2)} GB" if n >= 2**30 else f"{number(n / 2**20, 1)} MB"


MISSING = "_im_missing_repo"  # a repo id the URL asked for that cannot be loaded


def missing_ui(wanted: str, model, folder) -> None:
    """Why repo id `wanted` (from the URL) was not loaded, and what to run: not in the cache
    (`model` None), or cached but not runnable (`model`, a CachedModel, says why)."""
    if model is None:
        st.warning(_("`{repo}` is not in the local Hugging Face cache ({folder}), so no model "
                     "was loaded; nothing is downloaded here. On a machine with internet run "
                     "this, then copy its cache here (or point HF_HOME or HF_HUB_CACHE at it):")
                   .format(repo=wanted, folder=markdown_text(folder)), icon="📦")
    else:
        st.warning(_("`{repo}` is in the Hugging Face cache but cannot be inspected ({reason}), "
                     "so no model was loaded. Download its safetensors weights, config and "
                     "tokenizer on a machine with internet:").format(
                         repo=wanted, reason=markdown_text(model.reason)), icon="⚠️")
    st.code(download_command(wanted), language="bash")
    if model is not None and any(p.suffix in PICKLE_SUFFIXES for p in Path(model.folder).iterdir()):
        st.markdown(_("Or convert its pickle weights to safetensors once, in a trusted "
                      "environment (unpickling runs any code hidden in the files):"))
        st.code(textwrap.dedent(CONVERT_CODE).replace("FOLDER", repr(model.folder)),
                language="python")


def _picked_repo() -> None:
    st.session_state.pop(MISSING, None)  # a model chosen by hand: the URL's is forgotten


def cache_ui(allowed: bool) -> tuple[str, str | None]:
    """The cached models as a table (the ones the inspector cannot run greyed out, with the
    reason) and a picker of the runnable ones, by default the revision refs/main names.
    Returns (the chosen repo id or '', a repo id asked for that cannot be loaded or None): a
    repo id from the URL that is not cached or not runnable is warned about, with the command
    that downloads it, and no other model is loaded in its place."""
    if not allowed:
        st.info(_("Browsing the model cache is off on this server: it listens beyond this "
                  "machine and no operator allowed it ({setting}=1 turns it on).").format(
                      setting=ALLOW_CUSTOM_ENV), icon="🔒")
        return "", None
    folder = hub_cache_dir()
    found = cached_models(str(folder), i18n.get_language())
    wanted = st.session_state.get("im_repo") or ""
    match = next((m for m in found if wanted and m.matches(wanted)), None)
    if wanted and (match is None or not match.runnable):
        st.session_state[MISSING] = wanted
    elif match is not None:
        st.session_state["im_repo"] = match.source  # e.g. org/name@main is org/name
    missing = st.session_state.get(MISSING)
    if missing:
        missing_ui(missing, next((m for m in found if m.matches(missing)), None), folder)
    if not found:
        st.info(_("No models in the Hugging Face cache ({folder}). Models downloaded with "
                  "`huggingface-cli download org/name` (or by transformers) appear here; "
                  "HF_HOME or HF_HUB_CACHE move the cache.").format(folder=folder), icon="📦")
        return "", missing
    can_inspect = _("can inspect")
    rows = [{_("repo id"): m.repo_id, _("revision"): m.revision,
             _("size"): size_text(m.size_bytes), _("architecture"): m.architecture,
             _("position"): _(m.positional),
             can_inspect: _("yes") if m.runnable else _("no: {reason}").format(reason=m.reason)}
            for m in found]
    st.dataframe(rows, hide_index=True, key="im_cache_table",
                 column_config={can_inspect: st.column_config.TextColumn(width="large")})
    runnable = [m for m in found if m.runnable]
    sources = [m.source for m in runnable]
    if st.session_state.get("im_repo") not in sources:
        # the revision refs/main names by default; none while the URL's repo is warned about
        default = next((m for m in runnable if m.is_main), runnable[0] if runnable else None)
        st.session_state["im_repo"] = None if missing or default is None else default.source
    if not runnable:
        st.warning(_("None of the cached models can be inspected (see the reasons above)."))
        return "", missing
    # Each revision by its branches and tags (main first), a commit hash only when it has none.
    texts = {m.source: f"{m.repo_id} ({m.revision})" for m in runnable}
    choice = st.selectbox(_("Cached model"), sources, key="im_repo", format_func=texts.get,
                          placeholder=_("Choose a cached model"), on_change=_picked_repo,
                          help=_("Loaded offline from the cache, with the same safety rules as "
                                 "a folder (safetensors only, no remote code)."))
    if choice is None:
        return "", missing
    model = next(m for m in runnable if m.source == choice)
    st.caption(_("{model}: {size} on disk, which is about the memory it needs in its stored "
                 "dtype (alibi-viz loads float32: twice that for a 16-bit checkpoint). Very "
                 "large models can be inspected with disk offload, see the README.").format(
                     model=choice, size=size_text(model.size_bytes)))
    return choice, None


@ui.cached_figure(max_entries=16)
def slopes_fig(slopes: tuple, config_slopes: tuple | None, name: str):
    return model_slopes_figure(slopes, config_slopes, name=name)


def markdown_text(text: str) -> str:
    """`text` shown literally in markdown (paths and formulas hold * _ | characters)."""
    return "".join("\\" + c if c in "\\`*_{}[]<>()#+-.!|~" else c for c in str(text))


def source_ui(models: dict, default: str):
    """Shipped model or local folder, in the sidebar. Returns (source, shipped name, path)."""
    if st.session_state["im_model"] not in models:
        st.session_state["im_model"] = default
    with ui.settings():
        st.header(_("Inspect a model"))
        source = st.radio(_("Model"), SOURCES, key="im_source", format_func=SOURCE_TITLES.get,
                          help=_("One of the models shipped with alibi-viz, or any Hugging Face "
                                 "causal LM folder on this machine (written by save_pretrained)."))
        name, path = None, ""
        if source == "cache":
            pass  # chosen in the main area, where the table fits
        elif source == "shipped":
            if models:
                name = st.selectbox(_("Shipped model"), list(models), key="im_model",
                                    format_func=model_title)
        else:
            path = st.text_input(
                _("Folder"), key="im_path", placeholder=_("/path/to/checkpoint"),
                help=_("A folder with config.json, model.safetensors and the tokenizer. Nothing "
                       "is downloaded; only safetensors weights are read; no custom code runs."))
    return source, name, path.strip()


def info_ui(loaded) -> None:
    """The model's facts, its departures from the paper, and its slopes beside the schedules."""
    info = loaded.info
    st.subheader(_("The model"))
    left, right = st.columns([3, 2])
    with left:
        rows = model_info_rows(info, {"train_seq_len": loaded.train_seq_len})
        header = "| {property} | {value} |\n|---|---|\n".format(property=_("property"),
                                                                value=_("value"))
        st.markdown(header + "\n".join(
            f"| {row['property']} | {markdown_text(row['value'])} |" for row in rows))
    with right:
        for warning in info.warnings:  # formulas such as (QK^T + m*j)/sqrt(d): shown as written
            st.warning(markdown_text(localized(warning)), icon="⚠️")
        for note in info.notes:
            st.info(markdown_text(localized(note)), icon="ℹ️")
        if not info.warnings and info.positional == "alibi":
            st.success(_("ALiBi as in the paper: slopes from a standard schedule, the bias "
                         "added to the scores unscaled."), icon="✅")
    if info.slopes:
        try:
            fig = slopes_fig(info.slopes, info.config_slopes, info.architecture)
        except AlibiVizError as exc:
            st.info(str(exc))
        else:
            ui.show_figure(fig, f"slopes_{info.model_type}", key="im_fig_slopes")
    else:
        st.info(_("No ALiBi slopes: this model encodes position with **{position}** "
                  "({bias_form}). Its heads are shown below all the same; the bias panel is "
                  "zero.").format(position=_(info.positional), bias_form=_(info.bias_form)),
                icon="ℹ️")


@st.cache_resource(max_entries=len(BUGS), show_spinner=_("Building the broken model..."))
def zoo_model(bug: str):
    from alibi_viz.data import make_tokenizer
    from alibi_viz.models.loading import describe_model

    model = broken_model(bug)
    return model, make_tokenizer(), describe_model(model)


def zoo_ui() -> None:
    """The conformance check's demo, in an expander."""
    with st.expander(_("Conformance demo: a zoo of broken ALiBi models")):
        zoo_demo()


def zoo_demo() -> None:
    """The conformance check's demo: a tiny BLOOM with one injected bug, checked on a click."""
    st.markdown(_("Tiny random BLOOM models, each with one bug that engineers hit when they "
                  "port, quantise or serve ALiBi models, injected through forward hooks. Pick "
                  "one and watch the verdicts change."))
    bug = st.selectbox(_("Bug"), list(BUGS), key="im_zoo_bug",
                       format_func=lambda b: _(BUGS[b]))  # a harmless one says so
    net, tokenizer, info = zoo_model(bug)
    conformance_view.show("im_zoo", net, tokenizer, info, ("zoo", bug),
                                run_label=_("Check this broken model"))


st.title(_("Inspect a model"))
st.caption(_("Load a checkpoint and see how it encodes position, its ALiBi slopes against the "
             "standard schedules, and then its heads on any text."))

# On a phone the demo comes after the model's heads: a closed expander's widgets are still
# drawn, and ahead of the page's first figure they held it back on a phone's CPU.
demo_first = not ui.on_phone()
if demo_first:
    zoo_ui()

models = shipped_models()
default = DEFAULT_MODEL if DEFAULT_MODEL in models else next(iter(models), "")
PARAMS = [UrlParam("source", "choice", "shipped", choices=SOURCES),
          UrlParam("model", "choice", default, choices=tuple(models) or ("",)),
          UrlParam("path", "text", ""), UrlParam("repo", "text", ""), *heads_view.VIEW_PARAMS]
if ui.first_visit(PREFIX):
    st.session_state["_im_source_from_url"] = ("cache" if st.query_params.get("repo") else
                                               "folder" if st.query_params.get("path") else None)
heads_view.seed(PREFIX, PARAMS)
if (source_in_url := st.session_state.pop("_im_source_from_url", None)) is not None:
    st.session_state["im_source"] = source_in_url
ui.show_url_warnings(PREFIX)

allowed = ui.custom_paths_allowed()
source, name, path = source_ui(models, default)
repo, missing = cache_ui(allowed) if source == "cache" else ("", None)
if source == "cache" and not repo:
    ui.write_url({"source": source, "repo": missing})  # the asked-for repo stays in the URL
    ui.stop()
if source == "shipped" and not name:
    st.error(_("No shipped models were found in assets/models: choose *{folder}*, or train "
               "them with `python -m experiments.train` (see the README).").format(
                   folder=SOURCE_TITLES["folder"]), icon="🚫")
    ui.stop()
if source == "folder" and not path:
    st.info(ui.where_settings(
        _("Type the path of a model folder in the sidebar: a Hugging Face causal LM saved "
          "with save_pretrained (config.json, model.safetensors, tokenizer files)."),
        _("Type the path of a model folder in Settings, at the top of the page: a Hugging Face "
          "causal LM saved with save_pretrained (config.json, model.safetensors, tokenizer "
          "files).")), icon="👈")
    ui.stop()

target = str(models[name]) if source == "shipped" else repo if source == "cache" else path
restricted = ", ".join(f"`{v}={os.environ[v]}`" for v in (MODEL_ROOT_ENV, ALLOW_CUSTOM_ENV)
                       if os.environ.get(v, "").strip())
loaded = heads_view.load(target)
if loaded is None:
    st.markdown(
        (_("**What to check:** the cached model holds config.json, safetensors weights (pickle "
           "`.bin` files are refused) and the tokenizer; the model is a causal language model "
           "built into transformers.") if source == "cache" else
         _("**What to check:** the folder exists on the machine running the app and holds "
           "config.json, model.safetensors (pickle `.bin` files are refused) and the tokenizer; "
           "the model is a causal language model built into transformers."))
        + (" " + _("This deployment restricts which folders can be loaded ({settings}).").format(
            settings=restricted) if restricted else ""))
    ui.write_url({"source": source, "model": name, "path": path or None, "repo": repo or None})
    ui.stop()

info_ui(loaded)
st.subheader(_("Its heads on a text"))
text = heads_view.text_ui(PREFIX)
choice = heads_view.controls_ui(PREFIX, loaded.info)
ui.write_url({"source": source, "model": name if source == "shipped" else None,
              "path": path if source == "folder" and path else None,
              "repo": repo or None, **heads_view.url_values(PREFIX, choice, text)})
heads_view.show(PREFIX, loaded, text, choice)
if not demo_first:
    zoo_ui()
