"""The shipped model family, where it lives, and small readers for it.

    assets/models/<name>/               one trained model per folder (save_pretrained + training.json)
    assets/results/extrapolation-<kind>.json   per kind of held-out text (python, en, es, ru),
                                        written by `python -m experiments.evaluate`
    assets/results/reach.json           written by `python -m experiments.reach`

`SHIPPED` is the one table of the family: every page, the training CLI and the evaluation take
names, labels and descriptions from it. The ALiBi model is the default the app opens; the other
four are the baselines of the train-short-test-long experiment (see `experiments.train`).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from alibi_viz.i18n import N_, _, get_language


def _assets_dir() -> Path:
    """The shipped assets: $ALIBI_VIZ_ASSETS_DIR, else the checkout's assets/ beside the package,
    else ./assets. A wheel holds no models (hundreds of MB), so an installed package reads
    them from the checkout it is run in."""
    if os.environ.get("ALIBI_VIZ_ASSETS_DIR"):
        return Path(os.environ["ALIBI_VIZ_ASSETS_DIR"]).resolve()
    beside = Path(__file__).resolve().parent.parent / "assets"
    return beside if beside.is_dir() else Path.cwd().resolve() / "assets"


ASSETS_DIR = _assets_dir()
MODELS_DIR = ASSETS_DIR / "models"
RESULTS_DIR = ASSETS_DIR / "results"
REACH_PATH = RESULTS_DIR / "reach.json"
SNAPSHOT_RESULTS_PATH = RESULTS_DIR / "snapshots.json"
ABLATION_PATH = RESULTS_DIR / "ablation.json"
RESCALE_PATH = RESULTS_DIR / "rescale.json"
VARIANTS_DIR = ASSETS_DIR / "variants"  # models beside the family, not in its comparison
LEARNABLE_SLOPES_DIR = VARIANTS_DIR / "learnable-slopes"  # experiments.train --learn-slopes
LEARNABLE_SLOPES_PATH = RESULTS_DIR / "learnable-slopes.json"  # experiments.learnable_slopes
SEEDS_DIR = ASSETS_DIR / "seeds"  # runs trained again with other seeds, <model>-seed<N>
DEFAULT_MODEL = "alibi"


@dataclass(frozen=True)
class ShippedModel:
    name: str  # folder under assets/models and the --arch of experiments.train
    label: str  # short name on charts
    title: str  # name in menus: the scheme and the transformers class
    position: str  # how the model knows where a token is, one sentence
    # label, title and position are English msgids (N_): show them through model_label,
    # model_title and _(spec.position)


SHIPPED = {m.name: m for m in (
    ShippedModel("alibi", "ALiBi", "ALiBi (BLOOM)",
                 # BLOOM adds +m_h·j, not the textbook -m_h (i - j): say what the model does,
                 # and why the attention is the same.
                 N_("no position embeddings; each head adds +m_h·j (slopes m_h from 2^-1 to "
                    "2^-8) to its attention score for key j, which differs from the textbook "
                    "-m_h (i - j) only by m_h·i, the same for every key of row i, so the "
                    "attention is the same")),
    ShippedModel("sinusoidal", N_("sinusoidal"), N_("sinusoidal (GPT-2, frozen table)"),
                 N_("the fixed sinusoidal table of Vaswani et al. 2017, scaled to the token "
                    "embeddings' initial size, added to them (a GPT-2 position table, frozen)")),
    ShippedModel("rope", "RoPE", N_("rotary (GPT-NeoX)"),
                 N_("rotary position embeddings: queries and keys rotated by their position "
                    "(all dimensions rotated, base 10000)")),
    ShippedModel("learned", N_("learned"), N_("learned positions (GPT-2)"),
                 N_("a learned vector per absolute position added to the token embeddings; only "
                    "the rows below the training length are ever trained")),
    ShippedModel("nope", "NoPE", N_("no positions (GPT-2, zero table)"),
                 N_("no position information at all (a GPT-2 position table of zeros, frozen): "
                    "the causal mask alone lets it infer position")),
)}
MODEL_ORDER = tuple(SHIPPED)  # shown in this order; other folders follow by name

# What still differs between the five besides position (tests/test_train.py checks the counts).
# English msgids: pages show _(difference); the model cards (experiments.train) stay English.
REMAINING_DIFFERENCES = (
    N_("BLOOM (alibi) applies a LayerNorm to the token embeddings (`word_embeddings_layernorm`, "
       "384 parameters); the GPT-2 and GPT-NeoX models do not."),
    N_("The GPT-2 models (sinusoidal, learned, nope) carry a 4096 x 192 position table "
       "(786,432 entries): trained in `learned`, frozen in `sinusoidal` and `nope`; leave it out "
       "and every model has the same parameter count to within 0.1%."),
    N_("GPT-2 scales the initial weights of its residual projections by 1/sqrt(2 x layers); BLOOM "
       "and GPT-NeoX initialise every linear layer with std 0.02."),
    N_("GPT-NeoX (rope) computes attention in its own module with rotary embeddings on queries "
       "and keys; the arithmetic is otherwise the same (scaled dot product, causal mask, softmax)."),
)

# An English msgid: show it as train_hint(name), or _(TRAIN_HINT).format(name=...).
TRAIN_HINT = N_("Train it with `python -m experiments.train --arch {name} --out assets/models/{name}`.")


def seed_run(name: str) -> tuple[str, int] | None:
    """(model, seed) of a run trained again with another seed, named <model>-seed<N> (its
    folder under SEEDS_DIR, its entry under a results file's "seeds"); None for another name."""
    model, sep, seed = name.rpartition("-seed")
    return (model, int(seed)) if sep and model and seed.isdigit() else None


def train_hint(name: str) -> str:
    """How to train the shipped model `name`, in the current language."""
    return _(TRAIN_HINT).format(name=name)


def model_label(name: str) -> str:
    """Short chart label of a shipped model ('ALiBi', 'RoPE', ...), in the current language;
    the name itself otherwise."""
    return _(SHIPPED[name].label) if name in SHIPPED else name


def model_title(name: str) -> str:
    """Menu title of a shipped model ('ALiBi (BLOOM)', ...), in the current language; the name
    itself otherwise."""
    return _(SHIPPED[name].title) if name in SHIPPED else name


def shipped_models() -> dict[str, Path]:
    """Name -> folder of every model under assets/models that has a config.json, in
    MODEL_ORDER (the default ALiBi model first). Empty if none are shipped."""
    if not MODELS_DIR.is_dir():
        return {}
    found = {p.name: p for p in sorted(MODELS_DIR.iterdir()) if (p / "config.json").is_file()}
    order = [n for n in MODEL_ORDER if n in found] + [n for n in found if n not in MODEL_ORDER]
    return {n: found[n] for n in order}


def training_info(path) -> dict:
    """The training.json of a model folder (settings, wall time, loss curve); {} if missing."""
    file = Path(path) / "training.json"
    if not file.is_file():
        return {}
    return json.loads(file.read_text())


# The shipped family's training length (each training.json says it; `make models` trains at it).
SHIPPED_TRAIN_SEQ_LEN = 128

# The shipped four-kind corpus (alibi_viz.data), in this order everywhere.
CORPUS_KINDS = ("python", "en", "es", "ru")
# What each kind of text is called on the pages (English msgids: show `_(TEXT_KINDS[kind])`).
TEXT_KINDS = {"python": N_("Python code"), "en": N_("English prose"), "es": N_("Spanish prose"),
              "ru": N_("Russian prose")}


def text_kind_in_sentence(kind: str) -> str:
    """The name of a kind of text (TEXT_KINDS) where it stands inside a sentence, in the current
    language. English keeps the capital its language and language names carry ("English prose",
    "Python code"); Spanish and Russian write the common noun that opens the name in lower case
    ("prosa en inglés", "английская проза"), which is what `.lower()` did to every language."""
    name = _(TEXT_KINDS[kind])
    return name if get_language() == "en" else name[:1].lower() + name[1:]


def shipped_train_seq_len(folder=None, results: dict | None = None) -> int:
    """The length the shipped models were trained at: the `train_seq_len` of `folder`'s
    training.json when there is one, else the one the shipped extrapolation `results` were
    measured against, else SHIPPED_TRAIN_SEQ_LEN (what `make models` trains at)."""
    value = training_info(folder).get("train_seq_len") if folder is not None else None
    return int(value or (results_train_seq_len(results) if results else None)
               or SHIPPED_TRAIN_SEQ_LEN)


def results_train_seq_len(results: dict) -> int | None:
    """The training length a results file was measured against (its first model's), or None."""
    for entry in results.get("models", {}).values():
        if entry.get("train_seq_len"):
            return int(entry["train_seq_len"])
    return None


def _read_json(path) -> dict:
    """A results file as a dict; {} if it is missing."""
    path = Path(path)
    return json.loads(path.read_text()) if path.is_file() else {}


def load_reach_results(path=None) -> dict:
    """The results `python -m experiments.reach` wrote (context reach, copy at a distance); {}
    if missing."""
    return _read_json(REACH_PATH if path is None else path)


def results_path(kind: str) -> Path:
    """Where the extrapolation results on held-out text of `kind` live."""
    return RESULTS_DIR / f"extrapolation-{kind}.json"


def load_extrapolation_results(kind: str = "python", path=None) -> dict:
    """The results `python -m experiments.evaluate` wrote for held-out text of `kind` (see that
    module), or those in `path`; {} if missing."""
    return _read_json(results_path(kind) if path is None else path)


def load_ablation_results(path=None) -> dict:
    """What `python -m experiments.ablation` measured (head ablation); {} if missing."""
    return _read_json(ABLATION_PATH if path is None else path)


def load_rescale_results(path=None) -> dict:
    """What `python -m experiments.rescale` measured (slopes rescaled); {} if missing."""
    return _read_json(RESCALE_PATH if path is None else path)


def load_learnable_slopes_results(path=None) -> dict:
    """assets/results/learnable-slopes.json ({} if missing): the learnable-slope variant."""
    return _read_json(LEARNABLE_SLOPES_PATH if path is None else path)


def load_snapshot_results(path=None) -> dict:
    """What `python -m experiments.snapshots` measured on the training snapshots; {} if missing."""
    return _read_json(SNAPSHOT_RESULTS_PATH if path is None else path)
