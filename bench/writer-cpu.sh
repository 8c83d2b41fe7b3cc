#!/usr/bin/env bash
# The CPU of many writers' incremental backups (issue 33): phase B of
# many-writers.sh alone, measured per backup. N hosts, each a tree of
# MIB MiB in 4 MiB files of random bytes (half the same on every host,
# half its own), back up into one S3 repository (VersityGW behind
# bench/latency-proxy, DELAY_MS per request); then, for SECS, every host
# rewrites 2 MiB of one of its own files and backs up again, in a loop.
# Reported per binary and run: backups a minute, cairn's CPU seconds per
# backup (user + sys of every backup process) and the S3 server's (its
# process's CPU over the loop, divided by the backups). At eight writers
# the two cores are the limit of phase B, so CPU per backup is what its
# ratio to one writer depends on (docs/concurrency.md, "CPU of a backup
# beside seven others").
#
#   bench/writer-cpu.sh                                       # target/release/cairn, N=8
#   CAIRN_B=/tmp/cairn-before ROUNDS=3 bench/writer-cpu.sh    # alternated with a baseline
#   PERF=1 N=8 bench/writer-cpu.sh    # also `perf record --call-graph dwarf` of host 1's
#                                     # backups: WORK/perf.<i>, one file per backup
#
# Key derivation is cheap (CAIRN_KDF_MEMORY_KIB=8192, one pass) and
# included. About a minute a run. Output: $OUT/writer-cpu.txt.
# WORK is removed at the end unless KEEP_WORK=1 (and kept when a run fails).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-8}
SECS=${SECS:-20}
MIB=${MIB:-64}
ROUNDS=${ROUNDS:-1}
DELAY_MS=${DELAY_MS:-20}
CAIRN=${CAIRN:-target/release/cairn}
CAIRN_B=${CAIRN_B:-}
PERF=${PERF:-}
OUT=${OUT:-bench/out}
TOOLS_DIR=${TOOLS_DIR:-target/tools}
WORK=${WORK:-target/writer-cpu-work}
export CAIRN_PASSWORD=cairn-bench CAIRN_KDF_MEMORY_KIB=8192 CAIRN_KDF_PASSES=1

[ -x "$CAIRN" ] || cargo build --release --locked -p cairn-cli
rm -rf "$WORK" && mkdir -p "$WORK" "$OUT"
WORK=$(realpath "$WORK")
. bench/s3-proxy.sh
FILES=$((MIB / 8)) # per half: MIB/2 MiB in 4 MiB files

mkdir -p "$WORK/base"
for i in $(seq 0 $((FILES - 1))); do head -c 4M /dev/urandom >"$WORK/base/f$i"; done

# One run of binary $1 on a fresh repository; prints its report line.
run() {
    local bin=$1 tag=$2 repo="s3:$ENDPOINT/bench/r$RANDOM$RANDOM" w=() k t0 t1
    local trees="$WORK/trees" cpu="$WORK/cpu"
    rm -rf "$trees" "$cpu" "$WORK/cache" && mkdir -p "$cpu"
    for k in $(seq 1 "$N"); do
        mkdir -p "$trees/h$k/own" && cp -r "$WORK/base" "$trees/h$k/shared"
        for i in $(seq 0 $((FILES - 1))); do head -c 4M /dev/urandom >"$trees/h$k/own/f$i"; done
    done
    mkdir -p "$WORK/seed" && head -c 1M /dev/urandom >"$WORK/seed/s"
    "$bin" --repo "$repo" init >/dev/null 2>&1
    "$bin" --repo "$repo" --cache-dir "$WORK/cache/seed" backup --host seed "$WORK/seed" >/dev/null
    for k in $(seq 1 "$N"); do
        "$bin" --repo "$repo" --cache-dir "$WORK/cache/h$k" backup --host "h$k" "$trees/h$k" >/dev/null &
        w+=($!)
    done
    wait "${w[@]}" && w=()
    local end=$((${EPOCHREALTIME/./} + SECS * 1000000))
    t0=$(awk '{ print $14 + $15 }' "/proc/${PIDS[0]}/stat")
    for k in $(seq 1 "$N"); do
        (
            i=0
            while [ "${EPOCHREALTIME/./}" -lt "$end" ]; do
                f=$trees/h$k/own/f$((i % FILES)) i=$((i + 1))
                dd if=/dev/urandom of="$f" bs=1M count=2 seek=$((RANDOM % 3)) conv=notrunc status=none
                p=()
                [ -n "$PERF" ] && [ "$k" = 1 ] && p=(perf record -q --call-graph dwarf,32768 -F 1999 -o "$WORK/perf.$i")
                /usr/bin/time -a -o "$cpu/$k" -f "%U %S" ${p[@]+"${p[@]}"} "$bin" --repo "$repo" \
                    --cache-dir "$WORK/cache/h$k" backup --wait --host "h$k" "$trees/h$k" >/dev/null 2>>"$WORK/errors"
            done
        ) &
        w+=($!)
    done
    wait "${w[@]}"
    t1=$(awk '{ print $14 + $15 }' "/proc/${PIDS[0]}/stat")
    cat "$cpu"/* | awk -v tag="$tag" -v n="$N" -v s="$SECS" -v srv=$((t1 - t0)) -v hz="$(getconf CLK_TCK)" \
        'NF == 2 { c += $1 + $2; k++ } END { printf "| %s | %d | %d | %.1f | %.3f | %.3f |\n", tag, n, k, k * 60 / s, c / k, srv / hz / k }'
}

{
    echo "writer-cpu: N=$N, $MIB MiB per host, ${SECS} s of backups, ${DELAY_MS} ms per request ($(date -u +%F))"
    echo
    echo "| binary | writers | backups | per minute | cairn CPU s per backup | server CPU s per backup |"
    echo "| --- | ---: | ---: | ---: | ---: | ---: |"
    for r in $(seq 1 "$ROUNDS"); do
        run "$CAIRN" "$(basename "$CAIRN")"
        [ -n "$CAIRN_B" ] && run "$CAIRN_B" "$(basename "$CAIRN_B") (B)"
    done
} | tee "$OUT/writer-cpu.txt"
# A backup that waited for the writer lock says so on stderr; anything
# else there is a failure.
if grep -v "waiting for" "$WORK/errors" 2>/dev/null | grep -q .; then
    echo "backups failed:" && grep -v "waiting for" "$WORK/errors" | sort | uniq -c | head
    exit 1
fi
# Kept with KEEP_WORK=1; a failed run above exits first and keeps it.
cleanup
[ -n "${KEEP_WORK:-}" ] || rm -rf "$WORK"
