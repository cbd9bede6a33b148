"""Training and evaluation text: the shipped models' corpus and the four-kind corpus replacing it.

The shipped models read the four-kind corpus. Until issue 23 they read only the `.py` sources
of the standard library of the interpreter that ran them: the text changed with the Python
version, and Spanish or Russian typed into the app was out of distribution (per-byte perplexity
4,979 on Russian).

The four-kind corpus (`mixture_ids`; built by `experiments.corpus`, `make corpus`). Four kinds of
text, a quarter of the bytes each (`SHARES`), all from pinned Debian 12 packages, so the same
command gives the same bytes on any machine with Debian's archive (assets/corpus/README.md has
the versions and sizes):

* python: the standard library, from Debian's `libpython3.11-minimal` and
  `libpython3.11-stdlib` (3.11.2), not the running interpreter's, so it is the same everywhere.
  We skip test suites, installed packages, the two folders that are data tables rather than
  code (`encodings`, `pydoc_data`) and the machine-specific `_sysconfigdata*` module
  (`is_stdlib_source`). PSF License 2.0.
* en, es, ru: two manuals that Debian ships translated page by page, so each is a parallel
  text (a page has the same name in the three languages: it is held out in all three at once,
  and an example can be shown in each), mostly running prose about what a user does rather
  than shell commands, and large enough only together (4.2 to 5.1 MB of prose per language;
  Spanish, the scarcest, sets the size of every kind: 3.9 MB of training text each):
  - the GIMP user manual, `gimp-help-en`, `gimp-help-es`, `gimp-help-ru` (2.10.34, 685 pages
    a language, 1.5-2.4 MB of prose): GNU FDL 1.2 or later, no invariant sections, no cover
    texts. A stable release that gets no updates, so its pin stays in the archive.
  - the LibreOffice 7.4 help, `libreoffice-help-en-us`, `-es`, `-ru` (2,561 pages a language):
    Mozilla Public License 2.0, parts Apache 2.0. Its Debian version moves with LibreOffice's
    security updates; `corpus.fetch` then says where to get the pinned one.
  Left out: debian-reference (GPL-2+, no Russian), developers-reference (GPL-2, no Spanish),
  maint-guide (GPL-2+, 0.4 MB of HTML a language, mostly commands), manpages-es/-ru (groff,
  not HTML, terse reference text); the GIMP manual alone gave 1.3 MB a kind, too little.
Prose is the text of the HTML pages without navigation, tables of contents, the index, code
listings, figures and data tables (`corpus.html_to_prose`, Python's html.parser); Spanish and
Russian paragraphs left in English, and paragraphs met before in the same language, are dropped
(`corpus.clean_prose`). Split: a document goes to validation when crc32 of its name (a stdlib
path, `gimp/<page>`, `libreoffice/<page>`) is 0 mod 10 (`is_valid_name`), about one in ten:
hashing the name keeps a document's split stable when other versions add or remove documents. Within each split the scarcest kind is used whole and
the others are cut, by whole documents in a hashed order, to the same number of bytes; the
rest is "spare". The two streams interleave the kinds so that every stretch of the stream
holds them in their shares. `assets/corpus/manifest.json` records every package (version,
.deb sha256) and every document (part, bytes, sha256), so a rebuild that differs is detected
(`corpus.build`, `corpus.check_build`, `corpus.compare`).

Held-out text (`heldout_documents`, `heldout_ids`, `example_texts(lang)`). About 256 kB per kind
of validation documents ships in `assets/corpus/heldout/` (Russian 328 kB: the same pages as
English and Spanish, two bytes a letter), with the licences beside it in
`assets/corpus/LICENSES/` and `assets/corpus/README.md`, so evaluation and the app's examples
no longer depend on the machine. The Python held-out files are validation files of the shipped
models' corpus too (the same rule on the same paths), and the shipped models never read prose,
so the held-out text is held out for the shipped models and for the four-kind ones.

Tokens. Byte level: transformers' `ByT5Tokenizer(extra_ids=0)`, one token per UTF-8 byte (id =
byte + 3) plus pad (0), eos (1) and unk (2): 259 ids, no vocabulary file. A letter outside ASCII
is two bytes or more (Cyrillic: two); `models.heads.token_labels` shows the letter on its first
byte. Documents are joined with eos between them. For speed text is encoded with `bytes_to_ids`
(a numpy add), which `test_train.py` checks against the tokenizer itself.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
import torch

# The kinds of text (CORPUS_KINDS, TEXT_KINDS) are named in assets, below the results that
# name them without loading text; `data.CORPUS_KINDS` is the same tuple.
from alibi_viz.assets import (  # noqa: F401
    ASSETS_DIR,
    CORPUS_KINDS,
    SHIPPED_TRAIN_SEQ_LEN,
    TEXT_KINDS,
)
from alibi_viz.errors import AlibiVizError
from alibi_viz.i18n import N_

BYTE_OFFSET = 3  # ByT5 ids: 0 pad, 1 eos, 2 unk, then byte b -> b + 3
PAD_ID, EOS_ID = 0, 1
VOCAB_SIZE = 256 + BYTE_OFFSET  # 259
SKIP_DIRS = {"site-packages", "test", "tests", "idle_test", "__pycache__", "encodings",
             "pydoc_data"}
VALID_MODULUS = 10  # one file in ten (by crc32 of its relative path) is held out

PROSE_LANGS = ("en", "es", "ru")  # its prose kinds: language codes, as in i18n.LANGUAGES
SHARES = {"python": 0.25, "en": 0.25, "es": 0.25, "ru": 0.25}  # of each split's bytes
CORPUS_ASSETS = ASSETS_DIR / "corpus"  # the shipped record of the four-kind corpus
MANIFEST_PATH = CORPUS_ASSETS / "manifest.json"
HELDOUT_DIR = CORPUS_ASSETS / "heldout"  # <kind>.jsonl: {"name", "sha256", "text"} a line
CORPUS_BUILD_DIR = ASSETS_DIR.parent / "corpus"  # local build (git-ignored), `make corpus`


def make_tokenizer():
    """The byte-level tokenizer of every shipped model: `ByT5Tokenizer(extra_ids=0)`, 259 ids."""
    from transformers import ByT5Tokenizer  # heavy: transformers only when a tokenizer is made

    return ByT5Tokenizer(extra_ids=0)


def bytes_to_ids(data: bytes) -> np.ndarray:
    """UTF-8 bytes -> token ids, shape (len(data),), int64; the same ids as the tokenizer
    (without the eos it appends)."""
    return np.frombuffer(data, dtype=np.uint8).astype(np.int64) + BYTE_OFFSET


def is_stdlib_source(rel: Path) -> bool:
    """Whether a `.py` path relative to a stdlib folder is corpus: not a test suite, installed
    package, data table or `_sysconfigdata*`."""
    rel = Path(rel)
    return not (SKIP_DIRS.intersection(rel.parts[:-1]) or rel.name.startswith("_sysconfigdata"))


def is_valid_name(name: str) -> bool:
    """Whether a document goes to validation: crc32 of its name (a posix path relative to its
    source's root) is 0 mod VALID_MODULUS. The same rule for every corpus here."""
    return zlib.crc32(name.encode()) % VALID_MODULUS == 0


def _check_split(split: str) -> None:
    if split not in ("train", "valid"):
        raise AlibiVizError(f"split must be 'train' or 'valid', got {split!r}.")


def _join(texts: Iterable[bytes], max_tokens: int | None) -> np.ndarray:
    """Documents as one stream of ids, (n,) int64, eos after each; cut at max_tokens."""
    pieces, total = [], 0
    for payload in texts:
        ids = bytes_to_ids(payload)
        pieces += [ids, np.array([EOS_ID], dtype=np.int64)]
        total += ids.size + 1
        if max_tokens is not None and total >= max_tokens:
            break
    if not pieces:
        raise AlibiVizError("No documents to read.")
    stream = np.concatenate(pieces)
    return stream if max_tokens is None else stream[:max_tokens]


# ----------------------------------------------------------------------------- four-kind corpus

@cache
def corpus_manifest() -> dict:
    """assets/corpus/manifest.json: packages, shares, rules, every document (see corpus.py)."""
    if not MANIFEST_PATH.is_file():
        raise AlibiVizError(f"{MANIFEST_PATH} is missing: it ships with alibi-viz "
                            "(rebuild it with `python -m experiments.corpus build --update`).")
    return json.loads(MANIFEST_PATH.read_text(encoding="utf-8"))


def corpus_build_dir() -> Path:
    """Where `make corpus` builds: $ALIBI_VIZ_CORPUS_DIR, else `corpus/` in the checkout."""
    return Path(os.environ.get("ALIBI_VIZ_CORPUS_DIR") or CORPUS_BUILD_DIR)


def stream_digest(shas: Iterable[str]) -> str:
    """sha256 of documents' sha256s (hex), one a line, in order: a stream's content and order."""
    return hashlib.sha256("".join(f"{h}\n" for h in shas).encode()).hexdigest()


def _read_jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def read_stream(split: str = "train", root: Path | None = None,
                manifest: dict | None = None) -> list[str]:
    """The documents of a built split of the four-kind corpus, in stream order, checked
    against the manifest (every document's sha256 and the order). AlibiVizError, saying to run
    `make corpus`, when the build is missing or differs."""
    _check_split(split)
    root = corpus_build_dir() if root is None else Path(root)
    manifest = corpus_manifest() if manifest is None else manifest
    path = root / f"{split}.jsonl"
    if not path.is_file():
        raise AlibiVizError(f"{path} is missing: build the corpus with `make corpus` "
                            "(python -m experiments.corpus build).")
    docs = _read_jsonl(path)
    shas = [hashlib.sha256(d["text"].encode("utf-8")).hexdigest() for d in docs]
    if stream_digest(shas) != manifest["streams"][split]["sha256"]:
        raise AlibiVizError(f"{path} is not the {split} stream of {MANIFEST_PATH.name} (its "
                            "documents or their order differ): rebuild with `make corpus`.")
    return [d["text"] for d in docs]


def mixture_ids(split: str = "train", max_tokens: int | None = None,
                root: Path | None = None) -> np.ndarray:
    """A split of the four-kind corpus as one token stream, shape (n,), int64, eos between
    documents; the kinds interleaved in their shares from the first token on. Needs the local
    build (`make corpus`) and checks it against the manifest. max_tokens cuts the stream."""
    return _join((t.encode("utf-8") for t in read_stream(split, root)), max_tokens)


# ----------------------------------------------------------------------------- held-out text

@dataclass(frozen=True)
class HeldoutDocument:
    """One shipped held-out document: kind (CORPUS_KINDS), name (as in the manifest), text."""

    kind: str
    name: str
    text: str

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()

    @property
    def nbytes(self) -> int:
        return len(self.text.encode("utf-8"))


def interleave(by_kind: dict[str, list]) -> list:
    """One stream from each kind's documents (anything with .nbytes): always the kind furthest
    below its share (SHARES) next, so that every stretch of the stream holds the kinds in their
    shares. The training streams (corpus.build) and the held-out mixture are made this way."""
    queues = {kind: list(docs) for kind, docs in by_kind.items() if docs}
    done = dict.fromkeys(queues, 0)
    stream = []
    while queues:
        kind = min(queues, key=lambda k: (done[k] / SHARES[k], CORPUS_KINDS.index(k)))
        doc = queues[kind].pop(0)
        stream.append(doc)
        done[kind] += doc.nbytes
        if not queues[kind]:
            del queues[kind]
    return stream


def _check_kind(kind: str) -> None:
    if kind not in CORPUS_KINDS:
        raise AlibiVizError(f"kind must be one of {', '.join(CORPUS_KINDS)}, got {kind!r}.")


@cache
def heldout_documents(kind: str) -> tuple[HeldoutDocument, ...]:
    """The shipped held-out documents of one kind ("python", "en", "es" or "ru"), in the
    manifest's order; never trained on by the shipped or the four-kind models. The prose
    kinds hold the same pages, in the same order."""
    _check_kind(kind)
    path = HELDOUT_DIR / f"{kind}.jsonl"
    if not path.is_file():
        raise AlibiVizError(f"{path} is missing: it ships with alibi-viz.")
    return tuple(HeldoutDocument(kind, d["name"], d["text"]) for d in _read_jsonl(path))


def heldout_ids(kind: str, max_tokens: int | None = None) -> np.ndarray:
    """The shipped held-out text of one kind as one token stream, shape (n,), int64, eos
    between documents (about 256 kB of tokens; Russian about 1.7x that). max_tokens cuts it."""
    return _join((d.text.encode("utf-8") for d in heldout_documents(kind)), max_tokens)


def heldout_mixture_ids(max_tokens: int | None = None) -> np.ndarray:
    """The shipped held-out text of the four kinds as one stream, interleaved in their shares
    as the training stream is (`interleave`): the reach and copy measurements read it."""
    docs = interleave({kind: list(heldout_documents(kind)) for kind in CORPUS_KINDS})
    return _join((d.text.encode("utf-8") for d in docs), max_tokens)


def page_kind(lang: str) -> str:
    """The kind of held-out text a page in language `lang` shows first: its own prose."""
    return lang if lang in PROSE_LANGS else "en"


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
PROSE_EXAMPLE_CHARS = (250, 600)  # a short prose example's length, in characters
CODE_EXAMPLE_LINES = (6, 14)  # a short code example's length, in lines


def long_example(chars: int = LONG_EXAMPLE_CHARS, kind: str = "python") -> str:
    """About `chars` characters of one shipped held-out document of `kind` ("python", "en",
    "es" or "ru"), cut at a line end: the first ASCII module long enough, or the first page
    long enough in all three languages, so that the three are translations of one another
    (when no page is, the held-out pages joined in order).
    """
    if kind == "python":
        texts = (d.text for d in heldout_documents(kind) if d.text.isascii())
    else:
        _check_kind(kind)
        pages = zip(*(heldout_documents(lang) for lang in PROSE_LANGS), strict=True)
        long_enough = [dict(zip(PROSE_LANGS, (d.text for d in docs), strict=True))
                       for docs in pages if all(len(d.text) >= chars + 1000 for d in docs)]
        texts = [page[kind] for page in long_enough] or [
            "\n".join(d.text for d in heldout_documents(kind))]
    for text in texts:
        if len(text) >= chars + 1000:
            cut = text.rfind("\n", 0, chars)
            return text[: cut + 1 if cut > 0 else chars]
    raise AlibiVizError("No held-out file is long enough for the long example.")


def paragraphs(text: str) -> list[str]:
    """The paragraphs of a prose document (separated by blank lines), in order."""
    return [p.strip("\n") for p in text.split("\n\n") if p.strip()]


@cache
def prose_examples() -> dict[str, str]:
    """One paragraph in every prose language, lang -> text: the first paragraph of the shipped
    held-out pages (in order) that is PROSE_EXAMPLE_CHARS long and a full sentence in all three
    languages, on a page whose three versions have as many paragraphs (so that the three are
    translations of one another). GIMP manual (GFDL 1.2+) or LibreOffice help (MPL 2.0)."""
    pages = zip(*(heldout_documents(lang) for lang in PROSE_LANGS), strict=True)
    low, high = PROSE_EXAMPLE_CHARS
    for docs in pages:
        paras = [paragraphs(d.text) for d in docs]
        if len({d.name for d in docs}) != 1 or len({len(p) for p in paras}) != 1:
            continue
        for texts in zip(*paras, strict=True):
            if all(low <= len(t) <= high and t.rstrip().endswith(".") for t in texts):
                return dict(zip(PROSE_LANGS, texts, strict=True))
    raise AlibiVizError("No held-out paragraph fits the short prose example.")


def prose_example(lang: str) -> str:
    """A short paragraph of held-out prose in `lang` ("en", "es" or "ru"); the same paragraph
    in each language (`prose_examples`)."""
    if lang not in PROSE_LANGS:
        raise AlibiVizError(f"lang must be one of {', '.join(PROSE_LANGS)}, got {lang!r}.")
    return prose_examples()[lang]


def sentences(text: str) -> list[str]:
    """`text` cut after each ".", "!" or "?" that a space or the end follows; pieces keep their
    punctuation and lose the space after it."""
    return [piece for piece in re.split(r"(?<=[.!?])\s+", text.strip()) if piece]


SENTENCE_EXAMPLE_MIN_CHARS = 50  # a sentence example's least length, in characters


@cache
def sentence_examples(max_bytes: int = SHIPPED_TRAIN_SEQ_LEN) -> dict[str, str]:
    """One sentence in every prose language, lang -> text: the first sentence of the shipped
    held-out pages (in order) that is at most `max_bytes` UTF-8 bytes and at least
    SENTENCE_EXAMPLE_MIN_CHARS characters in all three languages, ends with a full stop, and sits
    at the same place (paragraph, sentence) of the three versions of a page, so that the three
    are translations of one another. The shipped models read one token a byte, so at the default
    (their training length) the model reads it whole and within the training length, in every
    language: a Russian letter is two bytes, so a paragraph short in English is long in Russian."""
    pages = zip(*(heldout_documents(lang) for lang in PROSE_LANGS), strict=True)
    for docs in pages:
        paras = [paragraphs(d.text) for d in docs]
        if len({d.name for d in docs}) != 1 or len({len(p) for p in paras}) != 1:
            continue
        for texts in zip(*paras, strict=True):
            split = [sentences(t) for t in texts]
            if len({len(parts) for parts in split}) != 1:
                continue
            for found in zip(*split, strict=True):
                if all(len(t.encode("utf-8")) <= max_bytes and len(t) >= SENTENCE_EXAMPLE_MIN_CHARS
                       and t.endswith(".") for t in found):
                    return dict(zip(PROSE_LANGS, found, strict=True))
    raise AlibiVizError(f"No held-out sentence fits in {max_bytes} bytes in every language.")


def sentence_example(lang: str, max_bytes: int = SHIPPED_TRAIN_SEQ_LEN) -> str:
    """A short held-out sentence in `lang` ("en", "es" or "ru"), at most `max_bytes` bytes;
    the same sentence in each language (`sentence_examples`)."""
    if lang not in PROSE_LANGS:
        raise AlibiVizError(f"lang must be one of {', '.join(PROSE_LANGS)}, got {lang!r}.")
    return sentence_examples(max_bytes)[lang]


@cache
def code_example() -> str:
    """A short function of held-out Python: the first public module-level function of the
    shipped held-out files, in order, with a docstring and CODE_EXAMPLE_LINES lines, ASCII,
    no decorator. Python standard library, PSF License."""
    low, high = CODE_EXAMPLE_LINES
    for doc in heldout_documents("python"):
        lines = doc.text.splitlines(keepends=True)
        for node in ast.parse(doc.text).body:
            if (isinstance(node, ast.FunctionDef) and not node.decorator_list
                    and not node.name.startswith("_") and ast.get_docstring(node)
                    and low <= node.end_lineno - node.lineno + 1 <= high):
                text = "".join(lines[node.lineno - 1 : node.end_lineno])
                if text.isascii():
                    return text
    raise AlibiVizError("No held-out function fits the short code example.")


def example_texts(lang: str) -> dict[str, str]:
    """Ready inputs for the Model heads page in language `lang` ("en", "es" or "ru"): name ->
    text, all shipped held-out text, the same on every machine: short prose in that language
    (`prose_example`), a short function (`code_example`), long prose in that language and a
    long module (`long_example(kind=...)`). The names are English, marked for translation where
    the page shows them; the texts are what the model reads and stay as they are."""
    return {
        N_("Prose (short)"): prose_example(lang),
        N_("Code (short)"): code_example(),
        N_("Manual pages (long, held out)"): long_example(kind=lang),
        N_("Python module (long, held out)"): long_example(kind="python"),
    }
