"""Parsing shareable URL state: query parameter strings in, valid values (and warnings) out.

Query parameters arrive as strings that nobody has validated (`?heads=-3`, `?len=1e12`,
`?heads=abc`, a key repeated, unicode). Each parser here returns a valid value and, when the
input was bad, a warning sentence for the page to show; it never raises. The app declares one
`UrlParam` per control, so the same table drives reading, validating and writing the URL.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from alibi_viz.i18n import _, ngettext, number
from alibi_viz.positional import DEFAULT_METHODS, METHODS

MAX_PARAM_CHARS = 2000  # longer raw values are refused before any parsing


@dataclass(frozen=True)
class UrlParam:
    """One URL parameter: its name, kind ("int", "float", "choice", "text", "head_selection"), default
    and allowed range or choices."""

    name: str
    kind: str
    default: object
    low: float | None = None
    high: float | None = None
    choices: tuple = field(default_factory=tuple)


def _clip_repr(raw: str, limit: int = 40) -> str:
    raw = str(raw)
    return repr(raw if len(raw) <= limit else raw[:limit] + "...")


def parse_param(spec: UrlParam, raw) -> tuple[object, str | None]:
    """Parse one raw query value (a str, or a list of str for a repeated key) against `spec`.

    Returns (value, warning): value is always valid; warning is None when the input was used
    as given, else a sentence saying what was wrong and which value is shown instead.
    """
    if raw is None:
        return spec.default, None
    if isinstance(raw, (list, tuple)):
        if not raw:
            return spec.default, None
        warning_repeat = ngettext("'{name}' was given {count} time; using the last one.",
                                  "'{name}' was given {count} times; using the last one.",
                                  len(raw)).format(name=spec.name, count=len(raw))
        value, warning = parse_param(spec, raw[-1])
        return value, warning or (warning_repeat if len(set(raw)) > 1 else None)
    raw = str(raw)
    fallback = _("using the default {value}").format(value=repr(spec.default))
    if len(raw) > MAX_PARAM_CHARS:
        return spec.default, ngettext(
            "'{name}' is too long ({count} character); {fallback}.",
            "'{name}' is too long ({count} characters); {fallback}.", len(raw)).format(
            name=spec.name, count=number(len(raw)), fallback=fallback)
    text = raw.strip()
    if spec.kind == "text":
        return raw, None
    if spec.kind == "choice":
        for choice in spec.choices:
            if text.lower() == str(choice).lower():
                return choice, None
        return spec.default, _("'{name}' must be one of {choices}; got {value}, {fallback}.").format(
            name=spec.name, choices=", ".join(map(str, spec.choices)), value=_clip_repr(raw),
            fallback=fallback)
    if spec.kind == "head_selection":
        return text or spec.default, None  # checked against the head count by parse_head_selection
    if spec.kind == "int":
        if not re.fullmatch(r"[+-]?[0-9]{1,12}", text):
            return spec.default, _("'{name}' must be a whole number in [{low}, {high}]; got "
                                   "{value}, {fallback}.").format(
                name=spec.name, low=f"{spec.low:g}", high=f"{spec.high:g}",
                value=_clip_repr(raw), fallback=fallback)
        value = int(text)
    elif spec.kind == "float":
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            return spec.default, _("'{name}' must be a number in [{low}, {high}]; got {value}, "
                                   "{fallback}.").format(
                name=spec.name, low=f"{spec.low:g}", high=f"{spec.high:g}",
                value=_clip_repr(raw), fallback=fallback)
    else:
        raise ValueError(f"unknown parameter kind {spec.kind!r}")
    if not spec.low <= value <= spec.high:
        return spec.default, _("'{name}' must be in [{low}, {high}]; got {value}, {fallback}.").format(
            name=spec.name, low=f"{spec.low:g}", high=f"{spec.high:g}", value=_clip_repr(raw),
            fallback=fallback)
    return value, None


def parse_head_selection(text: str, num_heads: int) -> tuple[list[int], str | None]:
    """Parse a head selection like "all", "1-4", "1,3,8-12" (1-based) into 0-based indices.

    Returns (indices, warning). Out-of-range or malformed parts are dropped with a warning;
    an empty result falls back to all heads.
    """
    text = (text or "all").strip().lower()
    if text in ("", "all", "*"):
        return list(range(num_heads)), None
    chosen: set[int] = set()
    bad = []
    for part in text.replace(" ", "").split(","):
        match = re.fullmatch(r"([0-9]{1,6})(?:-([0-9]{1,6}))?", part)
        if not match:
            bad.append(part)
            continue
        first = int(match.group(1))
        last = int(match.group(2) or first)
        if first > last or first < 1 or last > num_heads:
            bad.append(part)
            continue
        chosen.update(range(first - 1, last))
    warning = None
    if bad:
        warning = ngettext("Heads {heads} are not valid for {n} head (use e.g. 1-4,8); ignored.",
                           "Heads {heads} are not valid for {n} heads (use e.g. 1-4,8); ignored.",
                           num_heads).format(
            heads=", ".join(_clip_repr(b, 12) for b in bad[:5]), n=num_heads)
    if not chosen:
        return list(range(num_heads)), (warning + " " if warning else "") + _("Showing all heads.")
    return sorted(chosen), warning


def format_head_selection(indices: list[int], num_heads: int) -> str:
    """Inverse of parse_head_selection: 0-based indices -> "all" or "1-4,8"."""
    if sorted(indices) == list(range(num_heads)):
        return "all"
    parts, run = [], []
    for h in sorted(set(indices)):
        if run and h == run[-1] + 1:
            run.append(h)
            continue
        if run:
            parts.append(f"{run[0] + 1}" if len(run) == 1 else f"{run[0] + 1}-{run[-1] + 1}")
        run = [h]
    if run:
        parts.append(f"{run[0] + 1}" if len(run) == 1 else f"{run[0] + 1}-{run[-1] + 1}")
    return ",".join(parts)


def parse_methods(text: str, default=DEFAULT_METHODS) -> tuple[list[str], str | None]:
    """Parse a URL value like "alibi,t5,rope_bound" into method names; never raises.

    Returns (names, warning). Unknown names are dropped with a warning; duplicates are dropped
    silently; if only unknown names were given, the defaults are used. An empty string is an
    empty selection (the user cleared it), not an error.
    """
    parts = [p.strip().lower() for p in str(text or "").split(",") if p.strip()]
    names = list(dict.fromkeys(p for p in parts if p in METHODS))
    bad = [p for p in parts if p not in METHODS]
    if not bad:
        return names, None
    fields = {"unknown": ", ".join(repr(b[:20]) for b in bad[:5]), "known": ", ".join(METHODS)}
    if names:
        return names, _("'methods' holds unknown {unknown} (known: {known}); dropped.").format(
            **fields)
    return list(default), _("'methods' holds unknown {unknown} (known: {known}); showing the "
                            "defaults.").format(**fields)
