#!/usr/bin/env bash
# Installs what is missing, builds everything (ergon-agent for arm64 too, and the Cortex-M
# firmware images, with their sizes, one of them run under qemu-system-arm), fuzzes the protocol
# decoder, the tegrastats parser, the ONNX importer, the graph JSON reader, the PPK2 metadata,
# --probe specs and board descriptor files for a bounded time (libFuzzer, clang, ASan + UBSan), then
# runs every test that needs no hardware.
#   ERGON_FUZZ_SECONDS   fuzzing time (default 60; 0 skips fuzzing)
#   ERGON_HARDWARE_TESTS=1 also runs tests labelled `hardware` (boards attached)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
jobs=$(nproc)

# Includes follow the module order of docs/architecture.md (prints any that do not).
scripts/check_layers.sh

cmake --preset default
cmake --build --preset default -j "$jobs"

# The board agent cross-built for 64-bit Arm, so a change that breaks it fails here.
cmake --preset arm64-agent >/dev/null
cmake --build --preset arm64-agent -j "$jobs"

# The Cortex-M firmware images (nRF52840, SAMD21 / MKR1000, and Arm's MPS2 AN386 board that
# qemu-system-arm emulates): they must link and fit.
for target in nrf52840 samd21 mps2_an386; do
  cmake --preset "firmware-$target" >/dev/null
  cmake --build --preset "firmware-$target" -j "$jobs" >/dev/null
done
scripts/firmware_size.sh
# The MPS2 AN386 image itself under qemu-system-arm, recorded by ergon record over its UART:
# every span and sample arrives and the clock syncs (about 10 s).
scripts/check_qemu_firmware.sh

fuzz_seconds=${ERGON_FUZZ_SECONDS:-60}
if [[ $fuzz_seconds != 0 ]]; then
  cmake --preset fuzz >/dev/null
  cmake --build --preset fuzz -j "$jobs"
  # Two fuzzers at a time on two cores: each still gets a core for its share, and the six take
  # half the wall time they did one after another (about 90 s instead of 3 minutes).
  ERGON_FUZZ_SECONDS=$fuzz_seconds ctest --test-dir build-fuzz --output-on-failure -L fuzz -j "$jobs"
fi

label_filter=(-LE hardware)
[[ ${ERGON_HARDWARE_TESTS:-0} == 1 ]] && label_filter=()
ctest --test-dir build --output-on-failure -j "$jobs" "${label_filter[@]}"

# The arm64 agent itself, under user-mode QEMU: it executes a ResNet-18 schedule that
# recomputes and pages and must give the store-all gradients (about 30 s).
scripts/check_arm64_agent.sh
