#!/usr/bin/env bash
# `cairn copy` from a local repository to a high-latency S3 store (issue 14),
# beside `restic copy` of the same data in the same run: a real VersityGW
# server on 127.0.0.1 behind bench/latency-proxy (DELAY_MS per request,
# bench/s3-proxy.sh). Each tool backs up two generations into a local
# repository (MIB of unique data, then the same with NEW_MIB more), then
# copies them to S3 (the first copy moves everything), backs up a third
# generation (NEW_MIB more) locally and copies again (the incremental copy
# moves only that). cairn's destination is created by `copy` itself with the
# source's identity; restic's with `init --copy-chunker-params`.
# Reported per copy: seconds, MB/s of the data the copied snapshots hold,
# requests and MB uploaded through the proxy, and cairn's speed over restic's.
#
#   bench/s3-copy.sh                 # 512 MiB + 64 MiB per new generation, 20 ms
#   MIB=128 NEW_MIB=16 bench/s3-copy.sh
set -euo pipefail
cd "$(dirname "$0")/.."
MIB=${MIB:-512}
NEW_MIB=${NEW_MIB:-64}
DELAY_MS=${DELAY_MS:-20}
WORK=${WORK:-target/s3-copy-work}
OUT=${OUT:-bench/out}
CAIRN=${CAIRN:-target/release/cairn}
TOOLS_DIR=${TOOLS_DIR:-target/tools}
export CAIRN_PASSWORD=cairn-bench CAIRN_TO_PASSWORD=cairn-bench-dest
export RESTIC_PASSWORD=cairn-bench RESTIC_FROM_PASSWORD=cairn-bench
export CAIRN_KDF_MEMORY_KIB=8192 CAIRN_KDF_PASSES=1
export CAIRN_CACHE_DIR=$WORK/cache

[ -x "$CAIRN" ] || cargo build --release --locked -p cairn-cli
command -v restic >/dev/null || apt-get install -y restic >/dev/null

rm -rf "$WORK" && mkdir -p "$WORK/data" "$OUT"
. bench/s3-proxy.sh

add_files() { # prefix mib
    for i in $(seq 0 $((($2 + 15) / 16 - 1))); do
        head -c $((16 << 20)) /dev/urandom >"$WORK/data/$1$i"
    done
}
add_files base "$MIB"
add_files gen2- "$NEW_MIB"

"$CAIRN" --repo "$WORK/cairn-local" init -q
restic -q -r "$WORK/restic-local" init >/dev/null
for tool in cairn restic; do
    case $tool in
    cairn) "$CAIRN" --repo "$WORK/cairn-local" backup -q "$WORK/data" ;;
    restic) restic -q -r "$WORK/restic-local" backup "$WORK/data" >/dev/null ;;
    esac
done
BYTES=$(du -sb "$WORK/data" | cut -f1)

report="$OUT/s3-copy.txt"
{
    echo "s3-copy benchmark $(date -u +%Y-%m-%d), $(nproc) CPUs; local repositories of ${MIB} MiB + ${NEW_MIB} MiB per generation copied to VersityGW $VERSITYGW_VERSION behind a ${DELAY_MS} ms round trip; cairn $("$CAIRN" --version | cut -d' ' -f2), $(restic version | cut -d' ' -f1-2)"
    printf "%-34s %8s %9s %10s %10s\n" run s "MB/s" requests "MB up"
} | tee "$report"
row() { # name seconds bytes before after
    read -r r0 u0 _ <<<"$4"
    read -r r1 u1 _ <<<"$5"
    awk -v n="$1" -v s="$2" -v b="$3" -v r=$((r1 - r0)) -v u=$((u1 - u0)) \
        'BEGIN { printf "%-34s %8.2f %9.1f %10d %10.1f\n", n, s, b / 1e6 / s, r, u / 1e6 }' | tee -a "$report"
}

declare -A SECS
copy_once() { # label bytes
    local before secs
    before=$(stats)
    secs=$(timed "$CAIRN" --repo "$WORK/cairn-local" copy -q --to "s3:$ENDPOINT/bench/cairn")
    row "cairn copy, $1" "$secs" "$2" "$before" "$(stats)"
    SECS[cairn$1]=$secs
    before=$(stats)
    secs=$(timed restic -q -r "s3:$ENDPOINT/bench/restic" copy --from-repo "$WORK/restic-local")
    row "restic copy, $1" "$secs" "$2" "$before" "$(stats)"
    SECS[restic$1]=$secs
}

restic -q -r "s3:$ENDPOINT/bench/restic" init --from-repo "$WORK/restic-local" --copy-chunker-params >/dev/null
copy_once "first" "$BYTES"

add_files gen3- "$NEW_MIB"
"$CAIRN" --repo "$WORK/cairn-local" backup -q "$WORK/data"
restic -q -r "$WORK/restic-local" backup "$WORK/data" >/dev/null
copy_once "incremental" $((NEW_MIB << 20))

# Both copies restore what was backed up.
"$CAIRN" --repo "s3:$ENDPOINT/bench/cairn" --password-file <(echo "$CAIRN_TO_PASSWORD") restore latest -q --target "$WORK/restored"
diff -r "$WORK/data" "$WORK/restored/data" >/dev/null || { echo "cairn's copy restores differently" >&2; exit 1; }
for c in first incremental; do
    awk -v c="$c" -v a="${SECS[cairn$c]}" -v b="${SECS[restic$c]}" \
        'BEGIN { printf "cairn copy, %s: %.2fx restic copy\n", c, b / a }' | tee -a "$report"
done
cleanup
PIDS=()
wait 2>/dev/null || true
rm -rf "$WORK"
