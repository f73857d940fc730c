"""The docs are a path a newcomer can walk (issue 41 item 6): a short README that links only
into the repository, and numbered pages of docs/, each short, each opening with a paragraph
that says what it is for, listed in order by docs/README.md, the first with a diagram."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
NAMES = ROOT / "libs" / "domain" / "src" / "longhaul" / "domain" / "names.py"
PAGES = sorted(DOCS.glob("[0-9][0-9]-*.md"))
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^```.*?^```", flags=re.MULTILINE | re.DOTALL)


def _prose(text: str) -> str:
    """The text outside code blocks (a link in a code sample is not a link)."""
    return _FENCE.sub("", text)


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    headings = re.findall(r"^#+ (.+)$", _prose(path.read_text(encoding="utf-8")), re.MULTILINE)
    return {_anchor(heading) for heading in headings}


def _broken_links(path: Path) -> list[str]:
    broken = []
    for target in _LINK.findall(_prose(path.read_text(encoding="utf-8"))):
        if re.match(r"[a-z]+:", target):
            broken.append(f"{target} (outside the repository)")
            continue
        file, _, anchor = target.partition("#")
        linked = (path.parent / file).resolve() if file else path
        if not linked.is_relative_to(ROOT) or not linked.exists():
            broken.append(f"{target} (no such file in the repository)")
        elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
            broken.append(f"{target} (no such heading)")
    return broken


def test_the_readme_is_short_and_keeps_the_two_commands() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 300
    assert "make run" in text and "make test" in text


def test_the_readme_links_only_to_files_of_the_repository() -> None:
    assert not _broken_links(README)
    assert "../shared" not in README.read_text(encoding="utf-8")


def test_there_are_pages_and_the_index_lists_each_in_order() -> None:
    assert len(PAGES) >= 7, "docs/ holds no numbered pages: this test reads it wrongly"
    index = (DOCS / "README.md").read_text(encoding="utf-8")
    listed = re.findall(r"\]\((\d\d-[\w-]+\.md)\)", index)
    assert listed == [page.name for page in PAGES]


def test_no_page_is_over_600_lines() -> None:
    long = {page.name: n for page in PAGES if (n := len(page.read_text().splitlines())) > 600}
    assert not long


def test_each_page_opens_with_a_paragraph_that_says_what_it_is_for() -> None:
    """A title, then a paragraph of prose — not a heading, a list, a table or code."""
    for page in [*PAGES, DOCS / "README.md"]:
        blocks = page.read_text(encoding="utf-8").split("\n\n")
        assert blocks[0].startswith("# ") and "\n" not in blocks[0], page.name
        purpose = blocks[1]
        assert not re.match(r"[#|`>*-]|\d+\.", purpose), (page.name, purpose[:60])
        assert len(purpose.split()) >= 25, (page.name, "a purpose is a paragraph, not a line")


def test_the_overview_draws_every_service_subject_and_bucket() -> None:
    """The diagram names what names.py declares: a bucket or a subject added there without its
    place on the map fails here."""
    overview = (DOCS / "01-overview.md").read_text(encoding="utf-8")
    diagram = re.search(r"^```mermaid\n(.*?)^```", overview, flags=re.MULTILINE | re.DOTALL)
    assert diagram, "the overview has no mermaid diagram"
    drawn = diagram.group(1)
    names = NAMES.read_text(encoding="utf-8")
    declared = set(re.findall(r'_bucket\("([a-z_]+)"\)', names))
    declared |= set(re.findall(r'namespace}(lh\.[a-z.]+)"', names)) - {"lh.ev"}
    assert len(declared) >= 12, "names.py declares too little: this test reads it wrongly"
    services = {"gateway", "planner", "executor", "verifier", "LH_EVENTS", "lh.ev."}
    missing = {name for name in declared | services if name not in drawn}
    assert not missing, f"what the overview's diagram does not show: {missing}"


def test_the_links_between_pages_lead_somewhere() -> None:
    broken = {
        page.name: links
        for page in [*PAGES, DOCS / "README.md", DOCS / "ARCHITECTURE.md"]
        if (links := [link for link in _broken_links(page) if "outside" not in link])
    }
    assert not broken
