#!/bin/sh
# A stand-in for NVIDIA's tegrastats (tests only): prints the recorded TX2 lines, one every
# --interval milliseconds, until killed. FAKE_TEGRASTATS_LINES=N stops after N lines with
# status 3, like a tegrastats that dies. FAKE_TEGRASTATS_FILE=NAME prints that file of this
# folder instead.
interval=1000
while [ $# -gt 0 ]; do
  case "$1" in --interval) interval=$2; shift ;; esac
  shift
done
dir=$(dirname "$0")
pause=$(awk "BEGIN { print $interval / 1000 }")
n=0
while :; do
  while IFS= read -r line; do
    echo "$line"
    n=$((n + 1))
    if [ -n "$FAKE_TEGRASTATS_LINES" ] && [ "$n" -ge "$FAKE_TEGRASTATS_LINES" ]; then
      echo "tegrastats: simulated failure" >&2
      exit 3
    fi
    sleep "$pause"
  done < "$dir/${FAKE_TEGRASTATS_FILE:-tx2_jetpack4.txt}"
done
