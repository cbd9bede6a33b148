"""Typed exceptions of alibi-viz.

Every error the library raises on bad input is a subclass of `AlibiVizError`
(itself a `ValueError`, so callers that already catch `ValueError` keep working).
The message is written for the person who typed the input: it says what was
wrong and what to do instead, so the app can show it as it is.
"""


class AlibiVizError(ValueError):
    """Base class: bad input to an alibi-viz function."""


class BudgetError(AlibiVizError):
    """A computation would need more memory than the configured budget allows."""


class ModelLoadError(AlibiVizError):
    """A model folder could not be loaded (missing, corrupt, unsafe or unsupported)."""


class ClassError(AlibiVizError):
    """A class session (alibi_viz_app.class_store) refused an operation; the message says why."""


class BadClassCode(ClassError):
    """A class code that cannot be one: not 5 characters of the code alphabet."""


class ClassNotFound(ClassError):
    """No live class has this code: it never existed, was ended, or expired (and was deleted)."""


class NotTheTeacher(ClassError):
    """A teacher-only operation (move the class, reveal, ask again, end) without the room's key."""


class ClassesFull(ClassError):
    """The store already holds as many live classes as it allows."""


class TooManyClasses(ClassError):
    """This browser session already runs as many live classes as one session may."""


class AnswerRefused(ClassError):
    """An answer that cannot be counted: not one of the question's choices."""


class AnswersClosed(AnswerRefused):
    """An answer to a question whose answers are revealed (until the teacher asks it again)."""


class ClassStoreError(ClassError):
    """The class store is misconfigured or cannot be reached."""
