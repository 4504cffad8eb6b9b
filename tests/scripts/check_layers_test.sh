#!/usr/bin/env bash
# scripts/check_layers.sh passes on the tree and fails on a planted include that goes against
# the module order, printing the offending line.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
"$repo/scripts/check_layers.sh" "$repo" >/dev/null

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/common" "$tmp/planner" "$tmp/gui" "$tmp/cli"
echo '#include "common/error.h"' >"$tmp/planner/ok.cpp"
# The planted include is assembled here so that this file itself holds no front-end include.
front_end_header="cli/plan_cmd.h"
printf '#include <vector>\n#include "%s"\n' "$front_end_header" >"$tmp/gui/dashboard.cpp"
if out=$("$repo/scripts/check_layers.sh" "$tmp" 2>&1); then
  echo "FAIL: gui including cli/ was accepted"; exit 1
fi
grep -qF "gui/dashboard.cpp:2: gui may not include cli: #include \"$front_end_header\"" <<<"$out" ||
  { echo "FAIL: the offending line was not printed:"; echo "$out"; exit 1; }
rm "$tmp/gui/dashboard.cpp"
printf '#include "planner/graph.h"\n' >"$tmp/common/clock.h"
if "$repo/scripts/check_layers.sh" "$tmp" >/dev/null 2>&1; then
  echo "FAIL: common including planner/ was accepted"; exit 1
fi
echo "check_layers refuses planted includes"
