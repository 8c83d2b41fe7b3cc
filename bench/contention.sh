#!/usr/bin/env bash
# Backup of many small files with and without two busy loops holding the
# cores (issue 12: "no busy waiting": under contention a backup should slow
# no more than in proportion to the CPU it gets). Prints the fastest wall
# time and the CPU time of each, alternated, and the slowdown ratio.
#
#   bench/contention.sh                 # 7,467 files in 3,200 directories, 3 runs
#   RUNS=5 FILES_PER_DIR=3 bench/contention.sh
#
# Uses target/release/cairn (built if missing). The tree and repositories
# go under $WORK (default target/contention-work), removed at the end.
set -euo pipefail
# Clear cairn repositories, as the published numbers were measured (the
# cost of encryption is `cairn-bench encryption`).
export CAIRN_ENCRYPTION=none
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
DIRS=${DIRS:-3200}
WORK=${WORK:-target/contention-work}
CAIRN=${CAIRN:-target/release/cairn}
[ -x "$CAIRN" ] || cargo build --release -p cairn-cli
rm -rf "$WORK" && mkdir -p "$WORK"
python3 - "$WORK/tree" "$DIRS" <<'PY'
import os, random, sys
root, dirs = sys.argv[1], int(sys.argv[2])
random.seed(1)
n = 0
for d in range(dirs):
    p = os.path.join(root, f"d{d // 100}", f"e{d}")
    os.makedirs(p, exist_ok=True)
    for f in range(3 if d % 3 == 0 else 2):
        size = int(random.expovariate(1 / 5000)) + 10
        with open(os.path.join(p, f"f{f}.txt"), "wb") as fh:
            fh.write(random.randbytes(size // 2) + bytes(size - size // 2))
        n += 1
print(f"{n} files in {dirs} directories")
PY
find "$WORK/tree" -type f -exec cat {} + >/dev/null

run() { # label -> "wall cpu"
    rm -rf "$WORK/repo"
    /usr/bin/time -f "%e %U %S" -o "$WORK/t" "$CAIRN" --repo "$WORK/repo" backup --init "$WORK/tree" -q
    awk '{printf "%s %.2f\n", $1, $2 + $3}' "$WORK/t"
}
best_quiet=999; best_busy=999; cpu_quiet=0; cpu_busy=0
for r in $(seq "$RUNS"); do
    read -r w c < <(run)
    echo "run $r quiet: ${w} s wall, ${c} s CPU"
    if awk -v a="$w" -v b="$best_quiet" 'BEGIN { exit !(a < b) }'; then best_quiet=$w; cpu_quiet=$c; fi
    ( while :; do :; done ) & h1=$!
    ( while :; do :; done ) & h2=$!
    read -r w c < <(run)
    kill "$h1" "$h2"; wait "$h1" "$h2" 2>/dev/null || true
    echo "run $r busy:  ${w} s wall, ${c} s CPU"
    if awk -v a="$w" -v b="$best_busy" 'BEGIN { exit !(a < b) }'; then best_busy=$w; cpu_busy=$c; fi
done
echo "fastest quiet ${best_quiet} s (CPU ${cpu_quiet} s), fastest with two busy loops ${best_busy} s (CPU ${cpu_busy} s)"
awk -v b="$best_busy" -v q="$best_quiet" -v n="$(nproc)" 'BEGIN { printf "slowdown under contention: %.2fx (two busy loops on %d cores)\n", b / q, n }'
[ "${KEEP_WORK:-0}" = 1 ] || rm -rf "$WORK"
