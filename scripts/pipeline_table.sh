#!/usr/bin/env bash
# The pipeline baselines of docs/results.md: for each case, the equal-op split, the split of
# least time per batch (PipeDream-style) and the split of least energy, each with per-stage
# remat/paging (poet) and without (store-all). Prints a Markdown table.
#   scripts/pipeline_table.sh [build/cli/ergon]
set -euo pipefail
ergon=${1:-build/cli/ergon}
cases=(
  "resnet50, 4 x pi4, batch 16, 1.2 GiB each|--model resnet50 --boards pi4,pi4,pi4,pi4 --batch 16 --budget 1.2GiB"
  "bert-base, pi4 + tx2, batch 8, 1 GiB each|--model bert-base --boards pi4,tx2 --batch 8 --budget 1GiB"
  "mlp 128x4 (too big for one), 4 x nrf52840, batch 16|--model mlp:128,128,128,128,10 --boards nrf52840,nrf52840,nrf52840,nrf52840 --batch 16"
)
echo "| case | split | stage schedules | stages begin at op | time per batch | energy per batch | recomputes + page-ins | search |"
echo "|---|---|---|---|---|---|---|---|"
for c in "${cases[@]}"; do
  name=${c%%|*}
  args=${c#*|}
  for split in "equal|--split equal" "least time|--throughput" "least energy|"; do
    sname=${split%%|*}
    sargs=${split#*|}
    for planner in poet store-all; do
      # shellcheck disable=SC2086
      if out=$("$ergon" pipeline $args --microbatches 4 --time-limit 60 --stage-planner "$planner" $sargs --json 2>&1); then
        echo "$out" | python3 -c "
import json, sys
j = json.load(sys.stdin); p = j['prediction']
moves = sum(s['recomputes'] + s['page_ins'] for s in j['stages'])
print('| $name | $sname | $planner | %s | %.4g s | %s%.4g J | %d | %.1f s |' % (
    ', '.join(str(b) for b in j['bounds'][1:-1]), p['time_per_batch_s'],
    '>= ' if p['energy_is_lower_bound'] else '', p['energy_per_batch_j'], moves, j['search']['wall_s']))"
      else
        echo "| $name | $sname | $planner | - | - | - | - | ${out#ergon: } |"
      fi
    done
  done
done
