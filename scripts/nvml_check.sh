#!/usr/bin/env bash
# The NVML probe against a real GPU under load (docs/boards.md, "NVML on an H100"), on a machine
# with an NVIDIA driver, Python with nvidia-ml-py and torch, and none of the build:
#   ERGON_BUNDLE_EXTRA=build/tests/probes/probes_hardware_test scripts/bundle_host_tools.sh
#   (copy the repository and build-device/bundle.tar.xz there) scripts/nvml_check.sh [BUNDLE]
# Writes nvml2.db, read.txt and step2.csv to $OUT (default /tmp/out).
set -u
bundle=$(realpath -m "${1:-$(dirname "$0")/../build-device/bundle.tar.xz}")
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
mkdir -p /tmp/b && tar -C /tmp/b -xJf "$bundle"
nvml=$(ldconfig -p | awk '/libnvidia-ml.so.1 /{print $NF; exit}')
cp -L "$nvml" /tmp/b/stage/lib/
E=/tmp/b/stage/ergon
ERGON_HARDWARE_TESTS=1 ERGON_PROBE=nvml timeout 30 /tmp/b/stage/run probes_hardware_test 2>&1 | grep -E "readings|OK|FAILED"
( time $E probe read --probe nvml --duration 16s --db "$OUT/nvml2.db" ) >"$OUT/read.txt" 2>&1 &
reader=$!
IDLE_S=2 LOAD_S=3 PYTHONUNBUFFERED=1 timeout 40 python3 scripts/nvml_step_response.py "$OUT/step2.csv"
wait $reader
cat "$OUT/read.txt"
python3 - "$OUT/nvml2.db" <<'PY'
import sqlite3, sys
rows = list(sqlite3.connect(sys.argv[1]).execute("select t_ticks, power_uw from power_samples order by t_ticks"))
print(len(rows), "samples; W:", [round(p / 1e6) for _, p in rows])
dts = [(b[0] - a[0]) / 1e6 for a, b in zip(rows, rows[1:])]
print("intervals ms min/median/max:", min(dts), sorted(dts)[len(dts) // 2], max(dts))
PY
