#!/usr/bin/env bash
# Builds cairn and cairn-bench (release) and runs every benchmark: chunking,
# backup (one source, then one source per top-level directory), restore,
# deferred dedup (on the backup dataset), memory, commit, sim and gc (cairn
# forget + gc against restic forget --prune; restic is installed with apt-get
# if absent, and skipped with a message if that fails). Tables go to stdout
# and bench/out/summary.txt; one JSON file per benchmark goes to bench/out/
# (gitignored). See bench/README.md.
#
# Sizes (environment; defaults take about 2 minutes on 2 cores plus the build):
#   CHUNKING_MIB  chunking buffer, MiB              (256; QUICK=1: 32)
#   BACKUP_MIB    backup/restore dataset gen1, MiB  (1024; QUICK=1: 64)
#   DUP_PCT       gen2 duplicate share, percent      (90)
#   RUNS          best-of runs for backup/restore    (3; QUICK=1: 1)
#   MEMORY_GIB    stream size for memory, GiB        (4; QUICK=1: 0.25)
#   COMMIT_CHUNKS indexed chunks of commit's large repo (1000000; QUICK=1: 100000)
#   SIM_GENERATIONS, SIM_GENERATION_BYTES  the sim benchmark's DDFS workload (10 x 16GiB; QUICK=1: 3 x 2GiB)
#   GC_MIB, GC_GENERATIONS, GC_CHANGE_PCT  gc's tree size (MiB), generations
#                 and per-generation change share (512, 8, 20; QUICK=1: 32, 3, 20)
#   WORK          dataset + repository directory     (target/cairn-bench-work)
#   OUT           result directory                   (bench/out)
#   KEEP_WORK=1   keep WORK afterwards (reused by the next run if sizes match)
#   QUICK=1       small sizes: a smoke run of about a minute
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

if [[ "${QUICK:-0}" == 1 ]]; then
    CHUNKING_MIB="${CHUNKING_MIB:-32}"
    BACKUP_MIB="${BACKUP_MIB:-64}"
    RUNS="${RUNS:-1}"
    MEMORY_GIB="${MEMORY_GIB:-0.25}"
    COMMIT_CHUNKS="${COMMIT_CHUNKS:-100000}"
    SIM_GENERATIONS="${SIM_GENERATIONS:-3}"
    SIM_GENERATION_BYTES="${SIM_GENERATION_BYTES:-2GiB}"
    GC_MIB="${GC_MIB:-32}"
    GC_GENERATIONS="${GC_GENERATIONS:-3}"
else
    CHUNKING_MIB="${CHUNKING_MIB:-256}"
    BACKUP_MIB="${BACKUP_MIB:-1024}"
    RUNS="${RUNS:-3}"
    MEMORY_GIB="${MEMORY_GIB:-4}"
    COMMIT_CHUNKS="${COMMIT_CHUNKS:-1000000}"
    SIM_GENERATIONS="${SIM_GENERATIONS:-10}"
    SIM_GENERATION_BYTES="${SIM_GENERATION_BYTES:-16GiB}"
    GC_MIB="${GC_MIB:-512}"
    GC_GENERATIONS="${GC_GENERATIONS:-8}"
fi
GC_CHANGE_PCT="${GC_CHANGE_PCT:-20}"
DUP_PCT="${DUP_PCT:-90}"
WORK="${WORK:-$ROOT/target/cairn-bench-work}"
OUT="${OUT:-$ROOT/bench/out}"
TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
BENCH="$TARGET_DIR/release/cairn-bench"
CAIRN="$TARGET_DIR/release/cairn"

cargo build --release -p cairn-bench -p cairn-cli
mkdir -p "$OUT" "$WORK"
SUMMARY="$OUT/summary.txt"
{
    echo "cairn benchmarks, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (dirty)')"
    echo "rustc: $(rustc -V)"
    echo "host: $(uname -srm), $(nproc) CPUs, $(awk '/MemTotal/ {printf "%.1f GiB RAM", $2/1048576}' /proc/meminfo)"
    echo "sizes: CHUNKING_MIB=$CHUNKING_MIB BACKUP_MIB=$BACKUP_MIB DUP_PCT=$DUP_PCT RUNS=$RUNS MEMORY_GIB=$MEMORY_GIB"
} | tee "$SUMMARY"

bench() {
    local name="$1"
    shift
    echo | tee -a "$SUMMARY"
    echo "\$ cairn-bench $*" | tee -a "$SUMMARY"
    "$BENCH" "$@" --json-out "$OUT/$name.json" | tee -a "$SUMMARY"
}

# One heavy benchmark at a time: they measure against in-run baselines, and
# two at once would share the cores.
bench chunking chunking --mib "$CHUNKING_MIB"
bench backup-dirs backup --mib "$BACKUP_MIB" --dup-pct "$DUP_PCT" --runs "$RUNS" \
    --streams dirs --dir "$WORK"
bench backup backup --mib "$BACKUP_MIB" --dup-pct "$DUP_PCT" --runs "$RUNS" \
    --dir "$WORK" --keep
bench restore restore --mib "$BACKUP_MIB" --dup-pct "$DUP_PCT" --runs "$RUNS" --dir "$WORK"
bench deferred deferred --mib "$BACKUP_MIB" --dup-pct "$DUP_PCT" --runs "$RUNS" --dir "$WORK"
bench memory memory --gib "$MEMORY_GIB" --encrypted --cairn "$CAIRN" --dir "$WORK"
bench commit commit --chunks "$COMMIT_CHUNKS" --dir "$WORK"
bench sim sim --generations "$SIM_GENERATIONS" --generation-bytes "$SIM_GENERATION_BYTES"
bench gc gc --mib "$GC_MIB" --generations "$GC_GENERATIONS" --change-pct "$GC_CHANGE_PCT" \
    --runs "$RUNS" --cairn "$CAIRN" --dir "$WORK"

if [[ "${KEEP_WORK:-0}" != 1 ]]; then
    rm -rf "$WORK"
fi
echo
echo "results: $OUT/{chunking,backup-dirs,backup,restore,deferred,memory,commit,sim,gc}.json and $SUMMARY"
