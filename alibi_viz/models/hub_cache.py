"""Models already in the local Hugging Face cache, found by repo id, offline.

Engineers know their models as `org/name` (`bigscience/bloom-560m`), and
`huggingface-cli download` keeps them under `models--org--name/snapshots/<commit>/` in the hub
cache. This module lists that cache (`huggingface_hub.scan_cache_dir`) and resolves a repo id,
optionally `org/name@revision` (a branch or tag under refs/, or a commit hash or its prefix),
to its snapshot folder, which `loading.load_model` then loads with its usual safety rules.
Nothing here touches the network.

The cache folder is read at call time, like huggingface_hub does at import: `HF_HUB_CACHE`,
else `$HF_HOME/hub`, else `~/.cache/huggingface/hub`.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from alibi_viz.errors import ModelLoadError
from alibi_viz.i18n import N_, _

REPO_ID = re.compile(r"^(?P<repo>[A-Za-z0-9][\w.-]*/[\w.-]+)(?:@(?P<rev>[\w./-]+))?$")
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle")
ALIBI_TYPES = {"bloom", "mpt"}
ROPE_TYPES = {"llama", "mistral", "gpt_neox", "qwen2", "qwen3", "phi", "phi3", "gemma",
              "gemma2", "gptj", "stablelm", "mixtral", "olmo", "starcoder2", "cohere"}
LEARNED_TYPES = {"gpt2", "opt", "gpt_neo", "gpt_bigcode", "biogpt", "xglm"}
UNKNOWN = N_("unknown")  # positional_from_config's answer when it cannot tell (show _(code))


def hub_cache_dir() -> Path:
    """The hub cache folder, from the environment as it is now."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join("~", ".cache", "huggingface")
    return Path(home).expanduser() / "hub"


def parse_repo_id(text: str) -> tuple[str, str | None] | None:
    """("org/name", revision or None) if `text` has the form of a repo id, else None."""
    match = REPO_ID.match(str(text).strip())
    return (match["repo"], match["rev"]) if match else None


def positional_from_config(config: dict) -> str:
    """How a model encodes position, read from config.json alone: "alibi", "rope", "learned",
    or "unknown" (codes, in English; see loading.POSITIONAL_NAMES)."""
    kind = str(config.get("model_type", ""))
    if kind in ALIBI_TYPES or (kind == "falcon" and config.get("alibi")):
        return "alibi"
    if kind == "falcon" or kind in ROPE_TYPES:
        return "rope"
    if kind in LEARNED_TYPES:
        return "learned"
    return UNKNOWN


@dataclass(frozen=True)
class CachedModel:
    """One revision of a cached model repo, and whether the inspector can run it."""

    repo_id: str
    revision: str  # the refs pointing at it ("main", "main, v1.0") or the short commit hash
    commit: str
    folder: str
    size_bytes: int
    architecture: str
    positional: str
    runnable: bool
    reason: str  # why not, when not runnable (in the language of the listing)

    @property
    def refs(self) -> list[str]:
        """The branches and tags pointing at this revision ([] for a bare commit)."""
        return [] if self.revision == self.commit[:12] else self.revision.split(", ")

    @property
    def is_main(self) -> bool:
        """Whether refs/main names this revision: the one `org/name` alone means."""
        return "main" in self.refs

    @property
    def source(self) -> str:
        """What to pass to load_model / put in the URL: org/name for the revision refs/main
        names, else org/name@ its tag or branch, else org/name@ its short commit hash."""
        if self.is_main:
            return self.repo_id
        return f"{self.repo_id}@{self.refs[0] if self.refs else self.commit[:12]}"

    def matches(self, text: str) -> bool:
        """Whether repo id `text` (org/name or org/name@revision) names this revision: a
        branch or tag pointing at it, its commit hash or a prefix of it; no revision means
        main."""
        parsed = parse_repo_id(text)
        if parsed is None or parsed[0] != self.repo_id:
            return False
        wanted = parsed[1] or "main"
        return wanted in self.refs or self.commit.startswith(wanted)


