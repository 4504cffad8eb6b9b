#!/usr/bin/env bash
# How well this machine repeats its own timings (docs/accuracy.md, "Real silicon"): the floor
# under any predicted-against-measured time here. ergon-agent --probe none on a pty, ergon
# record --model M and ergon attribute once, then the same store-all schedule executed on real
# tensors ERGON_REPEATS times back to back (ergon validate --execute --port --budget 100%
# --planner store-all), each run the median of ERGON_ITERATIONS iterations, as every
# validation is timed. Prints each run's median and, for each run after the first, how far it
# is from the run before it: the error of a prediction that took the run before as its costs.
#   scripts/timing_repeatability.sh [MODEL ...]   (default: mlp resnet18-cifar)
#   ERGON_REPEATS (default 12), ERGON_ITERATIONS (default 5)
#   ERGON_AGENT_CPUS=1   the agent pinned to those CPUs (taskset -c)
# Needs build/ (cmake --build --preset default). Run it on a quiet machine.
set -euo pipefail
cd "$(dirname "$0")/.."
ergon=${ERGON_CLI:-build/cli/ergon}
agent=${ERGON_AGENT:-build/agent/ergon-agent}
[[ -x $ergon && -x $agent ]] || { echo "timing_repeatability: build first (cmake --build --preset default)" >&2; exit 1; }
models=("$@")
((${#models[@]} > 0)) || models=(mlp resnet18-cifar)
repeats=${ERGON_REPEATS:-12}
iterations=${ERGON_ITERATIONS:-5}

source scripts/host_agent.sh

echo "| model | runs | iterations each | run medians (ms) | spread of the medians | \|run / run before - 1\|: median | p95 | max |"
echo "|---|---|---|---|---|---|---|---|"
for model in "${models[@]}"; do
  db=$work/$model.db
  "$ergon" record --port "$pty" --model "$model" --db "$db" >"$work/record.log" 2>&1 ||
    { tail -n 3 "$work/record.log" >&2; exit 1; }
  "$ergon" attribute --db "$db" >/dev/null
  : >"$work/medians"
  for _ in $(seq "$repeats"); do
    "$ergon" validate --model "$model" --db "$db" --budget 100% --planner store-all --execute --port "$pty" \
        --iterations "$iterations" --json >"$work/v.json" 2>"$work/v.err" || { tail -n 1 "$work/v.err" >&2; exit 1; }
    python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["measured"]["time_s"])' "$work/v.json" >>"$work/medians"
  done
  python3 - "$model" "$iterations" "$work/medians" <<'PYEOF'
import statistics, sys
model, iterations, path = sys.argv[1], sys.argv[2], sys.argv[3]
m = [float(x) for x in open(path)]
steps = sorted(abs(b / a - 1) for a, b in zip(m, m[1:]))
p95 = steps[min(len(steps) - 1, round(0.95 * (len(steps) - 1)))]
print(f"| {model} | {len(m)} | {iterations} | {', '.join(f'{x * 1e3:.2f}' for x in m)} "
      f"| {100 * (min(m) / statistics.median(m) - 1):+.1f} to {100 * (max(m) / statistics.median(m) - 1):+.1f} % "
      f"| {100 * statistics.median(steps):.1f} % | {100 * p95:.1f} % | {100 * steps[-1]:.1f} % |")
PYEOF
done
