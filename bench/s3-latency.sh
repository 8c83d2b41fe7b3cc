#!/usr/bin/env bash
# Backup and restore through a high-latency S3 store (issue 14): a real
# VersityGW server on 127.0.0.1 (the one the tests build), behind
# bench/latency-proxy, which holds back every answer for DELAY_MS (one
# round trip per request). cairn backs up MIB of unique data with
# --s3-uploads N for each N in UPLOADS (a fresh repository each), then
# restores the last with --s3-downloads N for each N in DOWNLOADS; restic
# (from the system packages) backs up and restores the same data through
# the same proxy. Reported per run: throughput, requests and bytes through
# the proxy, per GB backed up, and the share of the machine's CPUs busy
# meanwhile; the ratio of each N's throughput to the first N (target:
# >= 8x with 20 ms, 1 GB) and to the same backup into a local repository
# (the ceiling: what the CPUs allow with no network), and the same for the
# restores.
#
#   bench/s3-latency.sh                          # 1024 MiB, 20 ms, N = 1 2 4 8 16
#   MIB=256 UPLOADS="1 8" DOWNLOADS="1 8" bench/s3-latency.sh
#
# Settings: cairn encrypted (aes-256-gcm, the default; key files with cheap
# Argon2id parameters so that no run pays 0.5 s of key derivation), restic
# with its default s3.connections (5). Output: $OUT/s3-latency.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
MIB=${MIB:-1024}
DELAY_MS=${DELAY_MS:-20}
UPLOADS=${UPLOADS:-1 2 4 8 16}
DOWNLOADS=${DOWNLOADS:-1 8}
TOOLS=${TOOLS:-cairn restic}
WORK=${WORK:-target/s3-latency-work}
OUT=${OUT:-bench/out}
CAIRN=${CAIRN:-target/release/cairn}
TOOLS_DIR=${TOOLS_DIR:-target/tools}
export CAIRN_PASSWORD=cairn-bench RESTIC_PASSWORD=cairn-bench
export CAIRN_KDF_MEMORY_KIB=8192 CAIRN_KDF_PASSES=1
# The local metadata cache (filled by the backups): restores run with it
# ("warm") and with an empty one ("cold", a restore on another machine).
export CAIRN_CACHE_DIR=$WORK/cache

[ -x "$CAIRN" ] || cargo build --release --locked -p cairn-cli
case " $TOOLS " in *" restic "*) command -v restic >/dev/null || apt-get install -y restic >/dev/null ;; esac

rm -rf "$WORK" && mkdir -p "$WORK/data" "$OUT"
. bench/s3-proxy.sh

# Unique data: MIB of random bytes in 16 MiB files.
for i in $(seq 0 $(((MIB + 15) / 16 - 1))); do
    head -c $((16 << 20)) /dev/urandom >"$WORK/data/f$i"
done
BYTES=$(du -sb "$WORK/data" | cut -f1)

report="$OUT/s3-latency.txt"
{
    echo "s3-latency benchmark $(date -u +%Y-%m-%d), $(nproc) CPUs; $((BYTES >> 20)) MiB unique data; VersityGW $VERSITYGW_VERSION (posix) behind a ${DELAY_MS} ms round trip per request"
    printf "%-30s %8s %9s %12s %14s %14s %9s\n" run "s" "MB/s" "requests/GB" "MB up/GB" "MB down/GB" "CPU busy"
} | tee "$report"
# Jiffies of all CPUs: total and idle (idle + iowait), from /proc/stat.
cpu_ticks() { awk '/^cpu / { t = 0; for (i = 2; i <= NF; i++) t += $i; print t, $5 + $6 }' /proc/stat; }
# "seconds busy": a command's wall time and the share of the machine's
# CPUs busy meanwhile (cairn, the server and the proxy together; 100% =
# every core), which says whether a run waited on the network or on CPU.
timed_busy() {
    local c0 c1 secs
    c0=$(cpu_ticks)
    secs=$(timed "$@")
    c1=$(cpu_ticks)
    awk -v s="$secs" -v a="$c0" -v b="$c1" 'BEGIN { split(a, x, " "); split(b, y, " ");
        t = y[1] - x[1]; busy = 0; if (t > 0) busy = 100 * (1 - (y[2] - x[2]) / t)
        printf "%s %.0f%%", s, busy }'
}
row() { # name "seconds busy" before after
    local name=$1 secs busy
    read -r secs busy <<<"$2"
    read -r r0 u0 d0 <<<"$3"
    read -r r1 u1 d1 <<<"$4"
    awk -v n="$name" -v s="$secs" -v c="${busy:--}" -v b="$BYTES" -v r=$((r1 - r0)) -v u=$((u1 - u0)) -v d=$((d1 - d0)) \
        'BEGIN { gb = b / 1e9; printf "%-30s %8.2f %9.1f %12.0f %14.1f %14.1f %9s\n", n, s, b / 1e6 / s, r / gb, u / 1e6 / gb, d / 1e6 / gb, c }' | tee -a "$report"
}

