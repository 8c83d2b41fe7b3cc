#!/usr/bin/env bash
# Warm open latency of an encrypted repository (issue 31, friction 6):
# the wall time of listing the snapshots of a small repository (a few
# files, one snapshot), the fastest of RUNS runs, the tools alternated run
# by run:
#
#   cairn-encrypted   cairn, AES-256-GCM, Argon2id as `init` tunes it
#                     (about 0.5 s), no key cache (CAIRN_KEY_CACHE=off);
#   cairn-unlocked    the same repository after `cairn unlock --for 10m`;
#   cairn-clear       cairn --encryption none;
#   restic            `restic snapshots` (scrypt; its local cache warm);
#   kopia             `kopia snapshot list` over a connected repository
#                     (its config holds the unlocked credentials).
#
# Each is reported with its ratio to the faster of restic and Kopia.
# Target: cairn-unlocked <= 0.15 s. With BACKUPS=N (default 20) it then
# times N small backups in a row (one file changed before each) into
# cairn encrypted without the cache, with it, and clear.
#
#   bench/open-latency.sh
#   RUNS=11 BACKUPS=40 bench/open-latency.sh
#   BACKUPS=0 bench/open-latency.sh      # open latency only
#
# restic is installed with apt when missing; Kopia 0.21.1 is built into
# target/tools/ with `go` when missing (KOPIA= names another binary).
# Output: $OUT/open-latency.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-7}
BACKUPS=${BACKUPS:-20}
WORK=${WORK:-target/open-latency-work}
OUT=${OUT:-bench/out}
CAIRN=${CAIRN:-target/release/cairn}
KOPIA=${KOPIA:-target/tools/kopia}
PASSWORD=cairn-bench

[ -x "$CAIRN" ] || cargo build --release --locked -p cairn-cli
command -v restic >/dev/null || apt-get install -y restic >/dev/null
if [ ! -x "$KOPIA" ]; then
    # `go install kopia@v0.21.1` may be refused where the module proxy does
    # not serve the module's version list; downloading the one version and
    # building it works there too.
    mkdir -p "$(dirname "$KOPIA")"
    kopia_src=$(go mod download -json github.com/kopia/kopia@v0.21.1 |
        python3 -c 'import json, sys; print(json.load(sys.stdin)["Dir"])')
    kopia_out=$(cd "$(dirname "$KOPIA")" && pwd)/$(basename "$KOPIA")
    (cd "$kopia_src" && go build -o "$kopia_out" .)
fi

rm -rf "$WORK"
mkdir -p "$WORK/src/sub" "$OUT"
WORK=$(cd "$WORK" && pwd)
for i in 1 2 3 4 5; do head -c $((i * 3000)) /dev/urandom >"$WORK/src/file$i"; done
echo "a small text file" >"$WORK/src/sub/notes.txt"

# Every tool's state under $WORK, nothing from the user's environment.
unset CAIRN_PASSWORD CAIRN_PASSWORD_FILE CAIRN_PASSWORD_COMMAND CAIRN_REPO CAIRN_ENCRYPTION
export CAIRN_KEY_CACHE_SCOPE=open-latency-$$
export XDG_CACHE_HOME=$WORK/cache RESTIC_CACHE_DIR=$WORK/cache/restic
export KOPIA_CHECK_FOR_UPDATES=false KOPIA_LOG_DIR=$WORK/kopia-logs KOPIA_CACHE_DIRECTORY=$WORK/cache/kopia

pw() { CAIRN_PASSWORD=$PASSWORD "$@"; }
pw "$CAIRN" --repo "$WORK/cairn-enc" init -q
pw "$CAIRN" --repo "$WORK/cairn-enc" backup -q "$WORK/src"
"$CAIRN" --repo "$WORK/cairn-clear" init -q --encryption none
"$CAIRN" --repo "$WORK/cairn-clear" backup -q "$WORK/src"
RESTIC_PASSWORD=$PASSWORD restic -q -r "$WORK/restic" init >/dev/null
RESTIC_PASSWORD=$PASSWORD restic -q -r "$WORK/restic" backup "$WORK/src" >/dev/null
KCFG=$WORK/kopia.config
"$KOPIA" --config-file "$KCFG" repository create filesystem --path "$WORK/kopia" \
    --password "$PASSWORD" >/dev/null 2>&1
"$KOPIA" --config-file "$KCFG" snapshot create "$WORK/src" >/dev/null 2>&1
pw "$CAIRN" --repo "$WORK/cairn-enc" unlock --for 10m -q
trap '"$CAIRN" lock --all -q >/dev/null 2>&1 || true' EXIT

run_tool() {
    case $1 in
    cairn-encrypted) CAIRN_KEY_CACHE=off pw "$CAIRN" --repo "$WORK/cairn-enc" snapshots ;;
    cairn-unlocked) "$CAIRN" --repo "$WORK/cairn-enc" snapshots ;;
    cairn-clear) "$CAIRN" --repo "$WORK/cairn-clear" snapshots ;;
    restic) RESTIC_PASSWORD=$PASSWORD restic -r "$WORK/restic" snapshots ;;
    kopia) "$KOPIA" --config-file "$KCFG" snapshot list ;;
    esac
}

# Seconds since the epoch, to the nanosecond.
now() { date +%s.%N; }

TOOLS="cairn-encrypted cairn-unlocked cairn-clear restic kopia"
declare -A best
for tool in $TOOLS; do
    run_tool "$tool" >/dev/null 2>&1 || { echo "$tool failed to list snapshots" >&2; exit 1; }
    best[$tool]=999
done
for _ in $(seq "$RUNS"); do
    for tool in $TOOLS; do
        start=$(now)
        run_tool "$tool" >/dev/null 2>&1
        t=$(echo "$(now) - $start" | bc -l)
        best[$tool]=$(echo "if ($t < ${best[$tool]}) $t else ${best[$tool]}" | bc -l)
    done
done
ref=$(echo "if (${best[restic]} < ${best[kopia]}) ${best[restic]} else ${best[kopia]}" | bc -l)

{
    echo "# open-latency $(date -u +%FT%TZ) $(git rev-parse --short HEAD) runs=$RUNS"
    echo "# $("$CAIRN" --version), $(restic version | cut -d' ' -f1-2), kopia $("$KOPIA" --version 2>/dev/null | cut -d' ' -f1)"
    printf '%-16s %9s %9s\n' tool seconds "/best-other"
    for tool in $TOOLS; do
        printf '%-16s %9.3f %9.2f\n' "$tool" "${best[$tool]}" "$(echo "${best[$tool]} / $ref" | bc -l)"
    done
} | tee "$OUT/open-latency.txt"

[ "$BACKUPS" -gt 0 ] || exit 0
# N small backups in a row: the key derivation of each command counts.
backups() {
    local repo=$1 start
    start=$(now)
    for i in $(seq "$BACKUPS"); do
        echo "$i" >"$WORK/src/sub/counter"
        "$CAIRN" --repo "$repo" backup -q "$WORK/src"
    done
    echo "$(now) - $start" | bc -l
}
enc=$(CAIRN_KEY_CACHE=off CAIRN_PASSWORD=$PASSWORD backups "$WORK/cairn-enc")
unlocked=$(backups "$WORK/cairn-enc")
clear=$(backups "$WORK/cairn-clear")
{
    echo "# $BACKUPS small backups in a row"
    printf '%-16s %9.3f\n' cairn-encrypted "$enc" cairn-unlocked "$unlocked" cairn-clear "$clear"
} | tee -a "$OUT/open-latency.txt"
