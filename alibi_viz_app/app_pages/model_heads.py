"""Model heads: the shipped ALiBi model's real attention, head by head, on any text."""

import streamlit as st

from alibi_viz.assets import DEFAULT_MODEL, model_title, shipped_models, train_hint
from alibi_viz.i18n import _, number
from alibi_viz.models.loading import snapshot_folders
from alibi_viz_app import heads_view, ui
from alibi_viz_app.query_params import UrlParam

PREFIX = "mh"

st.title(_("Model heads"))
st.caption(_("Small models trained for this project on Python code and on English, Spanish "
             "and Russian prose, run on your text: every head's attention, where one head's "
             "score comes from (content vs position), and per head how far it looks and how "
             "much its content, rather than its slope, decides where it looks."))

models = shipped_models()
if not models:
    st.error(_("No shipped models were found in assets/models.") + " "
             + train_hint(DEFAULT_MODEL) + " "
             + _("Or open *Inspect a model* to load a model folder of your own."), icon="🚫")
    ui.stop()

default = DEFAULT_MODEL if DEFAULT_MODEL in models else next(iter(models))
snapshots = snapshot_folders(DEFAULT_MODEL) if DEFAULT_MODEL in models else {}
steps = tuple(snapshots)
PARAMS = [UrlParam("model", "choice", default, choices=tuple(models)),
          *([UrlParam("step", "choice", steps[-1], choices=steps)] if steps else []),
          *heads_view.VIEW_PARAMS]
heads_view.seed(PREFIX, PARAMS)
ui.show_url_warnings(PREFIX)

if st.session_state["mh_model"] not in models:  # its folder vanished since it was chosen
    st.warning(_("The model '{model}' is no longer in assets/models; showing '{default}'.")
               .format(model=st.session_state["mh_model"], default=default), icon="⚠️")
    st.session_state["mh_model"] = default
with ui.settings():
    st.header(_("Model heads"))
    name = st.selectbox(_("Model"), list(models), key="mh_model",
                        format_func=model_title,
                        help=_("The shipped family: ALiBi and four baselines (sinusoidal, "
                               "rotary, learned and no positions) trained alike on the same "
                               "data."))
    step = None
    if name == DEFAULT_MODEL and steps:
        step = st.select_slider(
            _("Training step"), steps, key="mh_step", format_func=number,
            help=_("The ALiBi model as it was at this step of its {last} training steps (saved "
                   "during training): watch its heads form.").format(last=number(steps[-1])))

# The last snapshot holds the shipped weights themselves: show the shipped folder for it.
folder = snapshots[step] if step is not None and step != steps[-1] else models[name]
loaded = heads_view.load(str(folder))
if loaded is None:
    ui.stop()
if step is not None and step != steps[-1]:
    st.info(_("Showing the ALiBi model at training step {step} of {last}.").format(
        step=number(step), last=number(steps[-1])), icon="⏳")
# On a phone the text box comes after the maps (heads_view.show), which are drawn first.
phone = ui.on_phone()
text = heads_view.text_value(PREFIX) if phone else heads_view.text_ui(PREFIX)
choice = heads_view.controls_ui(PREFIX, loaded.info)
ui.write_url({"model": name, **({"step": step} if step is not None else {}),
              **heads_view.url_values(PREFIX, choice, text)})
heads_view.show(PREFIX, loaded, text, choice, text_box=phone)
if heads_view.interactive(PREFIX):  # plotly's charts, on demand on a phone
    if step is None or step == steps[-1]:  # measured on the shipped models as trained
        heads_view.ablation_ui(name)
    if step is not None:
        heads_view.training_ui(step)
