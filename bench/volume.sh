#!/usr/bin/env bash
# The primary volume's targets (issue 32) in one run, through the `cairn`
# binary (release build) as a user would drive it. Needs root (FUSE mount,
# passthrough, dropping the page cache). Every dataset is generated with
# fixed seeds; each phase's data is deleted before the next one starts.
#
# 1. Space: a mixed dataset (versions of a source tree, disk images sharing
#    most content, documents) in an optimized volume against a cairn backup
#    repository of the same bytes (the default one, and one with the
#    volume store's chunking: regression, 64 KiB average, frugal index).
# 2. Optimization throughput of `cairn volume optimize` on duplicate-heavy
#    disk images (logical MB per wall second and per CPU second), the page
#    cache dropped first.
# 3. Writes: a 4 KiB write into the middle of an optimized WRITE_MIB file
#    through the mount: latency of the write and of its fsync, and bytes
#    recalled (the backing file's allocated bytes before and after); then
#    the file, cold again, optimized anew: bytes read again (only what was
#    recalled, widened to its chunks) and the run's time.
# 4. Reads: sequential MB/s of a large optimized file through the mount
#    against the same bytes unoptimized through the same mount and the
#    backing file directly (and the mount without passthrough), fastest of
#    RUNS alternated runs, page cache dropped and mount restarted before
#    each (so the daemon's decoded-chunk cache starts empty); random 4 KiB
#    reads (fixed seed): IOPS, p50 and p99 latency. The mount daemon's CPU
#    time during the fastest sequential run is printed beside it.
#
# 5. Parallel sessions (004): HOSTS subtrees of VM images (each host its
#    own base, so sessions rarely store the same chunk), optimized by one
#    session and by SESSIONS, each on its own copy of the data: wall and
#    CPU seconds, the store before and after one `volume gc` (which
#    reconciles copies two sessions stored at once). The SESSIONS run
#    partitions by path (the images share one type).
#
# 6. Partitioned dedup (004 "Efficient partitioning strategies"): three
#    users' trees holding overlapping parts of the mixed dataset (u0 the
#    source tree and the documents, u1 the source tree and the images, u2
#    the images and the documents), optimized by one session (global
#    dedup) and by SESSIONS sessions partitioned by type and by path:
#    the store before gc (each partition deduplicated against its own
#    chunk log and the base) and after one `volume gc` (reconciled), and
#    the peak RSS.
#
# 7. Small files (`PHASES=smallfiles`): SMALL_DIRS (50) directories of
#    SMALL_PER_DIR (100) text files of 200 B..6 KB with SMALL_TYPES (60)
#    extensions, optimized by one session and by SESSIONS (the types are
#    each far below the minimum partition size, so they share one
#    partition): wall seconds, files per second and the switches'
#    `fdatasync` calls (strace, when installed).
#
#   QUICK=1          ~40 s version (smaller data, a 256 MiB file written, 1 run)
#   SRC_MIB (32)     one version of the source tree; VERSIONS (5) of them
#   IMAGE_MIB (48)   each of IMAGES (4) disk images of the mixed dataset
#   DOC_MIB (32)     documents
#   VM_MIB (128)     each of VMS (4) images of the throughput dataset
#   WRITE_MIB (1024) the optimized file written into (also optimized in 2;
#                    a multiple of VM_MIB)
#   READ_MIB (256)   the file read in 4
#   RUNS (3)  RANDOM_READS (4000)
#   HOSTS (4) subtrees of 2 images of VM_MIB each; SESSIONS (2)
#   PHASES (space,optimize,reads,sessions,partitions,smallfiles)  which phases run, comma-separated (optimize:
#                    2 and 3); e.g. PHASES=reads to measure the reads alone
#   TMPDIR (/tmp)    where the run's work directory is made (removed at the end)
#   CAIRN (default: builds and uses target/release/cairn)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
if [ "$(id -u)" != 0 ]; then
    echo "volume.sh: needs root (FUSE mount, passthrough, dropping the page cache)" >&2
    exit 1
fi
if [ "${QUICK:-0}" = 1 ]; then
    : "${SRC_MIB:=8}" "${VERSIONS:=4}" "${IMAGE_MIB:=16}" "${IMAGES:=3}" "${DOC_MIB:=8}"
    : "${VM_MIB:=64}" "${VMS:=3}" "${WRITE_MIB:=256}" "${READ_MIB:=64}" "${RUNS:=1}"
    : "${RANDOM_READS:=2000}"
