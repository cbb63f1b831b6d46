# Sourced by scripts/demo.sh and scripts/screenshots.sh: `start_ui REPO LOG` starts the
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
