#!/usr/bin/env bash
# Plans every model of the ONNX corpus (tests/data/onnx) on the TX2's published profile at
# 50 % of its store-all activations and prints the Markdown table of docs/planner.md.
#   scripts/onnx_corpus_table.sh [TIME_LIMIT_S]     (default 10; needs build/cli/ergon)
#   ONLY=a.onnx,b.onnx scripts/onnx_corpus_table.sh   (those files only)
set -euo pipefail
cd "$(dirname "$0")/.."
limit=${1:-10}
ergon=build/cli/ergon
[[ -x $ergon ]] || { echo "onnx_corpus_table: build first (cmake --build --preset default)" >&2; exit 1; }
echo "| file | training nodes | parameters | store-all activations | plan at 50 % (tx2, total) | gap | solve time |"
echo "|---|---|---|---|---|---|---|"
python3 - "$limit" "$ergon" <<'PY'
import json, os, subprocess, sys
limit, ergon = sys.argv[1], sys.argv[2]
manifest = json.load(open("tests/data/onnx/manifest.json"))
only = set(filter(None, os.environ.get("ONLY", "").split(",")))
for m in manifest["models"]:
    if only and m["file"] not in only:
        continue
    path = "tests/data/onnx/" + m["file"]
    cmd = [ergon, "plan", "--onnx", path, "--board", "tx2", "--budget", "50%",
           "--time-limit", limit, "--json"]
    if m["file"] == "vit_b_16_inputs.onnx":
        cmd += ["--onnx-input", m["data_input"]]
    run = subprocess.run(cmd, capture_output=True, text=True)
    params = f'{m["parameters"] / 1e6:.2f} M'
    d = json.loads(run.stdout) if run.stdout.strip() else {}
    if "why" in d:
        print(f'| {m["file"]} | {d["nodes"]} | {params} | {d["store_all"]["peak_bytes"] / 2**20:.2f} MiB | '
              f'refused: {d["why"]} | | |')
        continue
    if run.returncode != 0 or not d:
        why = (run.stderr.strip().splitlines() or ["no output"])[-1].replace("|", "/")
        print(f'| {m["file"]} | | {params} | | {why} | | |')
        continue
    store = d["store_all"]
    vs = 100 * (d["total_energy_j"] / store["energy_j"] - 1)
    print(f'| {m["file"]} | {d["nodes"]} | {params} | {store["peak_bytes"] / 2**20:.2f} MiB | '
          f'{d["total_energy_j"]:.4g} J ({vs:+.2f} % vs store-all), peak {d["peak_bytes"] / 2**20:.2f} MiB | '
          f'{100 * d["gap"]:.2g} % ({d["status"]}) | {d["solve_time_s"]:.1f} s |')
PY
