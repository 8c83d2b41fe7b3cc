#!/usr/bin/env bash
# The volume scheduler's yield benchmark (issue 32: with a foreground read
# workload on the mount, the workload keeps >= 90% of the throughput it has
# with jobs paused). One process mounts a volume and runs the optimization
# job on a thread beside it; a foreground reader reads an optimized and a
# plain file through the mount with no job, with a job paced by the
# scheduler, and with the same job unpaced; modes alternated, fastest and median of
# RUNS. Prints a markdown table: foreground MB/s and its ratio to no job,
# the job's MB/s, and how long it was paused or throttled. Needs root
# (mounting in-process). QUICK=1: a short run.
#
#   SECONDS_PER_RUN (10)  RUNS (5)  SET_MIB (512)  FG_MIB (64)  WORK (target/volume-yield-bench)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
if [ "${QUICK:-0}" = 1 ]; then
    : "${SECONDS_PER_RUN:=4}" "${RUNS:=2}" "${SET_MIB:=128}" "${FG_MIB:=32}"
fi
cargo build --release -q -p cairn-volume --example volume_yield
"$TARGET_DIR/release/examples/volume_yield" \
    --seconds "${SECONDS_PER_RUN:-10}" --runs "${RUNS:-5}" \
    --set-mib "${SET_MIB:-512}" --fg-mib "${FG_MIB:-64}" \
    --dir "${WORK:-$ROOT/target/volume-yield-bench}"
