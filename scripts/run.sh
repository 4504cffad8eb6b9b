#!/usr/bin/env bash
# Quick start: install what is missing, build, and run `ergon demo` (simulated boards on
# pseudo-terminals recorded into ergon-demo.db). Extra arguments go to `ergon demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake --preset default >/dev/null
cmake --build --preset default --target ergon
exec build/cli/ergon demo "$@"
