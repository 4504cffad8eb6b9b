# Sourced by the scripts that time this machine's real kernels (real_silicon_table.sh,
# timing_repeatability.sh): starts ergon-agent --probe none on a pseudo-terminal with a
# scratch directory of its own, stops it and removes the directory on exit. Sets $work (the
# scratch directory) and $pty (the agent's link). Needs $agent (the program to run).
# ERGON_AGENT_CPUS: run the agent pinned to these CPUs (taskset -c LIST), e.g. 1.
work=$(mktemp -d)
agent_pid=
cleanup() {
  [[ -n $agent_pid ]] && kill "$agent_pid" 2>/dev/null && wait "$agent_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
pin=()
[[ -n ${ERGON_AGENT_CPUS:-} ]] && pin=(taskset -c "$ERGON_AGENT_CPUS")
"${pin[@]}" "$agent" --link pty --probe none --scratch "$work" >"$work/agent.out" 2>"$work/agent.err" &
agent_pid=$!
for _ in $(seq 50); do
  [[ -s $work/agent.out ]] && break
  sleep 0.1
done
pty=$(head -n 1 "$work/agent.out")
[[ -n $pty ]] || { cat "$work/agent.err" >&2; exit 1; }
