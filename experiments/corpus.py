"""Build the training corpus from pinned Debian packages, and check a build against its manifest.

    python -m experiments.corpus build            fetch, unpack, extract, split; compare to the manifest
    python -m experiments.corpus build --update   the same, then rewrite the manifest and held-out text
    python -m experiments.corpus check            compare the local build to the manifest (quick)

What the corpus is and why (sources, licences, shares, split) is said once, in `alibi_viz.data`;
this module is the machinery. `make corpus` runs `build` (and `apt-get update` first when it
runs as root on a machine without package lists).

Packages are fetched with `apt-get download NAME=VERSION` (no root, nothing installed: the GIMP
manual packages depend on a web browser, and the Python ones would upgrade the system's Python)
and the files the corpus reads (HTML pages, .py files, licences; not the manual's 50 MB of
images) are taken out of `dpkg-deb --fsys-tarfile` into the build folder (`corpus/` at the top
of the checkout, or $ALIBI_VIZ_CORPUS_DIR; about 300 MB):

    corpus/debs/*.deb                the packages as downloaded (a .deb put here by hand is used)
    corpus/packages/<name>/          the files read from each package
    corpus/train.jsonl, valid.jsonl  the two streams, {"kind", "name", "sha256", "text"} a line

HTML is turned into prose with Python's own `html.parser` (`html_to_prose`): navigation bars,
tables of contents, the index, code listings, figures, data tables and bibliography entries
are dropped; every block element (paragraph, heading, list item, ...) becomes one paragraph,
its whitespace collapsed, paragraphs separated by a blank line.

The shipped record, `assets/corpus/`: manifest.json (every package with version and sha256,
every document with its part, size and sha256, the shares and rules), heldout/<kind>.jsonl
(the held-out text the evaluation and the app read) and LICENSES/. `build` rebuilds the same
corpus from the same package versions and fails, saying what differs, when it does not.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

from alibi_viz import data
from alibi_viz.errors import AlibiVizError

EXTRACTOR_VERSION = 1  # bump when html_to_prose or the document rules change what they give
MIN_DOCUMENT_BYTES = 256  # shorter documents (empty __init__.py, a page of links) are left out
HELDOUT_BYTES = 256_000  # shipped held-out text per kind (prose: of English; es/ru same pages)
MIN_REPEAT_CHARS = 32  # prose paragraphs this long are kept once per kind (see clean_prose)


@dataclass(frozen=True)
class Package:
    name: str
    version: str
    licence: str  # SPDX identifier of what we use from it


# Debian 12 (bookworm). gimp-help is one upstream release in all three languages (a parallel
# text), libreoffice-help too; libpython3.11-{minimal,stdlib} hold the standard library's .py.
LIBREOFFICE = "4:7.4.7-1+deb12u14"
PACKAGES = (
    Package("libpython3.11-minimal", "3.11.2-6+deb12u9", "PSF-2.0"),
    Package("libpython3.11-stdlib", "3.11.2-6+deb12u9", "PSF-2.0"),
    Package("gimp-help-en", "2.10.34-2", "GFDL-1.2-or-later"),
    Package("gimp-help-es", "2.10.34-2", "GFDL-1.2-or-later"),
    Package("gimp-help-ru", "2.10.34-2", "GFDL-1.2-or-later"),
    Package("libreoffice-help-en-us", LIBREOFFICE, "MPL-2.0"),
    Package("libreoffice-help-es", LIBREOFFICE, "MPL-2.0"),
    Package("libreoffice-help-ru", LIBREOFFICE, "MPL-2.0"),
)
SNAPSHOT_SOURCES = {"libpython3.11": "python3.11", "gimp-help": "gimp-help",
                    "libreoffice-help": "libreoffice"}  # package prefix -> Debian source name


@dataclass(frozen=True)
class Source:
    """Where some documents of one kind are, inside an unpacked package."""

    prefix: str  # put before each name: the same in every language, so pages pair up
    package: str
    root: str  # folder inside the package; names are paths relative to it
    pattern: str  # glob under root
    fmt: str  # "python" (source as it is) or "html" (html_to_prose)


def _manuals(lang: str, libreoffice_lang: str) -> tuple[Source, ...]:
    return (Source("gimp/", f"gimp-help-{lang}", f"usr/share/gimp/2.0/help/{lang}", "*.html",
                   "html"),
            Source("libreoffice/", f"libreoffice-help-{libreoffice_lang.lower()}",
                   f"usr/share/libreoffice/help/{libreoffice_lang}", "**/*.html", "html"))


SOURCES = {
    # no prefix: the same names (and so the same split) as the shipped models' corpus
    "python": tuple(Source("", pkg, "usr/lib/python3.11", "**/*.py", "python")
                    for pkg in ("libpython3.11-minimal", "libpython3.11-stdlib")),
    "en": _manuals("en", "en-US"),
    "es": _manuals("es", "es"),
    "ru": _manuals("ru", "ru"),
}
LICENCE_FILES = {  # shipped beside the held-out text: name -> (package or None, path)
    "PSF-2.0.txt": ("libpython3.11-stdlib", "usr/lib/python3.11/LICENSE.txt"),
    "GFDL-1.2.txt": (None, "/usr/share/common-licenses/GFDL-1.2"),  # Debian's base-files
    "MPL-2.0.txt": (None, "/usr/share/common-licenses/MPL-2.0"),
    "Apache-2.0.txt": (None, "/usr/share/common-licenses/Apache-2.0"),  # parts of LibreOffice's
}


class CorpusError(AlibiVizError):
    """The corpus cannot be built, or a build differs from the shipped manifest."""


build_dir = data.corpus_build_dir


def sha256(payload: bytes) -> str:
    return hashlib.sha256(payload).hexdigest()


# ----------------------------------------------------------------------------- HTML -> prose

VOID_TAGS = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param",
             "source", "track", "wbr"}
BLOCK_TAGS = {"address", "article", "blockquote", "br", "caption", "dd", "div", "dl", "dt",
              "footer", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "li", "nav", "ol",
              "p", "section", "table", "td", "th", "tr", "ul"}
SKIP_TAGS = {"head", "script", "style", "noscript", "header", "footer", "aside", "nav", "form",
             "button", "label", "select", "textarea", "pre", "table", "svg", "math"}
# Classes of what is not running prose, from DocBook XSL (the GIMP manual) and LibreOffice's
# help, checked on both in all three languages
SKIP_CLASSES = {
    "navheader", "navfooter", "reportbug",  # navigation bars and their links
    "toc", "list-of-figures", "list-of-tables", "list-of-examples", "list-of-procedures",
    "list-of-equations", "index", "indexdiv", "indexterm",  # tables of contents, the index
    "programlisting", "screen", "synopsis", "literallayout", "example",  # code listings
    "figure", "informalfigure", "mediaobject", "inlinemediaobject", "equation",
    "informalequation", "table", "informaltable",  # pictures, formulas, data tables
    "bibliography", "bibliodiv", "biblioentry", "legalnotice", "revhistory",
    "bascode", "pycode", "smathcode", "codeintable", "relatedtopics", "noteicon", "debug",
}
ADMONITIONS = {"note", "tip", "warning", "caution", "important"}  # a layout table around prose


class _ProseParser(HTMLParser):
    """Collects the paragraphs of running text of one HTML page (see html_to_prose)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.paragraphs: list[str] = []
        self._words: list[str] = []
        self._open: list[tuple[str, bool, bool]] = []  # (tag, starts a skip, is an admonition)
        self._skip = 0  # skipped elements open around the current position (0: keep text)

    def _flush(self):
        text = " ".join("".join(self._words).split())
        if text:
            self.paragraphs.append(text)
        self._words = []

    def handle_starttag(self, tag, attrs):
        if tag in VOID_TAGS:
            if tag in ("br", "hr") and not self._skip:
                self._flush()
            return
        attrs = dict(attrs)
        classes = set((attrs.get("class") or "").split())
        # LibreOffice writes one hidden variant per system or module and unhides one with
        # JavaScript; without it the one shown is the variant whose id starts "default"
        hidden = "hidden" in attrs and not (attrs.get("id") or "").startswith("default")
        in_admonition = any(entry[2] for entry in self._open)
        admonition = bool(classes & ADMONITIONS)
        layout = in_admonition and tag in ("table", "th")  # keep its cells, drop its "Note"
        skip = (tag in SKIP_TAGS and not (layout and tag == "table")
                or bool(classes & SKIP_CLASSES) or (layout and tag == "th") or hidden)
        self._open.append((tag, skip, admonition))
        self._skip += skip
        if tag in BLOCK_TAGS and not self._skip:
            self._flush()

    def handle_endtag(self, tag):
        if tag in VOID_TAGS or all(entry[0] != tag for entry in self._open):
            return  # a stray end tag
        while self._open:  # close what was left open inside it too
            name, skip, _ = self._open.pop()
            self._skip -= skip
            if name == tag:
                break
        if tag in BLOCK_TAGS and not self._skip:
            self._flush()

    def handle_data(self, text):
        if not self._skip:
            self._words.append(text)


