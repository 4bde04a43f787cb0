"""The instruments: scripts that measure the program and write what they measured to results/. Each runs as
`python tools/<name>.py` from any folder, with the repository root first on sys.path; the program imports nothing
from here."""
