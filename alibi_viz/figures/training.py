"""Watch heads form: the shipped ALiBi model's copying scores and held-out loss by training step.

`snapshot_figure` reads `alibi_viz.results.snapshots.SnapshotCurves` (measured once on the shipped
snapshots, assets/results/snapshots.json) and runs no model. Left: every head's copying
(induction) score against the step, the best copying head drawn thick, the others thin and
coloured by layer. Right: held-out loss per kind of text. x is the step on a log axis; step 0 (the
random initialisation) is drawn at STEP0_AT and labelled 0.

Every text is in the current language (`alibi_viz.i18n`), so a cached figure must be keyed by it.
"""

from __future__ import annotations

import plotly.colors as pc
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from alibi_viz import data
from alibi_viz.i18n import _, number
from alibi_viz.results.snapshots import SnapshotCurves

STEP0_AT = 10  # where step 0 sits on the log axis (the first real snapshot is step 30)
KIND_COLORS = {"python": "#1f77b4", "en": "#d62728", "es": "#2ca02c", "ru": "#9467bd"}


def _x(steps) -> list[float]:
    return [max(int(s), STEP0_AT) if s else STEP0_AT for s in steps]


def snapshot_figure(curves: SnapshotCurves, step: int | None = None,
                    height: int = 400) -> go.Figure:
    """Copying score per head and held-out loss per kind against the training step; a dotted
    line at `step` (the one the page shows)."""
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12, subplot_titles=(
        _("copying score of every head"), _("held-out loss")))
    x = _x(curves.steps)
    scores = curves.scores["induction"]  # (steps, layers, heads)
    layers, heads = scores.shape[1:]
    best = curves.best_copying_head()
    palette = pc.qualitative.Set2
    hover = _("step %{customdata}<br>copying score %{y:.2f}")
    for layer in range(layers):
        for head in range(heads):
            is_best = (layer, head) == best
            name = _("layer {layer}, head {head}").format(layer=layer + 1, head=head + 1)
            fig.add_trace(go.Scatter(
                x=x, y=scores[:, layer, head].tolist(), mode="lines+markers" if is_best else "lines",
                customdata=curves.steps.tolist(), name=name, legendgroup=f"layer{layer}",
                showlegend=is_best,
                line=dict(color="black" if is_best else palette[layer % len(palette)],
                          width=3 if is_best else 1),
                opacity=1 if is_best else 0.6,
                hovertemplate=name + "<br>" + hover + "<extra></extra>"), row=1, col=1)
    loss_hover = _("step %{customdata}<br>loss %{y:.3f} nats per byte")
    for kind, values in curves.heldout_loss.items():
        label = _(data.TEXT_KINDS[kind])
        fig.add_trace(go.Scatter(
            x=x, y=values.tolist(), mode="lines+markers", name=label,
            customdata=curves.steps.tolist(), line=dict(color=KIND_COLORS.get(kind), width=2),
            hovertemplate=label + "<br>" + loss_hover + "<extra></extra>"), row=1, col=2)
    # the first step and every other saved step counted back from the last (0, 30, 300, 1,000,
    # 3,000): on a log axis neighbouring late steps crowd, and a projector's font would set
    # their labels on one another
    steps = sorted(set(x))
    ticks = sorted({steps[0], *steps[::-2]})
    labels = ["0" if t == STEP0_AT and 0 in curves.steps else number(t) for t in ticks]
    for col in (1, 2):
        fig.update_xaxes(type="log", tickvals=ticks, ticktext=labels, automargin=True,
                         title=dict(text=_("training step (log scale)"), standoff=12),
                         row=1, col=col)
        if step is not None:
            fig.add_vline(x=_x([step])[0], line=dict(color="gray", dash="dot", width=2),
                          row=1, col=col)
    top = float(scores.max()) if scores.size else 1.0  # scores lie in [0, 1]; show the rise
    fig.update_yaxes(title=_("copying score"), range=[0, min(1.0, max(0.3, 1.2 * top))],
                     row=1, col=1)
    fig.update_yaxes(title=_("nats per byte"), row=1, col=2)
    return fig.update_layout(
        height=height, margin=dict(l=60, r=20, t=100, b=70), hovermode="closest",
        title=dict(text=_("Watch heads form: the ALiBi model during training"), y=0.99,
                   yanchor="top"),
        legend=dict(orientation="h", y=-0.3, yanchor="top", x=0.5, xanchor="center"))
