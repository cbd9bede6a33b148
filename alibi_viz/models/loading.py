"""Load a local Hugging Face causal LM safely, and say how it encodes position.

`load_model(path)` returns `(model, tokenizer, info)`. Loading is deliberately narrow:

* local folders only (`local_files_only=True`): nothing is downloaded;
* never `trust_remote_code`: only architectures that ship with transformers run;
* safetensors weights only: pickle files (`.bin`, `.pt`, ...) can run arbitrary code when
  unpickled, so a folder that has only those is refused with a recipe to convert it;
* eager attention (`attn_implementation="eager"`), eval mode: only the eager path returns
  attention probabilities (with sdpa, GPT-2 and LLaMA silently return an empty tuple).

For shared deployments two environment variables restrict which folders can be loaded (see
`resolve_model_path`): `ALIBI_VIZ_MODEL_ROOT` (only folders inside that root) and
`ALIBI_VIZ_ALLOW_CUSTOM_PATHS=0` (only the shipped models under `assets/models`).

`ModelInfo` records what the model really does with position. For the three ALiBi
architectures of transformers the bias is added differently from the paper's
`-m * (i - j)` (Press, Smith & Lewis 2021), facts checked against transformers 5.24:

* BLOOM adds `+m * j` to `QK^T / sqrt(d)`: the row-constant form (softmax ignores a constant
  per query row, so `+m*j` and `-m*(i-j)` give the same probabilities), not scaled by 1/sqrt(d).
* MPT adds `m * (j - (L - 1))`, another row-constant form, also unscaled. Its bias tensor is
  built at `config.max_seq_len` keys and inputs longer than that crash, so `load_model` raises
  `max_seq_len` (ALiBi needs no position table; extrapolating is its point).
* Falcon (`alibi=True`) builds `m * j` in bfloat16 (slopes rounded to 8 bits, the product
  rounded again), scales it by 1/sqrt(d), and its eager path adds it twice: once inside
  `(QK^T + alibi) / sqrt(d)` and once more through the attention mask. The probabilities the
  eager path returns therefore use a slope of `2 * m / sqrt(d)` per token
  (`ModelInfo.config_slopes`), while the sdpa path (what generation uses by default) adds it
  once, `m / sqrt(d)`. Both are flagged in `ModelInfo.warnings`.

Large models: pass `device_map="auto"`, which is handed to `from_pretrained` unchanged and
needs the optional package `accelerate` (`pip install accelerate`); layers that do not fit on
the accelerator are placed on the CPU (and then on disk) by accelerate, not by this module.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from safetensors import safe_open

from alibi_viz import assets
from alibi_viz.alibi import SCHEDULES, alibi_slopes, check_int
from alibi_viz.errors import ModelLoadError
from alibi_viz.i18n import N_, _, formatted, number, significant, tokens
from alibi_viz.models import layer_slopes
from alibi_viz.models.hub_cache import (
    PICKLE_SUFFIXES,
    download_command,
    hub_cache_dir,
    parse_repo_id,
    resolve_repo,
)
from alibi_viz.models.pretrained import from_pretrained
from alibi_viz.positional import sinusoidal_table

MODEL_ROOT_ENV = "ALIBI_VIZ_MODEL_ROOT"  # only folders inside this root can be loaded
ALLOW_CUSTOM_ENV = "ALIBI_VIZ_ALLOW_CUSTOM_PATHS"  # "0": only shipped models can be loaded
MPT_MAX_SEQ_LEN = 65_536  # MPT's bias tensor is (heads, 1, max_seq_len): 2 MiB for 8 heads

SAFE_WEIGHTS = "model.safetensors"
SAFE_WEIGHTS_INDEX = "model.safetensors.index.json"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "spiece.model",
                   "vocab.json", "vocab.txt")
# Encoder families that transformers also registers as causal LMs (BertLMHeadModel, ...):
# they only behave as decoders when their config says is_decoder=True.
ENCODER_FAMILIES = frozenset({
    "bert", "roberta", "xlm-roberta", "xlm-roberta-xl", "camembert", "electra", "ernie",
    "data2vec-text", "megatron-bert", "rembert", "roberta-prelayernorm", "xmod", "bert-generation",
    "big_bird", "roc_bert",
})
LEARNED_POSITION_TABLES = ("wpe", "embed_positions", "position_embeddings")  # module names
SLOPE_RTOL = {"bloom": 1e-5, "mpt": 1e-5, "falcon": 2.0**-8}  # falcon: bfloat16 slopes

CONVERT_CODE = (
    "    from transformers import AutoModelForCausalLM\n"
    "    model = AutoModelForCausalLM.from_pretrained(FOLDER)  # unpickles: trusted files only\n"
    "    model.save_pretrained(FOLDER, safe_serialization=True)  # writes model.safetensors"
)
# How the model encodes position (ModelInfo.positional): codes, shown through _(code).
POSITIONAL_NAMES = (N_("alibi"), N_("rope"), N_("learned"), N_("sinusoidal"), N_("none"))


def convert_recipe() -> str:
    """How to turn pickle weights into safetensors, in the current language."""
    return _("Convert it once, in a trusted environment, with:") + "\n" + CONVERT_CODE


class Message(str):
    """A text of ModelInfo (a warning, a note). The str is its English text, what the library's
    callers and tests read; `localized()` writes it in the current language. ModelInfo is cached
    with its model and shared by sessions in different languages, so its texts are translated
    where they are shown, not when the model is loaded.

    msgid: the English template, marked with N_; fields: the values of its placeholders, floats
    rounded beforehand (written as format(x, "g") writes them, with the language's decimal mark).
    """

    def __new__(cls, msgid: str, **fields):
        english = msgid.format(**{k: format(v, "g") if isinstance(v, float) else v
                                  for k, v in fields.items()})
        message = super().__new__(cls, english)
        message.msgid, message.fields = msgid, fields
        return message

    def __reduce__(self):
        return _message, (self.msgid, self.fields)

    def localized(self) -> str:
        return _(self.msgid).format(**{k: formatted(v, "g") if isinstance(v, float) else v
                                       for k, v in self.fields.items()})


def _message(msgid: str, fields: dict) -> Message:
    return Message(msgid, **fields)


def _significant(value: float, digits: int) -> float:
    """`value` rounded to `digits` significant digits (what f"{value:.{digits}g}" shows)."""
    return float(f"{value:.{digits}g}")


def localized(text: str) -> str:
    """A ModelInfo text (a Message, or a plain msgid such as bias_form or positional) in the
    current language."""
    return text.localized() if isinstance(text, Message) else _(text)


@dataclass(frozen=True)
class ModelInfo:
    """What a loaded model is, and how it encodes position (all plain values, safe to show)."""

    path: str                  # resolved folder the model was loaded from ("" if built in memory)
    architecture: str          # model class, e.g. "BloomForCausalLM"
    model_type: str            # config.model_type, e.g. "bloom"
    num_layers: int
    num_heads: int
    head_dim: int
    hidden_size: int
    num_params: int            # parameters, tied weights counted once
    dtype: str                 # e.g. "float32"
    device: str                # device of the input embeddings, e.g. "cpu"
    positional: str            # "alibi", "rope", "learned", "sinusoidal" or "none" (show _(code))
    bias_form: str             # how the positional bias enters the pre-softmax scores (English
                               # msgid: show _(bias_form))
    slopes: tuple | None = None            # m_h as the model's own builder makes them: (heads,),
                                           # or (layers, heads) when each layer has its own
                                           # (alibi-viz's learnable-slope variant, layer_slopes)
    slope_schedule: str | None = None                  # alibi_slopes schedule they match, or None
    matching_schedules: tuple[str, ...] = ()            # every schedule they match
    config_slopes: tuple | None = None  # the per-token slope the eager logits carry, as the
                                        # config and the model's code predict it (Falcon:
                                        # 2m/sqrt(d)), shaped as slopes; the conformance
                                        # check measures it (HeadCheck.measured_slope)
    declared_context: int | None = None  # context length the config declares, if known
    max_positions: int | None = None    # hard input limit (an absolute position table), else None
    warnings: tuple[str, ...] = ()      # departures from the paper, to flag in the app
    notes: tuple[str, ...] = ()         # other things done or found while loading
    # warnings and notes are Messages: English str, shown with localized(text)
    extra: dict = field(default_factory=dict)  # architecture details (softmax_scale, ...)

    @property
    def per_layer(self) -> bool:
        """True when every layer has its own slopes (slopes is (layers, heads))."""
        return bool(self.slopes) and isinstance(self.slopes[0], tuple)

    def slopes_of(self, layer: int, config_slopes: bool = False) -> tuple[float, ...] | None:
        """(heads,) slopes of one layer (0-based): as the builder makes them, or (config_slopes)
        per token on the eager logits as the config predicts them."""
        slopes = self.config_slopes if config_slopes else self.slopes
        if slopes is None:
            return None
        return slopes[layer] if self.per_layer else slopes


# ----------------------------------------------------------------------------- paths

def _env_flag_off(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("0", "false", "no", "off")


def _inside(path: str, root: str) -> bool:
    try:
        return os.path.commonpath([path, root]) == root
    except ValueError:  # different drives on Windows
        return False


def _custom_paths_on(allow_custom: bool | None = None) -> bool:
    """Whether folders other than the shipped models may be loaded: `allow_custom` when given
    (the app decides it from where its server listens, see alibi_viz_app/ui.py), else the environment:
    `ALIBI_VIZ_ALLOW_CUSTOM_PATHS=0` turns them off; unset, the library allows them."""
    return bool(allow_custom) if allow_custom is not None else not _env_flag_off(ALLOW_CUSTOM_ENV)


def resolve_model_path(path, allow_custom: bool | None = None) -> Path:
    """The real (symlink-free) folder `path` names, after the deployment's restrictions.

    `path` may also be a repo id in the local Hugging Face cache, `org/name` or
    `org/name@revision` (see `hub_cache`), when no folder of that name exists: it resolves to
    the cached snapshot folder, under the same restrictions (custom paths allowed; inside the
    model root when one is set).

    Relative paths are taken from the shipped models folder when custom paths are off, else
    from `ALIBI_VIZ_MODEL_ROOT` when it is set, else from the working directory. The result is
    resolved with `os.path.realpath`, so `../` and symlinks cannot escape:

    * `ALIBI_VIZ_MODEL_ROOT=/srv/models`: only folders inside /srv/models (and the shipped
      models) can be loaded; anything else raises ModelLoadError.
    * `ALIBI_VIZ_ALLOW_CUSTOM_PATHS=0`: only the shipped models in `assets/models` can be loaded.

    Restrictions are checked before anything about the path is reported, so a refusal says
    nothing about what exists outside the root. Existence is checked by `load_model`.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise ModelLoadError(_("The model path must be a folder path (text), got {kind}.").format(
            kind=type(path).__name__))
    text = os.fspath(path)
    if not text.strip():
        raise ModelLoadError(_("The model path is empty: give the folder that holds config.json."))
    if "\x00" in text:
        raise ModelLoadError(_("The model path contains a NUL character."))
    custom_allowed = _custom_paths_on(allow_custom)
    root_setting = os.environ.get(MODEL_ROOT_ENV, "").strip()
    shipped = os.path.realpath(assets.MODELS_DIR)
    root = os.path.realpath(os.path.expanduser(root_setting)) if root_setting else None

    base = shipped if not custom_allowed else (root or os.getcwd())
    resolved = os.path.realpath(os.path.join(base, os.path.expanduser(text.strip())))

    if _inside(resolved, shipped):
        return Path(resolved)
    if not custom_allowed:
        raise ModelLoadError(_(
            "Only the shipped models can be loaded on this server (custom paths and the model "
            "cache are off; an operator turns them on with {allow}=1 or {root}): give the name "
            "of a shipped model, for example 'alibi'.").format(allow=ALLOW_CUSTOM_ENV,
                                                               root=MODEL_ROOT_ENV))
    if parse_repo_id(text) is not None and not os.path.exists(resolved):
        try:
            snapshot = os.path.realpath(resolve_repo(text))
        except ModelLoadError as exc:
            raise ModelLoadError(_("No model folder at '{path}'. {reason}").format(
                path=text, reason=exc)) from None
        if root is not None and not _inside(snapshot, root):
            raise ModelLoadError(_(
                "Only models inside {root} can be loaded here ({setting} is set), and the "
                "Hugging Face cache is outside it.").format(root=root, setting=MODEL_ROOT_ENV))
        return Path(snapshot)
    if root is not None and not _inside(resolved, root):
        raise ModelLoadError(_(
            "Only model folders inside {root} can be loaded here ({setting} is set); '{path}' is "
            "outside it. Give a folder name relative to that root.").format(
                root=root, setting=MODEL_ROOT_ENV, path=text))
    return Path(resolved)


# ----------------------------------------------------------------------------- checks on disk

def cached_repo(given, folder) -> str | None:
    """The repo id of `folder` when it is a snapshot in the hub cache
    (models--org--name/snapshots/<commit>), else None: `given` itself when it is a repo id
    (org/name[@revision]), else org/name. The loader's messages then speak of the model and
    what to download, not of a folder the user never named."""
    try:
        parts = Path(os.path.realpath(folder)).relative_to(os.path.realpath(hub_cache_dir())).parts
    except ValueError:
        return None
    if len(parts) != 3 or parts[1] != "snapshots" or not parts[0].startswith("models--"):
        return None
    text = os.fspath(given).strip() if isinstance(given, (str, os.PathLike)) else ""
    return text if parse_repo_id(text) else parts[0].removeprefix("models--").replace("--", "/")


def _check_folder(folder: Path, given) -> None:
    repo = cached_repo(given, folder)
    if repo is not None and folder.is_dir() and not (folder / "config.json").is_file():
        raise ModelLoadError(_("This model ({repo}) has no config.json in the Hugging Face "
                               "cache. On a machine with internet run `{command}`, then copy "
                               "its cache.").format(repo=repo, command=download_command(repo)))
    if not folder.exists():
        raise ModelLoadError(_("No model folder at '{path}': check the path (it must exist on "
                               "this machine; nothing is downloaded).").format(path=given))
    if not folder.is_dir():
        raise ModelLoadError(_("'{path}' is a file: give the folder that holds config.json and "
                               "the weights (as written by save_pretrained).").format(path=given))
    if not (folder / "config.json").is_file():
        raise ModelLoadError(_("'{path}' has no config.json: it is not a Hugging Face model "
                               "folder. Save the model with save_pretrained(folder).").format(
                                   path=given))


def _read_config(folder: Path):
    """(AutoConfig, weights file named by config.json or None), refusing custom code and
    configs that point at pickle files."""
    from transformers import AutoConfig  # heavy: transformers only when a model is loaded

    try:
        raw = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelLoadError(_("config.json could not be read as JSON ({error}).").format(
            error=exc)) from None
    if not isinstance(raw, dict):
        raise ModelLoadError(_("config.json must hold a JSON object."))
    explicit = raw.get("transformers_weights")
    if explicit is not None and not str(explicit).endswith((".safetensors", ".safetensors.index.json")):
        raise ModelLoadError(_("config.json points at weights '{file}', which are not "
                               "safetensors. Only safetensors weights are loaded.").format(
                                   file=explicit) + "\n" + convert_recipe())
    try:
        return AutoConfig.from_pretrained(folder, local_files_only=True, trust_remote_code=False), explicit
    except (ValueError, OSError, KeyError, TypeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if "trust_remote_code" in str(exc) or "custom code" in str(exc):
            first = _("this model needs its own Python code (trust_remote_code), which "
                      "alibi-viz never runs")
        raise ModelLoadError(_("Unsupported or unreadable model config: {reason}.").format(
            reason=first)) from None


def _check_causal_lm(config) -> None:
    # heavy: transformers only when a model is loaded
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    model_type = getattr(config, "model_type", "")
    if getattr(config, "is_encoder_decoder", False):
        raise ModelLoadError(_("'{type}' is an encoder-decoder model; alibi-viz inspects "
                               "decoder-only causal language models (BLOOM, MPT, Falcon, GPT-2, "
                               "LLaMA, ...).").format(type=model_type))
    if model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        raise ModelLoadError(_("'{type}' is not a causal language model that transformers can "
                               "load with AutoModelForCausalLM (encoder-only, vision or audio "
                               "model?).").format(type=model_type))
    if model_type in ENCODER_FAMILIES and not getattr(config, "is_decoder", False):
        raise ModelLoadError(_("'{type}' is an encoder-only model (bidirectional attention); "
                               "alibi-viz inspects causal language models.").format(
                                   type=model_type))


def _safetensors_files(folder: Path) -> list[Path]:
    """The safetensors files the folder's weights live in; [] when it has none."""
    single, index = folder / SAFE_WEIGHTS, folder / SAFE_WEIGHTS_INDEX
    if single.is_file():
        return [single]
    if index.is_file():
        try:
            weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
            names = sorted(set(weight_map.values()))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError,
                AttributeError) as exc:
            raise ModelLoadError(_("{index} is corrupt ({error}): re-save the model with "
                                   "save_pretrained.").format(index=SAFE_WEIGHTS_INDEX,
                                                              error=repr(exc))) from None
        files = []
        for name in names:
            shard = Path(os.path.realpath(folder / str(name)))
            if not _inside(str(shard), os.path.realpath(folder)) or shard.suffix != ".safetensors":
                raise ModelLoadError(_("{index} lists '{file}', which is not a safetensors file "
                                       "inside the model folder.").format(
                                           index=SAFE_WEIGHTS_INDEX, file=name))
            if not shard.is_file():
                raise ModelLoadError(_("Weight shard '{file}' listed in {index} is missing.").format(
                    file=name, index=SAFE_WEIGHTS_INDEX))
            files.append(shard)
        return files
    return sorted(folder.glob("*.safetensors"))  # a single file under another name


def _check_weights(folder: Path, explicit: str | None, repo: str | None = None) -> None:
    """Refuse pickle-only folders and corrupt safetensors before transformers sees them.

    explicit: the weights file config.json names (`transformers_weights`), if any. repo: the
    cached repo id the folder is the snapshot of (`cached_repo`), if any.
    """
    files = _safetensors_files(folder)
    if not files:
        pickles = sorted(p.name for p in folder.iterdir() if p.suffix in PICKLE_SUFFIXES)
        if pickles and repo is not None:
            raise ModelLoadError(_(
                "This model ({repo}) has only pickle weights in the Hugging Face cache "
                "({files}). Loading pickle files can run arbitrary code hidden in them, so "
                "alibi-viz only loads safetensors. If the repo has safetensors weights, run "
                "`{command}` on a machine with internet; otherwise convert them.").format(
                    repo=repo, files=", ".join(pickles[:3]), command=download_command(repo))
                + "\n" + convert_recipe())
        if repo is not None:
            raise ModelLoadError(_("No weights for {repo} in the Hugging Face cache. On a "
                                   "machine with internet run `{command}`, then copy its "
                                   "cache.").format(repo=repo, command=download_command(repo)))
        if pickles:
            raise ModelLoadError(_(
                "This folder has only pickle weights ({files}). Loading pickle files can run "
                "arbitrary code hidden in them, so alibi-viz only loads safetensors.").format(
                    files=", ".join(pickles[:3])) + "\n" + convert_recipe())
        raise ModelLoadError(_("No weights found: the folder needs model.safetensors (or sharded "
                               "model-*.safetensors with model.safetensors.index.json)."))
    if explicit is None and not ((folder / SAFE_WEIGHTS).is_file() or (folder / SAFE_WEIGHTS_INDEX).is_file()):
        raise ModelLoadError(_("Found {file} but transformers looks for {weights} (or {index}): "
                               "rename the file or re-save the model.").format(
                                   file=files[0].name, weights=SAFE_WEIGHTS,
                                   index=SAFE_WEIGHTS_INDEX))
    for file in files:
        try:  # reads and validates the header: offsets must cover the file exactly
            with safe_open(str(file), framework="pt") as handle:
                handle.keys()
        except Exception as exc:  # safetensors raises its own SafetensorError and OSError
            raise ModelLoadError(_("{file} is not a valid safetensors file ({error}); it may be "
                                   "truncated or corrupt. Copy or save the model again.").format(
                                       file=file.name, error=exc)) from None


def _check_tokenizer_files(folder: Path, repo: str | None = None) -> None:
    if not any((folder / name).is_file() for name in TOKENIZER_FILES):
        if repo is not None:
            raise ModelLoadError(_("Tokenizer missing: this model ({repo}) has no tokenizer "
                                   "files in the Hugging Face cache. On a machine with internet "
                                   "run `{command}`, then copy its cache.").format(
                                       repo=repo, command=download_command(repo)))
        raise ModelLoadError(_("Tokenizer missing: the folder has no tokenizer files "
                               "(tokenizer.json or tokenizer_config.json). Save the tokenizer "
                               "next to the model with tokenizer.save_pretrained(folder)."))


def _parse_dtype(dtype):
    if dtype == "auto" or isinstance(dtype, torch.dtype):
        return dtype
    if isinstance(dtype, str) and isinstance(getattr(torch, dtype, None), torch.dtype):
        return getattr(torch, dtype)
    raise ModelLoadError(_("dtype must be a torch dtype, a name such as 'float32', or 'auto'; "
                           "got {value}.").format(value=repr(dtype)))


def _parse_device(device) -> torch.device:
    try:
        device = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ModelLoadError(_("Unknown device {device} ({error}); use 'cpu' or 'cuda'.").format(
            device=repr(device), error=exc)) from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ModelLoadError(_("device='cuda' was asked for but no CUDA GPU is available; use "
                               "'cpu'."))
    return device


# ----------------------------------------------------------------------------- loading

def load_model(path, device="cpu", device_map=None, max_seq_len: int | None = None,
               dtype=torch.float32, max_memory: dict | None = None,
               offload_folder=None, allow_custom: bool | None = None,
               need_tokenizer: bool = True):
    """Load a local causal LM folder: returns `(model, tokenizer, info: ModelInfo)`.

    path:        folder written by `save_pretrained` (config.json, safetensors, tokenizer), or
                 a repo id in the local Hugging Face cache (`org/name[@revision]`); checked
                 by `resolve_model_path` against the deployment's restrictions
                 (`allow_custom`, see there).
    device:      where to put the model ("cpu", "cuda", ...), ignored when device_map is given.
    device_map:  handed to `from_pretrained`, e.g. "auto" to spread a model larger than one
                 device over GPU, CPU and disk (accelerate); with `max_memory` (e.g.
                 {"cpu": "2GB"}) and `offload_folder`, layers that do not fit go to disk.
    max_seq_len: MPT only: the longest input to allow; config.max_seq_len is raised to
                 max(config value, max_seq_len or MPT_MAX_SEQ_LEN) because transformers' MPT
                 builds its bias at exactly that many keys and fails on longer inputs.
    dtype:       float32 by default, so that the decomposition of `heads` reproduces the
                 model's probabilities to 1e-5; "auto" keeps the checkpoint's dtype.
    need_tokenizer: False for a use that needs none (the conformance check without its
                 decode part): a missing or unreadable tokenizer then gives tokenizer None.

    The model runs eager attention in eval mode. Every failure raises ModelLoadError with a
    message for the user: missing path, no config.json, unsupported model type, pickle-only or
    corrupt weights, tokenizer missing, accelerate missing, ...
    """
    from transformers import AutoTokenizer  # heavy: transformers only when a model is loaded

    folder = resolve_model_path(path, allow_custom)
    repo = cached_repo(path, folder)
    _check_folder(folder, path)
    config, explicit_weights = _read_config(folder)
    _check_causal_lm(config)
    _check_weights(folder, explicit_weights, repo)
    if need_tokenizer:
        _check_tokenizer_files(folder, repo)
    dtype = _parse_dtype(dtype)
    if device_map is None:
        device = _parse_device(device)
    elif importlib.util.find_spec("accelerate") is None:
        raise ModelLoadError(_("device_map={value} needs the optional package accelerate: pip "
                               "install accelerate (or load without device_map).").format(
                                   value=repr(device_map)))

    notes, declared_context = [], None
    if config.model_type == "mpt":
        trained = int(config.max_seq_len)
        wanted = MPT_MAX_SEQ_LEN if max_seq_len is None else check_int(
            max_seq_len, "max_seq_len", 1, 1 << 24)
        if wanted > trained:
            config.max_seq_len = wanted
            notes.append(Message(N_(
                "config.max_seq_len raised from {old} to {new}: transformers' MPT builds its "
                "ALiBi bias at max_seq_len keys and fails on longer inputs."),
                old=str(trained), new=str(wanted)))
        declared_context = trained

    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True, trust_remote_code=False)
    except Exception as exc:  # transformers raises ValueError, OSError, TypeError, ...
        if need_tokenizer:
            raise ModelLoadError(_("Tokenizer missing or unreadable ({error}). Save it next to "
                                   "the model with tokenizer.save_pretrained(folder).").format(
                                       error=_first_line(exc))) from None
        tokenizer = None

    placement = {}
    if device_map is not None:
        placement = {k: v for k, v in (("max_memory", max_memory),
                                       ("offload_folder", offload_folder)) if v is not None}
        if offload_folder is not None:
            Path(offload_folder).mkdir(parents=True, exist_ok=True)
    try:
        model, loading_info = from_pretrained(  # one load at a time in a process
            folder, config=config, trust_remote_code=False,
            use_safetensors=True, attn_implementation="eager", dtype=dtype,
            device_map=device_map, output_loading_info=True, **placement)
        if device_map is None:
            model.to(device)
    except (OSError, ValueError, RuntimeError, KeyError, TypeError, ImportError) as exc:
        if "ignore_mismatched_sizes" in str(exc):  # transformers points to a log line
            raise ModelLoadError(_shape_mismatch(folder, config)) from None
        raise ModelLoadError(_("The model could not be loaded: {error}").format(
            error=_first_line(exc))) from None
    model.eval()
    if layer_slopes.attach_from_config(model) is not None:
        notes.append(Message(N_("Each layer applies its own slopes, read from config.json "
                                "(alibi_viz_slopes: alibi-viz's learnable-slope variant). Plain "
                                "transformers would ignore them and apply the official schedule "
                                "in every layer.")))
    if model.config._attn_implementation != "eager":
        raise ModelLoadError(_("This model runs '{kind}' attention and cannot return attention "
                               "probabilities (eager is needed).").format(
                                   kind=model.config._attn_implementation))

    missing = list(loading_info.get("missing_keys") or [])
    mismatched = list(loading_info.get("mismatched_keys") or [])
    if missing or mismatched:
        notes.append(Message(N_(
            "{n} weights were missing or had the wrong shape and were initialised at random: the "
            "heads shown are partly untrained."), n=str(len(missing) + len(mismatched))))
    info = describe_model(model, path=str(folder), notes=notes, declared_context=declared_context)
    return model, tokenizer, info


