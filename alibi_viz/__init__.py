"""alibi-viz: see and teach ALiBi (Attention with Linear Biases, Press, Smith & Lewis, 2021).

The library behind the app: slopes and bias matrices (`alibi`), other positional schemes for
comparison (`positional`), figures (`figures/`: each page's figures, built with the drawing kit `figures.render`), and,
for real models (`models/`), loading, head inspection, behaviour scores and the ALiBi
conformance check and context reach. It never imports the Streamlit app (`alibi_viz_app`) nor
the experiments that train and measure the shipped models (`experiments/`). In a notebook,
`show_heads`, `show_bias`, `show_check` and `show_gallery` return one plotly figure each
(`notebook`); `report` writes all of it into one HTML file. It never imports streamlit, so every number the app shows can be tested
plainly. The README's "How the code is laid out" names each module's one job.
"""

import importlib

from alibi_viz.alibi import (
    DEFAULT_BUDGET_BYTES,
    MODES,
    SCHEDULES,
    alibi_bias,
    alibi_bias_row_constant,
    alibi_bias_sampled,
    alibi_slopes,
    attention_span,
    half_life,
    implied_attention,
    mean_distance,
)
from alibi_viz.errors import AlibiVizError, BudgetError, ModelLoadError
from alibi_viz.positional import METHODS, score_matrix, score_matrix_sampled, score_vs_distance

# Model inspection needs torch and transformers (seconds to import): loaded on first use, so
# `from alibi_viz import alibi_slopes` stays instant.
_LAZY = {
    "AttentionResult": "models.attention", "Decomposition": "models.attention", "HeadStatistics": "models.attention",
    "attention_maps": "models.attention", "head_statistics": "models.attention", "score_decomposition": "models.attention",
    "ModelInfo": "models.loading", "load_model": "models.loading", "resolve_model_path": "models.loading",
    "AlibiCheck": "models.conformance", "check_alibi": "models.conformance",
    "check_kernel": "models.kernel_check", "check_bias": "models.kernel_check",
    "behaviour_scores": "models.behaviour", "context_reach": "models.context_reach", "copy_at_distance": "models.context_reach",
    "list_cached_models": "models.hub_cache",
    # In a notebook: one call, one plotly figure shown inline (alibi_viz/notebook.py).
    "show_heads": "notebook", "show_bias": "notebook", "show_check": "notebook",
    "show_gallery": "notebook",
}


def __getattr__(name: str):
    if name in _LAZY:
        module = importlib.import_module(f".{_LAZY[name]}", __name__)
        return getattr(module, name)
    raise AttributeError(f"module 'alibi_viz' has no attribute {name!r}")

__all__ = [
    "DEFAULT_BUDGET_BYTES",
    "METHODS",
    "MODES",
    "SCHEDULES",
    "AlibiCheck",
    "AlibiVizError",
    "AttentionResult",
    "BudgetError",
    "Decomposition",
    "HeadStatistics",
    "ModelInfo",
    "ModelLoadError",
    "attention_maps",
    "behaviour_scores",
    "check_alibi",
    "check_bias",
    "check_kernel",
    "context_reach",
    "copy_at_distance",
    "list_cached_models",
    "head_statistics",
    "load_model",
    "resolve_model_path",
    "score_decomposition",
    "score_matrix",
    "score_matrix_sampled",
    "score_vs_distance",
    "show_bias",
    "show_check",
    "show_gallery",
    "show_heads",
    "alibi_bias",
    "alibi_bias_row_constant",
    "alibi_bias_sampled",
    "alibi_slopes",
    "attention_span",
    "half_life",
    "implied_attention",
    "mean_distance",
]
