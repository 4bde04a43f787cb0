"""The fast probes (tests/probes.py --fast): one or two per issue point, each a real run of
train.py, enjoy.py or checkpoint.py that a new, careless or hostile user could make.

Every probe must end right; on failure the message lists each wrong probe with its command,
exit code, first line and reasons. The whole suite: make probes (python tests/probes.py --jobs 2)
"""
import json
import subprocess
import sys
from pathlib import Path

import pytest
from tests.hang import HANG_S

pytestmark = pytest.mark.slow  # processes, Ray or whole configs: make test-fast leaves these out

ROOT = Path(__file__).resolve().parent.parent


def test_fast_probes_end_right(tmp_path):
    report = tmp_path / "probes.json"
    run = subprocess.run([sys.executable, str(ROOT / "tests/probes.py"), "--fast", "--jobs", "2",
                          "--json", str(report)], cwd=ROOT, capture_output=True, text=True, timeout=HANG_S)
    assert report.exists(), f"tests/probes.py --fast wrote no report (exit {run.returncode}):\n{run.stderr}"
    probes = json.loads(report.read_text())["probes"]
    points = {p["point"] for p in probes}
    missing = {str(n) for n in range(1, 13)} - points
    assert not missing, f"issue points without a fast probe: {sorted(missing, key=int)}"
    wrong = [p for p in probes if p["verdict"] != "right"]
    lines = [f"{p['name']} (point {p['point']}): `{p['command']}` -> exit {p['code']}, "
             f"first line {p['first_line']!r}\n    wrong: {'; '.join(p['reasons'])}\n    expected: {p['expected']}"
             for p in wrong]
    if wrong:
        pytest.fail(f"{len(wrong)} of {len(probes)} fast probes ended wrong:\n" + "\n".join(lines), pytrace=False)
