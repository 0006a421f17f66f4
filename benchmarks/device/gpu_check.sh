#!/usr/bin/env bash
# The prepared GPU check of issue 44 (at most 8 minutes on one H100 or H200).
#
# On the GPU machine: Python 3.12, jax 0.11.2 with its CUDA 13 plugin installed, no
# network. Packages hlo-go needs that are missing there (pymetis, ortools, numba, jraph,
# flax, optax, tensorboardX, ...) come as wheels from .whl/ (see
# benchmarks/device/README.md for how to fetch them here), installed into /tmp/site.
#
#   benchmarks/device/gpu_check.sh            # on a GPU machine: writes benchmarks/results/gpu.json
#   benchmarks/device/gpu_check.sh --dry-run  # here, on CPU: gpu.json says "gpu_run": false
#
# Writes benchmarks/results/gpu.json (and, with $OUT set, a copy and the log under $OUT).
set -uo pipefail
cd "$(dirname "$0")/../.."
PY="${PYTHON:-python3}"
if [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1; then
  missing=$("$PY" - <<'PYEOF'
import importlib.util
names = {"pymetis": "pymetis", "ortools": "ortools", "numba": "numba", "jraph": "jraph",
         "flax": "flax", "optax": "optax", "tensorboardX": "tensorboardX", "rich": "rich",
         "ml_dtypes": "ml_dtypes", "msgpack": "msgpack", "tqdm": "tqdm"}
print(" ".join(sorted(k for k, m in names.items() if importlib.util.find_spec(m) is None)))
PYEOF
)
  if [ -n "$missing" ]; then
    echo "gpu_check: installing wheels from .whl/ (missing: $missing)"
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
  fi
fi
export PYTHONPATH=".${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export XLA_PYTHON_CLIENT_PREALLOCATE=false  # leave GPU memory to what each part asks
log="${OUT:-/tmp}/gpu_check.log"
# gpu_check.py starts no item after its deadline (GPU_CHECK_DEADLINE_S, 400 s) and kills an
# item 40 s after it; this limit is the backstop. A CPU dry run on a busy host takes longer.
limit=480
case " $* " in *" --dry-run "*) limit=1800 ;; esac
timeout "${GPU_CHECK_TIMEOUT_S:-$limit}" "$PY" benchmarks/device/gpu_check.py "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
[ -n "${OUT:-}" ] && cp benchmarks/results/gpu.json "$OUT/" 2>/dev/null
exit "$status"