def _assess(folder: Path) -> tuple[str, str, bool, str]:
    """(architecture, positional, runnable, reason) of a snapshot folder, from its files; the
    reason in the current language."""
    # heavy: transformers (about a second), only when the cache is listed
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    config_file = folder / "config.json"
    if not config_file.is_file():
        return "?", UNKNOWN, False, _("no config.json")
    try:
        config = json.loads(config_file.read_text())
    except (OSError, ValueError):
        return "?", UNKNOWN, False, _("config.json is not readable JSON")
    arch = ", ".join(config.get("architectures") or []) or str(config.get("model_type", "?"))
    positional = positional_from_config(config)
    files = [p.name for p in folder.iterdir()]
    if config.get("auto_map"):
        return arch, positional, False, _("needs remote code (auto_map), which is never run")
    if config.get("model_type") not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        return arch, positional, False, _("'{type}' is not a causal LM built into "
                                          "transformers").format(type=config.get("model_type"))
    if not any(name.endswith(".safetensors") for name in files):
        pickles = any(name.endswith(PICKLE_SUFFIXES) for name in files)
        return arch, positional, False, (_("pickle-only weights (.bin): convert to safetensors")
                                         if pickles else _("no weights in this snapshot"))
    return arch, positional, True, ""


def download_command(text: str) -> str:
    """The command that puts repo `text` (org/name[@revision]) into the cache, safetensors
    weights, configs and tokenizer only (README, "Inspecting your own models")."""
    parsed = parse_repo_id(text)
    repo_id, rev = parsed if parsed is not None else (str(text).strip(), None)
    return (f"huggingface-cli download {repo_id}{f' --revision {rev}' if rev else ''} "
            '--include "*.safetensors" "*.json" "tokenizer*"')


def list_cached_models(cache_dir=None) -> list[CachedModel]:
    """Every revision of every model repo in the hub cache: per repo, the one refs/main names
    first (what `org/name` alone loads), then the others newest first; [] when there is no
    cache. Uses huggingface_hub.scan_cache_dir (no network). The reasons are in the
    current language."""
    # heavy: huggingface_hub's cache scanner (0.1 s), only when the cache is listed
    from huggingface_hub import scan_cache_dir
    from huggingface_hub.errors import CacheNotFound

    folder = Path(cache_dir) if cache_dir is not None else hub_cache_dir()
    try:
        info = scan_cache_dir(folder)
    except (CacheNotFound, OSError, ValueError):
        return []
    found = []
    for repo in sorted(info.repos, key=lambda r: r.repo_id.lower()):
        if repo.repo_type != "model":
            continue
        for rev in sorted(repo.revisions, key=lambda r: ("main" not in r.refs, -r.last_modified)):
            arch, positional, runnable, reason = _assess(Path(rev.snapshot_path))
            refs = ", ".join(sorted(rev.refs)) or rev.commit_hash[:12]
            found.append(CachedModel(repo.repo_id, refs, rev.commit_hash, str(rev.snapshot_path),
                                     int(rev.size_on_disk), arch, positional, runnable, reason))
    return found


def resolve_repo(text: str, cache_dir=None) -> Path:
    """The snapshot folder of repo id `text` (org/name or org/name@revision) in the cache.

    Raises ModelLoadError saying what to run on a machine with internet when it is not cached.
    """
    parsed = parse_repo_id(text)
    if parsed is None:
        raise ModelLoadError(_("'{text}' is not a repo id of the form org/name[@revision].").format(
            text=text))
    repo_id, rev = parsed
    folder = Path(cache_dir) if cache_dir is not None else hub_cache_dir()
    for model in list_cached_models(folder):
        if model.matches(text):
            return Path(model.folder)
    command = download_command(text)
    if rev:
        message = _("'{repo}' at revision {rev} is not in the local Hugging Face cache ({folder}), "
                    "and nothing is downloaded here. On a machine with internet run `{command}`, "
                    "then copy its cache (or point HF_HOME or HF_HUB_CACHE at it).")
    else:
        message = _("'{repo}' is not in the local Hugging Face cache ({folder}), and nothing is "
                    "downloaded here. On a machine with internet run `{command}`, then copy its "
                    "cache (or point HF_HOME or HF_HUB_CACHE at it).")
    raise ModelLoadError(message.format(repo=repo_id, rev=rev, folder=folder, command=command))
