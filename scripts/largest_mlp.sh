#!/usr/bin/env bash
# The largest one-hidden-layer MLP (mlp:IN,H,10) a board can train in a memory budget, by
# bisection on H: once planning only store-all (no paging, no recomputation), once with POET.
#   scripts/largest_mlp.sh BOARD BUDGET INPUTS BATCH     e.g. mkr1000 16KiB 64 1
# The budget covers parameters, gradients and optimizer state too (--objective total).
set -euo pipefail
cd "$(dirname "$0")/.."
board=${1:?usage: scripts/largest_mlp.sh BOARD BUDGET INPUTS BATCH}
budget=${2:?budget, e.g. 16KiB}
inputs=${3:?inputs, e.g. 64}
batch=${4:-1}
ergon=build/cli/ergon
[[ -x $ergon ]] || { echo "largest_mlp: build ergon first (cmake --build --preset default)" >&2; exit 1; }

fits() {  # planner hidden -> exit 0 when a schedule exists
  "$ergon" plan --model "mlp:$inputs,$2,10" --batch "$batch" --board "$board" --budget "$budget" \
    --objective total --planner "$1" --time-limit 10 --json 2>/dev/null |
    grep -q '"objective_j": [0-9]'
}

for planner in store-all poet; do
  lo=0 hi=4096
  while ((hi - lo > 1)); do
    mid=$(((lo + hi) / 2))
    if fits "$planner" "$mid"; then lo=$mid; else hi=$mid; fi
  done
  echo "$board, $budget, mlp:$inputs,H,10 at batch $batch, $planner: largest H = $lo"
done
