#!/usr/bin/env bash
# Set everything up and run the main job: `overlap demo` (captures, compares, opens the dashboard).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
. .venv/bin/activate
exec overlap demo "$@"
