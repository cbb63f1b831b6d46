#!/usr/bin/env bash
# Stages on the local fleet: chat-8b baked on canary, promoted to prod by an approval, then a
# latency fault injected into the canary during the next bake rolls it back at once.
# Standalone, or from scripts/demo.sh (which may export DENV_HOME and DENV_CACHE first).
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
  "$PY" - "$DENV_HOME" <<'PYEOF' || true
import os, sys
from reconciler.fleet.hostagent import AgentClient
from reconciler.fleet.transport import LocalTransport
agent = AgentClient(LocalTransport(env={**os.environ, "DENV_HOME": sys.argv[1]}), python=sys.executable)
for unit in agent.units():
    if unit.id.startswith("chat-8b."):
        agent.stop(unit.id, grace=2)
agent.lease("reconciler", "demo", 1, note={})
agent.lease("reconciler", "demo", 0, release=True)
PYEOF
  rm -rf "$WORK"
}
trap teardown EXIT

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
# wait_for SECONDS EXPR: EXPR on `s`, the bot's record of each stage (phase, revision,
# override, promotion, …), read from its lease note on the local host (fast: no git load)
wait_for() {
  "$PY" - "$DENV_HOME" "$1" "$2" <<'PYEOF' || { tail -20 "$WORK/bot.log"; exit 1; }
import os, sys, time
from reconciler.fleet.hostagent import AgentClient
from reconciler.fleet.transport import LocalTransport
agent = AgentClient(LocalTransport(env={**os.environ, "DENV_HOME": sys.argv[1]}), python=sys.executable)
deadline = time.monotonic() + float(sys.argv[2])
while time.monotonic() < deadline:
    note = agent.lease("reconciler", "demo", 0, peek=True).get("note") or {}
    kept = ((note.get("checks") or {}).get("rollout") or {}).get("stages") or {}
    s = {k.split("/")[1]: v for k, v in kept.items() if k.startswith("chat-8b/")}
    try:
        if eval(sys.argv[3]):
            sys.exit(0)
    except (KeyError, TypeError):
        pass
    time.sleep(0.3)
sys.exit(f"timed out waiting for: {sys.argv[3]}")
PYEOF
}

step "A two-stage release in a throwaway clone: canary bakes 4s, prod needs one approval"
git clone -q . "$WORK/repo"
REPO="$WORK/repo"
git -C "$REPO" config user.name "denv demo"
git -C "$REPO" config user.email "demo@denv.invalid"
cat > "$REPO/policies/alarms.yaml" <<'YAML'
alarms:
  ttft-fast: { metric: ttft, stat: p99, max: 500ms, window: 3s, min_requests: 3 }
YAML
release() {
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
    bake: 4s
    alarms: [ttft-fast]
  - name: prod
    fleets: [local]
    bake: 4s
    alarms: [ttft-fast]
    approvals: 1
YAML
  git -C "$REPO" commit -q -am "chat-8b: max_batch $1"
}
release 128
"$DENV" reconcile --repo "$REPO" --interval 0.5s --ready-timeout 60s --drain 1s > "$WORK/bot.log" 2>&1 &
BOT=$!
wait_for 90 "s['canary']['phase'] == 'baking'"

step "Traffic on the canary while it bakes; the bot opens the promotion PR"
ENDPOINT=$("$DENV" status --repo "$REPO" --json | "$PY" -c \
  'import json,sys; print([d for d in json.load(sys.stdin)["deployments"] if d["stage"]=="canary"][0]["endpoint"])')
"$PY" - "$ENDPOINT" > /dev/null 2>&1 <<'PYEOF' &
import sys, threading, openai
client = openai.OpenAI(base_url=sys.argv[1] + "/v1", api_key="unused", max_retries=0, timeout=30)
def ask():
    while True:
        try:
            client.chat.completions.create(model="chat-8b", max_tokens=2,
                                           messages=[{"role": "user", "content": "hi"}])
        except openai.OpenAIError:
            pass
for _ in range(4):
    threading.Thread(target=ask, daemon=True).start()
threading.Event().wait()
PYEOF
LOAD=$!
wait_for 60 "s['canary']['promotion']['state'] == 'open'"
"$DENV" rollout status chat-8b --repo "$REPO"
PR=$("$DENV" pr list --repo "$REPO" --json | "$PY" -c \
  'import json,sys; print([p["number"] for p in json.load(sys.stdin)["pull_requests"] if p["head_branch"].startswith("denv/promote/")][0])')
"$DENV" pr show "$PR" --repo "$REPO"

step "An approval by grace: the bot merges the promotion, prod deploys it"
"$DENV" pr approve "$PR" --as grace --repo "$REPO"
wait_for 60 "s['prod']['phase'] in ('baking', 'green')"
"$DENV" rollout status chat-8b --repo "$REPO"

step "A new revision on the canary, and a latency fault while it bakes"
release 64
NEW=$(git -C "$REPO" rev-parse HEAD)
wait_for 60 "s['canary']['phase'] == 'baking' and s['canary']['revision'] == '$NEW'"
PORT=$("$PY" - "$DENV_HOME" <<'PYEOF'
import os, sys
from reconciler.fleet.hostagent import AgentClient
from reconciler.fleet.transport import LocalTransport
agent = AgentClient(LocalTransport(env={**os.environ, "DENV_HOME": sys.argv[1]}), python=sys.executable)
print([u.port for u in agent.units() if u.id.startswith("chat-8b.canary") and u.alive and "router" not in u.id][0])
PYEOF
)
START=$(date +%s.%N)
curl -fsS -X POST -H 'Content-Type: application/json' -d '{"spike_ms": 800}' \
  "http://127.0.0.1:$PORT/admin/faults" > /dev/null
wait_for 30 "s['canary']['phase'] == 'rolled back'"
printf 'rolled back %.1fs after the fault\n' "$(echo "$(date +%s.%N) - $START" | bc)"
"$DENV" rollout status chat-8b --repo "$REPO"
"$DENV" pr list --repo "$REPO"
kill "$LOAD" 2>/dev/null || true
