"""The README keeps what a researcher looks for: a scored row per shipped model, and links that resolve."""
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
        rows = [line for line in README.splitlines()
                if line.startswith(f"| `{model}` |") and f"enjoy.py --model {model} --episodes 100" in line]
        assert rows, f"README has no shipped-models row for {model}"
        assert all(re.search(r"return -?\d", row) for row in rows), rows


def test_every_linked_file_exists():
    links = re.findall(r"\]\(((?:results|configs|tests|models)/[^)#\s]+)\)", README)
    assert links
    missing = [link for link in links if not (ROOT / link).exists()]
    assert not missing, missing
