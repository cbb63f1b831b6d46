#!/usr/bin/env bash
# Stages on the local fleet: chat-8b baked on canary, promoted to prod by an approval, then a
# latency fault injected into the canary during the next bake rolls it back at once.
# Kept quick: few `denv` calls (each loads the repository), state read from the bot's note.
# Standalone, or from scripts/demo.sh (which may export DENV_HOME and DENV_CACHE first, and
# pass REPO, its clone, where chat-8b was retired: the stages write it again).
set -euo pipefail

BIN=${BIN:-.venv/bin}
DENV="$PWD/$BIN/denv"
PY="$PWD/$BIN/python"
WORK=$(mktemp -d -t denv-stages.XXXXXX)
export DENV_HOME="${DENV_HOME:-$WORK/home}" DENV_CACHE="${DENV_CACHE:-$WORK/cache}" DENV_FORGE=local
unset DENV_REPO
BOT=""

teardown() {
  [ -n "$BOT" ] && kill -TERM "$BOT" 2>/dev/null && wait "$BOT" 2>/dev/null || true
  "$PY" scripts/stop_units.py "$DENV_HOME" chat-8b. || true
  # the bot's note (its rollout state) goes with the demo's release
  "$PY" - "$DENV_HOME" <<'PYEOF' || true
import os, sys
from reconciler.fleet.hostagent import AgentClient
from reconciler.fleet.transport import LocalTransport
agent = AgentClient(LocalTransport(env={**os.environ, "DENV_HOME": sys.argv[1]}), python=sys.executable)
agent.lease("reconciler", "demo", 1, note={})
agent.lease("reconciler", "demo", 0, release=True)
PYEOF
  rm -rf "$WORK"
}
trap teardown EXIT

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
# wait_for SECONDS EXPR [SHOW]: EXPR on `s`, the bot's record of each stage (phase, revision,
# override, promotion, …), read from its lease note on the local host (fast: no git load);
# once true, SHOW is printed, with `units` the host's units (a port, an endpoint).
wait_for() {
  "$PY" - "$DENV_HOME" "$1" "$2" "${3:-}" <<'PYEOF' || { tail -20 "$WORK/bot.log"; exit 1; }
import os, sys, time
from reconciler.fleet.hostagent import AgentClient
from reconciler.fleet.transport import LocalTransport
agent = AgentClient(LocalTransport(env={**os.environ, "DENV_HOME": sys.argv[1]}), python=sys.executable)
deadline = time.monotonic() + float(sys.argv[2])
while time.monotonic() < deadline:
    note = agent.lease("reconciler", "demo", 0, peek=True).note or {}
    kept = ((note.get("checks") or {}).get("rollout") or {}).get("stages") or {}
    s = {k.split("/")[1]: v for k, v in kept.items() if k.startswith("chat-8b/")}
    try:
        if eval(sys.argv[3]):
            if sys.argv[4]:
                units = [u for u in agent.units() if u.alive and u.id.startswith("chat-8b.")]
                print(eval(sys.argv[4]))
            sys.exit(0)
    except (KeyError, TypeError, IndexError):
        pass
    time.sleep(0.2)
sys.exit(f"timed out waiting for: {sys.argv[3]}")
PYEOF
}

step "A two-stage release: canary bakes 3s, prod needs one approval"
if [ -z "${REPO:-}" ]; then  # scripts/demo.sh passes its clone (its UI watches it)
  git clone -q . "$WORK/repo"
  git -C "$WORK/repo" checkout -q -B main  # the base branch, whatever this checkout is on
  REPO="$WORK/repo"
fi
git -C "$REPO" config user.name "denv demo"
git -C "$REPO" config user.email "demo@denv.invalid"
ssh-keygen -q -t ed25519 -N "" -C grace -f "$WORK/grace-key"  # grace signs her approvals
printf 'grace %s\n' "$(cat "$WORK/grace-key.pub")" > "$REPO/policies/allowed_signers"
git -C "$REPO" add policies/allowed_signers
# one alarm more, tight enough for a latency fault to fire it within the canary's bake
printf '  ttft-fast: { metric: ttft, stat: p99, max: 500ms, window: 2s, min_requests: 3 }\n' \
  >> "$REPO/policies/alarms.yaml"
