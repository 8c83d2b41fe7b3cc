#!/usr/bin/env bash
# The CPU of first backups into S3 (issue 33, phase A of many-writers.sh
# alone): N hosts, each a tree of MIB MiB in 4 MiB files of random bytes
# (half the same on every host, half its own), back up their whole trees
# at once into a fresh S3 repository (VersityGW behind bench/latency-proxy,
# DELAY_MS per request) after a 1 MiB seed backup. Reported per binary and
# round: the wall time of the N backups, MB/s, and cairn's CPU seconds
# (user + sys of the N backup processes), also per 64 MiB. With CAIRN_B the
# two binaries alternate ROUNDS times, each round on a fresh repository: a
# change beside its baseline (single runs vary by 10-20% here; compare the
# pairs).
#
#   bench/first-backups.sh                                   # target/release/cairn, N=1
#   CAIRN_B=/tmp/cairn-before ROUNDS=5 bench/first-backups.sh
#   N=8 ROUNDS=4 CAIRN_B=/tmp/cairn-before bench/first-backups.sh
#   PERF=1 bench/first-backups.sh     # also `perf record --call-graph dwarf` of host 1's
#                                     # backup: WORK/perf.<round>.<binary>
#
# Key derivation is cheap (CAIRN_KDF_MEMORY_KIB=8192, one pass) and
# included. About 5 s a round at N=1. Output: $OUT/first-backups.txt.
# WORK is removed at the end unless KEEP_WORK=1 (and kept when a run fails).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-1}
MIB=${MIB:-64}
ROUNDS=${ROUNDS:-3}
DELAY_MS=${DELAY_MS:-20}
CAIRN=${CAIRN:-target/release/cairn}
CAIRN_B=${CAIRN_B:-}
PERF=${PERF:-}
OUT=${OUT:-bench/out}
TOOLS_DIR=${TOOLS_DIR:-target/tools}
WORK=${WORK:-target/first-backups-work}
export CAIRN_PASSWORD=cairn-bench CAIRN_KDF_MEMORY_KIB=8192 CAIRN_KDF_PASSES=1

[ -x "$CAIRN" ] || cargo build --release --locked -p cairn-cli
rm -rf "$WORK" && mkdir -p "$WORK" "$OUT"
WORK=$(realpath "$WORK")
. bench/s3-proxy.sh

. bench/host-trees.sh
host_trees "$N" "$MIB" $((MIB / 2))

binaries=("$(realpath "$CAIRN")")
[ -n "$CAIRN_B" ] && binaries+=("$(realpath "$CAIRN_B")")
report="$OUT/first-backups.txt"
{
    echo "first backups $(date -u +%F), $(nproc) CPUs, N=$N hosts of $MIB MiB, S3 behind $DELAY_MS ms a request"
    printf "%-5s %-28s %7s %7s %7s %13s\n" round binary "wall s" "MB/s" "CPU s" "CPU s/64 MiB"
} | tee "$report"
run=0
for r in $(seq 1 "$ROUNDS"); do
    for b in "${binaries[@]}"; do
        run=$((run + 1))
        repo="s3:$ENDPOINT/bench/first-$run"
        rm -rf "$WORK/cache" "$WORK/time" && mkdir -p "$WORK/time"
        seeded "$b" "$repo"
        pids=()
        t0=$EPOCHREALTIME
        for k in $(seq 1 "$N"); do
            pre=()
            [ -n "$PERF" ] && [ "$k" = 1 ] &&
                pre=(perf record -q -F 1500 --call-graph dwarf,16384 -o "$WORK/perf.$r.$(basename "$b")")
            ${pre[@]+"${pre[@]}"} /usr/bin/time -o "$WORK/time/$k" -f "%U %S" \
                "$b" --repo "$repo" --cache-dir "$WORK/cache/host$k" backup --wait -q --host "host$k" "$WORK/trees/host$k" &
            pids+=($!)
        done
        wait "${pids[@]}"
        t1=$EPOCHREALTIME
        cpu=$(cat "$WORK"/time/* | awk '{ s += $1 + $2 } END { print s }')
        awk -v r="$r" -v b="$b" -v a="$t0" -v e="$t1" -v c="$cpu" -v m="$MIB" -v n="$N" 'BEGIN {
            w = e - a
            printf "%-5d %-28s %7.2f %7.1f %7.2f %13.3f\n", r, substr(b, length(b) - 27), w, n * m * 1.048576 / w, c, c / n * 64 / m
        }' | tee -a "$report"
    done
done
# Kept with KEEP_WORK=1; a failed run above exits first and keeps it.
cleanup
[ -n "${KEEP_WORK:-}" ] || rm -rf "$WORK"
