#!/bin/bash
# The GPU checks on a lent GPU machine (docs/gpu.md): benchmarks.gpu_ops first (the operator grid: host cost
# of an eager operator, matrix products, convolutions, attention, memory-bound operators, AdamW; no device has
# run it yet), then benchmarks.gpu_check (profiles against the roofline estimate, the training memory model
# against the allocator, the NCCL probes) and benchmarks.gpu_sharded_check (llama-1b under DDP, ZeRO-1/2 and
# full sharding on one GPU). Reports go to $OUT (default ./gpu-out).
#
# The machine's own Python holds torch; Srift's pure-Python dependencies that it lacks travel as wheels in
# .whl/ (ignored by git), fetched here first for its Python (3.12):
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64 -d .whl pydantic==2.14.4 \
#     pydantic_core==2.50.5 pydantic-settings==2.16.3 python-dotenv==1.2.4 annotated-types==0.8.0 \
#     typing-inspection==0.4.5 platformdirs==4.14.8 typing_extensions==4.16.0 SQLAlchemy==2.1.9 greenlet==3.5.6
# Knobs: OPS_S (s of new grid cases; 0 skips the grid), OPS_ONLY=1 (stop after the grid), MODELS, PRECISIONS
# (empty: skip the profiles), GPU_BUDGET (s of new work), SHARDED_S (s).
export PYTHONUNBUFFERED=1
OUT=${OUT:-./gpu-out}
mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
  export PYTHONPATH=/tmp/site:$PWD
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/smi.txt" 2>&1
python3 -c "import torch, sys; print(sys.version, torch.__version__, torch.version.cuda, torch.cuda.get_device_name())" >> "$OUT/smi.txt" 2>&1
python3 -c "import benchmarks.gpu_check, benchmarks.gpu_ops, srift.profiling.profiler, srift.estimate.estimator, srift.profiling.search, srift.refmodels.llama, srift.refmodels.shipped" > "$OUT/imports.log" 2>&1 || { cat "$OUT/imports.log"; exit 4; }
OPS_S=${OPS_S:-90}
if [ "$OPS_S" -gt 0 ]; then
  timeout $((OPS_S + 45)) python3 -m benchmarks.gpu_ops --budget-s "$OPS_S" --out "$OUT/gpu_ops.json" --no-write \
    > "$OUT/gpu_ops.md" 2> "$OUT/gpu_ops.log"
  echo "gpu_ops rc=$?"
  tail -12 "$OUT/gpu_ops.log"
fi
[ "${OPS_ONLY:-0}" = 1 ] && exit 0
GPU_BUDGET=${GPU_BUDGET:-150}
timeout $((GPU_BUDGET + 70)) python3 -m benchmarks.gpu_check --models "${MODELS:-resnet50,bert-base,gpt2-small}" \
  --precisions "${PRECISIONS-fp32,bf16}" --budget-s "$GPU_BUDGET" --max-batch 128 --memory-cap 1024 \
  --out "$OUT/gpu_check.json" --no-write > "$OUT/gpu_check.log" 2>&1
echo "gpu_check rc=$?"
tail -25 "$OUT/gpu_check.log"
timeout "${SHARDED_S:-110}" python3 -m benchmarks.gpu_sharded_check --out "$OUT/sharded.json" --no-write > "$OUT/sharded.log" 2>&1
echo "sharded rc=$?"
tail -15 "$OUT/sharded.log"
