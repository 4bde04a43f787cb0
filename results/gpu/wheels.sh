#!/usr/bin/env bash
# Fetches, on a machine with PyPI, the packages the lent GPU machine lacks (it has Python 3.12, torch,
# numpy, scipy, tensorboard, pyyaml, tqdm, psutil, matplotlib and opencv, and no network), as wheels
# for its Python into .whl/ (git-ignored), for results/gpu/run.sh. From the repository root.
set -euo pipefail
PY=${PY:-.venv/bin/python}
rm -rf .whl && mkdir .whl
PLATFORMS=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64
           --platform manylinux2014_x86_64)
# the versions of requirements.txt / requirements-nodeps.txt, and what they need that the machine lacks
$PY -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp "${PLATFORMS[@]}" \
    -d .whl gymnasium==1.4.0 farama-notifications==0.0.4 minigrid==3.2.0 pygame-ce==2.5.8 ale-py==0.12.1 \
    memory-gym==1.0.2
# docopt publishes no wheel: build its (pure Python) one here
$PY -m pip wheel -q --no-deps -w .whl docopt==0.6.2
ls -l .whl
