"""The README keeps what a researcher looks for: a scored row per shipped model, a length one reads
through, and links (in the README and in docs/) that resolve."""
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def shipped_models() -> list[str]:
    """models/*.pt as committed (a working copy may hold run checkpoints that are not shipped)."""
    try:
        listed = subprocess.run(["git", "ls-files", "models/*.pt"], cwd=ROOT, capture_output=True, text=True,
                                check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        listed = [str(p.relative_to(ROOT)) for p in ROOT.glob("models/*.pt")]
    return sorted(listed)


def test_every_shipped_model_has_a_scored_row_with_its_command():
    models = shipped_models()
    assert models, "no shipped models found"
    for model in models:
        command = re.compile(re.escape(f"enjoy.py --model {model} --episodes ") + r"\d+")  # 100, Memory Gym's 150
        rows = [line for line in README.splitlines() if line.startswith(f"| `{model}` |") and command.search(line)]
        assert rows, f"README has no shipped-models row for {model}"
        assert all(re.search(r"return -?\d", row) for row in rows), rows


def test_every_linked_file_exists():
    links = re.findall(r"\]\(((?:results|configs|tests|models|docs)/[^)#\s]+)\)", README)
    assert links
    missing = [link for link in links if not (ROOT / link).exists()]
    assert not missing, missing


README_LIMIT = 12_000  # characters: the long reference lives in docs/
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_readme_is_short():
    assert len(README) < README_LIMIT, f"README.md has {len(README)} characters; move detail to docs/"


def test_readme_links_every_docs_page():
    missing = [page.name for page in PAGES[1:] if f"](docs/{page.name})" not in README]
    assert not missing, missing


def anchors(page: Path) -> set[str]:
    """The heading anchors GitHub makes for a markdown page (fenced code is not a heading)."""
    found, seen, fenced = set(), {}, False
    for line in page.read_text().splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        heading = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if fenced or not heading:
            continue
        slug = re.sub(r"[^\w\- ]", "", heading.group(1).lower()).replace(" ", "-")
        found.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
        seen[slug] = seen.get(slug, 0) + 1
    return found


def test_every_relative_link_in_the_readme_and_docs_resolves():
    """Files (results/, configs/, tests/, models/, docs/ and any other) and #anchors of markdown pages."""
    broken = []
    for page in PAGES:
        text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)  # commands, not links
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            where = f"{page.relative_to(ROOT)}: {target}"
            if not linked.is_relative_to(ROOT) or not linked.exists():
                broken.append(where)
            elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
                broken.append(f"{where} (no such heading)")
    assert not broken, broken
