# Independent encoder of the cairn formats, written from docs/FORMAT.md (not
# from the Rust code), to cross-check the codecs. Prints the annotated golden
# hex constants found at the end of ../golden.rs:
#     python3 crates/cairn-format/tests/golden/gen_golden.py
# Any change to its output is a format change (bump the object's version).
import struct, json

def crc32c(data):
    crc = 0xffffffff
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xffffffff

assert crc32c(b"123456789") == 0xE3069283

class Out:
    def __init__(s): s.b = bytearray(); s.lines = []
    def put(s, data, comment):
        data = bytes(data)
        s.b += data
        s.lines.append((data, comment))
    def text(s):
        res = []
        for data, c in s.lines:
            h = data.hex()
            # compress runs of zero bytes longer than 8
            if len(data) > 8 and all(x == 0 for x in data):
                h = "00*%d" % len(data)
            res.append('    %-40s # %s' % (h, c) if len(h) <= 40 else '    %s # %s' % (h, c))
        return "\n".join(res)

u8 = lambda v: struct.pack('<B', v)
u32 = lambda v: struct.pack('<I', v)
u64 = lambda v: struct.pack('<Q', v)
i64 = lambda v: struct.pack('<q', v)
def varint(v):
    o = bytearray()
    while v >= 0x80:
        o.append((v & 0x7f) | 0x80); v >>= 7
    o.append(v); return bytes(o)

FA, FB, FC, FD = bytes([0x11]*8), bytes([0x22]*8), bytes([0xc3]*8), bytes([0xd4]*8)

# --- envelope
env = Out()
payload = b'{}'
env.put(b"CAIRNCFG", "magic \"CAIRNCFG\"")
env.put(u32(1), "version 1")
env.put(u64(len(payload)), "payload_len 2")
env.put(payload, "payload '{}'")
env.put(u32(crc32c(env.b)), "crc32c of the above")

# --- tree node
tree = Out()
tree.put(u8(1), "node format version 1")
tree.put(u8(1), "level 1")
tree.put(u32(2), "child count 2")
tree.put(FA, "child 0 fingerprint"); tree.put(u64(5), "child 0 size 5")
tree.put(FB, "child 1 fingerprint"); tree.put(u64(6), "child 1 size 6")
TREE = bytes(tree.b)

# --- container
chunks = [(FA, 0, 0, 0, b"hello"), (FB, 0, 0, 0, b"world!"), (FC, 1, 1, 0, TREE)]
ctr = Out()
hdr = b"CAIRNCTR" + u32(1) + u8(8) + b"\0\0\0" + u64(0x2a) + u32(0)
ctr.put(b"CAIRNCTR", "header: magic \"CAIRNCTR\"")
ctr.put(u32(1), "header: version 1")
ctr.put(u8(8), "header: fingerprint width 8")
ctr.put(b"\0\0\0", "header: reserved")
ctr.put(u64(0x2a), "header: container id 0x2a")
ctr.put(u32(0), "header: reserved")
ctr.put(u32(crc32c(hdr)), "header: crc32c of header bytes 0..28")
data = b""
for i, c in enumerate(chunks):
    ctr.put(c[4], "data: chunk %d payload (%d bytes)" % (i, len(c[4])))
    data += c[4]
meta_off = len(ctr.b)
meta = bytearray(u32(3))
ctr.put(u32(3), "metadata: descriptor count 3")
off = 0
for i, (fp, kind, level, codec, p) in enumerate(chunks):
    d = fp + u8(kind) + u8(level) + u8(codec) + u32(off) + u32(len(p)) + u32(len(p))
    meta += d
    ctr.put(fp, "descriptor %d: fingerprint" % i)
    ctr.put(u8(kind) + u8(level) + u8(codec), "descriptor %d: kind %d, level %d, codec %d (none)" % (i, kind, level, codec))
    ctr.put(u32(off), "descriptor %d: offset %d in data section" % (i, off))
    ctr.put(u32(len(p)), "descriptor %d: stored_len %d" % (i, len(p)))
    ctr.put(u32(len(p)), "descriptor %d: raw_len %d" % (i, len(p)))
    off += len(p)
tr = bytearray()
def t(b, c):
    tr.extend(b); ctr.put(b, "trailer: " + c)
t(u64(0x2a), "container id 0x2a")
t(u64(32), "data section offset 32")
t(u64(len(data)), "data section length %d" % len(data))
t(u64(meta_off), "metadata offset %d" % meta_off)
t(u64(len(meta)), "metadata length %d" % len(meta))
t(u32(3), "chunk count 3")
t(u32(crc32c(data)), "data crc32c")
t(u32(crc32c(meta)), "metadata crc32c")
t(u8(8), "fingerprint width 8")
t(b"\0\0\0", "reserved")
t(u32(1), "version 1")
t(b"CAIRNEND", "magic \"CAIRNEND\"")
t(u32(crc32c(tr)), "crc32c of trailer bytes 0..68")

