#!/usr/bin/env bash
# Everyday backups of a real tree of many small files, cairn against restic
# and Borg in the same run (issue 12's targets):
#   * backing up every version: >= 3x faster than the faster of restic and Borg;
#   * the repository on disk after all versions: smaller than both;
#   * re-backing up an unchanged tree: >= 20x faster than its first backup.
#
# The data are successive releases of Django's source (sdists from PyPI,
# 4.2.1 onwards: about 6,700 files in 3,200 directories each). Each version
# replaces the same directory (`cp -a`, so mtimes are the release's and
# inodes are new), then each tool backs it up, tools alternated per version.
# The unchanged re-backup is the fastest of RUNS after the last version.
#
#   bench/small-files.sh                  # 20 versions
#   VERSIONS=10 RUNS=5 bench/small-files.sh
#   TOOLS="cairn restic" bench/small-files.sh
#
# Settings: cairn's defaults; restic 0.14 repository v2 (zstd `auto`);
# Borg with `--compression zstd,3` (its default, lz4, would make its
# repository larger: the comparison would flatter cairn). ENCRYPTION
# chooses the repositories' encryption:
#   ENCRYPTION=on (default)  every tool encrypts, as each does by default:
#                            cairn aes-256-gcm (Argon2id tuned by `init`
#                            to about 0.5 s, paid by every command, as
#                            restic pays its scrypt), restic (always),
#                            Borg `repokey-blake2`;
#   ENCRYPTION=none          cairn `--encryption none`, Borg `-e none`;
#                            restic cannot turn encryption off.
# restic and Borg are installed with apt when missing. Outputs:
# $OUT/small-files.txt.
set -euo pipefail
ENCRYPTION=${ENCRYPTION:-on}
case $ENCRYPTION in
on) export CAIRN_ENCRYPTION=aes-256-gcm; BORG_ENCRYPTION=repokey-blake2 ;;
none) export CAIRN_ENCRYPTION=none; BORG_ENCRYPTION=none ;;
*) echo "ENCRYPTION must be on or none" >&2; exit 2 ;;
esac
export CAIRN_PASSWORD=cairn-bench BORG_PASSPHRASE=cairn-bench
cd "$(dirname "$0")/.."
VERSIONS=${VERSIONS:-20}
RUNS=${RUNS:-3}
TOOLS=${TOOLS:-cairn restic borg}
WORK=${WORK:-target/small-files-work}
CACHE=${CACHE:-target/small-files-cache}
OUT=${OUT:-bench/out}
CAIRN=${CAIRN:-target/release/cairn}
BORG_COMPRESSION=${BORG_COMPRESSION:-zstd,3}
export RESTIC_PASSWORD=cairn-bench BORG_UNKNOWN_UNENCRYPTED_REPO_ACCESS_IS_OK=yes
export BORG_RELOCATED_REPO_ACCESS_IS_OK=yes

[ -x "$CAIRN" ] || cargo build --release --locked -p cairn-cli
need() { command -v "$1" >/dev/null || { apt-get install -y "$2" >/dev/null || { echo "cannot install $2" >&2; exit 1; }; }; }
case " $TOOLS " in *" restic "*) need restic restic ;; esac
case " $TOOLS " in *" borg "*) need borg borgbackup ;; esac

# --- the data: the first $VERSIONS Django 4.2.x sdists -----------------------
mkdir -p "$CACHE" "$OUT"
python3 - "$CACHE" "$VERSIONS" <<'PY'
import json, os, sys, urllib.request
cache, n = sys.argv[1], int(sys.argv[2])
index = "https://pypi.org/pypi/django/json"
meta = json.load(urllib.request.urlopen(index))
vs = sorted((v for v in meta["releases"] if v.startswith("4.2.") and v[4:].isdigit()),
            key=lambda v: int(v[4:]))[:n]
if len(vs) < n:
    sys.exit(f"only {len(vs)} Django 4.2.x releases on PyPI")
for v in vs:
    dest = os.path.join(cache, f"django-{v}.tar.gz")
    if os.path.exists(dest):
        continue
    sdist = [f for f in meta["releases"][v] if f["packagetype"] == "sdist"][0]
    url = urllib.parse.urljoin(index, sdist["url"])
    tmp = dest + ".part"
    urllib.request.urlretrieve(url, tmp)
    os.rename(tmp, dest)
