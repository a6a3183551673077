#!/usr/bin/env bash
# Creates .venv and installs kcoord into it (idempotent). Usage: scripts/setup.sh [extras]
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-}"
python=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$python" -m venv .venv
fi
stamp=".venv/.installed${extras:+-$extras}"
# What the install depends on: pyproject.toml and the top-level packages. An editable install maps
# each top-level package it found, so one added by a later pull needs a new install before the
# installed `kcoord` can import it.
state="$(sha256sum pyproject.toml | cut -c1-16) $(ls -d */__init__.py 2>/dev/null | tr '\n' ' ')"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$state" ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip
  if [ -n "$extras" ]; then
    .venv/bin/python -m pip install --quiet -e ".[$extras]"
  else
    .venv/bin/python -m pip install --quiet -e .
  fi
  echo "$state" > "$stamp"
fi
