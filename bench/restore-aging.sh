#!/usr/bin/env bash
# Issue 34's real-data target: does the newest backup restore as fast as
# the first? Twenty releases of the Go module golang.org/x/tools (v0.10.0
# to v0.29.0, from the Go module proxy) are backed up one after another as
# one snapshot each, the same path every time, into two repositories: one
# never collected ("aged") and one with `cairn gc` (PGC+ with its default
# re-layout) after every backup ("relaid"). The same twenty releases are
# also backed up as tar streams (`backup --stdin`), one repository each way.
# Then the first and the newest snapshot of every repository are restored
# with a cold page cache (the repository's files evicted with
# posix_fadvise(DONTNEED): this machine does not allow drop_caches) into
# memory (/dev/shm), in five rounds that alternate repositories, the
# fastest of each kept.
#
# Reports per repository: newest / first restore time (target <= 1.2x for
# the re-laid repository), the newest restore's container reads as `stats`
# estimates them, and the re-laid repository's size against the aged one
# (target: within 5%). Unencrypted repositories: the key derivation would
# add the same ~0.45 s to every restore.
#
#   bench/restore-aging.sh [OUT_DIR]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT="${1:-$ROOT/bench/out/restore-aging}"
WORK="${WORK:-/tmp/cairn-restore-aging}"
FIRST="${FIRST:-10}"
LAST="${LAST:-29}"
CAIRN="$ROOT/target/release/cairn"
mkdir -p "$OUT"
rm -rf "$WORK"
mkdir -p "$WORK"
(cd "$ROOT" && cargo build --release -q -p cairn-cli)

export GOPATH="$WORK/gomods" GOFLAGS=-modcacherw
for n in $(seq "$FIRST" "$LAST"); do
  (cd "$WORK" && go mod download "golang.org/x/tools@v0.$n.0")
done

evict() { # evict every file under $1 from the page cache
  python3 - "$1" <<'EOF'
import os, sys
for d, _, fs in os.walk(sys.argv[1]):
    for f in fs:
        p = os.path.join(d, f)
        try:
            fd = os.open(p, os.O_RDONLY)
        except OSError:
            continue
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
EOF
}

for repo in aged relaid aged-tar relaid-tar; do
  "$CAIRN" init --repo "$WORK/$repo" -q --encryption none
done
src="$WORK/src/tools"
for n in $(seq "$FIRST" "$LAST"); do
  rm -rf "$src"
  mkdir -p "$WORK/src"
  cp -r "$GOPATH/pkg/mod/golang.org/x/tools@v0.$n.0" "$src"
  for repo in aged relaid; do
    "$CAIRN" --repo "$WORK/$repo" backup -q --tag "v0.$n.0" "$src"
  done
  tar -C "$WORK/src" -cf "$WORK/tools.tar" tools
  for repo in aged-tar relaid-tar; do
    "$CAIRN" --repo "$WORK/$repo" backup -q --tag "v0.$n.0" --stdin --stdin-name tools.tar < "$WORK/tools.tar"
  done
  for repo in relaid relaid-tar; do
    "$CAIRN" --repo "$WORK/$repo" gc -q
  done
done

time_restore() { # repo snapshot -> seconds (cold cache)
  local repo="$1" snap="$2" target="$TARGET_ROOT/target"
  rm -rf "$target"
  sync
  evict "$WORK/$repo"
  local t0 t1
  t0=$(date +%s.%N)
  "$CAIRN" --repo "$WORK/$repo" restore -q "$snap" -t "$target"
  t1=$(date +%s.%N)
  python3 -c "print(f'{$t1 - $t0:.4f}')"
}

report="$OUT/restore-aging.txt"
: > "$report"
: > "$report.runs"
# Restores write into memory (/dev/shm when there is one): the repository
# is read cold from disk, and the file system's own write cost, which
# drifts over a run of thousands of file creations, stays out of it.
TARGET_ROOT="$WORK"
[ -d /dev/shm ] && TARGET_ROOT="$(mktemp -d /dev/shm/cairn-restore-aging.XXXXXX)"
REPOS="aged relaid aged-tar relaid-tar"
declare -A FIRST_ID NEWEST_ID BEST_FIRST BEST_NEWEST
for repo in $REPOS; do
  ids=$("$CAIRN" --repo "$WORK/$repo" snapshots --json | python3 -c "
import json,sys
s=json.load(sys.stdin)
s.sort(key=lambda x: x['time_unix_ns'])
print(s[0]['id'], s[-1]['id'])")
  FIRST_ID[$repo]=${ids% *}
  NEWEST_ID[$repo]=${ids#* }
  BEST_FIRST[$repo]=999
  BEST_NEWEST[$repo]=999
done
# Five rounds, every repository's first and newest restore in each round
# (alternating, so drift hits them alike); the fastest of each counts.
for round in 1 2 3 4 5; do
  for repo in $REPOS; do
    a=$(time_restore "$repo" "${FIRST_ID[$repo]}")
    b=$(time_restore "$repo" "${NEWEST_ID[$repo]}")
    echo "round $round $repo: first $a s, newest $b s" >> "$report.runs"
    BEST_FIRST[$repo]=$(python3 -c "print(min(${BEST_FIRST[$repo]}, $a))")
    BEST_NEWEST[$repo]=$(python3 -c "print(min(${BEST_NEWEST[$repo]}, $b))")
  done
done
[ "$TARGET_ROOT" != "$WORK" ] && rm -rf "$TARGET_ROOT"

printf '%-11s %10s %10s %8s %14s %12s\n' repo first_s newest_s ratio newest_reads bytes | tee -a "$report"
for repo in $REPOS; do
  reads_n=$("$CAIRN" --repo "$WORK/$repo" stats --json | python3 -c "import json,sys; print(json.load(sys.stdin)['newest_restore']['container_reads'])")
  bytes=$(du -sb "$WORK/$repo" | cut -f1)
  ratio=$(python3 -c "print(f'{${BEST_NEWEST[$repo]} / ${BEST_FIRST[$repo]}:.2f}')")
  printf '%-11s %10s %10s %8s %14s %12s\n' "$repo" "${BEST_FIRST[$repo]}" "${BEST_NEWEST[$repo]}" "$ratio" "$reads_n" "$bytes" | tee -a "$report"
done
echo "report: $report (each round: $report.runs)"
