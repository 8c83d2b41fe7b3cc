#!/usr/bin/env bash
# A repository on a distributed object store (issue 14; opt-in, not in CI):
# a 3-node Garage cluster on 127.0.0.1, every object replicated on all three
# nodes (replication_factor 3, "consistent" mode: writes and reads need 2 of
# 3 nodes), one cairn repository in a bucket of it.
#
#  1. backup 1 through node 1, restore, byte-identical;
#  2. backup 2 through node 1 while node 3 is killed in the middle of it:
#     the two nodes left hold a quorum, so the backup must complete;
#  3. with node 3 still down, every snapshot restores byte-identically and
#     `check --read-data` is clean;
#  4. node 3 comes back; backup 3 through node 1 while node 1 itself (the
#     node cairn talks to) is killed in the middle of it: the backup must
#     either complete or fail with a clear error (exit 1, its last line
#     "cairn: error: ...", never a death by signal) and leave no snapshot
#     that does not restore;
#  5. node 1 comes back; every snapshot the repository lists restores
#     byte-identically through node 2, and `check --read-data` is clean.
#
#   bench/garage-cluster.sh                # 256 MiB per generation
#   MIB=64 bench/garage-cluster.sh
#
# Garage is installed from crates.io into $TOOLS_DIR (a long build, once):
# `cargo install --locked garage --version $GARAGE_VERSION`; or set GARAGE to
# a garage binary. Output: the log of every step, and $OUT/garage-cluster.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
MIB=${MIB:-256}
WORK=${WORK:-target/garage-work}
OUT=${OUT:-bench/out}
CAIRN=${CAIRN:-target/release/cairn}
TOOLS_DIR=${TOOLS_DIR:-target/tools}
export CAIRN_PASSWORD=cairn-garage
export CAIRN_KDF_MEMORY_KIB=8192 CAIRN_KDF_PASSES=1

[ -x "$CAIRN" ] || cargo build --release --locked -p cairn-cli
CAIRN=$(realpath "$CAIRN")

rm -rf "$WORK" && mkdir -p "$WORK" "$OUT"
WORK=$(realpath "$WORK")
report="$OUT/garage-cluster.txt"
: >"$report"
say() { echo "$*" | tee -a "$report"; }

. bench/garage-start.sh
trap garage_cleanup EXIT
g 1 status | tee -a "$report"
export AWS_ACCESS_KEY_ID=$GARAGE_KEY_ID AWS_SECRET_ACCESS_KEY=$GARAGE_SECRET AWS_REGION=garage

repo() { echo "s3:http://127.0.0.1:${S3[$1]}/cairn/repo"; }
cairn() { "$CAIRN" --cache-dir "$WORK/cache" "$@"; }

# Generation g: MIB of files in 8 MiB files, half of them rewritten per
# generation.
gen() {
    local g=$1 dir="$WORK/src"
    mkdir -p "$dir"
    for i in $(seq 0 $(((MIB + 7) / 8 - 1))); do
        if [ "$g" = 1 ] || [ $((i % 2)) = $((g % 2)) ]; then
            head -c $((8 << 20)) /dev/urandom >"$dir/f$i"
        fi
    done
    rm -rf "$WORK/expect$g" && cp -a "$dir" "$WORK/expect$g"
}
# Restores snapshot $2 through node $1 and compares it with generation $3.
verify() {
    local node=$1 snap=$2 g=$3 out="$WORK/restore-$2"
    rm -rf "$out"
    cairn --repo "$(repo "$node")" restore "$snap" --target "$out" >/dev/null
    if diff -r "$WORK/expect$g" "$out/src" >/dev/null; then
        say "   snapshot $snap (generation $g) restores byte-identically through node $node"
    else
        say "FAIL: snapshot $snap (generation $g) differs after restore through node $node"
        exit 1
    fi
}
# Bytes node 2 (never killed) holds: every object is replicated on it.
stored() { du -sb "$WORK/n2/data" | cut -f1; }
# Backs up generation $2 through node $1 (--wait: a lease a failed backup
# could not delete, or that a rejoining node still lists, keeps the lock
# until it expires) and kills node $3 (kill -9) once
# node 2 holds a sixteenth of MIB more than before the backup, a quarter
# of the generation's new data (no kill if $3 is 0). Sets STATUS.
backup_killing() {
    local node=$1 g=$2 victim=$3
    gen "$g"
    local base
    base=$(stored)
    (cd "$WORK" && exec "$CAIRN" --cache-dir "$WORK/cache" --repo "$(repo "$node")" --json backup --wait src \
        >"$WORK/backup$g.json" 2>"$WORK/backup$g.err") &
    local bpid=$!
    if [ "$victim" != 0 ]; then
        while kill -0 "$bpid" 2>/dev/null && [ $(($(stored) - base)) -lt $((MIB << 16)) ]; do
            sleep 0.05
        done
        if kill -0 "$bpid" 2>/dev/null; then
            say "   killing node $victim (kill -9) with $((($(stored) - base) >> 20)) MiB of backup $g stored"
        else
            say "   backup $g ended before node $victim could be killed"
        fi
        stop "$victim"
    fi
    local t0=$EPOCHREALTIME
    STATUS=0
    wait "$bpid" || STATUS=$?
    ENDED=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
}

