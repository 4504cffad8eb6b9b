#!/usr/bin/env bash
# Cross-builds ergon-agent for 64-bit Arm boards (Raspberry Pi 4 on a 64-bit OS, Jetson) and
# packs it with a systemd unit: copy the tarball to the board, unpack, and follow INSTALL.
#   scripts/package_agent.sh [OUT_DIR]      (default: dist/)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-dist}
scripts/setup.sh
cmake --preset arm64-agent >/dev/null
cmake --build --preset arm64-agent -j "$(nproc)"

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/ergon-agent"
aarch64-linux-gnu-strip -o "$stage/ergon-agent/ergon-agent" build-arm64/agent/ergon-agent
cat > "$stage/ergon-agent/ergon-agent.service" <<'UNIT'
[Unit]
Description=Ergon device agent (profiles ops and streams power to ergon record)
After=network-online.target

[Service]
# Edit the probe for your board: ina219 on a Pi 4, tegrastats or ina3221 on a Jetson.
ExecStart=/usr/local/bin/ergon-agent --link tcp:0.0.0.0:7000 --probe ina219:/dev/i2c-1@0x40,shunt=0.01 --board pi4 --scratch /var/tmp
Restart=on-failure

[Install]
WantedBy=multi-user.target
UNIT
cat > "$stage/ergon-agent/INSTALL" <<'TEXT'
sudo install -m 755 ergon-agent /usr/local/bin/
sudo install -m 644 ergon-agent.service /etc/systemd/system/   # edit --probe first
sudo systemctl enable --now ergon-agent
# then, on the desktop: ergon record --port tcp:BOARD:7000 --db lab.db
TEXT
mkdir -p "$out"
tar -C "$stage" -czf "$out/ergon-agent-arm64.tar.gz" ergon-agent
echo "$out/ergon-agent-arm64.tar.gz"