def load_eval_model(folder: Path, for_attentions: bool = False):
    """A shipped model in eval mode. sdpa where the architecture supports it (same logits as
    eager up to rounding, much less memory at 4096 tokens); eager for BLOOM or when the caller
    needs attention probabilities."""
    from transformers import AutoConfig  # heavy: transformers only when a model is loaded

    config = AutoConfig.from_pretrained(folder, local_files_only=True)
    attn = "eager" if for_attentions or config.model_type == "bloom" else "sdpa"
    # float32 whatever the stored dtype (the shipped weights are fp16; transformers would load
    # them as fp16, slow and coarse on a CPU)
    model = from_pretrained(folder, attn_implementation=attn, dtype=torch.float32)
    layer_slopes.attach_from_config(model)  # the learnable-slope variant's own slopes
    return model.eval()


# A shipped model's training snapshots: assets/models/<name>/snapshots/step-<N>/ (saved by
# `python -m experiments.train --snapshots STEPS`; Model heads steps through them).
SNAPSHOT_PREFIX = "step-"


def snapshot_root(name: str = assets.DEFAULT_MODEL) -> Path:
    """Where the snapshots of shipped model `name` live."""
    return assets.MODELS_DIR / name / "snapshots"


def snapshot_folders(name: str = assets.DEFAULT_MODEL) -> dict[int, Path]:
    """step -> folder of every snapshot of shipped model `name`, in step order; {} if none."""
    root = snapshot_root(name)
    if not root.is_dir():
        return {}
    found = {}
    for folder in root.iterdir():
        step = folder.name.removeprefix(SNAPSHOT_PREFIX)
        if folder.name.startswith(SNAPSHOT_PREFIX) and step.isdigit() and (
                folder / "config.json").is_file():
            found[int(step)] = folder
    return dict(sorted(found.items()))


