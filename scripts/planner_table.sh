#!/usr/bin/env bash
# Runs `ergon plan --json` with its defaults (10 s limit, the default gap) on each model x
# objective x budget of a board and prints a Markdown table: nodes, status, gap reached, the
# gap asked, wall time and peak RSS. The figures of docs/performance.md's planner table.
#
#   scripts/planner_table.sh [BOARD] [MODELS...]      (default: pi4, every zoo model)
#   ERGON=build/cli/ergon OBJECTIVES="total poet" BUDGETS="50% 30%" scripts/planner_table.sh pi4 mlp
set -euo pipefail
ergon=${ERGON:-build/cli/ergon}
board=${1:-pi4}
shift || true
models=("$@")
if [ ${#models[@]} -eq 0 ]; then
  mapfile -t models < <("$ergon" models | awk '{print $1}')
fi
objectives=${OBJECTIVES:-total poet}
budgets=${BUDGETS:-50% 30%}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "| model | board | objective | budget | nodes | status | gap | gap asked | wall (s) | peak RSS (MB) |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for model in "${models[@]}"; do
  for objective in $objectives; do
    for budget in $budgets; do
      source=(--model "$model")
      [[ "$model" == *.onnx ]] && source=(--onnx "$model")
      /usr/bin/time -f "%e %M" -o "$tmp/time" "$ergon" plan "${source[@]}" --board "$board" \
        --objective "$objective" --budget "$budget" --json >"$tmp/out" 2>/dev/null || true
      read -r wall rss_kb < <(tail -n 1 "$tmp/time") || { wall=-; rss_kb=0; }
      python3 - "$tmp/out" "$model" "$board" "$objective" "$budget" "$wall" "$rss_kb" <<'PY'
import json, sys
path, model, board, objective, budget, wall, rss_kb = sys.argv[1:]
try:
    j = json.load(open(path))
except Exception:
    print(f"| {model} | {board} | {objective} | {budget} | - | no answer | - | - | {wall} | {int(rss_kb) // 1024} |")
    sys.exit(0)
gap = f"{100 * j['gap']:.2f} %" if j.get('objective_j') is not None else "-"
asked = f"{100 * j['gap_asked']['gap']:.2g} %" if 'gap_asked' in j else "-"
status = j['status'] if j.get('objective_j') is not None else "no schedule"
print(f"| {model} | {board} | {objective} | {budget} | {j['nodes']} | {status} | {gap} | {asked} | {wall} | {int(rss_kb) // 1024} |")
PY
    done
  done
done