with open(os.path.join(cache, "versions.txt"), "w") as f:
    f.write("\n".join(vs) + "\n")
PY
mapfile -t VS < "$CACHE/versions.txt"
rm -rf "$WORK" && mkdir -p "$WORK/versions"
for v in "${VS[@]}"; do
    mkdir -p "$WORK/versions/$v"
    tar xzf "$CACHE/django-$v.tar.gz" -C "$WORK/versions/$v" --strip-components=1
done
FILES=$(find "$WORK/versions/${VS[0]}" -type f | wc -l)
DIRS=$(find "$WORK/versions/${VS[0]}" -type d | wc -l)
echo "data: ${#VS[@]} Django releases (${VS[0]} .. ${VS[-1]}), $FILES files in $DIRS directories in the first"

# --- the tools ----------------------------------------------------------------
SRC="$WORK/src"
repo() { echo "$WORK/repo-$1"; }
init() {
    case $1 in
    cairn) "$CAIRN" --repo "$(repo cairn)" init -q ;;
    restic) restic -q init --repository-version 2 -r "$(repo restic)" >/dev/null ;;
    borg) borg init -e "$BORG_ENCRYPTION" "$(repo borg)" ;;
    esac
}
backup_cmd() { # tool n -> CMD: one backup of $SRC
    case $1 in
    cairn) CMD=("$CAIRN" --repo "$(repo cairn)" backup -q "$SRC") ;;
    restic) CMD=(restic -q -r "$(repo restic)" backup "$SRC") ;;
    borg) CMD=(borg create --compression "$BORG_COMPRESSION" "$(repo borg)::v$2" "$SRC") ;;
    esac
}
declare -A WALL CPU FIRST REBACKUP
timed() { # tool n -> "wall cpu" of one backup (wall to the millisecond)
    backup_cmd "$1" "$2"
    local t0=$EPOCHREALTIME
    /usr/bin/time -f "%U %S" -o "$WORK/t" "${CMD[@]}" >/dev/null
    local t1=$EPOCHREALTIME
    awk -v a="$t0" -v b="$t1" '{printf "%.3f %.2f\n", b - a, $1 + $2}' "$WORK/t"
}
for t in $TOOLS; do init "$t"; WALL[$t]=0; CPU[$t]=0; done

n=0
for v in "${VS[@]}"; do
    rm -rf "$SRC" && cp -a "$WORK/versions/$v" "$SRC"
    find "$SRC" -type f -exec cat {} + >/dev/null
    line="version $v:"
    for t in $TOOLS; do
        read -r w c < <(timed "$t" "$n")
        WALL[$t]=$(awk -v a="${WALL[$t]}" -v b="$w" 'BEGIN { print a + b }')
        CPU[$t]=$(awk -v a="${CPU[$t]}" -v b="$c" 'BEGIN { print a + b }')
        [ "$n" = 0 ] && FIRST[$t]=$w
        line="$line  $t ${w}s"
    done
    echo "$line"
    n=$((n + 1))
done

# Unchanged re-backup: the fastest of RUNS, tools alternated.
for t in $TOOLS; do REBACKUP[$t]=999999; done
for r in $(seq "$RUNS"); do
    for t in $TOOLS; do
        read -r w _ < <(timed "$t" "$n")
        n=$((n + 1))
        if awk -v a="$w" -v b="${REBACKUP[$t]}" 'BEGIN { exit !(a < b) }'; then REBACKUP[$t]=$w; fi
    done
done

# The floor for any tool that checks every entry: listing every directory
# and stat'ing every entry (find), the fastest of RUNS.
FLOOR=999999
for r in $(seq "$RUNS"); do
    t0=$EPOCHREALTIME
    find "$SRC" -printf '%s %T@ %C@ %i\n' >/dev/null
    t1=$EPOCHREALTIME
    FLOOR=$(awk -v a="$t0" -v b="$t1" -v m="$FLOOR" 'BEGIN { d = b - a; print (d < m ? d : m) }')
