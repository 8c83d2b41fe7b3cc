#!/usr/bin/env bash
# Runs every fuzz target for SECONDS each (default 5), two at a time, on the
# seed corpus under fuzz/corpus/. Installs cargo-fuzz if missing. Works on the
# stable toolchain: `-s none` builds without a sanitizer (no -Z flags).
# Exits non-zero if any target finds a crash; one summary line per target.
set -euo pipefail
cd "$(dirname "$0")"
secs="${1:-5}"
if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked --version 0.13.2
fi
cargo fuzz build -s none -O --fuzz-dir . >/dev/null 2>build.log || { cat build.log; exit 1; }
targets=$(cargo fuzz list --fuzz-dir .)
mkdir -p logs
status=0
run_one() {
    local t="$1"
    mkdir -p "corpus/$t" "artifacts/$t"
    if cargo fuzz run -s none -O --fuzz-dir . "$t" "corpus/$t" -- \
        -max_total_time="$secs" -max_len=65536 -rss_limit_mb=2048 -timeout=10 \
        -artifact_prefix="artifacts/$t/" >"logs/$t.log" 2>&1; then
        local execs
        execs=$(grep -o 'Done [0-9]* runs' "logs/$t.log" | grep -o '[0-9]*' || true)
        echo "fuzz $t: ok, ${execs:-?} executions in ${secs}s, 0 crashes"
    else
        echo "fuzz $t: CRASH (see fuzz/logs/$t.log and fuzz/artifacts/$t/)"
        tail -30 "logs/$t.log"
        return 1
    fi
}
passed=0
failed=0
set -- $targets
while [ $# -gt 0 ]; do
    run_one "$1" & a=$!
    b=""
    if [ $# -gt 1 ]; then run_one "$2" & b=$!; fi
    if wait $a; then passed=$((passed + 1)); else failed=$((failed + 1)); status=1; fi
    if [ -n "$b" ]; then
        if wait $b; then passed=$((passed + 1)); else failed=$((failed + 1)); status=1; fi
    fi
    shift; [ $# -gt 0 ] && shift
done
echo "fuzz: $passed passed, $failed failed"
exit $status
