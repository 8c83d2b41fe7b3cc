#!/usr/bin/env bash
# What the snapshot summary (`snapshot-summary`, docs/concurrency.md) saves
# a backup on a host whose metadata cache is cold (a new host, a lost
# cache): its first listing of the snapshots reads the summary and the
# records written since, instead of every record. One repository on S3
# (VersityGW behind bench/latency-proxy, DELAY_MS per request, as
# s3-latency.sh) gets SNAPSHOTS small backups from 8 hosts; then ROUNDS
# rounds alternate an incremental backup of a tree with the summary in
# place ("summary") and one with the summary object removed from the
# store first ("none": every record is read, as before the summary), each
# with an empty cache directory, and a backup with a warm cache (the
# host's own cache kept across rounds) either way. Reports the fastest
# and median wall seconds per mode and their ratio; the key derivation
# (cheap Argon2id) is included in every time.
#
#   bench/snapshot-summary.sh
#   SNAPSHOTS=500 ROUNDS=7 DELAY_MS=50 bench/snapshot-summary.sh
set -euo pipefail
cd "$(dirname "$0")/.."
SNAPSHOTS=${SNAPSHOTS:-150}
ROUNDS=${ROUNDS:-5}
DELAY_MS=${DELAY_MS:-20}
WORK=${WORK:-target/snapshot-summary-work}
OUT=${OUT:-bench/out}
CAIRN=${CAIRN:-target/release/cairn}
TOOLS_DIR=${TOOLS_DIR:-target/tools}
export CAIRN_PASSWORD=cairn-bench CAIRN_KDF_MEMORY_KIB=8192 CAIRN_KDF_PASSES=1

[ -x "$CAIRN" ] || cargo build --release --locked -p cairn-cli
CAIRN=$(realpath "$CAIRN")
rm -rf "$WORK" && mkdir -p "$WORK" "$OUT"
WORK=$(realpath "$WORK")
. bench/s3-proxy.sh
repo="s3:$ENDPOINT/bench/sum"
summary="$WORK/store/bench/sum/snapshot-summary"
tree="$WORK/tree"
mkdir -p "$tree"
head -c 200000 /dev/urandom >"$tree/a"
# Changes one file with a distinct mtime, so every backup reads it.
change() { echo "$1" >"$tree/b" && touch -d "@$2" "$tree/b"; }
bk() { "$CAIRN" --repo "$repo" --cache-dir "$1" backup --host "$2" "$tree" >/dev/null; }

"$CAIRN" --repo "$repo" init >/dev/null
echo "== $SNAPSHOTS snapshots" >&2
for i in $(seq 1 "$SNAPSHOTS"); do
    change "s$i" $((1700000000 + i))
    bk "$WORK/cache-build" "h$((i % 8))"
done
times="$WORK/times"
: >"$times"
for r in $(seq 1 "$ROUNDS"); do
    echo "== round $r of $ROUNDS" >&2
    for mode in summary none; do
        # The other mode's backup wrote a fresh summary: "none" removes it.
        [ "$mode" = none ] && rm -f "$summary"
        [ "$mode" = summary ] && [ ! -e "$summary" ] && echo "no summary was written" >&2 && exit 1
        change "$r$mode" $((1800000000 + r))
        rm -rf "$WORK/cold-$mode"
        start=$(date +%s%N)
        bk "$WORK/cold-$mode" cold
        echo "cold $mode $((($(date +%s%N) - start) / 1000000))" >>"$times"
        [ "$mode" = none ] && rm -f "$summary"
        change "$r$mode w" $((1900000000 + r))
        start=$(date +%s%N)
        bk "$WORK/warm-$mode" warm
        echo "warm $mode $((($(date +%s%N) - start) / 1000000))" >>"$times"
    done
done
report="$OUT/snapshot-summary.txt"
python3 - "$times" "$SNAPSHOTS" "$ROUNDS" "$DELAY_MS" "$(git rev-parse --short HEAD)" >"$report" <<'EOF'
import statistics, sys
path, snaps, rounds, delay, commit = sys.argv[1:]
t = {}
for line in open(path):
    cache, mode, s = line.split()
    t.setdefault((cache, mode), []).append(int(s) / 1000)
print(f"snapshot summary, commit {commit}: {snaps} snapshots on S3 (VersityGW, {delay} ms per request), {rounds} rounds")
print("wall s of one incremental backup, key derivation included; none = the summary removed first (every record read)")
print(f"{'cache':6} {'mode':8} {'fastest':>8} {'median':>8}")
for cache in ("cold", "warm"):
    for mode in ("summary", "none"):
        v = t[(cache, mode)]
        print(f"{cache:6} {mode:8} {min(v):8.2f} {statistics.median(v):8.2f}")
    s, n = t[(cache, "summary")], t[(cache, "none")]
    print(f"{cache:6} none/summary: fastest {min(n) / min(s):.2f}x, median {statistics.median(n) / statistics.median(s):.2f}x")
EOF
cat "$report"
