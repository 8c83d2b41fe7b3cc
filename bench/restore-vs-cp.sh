#!/usr/bin/env bash
# Restore of one large file against `cp` of the same bytes (issue 10's
# target: >= 0.8x of cp), for two files:
#   unique  - random bytes (every chunk new: containers read in order)
#   tar     - a tar-like file of VERSIONS versions of a synthetic source tree
#             (files of text-like bytes, a few percent changed per version):
#             chunks repeat within the file, so restore serves many from
#             memory and reads old containers out of order
# Page cache warm (every input read once untimed), `sync` before each timed
# step, cp and restore alternated, the fastest of RUNS runs of each compared
# (first-touch page faults make single runs noisy). Prints one line per file
# and policy: seconds of cp, seconds of restore, ratio cp/restore (>= 0.8 is
# the target).
#
#   UNIQUE_MIB (600)  VERSIONS (40)  RUNS (5)  POLICIES ("faa alacc container-lru")
#   WORK (target/restore-vs-cp)
set -euo pipefail
# Clear cairn repositories, as the published numbers were measured (the
# cost of encryption is `cairn-bench encryption`).
export CAIRN_ENCRYPTION=none
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
UNIQUE_MIB="${UNIQUE_MIB:-600}"
VERSIONS="${VERSIONS:-40}"
RUNS="${RUNS:-5}"
POLICIES="${POLICIES:-faa alacc container-lru}"
WORK="${WORK:-$ROOT/target/restore-vs-cp}"
TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
cargo build --release -q -p cairn-cli
CAIRN="$TARGET_DIR/release/cairn"

rm -rf "$WORK" && mkdir -p "$WORK/src"
head -c "$((UNIQUE_MIB << 20))" /dev/urandom > "$WORK/src/unique"
python3 - "$WORK/src/tar" "$VERSIONS" <<'EOF'
import random, sys
out, versions = sys.argv[1], int(sys.argv[2])
rng = random.Random(7)
words = [bytes(rng.choice(b"abcdefghijklmnopqrstuvwxyz_") for _ in range(rng.randint(2, 12))) for _ in range(5000)]
def text(n):
    parts, size = [], 0
    while size < n:
        line = b" ".join(rng.choice(words) for _ in range(rng.randint(3, 12))) + b"\n"
        parts.append(line); size += len(line)
    return b"".join(parts)[:n]
files = [text(rng.randint(2_000, 60_000)) for _ in range(420)]
with open(out, "wb") as f:
    for v in range(versions):
        for i in range(len(files)):
            if rng.random() < 0.04:  # a few files change per release
                b = bytearray(files[i]); at = rng.randrange(len(b))
                b[at:at + rng.randint(10, 400)] = text(rng.randint(10, 400)); files[i] = bytes(b)
            header = (b"v%d/file%d\0" % (v, i)).ljust(512, b"\0")
            f.write(header + files[i] + b"\0" * (-len(files[i]) % 512))
EOF
ls -l "$WORK/src"

best() { sort -n | head -1; }
for name in unique tar; do
    repo="$WORK/repo-$name"
    "$CAIRN" -q -r "$repo" backup --init "$WORK/src/$name"
    cat "$WORK/src/$name" > /dev/null
    for policy in $POLICIES; do
        cp_times=(); re_times=()
        for ((r = 0; r < RUNS; r++)); do
            rm -rf "$WORK/cp" "$WORK/out"; mkdir -p "$WORK/cp"; sync
            s=$(date +%s.%N); cp "$WORK/src/$name" "$WORK/cp/"; e=$(date +%s.%N)
            cp_times+=("$(python3 -c "print($e - $s)")")
            sync
            s=$(date +%s.%N); "$CAIRN" -q -r "$repo" restore latest -t "$WORK/out" --restore-policy "$policy"; e=$(date +%s.%N)
            re_times+=("$(python3 -c "print($e - $s)")")
            cmp -s "$WORK/src/$name" "$WORK/out/$name" || { echo "restore of $name differs" >&2; exit 1; }
        done
        c=$(printf '%s\n' "${cp_times[@]}" | best)
        t=$(printf '%s\n' "${re_times[@]}" | best)
        printf '%-7s %-14s cp %6.3f s  restore %6.3f s  restore speed / cp speed = %.2f\n' \
            "$name" "$policy" "$c" "$t" "$(python3 -c "print($c / $t)")"
    done
done
rm -rf "$WORK"
