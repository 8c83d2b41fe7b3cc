#!/usr/bin/env bash
# Many writers, one repository (issue 33): N backups of N different hosts
# (`--host hostK`) committing into one repository at once, for each N in
# WRITERS, into a directory on the local disk, into S3 (VersityGW behind
# bench/latency-proxy, DELAY_MS per request, as s3-latency.sh) and, with
# STORES="garage", into a 3-node Garage cluster (bench/garage-start.sh;
# replication factor 3, cairn talks to node 1 through the same proxy). Every
# host has its own tree of MIB MiB in 4 MiB files of random bytes:
# SHARED_PCT percent of it are the same files on every host, the rest its
# own. Per store and N, a fresh repository:
#   A. First backups. A 1 MiB seed backup first (a repository's first
#      backup runs alone and writes the index file; backups after it share
#      the writer lock), then all N hosts back up their whole trees at
#      once. Aggregate MB/s (logical bytes over the wall time of all N) and
#      the CPU seconds of the cairn processes (user + sys, /usr/bin/time);
#      the ceiling is what the CPUs allow: one host's CPU seconds per
#      byte backing up alone (the median of CEIL_RUNS first backups, each
#      into a fresh repository: one run varied from 0.49 to 0.82 s of CPU
#      for 64 MiB on one day) give bytes per second per core, times
#      min(N, CPUs). Target: MB/s >= 0.9x the ceiling.
#   I. The control for A (N > 1; INDEP=0 skips it): the same N first
#      backups, each into a repository of its own (seeded alike), all at
#      once. Nothing is shared, so I's MB/s is what these CPUs give N
#      processes of this work at once; A/I is what sharing one repository
#      costs beyond that. (With 8 processes on 2 CPUs, the CPU each spends
#      per byte rises: cache contention and switching. `zstd -3` of text,
#      8 at once, took 18-20% more CPU per file than alone here.)
#   B. Incremental. Every host, in a loop for SECONDS_B, rewrites
#      CHANGE_MIB in place in one of its own files and backs up again
#      (parent: its previous snapshot). Backups committed per minute in all
#      (count over the wall time until the last one ends); ratio to the
#      first N. Target: 8 writers >= 5x one writer.
#   R. Reconciliation, right after A: one `cairn gc` removes the copies
#      two writers stored at once (004's reconciliation, the canonical-
#      copy rule), then the container bytes (`stats --json`) are compared
#      with a local repository where the seed and the same N first backups
#      ran one after another. Target: within 1%.
#   G. B again, with maintenance running beside the writers all along: a
#      loop of `forget --wait --keep-last KEEP_G` (every host's group) and
#      `cairn gc`, neither of which stops a backup. Backups committed per
#      minute against B's first N. Target: 8 writers >= 4x one writer.
#   Then `cairn check` must pass and every host's latest snapshot must
#   restore byte-identically (diff -r); the repository's size is reported.
#
#   bench/many-writers.sh                          # N = 1 2 4 8, 64 MiB per host, local and s3
#   WRITERS="1 2 4" MIB=16 SECONDS_B=15 bench/many-writers.sh
#   STORES=s3 DELAY_MS=100 CAIRN=/path/to/cairn bench/many-writers.sh
#   STORES="s3 garage" WRITERS="1 8" bench/many-writers.sh   # Garage: a long build, once
#   KEEP_FAILED=/tmp/mw-failed bench/many-writers.sh   # keeps a repository that fails its check
#   KEEP_WORK=1 bench/many-writers.sh                # keeps WORK (trees, caches, the last store and N's logs, gc reports)
#
# Settings: cairn encrypted (aes-256-gcm, the default) with cheap Argon2id
# key files (CAIRN_KDF_MEMORY_KIB=8192, CAIRN_KDF_PASSES=1): every cairn
# process derives the key once, and that is included in every time and CPU
# figure. Backups run with --wait (one that finds the writer lock held
# alone, e.g. by another backup's tidy-up after its commit, waits; the
# "waiting for" lines are counted); WAIT=0 runs them without, and a
# backup refused by the lock counts as failed. S3: default --s3-uploads
# (8), one metadata cache per host (as on N machines). The trees are read
# from the page cache. Each row also gives the CPU seconds of the S3
# server and proxy and of every other process (a row where others took
# over 5% of the CPUs is marked `!`: disturbed). Output: $OUT/many-writers.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
WRITERS=${WRITERS:-1 2 4 8}
STORES=${STORES:-local s3}
MIB=${MIB:-64}
SHARED_PCT=${SHARED_PCT:-50}
CHANGE_MIB=${CHANGE_MIB:-2}
SECONDS_B=${SECONDS_B:-30}
CEIL_RUNS=${CEIL_RUNS:-3}
INDEP=${INDEP:-1}
KEEP_G=${KEEP_G:-3}
DELAY_MS=${DELAY_MS:-20}
WAIT=${WAIT:-1}
WAIT_FLAG=$([ "$WAIT" = 1 ] && echo --wait || true)
WORK=${WORK:-target/many-writers-work}
OUT=${OUT:-bench/out}
CAIRN=${CAIRN:-target/release/cairn}
TOOLS_DIR=${TOOLS_DIR:-target/tools}
export CAIRN_PASSWORD=cairn-bench CAIRN_KDF_MEMORY_KIB=8192 CAIRN_KDF_PASSES=1
CPUS=$(nproc)