def html_to_prose(html: str) -> str:
    """The running text of an HTML page: one paragraph per block element (paragraph, heading,
    list item, table cell of a note), whitespace collapsed, paragraphs separated by a blank
    line. Navigation, tables of contents, the index, code listings, figures, data tables,
    bibliographies and hidden variants are dropped (`SKIP_TAGS`, `SKIP_CLASSES`, the `hidden`
    attribute). "" for a page without prose."""
    parser = _ProseParser()
    parser.feed(html)
    parser.close()
    parser._flush()
    return "\n\n".join(parser.paragraphs) + "\n" if parser.paragraphs else ""


# ----------------------------------------------------------------------------- packages

def _run(cmd: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=1800)
    except FileNotFoundError as err:
        raise CorpusError(f"`{cmd[0]}` is missing: the corpus is built from Debian packages with "
                          "apt-get and dpkg-deb (Debian 12 or a container of it).") from err


def _deb_field(deb: Path, field: str) -> str:
    return _run(["dpkg-deb", "-f", str(deb), field]).stdout.strip()


def _snapshot_hint(pkg: Package) -> str:
    source = next(src for prefix, src in SNAPSHOT_SOURCES.items() if pkg.name.startswith(prefix))
    return (f"https://snapshot.debian.org/package/{source}/{pkg.version}/ has every version "
            f"ever published: put its {pkg.name} .deb in corpus/debs/, under any name that "
            f"starts {pkg.name}_")


