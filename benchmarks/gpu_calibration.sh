#!/usr/bin/env bash
# The GPU calibration in one command, on a machine without network (the lent GPU machine):
#   bash benchmarks/gpu_calibration.sh [--budget-s 420] [any benchmarks/gpu_calibration.py option]
# 1. installs the carried wheels (.whl/ or $SPECAGENT_WHEELS, made by `python3 tools/offline_env.py download`)
#    with pip --no-index --no-deps into a scratch folder, if .whl/ holds any;
# 2. lays specagent out from this working tree (tools/offline_env.py stage: no build, no compiler,
#    the fleet engine from source) and checks that every runtime dependency imports;
# 3. runs benchmarks/gpu_calibration.py with the machine's own python3 and torch, its output
#    copied to $OUT/run.log and the record (record.tar.gz, record.json, record.md) put in $OUT
#    when $OUT is set (the device tool brings $OUT back).
# The budget counts from the Python script's start: setup adds ~10-30 s before it.
set -euo pipefail
PY="${PYTHON:-python3}"
case "$PY" in */*) PY="$(cd "$(dirname "$PY")" && pwd)/$(basename "$PY")" ;; esac  # a relative $PYTHON, from the caller's folder
cd "$(dirname "$0")/.."
if [ -n "${SPECAGENT_SCRATCH:-}" ]; then SCRATCH="$SPECAGENT_SCRATCH"; else
  SCRATCH="$(mktemp -d /tmp/specagent-gpucal.XXXXXX)"; trap 'rm -rf "$SCRATCH"' EXIT; fi
export PYTHONUNBUFFERED=1 SPECAGENT_PURE_PYTHON=1
WHL="${SPECAGENT_WHEELS:-.whl}"
if compgen -G "$WHL/*.whl" > /dev/null; then
  echo "== installing $(ls "$WHL"/*.whl | wc -l) carried wheels offline into $SCRATCH/site"
  "$PY" tools/offline_env.py install "$WHL" "$SCRATCH/site"
  export PYTHONPATH="$SCRATCH/site${PYTHONPATH:+:$PYTHONPATH}"
fi
echo "== staging specagent from $(pwd) into $SCRATCH/stage"
"$PY" tools/offline_env.py stage "$SCRATCH/stage" > /dev/null
export PYTHONPATH="$SCRATCH/stage${PYTHONPATH:+:$PYTHONPATH}"
(cd "$SCRATCH" && "$PY" "$OLDPWD/tools/offline_env.py" check) || {
  echo "gpu_calibration.sh: runtime dependencies missing (above): download their wheels with 'python3 tools/offline_env.py download' and carry .whl" >&2
  exit 2
}
(cd "$SCRATCH" && "$PY" -c "import specagent, sys; assert specagent.__file__.startswith('$SCRATCH/stage'), specagent.__file__")
ARGS=("$@")
if [ -n "${OUT:-}" ]; then
  ARGS+=(--out "$OUT")
  set -o pipefail
  "$PY" benchmarks/gpu_calibration.py "${ARGS[@]}" 2>&1 | tee "$OUT/run.log"
else
  "$PY" benchmarks/gpu_calibration.py "${ARGS[@]}"
fi
