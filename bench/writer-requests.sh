#!/usr/bin/env bash
# The requests of many writers' incremental backups (issue 33): N hosts
# (4 MiB x 4 files of random bytes each, their own) back up into one S3
# repository (VersityGW behind bench/latency-proxy, DELAY_MS per request),
# then, for SECONDS_W, each host rewrites 2 MiB of one file and backs up
# again in a loop, as phase B of many-writers.sh. Reported per run:
# backups a minute, requests per backup, the mean time the server took to
# answer (first byte of a request to first byte of its answer, the added
# delay left out), and the requests per backup by kind (from the proxy's
# request log: method and object prefix). With two binaries it alternates
# them ROUNDS times each, every run on a fresh repository, so that a
# change's effect is measured beside its baseline on the same machine.
# MAINT=1 runs `forget --keep-last 3` and `gc` in a loop beside the
# writers (phase G of many-writers.sh); their requests are counted too.
#
#   bench/writer-requests.sh                                  # target/release/cairn, N=8
#   CAIRN_B=/tmp/cairn-before N=8 ROUNDS=3 bench/writer-requests.sh
#
# Key derivation is cheap (CAIRN_KDF_MEMORY_KIB=8192, one pass) and
# included. About 40 s per run. Output: $OUT/writer-requests.txt.
# WORK is removed at the end unless KEEP_WORK=1 (and kept when a run fails).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-8}
SECONDS_W=${SECONDS_W:-20}
ROUNDS=${ROUNDS:-1}
MAINT=${MAINT:-0}
DELAY_MS=${DELAY_MS:-20}
CAIRN=${CAIRN:-target/release/cairn}
CAIRN_B=${CAIRN_B:-}
OUT=${OUT:-bench/out}
TOOLS_DIR=${TOOLS_DIR:-target/tools}
BASE=${WORK:-target/writer-requests-work}
export CAIRN_PASSWORD=cairn-bench CAIRN_KDF_MEMORY_KIB=8192 CAIRN_KDF_PASSES=1

[ -x "$CAIRN" ] || cargo build --release --locked -p cairn-cli
CAIRN=$(realpath "$CAIRN")
[ -z "$CAIRN_B" ] || CAIRN_B=$(realpath "$CAIRN_B")
mkdir -p "$OUT"
REPORT="$OUT/writer-requests.txt"
: >"$REPORT"

# One run of binary $1 labelled $2 on a fresh store and proxy.
run() {
    local bin=$1 label=$2
    (
        WORK=$(realpath -m "$BASE")
        rm -rf "$WORK" && mkdir -p "$WORK"
        export PROXY_REQUEST_LOG=$WORK/requests.log PROXY_TIMING=$WORK/timing
        . bench/s3-proxy.sh
        local repo="s3:$ENDPOINT/bench/w" k pids=()
        mkdir -p "$WORK/seed" && head -c 1M /dev/urandom >"$WORK/seed/s"
        "$bin" --repo "$repo" init -q
        "$bin" --repo "$repo" --cache-dir "$WORK/c/seed" backup -q --host seed "$WORK/seed"
        for k in $(seq "$N"); do
            mkdir -p "$WORK/t$k"
            for f in a b c d; do head -c 4M /dev/urandom >"$WORK/t$k/$f"; done
        done
        for k in $(seq "$N"); do
            "$bin" --repo "$repo" --cache-dir "$WORK/c/$k" backup -q --wait --host "h$k" "$WORK/t$k" &
            pids+=($!)
        done
        wait "${pids[@]}"
        sleep 0.6
        local t0 && t0=$(cat "$WORK/timing")
        : >"$PROXY_REQUEST_LOG"
        local end=$(($(date +%s) + SECONDS_W))
        pids=()
        for k in $(seq "$N"); do
            (
                while [ "$(date +%s)" -lt "$end" ]; do
                    head -c 2M /dev/urandom | dd of="$WORK/t$k/a" conv=notrunc status=none
                    "$bin" --repo "$repo" --cache-dir "$WORK/c/$k" backup -q --wait --host "h$k" "$WORK/t$k" 2>>"$WORK/errors" &&
                        echo >>"$WORK/backups"
                done
            ) &
            pids+=($!)
        done
        if [ "$MAINT" = 1 ]; then
            (
                while [ "$(date +%s)" -lt "$end" ]; do
                    "$bin" --repo "$repo" --cache-dir "$WORK/c/gc" forget -q --wait --keep-last 3 >/dev/null 2>>"$WORK/errors" &&
                        "$bin" --repo "$repo" --cache-dir "$WORK/c/gc" gc -q --wait 2>>"$WORK/errors" &&
                        echo >>"$WORK/gcs"
                done
            ) &
            pids+=($!)
        fi
        wait "${pids[@]}"
        sleep 0.6
        [ "$MAINT" != 1 ] || echo "$label: $(wc -l <"$WORK/gcs" 2>/dev/null || echo 0) collections beside" | tee -a "$REPORT"
        python3 - "$label" "$t0" "$(cat "$WORK/timing")" "$(wc -l <"$WORK/backups")" "$SECONDS_W" "$PROXY_REQUEST_LOG" <<'EOF' | tee -a "$REPORT"
import collections, re, sys
label, t0, t1, n, secs, log = sys.argv[1:]
(r0, s0), (r1, s1) = [map(float, t.split()) for t in (t0, t1)]
n = int(n)
kinds = collections.Counter()
for line in open(log):
    method, path = line.split()[:2]
    path = re.sub(r"^/bench/w/?", "/", path).replace("%2F", "/")
    if "list-type" in path:
        prefix = re.search(r"prefix=w/([^/&]*)", path)
        kind = "LIST " + (prefix.group(1) + "/" if prefix else "/")
    elif "?delete" in path:
        kind = "DeleteObjects"
    else:
        parts = path.split("/")
        kind = method + " " + parts[1] + ("/" if len(parts) > 2 else "")
    kinds[kind] += 1
print(f"{label}: {n} backups, {n * 60 / float(secs):.1f} a minute, "
      f"{(r1 - r0) / n:.1f} requests each, server {1000 * (s1 - s0) / (r1 - r0):.1f} ms a request")
print("  " + ", ".join(f"{k} {v / n:.2f}" for k, v in kinds.most_common()))
EOF
        [ ! -s "$WORK/errors" ] || { echo "$label: errors:"; sort "$WORK/errors" | uniq -c; } | tee -a "$REPORT"
    )
}

echo "N=$N writers, ${SECONDS_W}s of incremental backups each run, ${DELAY_MS} ms per request, maintenance beside: $MAINT" | tee -a "$REPORT"
for _ in $(seq "$ROUNDS"); do
    [ -z "$CAIRN_B" ] || run "$CAIRN_B" "B ($CAIRN_B)"
    run "$CAIRN" "A ($CAIRN)"
done
# Kept with KEEP_WORK=1.
[ -n "${KEEP_WORK:-}" ] || rm -rf "$BASE"
