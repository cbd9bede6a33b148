"""Translations: every marked string has a Spanish and a Russian entry, the field's terms are the
glossary's, and a page opened with ?lang=es or ?lang=ru shows no string of the English catalog.

The strings are extracted from the code here with Babel (the same extraction `make messages`
runs), so a string added to a page without a translation fails this file.
"""

import ast
import re

import pytest
from babel.messages.extract import extract_from_dir
from babel.messages.pofile import read_po

from alibi_viz import i18n
from alibi_viz_app.testing import figures, run_app

ROOT = i18n.LOCALE_DIR.parents[1]
LANGS = [code for code in i18n.LANGUAGES if code != i18n.DEFAULT_LANGUAGE]
FIELD = re.compile(r"\{[^{}]*\}")  # a str.format placeholder
# Kept in English on purpose: names, code and units that read the same in every language.
ALLOW = {"ALiBi", "RoPE", "NoPE", "BLOOM", "MPT", "Falcon", "GPT-2", "alibi-viz", "CSV", "PNG",
         "NPY", "URL", "Hugging Face", "bf16", "fp16", "fp32", "KL", "bertviz"}


def extracted() -> dict:
    """msgid -> first location, for every string marked in alibi_viz_app/ and alibi_viz/."""
    found = {}
    for package in ("alibi_viz_app", "alibi_viz"):
        for filename, lineno, message, _comments, _context in extract_from_dir(
                ROOT / package, [("**.py", "python")]):
            found.setdefault(message, f"{package}/{filename}:{lineno}")
    return found


def catalog(code: str) -> dict:
    with open(i18n.catalog_path(code), "rb") as f:
        return {m.id: m for m in read_po(f, locale=code) if m.id}


@pytest.fixture(scope="module")
def messages():
    return extracted()


def test_no_code_rebinds_the_gettext_name():
    """`_` is gettext: a throwaway `a, _ = f()` in a function makes `_` local to the whole
    function, and every `_("...")` in it fails. No module that translates rebinds it."""
    offenders = []
    for path in [*(ROOT / "alibi_viz_app").rglob("*.py"), *(ROOT / "alibi_viz").rglob("*.py")]:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        uses = any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "_"
                   for n in ast.walk(tree))
        if not uses:
            continue
        offenders += [f"{path.name}:{n.lineno}" for n in ast.walk(tree)
                      if isinstance(n, ast.Name) and n.id == "_" and isinstance(n.ctx, ast.Store)]
    assert not offenders, offenders


@pytest.mark.parametrize("code", LANGS)
def test_every_string_has_a_translation(messages, code):
    """No marked string lacks an entry, and no entry is empty or fuzzy."""
    entries = catalog(code)
    missing = [f"{where}: {msg!r}" for msg, where in messages.items() if msg not in entries]
    empty = [repr(m.id) for m in entries.values()
             if m.id in messages and (m.fuzzy or not (all(m.string) if isinstance(m.string, tuple)
                                                      else m.string))]
    assert not missing, f"{len(missing)} strings missing from {code}: " + "\n".join(missing[:20])
    assert not empty, f"{len(empty)} fuzzy or empty {code} entries: " + "\n".join(empty[:20])


@pytest.mark.parametrize("code", LANGS)
def test_no_stale_entries(messages, code):
    """The catalog holds no entry whose string is gone from the code (run `make messages`)."""
    stale = [m.id for m in catalog(code).values() if m.id not in messages]
    assert not stale, stale[:20]


@pytest.mark.parametrize("code", LANGS)
def test_placeholders_survive_translation(code):
    """Each translation keeps exactly the {fields} of its English string."""
    bad = []
    for m in catalog(code).values():
        ids = m.id if isinstance(m.id, tuple) else (m.id,)
        strings = m.string if isinstance(m.string, tuple) else (m.string,)
        wanted = set(FIELD.findall(ids[0])) | set(FIELD.findall(ids[-1]))
        bad += [(ids[0], s) for s in strings if s and set(FIELD.findall(s)) != wanted]
    assert not bad, bad[:10]


