#!/usr/bin/env bash
# Set everything up (virtualenv, package, test extras, headless Chromium) and run the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --test
. .venv/bin/activate
# Screenshots and other artifacts of the browser tests land here.
mkdir -p test-artifacts
# Lint and types first (configuration in pyproject.toml): a finding fails CI like a test.
ruff check .
mypy
python -m pytest "$@"
