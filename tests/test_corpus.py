"""The four-kind corpus: the shipped held-out text against the training manifest, the HTML
extraction, the cleaning, shares and split rules, the manifest comparison, and the readers
(held-out text, examples, a built stream) in alibi_viz.data."""

import json
import shutil

import numpy as np
import pytest

from alibi_viz import data
from alibi_viz.errors import AlibiVizError
from experiments import corpus
from experiments.corpus import Document


@pytest.fixture(scope="module")
def manifest():
    return data.corpus_manifest()


def training_rows(manifest):
    return [row for rows in manifest["documents"].values() for row in rows if row[1] == "train"]


# ----------------------------------------------------------------------------- shipped held-out text

def test_heldout_text_has_no_document_of_the_training_part(manifest):
    """No shipped held-out document is a training document (by sha256 of its text, over all
    kinds), and none has the name of one: a page's translation is never trained on either."""
    train_shas = {row[3] for row in training_rows(manifest)}
    train_names = {row[0] for row in training_rows(manifest)}
    for kind in data.CORPUS_KINDS:
        docs = data.heldout_documents(kind)
        assert docs
        for doc in docs:
            assert doc.sha256 not in train_shas, (kind, doc.name)
            assert doc.name not in train_names, (kind, doc.name)
            assert data.is_valid_name(doc.name), (kind, doc.name)


def test_heldout_paragraphs_are_not_in_training_documents(manifest):
    """Paragraphs long enough to be deduplicated (MIN_REPEAT_CHARS) are not shared between the
    held-out prose and the training streams' documents of the same kind, checked on the local
    build when there is one."""
    root = data.corpus_build_dir()
    if not (root / "train.jsonl").is_file():
        pytest.skip("no local build of the corpus (make corpus)")
    train = {lang: set() for lang in data.PROSE_LANGS}
    with open(root / "train.jsonl", encoding="utf-8") as f:
        for line in f:
            doc = json.loads(line)
            if doc["kind"] in train:
                train[doc["kind"]].update(p for p in data.paragraphs(doc["text"])
                                          if len(p) >= corpus.MIN_REPEAT_CHARS)
    for lang in data.PROSE_LANGS:
        for doc in data.heldout_documents(lang):
            assert not train[lang] & set(data.paragraphs(doc.text)), (lang, doc.name)


def test_heldout_files_are_the_ones_the_manifest_records(manifest):
    """Each kind's held-out file has the manifest's documents in its order (digest of their
    sha256s) and a few hundred kB; the prose kinds hold the same pages."""
    for kind in data.CORPUS_KINDS:
        docs = data.heldout_documents(kind)
        record = manifest["kinds"][kind]["heldout"]
        assert [d.name for d in docs] == record["names"]
        assert data.stream_digest(d.sha256 for d in docs) == record["sha256"]
        size = sum(len(d.text.encode()) for d in docs)
        assert size == record["bytes"] and 150_000 < size < 600_000
    names = [[d.name for d in data.heldout_documents(lang)] for lang in data.PROSE_LANGS]
    assert names[0] == names[1] == names[2]


def test_python_heldout_files_follow_the_stdlib_rules():
    """The Python held-out files are stdlib sources (no tests, no data tables) of validation."""
    for doc in data.heldout_documents("python"):
        assert data.is_stdlib_source(doc.name) and data.is_valid_name(doc.name)


def test_licences_ship_beside_the_heldout_text(manifest):
    """Every licence of a package in the manifest has its text in assets/corpus/LICENSES, and
    the README names every package with its version and licence."""
    shipped = {p.stem for p in (data.CORPUS_ASSETS / "LICENSES").glob("*.txt")}
    readme = (data.CORPUS_ASSETS / "README.md").read_text(encoding="utf-8")
    for name, pkg in manifest["packages"].items():
        assert pkg["licence"].replace("-or-later", "") in shipped, name
        assert name in readme and pkg["version"] in readme and pkg["licence"] in readme


