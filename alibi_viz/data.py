"""Training and evaluation text for the shipped models: Python's own standard library.

Corpus. The `.py` sources of the standard library of the interpreter that runs this code
(`sysconfig.get_paths()["stdlib"]`). Every machine that can run alibi-viz has them, nothing is
downloaded, and the Python Software Foundation License lets us train on them and quote them
(the shipped long example is an excerpt of one of these files). We skip test suites, installed
packages and the two folders that are data tables rather than code (`encodings`, `pydoc_data`),
and the machine-specific `_sysconfigdata*` module. The file list is sorted, so the corpus is the
same on every run of the same Python version.

Split. A file goes to validation when crc32 of its path (relative to the stdlib folder) is 0
mod 10, about one file in ten. Hashing the path rather than cutting the sorted list keeps the
split of a file stable when other Python versions add or remove files.

Tokens. Byte level: transformers' `ByT5Tokenizer(extra_ids=0)`, one token per UTF-8 byte (id =
byte + 3) plus pad (0), eos (1) and unk (2): 259 ids, no vocabulary file, and every token on an
attention map is a readable character. Files are joined with eos between them. For speed the
corpus is encoded with `bytes_to_ids` (a numpy add), which `test_train.py` checks against the
tokenizer itself.
"""

from __future__ import annotations

import sysconfig
import zlib
from pathlib import Path

import numpy as np
import torch

from alibi_viz.errors import AlibiVizError
from alibi_viz.i18n import N_

BYTE_OFFSET = 3  # ByT5 ids: 0 pad, 1 eos, 2 unk, then byte b -> b + 3
PAD_ID, EOS_ID = 0, 1
VOCAB_SIZE = 256 + BYTE_OFFSET  # 259
SKIP_DIRS = {"site-packages", "test", "tests", "idle_test", "__pycache__", "encodings",
             "pydoc_data"}
VALID_MODULUS = 10  # one file in ten (by crc32 of its relative path) is held out


def make_tokenizer():
    """The byte-level tokenizer of every shipped model: `ByT5Tokenizer(extra_ids=0)`, 259 ids."""
    from transformers import ByT5Tokenizer

    return ByT5Tokenizer(extra_ids=0)


def bytes_to_ids(data: bytes) -> np.ndarray:
    """UTF-8 bytes -> token ids, shape (len(data),), int64; the same ids as the tokenizer
    (without the eos it appends)."""
    return np.frombuffer(data, dtype=np.uint8).astype(np.int64) + BYTE_OFFSET


def stdlib_dir() -> Path:
    """The standard library folder of the running interpreter."""
    return Path(sysconfig.get_paths()["stdlib"])


def corpus_files(split: str = "train", root: Path | None = None) -> list[Path]:
    """Sorted `.py` files of the corpus for `split` ("train" or "valid")."""
    if split not in ("train", "valid"):
        raise AlibiVizError(f"split must be 'train' or 'valid', got {split!r}.")
    root = stdlib_dir() if root is None else Path(root)
    files = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if SKIP_DIRS.intersection(rel.parts[:-1]) or rel.name.startswith("_sysconfigdata"):
            continue
        is_valid = zlib.crc32(rel.as_posix().encode()) % VALID_MODULUS == 0
        if is_valid == (split == "valid"):
            files.append(path)
    if not files:
        raise AlibiVizError(f"No Python sources found under {root}: is the standard library "
                            "installed with its .py files?")
    return files


def corpus_ids(split: str = "train", max_tokens: int | None = None,
               root: Path | None = None) -> np.ndarray:
    """The split as one token stream, shape (n,), int64: files in sorted order, eos between them.

    max_tokens stops reading once that many tokens are collected (the stream is cut there).
    """
    pieces, total = [], 0
    for path in corpus_files(split, root):
        ids = bytes_to_ids(path.read_bytes())
        pieces += [ids, np.array([EOS_ID], dtype=np.int64)]
        total += ids.size + 1
        if max_tokens is not None and total >= max_tokens:
            break
    stream = np.concatenate(pieces)
    return stream if max_tokens is None else stream[:max_tokens]


def random_batches(stream: np.ndarray, batch_size: int, seq_len: int, seed: int):
    """Endless batches of random windows of the stream, each (batch_size, seq_len + 1) int64.

    Column t is the input at position t and the target of position t - 1, so a model sees
    `batch[:, :-1]` and is scored on `batch[:, 1:]`. Window starts come from a torch generator
    seeded with `seed`, so a run is reproducible.
    """
    if stream.size <= seq_len + 1:
        raise AlibiVizError(f"The corpus ({stream.size} tokens) is shorter than one window.")
    data = torch.from_numpy(stream)
    gen = torch.Generator().manual_seed(seed)
    offsets = torch.arange(seq_len + 1)
    while True:
        starts = torch.randint(0, stream.size - seq_len - 1, (batch_size,), generator=gen)
        yield data[starts[:, None] + offsets[None, :]]  # (B, T + 1)


