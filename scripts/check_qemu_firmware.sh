#!/usr/bin/env bash
# Runs the Cortex-M firmware image for Arm's MPS2 AN386 board (build-mps2_an386/) under
# Debian's qemu-system-arm (-M mps2-an386: Cortex-M4 with FPU, its UART0 on a pseudo-terminal)
# and records its profile plan with `ergon record` (build/): the image's own vector table,
# reset handler, linker script, UART interrupt and timer on an emulated CPU, with the same
# firmware core as the nRF52840 and SAMD21 images. Fails unless the run completes, every span
# and power sample the firmware sent arrives (no frame lost, no CRC error, every plan entry
# measured), and the clock sync points give a fitted clock (not the nominal fallback). Builds
# nothing; prints one summary line. Then records a link test (protocol v6) over the same UART and
# checks its six link costs. QEMU runs in real time (no -icount), so the board's timer
# and the host's clock can be synchronized. Bounded: about 11 s, at most 150 s.
#   ERGON_QEMU_KEEP=DIR   keep the database and logs in DIR (else a temporary directory)
set -euo pipefail
cd "$(dirname "$0")/.."
start_s=$SECONDS
elf=build-mps2_an386/devices/cortexm/targets/ergon-firmware-mps2_an386.elf
ergon=build/cli/ergon
fail() { echo "check_qemu_firmware: $*" >&2; exit 1; }
[[ -f $elf ]] || fail "$elf is missing (cmake --build --preset firmware-mps2_an386)"
[[ -x $ergon ]] || fail "$ergon is missing (cmake --build --preset default)"
command -v qemu-system-arm >/dev/null || fail "qemu-system-arm is missing (scripts/setup.sh)"
command -v sqlite3 >/dev/null || fail "sqlite3 is missing (scripts/setup.sh)"

if [[ -n ${ERGON_QEMU_KEEP:-} ]]; then
  work=$ERGON_QEMU_KEEP
  mkdir -p "$work"
  rm -f "$work/qemu.db"
else
  work=$(mktemp -d)
fi
qemu_pid=
cleanup() {
  if [[ -n $qemu_pid ]]; then
    kill "$qemu_pid" 2>/dev/null || true
    wait "$qemu_pid" 2>/dev/null || true
  fi
  [[ -n ${ERGON_QEMU_KEEP:-} ]] || rm -rf "$work"
}
trap cleanup EXIT

# The UART on a pty whose path QEMU prints; no monitor, no display. `timeout` bounds QEMU too,
# should this script be killed before its trap runs.
timeout 100 qemu-system-arm -M mps2-an386 -nographic -monitor none -serial pty -kernel "$elf" \
  >"$work/qemu.log" 2>&1 &
qemu_pid=$!
pty=
for _ in $(seq 100); do
  pty=$(grep -o '/dev/pts/[0-9]*' "$work/qemu.log" 2>/dev/null | head -n 1 || true)
  [[ -n $pty ]] && break
  kill -0 "$qemu_pid" 2>/dev/null || { cat "$work/qemu.log" >&2; fail "QEMU exited"; }
  sleep 0.1
done
[[ -n $pty ]] || { cat "$work/qemu.log" >&2; fail "QEMU printed no pty within 10 s"; }

# One pass over the plan the board's Hello asks for; --duration only bounds it.
db=$work/qemu.db
rc=0
timeout --kill-after=5 60 "$ergon" record --port "$pty" --db "$db" --loops 1 --duration 45s \
  >"$work/record.log" 2>&1 || rc=$?
if ((rc != 0)); then
  tail -n 5 "$work/record.log" >&2
  kill -0 "$qemu_pid" 2>/dev/null || cat "$work/qemu.log" >&2
  fail "ergon record failed (exit $rc)"
fi

