#!/usr/bin/env bash
# Restore of a fragmented generation over a high-latency S3 store (issue
# 14): GENS generations of MIB of data, each changing CHANGES scattered
# 64 KiB stretches of every 16 MiB file and adding a 1 MiB file, are
# backed up through bench/latency-proxy (DELAY_MS per request) into two
# encrypted repositories: one with the default rewrite scheme, one with
# `--rewrite none`. The last generation is then restored from each, with
# the default restore cache and with a minimal one (container LRU, one
# container), and compared byte for byte. Reported per restore: time,
# requests and bytes through the proxy, container fetches and 002's speed
# factor (MB restored per container fetched).
#
#   bench/s3-fragmented.sh                    # 256 MiB, 12 generations, 20 ms
#   MIB=128 GENS=6 bench/s3-fragmented.sh
set -euo pipefail
cd "$(dirname "$0")/.."
MIB=${MIB:-256}
GENS=${GENS:-12}
CHANGES=${CHANGES:-8}
DELAY_MS=${DELAY_MS:-20}
WORK=${WORK:-target/s3-fragmented-work}
OUT=${OUT:-bench/out}
CAIRN=${CAIRN:-target/release/cairn}
TOOLS_DIR=${TOOLS_DIR:-target/tools}
export CAIRN_PASSWORD=cairn-bench CAIRN_KDF_MEMORY_KIB=8192 CAIRN_KDF_PASSES=1
export CAIRN_CACHE_DIR=$WORK/cache

[ -x "$CAIRN" ] || cargo build --release --locked -p cairn-cli
rm -rf "$WORK" && mkdir -p "$WORK/data" "$OUT"
. bench/s3-proxy.sh

for i in $(seq 0 $(((MIB + 15) / 16 - 1))); do
    head -c $((16 << 20)) /dev/urandom >"$WORK/data/f$i"
done
# The next generation: scattered stretches of every file rewritten, a file added.
mutate() {
    python3 - "$WORK/data" "$CHANGES" "$1" <<'PY'
import os, random, sys
root, changes, gen = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(gen)
for name in sorted(os.listdir(root)):
    path = os.path.join(root, name)
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        for _ in range(changes if size > (1 << 16) else 0):
            f.seek(rng.randrange(0, size - (1 << 16)))
            f.write(os.urandom(1 << 16))
with open(os.path.join(root, f"new{gen}"), "wb") as f:
    f.write(os.urandom(1 << 20))
PY
}

report="$OUT/s3-fragmented.txt"
repo_default="s3:$ENDPOINT/bench/default"
repo_none="s3:$ENDPOINT/bench/none"
"$CAIRN" --repo "$repo_default" init -q
"$CAIRN" --repo "$repo_none" init -q
for g in $(seq 1 "$GENS"); do
    [ "$g" -gt 1 ] && mutate "$g"
    "$CAIRN" --repo "$repo_default" backup -q "$WORK/data"
    "$CAIRN" --repo "$repo_none" backup -q --rewrite none "$WORK/data"
done
BYTES=$(du -sb "$WORK/data" | cut -f1)
{
    echo "s3-fragmented benchmark $(date -u +%Y-%m-%d), $(nproc) CPUs; generation $GENS of $((BYTES >> 20)) MiB ($CHANGES changed 64 KiB stretches per 16 MiB file per generation); VersityGW $VERSITYGW_VERSION behind ${DELAY_MS} ms per request"
    printf "%-34s %8s %8s %10s %10s %10s %8s\n" "rewrite / restore cache" s MB/s requests "MB down" fetches "speed f."
} | tee "$report"
restore() { # name repo args...
    local name=$1 repo=$2
    shift 2
    rm -rf "$WORK/restored"
    local before after t0 secs
    before=$(stats)
    t0=$EPOCHREALTIME
    "$CAIRN" --repo "$repo" --json restore latest --target "$WORK/restored" "$@" >"$WORK/restore.json"
    secs=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.3f", b - a }')
    after=$(stats)
    diff -r "$WORK/data" "$WORK/restored/data" >/dev/null || { echo "restore ($name) differs" >&2; exit 1; }
    rm -rf "$WORK/restored"
    read -r r0 _ d0 <<<"$before"
    read -r r1 _ d1 <<<"$after"
    python3 -c '
import json, sys
j = json.load(open(sys.argv[1])); name, secs, b, r, d = sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
print("%-34s %8.2f %8.1f %10d %10.1f %10d %8.2f" % (name, secs, b / 1e6 / secs, r, d / 1e6, j["container_fetches"], j["speed_factor"]))
' "$WORK/restore.json" "$name" "$secs" "$BYTES" $((r1 - r0)) $((d1 - d0)) | tee -a "$report"
}
minimal=(--restore-policy container-lru --restore-cache 4MiB)
restore "default / default (alacc 64 MiB)" "$repo_default"
restore "default / minimal (1 container)" "$repo_default" "${minimal[@]}"
restore "none / default (alacc 64 MiB)" "$repo_none"
restore "none / minimal (1 container)" "$repo_none" "${minimal[@]}"
for r in default none; do
    echo "repository with rewrite $r: $(du -sm "$WORK/store/bench/$r" | cut -f1) MiB on the store"
done | tee -a "$report"
cleanup
PIDS=()
wait 2>/dev/null || true
rm -rf "$WORK"
