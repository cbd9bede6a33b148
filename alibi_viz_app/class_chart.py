"""The class's answers to one lesson question (issue 42): how many students chose each answer,
the computed answer marked, drawn to be read from the back of a room on a 1024x768 projector.

* `answer_distribution_figure`: one horizontal bar per choice, in the question's order, its
  count and share written on it; the bar of the computed answer (when a choice is it) green
  and marked with a tick, the others grey.
"""

from __future__ import annotations

import plotly.graph_objects as go

from alibi_viz.errors import AlibiVizError
from alibi_viz.i18n import ngettext, percent

RIGHT_COLOR = "#1a7f37"   # the computed answer: green, 5.1:1 on white
OTHER_COLOR = "#8c8c8c"   # the other choices: grey
FONT_PX = 18              # no text smaller: read from the back row (figures.lesson's 14 px, and more)
BAR_PX = 46               # height of one choice's bar and its gap
MAX_BARS_PX = 260         # all the bars together: the chart stays beside the answer's text
CLASS_FIGURE_WIDTH = 440  # px: half a 1024-pixel projector, beside the answer's text


def answer_distribution_figure(labels: list[str], counts: list[int], right: int | None = None,
                               width: int = CLASS_FIGURE_WIDTH) -> go.Figure:
    """The class's answers: `labels[i]` (the choice as the page shows it) was chosen by
    `counts[i]` sessions; `right` is the index of the computed answer, or None when no choice
    is marked. Bars run top to bottom in the order given; each is labelled with its count and
    its share of all answers. Height grows with the number of choices (46 px each, at
    most 260 px for all, 30 px each at least)."""
    if len(labels) != len(counts) or not labels:
        raise AlibiVizError("answer_distribution_figure needs one count per label (got "
                            f"{len(labels)} labels and {len(counts)} counts).")
    if any(not isinstance(c, int) or c < 0 for c in counts):
        raise AlibiVizError("Counts of answers are whole numbers, 0 or more.")
    if right is not None and not 0 <= right < len(labels):
        raise AlibiVizError(f"right={right} is not the index of one of the {len(labels)} labels.")
    total = sum(counts)
    shown = [f"✓ {label}" if k == right else label for k, label in enumerate(labels)]
    texts = [f"{c} ({percent(c / total, 0)})" if total else "0" for c in counts]
    fig = go.Figure(go.Bar(
        x=counts, y=shown, orientation="h", text=texts,
        # a short bar has its text beside it (inside it would not fit, and 0 has no bar)
        textposition=["inside" if c >= 0.3 * max(counts) > 0 else "outside" for c in counts],
        marker_color=[RIGHT_COLOR if k == right else OTHER_COLOR for k in range(len(labels))],
        textfont={"size": FONT_PX}, hoverinfo="skip", cliponaxis=False))
    bar = max(30, min(BAR_PX, MAX_BARS_PX // len(labels)))  # 8 heads' bars fit beside the text
    title = ngettext("The class: {n} answer", "The class: {n} answers", total).format(n=total)
    fig.update_layout(
        title={"text": title, "font": {"size": FONT_PX + 2}, "x": 0, "xanchor": "left"},
        width=width, height=70 + bar * len(labels), margin={"l": 8, "r": 16, "t": 44, "b": 8},
        font={"size": FONT_PX}, showlegend=False, plot_bgcolor="white", paper_bgcolor="white",
        bargap=0.25)
    # Choices are categories even when they read as numbers (step 8's "0", "30", "100"):
    # plotly would put such labels on a numeric axis, at their values.
    fig.update_yaxes(type="category", autorange="reversed", automargin=True,
                     tickfont={"size": FONT_PX})
    fig.update_xaxes(visible=False, range=[0, max(1, max(counts)) * 1.05])
    return fig
