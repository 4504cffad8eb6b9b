#!/usr/bin/env bash
# Runs the cross-built ergon-agent (build-arm64/) under user-mode QEMU on a TCP port, with a
# simulated INA219, and has the host's ergon validate execute a ResNet-18-CIFAR schedule on
# it: the run fails unless the agent executes every step and its gradients equal store-all's.
#   ERGON_ARM64_MODEL / ERGON_ARM64_BATCH   what to execute (default resnet18-cifar, 1)
set -euo pipefail
cd "$(dirname "$0")/.."
agent=build-arm64/agent/ergon-agent
ergon=build/cli/ergon
for f in "$agent" "$ergon"; do
  [[ -x $f ]] || { echo "check_arm64_agent: $f is missing; build both presets first" >&2; exit 1; }
done
command -v qemu-aarch64 >/dev/null || { echo "check_arm64_agent: qemu-aarch64 is missing (scripts/setup.sh)" >&2; exit 1; }

work=$(mktemp -d)
agent_pid=
cleanup() {
  [[ -n $agent_pid ]] && kill "$agent_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# Port 0: the agent picks a free one and prints its link first.
qemu-aarch64 -L /usr/aarch64-linux-gnu "$agent" --link tcp:127.0.0.1:0 --probe sim:ina219 --board pi4 \
  --scratch "$work" >"$work/agent.out" 2>"$work/agent.err" &
agent_pid=$!
link=
for _ in $(seq 100); do
  link=$(head -n 1 "$work/agent.out" 2>/dev/null || true)
  [[ $link == tcp:* ]] && break
  kill -0 "$agent_pid" 2>/dev/null || { cat "$work/agent.err" >&2; exit 1; }
  sleep 0.1
done
[[ $link == tcp:* ]] || { echo "check_arm64_agent: the agent did not start" >&2; cat "$work/agent.err" >&2; exit 1; }

echo "check_arm64_agent: arm64 ergon-agent (QEMU) on $link"
# One timed iteration: this checks the arm64 build's kernels and gradients; QEMU's timings are
# not truth, and each iteration under it takes tens of seconds.
"$ergon" validate --model "${ERGON_ARM64_MODEL:-resnet18-cifar}" --batch "${ERGON_ARM64_BATCH:-1}" \
  --board pi4 --budget 50% --time-limit 5 --execute --iterations 1 --port "$link" --db "$work/ergon.db"
