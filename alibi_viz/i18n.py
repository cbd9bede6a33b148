"""Every user-visible string in three languages: English (the source), Spanish and Russian.

Standard tooling, no home-made dictionary:
- strings are marked in the code with `_("...")` (translated when the line runs) or, in tables
  built at import time, `N_("...")` (marked for extraction only, translated where shown with
  `_(table[key])`);
- Babel extracts them (`make messages`; see babel.cfg) into the template
  `alibi_viz/locale/messages.pot`, and `pybabel update` carries them into one catalog per
  language, `alibi_viz/locale/<lang>/LC_MESSAGES/messages.po` (gettext's own layout);
- at run time the stdlib `gettext` serves them: each .po is compiled in memory once per process
  (Babel's write_mo), so there is no build step and an edited catalog is live on the next start.
  Fuzzy entries are skipped, as msgfmt skips them.

Placeholders are named, `_("{n} heads").format(n=...)`, so a translation may reorder them.
Formulas stay LaTeX and are not marked.

The language is a context variable: the app sets it at the start of every run (a Streamlit run
executes in its session's script thread), and library code that builds figure labels or
messages reads it through `_`. A cached function whose result holds translated text takes the
language as an argument, so two languages never share a cache entry.

Numbers follow the language's conventions (CLDR, through Babel): `number(0.5, 2)` is "0.50" in
English and "0,50" in Spanish and Russian; `plotly_separators()` gives figures the same.
"""

from __future__ import annotations

import csv
import gettext as _gettext
import io
from contextvars import ContextVar
from functools import cache
from pathlib import Path

from alibi_viz.errors import AlibiVizError

LOCALE_DIR = Path(__file__).resolve().parent / "locale"
DOMAIN = "messages"
DEFAULT_LANGUAGE = "en"
# Language code -> its name in that language (what the switch shows).
LANGUAGES = {"en": "English", "es": "Español", "ru": "Русский"}

_current: ContextVar[str] = ContextVar("alibi_viz_language", default=DEFAULT_LANGUAGE)


class UnknownLanguage(AlibiVizError, ValueError):
    """A language code that has no catalog."""


def set_language(code: str) -> str:
    """Make `code` (one of LANGUAGES) the language of this thread's strings. Returns it."""
    if code not in LANGUAGES:
        raise UnknownLanguage(f"unknown language {code!r}; choose one of {', '.join(LANGUAGES)}")
    _current.set(code)
    return code


def get_language() -> str:
    return _current.get()


def catalog_path(code: str) -> Path:
    return LOCALE_DIR / code / "LC_MESSAGES" / f"{DOMAIN}.po"


@cache
def translations(code: str) -> _gettext.NullTranslations:
    """The stdlib translations object for `code`, compiled in memory from its .po file."""
    if code == DEFAULT_LANGUAGE:
        return _gettext.NullTranslations()
    # babel's catalog readers (30 ms): only for a language other than English, once
    from babel.messages.mofile import write_mo
    from babel.messages.pofile import read_po

    with open(catalog_path(code), "rb") as f:
        catalog = read_po(f, locale=code)
    buffer = io.BytesIO()
    write_mo(buffer, catalog, use_fuzzy=False)
    buffer.seek(0)
    return _gettext.GNUTranslations(buffer)


def gettext(message: str) -> str:
    """`message` in the current language (itself when untranslated)."""
    return translations(_current.get()).gettext(message)


def ngettext(singular: str, plural: str, n: int) -> str:
    """The singular or plural form for `n` (Russian has three plural forms)."""
    return translations(_current.get()).ngettext(singular, plural, n)


_ = gettext


def N_(message: str) -> str:  # noqa: N802 (gettext's conventional name)
    """Mark `message` for extraction without translating it (tables built at import time)."""
    return message


def number(value: float, decimals: int | None = None, *, grouping: bool = True) -> str:
    """`value` written for the current language: decimal comma in es and ru, CLDR grouping.

    `decimals` fixes the digits after the separator; None writes integers as integers and
    other values with up to 3 decimals. What Babel's format_decimal writes for CLDR's
    "#,##0.###" patterns (tests/test_i18n.py compares them), at a tenth of its cost: a Model
    heads rerun writes some 300 numbers.
    """
    text = format(value, ("," if grouping else "") + f".{3 if decimals is None else decimals}f")
    if decimals is None and "." in text:
        text = text.rstrip("0").rstrip(".")
    return _localized_marks(text)


def formatted(value: float, spec: str) -> str:
    """format(value, spec) (".3g", ".1e", "+.4g", ",.0f") with the current language's decimal
    and grouping marks: "0.00391" is "0,00391" in es and ru. Exponents stay as Python writes them."""
    return _localized_marks(format(value, spec))


MINUS = "\u2212"  # the minus sign (−), not a hyphen: "−5", as plotly writes its tick labels


