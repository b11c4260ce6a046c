"""The repository stands alone: no file cites a document that does not ship with it.

Every ``docs/<name>.md`` (and ``<name>.md`` link inside docs/) must exist, every ``#anchor`` must be
a heading of that file, upper-case ``*.md`` names (the old spec files) must exist in the repository,
no path leaves it (``../shared``, absolute paths), and no bare section number (``§3.4``) is left
from a document that is not here."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _tracked() -> dict[str, str]:
    out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout.split()
    texts = {}
    for name in out:
        path = ROOT / name
        if path.suffix not in {".py", ".md", ".toml", ".txt", ".cfg"} or not path.is_file():
            continue
        texts[name] = path.read_text(encoding="utf-8", errors="replace")
    return texts


FILES = _tracked()


def _slug(heading: str) -> str:
    return re.sub(r"[^a-z0-9 _-]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(doc: Path) -> set[str]:
    return {_slug(m.group(1)) for m in re.finditer(r"^#+\s+(.+)$", doc.read_text(encoding="utf-8"), re.M)}


def _where(name: str, text: str, pos: int) -> str:
    return f"{name}:{text.count(chr(10), 0, pos) + 1}"


def test_cited_docs_and_anchors_exist():
    bad = []
    for name, text in FILES.items():
        base = ROOT / Path(name).parent if name.startswith("docs/") else ROOT
        refs = [(m.start(), ROOT / m.group(1), m.group(2)) for m in re.finditer(r"\b(docs/[\w.-]+\.md)(?:#([\w-]+))?", text)]
        if name.startswith("docs/") or name.endswith(".md"):
            refs += [(m.start(), base / m.group(1), m.group(2))
                     for m in re.finditer(r"\]\(([\w./-]+\.md)(?:#([\w-]+))?\)", text)]
        for pos, path, anchor in refs:
            if not path.is_file():
                bad.append(f"{_where(name, text, pos)} cites {path.relative_to(ROOT)}, which does not exist")
            elif anchor and anchor not in _anchors(path):
                bad.append(f"{_where(name, text, pos)} cites #{anchor}, no heading of {path.relative_to(ROOT)}")
    assert not bad, "\n".join(bad)


def test_no_reference_leaves_the_repository():
    shipped = {p.name for p in ROOT.glob("*.md")} | {p.name for p in (ROOT / "docs").glob("*.md")}
    bad = []
    for name, text in FILES.items():
        if name == "tests/core/test_standalone_docs.py":
            continue
        for m in re.finditer(r"\.\./shared|/work/|\b([A-Z][A-Z_]+\.md)\b|§\s*\d", text):
            if m.group(1) and m.group(1) in shipped:
                continue
            bad.append(f"{_where(name, text, m.start())}: {text[max(0, m.start() - 30):m.end() + 30]!r}")
    assert not bad, "references to documents outside the repository:\n" + "\n".join(bad)


def test_the_semantics_and_pipeline_docs_are_linked():
    arch = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert "semantics.md" in arch and "pipeline.md" in arch