# --- dir listing
d = Out()
d.put(u8(1), "listing format version 1")
d.put(varint(2), "entry count 2 (varint)")
MT = 1_700_000_000_000_000_000
d.put(varint(9), "entry 0: name length 9"); d.put(b"hello.txt", "entry 0: name \"hello.txt\"")
d.put(u8(0) + u8(2), "entry 0: kind 0 (file), flags 2 (content)")
d.put(u32(0o100644), "entry 0: mode 0o100644"); d.put(u32(1000), "entry 0: uid 1000"); d.put(u32(1000), "entry 0: gid 1000")
d.put(i64(MT), "entry 0: mtime_ns 1700000000000000000"); d.put(u64(11), "entry 0: size 11")
d.put(FC, "entry 0: content root fingerprint"); d.put(u8(1), "entry 0: content root level 1"); d.put(u64(11), "entry 0: content size 11")
d.put(varint(4), "entry 1: name length 4"); d.put(b"link", "entry 1: name \"link\"")
d.put(u8(2) + u8(1), "entry 1: kind 2 (symlink), flags 1 (target)")
d.put(u32(0o120777), "entry 1: mode 0o120777"); d.put(u32(1000), "entry 1: uid 1000"); d.put(u32(1000), "entry 1: gid 1000")
d.put(i64(MT), "entry 1: mtime_ns 1700000000000000000"); d.put(u64(9), "entry 1: size 9")
d.put(varint(9), "entry 1: target length 9"); d.put(b"hello.txt", "entry 1: target \"hello.txt\"")

# --- snapshot
snap = Out()
js = json.dumps({"time_unix_ns": MT, "host": "h", "paths": ["/data"], "tags": [],
                 "root": {"root": FD.hex(), "level": 0, "size": 120},
                 "stats": {"logical_bytes": 11, "files": 1, "dirs": 1, "symlinks": 1, "chunks": 3,
                           "new_chunks": 3, "new_raw_bytes": 49, "new_stored_bytes": 49,
                           "containers_written": 1, "duration_ns": 1000, "skipped_paths": 0}},
                separators=(",", ":")).encode()
snap.put(b"CAIRNSNP", "magic \"CAIRNSNP\""); snap.put(u32(1), "version 1"); snap.put(u64(len(js)), "payload_len %d" % len(js))
snap.put(js, "JSON payload")
snap.put(u32(crc32c(snap.b)), "crc32c of the above")

# --- index
idx = Out()
PS, PC = 256, 2
h = b"CAIRNIDX" + u32(2) + u8(8) + b"\0\0\0" + u32(PS) + u32(0) + u64(PC) + u64(3) + u64(0x2b)
idx.put(b"CAIRNIDX", "header: magic \"CAIRNIDX\"")
idx.put(u32(2), "header: version 2")
idx.put(u8(8) + b"\0\0\0", "header: fingerprint width 8, reserved")
idx.put(u32(PS), "header: page size 256")
idx.put(u32(0), "header: reserved")
idx.put(u64(PC), "header: data page count 2")
idx.put(u64(3), "header: entry count 3")
idx.put(u64(0x2b), "header: covered_below 0x2b")
idx.put(u32(crc32c(h)), "header: crc32c of header bytes 0..48")
idx.put(bytes(PS - 52), "header page padding")
M64 = (1 << 64) - 1
def mix64(z):
    z = ((z ^ (z >> 30)) * 0xbf58476d1ce4e5b9) & M64
    z = ((z ^ (z >> 27)) * 0x94d049bb133111eb) & M64
    return z ^ (z >> 31)