q() { sqlite3 -batch -noheader "$db" "$1"; }
IFS='|' read -r run status board name lost crc malformed spans_sent samples_sent < <(q \
  "SELECT r.id, r.status, b.kind, b.name, r.frames_lost, r.crc_errors, r.malformed,
          r.device_spans_sent, r.device_samples_sent
   FROM runs r JOIN boards b ON b.id = r.board_id ORDER BY r.id DESC LIMIT 1") || true
[[ -n ${run:-} ]] || fail "no run was recorded ($(tail -n 1 "$work/record.log"))"
spans=$(q "SELECT count(*) FROM op_spans WHERE run_id = $run")
ops=$(q "SELECT count(*) FROM run_ops WHERE run_id = $run")
unmeasured=$(q "SELECT count(*) FROM run_ops o WHERE o.run_id = $run AND NOT EXISTS
                (SELECT 1 FROM op_spans s WHERE s.run_id = o.run_id AND s.op_id = o.op_id)")
samples=$(q "SELECT count(*) FROM power_samples WHERE run_id = $run")
syncs=$(q "SELECT count(*) FROM sync_points WHERE run_id = $run")

problems=()
[[ $status == completed ]] || problems+=("run $run is $status, not completed")
((lost == 0 && crc == 0 && malformed == 0)) ||
  problems+=("$lost frames lost, $crc CRC errors, $malformed malformed messages")
[[ -n $spans_sent && $spans == "$spans_sent" ]] ||
  problems+=("$spans spans arrived of ${spans_sent:-unknown} the firmware sent")
((ops > 0 && unmeasured == 0)) || problems+=("$unmeasured of $ops plan entries have no span")
[[ -n $samples_sent && $samples == "$samples_sent" && $samples -gt 0 ]] ||
  problems+=("$samples power samples arrived of ${samples_sent:-unknown} the firmware sent")
((syncs > 0)) || problems+=("no clock sync points")

# Attribution prints the clock fit: "clock: drift +3.1 ppm from 15 of 20 sync exchanges
# (residual rms 11357 ns)" when fitted, else why it fell back to the nominal tick rate: too
# few usable exchanges, or a drift beyond any crystal (over 500 ppm), which is what a tick
# rate other than the timer's, or a broken 64-bit extension of it, gives (QEMU's timer
# follows the host's clock: the fits here are within a few tens of ppm).
timeout 15 "$ergon" attribute --db "$db" --run "$run" >"$work/attribute.log" 2>&1 ||
  problems+=("ergon attribute failed: $(tail -n 1 "$work/attribute.log")")
clock=$(grep -m 1 -E '^ +clock: ' "$work/attribute.log" | sed -E 's/^ +clock: //' || true)
drift= rms=
if [[ $clock =~ ^drift\ ([-+0-9.]+)\ ppm\ from\ [0-9]+\ of\ [0-9]+\ sync\ exchanges\ \(residual\ rms\ ([0-9]+)\ ns\) ]]; then
  drift=${BASH_REMATCH[1]} rms=${BASH_REMATCH[2]}
else
  problems+=("clock not fitted: ${clock:-no clock line from ergon attribute}")
fi
windows=$(grep -o -E '[0-9]+ windows attributed' "$work/attribute.log" | grep -o -E '^[0-9]+' || echo "?")

# Then its link (protocol v6): transfers of three sizes each way over the emulated UART, timed
# by the firmware, fitted by ergon attribute into link costs.
link_rc=0
timeout --kill-after=5 60 "$ergon" record --port "$pty" --db "$db" --link-test --link-kind qemu-uart \
  >"$work/link.log" 2>&1 || link_rc=$?
link_run=$(q "SELECT max(id) FROM runs")
link_line=
if ((link_rc != 0)) || [[ $link_run == "$run" ]]; then
  problems+=("ergon record --link-test failed: $(tail -n 1 "$work/link.log")")
else
  timeout 15 "$ergon" attribute --db "$db" --run "$link_run" >>"$work/attribute.log" 2>&1 ||
    problems+=("ergon attribute of the link test failed")
  link_rows=$(q "SELECT count(*) FROM link_costs WHERE link = 'qemu-uart'")
  ((link_rows == 6)) || problems+=("$link_rows link costs of the 6 the link test measures")
  link_line=$(q "SELECT group_concat(direction || ' ' || printf('%.1f', bandwidth_bytes_per_s / 1e3) || ' kB/s', ', ')
                 FROM (SELECT DISTINCT direction, bandwidth_bytes_per_s FROM link_costs WHERE link = 'qemu-uart')")
fi

if ((${#problems[@]} > 0)); then
  tail -n 3 "$work/record.log" >&2
  cat "$work/attribute.log" >&2
  "$ergon" runs --db "$db" --events "$run" >&2 || true
  printf 'check_qemu_firmware: %s\n' "${problems[@]}" >&2
  exit 1
fi
qemu_version=$(qemu-system-arm --version | head -n 1 | grep -o -E '[0-9]+\.[0-9]+(\.[0-9]+)?' | head -n 1 || true)
echo "check_qemu_firmware: ok: $name ($board plan) under QEMU ${qemu_version:-?}: run $run $status, $spans/$spans_sent spans," \
  "$samples/$samples_sent samples (modelled INA219), $windows of $spans windows attributed, 0 lost, 0 CRC," \
  "clock fitted from $syncs sync points (drift $drift ppm, rms $rms ns); link test: $link_line," \
  "$((SECONDS - start_s)) s"