@pytest.mark.parametrize("code", LANGS)
def test_translations_use_the_glossary_terms(code):
    """Wherever an English string uses a glossary term (bias, slope, head, ...), its translation
    uses the chosen term (checked by the stem every inflected form shares)."""
    terms = i18n.glossary(code)
    assert {"bias", "slope", "head", "length extrapolation"} <= {t["english"] for t in terms}
    off = []
    for m in catalog(code).values():
        english = m.id if isinstance(m.id, str) else m.id[0]
        string = m.string if isinstance(m.string, str) else m.string[0]
        if not string:
            continue
        english = FIELD.sub("", english)  # a placeholder's name ({slope}) is not a word shown
        for term in terms:
            if (re.search(rf"\b{re.escape(term['english'])}(e?s)?\b", english, re.I)
                    and term["stem"].lower() not in string.lower()):
                off.append(f"{term['english']} -> {term['term']}: {english!r} = {string!r}")
    assert not off, f"{len(off)} translations miss a glossary term:\n" + "\n".join(off[:20])


@pytest.mark.parametrize("code,term", [("es", "sesgo"), ("es", "pendiente"),
                                       ("es", "cabeza de atención"),
                                       ("es", "extrapolación de longitud"),
                                       ("ru", "смещение"), ("ru", "наклон"),
                                       ("ru", "голова внимания"), ("ru", "экстраполяция длины")])
def test_glossary_has_the_fields_terms(code, term):
    """The glossary's terms are the field's established ones (and those of the seeds)."""
    assert term in {t["term"] for t in i18n.glossary(code)}


# ---------------------------------------------------------------- what a page shows


def page_texts(at) -> list[str]:
    """Every piece of text a page shows: elements, widget labels, help and options, figure
    titles, axis titles, annotations, trace names and hover templates, table headers."""
    texts = []
    for kind in ("markdown", "caption", "title", "header", "subheader", "text", "warning", "info",
                 "error", "success", "latex", "code", "exception"):
        texts += [str(el.value) for el in at.get(kind)]
    for kind in ("button", "toggle", "checkbox", "selectbox", "radio", "multiselect", "slider",
                 "select_slider", "number_input", "text_input", "text_area", "download_button",
                 "expander", "tab", "metric", "segmented_control", "pills"):
        for el in at.get(kind):
            proto = el.proto
            for field in ("label", "help", "placeholder"):
                if getattr(proto, field, ""):
                    texts.append(getattr(proto, field))
            texts += [str(o) for o in getattr(el, "options", []) or []]
    for fig in figures(at):
        texts += list(_figure_texts(fig))
    for frame in [*at.dataframe, *at.table]:
        df = frame.value
        texts += [str(c) for c in df.columns] + [str(i) for i in df.index]
        texts += [v for col in df.columns for v in df[col].tolist() if isinstance(v, str)]
    return texts


def _figure_texts(node):
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("text", "name", "hovertemplate", "ticktext", "title") and isinstance(value, str):
                yield value.replace("<br>", " ")  # long titles are broken to fit the screen
            elif key == "ticktext" and isinstance(value, list):
                yield from (str(v) for v in value)
            else:
                yield from _figure_texts(value)
    elif isinstance(node, list):
        for value in node:
            yield from _figure_texts(value)


def english_fragments(code: str) -> list[str]:
    """Pieces of English catalog strings that must not show on a page in `code`: whole strings
    and, for templates, each literal run of 20+ characters between placeholders."""
    fragments = []
    for m in catalog(code).values():
        english = m.id if isinstance(m.id, str) else m.id[0]
        string = m.string if isinstance(m.string, str) else m.string[0]
        if not string or string == english or english in ALLOW:
            continue
        for piece in FIELD.split(english):
            piece = piece.strip(" .,:;()*_`-\n")
            if piece == english.strip(" .,:;()*_`-\n") and len(piece) >= 4 or len(piece) >= 20:
                fragments.append(piece)
    return fragments


def english_on_page(at, code: str) -> list[str]:
    texts = page_texts(at)
    shown = "\n".join(texts)
    whole = set(texts)
    found = []
    for piece in english_fragments(code):
        if piece in whole or (len(piece) >= 20 and piece in shown) or (
                len(piece) >= 4 and re.search(rf"(^|[\s*(]){re.escape(piece)}([\s.,:;)*]|$)", shown)
                and " " in piece):
            found.append(piece)
    return sorted(set(found))


PAGES = [("", {}), ("compare", {}), ("model_heads", {}), ("inspect_model", {}), ("extrapolation", {}),
         *[("lesson", {"step": str(step)}) for step in range(1, 10)]]