[ -x "$CAIRN" ] || cargo build --release --locked -p cairn-cli
CAIRN=$(realpath "$CAIRN")
rm -rf "$WORK" && mkdir -p "$WORK" "$OUT"
WORK=$(realpath "$WORK")
export CAIRN_CACHE_DIR=$WORK/cache/default
cleanup() { :; }
PIDS=()
case " $STORES " in *" s3 "*) . bench/s3-proxy.sh && S3_KEY_ID=$AWS_ACCESS_KEY_ID S3_SECRET=$AWS_SECRET_ACCESS_KEY ;; esac
case " $STORES " in
*" garage "*)
    . bench/garage-start.sh
    . bench/latency-proxy.sh
    GPROXY_PORT=$(free_port)
    latency_proxy "$GPROXY_PORT" "127.0.0.1:${S3[1]}" "$WORK/garage-proxy-stats" "$WORK/garage-proxy.log"
    GPROXY_PID=$!
    trap 'cleanup; garage_cleanup; kill "$GPROXY_PID" 2>/dev/null || true' EXIT
    # The nodes and the proxy count as the server (srv s).
    PIDS+=($! "${PID[1]}" "${PID[2]}" "${PID[3]}")
    for _ in $(seq 100); do grep -q ready "$WORK/garage-proxy.log" 2>/dev/null && break; sleep 0.1; done
    GARAGE_ENDPOINT="http://127.0.0.1:$GPROXY_PORT"
    ;;
esac
# The store's repository for N writers, its credentials, and the directory
# holding it (none for Garage: its size comes from `cairn stats`).
use_store() {
    case "$1" in
    s3)
        export AWS_ACCESS_KEY_ID=$S3_KEY_ID AWS_SECRET_ACCESS_KEY=$S3_SECRET && unset AWS_REGION
        repo="s3:$ENDPOINT/bench/mw-$2" dir="$WORK/store/bench/mw-$2"
        ;;
    garage)
        export AWS_ACCESS_KEY_ID=$GARAGE_KEY_ID AWS_SECRET_ACCESS_KEY=$GARAGE_SECRET AWS_REGION=garage
        repo="s3:$GARAGE_ENDPOINT/cairn/mw-$2" dir=""
        ;;
    *) repo="$WORK/repo-$2" dir=$repo ;;
    esac
}

# The trees: MIB per host, SHARED_PCT of it the same on every host.
. bench/host-trees.sh
MAXN=$(printf '%s\n' $WRITERS | sort -n | tail -1)
host_trees "$MAXN" "$MIB" $((MIB * SHARED_PCT / 100))

# "total idle server" jiffies: of all CPUs and idle (+ iowait), from
# /proc/stat, and the S3 server's and proxy's CPU time (PIDS).
ticks() {
    local srv=0 p
    for p in ${PIDS[@]+"${PIDS[@]}"}; do srv=$((srv + $(awk '{ print $14 + $15 }' "/proc/$p/stat"))); done
    awk -v s=$srv '/^cpu / { t = 0; for (i = 2; i <= NF; i++) t += $i; print t, $5 + $6, s }' /proc/stat
}
# "busy% server_s others_s" between two ticks, cairn's CPU seconds $3: the
# machine's busy share, the server's and proxy's CPU s, everyone else's.
load() { awk -v a="$1" -v b="$2" -v c="$3" -v hz="$(getconf CLK_TCK)" 'BEGIN { split(a, x, " "); split(b, y, " ")
    t = y[1] - x[1]; u = t - y[2] + x[2]; s = (y[3] - x[3]) / hz
    printf "%.0f%% %.2f %.2f", (t > 0 ? 100 * u / t : 0), s, u / hz - s - c }'; }