def load_snapshot(folder: Path):
    """(model in float32, eval mode, eager attention; tokenizer) of one snapshot folder."""
    from transformers import AutoTokenizer  # heavy: transformers only when a snapshot loads

    model = from_pretrained(folder, attn_implementation="eager", dtype=torch.float32)
    return model.eval(), AutoTokenizer.from_pretrained(folder, local_files_only=True)


def _shape_mismatch(folder: Path, config) -> str:
    """What transformers' "For details look at the above report!" means: the tensors whose
    shape in the weights differs from the model config.json describes (found by loading once
    more, keeping the mismatches; only on this error's path)."""
    try:
        _model, info = from_pretrained(folder, config=config, trust_remote_code=False,
                                       use_safetensors=True, ignore_mismatched_sizes=True,
                                       output_loading_info=True)
        mismatched = list(info.get("mismatched_keys") or [])
    except Exception:  # noqa: BLE001 (the first error is the one to report)
        mismatched = []
    shown = "; ".join(_("{key}: {weights} in the weights, {config} by config.json").format(
        key=key, weights=list(weights), config=list(expected))
        for key, weights, expected in sorted(mismatched)[:3])
    return _("The weights do not match config.json: {n} tensors have another shape ({shown}). "
             "Is config.json the one saved with these weights?").format(
                 n=len(mismatched), shown=shown or _("not listed by transformers"))


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


