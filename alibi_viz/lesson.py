"""Where a lesson stands: its step and, on the last step (the misconceptions), which myth is on
screen and whether its fact is shown. The clicker's keys and the page's buttons move it; the
page keeps it between reruns (app/app_pages/lesson.py).

    cursor = LessonCursor(steps=9, myths=6, step=9)
    cursor.forward(present=True)    # on a projector: the first myth's fact appears
    cursor.forward(present=True)    # then the next myth
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

    def go_to(self, step: int) -> None:
        """Move to `step` (clamped to 1..steps); the myths start again from the first."""
        self.step = min(self.steps, max(1, step))
        self.myth, self.myth_shown = 0, False

    def forward(self, present: bool) -> bool:
        """The clicker's "next": the next step, except on the myths in presentation mode,
        where each press first shows the fact of the myth on screen, then moves to the next
        myth. True when it went to a step (so its questions are asked afresh)."""
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
        it went to a step."""
        if present and self.step == self.steps and self.myth > 0:
            self.myth, self.myth_shown = self.myth - 1, False
            return False
        self.go_to(self.step - 1)
        return True

    def at_the_end(self, present: bool) -> bool:
        """Nothing left to move forward to: the last step, and (on a projector) its last
        myth's fact shown."""
        if self.step < self.steps:
            return False
        return not present or (self.myth == self.myths - 1 and self.myth_shown)
