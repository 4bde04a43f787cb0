"""The instruments: the scripts that measure the program and write what they measured to results/.

Each runs as `python tools/<name>.py` from any folder: it puts the repository root first on sys.path,
imports the program's modules from there and the other tools as `tools.<name>`. The program imports
nothing from here.
"""