# ----------------------------------------------------------------------------- describing

def model_dims(model) -> tuple[int, int, int]:
    """(num_layers, num_heads, head_dim) of a transformers model, from its config."""
    config = model.config
    layers = int(config.num_hidden_layers)
    heads = int(config.num_attention_heads)
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    return layers, heads, int(head_dim)


def _position_module(model):
    """The model's absolute position table module (GPT-2's wpe, ...), or None."""
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Embedding) and name.rsplit(".", 1)[-1] in LEARNED_POSITION_TABLES:
            return module
    return None


POSITION_PARAMETER_NAMES = (*LEARNED_POSITION_TABLES, "position", "rotary", "alibi")


def position_parameter_count(model) -> int:
    """How many of the model's parameters encode position: those whose name holds one of
    POSITION_PARAMETER_NAMES (0 for ALiBi and RoPE, whose slopes and frequencies are buffers;
    the table's size for learned or sinusoidal positions)."""
    return sum(p.numel() for name, p in model.named_parameters()
               if any(part in name for part in POSITION_PARAMETER_NAMES))


def table_kind(weight) -> str:
    """What an absolute position table holds: "none" (all zeros: no position information),
    "sinusoidal" (proportional to the sinusoidal formula of Vaswani et al., as in the shipped
    sinusoidal model) or "learned"."""
    table = weight.detach().float().cpu().numpy()  # (positions, dim)
    if not table.any():
        return "none"
    positions, dim = table.shape
    if dim % 2 == 0 and positions >= 2:
        formula = sinusoidal_table(min(positions, 4096), dim)
        part = table[: formula.shape[0]]
        scale = float((part * formula).sum() / (formula * formula).sum())
        if scale > 0 and np.allclose(part, scale * formula, rtol=1e-4, atol=1e-6 * abs(scale) + 1e-9):
            return "sinusoidal"
    return "learned"