fi
SRC_MIB=${SRC_MIB:-32} VERSIONS=${VERSIONS:-5} IMAGE_MIB=${IMAGE_MIB:-48} IMAGES=${IMAGES:-4}
DOC_MIB=${DOC_MIB:-32} VM_MIB=${VM_MIB:-128} VMS=${VMS:-4} WRITE_MIB=${WRITE_MIB:-1024}
READ_MIB=${READ_MIB:-256} RUNS=${RUNS:-3} RANDOM_READS=${RANDOM_READS:-4000}
HOSTS=${HOSTS:-4} SESSIONS=${SESSIONS:-2}
PHASES=${PHASES:-space,optimize,reads,sessions,partitions,smallfiles}
SMALL_DIRS=${SMALL_DIRS:-50} SMALL_PER_DIR=${SMALL_PER_DIR:-100} SMALL_TYPES=${SMALL_TYPES:-60}
# Whether phase $1 is one of those asked for.
phase() { [[ ",$PHASES," == *",$1,"* ]]; }
for p in ${PHASES//,/ }; do
    case $p in
    space | optimize | reads | sessions | partitions | smallfiles) ;;
    *)
        echo "volume.sh: unknown phase '$p' in PHASES (space, optimize, reads, sessions, partitions, smallfiles)" >&2
        exit 1
        ;;
    esac
done

if [ $((WRITE_MIB % VM_MIB)) != 0 ]; then
    echo "volume.sh: WRITE_MIB ($WRITE_MIB) must be a multiple of VM_MIB ($VM_MIB)" >&2
    exit 1
fi
TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
if [ -z "${CAIRN:-}" ]; then
    cargo build --release -q -p cairn-cli
    CAIRN="$TARGET_DIR/release/cairn"
fi
WORK="$(mktemp -d "${TMPDIR:-/tmp}/cairn-volume-bench.XXXXXX")"
HELPER="$WORK/helper.py"
MNT="$WORK/mnt"
MOUNT_PID=
REPORT="$WORK/report.txt"
: >"$REPORT"