@pytest.mark.slow
@pytest.mark.parametrize("code", LANGS)
@pytest.mark.parametrize("path,params", PAGES, ids=[f"{p or 'bias'}{q.get('step', '')}"
                                                    for p, q in PAGES])
def test_page_shows_no_english(code, path, params):
    """A page opened with ?lang=<code> shows no string of the English catalog."""
    at = run_app(path, {**params, "lang": code})
    assert not at.exception, [e.value for e in at.exception]
    leftovers = english_on_page(at, code)
    assert not leftovers, f"English on /{path} in {code}: {leftovers[:15]}"


@pytest.mark.parametrize("code,expected", [("es", "Parámetro de URL ignorado"),
                                           ("ru", "Параметр URL проигнорирован")])
def test_bad_url_value_warns_in_the_chosen_language(code, expected):
    """A bad value in the URL is reported in the URL's language."""
    at = run_app("", {"heads": "many", "lang": code})
    texts = [w.value for w in at.warning]
    assert any(t.startswith(expected) for t in texts), texts
    assert not any("must be" in t for t in texts), texts


def test_bad_language_falls_back_to_english_with_a_warning():
    at = run_app("", {"lang": "xx"})
    assert not at.exception
    assert any("'lang'" in w.value for w in at.warning)
    assert at.selectbox(key="app_lang").value == "en"


def test_language_switch_writes_the_url():
    """The sidebar switch puts the language in the URL (English, the default, leaves it out)."""
    at = run_app("")
    at.selectbox(key="app_lang").set_value("ru").run()
    assert at.query_params["lang"] == "ru"
    # AppTest formats the other widgets' values in this thread for the next run: in Russian.
    i18n.set_language("ru")
    try:
        at.selectbox(key="app_lang").set_value("en").run()
    finally:
        i18n.set_language("en")
    assert "lang" not in at.query_params


@pytest.mark.parametrize("code,expected", [("en", "1,234.50"), ("es", "1.234,50"),
                                           ("ru", "1\N{NO-BREAK SPACE}234,50")])
def test_numbers_follow_the_language(code, expected):
    """Decimal comma and grouping from CLDR (Babel), not hand-written."""
    i18n.set_language(code)
    try:
        assert i18n.number(1234.5, 2) == expected
    finally:
        i18n.set_language("en")


@pytest.mark.parametrize("header,expected", [("ru-RU,ru;q=0.9,en;q=0.8", "ru"),
                                             ("de-DE,es;q=0.5", "es"), ("de-DE", None),
                                             ("en;q=0.2,es;q=0.9", "es"), ("", None)])
def test_accept_language_picks_a_default(header, expected):
    assert i18n.negotiate(header) == expected


def test_unknown_language_is_a_typed_error():
    with pytest.raises(i18n.UnknownLanguage):
        i18n.set_language("xx")


@pytest.mark.parametrize("code", list(i18n.LANGUAGES))
def test_numbers_are_what_cldr_writes(code):
    """i18n.number writes what Babel's format_decimal writes for CLDR's "#,##0.###" and
    "#,##0.00" patterns (it formats them itself, much faster), on values with no rounding tie,
    except that its minus is the minus sign (CLDR's is a hyphen in these languages)."""
    from babel.numbers import format_decimal

    def cldr(value, pattern):
        return format_decimal(value, pattern, locale=code).replace("-", "\u2212")

    values = [0, 1, -3, 0.5, 2.0, 0.0039, 12.3456, 999.9996, 1234.5, 65_536, -12_345.678, 3.2e7]
    i18n.set_language(code)
    try:
        for value in values:
            assert i18n.number(value) == cldr(value, "#,##0.###"), value
            assert i18n.number(value, 2) == cldr(value, "#,##0.00"), value
            assert i18n.number(value, 0, grouping=False) == cldr(value, "0"), value
    finally:
        i18n.set_language("en")


def test_small_percent_keeps_small_shares_readable():
    """52%, 2.1%, 0.031%, and 'under 0.01%' for less, with the language's marks."""
    from alibi_viz.i18n import small_percent

    i18n.set_language("en")
    assert [small_percent(x) for x in (0.52, 0.021, 0.00031, 0.0000001)] == [
        "52%", "2.1%", "0.031%", "under 0.01%"]
    i18n.set_language("es")
    assert small_percent(0.021) == i18n.percent(0.021, 1) and "," in small_percent(0.021)
    i18n.set_language("en")