def positional_scheme(model) -> str:
    """"alibi", "rope", "learned", "sinusoidal" or "none": how this model tells positions apart
    (a position table of zeros is "none"; one proportional to the sinusoidal formula is
    "sinusoidal")."""
    config = model.config
    if config.model_type in ("bloom", "mpt") or (config.model_type == "falcon" and config.alibi):
        return "alibi"
    if getattr(config, "alibi", False) is True or getattr(config, "position_embedding_type", None) == "alibi":
        return "alibi"
    if (getattr(config, "rope_parameters", None) or getattr(config, "rotary_dim", None)
            or getattr(config, "rope_theta", None)):
        return "rope"
    module = _position_module(model)
    if module is None:
        return "none"
    return table_kind(module.weight) if module.weight.device.type != "meta" else "learned"


def model_alibi_slopes(model) -> np.ndarray | None:
    """Slopes m_h, shape (num_heads,), float64, exactly as transformers' own builder for this
    architecture makes them (BLOOM and Falcon `build_alibi_tensor`, MPT `build_mpt_alibi_tensor`);
    None for a model without ALiBi. Falcon's are rounded to bfloat16 by its builder."""
    config = model.config
    heads = int(config.num_attention_heads)
    ones = torch.ones(1, 2, dtype=torch.long)  # one sequence of two keys: bias at j=1 is m
    if config.model_type == "bloom":
        from transformers.models.bloom.modeling_bloom import build_alibi_tensor  # heavy
        return build_alibi_tensor(ones, heads, torch.float32)[:, 0, 1].double().numpy()
    if config.model_type == "falcon" and config.alibi:
        from transformers.models.falcon.modeling_falcon import build_alibi_tensor  # heavy
        return build_alibi_tensor(ones, heads, torch.float32)[:, 0, 1].double().numpy()
    if config.model_type == "mpt":
        from transformers.models.mpt.modeling_mpt import build_mpt_alibi_tensor  # heavy
        # MptModel.forward calls it with the default alibi_bias_max=8 whatever the config says;
        # two keys: values m*(j - 1), so key 0 holds -m.
        return -build_mpt_alibi_tensor(heads, 2)[:, 0, 0].double().numpy()
    return None