def test_manifest_holds_the_kinds_in_their_shares(manifest):
    """Each split's bytes are split between the kinds as SHARES says (within one document),
    and the streams are the sum of the kinds' parts."""
    for split in ("train", "valid"):
        sizes = {kind: manifest["kinds"][kind][split]["bytes"] for kind in data.CORPUS_KINDS}
        total = sum(sizes.values())
        assert total == manifest["streams"][split]["bytes"]
        for kind, size in sizes.items():
            assert abs(size / total - data.SHARES[kind]) < 0.01, (split, kind, sizes)
        rows = [r for rs in manifest["documents"].values() for r in rs if r[1] == split]
        assert len(rows) == manifest["streams"][split]["documents"]


def test_manifest_pins_every_package_of_the_sources(manifest):
    """The manifest names each package of corpus.PACKAGES at its pinned version, and each
    kind's sources come from those packages."""
    assert {p.name: p.version for p in corpus.PACKAGES} == {
        name: pkg["version"] for name, pkg in manifest["packages"].items()}
    for kind in data.CORPUS_KINDS:
        assert {s["package"] for s in manifest["kinds"][kind]["sources"]} <= set(
            manifest["packages"])


# ----------------------------------------------------------------------------- readers in data

def test_heldout_ids_are_the_documents_with_eos_between():
    """heldout_ids is the held-out bytes as ids, eos after each document; max_tokens cuts it."""
    docs = data.heldout_documents("ru")
    ids = data.heldout_ids("ru")
    first = data.bytes_to_ids(docs[0].text.encode())
    np.testing.assert_array_equal(ids[: first.size], first)
    assert ids[first.size] == data.EOS_ID
    assert ids.size == sum(len(d.text.encode()) + 1 for d in docs)
    assert data.heldout_ids("ru", max_tokens=100).size == 100


def test_unknown_kind_is_refused():
    with pytest.raises(AlibiVizError, match="kind must be one of"):
        data.heldout_documents("fr")
    with pytest.raises(AlibiVizError, match="lang must be one of"):
        data.prose_example("python")


@pytest.mark.parametrize("lang", data.PROSE_LANGS)
def test_example_texts_per_language_come_from_the_heldout_text(lang):
    """example_texts(lang): short prose in that language, a short function, long prose and a
    long module, each a piece of the shipped held-out text."""
    examples = data.example_texts(lang)
    assert list(examples) == ["Prose (short)", "Code (short)", "Manual pages (long, held out)",
                              "Python module (long, held out)"]
    prose, code = examples["Prose (short)"], examples["Code (short)"]
    low, high = data.PROSE_EXAMPLE_CHARS
    assert low <= len(prose) <= high
    assert any(prose in d.text for d in data.heldout_documents(lang))
    assert any(code in d.text for d in data.heldout_documents("python"))
    assert code.startswith("def ") and compile(code, "example", "exec")
    long_prose = examples["Manual pages (long, held out)"]
    assert len(long_prose) > 4000
    assert any(d.text.startswith(long_prose) for d in data.heldout_documents(lang))
    cyrillic = sum("\u0400" <= c <= "\u04ff" for c in prose + long_prose)
    assert (cyrillic > 100) == (lang == "ru")


def test_short_prose_examples_are_one_paragraph_in_three_languages():
    """The three short prose examples are the same paragraph of the same held-out page."""
    found = data.prose_examples()
    docs = {lang: data.heldout_documents(lang) for lang in data.PROSE_LANGS}
    index = {lang: next(i for i, d in enumerate(docs[lang]) if found[lang] in d.text)
             for lang in data.PROSE_LANGS}
    assert len(set(index.values())) == 1
    positions = {data.paragraphs(docs[lang][index[lang]].text).index(found[lang])
                 for lang in data.PROSE_LANGS}
    assert len(positions) == 1


def tiny_build(tmp_path, texts):
    """A build folder with one train stream of `texts`, and the manifest entry it matches."""
    with open(tmp_path / "train.jsonl", "w", encoding="utf-8") as f:
        for text in texts:
            f.write(json.dumps({"kind": "en", "name": text[:3], "text": text}) + "\n")
    digest = data.stream_digest(Document("en", "x", "p", t).sha256 for t in texts)
    return {"streams": {"train": {"sha256": digest}}}


def test_mixture_ids_read_a_build_that_matches_the_manifest(tmp_path, monkeypatch):
    """A build whose documents match the manifest is read as one stream, eos between documents."""
    manifest = tiny_build(tmp_path, ["año\n", "мама\n"])
    monkeypatch.setattr(data, "corpus_manifest", lambda: manifest)
    ids = data.mixture_ids("train", root=tmp_path)
    expected = np.concatenate([data.bytes_to_ids("año\n".encode()), [data.EOS_ID],
                               data.bytes_to_ids("мама\n".encode()), [data.EOS_ID]])
    np.testing.assert_array_equal(ids, expected)