@pytest.mark.parametrize("code", LANGS)
def test_the_lessons_glossary_uses_the_catalogs_terms(code):
    """The glossary the lesson shows names each term as the language's glossary.csv does."""
    from alibi_viz_app.glossary import TERMS, glossary_rows

    chosen = {row["english"]: row["term"] for row in i18n.glossary(code)}
    i18n.set_language(code)
    try:
        shown = [row["term"] for row in glossary_rows()]
    finally:
        i18n.set_language("en")
    assert shown == [chosen[english] for english, _msgid, _meaning in TERMS]


def entry(code: str, start: str) -> str:
    """The translation of the one msgid that starts with `start`."""
    found = [m.string for mid, m in catalog(code).items() if isinstance(mid, str)
             and mid.startswith(start)]
    assert len(found) == 1, (start, len(found))
    return found[0]


def test_spanish_half_life_says_a_higher_score_makes_up_for_distance():
    """es, Lesson step 4: a higher content score *compensates* s/m tokens of distance (it is
    not "like being s/m tokens farther", the opposite)."""
    text = entry("es", "Suppose every key had the same content score.")
    assert "compensa s/m tokens más de distancia" in text and "equivale a s/m" not in text


def test_russian_calls_dashed_lines_dashed():
    """ru: dashed lines are штриховые (пунктир is dotted)."""
    assert "штрих" in entry("ru", "red dashes: training length")
    assert "штриховые" in entry("ru", "The input ({n} tokens) is longer than the training length")


def test_russian_key_result_does_not_make_2L_appendix_b():
    """ru, the key result: appendix B is the sliding-window evaluation; it says nothing about
    "best near twice the training length" (both forms of the key result, and the paper's row
    they end with)."""
    texts = [m.string for mid, m in catalog("ru").items() if isinstance(mid, str)
             and mid.startswith(("**The key result.**", "In the paper's sliding-window"))]
    assert len(texts) == 3
    assert all("удвоенной" not in text for text in texts)
    assert any("приложение B" in text for text in texts)


USTED = ("haga clic", "haga que", "elija", "escriba", "pegue", "ejecute", "copie", "compruebe",
         "pulse", "pase el cursor", "Su propio texto", "vuelva a", "Guarde", "Pruebe")


def test_spanish_speaks_to_the_reader_as_tu():
    """The Spanish catalog addresses the reader one way, tú ("elige", "pasa el cursor", "tu
    propio texto"), never usted ("elija", "pase el cursor", "su propio texto")."""
    found = [(form, mid) for mid, m in catalog("es").items() if isinstance(m.string, str)
             for form in USTED if re.search(rf"\b{form}\b", m.string)]
    assert not found, found[:5]


@pytest.mark.parametrize("code", list(i18n.LANGUAGES))
def test_negative_numbers_are_written_with_the_minus_sign(code):
    """"−5", "−0,5", "−10 %": the minus sign that plotly's tick labels and the pages' signed
    changes use, never a hyphen beside them."""
    i18n.set_language(code)
    try:
        written = [i18n.number(-5.0), i18n.number(-0.5, 1), i18n.significant(-0.00391),
                   i18n.formatted(-2.5, "+.2f"), i18n.percent(-0.1)]
    finally:
        i18n.set_language("en")
    assert all(text.startswith("\u2212") and "-" not in text for text in written), written


# Placeholders whose value is a translated word in the nominative (a schedule's, a mode's, a
# text's, a verdict's name): in Russian they cannot follow a preposition that governs another case
# ("совпадает с официальная"), so such a sentence is rephrased or translated whole per value.
NOMINATIVE_FIELDS = ("other", "name", "mode", "schedule", "text", "sweep", "chosen", "verdict",
                     "positional", "position", "reduction", "method", "label")
CASE_PREPOSITIONS = ("с", "со", "для", "на", "в", "во", "о", "об", "по", "от", "до", "из", "у",
                     "к", "без", "при", "между", "против", "вместо", "после")
PREPOSITION = r"\b(?:" + "|".join(CASE_PREPOSITIONS) + r")\s+"
RU_NOMINATIVE_ADJECTIVE = re.compile(PREPOSITION + r"\w+(?:ая|ый|ий|ой)\b", re.IGNORECASE)


def test_russian_puts_no_nominative_field_after_a_preposition():
    """No Russian entry substitutes a nominative name right after a preposition that governs
    another case: "с {other}" read "совпадает с официальная"."""
    wrong = [(mid, m.string) for mid, m in catalog("ru").items() if isinstance(m.string, str)
             for field in NOMINATIVE_FIELDS
             if re.search(PREPOSITION + r"\{" + field + r"\}", m.string)]
    assert not wrong, wrong