usecs() { echo "${EPOCHREALTIME/./}"; }
# Lines in the files given; lock waits in them; the CPU s /usr/bin/time wrote.
lines() { { cat "$@" 2>/dev/null || true; } | wc -l; }
waits() { { grep -h "waiting for" "$@" 2>/dev/null || true; } | wc -l; }
cpu_sum() { { cat "$@" 2>/dev/null || true; } | awk 'NF == 2 && $1 ~ /^[0-9.]+$/ { s += $1 + $2 } END { printf "%.2f", s }'; }
# One backup of host $2's tree into repository $1; its CPU goes to $3.time,
# its output to $3.out and $3.err. Further arguments go to `backup`.
bk() {
    local repo=$1 h=$2 log=$3
    shift 3
    /usr/bin/time -a -o "$log.time" -f "%U %S" "$CAIRN" --repo "$repo" --cache-dir "$WORK/cache/$h" \
        backup $WAIT_FLAG --host "$h" "$@" "$WORK/trees/$h" >>"$log.out" 2>>"$log.err"
}

# Phase $1's first backups of hosts 1..$2, all at once: host K into the
# K-th repository given after them, or every host into the one given;
# logs in $WORK/log/$1K.*, failures in $WORK/log/$1.fail. Sets c0 t0
# before and t1 c1 after.
all_at_once() {
    local phase=$1 n=$2 k r pids=()
    shift 2
    local repos=("$@")
    c0=$(ticks) t0=$(usecs)
    for k in $(seq 1 "$n"); do
        r=${repos[0]}
        if [ ${#repos[@]} -gt 1 ]; then r=${repos[$((k - 1))]}; fi
        (bk "$r" "host$k" "$WORK/log/$phase$k" --json || echo "host$k exit $?" >>"$WORK/log/$phase.fail") &
        pids+=($!)
    done
    wait "${pids[@]}"
    t1=$(usecs) c1=$(ticks)
}

# Phase $1's incremental loop: every one of $3 hosts, until the deadline
# $4 (usecs), rewrites CHANGE_MIB of one of its own files and backs up
# into repository $2; logs in $WORK/log/$1K.*.
incremental() {
    local phase=$1 repo=$2 n=$3 deadline=$4 k pids=()
    for k in $(seq 1 "$n"); do
        (
            own=("$WORK/trees/host$k/own"/f*) i=0
            while [ "$(usecs)" -lt "$deadline" ]; do
                f=${own[$((i % ${#own[@]}))]} i=$((i + 1))
                size=$(($(stat -c %s "$f") >> 20)) off=0
                [ "$size" -gt "$CHANGE_MIB" ] && off=$((RANDOM % (size - CHANGE_MIB + 1)))
                dd if=/dev/urandom of="$f" bs=1M count="$CHANGE_MIB" seek="$off" conv=notrunc status=none
                if bk "$repo" "host$k" "$WORK/log/$phase$k" --json; then echo ok >>"$WORK/log/$phase$k.ok"; else echo "host$k exit $?" >>"$WORK/log/$phase.fail"; fi
            done
        ) &
        pids+=($!)
    done
    wait "${pids[@]}"
}
# Bytes of every container file of repository $1 (`stats --json`).
container_bytes() {
    "$CAIRN" --repo "$1" --cache-dir "$WORK/cache/stats" --json stats 2>>"$WORK/errors" |
        python3 -c 'import json, sys; print(json.load(sys.stdin)["container_bytes"])'
}
# Over the `backup --json` objects in the files given: "backups logical
# bytes concurrent_duplicates replayed_containers open_s commit_s lock_s"
# (the last three as means per backup; lock_s: taking the writer lock,
# waits for a writer alone included).
jstats() {
    python3 - "$@" <<'EOF'
import json, sys
n = b = d = r = o = c = w = 0
for f in sys.argv[1:]:
    text, i = open(f).read(), 0
    while text[i:].strip():
        j, i = json.JSONDecoder().raw_decode(text, len(text) - len(text[i:].lstrip()))
        n, b, d, r = n + 1, b + j["stats"]["logical_bytes"], d + j.get("concurrent_duplicates", 0), r + j["replayed_containers"]
        o, c = o + j["phases"]["open_seconds"], c + j["phases"]["commit_seconds"]
        w += j.get("lock_seconds", 0)
print(n, b, d, r, "%.3f %.3f %.3f" % (o / max(n, 1), c / max(n, 1), w / max(n, 1)))
EOF
}

# Phase A's ceiling on STORE: CPB (cairn's CPU s per byte) and CPBM (with
# the server's and proxy's CPU added) of host 1's first backup alone, the
# run of median CPB among CEIL_RUNS, each into a fresh repository.
calibrate() {
    local i c0 c1 cpu bytes ld rows=()
    for i in $(seq 1 "$CEIL_RUNS"); do
        echo "== $1: ceiling, host 1 alone ($i of $CEIL_RUNS)" >&2
        use_store "$1" "ceil$i"
        rm -rf "$WORK/cache" "$WORK/log" && mkdir -p "$WORK/log"
        seeded "$CAIRN" "$repo"
        c0=$(ticks)
        bk "$repo" host1 "$WORK/log/c1" --json
        c1=$(ticks)
        read -r _ bytes _ _ < <(jstats "$WORK/log/c1.out")
        cpu=$(cpu_sum "$WORK/log/c1.time") ld=$(load "$c0" "$c1" "$cpu")
        rows+=("$(awk -v c="$cpu" -v ld="$ld" -v b="$bytes" 'BEGIN { split(ld, L, " "); print c / b, (c + L[2]) / b }')")
    done
    read -r "CPB[$1]" "CPBM[$1]" < <(printf '%s\n' "${rows[@]}" | sort -g | awk '{ r[NR] = $0 } END { print r[int((NR + 1) / 2)] }')
    echo "$1: ceiling from $CEIL_RUNS runs of host 1 alone, CPU s per GB: $(printf '%s\n' "${rows[@]}" | awk '{ printf "%s%.2f", (NR > 1 ? ", " : ""), $1 * 1e9 }') (median taken)" >>"$WORK/ceilings"
}

report="$OUT/many-writers.txt"
T0=$(usecs)
A="$WORK/rows-a" I="$WORK/rows-i" B="$WORK/rows-b" C="$WORK/rows-c" V="$WORK/verdicts" R="$WORK/rows-r" G="$WORK/rows-g"
touch "$A" "$I" "$B" "$C" "$V" "$R" "$G" "$WORK/ceilings"
declare -A CPB CPBM CPBK RATE_1

for store in $STORES; do
    first=""
    calibrate "$store"
    for n in $WRITERS; do
        [ -n "$first" ] || first=$n
        rm -rf "$WORK/cache" "$WORK/log" && mkdir -p "$WORK/log"
        use_store "$store" "$n"
        echo "== $store, N=$n: seed backup" >&2
        seeded "$CAIRN" "$repo"

        # A: every host's first backup, all at once.
        echo "== $store, N=$n: phase A (first backups)" >&2
        all_at_once a "$n" "$repo"
        read -r _ bytes dups _ < <(jstats "$WORK"/log/a*.out)
        cpu=$(cpu_sum "$WORK"/log/a*.time) fails=$(lines "$WORK/log/a.fail") waits=$(waits "$WORK"/log/a*.err)
        ld=$(load "$c0" "$c1" "$cpu")
        [ -n "${CPB[$store]:-}" ] || [ "$bytes" = 0 ] || {
            CPB[$store]=$(awk -v c="$cpu" -v b="$bytes" 'BEGIN { print c / b }')
            CPBM[$store]=$(awk -v c="$cpu" -v ld="$ld" -v b="$bytes" 'BEGIN { split(ld, L, " "); print (c + L[2]) / b }')
        }
        awk -v s="$store" -v n="$n" -v us=$((t1 - t0)) -v b="$bytes" -v c="$cpu" -v cpb="${CPB[$store]:-0}" -v cpbm="${CPBM[$store]:-0}" -v cpus="$CPUS" \
            -v ld="$ld" -v d="$dups" -v f="$fails" -v w="$waits" -v fn="$first" 'BEGIN {
            if (b == 0 || cpb == 0) { printf "%-6s %3d  no backup committed (or none at the first N)\n", s, n; exit }
            secs = us / 1e6; mbs = b / 1e6 / secs; m = (n < cpus ? n : cpus); ceil = m / cpb / 1e6; ceilm = m / cpbm / 1e6; split(ld, L, " ")
            if (L[3] > 0.05 * secs * cpus) { L[3] = L[3] "!"; printf "WARNING: A %s N=%d: other processes took %.2f CPU s of %.2f\n", s, n, L[3], secs * cpus > "/dev/stderr" }
            printf "%-6s %3d %6.2f %7.1f %6.2f %8.2f %9.1f %6.2fx %6.2fx %5s %6.2f %6s %7d %4d %5d\n", s, n, secs, mbs, c, c / b * 1e9, ceil, mbs / ceil, mbs / ceilm, L[1], L[2], L[3], d, f, w
            printf "A %s N=%d: %.1f MB/s = %.2fx the CPU ceiling %.1f MB/s (from host 1 alone: CPU s per byte, x min(N, %d CPUs)); target >= 0.9x: %s\n", s, n, mbs, mbs / ceil, ceil, cpus, (mbs / ceil >= 0.9 ? "met" : "NOT met") > "/dev/stderr"
            if (s != "local") printf "A %s N=%d: %.2fx the machine ceiling %.1f MB/s (the server and proxy on these CPUs too: their CPU s per byte added, host 1 alone); target >= 0.9x: %s\n", s, n, mbs / ceilm, ceilm, (mbs / ceilm >= 0.9 ? "met" : "NOT met") > "/dev/stderr"
        }' >>"$A" 2>>"$V"
        cat "$WORK"/log/a*.err >>"$WORK/errors" 2>/dev/null || true
        a_mbs=$(awk -v b="$bytes" -v us=$((t1 - t0)) 'BEGIN { print (us > 0 ? b / us : 0) }')

        # I: the control for A. The same N first backups, each into a
        # repository of its own (seeded alike), all at once: nothing shared,
        # so what they reach is what these CPUs give N processes of this
        # work, their switching and caches included.
        if [ "$n" -gt 1 ] && [ "$INDEP" = 1 ]; then
            echo "== $store, N=$n: phase I (independent repositories)" >&2
            rm -rf "$WORK/cache"
            irepos=()
            for k in $(seq 1 "$n"); do
                use_store "$store" "$n-i$k"
                irepos+=("$repo")
                seeded "$CAIRN" "$repo"
            done
            all_at_once i "$n" "${irepos[@]}"
            read -r _ ibytes _ _ < <(jstats "$WORK"/log/i*.out)
            icpu=$(cpu_sum "$WORK"/log/i*.time) ifails=$(lines "$WORK/log/i.fail")
            ld=$(load "$c0" "$c1" "$icpu")
            awk -v s="$store" -v n="$n" -v us=$((t1 - t0)) -v b="$ibytes" -v c="$icpu" -v ld="$ld" -v f="$ifails" -v a="$a_mbs" -v cpus="$CPUS" 'BEGIN {
                if (b == 0) { printf "%-6s %3d  no backup committed\n", s, n; exit }
                secs = us / 1e6; mbs = b / 1e6 / secs; split(ld, L, " ")
                if (L[3] > 0.05 * secs * cpus) { L[3] = L[3] "!"; printf "WARNING: I %s N=%d: other processes took %.2f CPU s of %.2f\n", s, n, L[3], secs * cpus > "/dev/stderr" }
                printf "%-6s %3d %6.2f %7.1f %6.2f %8.2f %5s %6.2f %6s %4d %8.2fx\n", s, n, secs, mbs, c, c / b * 1e9, L[1], L[2], L[3], f, a / mbs
                printf "A %s N=%d: %.2fx the MB/s of the same backups into %d independent repositories (%.1f MB/s: no shared state, the CPUs shared alike); target >= 0.9x: %s\n", s, n, a / mbs, n, mbs, (a / mbs >= 0.9 ? "met" : "NOT met") > "/dev/stderr"
            }' >>"$I" 2>>"$V"
            cat "$WORK"/log/i*.err >>"$WORK/errors" 2>/dev/null || true
            # Their space back (a Garage cluster keeps them until it is torn down).
            for k in $(seq 1 "$n"); do
                use_store "$store" "$n-i$k"
                if [ -n "$dir" ]; then rm -rf "$dir"; fi
            done
            use_store "$store" "$n"
        fi

        # R: reconciliation, and the size the same backups make in series.
        echo "== $store, N=$n: phase R (reconciliation)" >&2
        rm -rf "$WORK/seq" && "$CAIRN" --repo "$WORK/seq" init -q
        for h in seed $(seq -f 'host%g' 1 "$n"); do
            src="$WORK/trees/$h" && [ "$h" = seed ] && src="$WORK/seed"
            "$CAIRN" --repo "$WORK/seq" --cache-dir "$WORK/cache/seq" backup -q --host "$h" "$src"
        done
        seq_bytes=$(container_bytes "$WORK/seq") before=$(container_bytes "$repo")
        t0=$(usecs)
        "$CAIRN" --repo "$repo" --cache-dir "$WORK/cache/gc" gc -q 2>>"$WORK/errors" || echo "$store N=$n: gc failed" >>"$WORK/errors"
        t1=$(usecs) after=$(container_bytes "$repo")
        rm -rf "$WORK/seq"
        awk -v s="$store" -v n="$n" -v q="$seq_bytes" -v b="$before" -v a="$after" -v us=$((t1 - t0)) 'BEGIN {
            printf "%-6s %3d %10.2f %10.2f %10.2f %+8.2f%% %+8.2f%% %7.2f\n", s, n, b / 1048576, a / 1048576, q / 1048576, 100 * (b / q - 1), 100 * (a / q - 1), us / 1e6
            printf "R %s N=%d: after reconciliation %+.2f%% of the size in series; target within 1%%: %s\n", s, n, 100 * (a / q - 1), (a <= 1.01 * q ? "met" : "NOT met") > "/dev/stderr"
        }' >>"$R" 2>>"$V"

        # B: incremental backups in a loop, every host at once.
        echo "== $store, N=$n: phase B (incremental, ${SECONDS_B}s)" >&2
        c0=$(ticks) t0=$(usecs)
        incremental b "$repo" "$n" $((t0 + SECONDS_B * 1000000))
        t1=$(usecs) c1=$(ticks) count=$(lines "$WORK"/log/b*.ok) cpu=$(cpu_sum "$WORK"/log/b*.time)
        fails=$(lines "$WORK/log/b.fail") waits=$(waits "$WORK"/log/b*.err)
        read -r _ _ _ replayed open commit lock < <(jstats "$WORK"/log/b*.out)
        rate=$(awk -v c="$count" -v us=$((t1 - t0)) 'BEGIN { print c * 60e6 / us }')
        ld=$(load "$c0" "$c1" "$cpu")
        [ -n "${RATE_1[$store]:-}" ] || {
            RATE_1[$store]=$rate
            # CPU s per backup at the first N, the server's and proxy's included.
            CPBK[$store]=$(awk -v c="$cpu" -v ld="$ld" -v k="$count" 'BEGIN { split(ld, L, " "); print k ? (c + L[2]) / k : 0 }')
        }
        awk -v s="$store" -v n="$n" -v us=$((t1 - t0)) -v c="$count" -v r="$rate" -v r1="${RATE_1[$store]}" -v cpu="$cpu" -v cpbk="${CPBK[$store]}" \
            -v ld="$ld" -v f="$fails" -v w="$waits" -v fn="$first" -v rp="$replayed" -v o="$open" -v cm="$commit" -v lk="$lock" -v cpus="$CPUS" 'BEGIN {
            x = r1 > 0 ? r / r1 : 0; secs = us / 1e6; split(ld, L, " ")
            ceil = cpbk > 0 ? (n < cpus ? n : cpus) * 60 / cpbk : 0
            if (L[3] > 0.05 * secs * cpus) { L[3] = L[3] "!"; printf "WARNING: B %s N=%d: other processes took %.2f CPU s of %.2f\n", s, n, L[3], secs * cpus > "/dev/stderr" }
            printf "%-6s %3d %6.2f %7d %7.1f %6.2fx %6.3f %6.3f %6.3f %6.1f %5s %6.2f %6s %4d %5d %6.3f %7.0f %6.2fx\n", s, n, secs, c, r, x, c ? cpu / c : 0, o, cm, c ? rp / c : 0, L[1], L[2], L[3], f, w, lk, ceil, (ceil > 0 ? r / ceil : 0)
            if (n == 8 && fn == 1) printf "B %s N=8: %.1f backups/min = %.2fx N=1; target >= 5x: %s (%.2fx the machine ceiling %.0f/min)\n", s, r, x, (x >= 5 ? "met" : "NOT met"), (ceil > 0 ? r / ceil : 0), ceil > "/dev/stderr"
        }' >>"$B" 2>>"$V"
        cat "$WORK"/log/b*.err >>"$WORK/errors" 2>/dev/null || true

        # G: B again with forget and gc in a loop beside the writers.
        echo "== $store, N=$n: phase G (incremental beside forget + gc, ${SECONDS_B}s)" >&2
        c0=$(ticks) t0=$(usecs)
        deadline=$((t0 + SECONDS_B * 1000000))
        (
            while [ "$(usecs)" -lt "$deadline" ]; do
                if "$CAIRN" --repo "$repo" --cache-dir "$WORK/cache/gc" forget -q --wait --keep-last "$KEEP_G" >/dev/null 2>>"$WORK/log/g-maint.err" &&
                    "$CAIRN" --repo "$repo" --cache-dir "$WORK/cache/gc" --json gc --wait >>"$WORK/log/g-gc.json" 2>>"$WORK/log/g-maint.err"; then
                    echo ok >>"$WORK/log/g-gc.ok"
                else
                    echo "maintenance exit $?" >>"$WORK/log/g-maint.fail"
                fi
            done
        ) &
        maint=$!
        incremental g "$repo" "$n" "$deadline"
        # The writers' rate over their own time, as B's: the maintenance
        # loop's last collection may run on for seconds after the last
        # backup ended, and counting that time (as until 2026-11-28) took
        # up to a third off the rate when a collection started late.
        t1=$(usecs) c1=$(ticks)
        wait "$maint"
        count=$(lines "$WORK"/log/g[0-9]*.ok) cpu=$(cpu_sum "$WORK"/log/g[0-9]*.time)
        fails=$(($(lines "$WORK/log/g.fail") + $(lines "$WORK/log/g-maint.fail"))) gcs=$(lines "$WORK/log/g-gc.ok")
        reclaimed=$(python3 - "$WORK/log/g-gc.json" <<'EOF2'
import json, sys
i, r, d = 0, 0, 0
try:
    text = open(sys.argv[1]).read()
    while text[i:].strip():
        j, i = json.JSONDecoder().raw_decode(text, len(text) - len(text[i:].lstrip()))
        r, d = r + j.get("reclaimed_bytes", 0), d + j.get("containers_deleted", 0)
except (ValueError, OSError):
    pass
print("%.1f %d" % (r / 1048576, d))
EOF2
)
        rate=$(awk -v c="$count" -v us=$((t1 - t0)) 'BEGIN { print c * 60e6 / us }')
        awk -v s="$store" -v n="$n" -v us=$((t1 - t0)) -v c="$count" -v r="$rate" -v r1="${RATE_1[$store]}" -v cpu="$cpu" \
            -v ld="$(load "$c0" "$c1" "$cpu")" -v f="$fails" -v g="$gcs" -v rc="$reclaimed" -v fn="$first" -v cpus="$CPUS" 'BEGIN {
            x = r1 > 0 ? r / r1 : 0; secs = us / 1e6; split(ld, L, " "); split(rc, RC, " ")
            if (L[3] > 0.05 * secs * cpus) { L[3] = L[3] "!"; printf "WARNING: G %s N=%d: other processes took %.2f CPU s of %.2f\n", s, n, L[3], secs * cpus > "/dev/stderr" }
            printf "%-6s %3d %6.2f %7d %7.1f %6.2fx %4d %9.1f %6d %5s %6.2f %6s %4d\n", s, n, secs, c, r, x, g, RC[1], RC[2], L[1], L[2], L[3], f
            if (n == 8 && fn == 1) printf "G %s N=8: %.1f backups/min beside forget + gc = %.2fx B at N=1; target >= 4x: %s\n", s, r, x, (x >= 4 ? "met" : "NOT met") > "/dev/stderr"
        }' >>"$G" 2>>"$V"
        cat "$WORK"/log/g*.err >>"$WORK/errors" 2>/dev/null || true

        # After: check, every host's latest snapshot restored and compared.
        echo "== $store, N=$n: check and restores" >&2
        t0=$(usecs) check=passed restored=0
        "$CAIRN" --repo "$repo" --cache-dir "$WORK/cache/check" check -q 2>>"$WORK/errors" || check=FAILED
        for k in $(seq 1 "$n"); do
            rm -rf "$WORK/restored"
            "$CAIRN" --repo "$repo" --cache-dir "$WORK/cache/host$k" restore latest --host "host$k" -q --target "$WORK/restored" 2>>"$WORK/errors" &&
                diff -r "$WORK/trees/host$k" "$WORK/restored/host$k" >/dev/null && restored=$((restored + 1)) ||
                echo "$store N=$n: host$k's latest snapshot does not restore byte-identically" >>"$WORK/errors"
        done
        rm -rf "$WORK/restored" && snaps=$("$CAIRN" --repo "$repo" --cache-dir "$WORK/cache/check" --json snapshots | python3 -c 'import json, sys; print(len(json.load(sys.stdin)))')
        if [ -n "$dir" ]; then size=$(du -sb "$dir" | cut -f1); else size=$(container_bytes "$repo"); fi
        printf "%-6s %3d %8s %5d/%-3d %9d %10.1f %10.1f %8.1f\n" "$store" "$n" "$check" "$restored" "$n" "$snaps" \
            "$(awk -v s="$size" 'BEGIN { print s / 1048576 }')" "$(awk -v m="$MIB" -v n="$n" -v p="$SHARED_PCT" 'BEGIN { print m * (p / 100 + n * (1 - p / 100)) }')" \
            "$(awk -v a="$t0" -v b="$(usecs)" 'BEGIN { print (b - a) / 1e6 }')" >>"$C"
        if [ "$check" != passed ] || [ "$restored" != "$n" ]; then
            echo "after $store N=$n: check $check, $restored of $n hosts restore byte-identically: FAILED" >>"$V"
            # Kept for a post-mortem: the store, the caches and the logs.
            [ -z "${KEEP_FAILED:-}" ] || { mkdir -p "$KEEP_FAILED" && cp -r ${dir:+"$dir"} "$WORK/cache" "$WORK/log" "$WORK/errors" "$KEEP_FAILED/"; }
        fi
        rm -rf ${dir:+"$dir"} "$WORK/cache"
    done
done

{
    echo "many-writers benchmark $(date -u +%Y-%m-%d), $CPUS CPUs, cairn $("$CAIRN" --version | awk '{ print $2 }') ($(git rev-parse --short HEAD 2>/dev/null || echo '?'))"
    echo "per host: $MIB MiB of random bytes in $TREE_FILE_MIB MiB files, $SHARED_PCT% of them the same on every host; phase B rewrites $CHANGE_MIB MiB per backup, for ${SECONDS_B}s"
    case " $STORES " in *" s3 "*) echo "s3: VersityGW $VERSITYGW_VERSION (posix) behind a ${DELAY_MS} ms round trip per request" ;; esac
    case " $STORES " in *" garage "*) echo "garage: Garage $GARAGE_VERSION, 3 nodes, replication factor 3, node 1 behind a ${DELAY_MS} ms round trip per request" ;; esac
    echo "encrypted (aes-256-gcm), Argon2id 8 MiB, 1 pass: every cairn process's key derivation is included in the times and CPU seconds"
    echo "CPU s: user + sys of the cairn processes; busy: the machine's share; srv s: CPU s of the S3 server and proxy;"
    echo "oth s: CPU s of every other process (! = more than 5% of the CPUs' time: disturbed, rerun on a quiet machine)"
    printf "\nA. first backups, all N at once (after a 1 MiB seed backup); ceiling = min(N, CPUs) / (host 1 alone: CPU s per byte, median of %d runs)\n" "$CEIL_RUNS"
    echo "(dup chk: chunks another writer stored meanwhile, concurrent_duplicates; waits: lock waits)"
    echo "(x mach: against the machine ceiling, where host 1's CPU s per byte include the S3 server's and proxy's, which share these CPUs)"
    cat "$WORK/ceilings"
    printf "%-6s %3s %6s %7s %6s %8s %9s %7s %7s %5s %6s %6s %7s %4s %5s\n" store N s MB/s "CPU s" "CPU s/GB" "ceil MB/s" "x ceil" "x mach" busy "srv s" "oth s" "dup chk" fail waits
    cat "$A"
    printf "\nI. the control for A: the same first backups, each into a repository of its own, all at once (INDEP=0 skips it)\n"
    echo "(A/I: A's MB/s over I's: what sharing one repository costs beyond the CPUs' own limits with N processes at once)"
    printf "%-6s %3s %6s %7s %6s %8s %5s %6s %6s %4s %9s\n" store N s MB/s "CPU s" "CPU s/GB" busy "srv s" "oth s" fail "A/I"
    cat "$I"
    printf "\nB. incremental backups in a loop, all N at once\n"
    echo "(per backup: CPU s of the process; cairn's open and commit phases, s; containers replayed at open; lock s: taking the writer lock, waits included)"
    echo "(ceil: the machine's backups per minute, min(N, CPUs) over the first N's CPU s per backup of cairn, the S3 server and the proxy; x mach: per min over ceil)"
    printf "%-6s %3s %6s %7s %7s %7s %6s %6s %6s %6s %5s %6s %6s %4s %5s %6s %7s %7s\n" store N s backups "per min" "x first" "CPU s" open commit replay busy "srv s" "oth s" fail waits "lock s" ceil "x mach"
    cat "$B"
    printf "\nR. reconciliation: container MiB after A (before), after one gc (after), and of the same backups in series (series)\n"
    printf "%-6s %3s %10s %10s %10s %9s %9s %7s\n" store N before after series "before/s" "after/s" "gc s"
    cat "$R"
    printf "\nG. B beside maintenance: forget --keep-last %s and gc in a loop; x first = against B's first N\n" "$KEEP_G"
    printf "%-6s %3s %6s %7s %7s %7s %4s %9s %6s %5s %6s %6s %4s\n" store N s backups "per min" "x first" gcs "freed MiB" "del" busy "srv s" "oth s" fail
    cat "$G"
    printf "\nAfter: check, each host's latest snapshot restored and compared (diff -r)\n"
    printf "%-6s %3s %8s %9s %9s %10s %10s %8s\n" store N check restored snapshots "repo MiB" "data MiB" s
    cat "$C"
    echo && cat "$V"
    awk -v a="$T0" -v b="$(usecs)" 'BEGIN { printf "whole run: %.0f s\n", (b - a) / 1e6 }'
    if [ -s "$WORK/errors" ]; then
        printf "\ncairn's standard error (distinct lines, with counts):\n"
        sed -E 's/pid [0-9]+/pid P/; s/lease [^ )]+/lease L/; s/:[0-9]+\//:PORT\//; s/mw-[0-9]+/mw-N/; s/repo-[0-9]+/repo-N/' "$WORK/errors" |
            sort | uniq -c | sort -rn | head -20
    fi
} | tee "$report"
# Every server stops before its files go (a proxy still writing its
# stats would leave the directory behind).
cleanup
[ -z "${GPROXY_PID:-}" ] || { garage_cleanup; kill "$GPROXY_PID" 2>/dev/null || true; }
for p in ${PIDS[@]+"${PIDS[@]}"}; do tail --pid="$p" -f /dev/null 2>/dev/null || true; done
PIDS=()
[ -n "${KEEP_WORK:-}" ] || rm -rf "$WORK"
