#!/usr/bin/env bash
# The long versions of the primary volume's fault loops (issue 32,
# "Correctness under load"), which CI runs only briefly:
#
# 1. under_load: random operations through an in-process mount (writes at
#    any offset, reads, truncates, appends, renames, mmap writes, fsync,
#    unlink and re-create), every read checked against a model, while
#    optimize, gc and scrub run over and over on the same volume
#    (crates/cairn-volume/tests/under_load.rs; CAIRN_UNDER_LOAD_SECS).
# 2. volume_kill: `cairn volume mount` SIGKILLed at a random moment while a
#    writer fsyncs and the daemon optimizes, round after round; every
#    fsynced byte must be there after each remount and the store must pass
#    `check --read-data` (crates/cairn-cli/tests/volume_kill.rs;
#    CAIRN_VOLUME_KILL_ROUNDS).
#
# Release build. Needs FUSE (root, or /dev/fuse and fusermount3): a test
# that cannot mount fails here rather than skipping (CAIRN_TEST_NO_SKIP=1).
# Builds first, then prints each test's output and one summary line per
# loop (result, seconds of the run alone, what the test counted); exits 1
# if either failed. The defaults take about 10 min for 1 and 8 min for 2
# (2.5 s a round), plus the release builds (about 30 min on 2 busy CPUs
# from nothing).
#
#   UNDER_LOAD_SECS (600)   how long loop 1 runs
#   UNDER_LOAD_SEED (32)    its operations' seed
#   KILL_ROUNDS (200)       rounds of loop 2
#   LOOPS (under_load,volume_kill)  which loops run, comma-separated
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
UNDER_LOAD_SECS="${UNDER_LOAD_SECS:-600}"
UNDER_LOAD_SEED="${UNDER_LOAD_SEED:-32}"
KILL_ROUNDS="${KILL_ROUNDS:-200}"
LOOPS="${LOOPS:-under_load,volume_kill}"
LOGS="$(mktemp -d "${TMPDIR:-/tmp}/volume-faults.XXXXXX")"
trap 'rm -rf "$LOGS"' EXIT
export CAIRN_TEST_NO_SKIP=1

wants() { [[ ",$LOOPS," == *",$1,"* ]]; }

# Runs one test binary's test (release, built first and untimed), its
# output on the terminal and in $LOGS/NAME.log, its exit status and
# seconds in $LOGS/NAME.status.
run() {
    local name="$1"
    shift
    local started status
    cargo test --release -q "$@" --no-run
    started=$(date +%s)
    set +e
    cargo test --release "$@" -- --nocapture --test-threads 1 2>&1 | tee "$LOGS/$name.log"
    status=${PIPESTATUS[0]}
    set -e
    echo "$status $(($(date +%s) - started))" >"$LOGS/$name.status"
}

# The summary of one loop: its result, time, and what its test printed.
summary() {
    local name="$1" pattern="$2" status secs detail
    [ -f "$LOGS/$name.status" ] || return 0
    read -r status secs <"$LOGS/$name.status"
    detail="$(grep -oE "$pattern" "$LOGS/$name.log" | tail -n 1 || true)"
    if [ "$status" = 0 ]; then
        printf '%-12s ok     in %5d s: %s\n' "$name" "$secs" "$detail"
    else
        printf '%-12s FAILED in %5d s (exit %s): %s\n' "$name" "$secs" "$status" \
            "$(grep -E "panicked|assertion|skipped" "$LOGS/$name.log" | head -n 1 || true)"
    fi
}

if wants under_load; then
    CAIRN_UNDER_LOAD_SECS="$UNDER_LOAD_SECS" CAIRN_UNDER_LOAD_SEED="$UNDER_LOAD_SEED" \
        run under_load -p cairn-volume --test under_load
fi
if wants volume_kill; then
    CAIRN_VOLUME_KILL_ROUNDS="$KILL_ROUNDS" run volume_kill -p cairn-cli --test volume_kill
fi

echo
echo "== volume fault loops ($(git rev-parse --short HEAD 2>/dev/null || echo '?'))"
summary under_load 'ops \(write.*'
summary volume_kill '[0-9]+ fsynced writes in [0-9]+ rounds'
failed=0
for f in "$LOGS"/*.status; do
    [ -e "$f" ] || continue
    read -r status _ <"$f"
    [ "$status" = 0 ] || failed=1
done
exit "$failed"
