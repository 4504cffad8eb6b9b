#!/usr/bin/env bash
# Reports each firmware image's flash and RAM use against its chip (nRF52840: 1 MB / 256 KB;
# SAMD21G18A on the MKR1000: 248 KB after the bootloader / 32 KB; the MPS2 AN386 board that
# qemu-system-arm emulates: 4 MB of ZBT SSRAM1 for code / 4 MB of SSRAM2/3 for data) and
# fails when one does not fit. RAM counts .data, .bss (the tensors' arena included) and the
# 4 KiB stack reserve.
set -euo pipefail
cd "$(dirname "$0")/.."
status=0
for spec in nrf52840:1048576:262144 samd21:253952:32768 mps2_an386:4194304:4194304; do
  IFS=: read -r target flash_max ram_max <<<"$spec"
  elf=build-$target/devices/cortexm/targets/ergon-firmware-$target.elf
  [[ -f $elf ]] || { echo "firmware_size: $elf is missing (cmake --build --preset firmware-$target)" >&2; exit 1; }
  read -r text data bss _ < <(arm-none-eabi-size "$elf" | tail -n 1)
  arena_hex=$(arm-none-eabi-nm -S -C "$elf" | awk '/g_arena/ { print $2 }')
  arena=$((16#${arena_hex:-0}))
  flash=$((text + data))
  ram=$((data + bss + 4096))
  awk -v t="$target" -v f="$flash" -v fm="$flash_max" -v r="$ram" -v rm="$ram_max" -v a="$arena" 'BEGIN {
    printf "%-10s flash %7d B of %7d (%4.1f %%)   RAM %6d B of %6d (%4.1f %%), tensors arena %d B\n",
           t, f, fm, 100 * f / fm, r, rm, 100 * r / rm, a }'
  if ((flash > flash_max || ram > ram_max)); then
    echo "firmware_size: $target does not fit" >&2
    status=1
  fi
done
exit $status
