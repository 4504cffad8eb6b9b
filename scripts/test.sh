#!/usr/bin/env bash
# Installs what is missing, builds everything, runs every test (no hardware), then builds the
# libFuzzer target with clang and fuzzes the protocol decoder for a bounded time.
#   ERGON_FUZZ_SECONDS (default 60)   ERGON_HARDWARE_TESTS=1 also runs tests that need boards
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
jobs=$(nproc)

cmake --preset default
cmake --build --preset default -j "$jobs"
label_filter=(-LE hardware)
[[ ${ERGON_HARDWARE_TESTS:-0} == 1 ]] && label_filter=()
ctest --test-dir build --output-on-failure -j "$jobs" "${label_filter[@]}"

cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j "$jobs"
ERGON_FUZZ_SECONDS=${ERGON_FUZZ_SECONDS:-60} ctest --test-dir build-fuzz --output-on-failure -L fuzz
