"""Everything heavy the pages import, imported once per server process before any page runs.

alibi_viz_app/main.py imports this module as its first statement. Streamlit runs the script of each
session in its own thread, and a cold server that several browsers open at once would
otherwise import pandas, transformers' lazy modules and the model classes from several threads
at the same time. Python's import machinery then hands a thread a partially initialised module
(it breaks the apparent deadlock between two threads importing each other's dependencies):
`partially initialized module 'pandas' has no attribute 'Series'` (plotly peeks at
sys.modules["pandas"] while another session is still importing it), or `cannot import name
'AutoModelForCausalLM' from 'transformers'` (two sessions resolving transformers' lazy
attribute at once). Both reached visitors as Streamlit's exception box.

Here the first session's thread imports all of it while holding this module's import lock;
every other session's `import alibi_viz_app.preload` waits on that lock until the import is complete
(the session threads hold no other import lock at that point: main.py is exec'd, not
imported). After that, each lazy import inside a function of `app` or `alibi_viz` finds its
module complete in sys.modules (tests/test_storm.py checks that none is left out).

The cost is paid once per process, by its first visitor (alibi_viz_app/warm_up.py pays it for a
class's replicas): a few CPU-seconds, most of which the Model heads page needs anyway.
"""

# ruff: noqa: F401 (imported for their side effect: complete modules in sys.modules)

from __future__ import annotations

import json

# Third-party libraries the pages reach, most of them lazily (inside functions) or through
# other libraries: Streamlit's st.table and plotly's validators import or peek at pandas and
# pyarrow; alibi_viz.i18n imports babel's number formatting and catalog readers on first use.
import babel.messages.mofile
import babel.messages.pofile
import babel.numbers
import huggingface_hub
import huggingface_hub.errors
import numpy
import pandas
import pandas.api.extensions
import pandas.api.types
import pandas.io.formats.style
import PIL.Image
import plotly.colors
import plotly.graph_objects as go
import plotly.io
import plotly.subplots
import pyarrow
import safetensors
import safetensors.torch
import scipy.stats
import streamlit.runtime.scriptrunner
import torch
import torch.nn.functional
import tqdm

# transformers and huggingface_hub are lazy modules: each name is imported on its first
# attribute access, and that access is what raced. Resolve every name the library and the
# pages import.
import transformers
import transformers.models.auto.modeling_auto
import transformers.models.auto.tokenization_auto
import transformers.models.bloom.modeling_bloom
import transformers.models.falcon.modeling_falcon
import transformers.models.mpt.modeling_mpt
from huggingface_hub import scan_cache_dir
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    AutoTokenizer,
    BloomConfig,
    ByT5Tokenizer,
    FalconConfig,
    GPT2Config,
    GPTNeoXConfig,
    MptConfig,
)

try:  # the class store's client (alibi_viz_app.class_store): the optional `redis` extra
    import redis  # noqa: F401
except ImportError:
    pass

# The alibi_viz modules the pages use (their own top-level imports come with them).
import alibi_viz.alibi
import alibi_viz.assets
import alibi_viz.data
import alibi_viz.display
import alibi_viz.figures.bias
import alibi_viz.figures.compare
import alibi_viz.figures.extrapolation
import alibi_viz.figures.heads
import alibi_viz.figures.lesson
import alibi_viz.figures.render
import alibi_viz.figures.training
import alibi_viz.i18n
import alibi_viz.models.attention
import alibi_viz.models.behaviour
import alibi_viz.models.conformance
import alibi_viz.models.context_reach
import alibi_viz.models.head_ablation
import alibi_viz.models.hub_cache
import alibi_viz.models.layer_slopes
import alibi_viz.models.loading
import alibi_viz.models.scoring
import alibi_viz.models.slope_scale
import alibi_viz.models.zoo
import alibi_viz.notebook  # the CLI and notebook modules: a lazy import in alibi_viz must find them
import alibi_viz.paper
import alibi_viz.positional
import alibi_viz.precision
import alibi_viz.report
import alibi_viz.results.ablation
import alibi_viz.results.evaluation
import alibi_viz.results.learnable_slopes
import alibi_viz.results.reach
import alibi_viz.results.rescale
import alibi_viz.results.snapshots
import alibi_viz_app.export
import alibi_viz_app.glossary
import alibi_viz_app.query_params

# AutoModelForCausalLM/AutoTokenizer find a model's classes through lazy mappings, which import
# the model's modules on first use: resolve them for the model types a page can load (the
# shipped models, the inspect page's zoo of broken BLOOM and MPT models, Falcon's ALiBi).
MODEL_TYPES = {"bloom", "falcon", "gpt2", "gpt_neox", "mpt"}
for _config in sorted(alibi_viz.assets.MODELS_DIR.glob("*/config.json")):
    _model_type = json.loads(_config.read_text(encoding="utf-8")).get("model_type")
    if isinstance(_model_type, str):
        MODEL_TYPES.add(_model_type)
for _model_type in sorted(MODEL_TYPES):  # a type transformers lacks fails in its page, not here
    if _model_type in transformers.CONFIG_MAPPING:
        _config_class = transformers.CONFIG_MAPPING[_model_type]
        if _config_class in transformers.models.auto.modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING:
            transformers.models.auto.modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING[_config_class]
transformers.models.auto.tokenization_auto.tokenizer_class_from_name("ByT5Tokenizer")

# plotly's graph_objects are lazy too (one module per trace type and per nested property):
# build and serialise one figure with the pieces the pages' figures use.
_figure = plotly.subplots.make_subplots(rows=1, cols=2, subplot_titles=("a", "b"))
_figure.add_trace(go.Heatmap(z=[[0.0, 1.0]], colorbar={"title": {"text": "x"}},
                             hovertemplate="%{z}"), row=1, col=1)
_figure.add_trace(go.Scatter(x=[0, 1], y=[0, 1], mode="lines+markers", line={"dash": "dot"},
                             marker={"size": 4}, fill="tozeroy"), row=1, col=2)
_figure.add_trace(go.Bar(x=[0], y=[1], marker={"color": "red"}, error_y={"array": [0.1]}))
_figure.add_annotation(text="a", x=0, y=0, showarrow=False)
_figure.add_shape(type="line", x0=0, x1=1, y0=0, y1=1)
_figure.update_layout(title={"text": "t"}, legend={"orientation": "h"}, margin={"t": 10},
                      xaxis={"type": "log"}, coloraxis={"colorscale": "Viridis"})
plotly.colors.sample_colorscale("Viridis", [0.5])
_figure.to_plotly_json()
plotly.io.to_json(_figure)
del _figure
