#!/usr/bin/env bash
# `make demo`: denv's main job on the embedded default — the local fleet of simulated GPUs.
# Everything happens in a throwaway clone of this repository, with the agent's state and the
# bot's cache beside it; the clone, the units and the state are removed at the end.
set -euo pipefail

BIN=${BIN:-.venv/bin}
DENV="$PWD/$BIN/denv"
PY="$PWD/$BIN/python"
source scripts/demo_ui.sh
demo_workspace

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "A throwaway clone of this repository (the desired state lives in git), and the UI over it"
git clone -q . "$WORK/denv"
git -C "$WORK/denv" checkout -q -B main  # the base branch, whatever this checkout is on
git -C "$WORK/denv" config user.name "denv demo"
git -C "$WORK/denv" config user.email "demo@denv.invalid"
REPO="$WORK/denv"  # the UI names it by its folder: denv
# The read-only web UI over the clone, up until the demo ends: open its address to watch.
start_ui "$REPO" "$WORK/ui.log"
echo "(the UI stays up while the demo runs; it shows each step as it happens)"

step "Choose: published results ranked for an agent workload under a p99 target"
"$DENV" validate
"$DENV" bench --workload agent --latency 'p99<1.5s'
"$DENV" fleet list

step "Confirm on the local fleet's trial GPUs: a short bench run, deployed and torn down"
# A small trace of short answers keeps it to seconds: 900 tokens in, 32 out, one shared block.
for i in $(seq 0 11); do
  printf '{"timestamp": 0, "input_length": 900, "output_length": 32, "hash_ids": [1, %d]}\n' "$((100 + i))"
done > "$WORK/shape.jsonl"
"$DENV" bench run --recipe llama-3.1-8b/vllm@1 --target local --traffic "$WORK/shape.jsonl" \
  --concurrency 1,4 --requests 8 --ready-timeout 60s --out "$WORK"


step "Plan, then reconcile the example release onto the local fleet"
"$DENV" plan --repo "$REPO"
"$DENV" reconcile --once --repo "$REPO"
"$DENV" status --repo "$REPO"

step "Requests through the endpoint with the official openai client"
ENDPOINT=$("$DENV" status --repo "$REPO" --json | "$PY" -c \
  'import json,sys; print(json.load(sys.stdin)["deployments"][0]["endpoint"])')
"$PY" - "$ENDPOINT" <<'EOF'
import sys, openai
client = openai.OpenAI(base_url=sys.argv[1] + "/v1", api_key="unused")
for question in ("What is a canary release?", "Name three GPU interconnects."):
    answer = client.chat.completions.create(
        model="chat-8b", messages=[{"role": "user", "content": question}], max_tokens=12
    )
    print(f"> {question}\n  {answer.choices[0].message.content}  "
          f"({answer.usage.completion_tokens} tokens, simulated engine)")
EOF

step "Change a setting through a local pull request: plan comment, signed approval, merge, rolling replace"
# On the local forge the author signs the opening and the approver the approval, each with a
# key main's policies/allowed_signers lists for them: you (git's user.name, "denv demo") open,
# grace approves; your own key could not approve what it opened.
ssh-keygen -q -t ed25519 -N "" -C grace -f "$WORK/grace-key"
ssh-keygen -q -t ed25519 -N "" -C demo -f "$WORK/demo-key"
printf 'grace %s\n"denv demo" %s\n' "$(cat "$WORK/grace-key.pub")" "$(cat "$WORK/demo-key.pub")" \
  > "$REPO/policies/allowed_signers"
git -C "$REPO" add policies/allowed_signers
git -C "$REPO" commit -q -m "grace may approve"
git -C "$REPO" checkout -q -b max-batch-64
sed -i 's/settings: { max_batch: 128 }/settings: { max_batch: 64 }/' "$REPO/releases/chat-8b/denv.yaml"
git -C "$REPO" commit -q -am "chat-8b: max_batch 64"
git -C "$REPO" checkout -q main
"$DENV" pr open --head max-batch-64 --key "$WORK/demo-key" --repo "$REPO"
"$DENV" pr plan --pr 1 --repo "$REPO"
"$DENV" pr show 1 --repo "$REPO"
"$DENV" pr approve 1 --as grace --key "$WORK/grace-key" --repo "$REPO"
"$DENV" pr merge 1 --repo "$REPO"
"$DENV" reconcile --once --repo "$REPO"
"$DENV" status --repo "$REPO"

step "Tear down: the release leaves git; its units, orphans now, are shown, then pruned"
git -C "$REPO" rm -q -r releases/chat-8b
git -C "$REPO" commit -q -m "retire chat-8b"
"$DENV" reconcile --once --repo "$REPO"
"$DENV" prune --repo "$REPO"

# Stages: the same local fleet and clone (the UI shows it), a two-stage release.
BIN="$BIN" REPO="$REPO" bash scripts/demo_stages.sh

# Last: the optimizer, on the first clone, opens a local pull request for a better recipe.
REPO="$REPO" DENV="$DENV" PY="$PY" bash scripts/demo_optimize.sh
