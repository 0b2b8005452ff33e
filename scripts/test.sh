#!/usr/bin/env bash
# Set everything up (virtualenv, package, test extras, headless Chromium) and run the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --test
. .venv/bin/activate
# Screenshots and other artifacts of the browser tests land here.
mkdir -p test-artifacts
# The compiled XSpace scanner must have been built by the install (a C compiler is needed):
# tests/trace/test_scanner.py checks it against upb, and would skip without it.
python -c "import overlap.trace._scan" || {
  echo "test.sh: overlap.trace._scan was not built (no C compiler?); see setup.py" >&2; exit 1; }
# Lint and types first (configuration in pyproject.toml): a finding fails CI like a test.
ruff check .
mypy
python -m pytest "$@"
