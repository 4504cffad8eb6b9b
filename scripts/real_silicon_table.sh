#!/usr/bin/env bash
# Predicted against measured time on this machine's real kernels (docs/accuracy.md, "Real
# silicon"): for each model, ergon-agent --probe none on a pty, ergon record --model M (its own
# layer shapes, the plan passed ERGON_PROFILE_LOOPS times, default 3), ergon attribute, then
# ergon validate --execute at each budget (the objective time: the host's costs are times only),
# timing ERGON_ITERATIONS iterations (default 5). Prints one Markdown row per model and budget:
# predicted and measured iteration time (the median iteration), its error, the range of the
# iterations' errors, the median and p95 of |error| per step (each step's median time), and
# store-all timed right after on the same costs: its error (how far the machine's speed was
# from the costs') and the schedule's time over store-all's, predicted against measured.
# Then each budget but 100 % again, planned on costs measured inside iterations (--costs
# iteration: the store-all schedule's computes and the page-all schedule's transfers, both
# executed again just before, stand for their shapes; the other budgets' executions recompute
# or page, so they are never costs).
#   scripts/real_silicon_table.sh [MODEL ...]   (default: mlp resnet18-cifar mobilenetv2-cifar bert-tiny)
#   ERGON_BUDGETS="100% 75% 50%"   budgets to validate
#   ERGON_STEP_TABLE=1   also print every step of at least 100 us: predicted, measured, their ratio
#   ERGON_CLI, ERGON_AGENT   the programs to run (default: build/cli/ergon, build/agent/ergon-agent;
#                            scripts/bundle_host_tools.sh makes a bundle to run them elsewhere)
#   ERGON_TABLE_KEEP=DIR     also keep each validation's JSON there (MODEL-BUDGET.json)
# Needs build/ (cmake --build --preset default). Time it on a quiet machine: every figure is a
# wall-clock measurement, and other load shows up in it.
set -euo pipefail
cd "$(dirname "$0")/.."
ergon=${ERGON_CLI:-build/cli/ergon}
agent=${ERGON_AGENT:-build/agent/ergon-agent}
[[ -x $ergon && -x $agent ]] || { echo "real_silicon_table: build first (cmake --build --preset default)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "real_silicon_table: python3 is missing" >&2; exit 1; }
models=("$@")
((${#models[@]} > 0)) || models=(mlp resnet18-cifar mobilenetv2-cifar bert-tiny)
read -r -a budgets <<<"${ERGON_BUDGETS:-100% 75% 50%}"
loops=${ERGON_PROFILE_LOOPS:-3}
iterations=${ERGON_ITERATIONS:-5}

source scripts/host_agent.sh

echo "| model | budget | steps | predicted | measured (median) | iteration error | iterations' errors | per-step \|error\| median | p95 | with the cache model: predicted | error | store-all right after: error | error over store-all |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
for model in "${models[@]}"; do
  db=$work/$model.db
  "$ergon" record --port "$pty" --model "$model" --loops "$loops" --db "$db" >"$work/record.log" 2>&1 ||
    { tail -n 3 "$work/record.log" >&2; exit 1; }
  "$ergon" attribute --db "$db" >/dev/null
  for budget in "${budgets[@]}"; do
    if ! "$ergon" validate --model "$model" --db "$db" --budget "$budget" --gap 0.01 --execute --port "$pty" \
        --iterations "$iterations" --json >"$work/v.json" 2>"$work/v.err"; then
      echo "| $model | $budget | - | - | - | $(tail -n 1 "$work/v.err") | - | - | - | - | - | - | - |"
      continue
    fi
    cp "$work/v.json" "$work/$model-${budget%\%}.json"
    # validate attributes its run: the 100 % (store-all) schedule's steps become costs for
    # --costs iteration, below; the other budgets' schedules recompute or page, and steps of
    # such schedules are never costs, so no schedule is predicted from its own steps.
    [[ -n ${ERGON_TABLE_KEEP:-} ]] && mkdir -p "$ERGON_TABLE_KEEP" && cp "$work/v.json" "$ERGON_TABLE_KEEP/$model-${budget%\%}.json"
    if [[ -n ${ERGON_STEP_TABLE:-} ]]; then
      python3 - "$model" "$budget" "$work/v.json" >>"$work/steps.md" <<'EOF'
import json, sys
model, budget, path = sys.argv[1:4]
for s in json.load(open(path))["step_times"]:
    if s["predicted_s"] >= 1e-4:
        cached = (f"{s['cached_fraction']:.2f} | {s['cached_predicted_s'] * 1e6:.0f} us"
                  if s.get("cached_fraction") is not None else "- | -")
        print(f"| {model} | {budget} | {s['kind']} {s['node']} | {s['predicted_s'] * 1e6:.0f} us "
              f"| {s['measured_s'] * 1e6:.0f} us | {s['measured_s'] / s['predicted_s']:.2f} | {cached} |")
EOF
    fi
    python3 - "$model" "$budget" "$work/v.json" <<'EOF'
import json, sys
model, budget, path = sys.argv[1:4]
v = json.load(open(path))
p, m = v["predicted"]["time_s"], v["measured"]["time_s"]
s = v["step_time_error"]
its = v["iteration_times_s"]
spread = f"{100 * (min(its) / p - 1):+.1f} to {100 * (max(its) / p - 1):+.1f} %" if its else "-"
c = v.get("cache_model")
u = c["time_s"] if c else None
uncached = f"{u * 1e3:.2f} ms | {100 * (m / u - 1):+.1f} %" if u else "- | -"
r = v.get("store_all_time")
# Store-all timed right after on the same costs: the machine's speed against the costs', and
# the schedule's time over store-all's, predicted against measured, which leaves that out.
reference = f"{r['error_pct']:+.1f} % | {v['time_error_over_store_all_pct']:+.1f} %" if r else "- | -"
print(f"| {model} | {budget} | {v['steps']} | {p * 1e3:.2f} ms | {m * 1e3:.2f} ms | {100 * (m / p - 1):+.1f} % "
      f"| {spread} | {s['median_pct']:.1f} % | {s['p95_pct']:.1f} % | {uncached} | {reference} |")
EOF
  done
  # The profile again, after the validations: how far the machine's own speed moved while
  # they ran (each op's time in the second profile against the first, and the sum over the
  # ops). A validation cannot be closer than this.
  # Costs measured inside iterations: each other budget planned and validated again with
  # --costs iteration, where the store-all schedule's executed computes and the page-all
  # schedule's executed transfers stand for their shapes, both executed again just before
  # (the latest execution stands: the machine as it runs now).
  if [[ -s $work/$model-100.json ]]; then
    for budget in "${budgets[@]}"; do
      [[ $budget == 100% ]] && continue
      for calibration in page-all store-all; do
        "$ergon" validate --model "$model" --db "$db" --budget 100% --planner "$calibration" --execute --port "$pty" \
            --iterations "$iterations" --json >/dev/null 2>"$work/v.err" || { tail -n 1 "$work/v.err" >&2; exit 1; }
      done
      if ! "$ergon" validate --model "$model" --db "$db" --budget "$budget" --gap 0.01 --execute --port "$pty" \
          --costs iteration --iterations "$iterations" --json >"$work/vi.json" 2>"$work/v.err"; then
        echo "| $model | $budget | - | - | - | $(tail -n 1 "$work/v.err") | - | - | - | - | - |" >>"$work/iteration.md"
        continue
      fi
      [[ -n ${ERGON_TABLE_KEEP:-} ]] && cp "$work/vi.json" "$ERGON_TABLE_KEEP/$model-${budget%\%}-iteration.json"
      python3 - "$model" "$budget" "$work/vi.json" "$work/$model-${budget%\%}.json" >>"$work/iteration.md" <<'EOF'
import json, os, sys
model, budget, path, profile_path = sys.argv[1:5]
v = json.load(open(path))
p, m = v["predicted"]["time_s"], v["measured"]["time_s"]
before = "-"
if os.path.exists(profile_path):
    w = json.load(open(profile_path))
    before = f"{100 * (w['measured']['time_s'] / w['predicted']['time_s'] - 1):+.1f} %"
# Where the error lies: the steps' medians summed by kind, predicted -> measured.
sums = {}
for st in v["step_times"]:
    kind = "paging" if st["kind"] in ("page-in", "page-out") else "compute"
    a = sums.setdefault(kind, [0.0, 0.0])
    a[0] += st["predicted_s"]
    a[1] += st["measured_s"] or 0
part = lambda k: f"{sums[k][0] * 1e3:.2f} -> {sums[k][1] * 1e3:.2f} ms" if k in sums else "-"
r = v.get("store_all_time")
reference = f"{r['error_pct']:+.1f} % | {v['time_error_over_store_all_pct']:+.1f} %" if r else "- | -"
print(f"| {model} | {budget} | {v['steps']} | {p * 1e3:.2f} ms | {m * 1e3:.2f} ms | {100 * (m / p - 1):+.1f} % | {before} "
      f"| {part('compute')} | {part('paging')} | {reference} |")
EOF
    done
  fi
  "$ergon" record --port "$pty" --model "$model" --loops "$loops" --db "$db.again" >"$work/record.log" 2>&1 ||
    { tail -n 3 "$work/record.log" >&2; exit 1; }
  "$ergon" attribute --db "$db.again" >/dev/null
  # Run 1 of each database is its profile; the first also holds the validations' runs, whose
  # op ids number their schedules' steps, not the profile's ops.
  "$ergon" costs --db "$db" --run 1 --json >"$work/c1.json"
  "$ergon" costs --db "$db.again" --run 1 --json >"$work/c2.json"
  python3 - "$model" "$work/c1.json" "$work/c2.json" >>"$work/repeat.md" <<'EOF'
import json, statistics, sys
model, a, b = sys.argv[1:4]
key = lambda c: (c["op_id"], c["phase"])
first = {key(c): c["time_s"] for c in json.load(open(a)) if c["kind"] != "idle" and c.get("copies", 0) == 0}
again = {key(c): c["time_s"] for c in json.load(open(b)) if c["kind"] != "idle" and c.get("copies", 0) == 0}
both = [k for k in first if k in again and first[k] > 0]
ratios = [again[k] / first[k] - 1 for k in both]
total = sum(again[k] for k in both) / sum(first[k] for k in both) - 1
print(f"| {model} | {len(both)} | {100 * total:+.1f} % | {100 * statistics.median(abs(r) for r in ratios):.1f} % "
      f"| {100 * min(ratios):+.1f} % | {100 * max(ratios):+.1f} % |")
EOF
done
echo
echo "The profile recorded again after the validations, against the first (the machine's own drift):"
echo
echo "| model | op shapes | sum of op times | per-op \|change\| median | least | most |"
echo "|---|---|---|---|---|---|"
cat "$work/repeat.md"
if [[ -s $work/iteration.md ]]; then
  echo
  echo "Planned and validated again on costs measured inside iterations (--costs iteration: the store-all schedule's computes and the page-all schedule's transfers, executed just before):"
  echo
  echo "| model | budget | steps | predicted | measured (median) | iteration error | error from the profile (above) | compute steps | paging steps | store-all right after: error | error over store-all |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|"
  cat "$work/iteration.md"
fi
if [[ -s $work/steps.md ]]; then
  echo
  echo "Each step of at least 100 us (its median over the iterations):"
  echo
  echo "| model | budget | step | predicted | measured | measured / predicted | cached share | with the cache model |"
  echo "|---|---|---|---|---|---|---|---|"
  cat "$work/steps.md"
fi
