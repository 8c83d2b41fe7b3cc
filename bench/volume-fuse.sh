#!/usr/bin/env bash
# Read speed of a plain file through the volume's FUSE layer (issue 32:
# FUSE overhead beside the optimized-file numbers): sequential MB/s and
# random 4 KiB read IOPS through the mount with passthrough on and off,
# against the backing file read directly; the file's cached pages evicted
# before each run, runs alternated, fastest of RUNS. Needs root (mounting
# in-process, passthrough).
#
#   MIB (512)  RUNS (3)  RANDOM_READS (20000)  WORK (target/volume-fuse-bench)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
cargo build --release -q -p cairn-volume --example volume_fuse_bench
"$TARGET_DIR/release/examples/volume_fuse_bench" \
    --mib "${MIB:-512}" --runs "${RUNS:-3}" \
    --random-reads "${RANDOM_READS:-20000}" \
    --dir "${WORK:-$ROOT/target/volume-fuse-bench}"