say "== cairn on a 3-node Garage $GARAGE_VERSION cluster, replication factor 3, $MIB MiB per generation"
cairn --repo "$(repo 1)" init >/dev/null
say "1. backup 1 through node 1"
backup_killing 1 1 0
[ "$STATUS" = 0 ] || { say "FAIL: backup 1 exited $STATUS: $(cat "$WORK/backup1.err")"; exit 1; }
S1=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$WORK/backup1.json")
verify 1 "$S1" 1

say "2. backup 2 through node 1, node 3 killed in the middle"
backup_killing 1 2 3
if [ "$STATUS" = 0 ]; then
    S2=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$WORK/backup2.json")
    say "   backup 2 completed with node 3 down ($ENDED s after the kill): snapshot $S2"
else
    say "FAIL: backup 2 exited $STATUS with a quorum of nodes up: $(tail -1 "$WORK/backup2.err")"
    exit 1
fi

say "3. node 3 still down: restores and check through node 2"
verify 2 "$S1" 1
verify 2 "$S2" 2
cairn --repo "$(repo 2)" check --read-data >>"$WORK/check3.log" 2>&1 \
    && say "   check --read-data: clean" || { say "FAIL: check --read-data: $(tail -3 "$WORK/check3.log")"; exit 1; }

say "4. node 3 back; backup 3 through node 1, node 1 itself killed in the middle"
start 3
wait_healthy
backup_killing 1 3 1
if [ "$STATUS" = 0 ]; then
    say "   backup 3 completed ($ENDED s after the kill)"
elif [ "$STATUS" = 1 ] && tail -1 "$WORK/backup3.err" | grep -q '^cairn: error: '; then
    say "   backup 3 failed (exit $STATUS, $ENDED s after the kill): $(tail -1 "$WORK/backup3.err")"
else
    # Killed by a signal (exit > 128) or ended without an error line: not
    # a clean failure.
    say "FAIL: backup 3 ended with exit $STATUS and no error line: $(tail -3 "$WORK/backup3.err")"
    exit 1
fi

say "5. node 1 back: every listed snapshot restores through node 2"
start 1
wait_healthy
cairn --repo "$(repo 2)" --json snapshots >"$WORK/snapshots.json"
python3 - "$WORK/snapshots.json" "$S1" "$S2" >"$WORK/listed" <<'EOF'
import json, sys
rows = json.load(open(sys.argv[1]))
known = {sys.argv[2]: 1, sys.argv[3]: 2}
for r in rows:
    sid = r["id"]
    g = next((v for k, v in known.items() if k.startswith(sid) or sid.startswith(k)), 3)
    print(sid, g)
EOF
count=0
while read -r sid g; do
    verify 2 "$sid" "$g"
    count=$((count + 1))
done <"$WORK/listed"
say "   $count snapshots listed, all restore byte-identically"

say "6. backup 4 through node 2 (--wait: a lease the failed backup could not delete lives out its 120 s)"
t0=$EPOCHREALTIME
gen 4
(cd "$WORK" && cairn --repo "$(repo 2)" --json backup --wait src >"$WORK/backup4.json" 2>"$WORK/backup4.err") \
    || { say "FAIL: backup 4: $(tail -1 "$WORK/backup4.err")"; exit 1; }
S4=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$WORK/backup4.json")
say "   backup 4 completed in $(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }') s"
verify 3 "$S4" 4
cairn --repo "$(repo 2)" check --read-data >>"$WORK/check5.log" 2>&1 \
    && say "   check --read-data: clean" || { say "FAIL: check --read-data: $(tail -3 "$WORK/check5.log")"; exit 1; }
say "PASS"