def matching_schedules(slopes, model_type: str = "") -> tuple[str, ...]:
    """Schedules of `alibi_slopes` (max_bias 8) that give `slopes`, the architecture's own first."""
    slopes = np.asarray(slopes, dtype=np.float64)
    rtol = SLOPE_RTOL.get(model_type, 1e-5)
    order = ("mpt", "official", "geometric") if model_type == "mpt" else SCHEDULES
    return tuple(s for s in order  # (heads,) or (layers, heads): every layer must match
                 if np.allclose(slopes, alibi_slopes(slopes.shape[-1], s), rtol=rtol, atol=0.0))


def falcon_bf16_error(num_heads: int, seq_len: int = 2048) -> float:
    """Largest |bias_bf16 - m*j| over heads and keys j < seq_len, for Falcon's bfloat16 builder
    against exact official slopes (before its 1/sqrt(d) scaling)."""
    from transformers.models.falcon.modeling_falcon import build_alibi_tensor  # heavy

    built = build_alibi_tensor(torch.ones(1, seq_len, dtype=torch.long), num_heads, torch.float32)
    exact = alibi_slopes(num_heads)[:, None] * np.arange(seq_len)[None, :]  # (H, L)
    return float(np.abs(built[:, 0, :].double().numpy() - exact).max())


