#!/usr/bin/env bash
# Packs ergon and ergon-agent (stripped) with every shared library they load and the dynamic
# loader into one archive, to run them on an x86-64 Linux machine that has none of Ergon's
# build dependencies (a lab PC, a rented machine), e.g. for scripts/real_silicon_table.sh there:
#   scripts/bundle_host_tools.sh [OUT.tar.xz]        (default build-device/bundle.tar.xz)
#   tar -xJf bundle.tar.xz && ERGON_CLI=$PWD/stage/ergon ERGON_AGENT=$PWD/stage/ergon-agent \
#       scripts/real_silicon_table.sh mlp
# The bundled loader runs the programs whatever the machine's own C library is.
#   ERGON_BUNDLE_EXTRA="build/tests/probes/probes_hardware_test ..."   more programs, run as
#       stage/run NAME ARGS (e.g. the hardware tests on a machine with the probe)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build-device/bundle.tar.xz}
read -r -a extra <<<"${ERGON_BUNDLE_EXTRA:-}"
for p in build/cli/ergon build/agent/ergon-agent "${extra[@]}"; do
  [[ -x $p ]] || { echo "bundle_host_tools: $p is missing: cmake --build --preset default first" >&2; exit 1; }
done
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/stage/bin" "$stage/stage/lib"
strip -o "$stage/stage/bin/ergon" build/cli/ergon
strip -o "$stage/stage/bin/ergon-agent" build/agent/ergon-agent
for p in "${extra[@]}"; do strip -o "$stage/stage/bin/$(basename "$p")" "$p"; done
ldd build/cli/ergon build/agent/ergon-agent "${extra[@]}" | awk '/=>/ {print $3} /ld-linux/ {print $1}' | grep / | sort -u |
  while read -r lib; do cp -L "$lib" "$stage/stage/lib/"; done
loader=$(cd "$stage/stage/lib" && ls ld-linux-*.so.* | head -n 1)
cat >"$stage/stage/run" <<RUN
#!/bin/sh
# run ergon|ergon-agent ARGS...: the bundled program with the bundled loader and libraries
d=\$(cd "\$(dirname "\$0")" && pwd)
p=\$1; shift
exec "\$d/lib/$loader" --library-path "\$d/lib" "\$d/bin/\$p" "\$@"
RUN
printf '#!/bin/sh\nexec "$(dirname "$0")/run" ergon "$@"\n' >"$stage/stage/ergon"
printf '#!/bin/sh\nexec "$(dirname "$0")/run" ergon-agent "$@"\n' >"$stage/stage/ergon-agent"
chmod +x "$stage/stage/run" "$stage/stage/ergon" "$stage/stage/ergon-agent"
mkdir -p "$(dirname "$out")"
echo "bundle_host_tools: compressing $(du -sh "$stage/stage" | cut -f1) into $out" >&2
tar -C "$stage" -cJf "$out" stage
ls -la "$out" >&2
