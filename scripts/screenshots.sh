#!/usr/bin/env bash
# `make screenshots`: the UI's pictures in README.md and docs/ui.md (docs/img/), from the
# demo's stages (scripts/demo_stages.sh) watched by the UI as `make demo` runs it, in a
# throwaway clone; taken after the canary rolled back (scripts/ui_screenshots.py).
# `DENV_SCREENSHOTS=docs/img make demo` takes the same ones during the whole demo.
set -euo pipefail

BIN=${BIN:-.venv/bin}
DENV="$PWD/$BIN/denv"
PY="$PWD/$BIN/python"
WORK=$(mktemp -d -t denv-demo.XXXXXX)
export DENV_HOME="$WORK/home" DENV_CACHE="$WORK/cache" DENV_SCREENSHOTS="${DENV_SCREENSHOTS:-docs/img}"
unset DENV_REPO

UI=""
teardown() {
  [ -n "$UI" ] && kill -TERM "$UI" 2>/dev/null && wait "$UI" 2>/dev/null || true
  "$PY" scripts/stop_units.py "$DENV_HOME" || true
  rm -rf "$WORK"
}
trap teardown EXIT

git clone -q . "$WORK/denv"
git -C "$WORK/denv" checkout -q -B main
source scripts/demo_ui.sh
start_ui "$WORK/denv" "$WORK/ui.log"
BIN="$BIN" REPO="$WORK/denv" bash scripts/demo_stages.sh
