#!/usr/bin/env bash
# Run a command while every core is kept busy by a CPU hog, and stop the hog whatever the
# command does (exit, failure, Ctrl-C). The hog is stress-ng when installed, else one shell
# busy loop per core. What `make test-stress` runs the tests under: a test that holds on a
# loaded machine waits on conditions and compares with the model's tolerances, never the clock.
#   scripts/cpu_hog.sh COMMAND [ARG...]      (HOG_CORES=N to change the number of hogs;
#   HOG_NICE=N to run them at that niceness: 19 takes only what nothing else on the machine
#   wants, so no core is ever idle and no other process is slowed)
set -u
cores="${HOG_CORES:-$(nproc)}"
nice_level="${HOG_NICE:-0}"
hogs=()
stop_hogs() {
    for pid in "${hogs[@]}"; do kill "$pid" 2>/dev/null; done
    for pid in "${hogs[@]}"; do wait "$pid" 2>/dev/null; done
}
trap stop_hogs EXIT
trap 'exit 130' INT TERM
if command -v stress-ng >/dev/null 2>&1; then
    nice -n "$nice_level" stress-ng --cpu "$cores" --quiet &
    hogs+=($!)
else
    for _ in $(seq "$cores"); do
        nice -n "$nice_level" sh -c 'while :; do :; done' &
        hogs+=($!)
    done
fi
export CPU_HOG_CORES="$cores"  # what runs under the hogs knows they run (tests/labs/busy.py)
echo "cpu_hog: $cores busy core(s) at niceness $nice_level ($(command -v stress-ng >/dev/null && echo stress-ng || echo sh loops)) while: $*" >&2
"$@"
