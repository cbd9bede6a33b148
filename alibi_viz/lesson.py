"""Where a lesson stands: its step, whether the step's question waits for its answer, and, on
the last step (the misconceptions), which myth is on screen and whether its fact is shown. The
clicker's keys and the page's buttons move it; the page keeps it between reruns
(app/app_pages/lesson.py).

    cursor = LessonCursor(steps=9, myths=6, step=3, question_open=True)
    cursor.forward(present=True)    # on a projector: step 3's answer (and figure) appears
    cursor.forward(present=True)    # then step 4
"""

from __future__ import annotations

from dataclasses import dataclass


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