def test_russian_schedule_labels_agree_for_every_pair_of_schedules():
    """The slope chart's "{name} (same as {other})" rendered in Russian for every head count from
    1 to 64 (every pair of schedules that coincide): each coinciding label is said, and none puts a
    nominative adjective after a preposition ("с официальная")."""
    from alibi_viz.figures.bias import slope_schedule_figure

    i18n.set_language("ru")
    try:
        names = {trace.name for n in range(1, 65) for trace in slope_schedule_figure(n).data}
    finally:
        i18n.set_language("en")
    same = {name for name in names if "(" in name}
    assert {"геометрическая (то же, что официальная)"} <= same, sorted(same)
    assert not [name for name in names if RU_NOMINATIVE_ADJECTIVE.search(name)], sorted(names)


@pytest.mark.parametrize("code", LANGS)
def test_model_slopes_legend_names_each_schedule_whole(code):
    """The model-slopes chart's schedule lines are named by whole translated phrases whose
    adjective agrees with its noun ("официальная схема", "esquema geométrico"), never by the
    code names official/geometric/mpt (in the legend or the hover)."""
    from alibi_viz.figures.heads import model_slopes_figure

    i18n.set_language(code)
    try:
        fig = model_slopes_figure([0.5, 0.25, 0.125, 0.0625])
    finally:
        i18n.set_language("en")
    lines = [t for t in fig.data if t.mode == "lines"]
    shown = " ".join(t.name + t.hovertemplate for t in lines)
    assert len(lines) == 3 and not re.search(r"\b(official|geometric|mpt)\b", shown), shown
    expected = {"ru": {"официальная схема", "геометрическая схема", "схема MPT"},
                "es": {"esquema oficial", "esquema geométrico", "esquema de MPT"}}[code]
    assert {t.name for t in lines} == expected


# Russian words that take the genitive plural of a counted noun whatever the number.
GENITIVE_BEFORE = re.compile(r"(?:от|до|с|после|из|около|дальше|больше|меньше|более|менее|"
                             r"пределах|расстоянии|окнах по|всех)\s*$", re.IGNORECASE)


def russian_count_errors(text: str) -> list[str]:
    """Each "<number> токен..." of `text` whose noun is not the form babel's Russian plural
    rule asks for (1 токен, 2 токена, 5 токенов), unless a word before it governs the
    genitive; and each adjectival model label after "у", where it would need the genitive."""
    from babel import Locale

    forms = {"one": "токен", "few": "токена", "many": "токенов", "other": "токена"}
    errors = [hit[0] for hit in re.finditer(r"у (синусоидальное|обучаемое)\b", text)]
    for hit in re.finditer(r"(\d[\d\u00a0 ]*)\s(токен(?:а|ов)?)\b", text):
        value = int(re.sub(r"\D", "", hit[1]))
        if GENITIVE_BEFORE.search(text[:hit.start()]):
            continue
        if hit[2] != forms[Locale("ru").plural_form(value)]:
            errors.append(hit[0])
    return errors


def test_the_russian_check_catches_the_faults_it_looks_for():
    assert russian_count_errors("при 32 токенов") == ["32 токенов"]
    assert russian_count_errors("самая низкая перплексия у обучаемое") == ["у обучаемое"]
    assert not russian_count_errors("от 128 до 1 024 токенов; 21 токен; 1 024 токена")


def test_russian_result_sentences_agree_with_their_numbers_and_labels():
    """The sentences written from the shipped results, in Russian: counts in the form their
    number needs, model labels never where Russian would decline them."""
    from alibi_viz import assets
    from alibi_viz.results import evaluation

    i18n.set_language("ru")
    try:
        texts = []
        for kind in ("python", "en", "es", "ru"):
            results = assets.load_extrapolation_results(kind)
            texts.append(evaluation.key_result(results) or "")
            texts.append(evaluation.seeds_sentence(results))
            texts += evaluation.in_distribution_ranking(results)
            for protocol in evaluation.PROTOCOLS:
                texts += evaluation.extrapolation_summary(results, protocol)
        errors = [e for text in texts for e in russian_count_errors(text)]
    finally:
        i18n.set_language("en")
    assert not errors, errors