def _localized_marks(text: str) -> str:
    """`text`, a number Python wrote ("." decimal, "," grouping, "-"), in the current
    language's marks, its minus a minus sign in every language."""
    text = text.replace("-", MINUS)
    code = _current.get()
    if code == DEFAULT_LANGUAGE:
        return text
    return text.translate(_marks(code))


@cache
def _marks(code: str) -> dict:
    from babel.numbers import get_decimal_symbol, get_group_symbol  # 15 ms: not at import

    return str.maketrans({".": get_decimal_symbol(code), ",": get_group_symbol(code)})


def significant(value: float, digits: int = 3) -> str:
    """`value` to `digits` significant digits, as f"{value:.3g}" writes it, in the current
    language's marks."""
    return formatted(value, f".{digits}g")


def percent(fraction: float, decimals: int = 0) -> str:
    """`fraction` (0.25) as a percentage in the current language ("25%", "25 %" in es and ru;
    "−3%")."""
    from babel.numbers import format_percent  # 15 ms: not at import (the CLI's start)

    pattern = "#,##0" + ("." + "0" * decimals if decimals > 0 else "") + "%"
    return format_percent(fraction, format=pattern, locale=_current.get(),
                          decimal_quantization=True).replace("-", MINUS)


def tokens(value: float, shown: str | None = None) -> str:
    """"N tokens" in the current language, N being `value` as the page writes it (`shown`,
    default number(value)), the noun in the form the language's grammar wants: Russian declines
    it one way after a fraction ("1,4 токена") and three ways after a whole number ("1 токен",
    "2 токена", "5 токенов"). The writer of a token count that stands alone (a caption, a
    list, a hover); a sentence that counts tokens inside it writes the noun itself, so that
    its translator can word the count with the rest of the sentence (Russian: "при {n}
    токенах", "токенов: {n}")."""
    shown = number(value) if shown is None else shown
    if plotly_separators()[0] in shown or "e" in shown:
        # TRANSLATORS: {fraction} is a number with decimals, e.g. 1.39.
        return gettext("{fraction} tokens").format(fraction=shown)
    return ngettext("{n} token", "{n} tokens", round(value)).format(n=shown)


def small_percent(fraction: float) -> str:
    """A share as a percentage that keeps small shares readable: "52%", "2.1%", "0.031%" (two
    significant digits below 10%), or "under 0.01%", in the current language."""
    if 100 * fraction < 0.01:
        return gettext("under {share}").format(share=percent(0.0001, 2))
    if 100 * fraction >= 10:
        return percent(fraction, 0)
    digits = f"{100 * fraction:.2g}"
    return percent(float(digits) / 100, len(digits.partition(".")[2]))


def plotly_separators(code: str | None = None) -> str:
    """plotly's layout.separators for the language: decimal mark, then thousands mark."""
    from babel.numbers import get_decimal_symbol, get_group_symbol  # 15 ms: not at import

    code = code or _current.get()
    return get_decimal_symbol(code) + get_group_symbol(code)


# plotly.js's own interface texts (the modebar's tooltips, the zoom hint), as plotly.js names
# them: translated through the chart config's `locales`, so no locale file has to be loaded.
PLOTLY_TEXTS = (
    N_("Download plot as a png"), N_("Download plot"), N_("Zoom"), N_("Pan"), N_("Box Select"),
    N_("Lasso Select"), N_("Zoom in"), N_("Zoom out"), N_("Autoscale"), N_("Reset axes"),
    N_("Reset view"), N_("Toggle Spike Lines"), N_("Show closest data on hover"),
    N_("Compare data on hover"), N_("Double-click to zoom back out"),
    N_("Double-click on legend to isolate one trace"),
)


def plotly_locale(code: str | None = None) -> dict:
    """Chart config entries that make plotly.js speak the language: {"locale", "locales"} with
    PLOTLY_TEXTS translated; {} for English."""
    code = code or _current.get()
    if code == DEFAULT_LANGUAGE:
        return {}
    catalog = translations(code)
    return {"locale": code,
            "locales": {code: {"dictionary": {t: catalog.gettext(t) for t in PLOTLY_TEXTS}}}}


def negotiate(accept_language: str | None) -> str | None:
    """The best of LANGUAGES for a browser's Accept-Language header, or None."""
    if not accept_language:
        return None
    weighted = []
    for part in accept_language.split(","):
        tag, _sep, params = part.strip().partition(";")
        quality = 1.0
        if params.strip().startswith("q="):
            try:
                quality = float(params.strip()[2:])
            except ValueError:
                quality = 0.0
        code = tag.strip().lower().split("-")[0]
        if code in LANGUAGES and quality > 0:
            weighted.append((quality, code))
    return max(weighted, key=lambda item: item[0])[1] if weighted else None


def glossary(code: str) -> list[dict]:
    """The chosen terms for `code`: rows of (english, term, stem) from its glossary.csv.

    `stem` is the part every inflected form shares (Russian declines nouns), which the tests look
    for in each translation of a message that uses the English term.
    """
    with open(LOCALE_DIR / code / "glossary.csv", encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))
