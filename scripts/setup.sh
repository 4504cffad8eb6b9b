#!/usr/bin/env bash
# Installs every Debian package Ergon needs to build, test and run. Idempotent: installs only
# what is missing, and runs apt-get update only when something is.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config
  clang libclang-rt-14-dev            # libFuzzer target and sanitizers
  libboost-dev                        # Boost.Asio (serial ports, TCP)
  libsqlite3-dev sqlite3
  libpq-dev postgresql                # the lab's shared cost database; its tests start their own server
  slurm-wlm munge                     # ergon pareto --slurm; its tests start a single-node cluster
  libcli11-dev nlohmann-json3-dev libfmt-dev libspdlog-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  coinor-libcbc-dev libeigen3-dev     # MILP solver (planner), linear algebra
  libonnx-dev libprotobuf-dev protobuf-compiler   # ONNX model import
  libusb-1.0-0-dev                    # USB-I2C bridges (MCP2221A), USB discovery
  libsigrok-dev sigrok-cli libzip-dev # sigrok: probes (its demo driver in CI), .sr session export, read back by sigrok-cli
  g++-aarch64-linux-gnu               # ergon-agent for 64-bit Arm boards (preset arm64-agent)
  qemu-user                           # runs that arm64 ergon-agent in CI (scripts/check_arm64_agent.sh)
  gcc-arm-none-eabi libnewlib-arm-none-eabi libstdc++-arm-none-eabi-newlib  # Cortex-M firmware
  qemu-system-arm                     # runs the MPS2 AN386 firmware image in CI (scripts/check_qemu_firmware.sh)
  qt6-base-dev qt6-charts-dev libqt6opengl6-dev libgl-dev   # the dashboard (Qt 6 Widgets + Charts)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
((${#missing[@]} == 0)) && exit 0

sudo=()
[[ $(id -u) -ne 0 ]] && sudo=(sudo)
echo "setup: installing ${missing[*]}"
"${sudo[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