release() {  # release MAX_BATCH CANARY_BAKE
  mkdir -p "$REPO/releases/chat-8b"
  cat > "$REPO/releases/chat-8b/denv.yaml" <<YAML
release:
  model: chat-8b
  weights: hf://meta-llama/Llama-3.1-8B-Instruct@0e9e39f249a16976918f6564b8830bc894c89659
  recipe: llama-3.1-8b/vllm@1
  overrides:
    settings: { max_batch: $1 }
  topology: { mode: aggregated, replicas: 1, gpus: 1, parallel: { tp: 1 } }
stages:
  - name: canary
    fleets: [local]
    bake: $2
    alarms: [ttft-fast]
  - name: prod
    fleets: [local]
    bake: 3s
    alarms: [ttft-fast]
    approvals: 1
YAML
  git -C "$REPO" add releases/chat-8b/denv.yaml
  git -C "$REPO" commit -q -am "chat-8b: max_batch $1"
}
release 128 3s
"$DENV" reconcile --repo "$REPO" --interval 0.3s --ready-timeout 60s --drain 0.5s > "$WORK/bot.log" 2>&1 &
BOT=$!
ENDPOINT=$(wait_for 90 "s['canary']['phase'] == 'baking'" \
  "[f'http://127.0.0.1:{u.port}' for u in units if u.id.startswith('chat-8b.canary') and u.id.endswith('router')][0]")

step "Traffic on the canary ($ENDPOINT) while it bakes; the bot opens the promotion PR"
"$PY" - "$ENDPOINT" > /dev/null 2>&1 <<'PYEOF' &
import sys, threading, time, openai
client = openai.OpenAI(base_url=sys.argv[1] + "/v1", api_key="unused", max_retries=0, timeout=30)
def ask():  # a few requests a second each: enough for the alarms, little CPU taken from the rest
    while True:
        try:
            client.chat.completions.create(model="chat-8b", max_tokens=2,
                                           messages=[{"role": "user", "content": "hi"}])
        except openai.OpenAIError:
            pass
        time.sleep(0.2)
for _ in range(4):
    threading.Thread(target=ask, daemon=True).start()
threading.Event().wait()
PYEOF
LOAD=$!
PR=$(wait_for 60 "s['canary']['promotion']['state'] == 'open'" "s['canary']['promotion']['number']")
"$DENV" rollout status chat-8b --repo "$REPO"
"$DENV" pr show "$PR" --repo "$REPO"

step "An approval by grace: the bot merges the promotion; while prod deploys it, a new revision (bake 30s) lands on the canary"
"$DENV" pr approve "$PR" --as grace --key "$WORK/grace-key" --repo "$REPO"
wait_for 60 "s['canary']['promotion']['state'] == 'merged'"
release 64 30s
NEW=$(git -C "$REPO" rev-parse HEAD)
PORT=$(wait_for 60 "s['canary']['phase'] == 'baking' and s['canary']['revision'] == '$NEW'" \
  "[u.port for u in units if u.id.startswith('chat-8b.canary') and 'router' not in u.id][0]")

step "A latency fault in the canary's engine during its bake: the bot rolls it back at once"
START=$(date +%s.%N)
curl -fsS -X POST -H 'Content-Type: application/json' -d '{"spike_ms": 800}' \
  "http://127.0.0.1:$PORT/admin/faults" > /dev/null
wait_for 30 "s['canary']['phase'] == 'rolled back' and s['canary'].get('rollback_pr')"
printf 'rolled back %.1fs after the fault\n' "$(echo "$(date +%s.%N) - $START" | bc)"
kill "$LOAD" 2>/dev/null || true
"$DENV" rollout status chat-8b --repo "$REPO"
if [ -n "${DENV_SCREENSHOTS:-}" ] && [ -n "${DENV_UI_URL:-}" ]; then  # make screenshots
  "$PY" scripts/ui_screenshots.py "$DENV_UI_URL" "$DENV_SCREENSHOTS"
fi
"$DENV" pr list --repo "$REPO"
