#!/usr/bin/env bash
# What N processes at once cost this machine per unit of work, with no cairn
# and nothing shared (issue 33, phase A's ceiling). Phase A of
# many-writers.sh compares N first backups against one backup's CPU seconds
# per byte times the CPUs; that ceiling assumes a process spends the same
# CPU per byte beside N-1 others as alone. This measures the assumption on
# tools that share nothing: `zstd -3` and `sha256sum` of a file in the page
# cache (half text, half random, like the bench trees' mix of compressible
# and random data), ROUNDS times alone and N at once, alternated, and
# reports the CPU seconds (user + sys) per process. The ratio alone / at
# once is the most the literal ceiling allows any program here.
#
#   bench/cpu-contention.sh              # N=8, 256 MiB, 3 rounds
#   N=4 MIB=256 ROUNDS=5 bench/cpu-contention.sh
#
# Output: $OUT/cpu-contention.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-8}
MIB=${MIB:-256}
ROUNDS=${ROUNDS:-3}
OUT=${OUT:-bench/out}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$OUT"

# Half text (the repository's own sources, repeated), half random.
half=$((MIB * 1024 * 1024 / 2))
while [ "$(stat -c %s "$WORK/text" 2>/dev/null || echo 0)" -lt "$half" ]; do
    cat crates/*/src/*.rs >>"$WORK/text"
done
truncate -s "$half" "$WORK/text"
head -c "$half" /dev/urandom >"$WORK/random"
cat "$WORK/text" "$WORK/random" >"$WORK/input"
rm "$WORK/text" "$WORK/random"
cat "$WORK/input" >/dev/null

# CPU seconds (user + sys) of `$@` reading the input, into file $1.
cpu_of() {
    local out=$1
    shift
    /usr/bin/time -f "%U %S" -o "$out" "$@" <"$WORK/input" >/dev/null
}

# Mean CPU seconds per process of tool "$@" run $k at once.
at_once() {
    local k=$1 i pids=()
    shift
    for i in $(seq "$k"); do
        cpu_of "$WORK/t$i" "$@" &
        pids+=($!)
    done
    wait "${pids[@]}"
    cat $(seq -f "$WORK/t%g" "$k") | awk '{ s += $1 + $2 } END { printf "%.3f", s / NR }'
    rm -f "$WORK"/t*
}

{
    echo "cpu-contention: $N processes at once against one alone, $MIB MiB each (half text, half random), $(nproc) CPUs ($(date -u +%F))"
    echo
    echo "| tool | round | CPU s alone | CPU s each, $N at once | alone / at once |"
    echo "| --- | ---: | ---: | ---: | ---: |"
    for tool in "zstd -3 -c" "sha256sum"; do
        for r in $(seq "$ROUNDS"); do
            # shellcheck disable=SC2086 # the tool's words
            alone=$(at_once 1 $tool)
            # shellcheck disable=SC2086
            many=$(at_once "$N" $tool)
            awk -v t="$tool" -v r="$r" -v a="$alone" -v m="$many" \
                'BEGIN { printf "| `%s` | %d | %.3f | %.3f | %.2fx |\n", t, r, a, m, a / m }'
        done
    done
} | tee "$OUT/cpu-contention.txt"
