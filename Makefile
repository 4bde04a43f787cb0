# Two commands a researcher needs: `make train` and `make test`. Both create the
# virtual environment and install the pinned requirements on first use.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.requirements-installed

.PHONY: install video-extra train test test-fast probes mutation bench clean

install: $(STAMP)

# memory-gym pins gymnasium 0.29 and pygame 2.4, which would replace our gymnasium
# 1.4 and clash with pygame-ce: it is installed second, without its dependencies
# (requirements-nodeps.txt); `pip check` then names those two pins, nothing else.
$(STAMP): requirements.txt requirements-nodeps.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --disable-pip-version-check -q -r requirements.txt
	$(BIN)/pip install --disable-pip-version-check -q --no-deps -r requirements-nodeps.txt
	touch $(STAMP)

# MP4 output for enjoy.py (GIFs need nothing extra).
video-extra: $(STAMP)
	$(BIN)/pip install --disable-pip-version-check -q -r requirements-video.txt

train: $(STAMP)
	$(BIN)/python train.py --config configs/poc_memory_env.yaml

# Every test, spread over the cores (pytest-xdist); the 15 slowest are named at the end.
test: $(STAMP)
	SDL_VIDEODRIVER=dummy $(BIN)/python -m pytest -q -n auto --durations=15

# The in-process tests only: no learning runs, no real processes (under a minute on 2 cores).
test-fast: $(STAMP)
	SDL_VIDEODRIVER=dummy $(BIN)/python -m pytest -q -n auto -m "not learning and not slow"

# The whole probe suite (tests/probes.py; make test runs its fast subset): the scripts tried as
# a new, a careless and a hostile user would. Writes results/probes.md and .json (minutes on
# 2 cores) and exits 1 if a probe ended wrong.
probes: $(STAMP)
	$(BIN)/python tests/probes.py --jobs 2

# The mutation pass over buffer.py, losses.py, distributions.py and normalization.py
# (pyproject.toml's [tool.mutmut]); results/mutation.md is its report.
mutation: $(STAMP)
	$(BIN)/pip install --disable-pip-version-check -q -r requirements-mutation.txt
	rm -rf mutants
	$(BIN)/mutmut run --max-children 2
	$(BIN)/python tools/mutation.py

# Wall time, steps/s and the per-phase split of the shipped fast configs (results/benchmark.md);
# tools/benchmark.py --against REF compares the working tree with a commit, runs alternated.
bench: $(STAMP)
	$(BIN)/python tools/benchmark.py --config configs/cartpole_masked.yaml --config configs/poc_memory_env.yaml \
		--repeats 3

clean:
	rm -rf $(VENV) summaries .pytest_cache mutants