def bias_form(model) -> str:
    """One sentence: how this model's positional bias enters its pre-softmax attention scores.

    In English (an N_ msgid: the result is cached with the model); show it as `_(text)`."""
    config = model.config
    if config.model_type == "bloom":
        return N_("+m*j added to QK^T/sqrt(d) (row-constant form of -m*(i-j)), not scaled by "
                  "1/sqrt(d)")
    if config.model_type == "mpt":
        return N_("+m*(j-(L-1)) added to QK^T*softmax_scale (row-constant form of -m*(i-j)), not "
                  "scaled")
    if config.model_type == "falcon" and config.alibi:
        return N_("eager: (QK^T + m*j)/sqrt(d) + m*j/sqrt(d), the bias added twice (a slope of "
                  "2m/sqrt(d) per token); sdpa adds it once (m/sqrt(d)); m*j built in bfloat16")
    scheme = positional_scheme(model)
    if scheme == "rope":
        return N_("no additive bias: rotary embeddings rotate q and k, so position is inside QK^T")
    if scheme == "learned":
        return N_("no additive bias: learned position embeddings are added to the input tokens")
    if scheme == "sinusoidal":
        return N_("no additive bias: a fixed sinusoidal position table is added to the input "
                  "tokens")
    return N_("no positional bias found: position only through the causal mask")


