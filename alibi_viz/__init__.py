"""alibi-viz: see and teach ALiBi (Attention with Linear Biases, Press, Smith & Lewis, 2021).

The library behind the app: slopes and bias matrices (`alibi`), other positional schemes for
comparison (`positional`), plot builders (`plots`), and, for real models, loading and head
inspection. It never imports streamlit, so every number the app shows can be tested plainly.
"""

from .alibi import (
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
from .errors import AlibiVizError, BudgetError, ModelLoadError

__all__ = [
    "DEFAULT_BUDGET_BYTES",
    "MODES",
    "SCHEDULES",
    "AlibiVizError",
    "BudgetError",
    "ModelLoadError",
    "alibi_bias",
    "alibi_bias_row_constant",
    "alibi_bias_sampled",
    "alibi_slopes",
    "attention_span",
    "half_life",
    "implied_attention",
    "mean_distance",
]