def fetch(pkg: Package, debs: Path) -> Path:
    """The .deb of `pkg` at its pinned version, downloaded into `debs` unless already there."""
    debs.mkdir(parents=True, exist_ok=True)
    for deb in sorted(debs.glob(f"{pkg.name}_*.deb")):
        if _deb_field(deb, "Version") == pkg.version:
            return deb
    done = _run(["apt-get", "download", "-q", f"{pkg.name}={pkg.version}"], cwd=debs)
    found = [d for d in sorted(debs.glob(f"{pkg.name}_*.deb"))
             if _deb_field(d, "Version") == pkg.version]
    if done.returncode == 0 and found:
        return found[0]
    candidate = _run(["apt-cache", "policy", pkg.name]).stdout
    has = next((line.split(":", 1)[1].strip() for line in candidate.splitlines()
                if line.strip().startswith("Candidate:")), "")
    if not has or has == "(none)":
        why = (f"apt knows no package {pkg.name}: run `apt-get update` as root (make corpus does "
               "it when run as root), on Debian 12 (bookworm) or with its archive in "
               "/etc/apt/sources.list.")
    else:
        why = (f"apt offers {pkg.name} {has}, not the pinned {pkg.version}. Either fetch the "
               f"pinned one ({_snapshot_hint(pkg)}), or move the pin in experiments/corpus.py "
               "PACKAGES and rebuild with `python -m experiments.corpus build --update`, which "
               "says whether the documents changed (if they did, retrain the models).")
    raise CorpusError(f"Cannot get {pkg.name} {pkg.version}. {why}\n{done.stderr.strip()}")


