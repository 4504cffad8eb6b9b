#!/usr/bin/env python3
"""What NVML's three power readings are on a real GPU (docs/boards.md, "NVML on an H100").

Idle, then a matrix-product load for LOAD_S seconds (torch, a child process), then idle again,
while this process polls, as fast as it can, nvmlDeviceGetPowerUsage, the fields
NVML_FI_DEV_POWER_INSTANT (186) and NVML_FI_DEV_POWER_AVERAGE (185), and the energy counter
(nvmlDeviceGetTotalEnergyConsumption). Prints, for each reading: how often its value changes,
how long after the load's first kernel it reaches half and 90 % of its step, and the energy
over the whole trace it implies against the counter. Writes every poll to CSV.

  python3 scripts/nvml_step_response.py [OUT.csv]     (needs nvidia-ml-py and torch; a GPU)
  IDLE_S=3 LOAD_S=4 for the phases' lengths.
Helper only: Ergon itself reads NVML from C++ (probes/nvml.cpp).
"""
import csv
import os
import statistics
import subprocess
import sys
import time

import pynvml as nv

IDLE_S = float(os.environ.get("IDLE_S", "3"))
LOAD_S = float(os.environ.get("LOAD_S", "4"))
FIELD_AVERAGE, FIELD_INSTANT = 185, 186

LOAD = r"""
import sys, time, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
torch.cuda.synchronize()
print("ready", flush=True)
sys.stdin.readline()
print(f"start {time.time():.6f}", flush=True)
end = time.time() + float(sys.argv[1])
while time.time() < end:
    for _ in range(8):
        c = a @ b
    torch.cuda.synchronize()
print(f"stop {time.time():.6f}", flush=True)
"""


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "nvml_step.csv"
    nv.nvmlInit()
    h = nv.nvmlDeviceGetHandleByIndex(0)
    name = nv.nvmlDeviceGetName(h)
    print(f"GPU 0: {name}, driver {nv.nvmlSystemGetDriverVersion()}, NVML {nv.nvmlSystemGetNVMLVersion()}")
    load = subprocess.Popen([sys.executable, "-c", LOAD, str(LOAD_S)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert load.stdout.readline().strip() == "ready"
    rows = []
    t0 = time.time()
    started = False
    while True:
        now = time.time()
        if not started and now - t0 >= IDLE_S:
            load.stdin.write("go\n")
            load.stdin.flush()
            started = True
        if now - t0 >= 2 * IDLE_S + LOAD_S:
            break
        usage = nv.nvmlDeviceGetPowerUsage(h)
        fields = nv.nvmlDeviceGetFieldValues(h, [FIELD_AVERAGE, FIELD_INSTANT])
        vals = [f.value.uiVal if f.nvmlReturn == 0 else None for f in fields]
        energy = nv.nvmlDeviceGetTotalEnergyConsumption(h)
        rows.append((time.time(), usage, vals[0], vals[1], energy))
        time.sleep(0.002)
    lines = load.communicate(timeout=30)[0].split()
    start = float(lines[lines.index("start") + 1])
    stop = float(lines[lines.index("stop") + 1])
    with open(out, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["t_s", "power_usage_mw", "field_average_mw", "field_instant_mw", "energy_mj"])
        for r in rows:
            w.writerow([f"{r[0] - start:.6f}", *["" if v is None else v for v in r[1:]]])
    print(f"{len(rows)} polls over {rows[-1][0] - rows[0][0]:.2f} s; load from 0 to {stop - start:.2f} s "
          f"(t = 0 is the load's first kernel)")

    def changes(col):
        ts = [rows[i][0] for i in range(1, len(rows))
              if rows[i][col] is not None and rows[i][col] != rows[i - 1][col]]
        return [b - a for a, b in zip(ts, ts[1:])]

    def crossing(col, frac):
        idle = statistics.median(r[col] for r in rows if r[0] < start - 0.5)
        busy = statistics.median(r[col] for r in rows if start + 1.5 < r[0] < stop)
        level = idle + frac * (busy - idle)
        for r in rows:
            if r[0] >= start - 0.2 and r[col] >= level:
                return r[0] - start, idle, busy
        return None, idle, busy

    span = rows[-1][0] - rows[0][0]
    counter_j = (rows[-1][4] - rows[0][4]) * 1e-3
    # The counter's own steps: the energy it adds per change, and how often.
    e_changes = changes(4)
    print(f"energy counter: changes every {1e3 * statistics.median(e_changes):.1f} ms (median), "
          f"{counter_j:.1f} J over the trace, mean {counter_j / span:.1f} W")
    for col, label in ((1, "nvmlDeviceGetPowerUsage"), (2, "field POWER_AVERAGE"), (3, "field POWER_INSTANT")):
        if any(r[col] is None for r in rows):
            print(f"{label}: not supported")
            continue
        dts = changes(col)
        half, idle, busy = crossing(col, 0.5)
        ninety, _, _ = crossing(col, 0.9)
        e = sum((b[0] - a[0]) * a[col] for a, b in zip(rows, rows[1:])) * 1e-3
        print(f"{label}: changes every {1e3 * statistics.median(dts):.1f} ms (median); idle {idle / 1e3:.1f} W, "
              f"loaded {busy / 1e3:.1f} W; reaches half the step {1e3 * half:.0f} ms and 90 % "
              f"{1e3 * ninety:.0f} ms after the load's start; energy {e:.1f} J "
              f"({100 * (e / counter_j - 1):+.2f} % against the counter)")
    # The first 0.5 s of the load, as a per-op attribution would see it: each reading's energy
    # against the counter's over the same window.
    win = [r for r in rows if 0 <= r[0] - start <= 0.5]
    if len(win) > 2:
        cj = (win[-1][4] - win[0][4]) * 1e-3
        parts = []
        for col, label in ((1, "usage"), (2, "average"), (3, "instant")):
            if all(r[col] is not None for r in win):
                e = sum((b[0] - a[0]) * a[col] for a, b in zip(win, win[1:])) * 1e-3
                parts.append(f"{label} {100 * (e / cj - 1):+.1f} %")
        print(f"first 0.5 s of the load: counter {cj:.1f} J; " + ", ".join(parts))


if __name__ == "__main__":
    main()