done

# cairn's last snapshot must restore byte-identically.
case " $TOOLS " in *" cairn "*)
    "$CAIRN" --repo "$(repo cairn)" restore latest -q --target "$WORK/restored"
    got=$(find "$WORK/restored" -type f -name 'setup.py' -path '*/src/setup.py' | head -1)
    diff -r "$SRC" "$(dirname "$got")" >/dev/null || { echo "cairn's restore differs from the source" >&2; exit 1; }
    "$CAIRN" --repo "$(repo cairn)" check -q
    ;;
esac

# --- the report -----------------------------------------------------------------
size() { du -s --block-size=1 "$1" | cut -f1; }
apparent() { du -s --apparent-size --block-size=1 "$1" | cut -f1; }
report="$OUT/small-files.txt"
{
    echo "small-files benchmark $(date -u +%Y-%m-%d), $(nproc) CPUs; ${#VS[@]} Django releases (${VS[0]} .. ${VS[-1]}), $FILES files / $DIRS dirs each; encryption: $ENCRYPTION (cairn $CAIRN_ENCRYPTION, restic on, Borg $BORG_ENCRYPTION)"
    printf "%-7s %12s %10s %14s %14s %13s %14s\n" tool "backup all s" "CPU s" "first backup s" "unchanged s" "first/unchg" "repo MiB (du)"
    for t in $TOOLS; do
        printf "%-7s %12.2f %10.2f %14.3f %14.3f %13.1f %14.2f\n" "$t" "${WALL[$t]}" "${CPU[$t]}" "${FIRST[$t]}" "${REBACKUP[$t]}" \
            "$(awk -v a="${FIRST[$t]}" -v b="${REBACKUP[$t]}" 'BEGIN { print a / (b > 0 ? b : 0.01) }')" \
            "$(awk -v b="$(size "$(repo "$t")")" 'BEGIN { print b / 1048576 }')"
    done
    case " $TOOLS " in *" cairn "*" restic "*" borg "*|*" cairn "*)
        best_wall=""; best_size=""
        for t in $TOOLS; do
            [ "$t" = cairn ] && continue
            w=${WALL[$t]}; s=$(size "$(repo "$t")")
            if [ -z "$best_wall" ] || awk -v a="$w" -v b="$best_wall" 'BEGIN { exit !(a < b) }'; then best_wall=$w; bw=$t; fi
            if [ -z "$best_size" ] || [ "$s" -lt "$best_size" ]; then best_size=$s; bs=$t; fi
        done
        if [ -n "$best_wall" ]; then
            awk -v a="$best_wall" -v c="${WALL[cairn]}" -v t="$bw" 'BEGIN { printf "backup of all versions: cairn %.2fx faster than %s, the faster other tool (target >= 3x)\n", a / c, t }'
            awk -v a="$best_size" -v c="$(size "$(repo cairn)")" -v t="$bs" 'BEGIN { printf "repository on disk: cairn %.2fx the size of %s, the smaller other (target < 1)\n", c / a, t }'
        fi
        awk -v a="${FIRST[cairn]}" -v b="${REBACKUP[cairn]}" 'BEGIN { printf "unchanged re-backup: %.1fx faster than cairn'"'"'s first backup (target >= 20x)\n", a / b }'
        awk -v f="$FLOOR" -v a="${FIRST[cairn]}" -v b="${REBACKUP[cairn]}" 'BEGIN { printf "stat walk of the tree (find, the floor for any tool that checks every entry): %.3f s = first backup / %.1f; cairn'"'"'s unchanged re-backup is %.1fx that floor\n", f, a / f, b / f }'
        echo "cairn repository apparent bytes: $(apparent "$(repo cairn)")"
        "$CAIRN" --repo "$(repo cairn)" stats --json | python3 -c '
import json, sys
s = json.load(sys.stdin)
d = s.get("on_disk", {})
print("cairn on disk by kind (MiB): " + ", ".join(f"{k} {v / 1048576:.2f}" for k, v in d.items()))'
        ;;
    esac
} | tee "$report"
[ "${KEEP_WORK:-0}" = 1 ] || rm -rf "$WORK"