declare -A SPEED RSPEED
last=""
case " $TOOLS " in *" cairn "*)
    # The ceiling: the same backup into a repository on the local disk,
    # where no request waits on a network (what the CPUs allow).
    "$CAIRN" --repo "$WORK/local-repo" init -q
    run=$(timed_busy "$CAIRN" --repo "$WORK/local-repo" backup -q "$WORK/data")
    row "cairn backup, local disk" "$run" "0 0 0" "0 0 0"
    LOCAL=$(awk -v s="${run%% *}" 'BEGIN { print 1 / s }')
    rm -rf "$WORK/local-repo"
    for n in $UPLOADS; do
        repo="s3:$ENDPOINT/bench/cairn-$n"
        "$CAIRN" --repo "$repo" init -q
        before=$(stats)
        run=$(timed_busy "$CAIRN" --repo "$repo" --s3-uploads "$n" backup -q "$WORK/data")
        row "cairn backup, N=$n" "$run" "$before" "$(stats)"
        SPEED[$n]=$(awk -v s="${run%% *}" 'BEGIN { print 1 / s }')
        last=$repo
    done
    for n in $DOWNLOADS; do
        for cache in cold warm; do
            dir=$CAIRN_CACHE_DIR
            [ $cache = cold ] && dir="$WORK/cold-cache" && rm -rf "$dir"
            before=$(stats)
            run=$(timed_busy "$CAIRN" --repo "$last" --cache-dir "$dir" --s3-downloads "$n" restore latest -q --target "$WORK/restored")
            row "cairn restore, N=$n, $cache" "$run" "$before" "$(stats)"
            RSPEED[$n$cache]=$(awk -v s="${run%% *}" 'BEGIN { print 1 / s }')
            diff -r "$WORK/data" "$WORK/restored/data" >/dev/null || { echo "cairn's restore differs" >&2; exit 1; }
            rm -rf "$WORK/restored"
        done
    done
    ;;
esac
case " $TOOLS " in *" restic "*)
    repo="s3:$ENDPOINT/bench/restic"
    restic -q -r "$repo" init >/dev/null
    before=$(stats)
    row "restic backup (5 conn.)" "$(timed_busy restic -q -r "$repo" backup "$WORK/data")" "$before" "$(stats)"
    before=$(stats)
    row "restic restore" "$(timed_busy restic -q -r "$repo" restore latest --target "$WORK/restored")" "$before" "$(stats)"
    ;;
esac
case " $TOOLS " in *" cairn "*)
    first=${UPLOADS%% *}
    # No number of uploads in flight can make a backup faster than the same
    # backup with no network at all: the bound on the ratio to N=first.
    awk -v f="$first" -v l="$LOCAL" -v b="${SPEED[$first]}" \
        'BEGIN { printf "cairn backup: the local-disk backup is %.2fx N=%s (the most any N can reach here)\n", l / b, f }' | tee -a "$report"
    for n in $UPLOADS; do
        awk -v n="$n" -v f="$first" -v a="${SPEED[$n]}" -v b="${SPEED[$first]}" \
            'BEGIN { printf "cairn backup throughput, N=%s: %.2fx N=%s\n", n, a / b, f }' | tee -a "$report"
        awk -v n="$n" -v a="${SPEED[$n]}" -v l="$LOCAL" \
            'BEGIN { printf "cairn backup throughput, N=%s: %.2fx the local-disk backup\n", n, a / l }' | tee -a "$report"
    done
    first=${DOWNLOADS%% *}
    for n in $DOWNLOADS; do
        for cache in cold warm; do
            awk -v n="$n" -v f="$first" -v c="$cache" -v a="${RSPEED[$n$cache]}" -v b="${RSPEED[${first}cold]}" \
                'BEGIN { printf "cairn restore throughput, N=%s, %s cache: %.2fx N=%s cold\n", n, c, a / b, f }' | tee -a "$report"
        done
    done
    ;;
esac
cleanup
PIDS=()
wait 2>/dev/null || true
rm -rf "$WORK"
