"""Numbers quoted from the ALiBi paper, for the pages to show beside this project's own.

Source: Ofir Press, Noah A. Smith, Mike Lewis, "Train Short, Test Long: Attention with Linear
Biases Enables Input Length Extrapolation", ICLR 2022, arXiv:2108.12409v2. Every value here is
a transcription of the paper, never a measurement of ours; the pages label them "paper" and
put this project's measured numbers beside them.

Every number from the appendix tables is a `Quote` that names its table, its method, its row
(the training length L) and its column (the evaluation length), so that
tests/test_paper_tables.py reads each one back from the paper's tables as data
(`../shared/paper/*.csv` beside the checkout): a number copied from the wrong row fails. The
app needs nothing but this file at run time.
"""

from __future__ import annotations

from dataclasses import dataclass

CITATION = "Press, Smith & Lewis, ICLR 2022 (arXiv:2108.12409)"


@dataclass(frozen=True)
class Quote:
    """One number of an appendix table.

    table: the paper's table number (1-5, 13-15). method: as the tables' CSVs name it
    ("sinusoidal", "rotary", "t5bias", "alibi"). train: the row, the training length L in
    tokens. length: the column, the evaluation length (L_valid) in tokens; Table 1 has one
    column per quantity, so there it is L again. value: the number as printed, None where
    the paper reports OOM (out of memory). quantity: "ppl" (perplexity), "train_wps"
    (training words per second) or "train_memory_gb" (training memory, GB).
    """

    table: int
    method: str
    train: int
    length: int
    value: float | None
    quantity: str = "ppl"


QUOTES: list[Quote] = []  # every Quote below, in order: what the paper-table test reads back


def _quote(table: int, method: str, train: int, length: int, value: float | None,
           quantity: str = "ppl") -> Quote:
    q = Quote(table, method, train, length, value, quantity)
    QUOTES.append(q)
    return q


# Appendix Table 2 (WikiText-103, the models trained with L = 512 tokens, non-overlapping
# windows): each method at the training length and at 3,512 tokens (6.9x).
TABLE2_TRAIN_LEN = 512
TABLE2_LONG = 3512
TABLE2_QUOTES = {  # method as the pages name it -> (at 512, at 3,512)
    "sinusoidal": (_quote(2, "sinusoidal", 512, 512, 20.05),
                   _quote(2, "sinusoidal", 512, 3512, 178.97)),
    "rotary": (_quote(2, "rotary", 512, 512, 20.07), _quote(2, "rotary", 512, 3512, 35.54)),
    "T5 bias": (_quote(2, "t5bias", 512, 512, 19.65), _quote(2, "t5bias", 512, 3512, 22.91)),
    "ALiBi": (_quote(2, "alibi", 512, 512, 19.73), _quote(2, "alibi", 512, 3512, 18.40)),
}
TABLE2 = {method: (short.value, long.value) for method, (short, long) in TABLE2_QUOTES.items()}
# The T5 bias column of Table 2: its lowest value (the test checks that no row of the column
# is lower), its last value before it runs out of memory, and the first OOM row (every row
# from there on is OOM).
T5_BEST = _quote(2, "t5bias", 512, 1112, 18.77)
T5_LAST = _quote(2, "t5bias", 512, 12512, 64.94)
T5_OOM = _quote(2, "t5bias", 512, 13512, None)

# Appendix Table 1, at L = 512: training speed (words per second) and training memory (GB).
TABLE1_TRAIN_LEN = 512
TRAIN_SPEED = {  # method as the pages name it -> Quote
    "sinusoidal": _quote(1, "sinusoidal", 512, 512, 28500, "train_wps"),
    "T5 bias": _quote(1, "t5bias", 512, 512, 14400, "train_wps"),
    "ALiBi": _quote(1, "alibi", 512, 512, 28300, "train_wps"),
}
TRAIN_MEMORY = {
    "sinusoidal": _quote(1, "sinusoidal", 512, 512, 15.3, "train_memory_gb"),
    "T5 bias": _quote(1, "t5bias", 512, 512, 16.9, "train_memory_gb"),
    "ALiBi": _quote(1, "alibi", 512, 512, 15.3, "train_memory_gb"),
}

# Appendix B, Table 13 (sliding window, stride 1): the sinusoidal model trained at L = 512, at
# 512 and at 1,024 tokens.
SLIDING_SINUSOIDAL_QUOTES = (_quote(13, "sinusoidal", 512, 512, 18.35),
                             _quote(13, "sinusoidal", 512, 1024, 204.42))
SLIDING_SINUSOIDAL = tuple(q.value for q in SLIDING_SINUSOIDAL_QUOTES)
SLIDING_LONG = 1024

# Appendix B, Table 15 (sliding window, stride 1: every scored token sees a full window of the
# evaluation length): the ALiBi models trained at L = 512 and at L = 1,024, at every
# evaluation length the table reports (it goes no further than 3,072).
TABLE15_ALIBI_L512 = {q.length: q.value for q in (
    _quote(15, "alibi", 512, 512, 17.98), _quote(15, "alibi", 512, 1024, 17.92),
    _quote(15, "alibi", 512, 1536, 18.2), _quote(15, "alibi", 512, 2048, 18.28),
    _quote(15, "alibi", 512, 3072, 18.3))}
TABLE15_ALIBI_L1024 = {q.length: q.value for q in (
    _quote(15, "alibi", 1024, 1024, 17.46), _quote(15, "alibi", 1024, 1536, 17.47),
    _quote(15, "alibi", 1024, 2048, 17.62), _quote(15, "alibi", 1024, 3072, 17.92))}

# Appendix Table 3 (non-overlapping windows): the ALiBi model trained at L = 1,024, at 1,024
# and at 10,024 tokens.
TABLE3_TRAIN_LEN = 1024
TABLE3_ALIBI = {q.length: q.value for q in (_quote(3, "alibi", 1024, 1024, 18.66),
                                            _quote(3, "alibi", 1024, 10024, 17.97))}

# Not from a table. Section 3: trainable slopes were tried and did not yield strong
# extrapolation. Every model of the appendix tables is the Baevski & Auli WikiText-103 LM of
# 247M parameters (../shared/paper/README.md; the paper-table test checks the figure there).
TABLE_MODEL_PARAMETERS_M = 247

# Beyond the paper. The official repository's README (github.com/ofirpress/
# attention_with_linear_biases) points to position interpolation for ALiBi, so that a model
# uses a context longer than it was trained on: Al-Khateeb et al. 2023, arXiv:2310.13017.
ALIBI_INTERPOLATION = "Al-Khateeb et al. 2023, arXiv:2310.13017"
