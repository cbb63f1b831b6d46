# Sourced by scripts/demo.sh and scripts/screenshots.sh (after they set DENV and PY).
# `demo_workspace`: a throwaway folder WORK for the agent's state and the bot's cache; on exit,
# whatever happened, no simulator, router or UI outlives the script and WORK is removed.
demo_workspace() {
  WORK=$(mktemp -d -t denv-demo.XXXXXX)
  export DENV_HOME="$WORK/home" DENV_CACHE="$WORK/cache"
  unset DENV_REPO
  UI=""
  trap demo_teardown EXIT
}
demo_teardown() {
  [ -n "$UI" ] && kill -TERM "$UI" 2>/dev/null && wait "$UI" 2>/dev/null || true
  "$PY" scripts/stop_units.py "$DENV_HOME" || true
  rm -rf "$WORK"
}

# `start_ui REPO LOG` starts the
# read-only web UI over REPO in the background (port: $DENV_UI_PORT, default any free one),
# sets UI to its process and exports DENV_UI_URL, its address, once it serves.
start_ui() {
  "$DENV" ui --repo "$1" --listen "127.0.0.1:${DENV_UI_PORT:-0}" --refresh 2s > "$2" 2>&1 &
  UI=$!
  for _ in $(seq 300); do grep -q '^denv ui: ' "$2" && break; sleep 0.1; done
  grep '^denv ui: ' "$2" || { cat "$2"; exit 1; }
  DENV_UI_URL=$(sed -n 's/^denv ui: //p' "$2" | head -1)
  export DENV_UI_URL
}