def wanted_files(package: str) -> tuple[tuple[str, str], ...]:
    """(folder, suffix) pairs of the files the corpus reads from `package`, and its licence."""
    keep = tuple((src.root + "/", Path(src.pattern).suffix) for kind in SOURCES.values()
                 for src in kind if src.package == package)
    return keep + tuple((path, "") for pkg, path in LICENCE_FILES.values() if pkg == package)


def unpack(deb: Path, dest: Path) -> Path:
    """The files the corpus reads from `deb` (`wanted_files`: regular files only, no symlinks,
    no images), extracted from `dpkg-deb --fsys-tarfile` into `dest` (emptied first)."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    keep = wanted_files(_deb_field(deb, "Package"))
    try:
        proc = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(deb)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
    except FileNotFoundError as err:
        raise CorpusError("`dpkg-deb` is missing: the corpus is built from Debian "
                          "packages.") from err
    with tarfile.open(fileobj=proc.stdout, mode="r|") as tar:
        for member in tar:
            name = member.name.removeprefix("./")
            if not (member.isfile() and any(name.startswith(folder) and name.endswith(suffix)
                                            for folder, suffix in keep)):
                continue
            target = dest / name
            if ".." in Path(name).parts:
                raise CorpusError(f"{deb.name} holds an unsafe path: {member.name}")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(tar.extractfile(member).read())
    if proc.wait():
        raise CorpusError(f"dpkg-deb could not unpack {deb}: {proc.stderr.read().decode().strip()}")
    return dest


def _tree_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def fetch_all(root: Path) -> dict[str, dict]:
    """Fetch and unpack every package of PACKAGES under root; name -> its manifest record."""
    records = {}
    for pkg in PACKAGES:
        deb = fetch(pkg, root / "debs")
        stamp = root / "packages" / f"{pkg.name}.unpacked"  # .deb sha256 and extractor
        digest = sha256(deb.read_bytes())
        dest = root / "packages" / pkg.name
        done = f"{digest} {EXTRACTOR_VERSION}"
        if not (stamp.is_file() and stamp.read_text() == done and dest.is_dir()):
            unpack(deb, dest)
            stamp.write_text(done)
        records[pkg.name] = {"version": pkg.version,
                             "architecture": _deb_field(deb, "Architecture"),
                             "licence": pkg.licence, "deb_bytes": deb.stat().st_size,
                             "deb_sha256": digest,
                             "installed_kib": int(_deb_field(deb, "Installed-Size") or 0),
                             "extracted_bytes": _tree_bytes(dest)}
    return records


# ----------------------------------------------------------------------------- documents

@dataclass(frozen=True)
class Document:
    kind: str
    name: str  # path relative to the kind's root: the split and the dedup key
    package: str
    text: str

    @property
    def sha256(self) -> str:
        return sha256(self.text.encode("utf-8"))

    @property
    def nbytes(self) -> int:
        return len(self.text.encode("utf-8"))


def read_documents(kind: str, packages_dir: Path) -> list[Document]:
    """Every document of `kind` in the unpacked packages, as extracted, sorted by name."""
    found = {}
    for source in SOURCES[kind]:
        root = packages_dir / source.package / source.root
        if not root.is_dir():
            raise CorpusError(f"{root} is missing: {source.package} is not unpacked (run the "
                              "build).")
        for path in sorted(root.glob(source.pattern)):
            rel = path.relative_to(root)
            if source.fmt == "python":
                if not data.is_stdlib_source(rel):
                    continue
                try:
                    text = path.read_bytes().decode("utf-8")
                except UnicodeDecodeError:
                    continue
            else:
                text = html_to_prose(path.read_text(encoding="utf-8"))
            name = source.prefix + rel.as_posix()
            found.setdefault(name, Document(kind, name, source.package, text))
    return [found[name] for name in sorted(found)]


ENGLISH_WORDS = frozenset("the and of to is are you this that with for be it can from on".split())
SPANISH_WORDS = frozenset("el la los las de del que y en un una es para con por se su al".split())


def untranslated(lang: str, para: str) -> bool:
    """Whether a paragraph of a Spanish or Russian page is English left untranslated: in
    Russian, one without a Cyrillic letter; in Spanish, one with more English than Spanish
    function words (ENGLISH_WORDS, SPANISH_WORDS). English paragraphs never are."""
    if lang == "ru":
        return not any("\u0400" <= ch <= "\u04ff" for ch in para)
    if lang == "es":
        words = [w.strip(".,;:()«»“”\"'¿?¡!").lower() for w in para.split()]
        return sum(w in ENGLISH_WORDS for w in words) > sum(w in SPANISH_WORDS for w in words)
    return False


def clean_prose(docs: dict[str, list[Document]]) -> dict[str, list[Document]]:
    """The prose kinds without two kinds of paragraph (MIN_REPEAT_CHARS or longer):

    * untranslated ones (`untranslated`): both manuals leave some paragraphs in English;
    * repeats: a paragraph already met in this kind, going through the training-side pages
      first, then the validation-side ones (each by name). Boilerplate that the manuals embed
      in many pages ("To access this command", "These options are described in...") is then
      read once, and no validation page keeps a paragraph of a training page.
    """
    cleaned = dict(docs)
    for kind in data.PROSE_LANGS:
        seen, out = set(), []
        for doc in sorted(docs[kind], key=lambda d: (data.is_valid_name(d.name), d.name)):
            keep = []
            for para in data.paragraphs(doc.text):
                if len(para) >= MIN_REPEAT_CHARS:
                    if para in seen or untranslated(kind, para):
                        continue
                    seen.add(para)
                keep.append(para)
            out.append(Document(kind, doc.name, doc.package,
                                "\n\n".join(keep) + "\n" if keep else ""))
        cleaned[kind] = sorted(out, key=lambda d: d.name)
    return cleaned


def keep_documents(docs: list[Document]) -> list[Document]:
    """Documents of MIN_DOCUMENT_BYTES or more, each text once (the first by name)."""
    kept, seen = [], set()
    for doc in docs:
        if doc.nbytes >= MIN_DOCUMENT_BYTES and doc.sha256 not in seen:
            seen.add(doc.sha256)
            kept.append(doc)
    return kept


def collect(packages_dir: Path) -> dict[str, list[Document]]:
    """kind -> the corpus documents of that kind, by name (read, cleaned, filtered)."""
    raw = {kind: read_documents(kind, packages_dir) for kind in data.CORPUS_KINDS}
    return {kind: keep_documents(docs) for kind, docs in clean_prose(raw).items()}


def order_key(kind: str, name: str) -> str:
    """Where a document comes in its kind's stream and in the share cut: a hash of its name, so
    neither follows the alphabet (the prose kinds hash the same page names, in step)."""
    group = "prose" if kind in data.PROSE_LANGS else kind
    return sha256(f"{group}/{name}".encode())


def assign_parts(docs: dict[str, list[Document]]) -> dict[str, dict[str, list[Document]]]:
    """kind -> {"train", "valid", "spare"} -> documents in stream order.

    A document's split comes from its name (`data.is_valid_name`). Within a split every kind
    gets its share of the bytes (`data.SHARES`) of the largest mixture the scarcest kind
    allows: documents are taken in `order_key` order while they fit; the rest are "spare".
    """
    parts = {kind: {"train": [], "valid": [], "spare": []} for kind in docs}
    for split in ("train", "valid"):
        pools = {kind: sorted((d for d in kind_docs
                               if data.is_valid_name(d.name) == (split == "valid")),
                              key=lambda d: order_key(d.kind, d.name))
                 for kind, kind_docs in docs.items()}
        total = min(sum(d.nbytes for d in pool) / data.SHARES[kind] for kind, pool in pools.items())
        for kind, pool in pools.items():
            budget, taken = data.SHARES[kind] * total, 0
            for doc in pool:
                fits = taken + doc.nbytes <= budget + 0.5
                parts[kind][split if fits else "spare"].append(doc)
                taken += doc.nbytes if fits else 0
    return parts


def choose_heldout(parts) -> dict[str, list[Document]]:
    """The shipped held-out text: validation documents only, about HELDOUT_BYTES per kind. The
    prose kinds take the same pages (a parallel text), counted on English."""
    heldout = {}
    valid = {kind: {d.name: d for d in p["valid"] + p["spare"] if data.is_valid_name(d.name)}
             for kind, p in parts.items()}
    pages = sorted(set.intersection(*(set(valid[k]) for k in data.PROSE_LANGS)),
                   key=lambda name: order_key("en", name))
    taken, chosen = 0, []
    for name in pages:
        if taken + valid["en"][name].nbytes <= HELDOUT_BYTES:
            chosen.append(name)
            taken += valid["en"][name].nbytes
    for lang in data.PROSE_LANGS:
        heldout[lang] = [valid[lang][name] for name in chosen]
    taken, heldout["python"] = 0, []
    for doc in sorted(valid["python"].values(), key=lambda d: order_key("python", d.name)):
        if taken + doc.nbytes <= HELDOUT_BYTES:
            heldout["python"].append(doc)
            taken += doc.nbytes
    return heldout


# ----------------------------------------------------------------------------- manifest

def _count(docs) -> dict:
    return {"documents": len(docs), "bytes": sum(d.nbytes for d in docs)}


def make_manifest(packages: dict[str, dict], parts, streams, heldout) -> dict:
    """The manifest (the format is described in assets/corpus/README.md)."""
    kinds = {}
    for kind in data.CORPUS_KINDS:
        kinds[kind] = {
            "sources": [{"prefix": src.prefix, "package": src.package, "root": src.root,
                         "pattern": src.pattern, "licence": packages[src.package]["licence"]}
                        for src in SOURCES[kind]],
            **{part: _count(parts[kind][part]) for part in ("train", "valid", "spare")},
            "heldout": {**_count(heldout[kind]), "sha256": stream_digest(heldout[kind]),
                        "names": [d.name for d in heldout[kind]]},
        }
    return {
        "format": 1,
        "about": "The four-kind training corpus: alibi_viz/data.py says what and why, "
                 "experiments/corpus.py builds it (`make corpus`), assets/corpus/README.md "
                 "describes this file.",
        "rules": {"shares": dict(data.SHARES),
                  "split": f"valid when crc32(name) % {data.VALID_MODULUS} == 0, else train",
                  "min_document_bytes": MIN_DOCUMENT_BYTES, "min_repeat_chars": MIN_REPEAT_CHARS,
                  "heldout_bytes": HELDOUT_BYTES, "extractor_version": EXTRACTOR_VERSION,
                  "tokens": "one per UTF-8 byte (ByT5), eos between documents"},
        "packages": packages,
        "kinds": kinds,
        "streams": {split: {**_count(docs), "sha256": stream_digest(docs)}
                    for split, docs in streams.items()},
        "documents": {kind: sorted([d.name, part, d.nbytes, d.sha256]
                                   for part in ("train", "valid") for d in parts[kind][part])
                      for kind in data.CORPUS_KINDS},
    }


def stream_digest(docs) -> str:
    """sha256 of the documents' sha256s in stream order, one a line: names a stream's content
    and order, whatever file holds it."""
    return data.stream_digest(d.sha256 for d in docs)


def dump_manifest(manifest: dict) -> str:
    """JSON, one document a line (readable diffs when a package moves)."""
    head = {k: v for k, v in manifest.items() if k != "documents"}
    text = json.dumps(head, indent=1, ensure_ascii=False)[:-2]
    lines = []
    for kind, rows in manifest["documents"].items():
        body = ",\n".join("  " + json.dumps(row, ensure_ascii=False) for row in rows)
        lines.append(f' {json.dumps(kind)}: [\n{body}\n ]')
    return text + ',\n "documents": {\n' + ",\n".join(lines) + "\n }\n}\n"


def compare(expected: dict, found: dict) -> list[str]:
    """What differs between two manifests, one line each ([] when the corpus is the same)."""
    problems = []
    for name, want in expected["packages"].items():
        have = found["packages"].get(name)
        if have is None:
            problems.append(f"package {name} {want['version']} is missing")
        elif have["version"] != want["version"]:
            problems.append(f"package {name}: {have['version']} instead of {want['version']}")
        elif (have["architecture"] == want["architecture"]
              and have["deb_sha256"] != want["deb_sha256"]):
            problems.append(f"package {name} {want['version']}: its .deb has sha256 "
                            f"{have['deb_sha256'][:12]}…, the manifest "
                            f"{want['deb_sha256'][:12]}…")
    if found["rules"] != expected["rules"]:
        problems.append("the rules differ (shares, split, extractor): "
                        f"{found['rules']} instead of {expected['rules']}")
    for kind, rows in expected["documents"].items():
        want = {row[0]: row for row in rows}
        have = {row[0]: row for row in found["documents"].get(kind, [])}
        gone, new = sorted(set(want) - set(have)), sorted(set(have) - set(want))
        changed = sorted(n for n in set(want) & set(have) if want[n] != have[n])
        for what, names in (("missing", gone), ("new", new), ("changed", changed)):
            if names:
                problems.append(f"{kind}: {len(names)} {what} document(s), e.g. "
                                + ", ".join(names[:5]))
    for split, want in expected["streams"].items():
        if found["streams"].get(split, {}).get("sha256") != want["sha256"]:
            problems.append(f"the {split} stream differs (content or order)")
    for kind, want in expected["kinds"].items():
        have = found["kinds"].get(kind, {}).get("heldout", {})
        if have.get("sha256") != want["heldout"]["sha256"]:
            problems.append(f"the {kind} held-out text differs")
    return problems


def check_build(root: Path | None = None, manifest: dict | None = None) -> list[str]:
    """Quick check of a local build against the manifest: packages (version, .deb sha256) and
    the two stream files (document sha256s, in order). [] when they match."""
    root = build_dir() if root is None else Path(root)
    manifest = data.corpus_manifest() if manifest is None else manifest
    problems = []
    for name, want in manifest["packages"].items():
        debs = [d for d in sorted((root / "debs").glob(f"{name}_*.deb"))
                if _deb_field(d, "Version") == want["version"]]
        if not debs:
            problems.append(f"package {name} {want['version']} is not in {root / 'debs'}")
        elif (_deb_field(debs[0], "Architecture") == want["architecture"]
              and sha256(debs[0].read_bytes()) != want["deb_sha256"]):
            problems.append(f"{debs[0].name} is not the .deb of the manifest (sha256 differs)")
    for split in ("train", "valid"):
        try:
            data.read_stream(split, root, manifest)
        except AlibiVizError as err:
            problems.append(str(err))
    return problems


# ----------------------------------------------------------------------------- build

def write_stream(path: Path, docs: list[Document]) -> None:
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", encoding="utf-8") as out:
        for doc in docs:
            out.write(json.dumps({"kind": doc.kind, "name": doc.name, "sha256": doc.sha256,
                                  "text": doc.text}, ensure_ascii=False) + "\n")
    tmp.replace(path)


def write_heldout(heldout: dict[str, list[Document]], packages_dir: Path) -> None:
    """The held-out text and the licence texts, under assets/corpus/."""
    data.HELDOUT_DIR.mkdir(parents=True, exist_ok=True)
    for kind, docs in heldout.items():
        write_stream(data.HELDOUT_DIR / f"{kind}.jsonl", docs)
    licences = data.CORPUS_ASSETS / "LICENSES"
    licences.mkdir(exist_ok=True)
    for name, (package, path) in LICENCE_FILES.items():
        src = Path(path) if package is None else packages_dir / package / path
        if not src.is_file():
            raise CorpusError(f"{src} is missing: it is the licence text shipped as {name}.")
        shutil.copyfile(src, licences / name)


def build(root: Path | None = None, update: bool = False, log=print) -> dict:
    """Fetch, unpack, extract and split; write the streams under root; compare with the shipped
    manifest (CorpusError listing the differences) or, with update, rewrite it and the held-out
    text. Returns the manifest of this build with a "measured" entry (sizes, seconds)."""
    root = build_dir() if root is None else Path(root)
    t0 = time.perf_counter()
    packages = fetch_all(root)
    t1 = time.perf_counter()
    docs = collect(root / "packages")
    parts = assign_parts(docs)
    streams = {split: data.interleave({k: parts[k][split] for k in data.CORPUS_KINDS})
               for split in ("train", "valid")}
    heldout = choose_heldout(parts)
    manifest = make_manifest(packages, parts, streams, heldout)
    t2 = time.perf_counter()
    if update:
        if data.MANIFEST_PATH.is_file():
            problems = compare(data.corpus_manifest(), manifest)
            log("Against the previous manifest: " + ("; ".join(problems) if problems else
                "the same documents and streams (no retraining needed)."))
        data.MANIFEST_PATH.parent.mkdir(parents=True, exist_ok=True)
        data.MANIFEST_PATH.write_text(dump_manifest(manifest), encoding="utf-8")
        write_heldout(heldout, root / "packages")
        data.corpus_manifest.cache_clear()
        data.heldout_documents.cache_clear()
    else:
        problems = compare(data.corpus_manifest(), manifest)
        if problems:
            raise CorpusError("This build differs from assets/corpus/manifest.json:\n  "
                              + "\n  ".join(problems) + "\nThe models would train on a different "
                              "corpus. To adopt it, rebuild with --update (and retrain).")
    for split, docs_ in streams.items():
        write_stream(root / f"{split}.jsonl", docs_)
    manifest["measured"] = {"fetch_unpack_seconds": round(t1 - t0, 1),
                            "extract_split_seconds": round(t2 - t1, 1),
                            "total_seconds": round(time.perf_counter() - t0, 1)}
    log(summary(manifest, root))
    return manifest


def summary(manifest: dict, root: Path) -> str:
    lines = [f"corpus in {root} (manifest: {data.MANIFEST_PATH})"]
    for kind, info in manifest["kinds"].items():
        lines.append(f"  {kind:6s} " + " | ".join(
            f"{part} {info[part]['documents']:4d} docs {info[part]['bytes'] / 1e6:5.2f} MB"
            for part in ("train", "valid", "spare", "heldout")))
    for name, pkg in manifest["packages"].items():
        lines.append(f"  {name} {pkg['version']}: .deb {pkg['deb_bytes'] / 1e6:.1f} MB, "
                     f"installed {pkg['installed_kib'] / 1024:.1f} MiB, of which the corpus "
                     f"reads {pkg['extracted_bytes'] / 1e6:.1f} MB")
    if "measured" in manifest:
        lines.append("  seconds: " + ", ".join(f"{k} {v}"
                                               for k, v in manifest["measured"].items()))
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.corpus", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=("build", "check"))
    parser.add_argument("--update", action="store_true",
                        help="build: rewrite assets/corpus (manifest, held-out text, licences)")
    parser.add_argument("--root", type=Path, default=None, help="build folder (default corpus/)")
    args = parser.parse_args(argv)
    try:
        if args.command == "build":
            build(args.root, update=args.update)
            return 0
        problems = check_build(args.root)
    except AlibiVizError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    if problems:
        print("The corpus build differs from assets/corpus/manifest.json:\n  "
              + "\n  ".join(problems) + "\nRun `make corpus`.", file=sys.stderr)
        return 1
    print("The corpus build matches assets/corpus/manifest.json.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
