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
