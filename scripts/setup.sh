#!/usr/bin/env bash
# Create ./.venv (if missing) and install overlap into it; `--test` adds the test extras (they
# include [all], hence [serve]: gunicorn for the WSGI serving test) and the
# headless Chromium + ChromeDriver that the dashboard's browser tests drive (Debian packages).
# pip runs at its normal verbosity: the first install downloads about 0.6 GB of wheels (libtpu,
# the CUDA compiler plugin and jaxlib are most of it) that unpack into 2-2.5 GB, and its
# progress is worth seeing.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv with $("$PY" --version 2>&1)"
  "$PY" -m venv .venv
fi
. .venv/bin/activate
python -m pip install --quiet --upgrade pip
if [ "${1:-}" = "--test" ]; then
  echo "setup: installing overlap with the [test] extras into .venv (the first run downloads" \
       "about 0.6 GB, 2-2.5 GB installed, and takes several minutes; later runs only check)"
  python -m pip install --progress-bar on -e ".[test]"
  if ! command -v chromedriver >/dev/null 2>&1 || ! command -v chromium >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      echo "setup: installing chromium and chromium-driver with apt-get (for the browser tests)"
      apt-get update -qq >/dev/null
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
    else
      echo "setup: chromium/chromium-driver missing and cannot apt-get install them; browser tests will be skipped" >&2
    fi
  fi
else
  echo "setup: installing overlap with the [demo] extras into .venv (the first run downloads" \
       "about 0.6 GB, 2-2.5 GB installed, and takes several minutes; later runs only check)"
  python -m pip install --progress-bar on -e ".[demo]"
fi
echo "setup: done (.venv)"
