"""Every relative link of the README and the docs/ pages reaches something: the file exists, and an `#anchor`
into a markdown file names one of its headings (as GitHub makes anchors of them). The manual moved out of the
README into docs/, so a link to a section that moved, or was renamed, fails here instead of in a reader's
browser."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _without_code_blocks(text: str) -> str:
    return re.sub(r"^```.*?^```", "", text, flags=re.DOTALL | re.MULTILINE)


def _prose(text: str) -> str:
    """The text without fenced code blocks and inline code, where brackets are not links."""
    return re.sub(r"`[^`]*`", "", _without_code_blocks(text))


def links(text: str) -> list[str]:
    """Relative link targets, images included; web and mail addresses left out."""
    targets = re.findall(r"\]\(([^)\s]+)\)", _prose(text))
    return [t for t in targets if not re.match(r"[a-z]+:", t)]


def anchors(text: str) -> set[str]:
    """GitHub's anchors for a page's headings: lower case, punctuation dropped, spaces as hyphens, and a
    repeated heading numbered (-1, -2, ...)."""
    seen: dict[str, int] = {}
    out = set()
    for heading in re.findall(r"^#{1,6} +(.+?) *#*$", _without_code_blocks(text), re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def test_anchors_follow_githubs_rules():
    text = "# Past one machine\n```bash\n# node 0\n```\n## Priming (the paper's 15 + 142 skills)\n## Notes\n## Notes\n"
    assert anchors(text) == {"past-one-machine", "priming-the-papers-15--142-skills", "notes", "notes-1"}


def test_the_pages_link_to_each_other():
    readme = links((ROOT / "README.md").read_text())
    assert sum(t.startswith("docs/") for t in readme) >= 10, readme


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_each_relative_link_resolves(page):
    text = page.read_text()
    broken = []
    for target in links(text):
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no file {file}")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file.read_text()):
            broken.append(f"{target}: no heading with the anchor #{anchor} in {file}")
    assert not broken, broken
