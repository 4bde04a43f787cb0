import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
# The test processes share the cores: an OpenMP thread that spins while it waits for work would hold a core
# another test's threads need. Set before any test module imports torch.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
