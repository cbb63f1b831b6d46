#!/usr/bin/env bash
# `make screenshots`: the UI's pictures in README.md and docs/ui.md (docs/img/), from the
# demo's stages (scripts/demo_stages.sh) watched by the UI as `make demo` runs it, in a
# throwaway clone; taken after the canary rolled back (scripts/ui_screenshots.py).
# `DENV_SCREENSHOTS=docs/img make demo` takes the same ones during the whole demo.
set -euo pipefail

BIN=${BIN:-.venv/bin}
DENV="$PWD/$BIN/denv"
PY="$PWD/$BIN/python"
export DENV_SCREENSHOTS="${DENV_SCREENSHOTS:-docs/img}"
source scripts/demo_ui.sh
demo_workspace

git clone -q . "$WORK/denv"
git -C "$WORK/denv" checkout -q -B main
start_ui "$WORK/denv" "$WORK/ui.log"
BIN="$BIN" REPO="$WORK/denv" bash scripts/demo_stages.sh