def test_a_build_that_differs_from_the_manifest_is_refused(tmp_path, monkeypatch):
    """A changed document, or a missing build, raises an error that says to run make corpus."""
    manifest = tiny_build(tmp_path, ["one\n", "two\n"])
    tiny_build(tmp_path, ["one\n", "2\n"])
    monkeypatch.setattr(data, "corpus_manifest", lambda: manifest)
    with pytest.raises(AlibiVizError, match="make corpus"):
        data.mixture_ids("train", root=tmp_path)
    with pytest.raises(AlibiVizError, match="make corpus"):
        data.mixture_ids("valid", root=tmp_path)


# ----------------------------------------------------------------------------- HTML -> prose

PAGE = """<html><head><title>T</title><script>var x = 1;</script></head><body>
<div class="navheader"><table><tr><td><a href="p.html">Prev</a></td></tr></table></div>
<header>Help 7.4</header><aside><div class="contents-treeview">Contents</div></aside>
<div class="toc"><dl><dt>1. Intro</dt></dl></div>
<h2 class="title">1. Blur   filters</h2>
<p>This is a set of filters
   that blur images.</p>
<div class="figure"><p class="title">Figure 1. Demo</p><img src="a.png" alt="Demo"/></div>
<pre class="programlisting">def f(): pass</pre>
<div class="note"><table summary="Note"><tr><th>Note</th></tr>
<tr><td><p>Keep a copy of the image.</p></td></tr></table></div>
<table><tr><td>Ctrl+S</td><td>Save</td></tr></table>
<p>Choose <span class="switchinline"><span hidden="true" id="MACx" class="MAC">Preferences</span><span
hidden="true" id="defaultx">Tools - Options</span></span> - Load/Save.</p>
<ul><li>first</li><li>second<br/>line</li></ul>
<div class="navfooter"><a class="reportbug" href="#">Report a bug</a></div>
<footer><p>Help content debug info</p></footer>
</body></html>"""


def test_html_to_prose_keeps_running_text_only():
    """Paragraphs, headings, list items and a note's text stay, one paragraph each with its
    whitespace collapsed; navigation, table of contents, figure, code listing, data table,
    hidden variants and footer go (LibreOffice's default variant stays)."""
    assert corpus.html_to_prose(PAGE) == (
        "1. Blur filters\n\nThis is a set of filters that blur images.\n\n"
        "Keep a copy of the image.\n\nChoose Tools - Options - Load/Save.\n\n"
        "first\n\nsecond\n\nline\n")


def test_html_to_prose_survives_stray_and_unclosed_tags():
    """Unclosed elements and stray end tags neither lose nor leak text."""
    assert corpus.html_to_prose("<p>one<div>two</span></div><pre>x<p>three") == "one\n\ntwo\n"
    assert corpus.html_to_prose("<body></body>") == ""


# ----------------------------------------------------------------------------- rules

def docs_of(kind, *items):
    return [Document(kind, name, "pkg", text) for name, text in items]


def test_untranslated_and_repeated_paragraphs_are_dropped():
    """Russian paragraphs without Cyrillic and Spanish ones in English go; a paragraph met
    before is kept once, on the training-side page, never on a validation-side one."""
    valid = next(n for n in (f"p{i}.html" for i in range(100)) if data.is_valid_name(n))
    train = next(n for n in (f"p{i}.html" for i in range(100)) if not data.is_valid_name(n))
    shared = "This paragraph is embedded in many pages of the manual."
    english = "Select the layer and click on the button to apply the filter."
    docs = {
        "python": [],
        "en": docs_of("en", (valid, f"{shared}\n\nOwn text of the valid page, long enough.\n"),
                      (train, f"{shared}\n\nShort\n")),
        "es": docs_of("es", (train, f"{english}\n\nSeleccione la capa y pulse el botón de la "
                                    "derecha.\n")),
        "ru": docs_of("ru", (train, f"{english}\n\nВыберите слой и нажмите кнопку справа.\n")),
    }
    cleaned = corpus.clean_prose(docs)
    by_name = {d.name: d.text for d in cleaned["en"]}
    assert by_name[train] == f"{shared}\n\nShort\n"
    assert by_name[valid] == "Own text of the valid page, long enough.\n"
    assert cleaned["es"][0].text.startswith("Seleccione") and english not in cleaned["es"][0].text
    assert cleaned["ru"][0].text == "Выберите слой и нажмите кнопку справа.\n"


