"""Where a lesson stands: its step, whether the step's question waits for its answer, and, on
the last step (the misconceptions), which myth is on screen and whether its fact is shown. The
clicker's keys and the page's buttons move it; the page keeps it between reruns
(alibi_viz_app/app_pages/lesson.py).

    cursor = LessonCursor(steps=9, myths=6, step=3, question_open=True)
    cursor.forward(present=True)    # on a projector: step 3's answer (and figure) appears
    cursor.forward(present=True)    # then step 4

And the lesson's small computations that need no page: the slope control's labels, step 1's
verdict, how a projector splits a long answer, the context myth's table of the paper's numbers,
the parameters myth's sentence (alibi_viz_app/lesson_steps.py draws them).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from alibi_viz import paper
from alibi_viz.i18n import N_, _, number


@dataclass
class LessonCursor:
    steps: int                # steps in the lesson; the last one holds the myths
    myths: int                # myths of the last step, shown one at a time on a projector
    step: int = 1             # the step on screen, 1-based
    myth: int = 0             # the myth on screen (last step), 0-based
    myth_shown: bool = False  # whether that myth's fact is shown
    question_open: bool = False  # the step on screen asks a question whose answer is hidden


    def go_to(self, step: int) -> None:
        """Move to `step` (clamped to 1..steps); the myths start again from the first. Whether
        the new step asks a question is the page's to say (`question_open`) once it is drawn."""
        self.step = min(self.steps, max(1, step))
        self.myth, self.myth_shown, self.question_open = 0, False, False

    def forward(self, present: bool) -> bool:
        """The clicker's "next": the next step, except in presentation mode, where a step's
        question is answered first (the press reveals the answer and the figure, the next one
        moves on), and on the myths each press first shows the fact of the myth on screen, then
        moves to the next myth. True when it went to a step (so its questions are asked
        afresh); False when it revealed or moved among the myths."""
        if present and self.question_open:
            self.question_open = False
            return False
        if not (present and self.step == self.steps):
            self.go_to(self.step + 1)
            return True
        if not self.myth_shown:
            self.myth_shown = True
        elif self.myth < self.myths - 1:
            self.myth, self.myth_shown = self.myth + 1, False
        return False

    def backward(self, present: bool) -> bool:
        """The clicker's "back": the previous myth (or step, from the first myth). True when
        it went to a step. A step's answer once shown stays shown: back leaves the step."""
        if present and self.step == self.steps and self.myth > 0:
            self.myth, self.myth_shown = self.myth - 1, False
            return False
        self.go_to(self.step - 1)
        return True

    def at_the_end(self, present: bool) -> bool:
        """Nothing left to move forward to: the last step, its question (if any) answered, and
        (on a projector) its last myth's fact shown."""
        if self.step < self.steps or (present and self.question_open):
            return False
        return not present or (self.myth == self.myths - 1 and self.myth_shown)


def embedding_norm_parameters(model) -> int:
    """Parameters of the LayerNorm that BLOOM applies to the token embeddings
    (`transformer.word_embeddings_layernorm`: a weight and a bias of the hidden size h, 2h in
    all); 0 for a model without one (GPT-NeoX, GPT-2). No position parameter: the one
    difference between the shipped ALiBi (BLOOM) and RoPE (GPT-NeoX) models' counts."""
    norm = getattr(getattr(model, "transformer", None), "word_embeddings_layernorm", None)
    return sum(p.numel() for p in norm.parameters()) if norm is not None else 0


def slope_label(m: float) -> str:
    """How the lesson writes a slope m of its slope control: "0 (no position)", "1/4", "1"."""
    return _("0 (no position)") if m == 0 else f"1/{round(1 / m)}" if m < 1 else "1"


def share_choice(with_bias: float, without_bias: float) -> str:
    """Step 1's answer on the last keys' share of the attention (fractions 0..1) with the bias
    against without it, as a class's choice: "more", "less" or "same"."""
    if math.isclose(with_bias, without_bias, rel_tol=1e-9):
        return "same"
    return "more" if with_bias > without_bias else "less"


def share_verdict(with_bias: float, without_bias: float) -> str:
    """`share_choice` in words: "More", "Less" or "The same" (the first word of its answer)."""
    return {"same": _("The same"), "more": _("More"),
            "less": _("Less")}[share_choice(with_bias, without_bias)]


def trend_choice(ratio: float) -> str:
    """"up" or "down": whether a perplexity ratio (longer over the training length) went up."""
    return "up" if ratio > 1 else "down"


def split_answer(answer: str, sentences: int = 2) -> tuple[str, str]:
    """(the first sentence, the rest) of an answer of more than `sentences` sentences, else
    (answer, ""): what a projector shows at once, and what it folds away under the figure."""
    parts = re.split(r"(?<=[.!?])\s+(?=[A-ZÁÉÍÓÚÑ¿А-ЯЁ(])", answer.strip())
    if len(parts) <= sentences:
        return answer, ""
    return parts[0], " ".join(parts[1:])


def half_formed(scores) -> int:
    """Index of the first of a head's saved scores (shape (snapshots,), in training order) that
    reaches half its final score: when step 8's copying head formed."""
    scores = np.asarray(scores)
    return int(np.argmax(scores >= scores[-1] / 2))


def paper_context_rows() -> list[dict]:
    """The context myth's table: the paper's ALiBi perplexities (L = 1,024) by evaluation
    length, in non-overlapping windows (Table 3) and with a sliding window of stride 1 (Table
    15), "—" where a table has no such length. Column names are English, marked for
    translation (the page's table translates them)."""
    lengths = sorted(set(paper.TABLE3_ALIBI) | set(paper.TABLE15_ALIBI_L1024))
    return [{N_("evaluation length (tokens)"): n,
             N_("non-overlapping windows (Table 3)"): paper.TABLE3_ALIBI.get(n, "—"),
             N_("sliding window, stride 1 (Table 15)"): paper.TABLE15_ALIBI_L1024.get(n, "—")}
            for n in lengths]


def parameters_sentence(extra: int, norm: int) -> str | None:
    """The parameters myth's sentence under its table: `extra` parameters the ALiBi model has
    beyond the RoPE one, `norm` those of its embedding LayerNorm (`embedding_norm_parameters`).
    When they are equal, the LayerNorm is named as the whole difference; None when the models
    have as many parameters."""
    if extra and extra == norm:
        return _("Neither model has a position parameter. ALiBi's has {extra} more "
                 "parameters in all: BLOOM, the architecture it is built on, "
                 "normalises the token embeddings with a LayerNorm (a weight and a "
                 "bias for each of its {hidden} dimensions: 2 × {hidden} = {extra}), "
                 "which GPT-NeoX, RoPE's, does not have.").format(
            extra=number(extra), hidden=number(norm // 2))
    if extra:
        return _("Neither model has a position parameter; the {extra} parameters "
                 "between them are in other layers of their architectures.").format(
            extra=number(abs(extra)))
    return None