# Copy curriculum (part of the training data of every shipped model). In a fraction of the
# training windows one span of held-in text, taken from elsewhere in the corpus, is written at
# two places of the window. Natural code repeats itself too rarely within 128 bytes for copying
# ("induction") heads to form in a few thousand steps; with planted repeats they do, and the
# models can then show ALiBi's best-known limit, retrieval at a distance. Measured with this
# project's code: without the planted spans 3,000 steps gave almost no gain on a repeated span.
PLANT_FRACTION = 0.5  # share of windows that get a planted span
PLANT_SPAN = (16, 48)  # span length in tokens, uniform over [16, 48]


def plant_repeats(batch: torch.Tensor, stream: torch.Tensor, gen: torch.Generator,
                  fraction: float = PLANT_FRACTION, span=PLANT_SPAN) -> torch.Tensor:
    """Write one span of `stream` at two places of a `fraction` of the windows, in place.

    batch: (B, W) token windows. For a chosen window a span length L is drawn from
    [span[0], span[1]] (at most W // 2), a source offset from the whole stream, a first place p1
    in [0, W - 2L] and a second p2 in [p1 + L, W - L], so the copies never overlap and the
    second is p2 - p1 tokens after the first. Returns `batch`.
    """
    n_windows, width = batch.shape
    chosen = torch.rand(n_windows, generator=gen) < fraction
    for row in torch.nonzero(chosen).flatten().tolist():
        high = min(span[1], width // 2)
        length = int(torch.randint(min(span[0], high), high + 1, (1,), generator=gen))
        src = int(torch.randint(0, stream.numel() - length, (1,), generator=gen))
        p1 = int(torch.randint(0, width - 2 * length + 1, (1,), generator=gen))
        p2 = int(torch.randint(p1 + length, width - length + 1, (1,), generator=gen))
        piece = stream[src : src + length]
        batch[row, p1 : p1 + length] = piece
        batch[row, p2 : p2 + length] = piece
    return batch


def training_batches(stream: np.ndarray, batch_size: int, seq_len: int, seed: int,
                     plant_fraction: float = PLANT_FRACTION):
    """`random_batches` with the copy curriculum applied (plant_fraction 0 turns it off).

    Reproducible: the windows and the planted spans come from generators seeded with `seed`.
    """
    data_t = torch.from_numpy(stream)
    gen = torch.Generator().manual_seed(seed + 1)
    for batch in random_batches(stream, batch_size, seq_len, seed):
        yield plant_repeats(batch.clone(), data_t, gen, plant_fraction) if plant_fraction else batch


# ----------------------------------------------------------------------------- app examples

PROSE_EXAMPLE = (
    "ALiBi gives a transformer no position embeddings at all. Each head simply subtracts a "
    "penalty that grows with the distance between the query and the key, steep for some heads "
    "and gentle for others. A model trained on short texts can then read much longer ones, "
    "because nothing in it ever learned what position four thousand looks like."
)

CODE_EXAMPLE = '''def moving_average(values, width=3):
    """Mean of each run of `width` consecutive values."""
    total = sum(values[:width])
    averages = [total / width]
    for i in range(width, len(values)):
        total += values[i] - values[i - width]
        averages.append(total / width)
    return averages
'''

LONG_EXAMPLE_CHARS = 6000


def long_example(chars: int = LONG_EXAMPLE_CHARS) -> str:
    """The first `chars` characters (cut at a line end) of the first held-out file that long.

    Held out, so the shipped models never trained on it. Python standard library source,
    PSF License.
    """
    for path in corpus_files("valid"):
        text = path.read_text(encoding="utf-8", errors="replace")
        if len(text) >= chars + 1000 and text.isascii():
            cut = text.rfind("\n", 0, chars)
            return text[: cut + 1 if cut > 0 else chars]
    raise AlibiVizError("No held-out file is long enough for the long example.")


def example_texts() -> dict[str, str]:
    """Ready inputs for the Model heads page: name -> text (prose, code, a long document).
    The names are English, marked for translation where the page shows them; the texts are
    what the model reads and stay as they are."""
    return {
        N_("Prose (short)"): PROSE_EXAMPLE,
        N_("Code (short)"): CODE_EXAMPLE,
        N_("Python module (long, held out)"): long_example(),
    }