def _declared_context(config) -> int | None:
    for name in ("max_position_embeddings", "n_positions", "n_ctx", "seq_length", "max_seq_len"):
        value = getattr(config, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def learned_positions(model) -> int | None:
    """Length of the model's absolute position table (its hard input limit), None if none."""
    module = _position_module(model)
    if module is None:
        return None
    return int(module.num_embeddings - getattr(module, "offset", 0))  # OPT's starts at 2


def _nested(values: np.ndarray) -> tuple:
    """(heads,) or (layers, heads) numbers as (nested) tuples of floats."""
    return tuple(_nested(v) if np.ndim(v) else float(v) for v in values)


def _alibi_details(model, slopes: np.ndarray, head_dim: int) -> tuple[np.ndarray, list, dict]:
    """(per-token slopes on the eager logits as the config predicts them, warnings, extra
    facts) for an ALiBi model."""
    config, heads = model.config, slopes.shape[-1]
    warnings, extra = [], {}
    if config.model_type == "falcon":
        scale = 1.0 / math.sqrt(head_dim)
        err = falcon_bf16_error(heads)
        warnings.append(Message(N_(
            "Falcon's eager attention adds the ALiBi bias twice (inside (QK^T + m*j)/sqrt(d) and "
            "again through the attention mask), so the probabilities shown here use a slope of "
            "2*m/sqrt(d) = {eager}*m per token; its sdpa path, which generation uses by default, "
            "adds it once ({sdpa}*m). The paper adds m unscaled."),
            eager=_significant(2 * scale, 3), sdpa=_significant(scale, 3)))
        warnings.append(Message(N_(
            "Falcon builds the bias in bfloat16: slopes are rounded to 8 bits and m*j is rounded "
            "again, off from exact float32 by up to {error} (before scaling) at 2048 tokens."),
            error=_significant(err, 2)))
        extra.update(bias_scale=scale, eager_bias_copies=2, bf16_error_at_2048=err)
        return 2 * scale * slopes, warnings, extra
    if config.model_type == "mpt":
        attn = config.attn_config
        extra.update(softmax_scale=getattr(attn, "softmax_scale", None),
                     alibi_bias_max=getattr(attn, "alibi_bias_max", 8), clip_qkv=getattr(attn, "clip_qkv", None))
        if getattr(attn, "alibi_bias_max", 8) != 8:
            warnings.append(Message(N_("config asks for alibi_bias_max={value}, but transformers' "
                                       "MPT always builds its slopes with 8."),
                                    value=str(attn.alibi_bias_max)))
        if getattr(attn, "alibi", True) is False:
            warnings.append(Message(N_("config says alibi=False, but transformers' MPT adds the "
                                       "ALiBi bias anyway.")))
        if getattr(attn, "softmax_scale", None) is not None:
            warnings.append(Message(N_("QK^T is scaled by softmax_scale={value}, not 1/sqrt(d)."),
                                    value=str(attn.softmax_scale)))
    return slopes.copy(), warnings, extra


def describe_model(model, path: str = "", notes=(), declared_context: int | None = None) -> ModelInfo:
    """ModelInfo of an already built transformers causal LM (what `load_model` returns).

    declared_context overrides the context length read from the config (load_model passes MPT's
    original max_seq_len, since it raises the config's value).
    """
    config = model.config
    layers, heads, head_dim = model_dims(model)
    first = next(model.parameters())
    embeddings = model.get_input_embeddings().weight
    scheme = positional_scheme(model)
    slopes = model_alibi_slopes(model)
    if slopes is not None and layer_slopes.attached(model) is not None:
        slopes = layer_slopes.attached(model)  # (layers, heads)
    info = dict(
        path=path, architecture=type(model).__name__, model_type=config.model_type,
        num_layers=layers, num_heads=heads, head_dim=head_dim, hidden_size=int(config.hidden_size),
        num_params=int(sum(p.numel() for p in model.parameters())),
        dtype=str(first.dtype).removeprefix("torch."), device=str(embeddings.device),
        positional=scheme, bias_form=bias_form(model),
        declared_context=declared_context or _declared_context(config),
        max_positions=learned_positions(model),
        notes=tuple(notes))
    if slopes is not None:
        config_slopes, warnings, extra = _alibi_details(model, slopes, head_dim)
        schedules = matching_schedules(slopes, config.model_type)
        if not schedules:
            warnings.append(Message(N_("The slopes match none of the official, MPT or geometric "
                                       "schedules.")))
        info.update(slopes=_nested(slopes), slope_schedule=schedules[0] if schedules else None,
                    matching_schedules=schedules, config_slopes=_nested(config_slopes),
                    warnings=tuple(warnings), extra=extra)
    elif scheme == "alibi":
        info.update(warnings=(Message(N_("'{type}' uses ALiBi, but alibi-viz cannot read its "
                                         "slopes: only BLOOM, MPT and Falcon are supported fully."),
                                      type=config.model_type),))
    return ModelInfo(**info)


# ----------------------------------------------------------------------------- model facts

def training_of(info: ModelInfo) -> dict:
    """The model folder's training.json ({} for a model built in memory, a folder without one,
    or a damaged one: it only loses the facts it would add)."""
    try:
        return assets.training_info(info.path) if info.path else {}
    except (OSError, ValueError):
        return {}


def train_seq_len(info: ModelInfo, training: dict | None = None) -> int | None:
    """The length the model was trained at: training.json's train_seq_len when the folder has
    one (the shipped models), else the context the config declares (ModelInfo.declared_context:
    for most published checkpoints that is the training length; for the shipped GPT-2 and
    GPT-NeoX models it is the 4096-row table built for evaluation, hence training.json first).
    training: the folder's training.json as read already; None reads it (`training_of`)."""
    value = (training_of(info) if training is None else training).get("train_seq_len")
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return info.declared_context


def _slope_list(slopes) -> str:
    """Slopes to 4 significant digits; "; " between them where the decimal mark is a comma."""
    texts = [significant(m, 4) for m in slopes]
    return ("; " if any("," in t for t in texts) else ", ").join(texts)


def model_info_rows(info: ModelInfo, training: dict | None = None) -> list[dict]:
    """ModelInfo as (property, value) rows of text for a table, in the current language."""
    rows = [
        (_("architecture"), f"{info.architecture} ({info.model_type})"),
        (_("layers x heads"), _("{num_layers} x {num_heads} (head size {head_dim}, hidden "
                                "{hidden})").format(num_layers=info.num_layers,
                                                    num_heads=info.num_heads,
                                                    head_dim=info.head_dim,
                                                    hidden=info.hidden_size)),
        (_("parameters"), number(info.num_params)),
        (_("dtype / device"), f"{info.dtype} / {info.device}"),
        (_("position"), _(info.positional)),
        (_("how the bias enters"), _(info.bias_form)),
    ]
    if info.slopes is not None:
        rows.append((_("slope schedule"), info.slope_schedule or _("none of the standard ones")))
        if info.per_layer:
            rows += [(_("slopes m, layer {n}").format(n=i + 1), _slope_list(row))
                     for i, row in enumerate(info.slopes)]
        else:
            rows.append((_("slopes m"), _slope_list(info.slopes)))
        if info.config_slopes is not None and not np.allclose(info.config_slopes, info.slopes):
            rows.append((_("slopes from the config, per token on the eager logits"),
                         _slope_list(np.ravel(info.config_slopes))))
    length = train_seq_len(info, training)
    known = isinstance((training or {}).get("train_seq_len"), int)
    rows.append((_("training length"), (tokens(length) + ("" if known else
                                                            " " + _("(as the config declares)")))
                 if length else _("unknown")))
    if info.max_positions:
        rows.append((_("longest input"),
                     tokens(info.max_positions) + " " + _("(its position table)")))
    if info.path:
        rows.append((_("folder"), info.path))
    return [{"property": k, "value": v} for k, v in rows]
