# Sourced, from the repository root, by the scripts run on a lent GPU machine (results/gpu/run.sh, cores.sh,
# results/trxl/cuda.sh): makes $OUT, installs the wheels of .whl/ (results/gpu/wheels.sh) into /tmp/site, and
# writes the card and torch to $OUT/gpu.txt.
mkdir -p "$OUT"
export SDL_VIDEODRIVER=dummy PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { echo "wheels: run results/gpu/wheels.sh here and carry .whl"; exit 2; }
export PYTHONPATH=/tmp/site

{ nvidia-smi -L; python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda,
torch.cuda.get_device_name(), 'bfloat16', torch.cuda.is_bf16_supported())"; } 2>&1 | tee "$OUT/gpu.txt"