cleanup() {
    if [ -n "$MOUNT_PID" ]; then
        fusermount3 -u "$MNT" 2>/dev/null || true
        wait "$MOUNT_PID" 2>/dev/null || true
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT

say() { echo "$@" | tee -a "$REPORT"; }
drop_caches() {
    sync
    if ! echo 3 >/proc/sys/vm/drop_caches 2>/dev/null; then
        echo "volume.sh: cannot drop the page cache (/proc/sys/vm/drop_caches)" >&2
        exit 1
    fi
}
mib() { python3 -c "print(f'{$1 / 1048576:.1f}')"; }
json_field() { python3 -c "import json,sys; print(json.load(open('$1'))['$2'])"; }

# Every file of the volume cold enough for `--min-age 1s`: mtimes an hour
# back, then ctimes (set by that touch) more than a second old.
age_files() {
    find "$1/files" -type f -exec touch -d '1 hour ago' {} +
    sleep 1.1
}

# Serves volume $1 at $MNT in the background (extra options after it) and
# waits until the mount answers.
mount_volume() {
    local dir="$1"
    shift
    mkdir -p "$MNT"
    "$CAIRN" volume mount "$dir" "$MNT" "$@" 2>>"$WORK/mount.log" &
    MOUNT_PID=$!
    for _ in $(seq 1 200); do
        if mountpoint -q "$MNT"; then return 0; fi
        if ! kill -0 "$MOUNT_PID" 2>/dev/null; then break; fi
        sleep 0.05
    done
    echo "volume.sh: the mount did not come up:" >&2
    cat "$WORK/mount.log" >&2
    exit 1
}
unmount_volume() {
    fusermount3 -u "$MNT"
    wait "$MOUNT_PID"
    MOUNT_PID=
}

cat >"$HELPER" <<'PY'
"""Dataset generation and timed I/O for bench/volume.sh (fixed seeds)."""
import os, random, sys, time

MIB = 1 << 20
WORDS = ("fn let mut self return match impl struct pub use mod if else for in while "
         "loop break continue Some None Ok Err Result Option Vec String u64 usize i32 "
         "bool true false where trait enum const static async await move ref type as "
         "crate super dyn unsafe extern").split()
IDENTS = [f"{a}_{b}" for a in ("read", "write", "chunk", "index", "store", "file",
                                "buffer", "entry", "node", "table", "cache", "block")
          for b in ("len", "offset", "count", "map", "ref", "id", "state", "list",
                    "size", "hash", "key", "pos")]
PROSE = ("the a of to and in is that for it as was with be by on not this are or "
         "his from at which but have an they more one had you were her all she "
         "there would their we him been has when who will no if out so said what "
         "up its about into than them can only other new some could time these two "
         "may then do first any my now such like our over man me even most made "
         "after also did many before must through back years where much your way "
         "volume storage report quarter budget meeting project customer contract "
         "revenue schedule review draft section figure table appendix summary").split()


def source_line(r):
    indent = " " * (4 * r.randrange(0, 4))
    n = r.randrange(2, 10)
    return indent + " ".join(r.choice(WORDS) if r.random() < 0.5 else r.choice(IDENTS)
                             for _ in range(n)) + ";\n"


def source_file(r, size):
    lines, total = [], 0
    while total < size:
        line = source_line(r)
        lines.append(line)
        total += len(line)
    return lines


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def gen_source(root, mib, versions, seed):
    """`versions` copies of a source tree, each from the one before with
    ~4% of its files edited (lines replaced, inserted, deleted), a few
    added and a few deleted."""
    r = random.Random(seed)
    files, total, i = {}, 0, 0
    while total < mib * MIB:
        size = int(2 ** r.uniform(9, 16.5))  # 512 B .. 90 KiB, log-uniform
        path = f"mod{r.randrange(40):02d}/sub{r.randrange(8)}/file{i:05d}.rs"
        files[path] = source_file(r, size)
        total += size
        i += 1
    for v in range(1, versions + 1):
        if v > 1:
            paths = sorted(files)
            for p in r.sample(paths, max(1, len(paths) // 25)):
                lines = files[p]
                for _ in range(r.randrange(1, 6)):
                    at = r.randrange(len(lines))
                    op = r.random()
                    if op < 0.5:
                        lines[at] = source_line(r)
                    elif op < 0.8:
                        lines.insert(at, source_line(r))
                    elif len(lines) > 1:
                        del lines[at]
            for p in r.sample(paths, max(1, len(paths) // 200)):
                del files[p]
            for _ in range(max(1, len(paths) // 100)):
                files[f"mod{r.randrange(40):02d}/new/file{i:05d}.rs"] = source_file(
                    r, int(2 ** r.uniform(9, 15)))
                i += 1
        for p, lines in files.items():
            write(f"{root}/v{v}/{p}", "".join(lines).encode())


def image_base(r, size):
    """Disk-image-like bytes: 1 MiB extents, 60% incompressible (binaries,
    media), 25% zeros (free space), 15% text (logs, configuration)."""
    out = bytearray()
    while len(out) < size:
        x = r.random()
        if x < 0.6:
            out += r.randbytes(MIB)
        elif x < 0.85:
            out += bytes(MIB)
        else:
            out += "".join(source_line(r) for _ in range(30000)).encode()[:MIB]
    return out[:size]


def edited(r, base, share):
    """A copy of `base` with about `share` of its bytes rewritten in
    scattered 4 KiB .. 1 MiB stretches."""
    img = bytearray(base)
    budget = int(len(img) * share)
    while budget > 0:
        n = min(int(2 ** r.uniform(12, 20)), len(img) // 4)
        at = r.randrange(0, len(img) - n)
        img[at:at + n] = r.randbytes(n)
        budget -= n
    return img


def gen_images(root, name, count, mib, share, seed):
    r = random.Random(seed)
    base = image_base(r, mib * MIB)
    for k in range(1, count + 1):
        write(f"{root}/{name}-{k}.img", edited(r, base, share))


def gen_concat(path, count, mib, share, seed):
    """One file of `count` edited copies of the image base that
    `gen_images` with the same seed and size starts from, back to back."""
    r = random.Random(seed)
    base = image_base(r, mib * MIB)
    r = random.Random(seed + 1)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        for _ in range(count):
            f.write(edited(r, base, share))


def gen_docs(root, mib, seed):
    """Documents: compressible prose of 8 KiB .. 2 MiB, a fifth of them
    also filed a second time (attachments saved twice, copies in shares)."""
    r = random.Random(seed)
    total, i, docs = 0, 0, []
    while total < mib * MIB:
        size = int(2 ** r.uniform(13, 21))
        words, n = [], 0
        while n < size:
            w = r.choice(PROSE)
            words.append(w)
            n += len(w) + 1
        data = " ".join(words).encode()[:size]
        path = f"{root}/dept{r.randrange(6)}/doc{i:04d}.txt"
        write(path, data)
        docs.append((i, data))
        total += size
        i += 1
    for j, data in r.sample(docs, len(docs) // 5):
        write(f"{root}/shared/copy-of-doc{j:04d}.txt", data)


def gen_big(path, mib, seed):
    """A file of incompressible bytes, written 1 MiB at a time."""
    r = random.Random(seed)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        for _ in range(mib):
            f.write(r.randbytes(MIB))


def seq(path):
    """Sequential read, 1 MiB at a time: MB/s."""
    buf = bytearray(MIB)
    total = 0
    with open(path, "rb", buffering=0) as f:
        t = time.perf_counter()
        while True:
            n = f.readinto(buf)
            if not n:
                break
            total += n
        dt = time.perf_counter() - t
    print(f"{total / 1e6 / dt:.1f} {dt:.3f}")


def rand(path, reads, seed):
    """Random 4 KiB reads at 4 KiB-aligned offsets, read-ahead off:
    IOPS, p50 and p99 latency in microseconds."""
    r = random.Random(seed)
    fd = os.open(path, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
    pages = os.fstat(fd).st_size // 4096
    offsets = [r.randrange(pages) * 4096 for _ in range(reads)]
    lat = []
    t0 = time.perf_counter()
    for off in offsets:
        t = time.perf_counter()
        if len(os.pread(fd, 4096, off)) != 4096:
            sys.exit(f"short read at {off}")
        lat.append(time.perf_counter() - t)
    total = time.perf_counter() - t0
    os.close(fd)
    lat.sort()
    p = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] * 1e6
    print(f"{reads / total:.0f} {p(0.50):.0f} {p(0.99):.0f}")


def allocated(path):
    print(os.stat(path).st_blocks * 512)


def save_range(path, offset, length, out):
    with open(path, "rb") as f:
        f.seek(offset)
        write(out, f.read(length))


def write4k(path, offset, saved, saved_at, earlier):
    """Writes 4 KiB at `offset`, then fsyncs: prints the milliseconds of
    each; then reads back the saved range (taken before optimization)
    and checks it holds the old bytes around the new ones (and those of
    the `earlier` writes at those offsets)."""
    data = random.Random(offset).randbytes(4096)
    fd = os.open(path, os.O_WRONLY)
    t = time.perf_counter()
    if os.pwrite(fd, data, offset) != 4096:
        sys.exit("short write")
    t1 = time.perf_counter()
    os.fsync(fd)
    t2 = time.perf_counter()
    os.close(fd)
    old = bytearray(open(saved, "rb").read())
    for at in earlier + [offset]:
        old[at - saved_at:at - saved_at + 4096] = random.Random(at).randbytes(4096)
    with open(path, "rb") as f:
        f.seek(saved_at)
        if f.read(len(old)) != old:
            sys.exit(f"{path}: the bytes read back around the write are wrong")
    print(f"{(t1 - t) * 1e3:.2f} {(t2 - t1) * 1e3:.2f}")


def gen_small(root, dirs, per_dir, types, seed):
    """dirs x per_dir text files of 200 B..6 KB, each of one of `types`
    extensions (phase 7)."""
    r = random.Random(seed)
    for d in range(dirs):
        for i in range(per_dir):
            ext = f"t{r.randrange(types)}"
            data = "".join(r.choice("abcdefghij \n") for _ in range(r.randrange(200, 6000)))
            write(f"{root}/d{d:03d}/f{i:04d}.{ext}", data.encode())


cmd, *args = sys.argv[1:]
{
    "small": lambda: gen_small(args[0], int(args[1]), int(args[2]), int(args[3]), 19),
    "source": lambda: gen_source(args[0], int(args[1]), int(args[2]), 11),
    "images": lambda: gen_images(args[0], args[1], int(args[2]), int(args[3]),
                                 float(args[4]), int(args[5])),
    "docs": lambda: gen_docs(args[0], int(args[1]), 13),
    "big": lambda: gen_big(args[0], int(args[1]), int(args[2])),
    "seq": lambda: seq(args[0]),
    "rand": lambda: rand(args[0], int(args[1]), 17),
    "allocated": lambda: allocated(args[0]),
    "save": lambda: save_range(args[0], int(args[1]), int(args[2]), args[3]),
    "concat": lambda: gen_concat(args[0], int(args[1]), int(args[2]), float(args[3]),
                                 int(args[4])),
    "write4k": lambda: write4k(args[0], int(args[1]), args[2], int(args[3]),
                               [int(a) for a in args[4:]]),
}[cmd]()
PY

# Optimizes volume $1 under /usr/bin/time, the page cache dropped first
# (its files must be cold already: age_files); sets OPT_WALL, OPT_CPU
# (user + sys), OPT_RSS_KIB.
timed_optimize() {
    drop_caches
    /usr/bin/time -f '%e %U %S %M' -o "$WORK/time.txt" \
        "$CAIRN" volume optimize "$1" --min-age 1s "${@:2}" >"$WORK/optimize.log"
    read -r OPT_WALL user sys OPT_RSS_KIB <"$WORK/time.txt"
    OPT_CPU=$(python3 -c "print(f'{$user + $sys:.2f}')")
}

echo "cairn volume benchmark: $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, $("$CAIRN" --version)"
echo "work directory: $WORK"

# ---------------------------------------------------------------- 1. space
if phase space; then
say ""
say "1. Space: mixed dataset (${VERSIONS} versions of a ${SRC_MIB} MiB source tree, ${IMAGES} disk images of ${IMAGE_MIB} MiB, ${DOC_MIB} MiB of documents)"
VOL="$WORK/mixed"
"$CAIRN" volume create "$VOL" --encryption none >/dev/null
python3 "$HELPER" source "$VOL/files/src" "$SRC_MIB" "$VERSIONS"
python3 "$HELPER" images "$VOL/files/images" disk "$IMAGES" "$IMAGE_MIB" 0.05 21
python3 "$HELPER" docs "$VOL/files/docs" "$DOC_MIB"
sync
NFILES=$(find "$VOL/files" -type f | wc -l)
# The repositories back up the backing tree while every file is still plain.
"$CAIRN" init -q --repo "$WORK/repo-default" --encryption none
"$CAIRN" init -q --repo "$WORK/repo-regression" --encryption none \
    --chunker regression --avg-size 64KiB --index frugal
(cd "$VOL" && "$CAIRN" backup -q --repo "$WORK/repo-default" files)
(cd "$VOL" && "$CAIRN" backup -q --repo "$WORK/repo-regression" files)
age_files "$VOL"
# First Windows' minimum size (files under 32 KiB left alone), then the
# volume's default (every non-empty file: most of a source tree too).
timed_optimize "$VOL" --min-size 32KiB --sessions 1
MIXED_WALL=$OPT_WALL MIXED_CPU=$OPT_CPU MIXED_RSS=$OPT_RSS_KIB
"$CAIRN" volume status "$VOL" --json >"$WORK/status1.json"
timed_optimize "$VOL" --sessions 1
"$CAIRN" volume status "$VOL" --json >"$WORK/status2.json"
LOGICAL=$(json_field "$WORK/status1.json" logical_bytes)
python3 - "$WORK" "$NFILES" "$LOGICAL" <<'PY' | tee -a "$REPORT"
import json, os, subprocess, sys
work, nfiles, logical = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def du(path, *flags):
    return int(subprocess.check_output(["du", "-s", *flags, path]).split()[0])
repos = {name: (du(f"{work}/{name}", "-B1"), du(f"{work}/{name}", "-b"))
         for name in ("repo-default", "repo-regression")}
mib = lambda b: f"{b / 1048576:9.1f}"
print(f"   {nfiles} files, {mib(logical).strip()} MiB logical")
print(f"   {'':44} {'MiB':>9} {'x repo (default)':>17} {'x repo (regression)':>20}")
def row(label, b):
    print(f"   {label:44} {mib(b)} {b / repos['repo-default'][0]:17.3f} "
          f"{b / repos['repo-regression'][0]:20.3f}")
for name, f in (("volume, min size 32 KiB (Windows')", "status1.json"),
                ("volume, default policy (every file)", "status2.json")):
    s = json.load(open(f"{work}/{f}"))
    row(f"{name}", s["physical_bytes"])
    print(f"     backing {mib(s['backing_bytes']).strip()} MiB ({s['unoptimized_files']} files "
          f"unoptimized), store {mib(s['store_bytes']).strip()} MiB, "
          f"table {mib(s['state_bytes']).strip()} MiB")
    row("  its store and table only", s["store_bytes"] + s["state_bytes"])
row("repo, default (fastcdc 8 KiB, du -sB1)", repos["repo-default"][0])
row("repo, regression 64 KiB, frugal (du -sB1)", repos["repo-regression"][0])
print(f"   apparent sizes (du -sb): repo default {mib(repos['repo-default'][1]).strip()} MiB, "
      f"repo regression {mib(repos['repo-regression'][1]).strip()} MiB")
PY
say "   optimize, mixed data: $(mib "$LOGICAL") MiB in ${MIXED_WALL} s wall, ${MIXED_CPU} s CPU," \
    "peak RSS $((MIXED_RSS / 1024)) MiB"
rm -rf "$VOL" "$WORK/repo-default" "$WORK/repo-regression"
fi

# ----------------------------------------------- 2. throughput, 3. writes
if phase optimize; then
say ""
say "2. Optimization throughput: ${VMS} VM images of ${VM_MIB} MiB and one of ${WRITE_MIB} MiB, all copies of one base with 3% rewritten"
VOL="$WORK/vms"
"$CAIRN" volume create "$VOL" --encryption none >/dev/null
python3 "$HELPER" images "$VOL/files/vms" vm "$VMS" "$VM_MIB" 0.03 31
# The large file: copies of the VM base with their own edits, so it shares
# most of its bytes with the images (and itself).
BIG="$VOL/files/big/disk.img"
python3 "$HELPER" concat "$BIG" $((WRITE_MIB / VM_MIB)) "$VM_MIB" 0.03 31
BIG_SIZE=$(stat -c %s "$BIG")
GRANULE_AT=$(( (BIG_SIZE / 2) - (4 << 20) ))
python3 "$HELPER" save "$BIG" "$GRANULE_AT" $((8 << 20)) "$WORK/saved-range"
age_files "$VOL"
timed_optimize "$VOL" --sessions 1
"$CAIRN" volume status "$VOL" --json >"$WORK/status3.json"
python3 - "$WORK/status3.json" "$OPT_WALL" "$OPT_CPU" "$OPT_RSS_KIB" <<'PY' | tee -a "$REPORT"
import json, sys
s = json.load(open(sys.argv[1]))
wall, cpu, rss = float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
mb = s["optimized_bytes"] / 1e6
print(f"   {s['optimized_files']} files, {mb:.0f} MB optimized into a {s['store_bytes'] / 1e6:.0f} MB "
      f"store (savings rate {s['savings_rate'] * 100:.1f}%)")
print(f"   {wall:.2f} s wall, {cpu:.2f} s CPU (user + sys), peak RSS {rss // 1024} MiB")
print(f"   {mb / wall:.1f} MB/s wall, {mb / cpu:.1f} MB/s per CPU second (target >= 100 per core)")
PY

say ""
say "3. Writes: 4 KiB into the middle of the optimized ${WRITE_MIB} MiB file, through the mount"
OFFSET=$(( BIG_SIZE / 2 ))
BEFORE=$(python3 "$HELPER" allocated "$BIG")
drop_caches
mount_volume "$VOL"
read -r W1 F1 < <(python3 "$HELPER" write4k "$MNT/big/disk.img" "$OFFSET" "$WORK/saved-range" "$GRANULE_AT")
AFTER=$(python3 "$HELPER" allocated "$BIG")
# A second write into the same granule: nothing more to recall.
read -r W2 F2 < <(python3 "$HELPER" write4k "$MNT/big/disk.img" $((OFFSET + 8192)) "$WORK/saved-range" "$GRANULE_AT" "$OFFSET")
AFTER2=$(python3 "$HELPER" allocated "$BIG")
unmount_volume
say "   first write: ${W1} ms, its fsync ${F1} ms; backing file allocated $BEFORE -> $AFTER bytes: $((AFTER - BEFORE)) recalled"
say "   second write into the same granule: ${W2} ms, fsync ${F2} ms; $((AFTER2 - AFTER)) more bytes recalled"
say "   (granule for a file of ${WRITE_MIB} MiB: $(python3 -c "
n=$BIG_SIZE; g=1
while g < n // 1024: g *= 2
print(min(max(g, 64 << 10), 16 << 20))") bytes; the bytes around each write read back as expected)"
# The written file cold again: the next run reads only what was recalled
# (docs/volume.md, "Incremental optimization"), not the whole file.
age_files "$VOL"
timed_optimize "$VOL" --json
python3 - "$WORK/optimize.log" "$OPT_WALL" "$OPT_CPU" "$BIG_SIZE" <<'PY' | tee -a "$REPORT"
import json, sys
r = json.load(open(sys.argv[1]))
wall, cpu, size = float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
print(f"   optimized anew when cold: {r['files_reoptimized']} file, {r['bytes_reread']} bytes read again "
      f"({r['bytes_reread'] / size * 100:.2f}% of the file), {r['new_chunk_bytes']} bytes new in the store, "
      f"{wall:.2f} s wall, {cpu:.2f} s CPU (including the scan)")
PY
rm -rf "$VOL" "$WORK/saved-range"
fi

# -------------------------------------------------------------- 4. reads
if phase reads; then
say ""
say "4. Reads: ${READ_MIB} MiB of incompressible bytes, optimized and not; fastest of ${RUNS} alternated runs, page cache dropped and mount restarted before each"
VOL="$WORK/reads"
"$CAIRN" volume create "$VOL" --encryption none --exclude 'plain-*' >/dev/null
python3 "$HELPER" big "$VOL/files/opt-big" "$READ_MIB" 41
cp "$VOL/files/opt-big" "$VOL/files/plain-big"
age_files "$VOL"
timed_optimize "$VOL"
"$CAIRN" volume status "$VOL" --json >"$WORK/status4.json"
[ "$(json_field "$WORK/status4.json" optimized_files)" = 1 ] ||
    { echo "volume.sh: the read file was not optimized" >&2; exit 1; }
# label|path under the mount, or a backing path|mount options
TARGETS=(
    "optimized, mount|$MNT/opt-big|"
    "optimized, mount --read-ahead 0|$MNT/opt-big|--read-ahead 0"
    "unoptimized, mount (passthrough)|$MNT/plain-big|"
    "unoptimized, mount --no-passthrough|$MNT/plain-big|--no-passthrough"
    "backing file directly|$VOL/files/plain-big|none"
)
declare -A SEQ IOPS P50 P99 CPU
# CPU seconds (user + sys) the mount daemon has used so far.
daemon_cpu() {
    python3 -c "f = open('/proc/$MOUNT_PID/stat').read().rsplit(')', 1)[1].split()
import os; print((int(f[11]) + int(f[12])) / os.sysconf('SC_CLK_TCK'))"
}
measure() {  # $1: seq or rand; fills the arrays for each target
    local kind=$1 label path opts out
    for t in "${TARGETS[@]}"; do
        IFS='|' read -r label path opts <<<"$t"
        drop_caches
        if [ "$opts" != none ]; then
            # shellcheck disable=SC2086
            mount_volume "$VOL" $opts
        fi
        if [ "$kind" = seq ]; then
            local cpu0=0 cpu1=0 mbps secs
            if [ "$opts" != none ]; then cpu0=$(daemon_cpu); fi
            read -r mbps secs < <(python3 "$HELPER" seq "$path")
            if [ "$opts" != none ]; then cpu1=$(daemon_cpu); fi
            if python3 -c "import sys; sys.exit(not $mbps > ${SEQ[$label]:-0})"; then
                SEQ[$label]=$mbps
                CPU[$label]=$(python3 -c "print(f'{($cpu1 - $cpu0) / $secs * 100:.0f}%')")
            fi
        else
            read -r iops p50 p99 < <(python3 "$HELPER" rand "$path" "$RANDOM_READS")
            if [ "$iops" -gt "${IOPS[$label]:-0}" ]; then
                IOPS[$label]=$iops P50[$label]=$p50 P99[$label]=$p99
            fi
        fi
        if [ "$opts" != none ]; then unmount_volume; fi
    done
}
for _ in $(seq 1 "$RUNS"); do
    measure seq
    measure rand
done
{
    printf '   %-38s %9s %8s %11s %9s %8s %8s\n' read "seq MB/s" "x unopt" "daemon CPU" "4K IOPS" \
        "p50 us" "p99 us"
    for t in "${TARGETS[@]}"; do
        IFS='|' read -r label _ _ <<<"$t"
        printf '   %-38s %9.0f %8.2f %11s %9d %8d %8d\n' "$label" "${SEQ[$label]}" \
            "$(python3 -c "print(${SEQ[$label]} / ${SEQ["unoptimized, mount (passthrough)"]})")" \
            "${CPU[$label]}" "${IOPS[$label]}" "${P50[$label]}" "${P99[$label]}"
    done
    echo "   ($RANDOM_READS random reads of 4 KiB, seed 17, read-ahead off for them; daemon CPU:"
    echo "   the mount daemon's user + sys time over the fastest sequential read's wall time)"
} | tee -a "$REPORT"
rm -rf "$VOL"
fi

# ---------------------------------------------------- 5. parallel sessions
if phase sessions; then
say ""
say "5. Parallel sessions: ${HOSTS} hosts' subtrees of 2 VM images of ${VM_MIB} MiB (3% rewritten), 1 session vs ${SESSIONS}"
for n in 1 "$SESSIONS"; do
    V="$WORK/sessions-$n"
    "$CAIRN" volume create "$V" --encryption none >/dev/null
    for h in $(seq 0 $((HOSTS - 1))); do
        python3 "$HELPER" images "$V/files/host$h" vm 2 "$VM_MIB" 0.03 $((40 + h))
    done
done
age_files "$WORK/sessions-1"
age_files "$WORK/sessions-$SESSIONS"
for n in 1 "$SESSIONS"; do
    V="$WORK/sessions-$n"
    timed_optimize "$V" --sessions "$n" --partition-by path --json
    cp "$WORK/optimize.log" "$WORK/sessions-$n.json"
    echo "$OPT_WALL $OPT_CPU $OPT_RSS_KIB" >"$WORK/sessions-$n.time"
    "$CAIRN" volume status "$V" --json >"$WORK/sessions-$n.before.json"
    "$CAIRN" volume gc "$V" >/dev/null
    "$CAIRN" volume status "$V" --json >"$WORK/sessions-$n.after.json"
    "$CAIRN" check --repo "$V/store" -q
done
python3 - "$WORK" "$SESSIONS" <<'PY' | tee -a "$REPORT"
import json, sys
work, n = sys.argv[1], sys.argv[2]
rows = {}
for k in ("1", n):
    wall, cpu, rss = open(f"{work}/sessions-{k}.time").read().split()
    rep = json.load(open(f"{work}/sessions-{k}.json"))
    before = json.load(open(f"{work}/sessions-{k}.before.json"))["store_bytes"]
    after = json.load(open(f"{work}/sessions-{k}.after.json"))["store_bytes"]
    rows[k] = (float(wall), float(cpu), int(rss), rep, before, after)
    mb = rep["bytes_optimized"] / 1e6
    print(f"   {rep['sessions']} session(s): {mb:.0f} MB in {float(wall):.2f} s wall "
          f"({mb / float(wall):.1f} MB/s), {float(cpu):.2f} s CPU ({mb / float(cpu):.1f} MB/s per CPU second), "
          f"peak RSS {int(rss) // 1024} MiB; store {before / 1e6:.1f} MB, after gc {after / 1e6:.1f} MB")
w1, wn = rows["1"][0], rows[n][0]
print(f"   wall: {n} sessions / 1 session = {wn / w1:.2f} (speedup {w1 / wn:.2f}x); "
      f"store after gc: {rows[n][5] / rows['1'][5]:.4f}x one session's; "
      f"before gc: {rows[n][4] / rows['1'][4]:.4f}x")
PY
rm -rf "$WORK"/sessions-*
fi

# ------------------------------------------------- 6. partitioned dedup
if phase partitions; then
say ""
say "6. Partitioned dedup: 3 users' overlapping parts of the mixed dataset, 1 session vs ${SESSIONS} by type and by path"
for mode in one type path; do
    V="$WORK/parts-$mode"
    "$CAIRN" volume create "$V" --encryption none >/dev/null
    # A store that already has an index (a first batch runs alone and
    # indexes every log, which would hide the partitions' own dedup).
    python3 -c "import random; random.seed(1); open('$V/files/seed.bin', 'wb').write(random.randbytes(1 << 20))"
    age_files "$V"
    "$CAIRN" volume optimize "$V" --min-age 1s --sessions 1 >/dev/null
    python3 "$HELPER" source "$V/files/u0/src" "$SRC_MIB" "$VERSIONS"
    python3 "$HELPER" docs "$V/files/u0/docs" "$DOC_MIB"
    python3 "$HELPER" source "$V/files/u1/src" "$SRC_MIB" "$VERSIONS"
    python3 "$HELPER" images "$V/files/u1/images" disk "$IMAGES" "$IMAGE_MIB" 0.05 21
    python3 "$HELPER" images "$V/files/u2/images" disk "$IMAGES" "$IMAGE_MIB" 0.05 21
    python3 "$HELPER" docs "$V/files/u2/docs" "$DOC_MIB"
    age_files "$V"
done
for mode in one type path; do
    V="$WORK/parts-$mode"
    if [ "$mode" = one ]; then
        timed_optimize "$V" --sessions 1 --json
    else
        timed_optimize "$V" --sessions "$SESSIONS" --partition-by "$mode" --json
    fi
    cp "$WORK/optimize.log" "$WORK/parts-$mode.json"
    echo "$OPT_WALL $OPT_CPU $OPT_RSS_KIB" >"$WORK/parts-$mode.time"
    "$CAIRN" volume status "$V" --json >"$WORK/parts-$mode.before.json"
    "$CAIRN" volume gc "$V" >/dev/null
    "$CAIRN" volume status "$V" --json >"$WORK/parts-$mode.after.json"
    "$CAIRN" check --repo "$V/store" -q
done
python3 - "$WORK" <<'PY' | tee -a "$REPORT"
import json, sys
work = sys.argv[1]
rows = {}
for mode in ("one", "type", "path"):
    wall, cpu, rss = open(f"{work}/parts-{mode}.time").read().split()
    rep = json.load(open(f"{work}/parts-{mode}.json"))
    before = json.load(open(f"{work}/parts-{mode}.before.json"))["store_bytes"]
    after = json.load(open(f"{work}/parts-{mode}.after.json"))["store_bytes"]
    new = rep["new_chunk_bytes"]
    rows[mode] = (new, after)
    logical = rep["bytes_optimized"]
    print(f"   {mode:>4}: {rep['sessions']} session(s), {rep.get('partitions', 1)} partition(s), "
          f"{logical / 1e6:.0f} MB in {float(wall):.2f} s wall, peak RSS {int(rss) // 1024} MiB; "
          f"new chunks {new / 1e6:.1f} MB ({1 - new / logical:.1%} saved); "
          f"store {before / 1e6:.1f} MB, after gc {after / 1e6:.1f} MB ({1 - after / logical:.1%} saved)")
for mode in ("type", "path"):
    print(f"   {mode}: new chunks {rows[mode][0] / rows['one'][0]:.3f}x global dedup's "
          f"(before reconciliation), store after gc {rows[mode][1] / rows['one'][1]:.3f}x")
PY
rm -rf "$WORK"/parts-*
fi

# --------------------------------------------------------- 7. small files
if phase smallfiles; then
say ""
say "7. Small files: ${SMALL_DIRS} x ${SMALL_PER_DIR} files of 200 B..6 KB, ${SMALL_TYPES} types, 1 session vs ${SESSIONS}"
for n in 1 "$SESSIONS"; do
    V="$WORK/small-$n"
    "$CAIRN" volume create "$V" --encryption none >/dev/null
    python3 "$HELPER" small "$V/files" "$SMALL_DIRS" "$SMALL_PER_DIR" "$SMALL_TYPES"
    age_files "$V"
done
for n in 1 "$SESSIONS"; do
    V="$WORK/small-$n"
    timed_optimize "$V" --sessions "$n" --json
    syncs=""
    if command -v strace >/dev/null; then
        # A second volume of the same files, traced (strace slows the run).
        T="$WORK/small-trace-$n"
        "$CAIRN" volume create "$T" --encryption none >/dev/null
        python3 "$HELPER" small "$T/files" "$SMALL_DIRS" "$SMALL_PER_DIR" "$SMALL_TYPES"
        age_files "$T"
        strace -f -c -e trace=fdatasync,fsync -o "$WORK/strace-$n.txt" \
            "$CAIRN" volume optimize "$T" --min-age 1s --sessions "$n" >/dev/null
        syncs=$(awk '$NF == "fdatasync" || $NF == "fsync" {s += $4} END {print s + 0}' "$WORK/strace-$n.txt")
    fi
    python3 - "$WORK/optimize.log" "$OPT_WALL" "$n" "$syncs" <<'PY' | tee -a "$REPORT"
import json, sys
r = json.load(open(sys.argv[1]))
wall, n, syncs = float(sys.argv[2]), sys.argv[3], sys.argv[4]
files = r["files_optimized"]
extra = f", {syncs} fsync/fdatasync calls" if syncs else ""
print(f"   {n} session(s) asked: {r['sessions']} ran over {r.get('partitions', 1)} partition(s), "
      f"{files} files ({r['bytes_optimized'] / 1e6:.1f} MB) in {wall:.2f} s wall, "
      f"{files / wall:.0f} files/s{extra}")
PY
done
rm -rf "$WORK"/small-*
fi

if [ -d "$ROOT/bench/out" ] || mkdir -p "$ROOT/bench/out"; then
    cp "$REPORT" "$ROOT/bench/out/volume-$(date -u +%Y-%m-%d).txt"
    echo ""
    echo "(report written to bench/out/volume-$(date -u +%Y-%m-%d).txt)"
fi