def test_shares_cut_the_larger_kinds_to_the_scarcest():
    """Within a split the scarcest kind is used whole and the others get the same bytes (by
    whole documents, never more); the rest is spare. Each document's split is its name's."""
    names = [f"doc{i}" for i in range(400)]
    docs = {kind: docs_of(kind, *((n, "x" * (300 + 10 * i + 100 * k)) for i, n in enumerate(names)))
            for k, kind in enumerate(data.CORPUS_KINDS)}
    docs["es"] = docs["es"][:200]  # the scarcest
    parts = corpus.assign_parts(docs)
    for split in ("train", "valid"):
        sizes = {k: sum(d.nbytes for d in parts[k][split]) for k in data.CORPUS_KINDS}
        assert sizes["es"] == sum(d.nbytes for d in docs["es"]
                                  if data.is_valid_name(d.name) == (split == "valid"))
        for kind in data.CORPUS_KINDS:
            assert 0.97 * sizes["es"] <= sizes[kind] <= sizes["es"], (split, sizes)
            assert all(data.is_valid_name(d.name) == (split == "valid") for d in parts[kind][split])


def test_interleaved_stream_keeps_the_shares_from_the_start():
    """Every prefix of the interleaved stream holds each kind within a document of its share."""
    by_kind = {kind: docs_of(kind, *((f"{kind}{i}", "y" * 1000) for i in range(50)))
               for kind in data.CORPUS_KINDS}
    stream = data.interleave(by_kind)
    assert len(stream) == 200
    for cut in (8, 40, 120):
        counts = {k: sum(d.kind == k for d in stream[:cut]) for k in data.CORPUS_KINDS}
        assert max(counts.values()) - min(counts.values()) <= 1


def test_compare_names_what_differs(manifest):
    """compare says nothing for the same manifest, and names a moved package, a changed
    document and a changed stream."""
    assert corpus.compare(manifest, manifest) == []
    other = json.loads(json.dumps(manifest))
    other["packages"]["gimp-help-ru"]["version"] = "2.10.36-1"
    row = other["documents"]["ru"][0]
    row[3] = "0" * 64
    other["streams"]["train"]["sha256"] = "0" * 64
    problems = "\n".join(corpus.compare(manifest, other))
    assert "gimp-help-ru: 2.10.36-1 instead of 2.10.34-2" in problems
    assert f"ru: 1 changed document(s), e.g. {row[0]}" in problems
    assert "the train stream differs" in problems


def test_a_missing_package_says_what_to_do(monkeypatch, tmp_path):
    """Without apt's package lists the error says to run apt-get update; with another version
    in the archive it names both versions and where to find the pinned one."""
    class Done:
        def __init__(self, stdout="", returncode=100):
            self.stdout, self.stderr, self.returncode = stdout, "E: not found", returncode

    pkg = corpus.PACKAGES[0]
    monkeypatch.setattr(corpus, "_run", lambda cmd, cwd=None: Done())
    with pytest.raises(corpus.CorpusError, match="apt-get update"):
        corpus.fetch(pkg, tmp_path)
    monkeypatch.setattr(corpus, "_run", lambda cmd, cwd=None: Done("  Candidate: 9.9-1\n"))
    with pytest.raises(corpus.CorpusError, match=r"offers libpython3.11-minimal 9\.9-1.*snapshot"):
        corpus.fetch(pkg, tmp_path)


@pytest.mark.skipif(shutil.which("dpkg-deb") is None, reason="dpkg-deb (Debian) is missing")
def test_local_build_matches_the_manifest():
    """The local build (make corpus), when there is one, is the corpus of the manifest."""
    root = data.corpus_build_dir()
    if not (root / "train.jsonl").is_file():
        pytest.skip("no local build of the corpus (make corpus)")
    assert corpus.check_build(root) == []
