#!/usr/bin/env bash
# Flashes an Ergon firmware image built with `cmake --build --preset firmware-TARGET`.
#   scripts/flash_firmware.sh nrf52840   # nRF52840 DK over its on-board J-Link (SWD), with
#                                        # OpenOCD (Debian: openocd); the image starts at 0
#   scripts/flash_firmware.sh samd21 [/dev/ttyACM0]
#                                        # Arduino MKR1000 through its SAM-BA bootloader with
#                                        # BOSSA (Debian: bossa-cli): double-tap reset first
#                                        # (the LED pulses), the image goes after the bootloader
# Then: ergon boards (finds the board and its tty) and ergon record --port TTY.
set -euo pipefail
cd "$(dirname "$0")/.."
target=${1:?usage: scripts/flash_firmware.sh nrf52840|samd21 [PORT]}
case $target in
  nrf52840)
    elf=build-nrf52840/devices/cortexm/targets/ergon-firmware-nrf52840.elf
    [[ -f $elf ]] || { echo "build it first: cmake --preset firmware-nrf52840 && cmake --build --preset firmware-nrf52840" >&2; exit 1; }
    command -v openocd >/dev/null || { echo "needs openocd (sudo apt-get install openocd)" >&2; exit 1; }
    exec openocd -f interface/jlink.cfg -c "transport select swd" -f target/nrf52.cfg \
      -c "program $elf verify reset exit"
    ;;
  samd21)
    bin=build-samd21/ergon-firmware-samd21.bin
    port=${2:-/dev/ttyACM0}
    [[ -f $bin ]] || { echo "build it first: cmake --preset firmware-samd21 && cmake --build --preset firmware-samd21" >&2; exit 1; }
    command -v bossac >/dev/null || { echo "needs bossac (sudo apt-get install bossa-cli)" >&2; exit 1; }
    # The MKR1000's bootloader occupies the first 8 KiB: the image is linked at 0x2000.
    exec bossac --port="$(basename "$port")" --offset=0x2000 --erase --write --verify --reset "$bin"
    ;;
  *)
    echo "unknown target '$target': nrf52840 or samd21" >&2
    exit 1
    ;;
esac
