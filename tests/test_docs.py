"""docs/config.md is generated from config.py and must not drift from it."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_config_reference_matches_config_py():
    result = subprocess.run([sys.executable, str(ROOT / "docs/make_config.py"), "--check"], capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stderr


def test_every_config_key_is_in_the_reference():
    sys.path.insert(0, str(ROOT / "docs"))
    import dataclasses

    import config
    text = (ROOT / "docs/config.md").read_text()

    def keys(cls, prefix=""):
        for f in dataclasses.fields(cls):
            yield prefix + f.name
            hint = config.typing.get_type_hints(cls)[f.name]
            if dataclasses.is_dataclass(hint):
                yield from keys(hint, f"{prefix}{f.name}.")
    missing = [k for k in keys(config.Config) if f"`{k}`" not in text]
    assert not missing


def test_every_default_in_the_reference_is_the_one_a_config_gets():
    """The beta and clip-range tables showed the learning rate's 0.0003 under a line 'Defaults here:
    initial 0.001' (issue 58, borderline)."""
    import re

    import config
    defaults = config.Config().to_dict()
    rows = re.findall(r"^\| `([\w.]+)` \| [^|]+ \| `([^`]*)` \|", (ROOT / "docs/config.md").read_text(), re.M)
    wrong = []
    for key, shown in rows:
        value = config._get(defaults, key)
        if shown != (str(value).lower() if isinstance(value, bool) else '""' if value == "" else str(value)):
            wrong.append(f"{key}: {shown} shown, {value!r} taken")
    assert len(rows) > 50 and not wrong, wrong
