"""Numbers quoted from the ALiBi paper, for the pages to show beside this project's own.

Source: Ofir Press, Noah A. Smith, Mike Lewis, "Train Short, Test Long: Attention with Linear
Biases Enables Input Length Extrapolation", ICLR 2022, arXiv:2108.12409v2. Every value here is
a transcription of the paper (the table or section is named with it), never a measurement of
ours; the pages label them "paper" and put this project's measured numbers beside them.
"""

from __future__ import annotations

CITATION = "Press, Smith & Lewis, ICLR 2022 (arXiv:2108.12409)"

# Appendix Table 2: WikiText-103 validation perplexity of the models trained with
# L = 512 tokens, evaluated with non-overlapping windows of 512 and of 3,512 tokens.
TABLE2_TRAIN_LEN = 512
TABLE2 = {  # method -> (perplexity at 512, perplexity at 3512)
    "sinusoidal": (20.05, 178.97),
    "rotary": (20.07, 35.54),
    "ALiBi": (19.73, 18.40),
}
TABLE2_LONG = 3512

# Appendix B (sliding-window evaluation, stride 1): the same L = 512 models; ALiBi stays flat
# while the sinusoidal model degrades.
SLIDING_SINUSOIDAL = (18.35, 204.42)  # sinusoidal at 512 and at 1,024 tokens
SLIDING_LONG = 1024

# Beyond the paper. The official repository's README (github.com/ofirpress/
# attention_with_linear_biases) points to position interpolation for ALiBi, so that a model
# uses a context longer than it was trained on: Al-Khateeb et al. 2023, arXiv:2310.13017.
ALIBI_INTERPOLATION = "Al-Khateeb et al. 2023, arXiv:2310.13017"

# The L = 1,024 WikiText-103 ALiBi model read longer: it keeps working, but past about L the
# extra context does not help. Transcribed by the issue-24 audit from arXiv:2108.12409v2 (no
# copy of the paper's PDF is available offline here to re-check them).
# Appendix Table 3, non-overlapping windows: perplexity at 1,024 and at 10,024 tokens.
TABLE3_TRAIN_LEN = 1024
TABLE3_ALIBI = {1024: 18.66, 10024: 17.97}
# Appendix Table 15, sliding window with stride 1 (every token sees exactly L tokens).
TABLE15_ALIBI = {512: 17.98, 1024: 17.92, 3072: 18.30}
