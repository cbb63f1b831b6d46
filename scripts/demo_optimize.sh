#!/usr/bin/env bash
# The demo's last step: the optimizer on the local fleet of simulated GPUs. A release with a
# deliberately poor recipe (max_batch 4: four sequences at a time) and its recorded traffic
# shape go into the repository; `denv optimize start --auto` measures the highest rate of that
# traffic each recipe holds the latency target at (goodput per GPU there), trials
# candidates, verifies the winner (repeats and parity against the release) and opens a local
# pull request that edits the release's denv.yaml in place.
#
# scripts/demo.sh calls it with REPO (its throwaway clone), DENV, DENV_HOME and DENV_CACHE
# set; run alone, it makes a throwaway clone of this repository and removes it after.
set -euo pipefail

BIN=${BIN:-.venv/bin}
DENV=${DENV:-$PWD/$BIN/denv}
PY=${PY:-$PWD/$BIN/python}

if [ -z "${REPO:-}" ]; then
  WORK=$(mktemp -d -t denv-optimize.XXXXXX)
  export DENV_HOME="$WORK/home" DENV_CACHE="$WORK/cache"
  unset DENV_REPO
  teardown() {
    # no simulator or router outlives the demo
    "$PY" scripts/stop_units.py "$DENV_HOME" || true
    rm -rf "$WORK"
  }
  trap teardown EXIT
  git clone -q . "$WORK/repo"
  git -C "$WORK/repo" checkout -q -B main  # the base branch, whatever this checkout is on
  git -C "$WORK/repo" config user.name "denv demo"
  git -C "$WORK/repo" config user.email "demo@denv.invalid"
  REPO="$WORK/repo"
fi

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "Optimize: a release with a poor recipe, searched on its own traffic on trial GPUs"
mkdir -p "$REPO/releases/chat-opt/traffic"
cat > "$REPO/releases/chat-opt/denv.yaml" <<'EOF'
# yaml-language-server: $schema=../../schemas/release.schema.json
# A release with a deliberately poor recipe, for the optimizer to improve.
release:
  model: chat-opt
  weights: hf://meta-llama/Llama-3.1-8B-Instruct@0e9e39f249a16976918f6564b8830bc894c89659
  recipe: llama-3.1-8b/vllm@1
  overrides:
    settings: { max_batch: 4 }       # the optimizer starts from here
  topology: { mode: aggregated, replicas: 1, gpus: 1, parallel: { tp: 1 } }
stages:
  - name: canary
    fleets: [local]
    alarms: [ttft-p99-1.5s, errors-1pct]
EOF
# The stage's recorded shape (what `denv traffic record` writes: lengths and prefix blocks,
# never prompt text): 48 requests of 600 tokens in and 16 out, one shared block.
for i in $(seq 0 47); do
  printf '{"timestamp": %d, "input_length": 600, "output_length": 16, "hash_ids": [1, %d]}\n' \
    "$((50 * i))" "$((100 + i))"
done > "$REPO/releases/chat-opt/traffic/canary.jsonl"
git -C "$REPO" add releases/chat-opt
git -C "$REPO" commit -q -m "chat-opt: a release with max_batch 4, and its traffic shape"
# The first 24 prompts of the parity suite keep the demo to seconds (the full suite: 512).
SUITE=$(mktemp -t denv-parity.XXXXXX.jsonl)
head -n 24 "$REPO/policies/parity/default.jsonl" > "$SUITE"

"$DENV" optimize start chat-opt/canary --goal throughput --budget-gpus 2 --levers max_batch \
  --max-trials 1 --requests 24 --run-seconds 1s --seed 1 --auto --ready-timeout 60s \
  --parity-suite "$SUITE" --repo "$REPO"
rm -f "$SUITE"
NUMBER=$("$DENV" optimize status --repo "$REPO" --json | "$PY" -c \
  'import json,sys; print([s for s in json.load(sys.stdin) if s["target"] == "chat-opt/canary"][0]["pull_requests"][-1])')
"$DENV" pr show "$NUMBER" --repo "$REPO"
git -C "$REPO" diff main optimize/chat-opt-canary
