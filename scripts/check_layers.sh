#!/usr/bin/env bash
# Fails on any #include that goes against the module order of docs/architecture.md, and
# prints each offending line. A module may include only itself and the modules it may depend
# on (tests/, scripts/ and third-party headers are not checked).
#   scripts/check_layers.sh [ROOT]    (default: the repository)
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}

# module: the modules it may include (besides itself)
declare -A allowed=(
  [common]=""
  [probes]="common"
  [profiler]="common probes"
  [planner]="common"
  [runtime]="common probes profiler planner"
  [devices]="common probes profiler"
  [costdb]="common probes profiler planner"
  [agent]="common probes profiler planner runtime devices"
  [app]="common probes profiler planner runtime devices costdb agent"
  [gui]="common probes profiler planner runtime devices costdb agent app"
  [cli]="common probes profiler planner runtime devices costdb agent app gui"
)

bad=0
for module in "${!allowed[@]}"; do
  [[ -d $root/$module ]] || continue
  while IFS= read -r hit; do
    file=${hit%%:*}
    rest=${hit#*:}
    line=${rest%%:*}
    text=${rest#*:}
    included=$(sed -E 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"([^"/]+)\/.*/\1/' <<<"$text")
    [[ $included == "$module" ]] && continue
    [[ " ${allowed[$module]} " == *" $included "* ]] && continue
    [[ -d $root/$included ]] || continue  # a header of this folder's own, not a module
    echo "${file#"$root"/}:$line: $module may not include $included: $text"
    bad=1
  done < <(grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"[^"/]+/' "$root/$module" \
             --include='*.h' --include='*.cpp' || true)
done
if ((bad)); then
  echo "check_layers: includes against the module order (docs/architecture.md)" >&2
  exit 1
fi
echo "check_layers: every include follows the module order"