def page_key(fp):
    # Every byte counts: the length, then each 8-byte little-endian word
    # (the last zero-padded) folded in through splitmix64's finalizer.
    h = len(fp)
    padded = fp.ljust((len(fp) + 7) // 8 * 8, b"\0")
    for i in range(0, len(padded), 8):
        h = mix64(h ^ int.from_bytes(padded[i:i + 8], "little"))
    return h
def page_of(fp, pc):
    return (page_key(fp) * pc) >> 64
entries = [(FA, 0x2a), (FB, 0x2a), (FC, 0x2a)]
for p in range(PC):
    es = sorted((e for e in entries if page_of(e[0], PC) == p), key=lambda e: (page_key(e[0]), e[0]))
    pg = bytearray(u64(p) + u32(len(es)))
    idx.put(u64(p), "page %d: page number" % p)
    idx.put(u32(len(es)), "page %d: entry count %d" % (p, len(es)))
    for fp, c in es:
        pg += fp + u64(c)
        idx.put(fp, "page %d: entry fingerprint" % p)
        idx.put(u64(c), "page %d: entry container 0x%x" % (p, c))
    pad = PS - 4 - len(pg)
    pg += bytes(pad)
    idx.put(bytes(pad), "page %d: padding" % p)
    idx.put(u32(crc32c(pg)), "page %d: crc32c of page bytes 0..252" % p)

# --- index delta: removes FC, puts FA (container 0x2c) and FB (0x2d); the
# lists are in ascending fingerprint order.
pl = Out()
pl.put(u8(8), "payload: fp_width 8")
pl.put(u64(3), "payload: base_generation 3")
pl.put(u32(2), "payload: seq 2")
pl.put(u64(0x2e), "payload: covered_below 0x2e")
pl.put(u32(1), "payload: remove_count 1")
pl.put(u32(2), "payload: put_count 2")
pl.put(FC, "payload: removed fingerprint")
pl.put(FA, "payload: put 0 fingerprint"); pl.put(u64(0x2c), "payload: put 0 container 0x2c")
pl.put(FB, "payload: put 1 fingerprint"); pl.put(u64(0x2d), "payload: put 1 container 0x2d")
dl = Out()
dl.put(b"CAIRNIXD", "magic \"CAIRNIXD\"")
dl.put(u32(1), "version 1")
dl.put(u64(len(pl.b)), "payload_len %d" % len(pl.b))
for data, c in pl.lines:
    dl.put(data, c)
dl.put(u32(crc32c(dl.b)), "crc32c of the above")

# --- index delta, version 2: the same with its removals conditional
# (removes_below 0x28, after covered_below).
p2 = Out()
for data, c in pl.lines[:4]:
    p2.put(data, c)
p2.put(u64(0x28), "payload: removes_below 0x28")
for data, c in pl.lines[4:]:
    p2.put(data, c)
d2 = Out()
d2.put(b"CAIRNIXD", "magic \"CAIRNIXD\"")
d2.put(u32(2), "version 2")
d2.put(u64(len(p2.b)), "payload_len %d" % len(p2.b))
for data, c in p2.lines:
    d2.put(data, c)
d2.put(u32(crc32c(d2.b)), "crc32c of the above")

# --- Summary Vector checkpoint: two filter words.
sp = Out()
sp.put(u64(0x2e), "payload: covered_below 0x2e")
sp.put(u32(7), "payload: hashes 7")
sp.put(u32(0), "payload: reserved")
sp.put(u64(3), "payload: inserted 3")
sp.put(u64(2), "payload: word_count 2")
sp.put(u64(0x0102030405060708), "payload: word 0")
sp.put(u64(0x8000000000000001), "payload: word 1")
sv = Out()
sv.put(b"CAIRNBLM", "magic \"CAIRNBLM\"")
sv.put(u32(2), "version 2")
sv.put(u64(len(sp.b)), "payload_len %d" % len(sp.b))
for data, c in sp.lines:
    sv.put(data, c)
sv.put(u32(crc32c(sv.b)), "crc32c of the above")

# --- frugal log segment: two records from position 5.
fl = Out()
fl.put(b"CFLG", "magic \"CFLG\"")
fl.put(u8(1), "version 1")
fl.put(u8(8), "fingerprint width 8")
fl.put(bytes(2), "reserved")
fl.put(u32(5), "first record position 5")
fl.put(u32(2), "record count 2")
fl.put(FA, "record 5: fingerprint"); fl.put(u64(0x2a), "record 5: container 0x2a")
fl.put(FB, "record 6: fingerprint"); fl.put(u64(0x2b), "record 6: container 0x2b")
fl.put(u32(crc32c(fl.b)), "crc32c of the above")

# --- frugal log segment with a removal (version 2): fingerprint 0x11 is
# removed at position 9 and stored again in container 0x30 at position 10.
fr = Out()
fr.put(b"CFLG", "magic \"CFLG\"")
fr.put(u8(2), "version 2 (holds removals)")
fr.put(u8(8), "fingerprint width 8")
fr.put(bytes(2), "reserved")
fr.put(u32(9), "first record position 9")
fr.put(u32(2), "record count 2")
fr.put(FA, "record 9: fingerprint"); fr.put(u64(0xffffffffffffffff), "record 9: removal (container u64::MAX)")
fr.put(FA, "record 10: fingerprint"); fr.put(u64(0x30), "record 10: container 0x30")
fr.put(u32(crc32c(fr.b)), "crc32c of the above")

# --- dir listing, version 2 with special files and extras (flag 8)
dx = Out()
dx.put(u8(2), "listing format version 2")
dx.put(varint(5), "entry count 5 (varint)")
def special(i, name, kind, kname, mode, inode, rdev):
    dx.put(varint(len(name)), "entry %d: name length %d" % (i, len(name)))
    dx.put(name, "entry %d: name \"%s\"" % (i, name.decode()))
    flags = 8 if rdev is not None else 0
    dx.put(u8(kind) + u8(flags), "entry %d: kind %d (%s), flags %d" % (i, kind, kname, flags))
    dx.put(varint(mode), "entry %d: mode 0o%o (varint)" % (i, mode))
    dx.put(varint(0) + varint(0), "entry %d: uid 0, gid 0 (varints)" % i)
    dx.put(i64(MT), "entry %d: mtime_ns" % i); dx.put(i64(MT + 1), "entry %d: ctime_ns" % i)
    dx.put(varint(inode), "entry %d: inode %d (varint)" % (i, inode)); dx.put(varint(0), "entry %d: size 0" % i)
    if rdev is not None:
        f = u8(3) + varint(len(varint(rdev))) + varint(rdev)
        dx.put(varint(len(f)), "entry %d: extras length %d" % (i, len(f)))
        dx.put(f, "entry %d: tag 3 (rdev), length %d, rdev %#x" % (i, len(varint(rdev)), rdev))
special(0, b"blk", 5, "block device", 0o60660, 50, 0x0801)
special(1, b"dev", 4, "char device", 0o20666, 51, 0x0103)
special(2, b"fifo", 3, "fifo", 0o10644, 52, None)
special(3, b"sock", 6, "socket", 0o140755, 53, None)
dx.put(varint(6), "entry 4: name length 6"); dx.put(b"sparse", "entry 4: name \"sparse\"")
dx.put(u8(0) + u8(10), "entry 4: kind 0 (file), flags 10 (content, extras)")
dx.put(varint(0o100644), "entry 4: mode 0o100644 (varint)")
dx.put(varint(0) + varint(0), "entry 4: uid 0, gid 0 (varints)")
dx.put(i64(MT), "entry 4: mtime_ns"); dx.put(i64(MT + 1), "entry 4: ctime_ns")
dx.put(varint(54), "entry 4: inode 54 (varint)"); dx.put(varint(1 << 20), "entry 4: size 1048576 (varint)")
dx.put(FC, "entry 4: content root fingerprint"); dx.put(u8(0), "entry 4: content root level 0"); dx.put(varint(8), "entry 4: content size 8 (the extents' bytes)")
xa = varint(1) + varint(6) + b"user.k" + varint(1) + b"v"
hl = varint(2049) + varint(2)
ex = varint(2) + varint(4096) + varint(4) + varint(65536 - 4100) + varint(4)
body = u8(1) + varint(len(xa)) + xa + u8(2) + varint(len(hl)) + hl + u8(128) + varint(len(ex)) + ex
dx.put(varint(len(body)), "entry 4: extras length %d" % len(body))
dx.put(u8(1) + varint(len(xa)), "entry 4: tag 1 (xattrs), length %d" % len(xa))
dx.put(xa, "entry 4: 1 xattr: name \"user.k\", value \"v\"")
dx.put(u8(2) + varint(len(hl)), "entry 4: tag 2 (hard link), length %d" % len(hl))
dx.put(hl, "entry 4: dev 2049, nlink 2")
dx.put(u8(128) + varint(len(ex)), "entry 4: tag 128 (extents), length %d" % len(ex))
dx.put(ex, "entry 4: 2 extents: gap 4096 len 4, gap 61436 len 4")

# The parent check's record (FORMAT.md "Local notes"): entries in ascending
# fingerprint order, container ids ascending.
ph = Out()
ph.put(b"CAIRNPH1", "magic \"CAIRNPH1\" (version 1)")
ph.put(u32(2), "entry count 2")
ph.put(u8(8) + FA, "entry 0: fingerprint width 8, content root 11..11")
ph.put(struct.pack('<H', 0), "entry 0: container count 0")
ph.put(u8(8) + FB, "entry 1: fingerprint width 8, content root 22..22")
ph.put(struct.pack('<H', 2), "entry 1: container count 2")
ph.put(u64(0x2a), "entry 1: container 0x2a")
ph.put(u64(0x102), "entry 1: container 0x102")

for name, o in [("ENVELOPE", env), ("TREE_NODE", tree), ("CONTAINER", ctr), ("DIR", d), ("SNAPSHOT", snap), ("INDEX", idx), ("INDEX_DELTA", dl), ("INDEX_DELTA_V2", d2), ("SUMMARY_VECTOR", sv), ("FRUGAL_LOG", fl), ("FRUGAL_LOG_REMOVAL", fr), ("DIR_EXTRAS", dx), ("PARENT_HELD", ph)]:
    print("const %s: &str = r#\"\n%s\n\"#;\n" % (name, o.text()))
