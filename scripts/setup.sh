#!/usr/bin/env bash
# Create ./.venv (if missing) and install overlap into it; `--test` adds the test extras and the
# headless Chromium + ChromeDriver that the dashboard's browser tests drive (Debian packages).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
. .venv/bin/activate
python -m pip install --quiet --upgrade pip
if [ "${1:-}" = "--test" ]; then
  python -m pip install --quiet -e ".[test]"
  if ! command -v chromedriver >/dev/null 2>&1 || ! command -v chromium >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      apt-get update -qq >/dev/null
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
    else
      echo "setup: chromium/chromium-driver missing and cannot apt-get install them; browser tests will be skipped" >&2
    fi
  fi
else
  python -m pip install --quiet -e ".[demo]"
fi
