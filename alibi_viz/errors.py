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
