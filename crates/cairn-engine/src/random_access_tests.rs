//! Tests of [`RandomAccess`] on a real backup in memory: any range reads the
//! file's bytes, sequential small reads read each chunk once (checked with
//! the repository's `chunk_reads` counter), and the chunk cache stays within
//! its byte budget; readers sharing one cache find what another decoded
//! (read-ahead), and concurrent ones decode each chunk about once. Whole
//! raw chunks of a read go straight into the caller's buffer (nothing
//! cached, damage still an error), and read-ahead on a store that fetches
//! in the background only prefetches them.

use std::fs;
use std::path::Path;
use std::sync::Arc;

use cairn_backend::MemBackend;
use cairn_format::dir::{BlobRef, EntryKind};

use super::{CacheLimits, RandomAccess, SharedChunks};
use crate::read::Reader;
use crate::{catalog, BackupOptions, Repository, Source};

/// Incompressible, deterministic bytes (xorshift64*).
fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 56) as u8
        })
        .collect()
}

const BIG: usize = 3 << 20;

/// 2 MiB of compressible, varied lines (stored compressed).
fn text() -> Vec<u8> {
    let mut out = Vec::new();
    let mut i = 0u64;
    while out.len() < 2 << 20 {
        out.extend_from_slice(format!("line {i} of the text, {}\n", i * 7919 % 1000).as_bytes());
        i += 1;
    }
    out
}

/// A repository in memory holding `tree/big` (multi-level recipe),
/// `tree/small` and `tree/sub/`.
fn setup(dir: &Path) -> (Repository, catalog::SnapshotInfo, Vec<u8>) {
    let repo = Repository::init(Arc::new(MemBackend::new()), Repository::default_config()).unwrap();
    setup_in(dir, repo)
}

/// [`setup`] into `repo`.
fn setup_in(dir: &Path, repo: Repository) -> (Repository, catalog::SnapshotInfo, Vec<u8>) {
    let tree = dir.join("tree");
    fs::create_dir_all(tree.join("sub")).unwrap();
    let big = noise(BIG, 7);
    fs::write(tree.join("big"), &big).unwrap();
    fs::write(tree.join("small"), b"hello").unwrap();
    fs::write(tree.join("sub/x"), b"x").unwrap();
    fs::write(tree.join("text"), text()).unwrap();
    let lock = repo.lock_writer(false).unwrap();
    let out = crate::backup(
        &repo,
        &lock,
        BackupOptions {
            sources: vec![Source::Path(tree)],
            host: Some("test".into()),
            ..Default::default()
        },
    )
    .unwrap();
    drop(lock);
    let snap = catalog::resolve(&**repo.backend(), &out.snapshot_id).unwrap();
    (repo, snap, big)
}

fn blob(repo: &Repository, snap: &catalog::SnapshotInfo, path: &str) -> BlobRef {
    let mut reader = Reader::open(repo, Default::default()).unwrap();
    let e = reader.find(&snap.record, path).unwrap().unwrap();
    e.content.unwrap()
}

fn chunk_reads(repo: &Repository) -> u64 {
    repo.counters.snapshot().chunk_reads
}

#[test]
fn any_range_reads_the_files_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let (repo, snap, big) = setup(dir.path());
    let b = blob(&repo, &snap, "tree/big");
    assert!(b.level >= 1, "the big file has a recipe tree");
    let mut ra = RandomAccess::open(&repo, CacheLimits::default()).unwrap();
    let n = BIG as u64;
    let cases: &[(u64, usize)] = &[
        (0, 1),
        (0, 4096),
        (1, 100_000),
        (8191, 3),
        (1 << 20, 1 << 20),
        (n - 1, 1),
        (n - 10, 4096),
        (n, 10),
        (n + 5, 10),
        (12_345, 0),
        (0, BIG + 100),
    ];
    for &(off, len) in cases {
        let mut out = Vec::new();
        ra.read_at(&b, off, len, &mut out).unwrap();
        let lo = (off as usize).min(BIG);
        let hi = (off as usize).saturating_add(len).min(BIG);
        assert_eq!(out, &big[lo..hi], "offset {off} len {len}");
    }
    // Pseudo-random ranges.
    for (i, r) in noise(64 * 8, 3).chunks(8).enumerate() {
        let off = u64::from_le_bytes(r.try_into().unwrap()) % n;
        let len = (i * 977) % 200_000 + 1;
        let mut out = Vec::new();
        ra.read_at(&b, off, len, &mut out).unwrap();
        let hi = (off as usize + len).min(BIG);
        assert_eq!(out, &big[off as usize..hi], "offset {off} len {len}");
    }
    let small = blob(&repo, &snap, "tree/small");
    let mut out = Vec::new();
    ra.read_at(&small, 1, 3, &mut out).unwrap();
    assert_eq!(out, b"ell");
}

#[test]
fn sequential_small_reads_read_each_chunk_once() {
    let dir = tempfile::tempdir().unwrap();
    let (repo, snap, big) = setup(dir.path());
    let b = blob(&repo, &snap, "tree/big");

    let mut whole = RandomAccess::open(&repo, CacheLimits::default()).unwrap();
    let before = chunk_reads(&repo);
    let mut out = Vec::new();
    whole.read_at(&b, 0, BIG, &mut out).unwrap();
    let one_pass = chunk_reads(&repo) - before;
    assert_eq!(out, big);

    let mut seq = RandomAccess::open(&repo, CacheLimits::default()).unwrap();
    let before = chunk_reads(&repo);
    let mut got = Vec::new();
    for off in (0..BIG).step_by(4096) {
        seq.read_at(&b, off as u64, 4096, &mut got).unwrap();
    }
    assert_eq!(got, big);
    assert_eq!(chunk_reads(&repo) - before, one_pass);

    // A range in the middle reads only the chunks under it: far fewer
    // than the whole file.
    let mut mid = RandomAccess::open(&repo, CacheLimits::default()).unwrap();
    let before = chunk_reads(&repo);
    let mut out = Vec::new();
    mid.read_at(&b, (BIG / 2) as u64, 10, &mut out).unwrap();
    assert_eq!(out, &big[BIG / 2..BIG / 2 + 10]);
    let reads = chunk_reads(&repo) - before;
    assert!(reads * 10 < one_pass, "{reads} reads of {one_pass}");
}

#[test]
fn the_chunk_cache_stays_within_its_budget() {
    let dir = tempfile::tempdir().unwrap();
    let (repo, snap, big) = setup(dir.path());
    let b = blob(&repo, &snap, "tree/big");
    let limits = CacheLimits {
        chunk_bytes: 256 << 10,
        nodes: 1,
        ..CacheLimits::default()
    };
    let mut ra = RandomAccess::open(&repo, limits).unwrap();
    let mut got = Vec::new();
    for off in (0..BIG).step_by(65_536) {
        ra.read_at(&b, off as u64, 65_536, &mut got).unwrap();
        assert!(ra.cached_chunk_bytes() <= 256 << 10);
    }
    assert_eq!(got, big);
}

#[test]
fn listings_are_decoded_once() {
    let dir = tempfile::tempdir().unwrap();
    let (repo, snap, _) = setup(dir.path());
    // The root listing is always a blob (small directories below it are
    // inline in it: FORMAT.md "Directory listing").
    let root = cairn_format::dir::BlobRef::try_from(&snap.record.root).unwrap();
    let mut ra = RandomAccess::open(&repo, CacheLimits::default()).unwrap();
    let first = ra.read_dir(Some(&root)).unwrap();
    let names: Vec<&[u8]> = first.iter().map(|e| e.name.as_slice()).collect();
    assert_eq!(names, [&b"tree"[..]]);
    assert_eq!(first[0].kind, EntryKind::Dir);
    let inline: Vec<&[u8]> = first[0]
        .children
        .as_ref()
        .unwrap()
        .iter()
        .map(|e| e.name.as_slice())
        .collect();
    assert_eq!(inline, [&b"big"[..], b"small", b"sub", b"text"]);
    let before = chunk_reads(&repo);
    let again = ra.read_dir(Some(&root)).unwrap();
    assert!(Arc::ptr_eq(&first, &again));
    assert_eq!(chunk_reads(&repo), before);
    assert!(ra.read_dir(None).unwrap().is_empty());
}

#[test]
fn readers_sharing_a_cache_find_the_chunks_one_of_them_warmed() {
    let dir = tempfile::tempdir().unwrap();
    let (repo, snap, big) = setup(dir.path());
    let b = blob(&repo, &snap, "tree/big");
    let mut alone = RandomAccess::open(&repo, CacheLimits::default()).unwrap();
    let before = chunk_reads(&repo);
    let mut out = Vec::new();
    alone.read_at(&b, 0, BIG, &mut out).unwrap();
    let one_pass = chunk_reads(&repo) - before;

    let shared = SharedChunks::new(64 << 20);
    let open = || RandomAccess::open_shared(&repo, CacheLimits::default(), shared.clone()).unwrap();
    let mut ahead = open();
    let before = chunk_reads(&repo);
    ahead.warm(&b, 0, BIG as u64).unwrap();
    // The data chunks, stored back to back, come in range reads (not
    // counted as chunk reads): only the tree nodes were read one by one.
    let reads = chunk_reads(&repo) - before;
    assert!(reads * 10 < one_pass, "{reads} reads of {one_pass}");
    assert!(shared.bytes() >= BIG);
    // Another reader finds every data chunk decoded: it reads only the
    // recipe's tree nodes (its own cache), and no copy goes through a Vec.
    let mut reader = open();
    let before = chunk_reads(&repo);
    let mut got = vec![0u8; BIG + 10];
    assert_eq!(reader.read_into(&b, 0, &mut got).unwrap(), BIG);
    assert!(got[..BIG] == big[..]);
    let reads = chunk_reads(&repo) - before;
    assert!(reads * 10 < one_pass, "{reads} reads of {one_pass}");
    let mut tail = [0u8; 100];
    assert_eq!(
        reader.read_into(&b, (BIG - 30) as u64, &mut tail).unwrap(),
        30
    );
    assert_eq!(tail[..30], big[BIG - 30..]);
    assert_eq!(reader.read_into(&b, BIG as u64, &mut tail).unwrap(), 0);
}

#[test]
fn concurrent_readers_of_one_cache_decode_each_chunk_about_once() {
    let dir = tempfile::tempdir().unwrap();
    let (repo, snap, big) = setup(dir.path());
    let b = blob(&repo, &snap, "tree/big");
    let mut alone = RandomAccess::open(&repo, CacheLimits::default()).unwrap();
    let before = chunk_reads(&repo);
    let mut out = Vec::new();
    alone.read_at(&b, 0, BIG, &mut out).unwrap();
    let one_pass = chunk_reads(&repo) - before;

    let shared = SharedChunks::new(64 << 20);
    let before = chunk_reads(&repo);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                let mut r =
                    RandomAccess::open_shared(&repo, CacheLimits::default(), shared.clone())
                        .unwrap();
                let mut got = vec![0u8; BIG];
                for off in (0..BIG).step_by(65_536) {
                    let end = (off + 65_536).min(BIG);
                    assert_eq!(
                        r.read_into(&b, off as u64, &mut got[off..end]).unwrap(),
                        end - off
                    );
                }
                assert!(got == big);
            });
        }
    });
    // Each data chunk once (a claimed chunk is waited for, not decoded
    // again); each reader reads the tree nodes for itself.
    let reads = chunk_reads(&repo) - before;
    assert!(
        reads < 2 * one_pass,
        "{reads} reads, one pass is {one_pass}"
    );
}

#[test]
fn a_small_cache_reuses_the_buffers_it_evicts_and_reads_stay_exact() {
    let dir = tempfile::tempdir().unwrap();
    let (repo, snap, big) = setup(dir.path());
    let b = blob(&repo, &snap, "tree/big");
    let budget = 1 << 20;
    let shared = SharedChunks::new(budget);
    let mut reader =
        RandomAccess::open_shared(&repo, CacheLimits::default(), shared.clone()).unwrap();
    // A stream read in windows, each warmed ahead and then read: the
    // evicted chunks' buffers come back for the next window's chunks.
    let window = 256 << 10;
    let mut got = vec![0u8; window];
    let mut reused = 0;
    for start in (0..BIG).step_by(window) {
        reader.warm(&b, start as u64, window as u64).unwrap();
        let n = reader.read_into(&b, start as u64, &mut got).unwrap();
        assert_eq!(got[..n], big[start..start + n], "window at {start}");
        let st = shared.state.lock();
        assert!(st.bytes <= budget + (256 << 10), "cache {} bytes", st.bytes);
        assert!(st.spare_bytes <= SharedChunks::spare_budget(budget));
        assert_eq!(
            st.spare_bytes,
            st.spare.iter().map(|v| v.capacity()).sum::<usize>()
        );
        reused += usize::from(st.spare_bytes > 0);
    }
    assert!(reused > 0, "evicted buffers were never kept for reuse");
}

#[test]
fn whole_raw_chunks_are_read_straight_into_the_callers_buffer() {
    let dir = tempfile::tempdir().unwrap();
    let (repo, snap, big) = setup(dir.path());
    let b = blob(&repo, &snap, "tree/big");
    let shared = SharedChunks::new(64 << 20);
    let mut r = RandomAccess::open_shared(&repo, CacheLimits::default(), shared.clone()).unwrap();
    // The whole file: every chunk lies wholly inside the read.
    let mut got = vec![0u8; BIG];
    assert_eq!(r.read_into(&b, 0, &mut got).unwrap(), BIG);
    assert!(got == big);
    assert_eq!(shared.bytes(), 0, "no chunk went through the cache");
    // A range cut inside chunks: only the two chunks under its edges are
    // decoded into the cache (for the read that continues past them).
    let (lo, len) = ((1 << 20) + 12_345, 1 << 20);
    let mut got = vec![0u8; len];
    assert_eq!(r.read_into(&b, lo as u64, &mut got).unwrap(), len);
    assert!(got[..] == big[lo..lo + len]);
    let leaves = r.leaf_ranges(&b, lo as u64, len as u64).unwrap();
    let edges = leaves[0].size + leaves[leaves.len() - 1].size;
    assert_eq!(shared.bytes() as u64, edges);
    // The next read finds its first chunk decoded, and reads the same.
    let mut next = vec![0u8; len / 2];
    let at = lo + len;
    assert_eq!(r.read_into(&b, at as u64, &mut next).unwrap(), len / 2);
    assert!(next[..] == big[at..at + len / 2]);
}

#[test]
fn compressed_chunks_are_read_through_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    let (repo, snap, _) = setup(dir.path());
    let t = blob(&repo, &snap, "tree/text");
    let want = text();
    let shared = SharedChunks::new(64 << 20);
    let mut r = RandomAccess::open_shared(&repo, CacheLimits::default(), shared.clone()).unwrap();
    let mut got = vec![0u8; want.len()];
    assert_eq!(r.read_into(&t, 0, &mut got).unwrap(), want.len());
    assert!(got == want);
    assert_eq!(
        shared.bytes(),
        want.len(),
        "each chunk decoded once, cached"
    );
}

#[test]
fn a_damaged_chunk_read_straight_is_an_error_not_wrong_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let (repo, snap, _) = setup(dir.path());
    let b = blob(&repo, &snap, "tree/big");
    // One byte flipped a third of the way into each container: inside
    // the data section, where the big file's chunks are.
    let backend = repo.backend().clone();
    for key in backend.list("containers/").unwrap() {
        let mut bytes = backend.read(&key).unwrap();
        let at = bytes.len() / 3;
        bytes[at] ^= 0x40;
        backend.write_atomic(&key, &bytes).unwrap();
    }
    let mut r = RandomAccess::open(&repo, CacheLimits::default()).unwrap();
    let mut got = vec![0u8; BIG];
    let err = r.read_into(&b, 0, &mut got).unwrap_err();
    assert!(err.is_corruption(), "{err}");
    assert!(
        err.to_string().contains("does not match its fingerprint"),
        "{err}"
    );
}

#[test]
fn read_ahead_on_a_local_store_prefetches_raw_chunks_and_decodes_compressed_ones() {
    let dir = tempfile::tempdir().unwrap();
    let backend = Arc::new(cairn_backend::LocalBackend::create(&dir.path().join("repo")).unwrap());
    let repo = Repository::init(backend, Repository::default_config()).unwrap();
    let (repo, snap, big) = setup_in(dir.path(), repo);
    let b = blob(&repo, &snap, "tree/big");
    let t = blob(&repo, &snap, "tree/text");
    let shared = SharedChunks::new(64 << 20);
    let mut ahead =
        RandomAccess::open_shared(&repo, CacheLimits::default(), shared.clone()).unwrap();
    ahead.warm(&b, 0, BIG as u64).unwrap();
    assert_eq!(shared.bytes(), 0, "raw chunks are only prefetched");
    let want = text();
    ahead.warm(&t, 0, want.len() as u64).unwrap();
    assert_eq!(shared.bytes(), want.len(), "compressed chunks are decoded");
    let mut r = RandomAccess::open_shared(&repo, CacheLimits::default(), shared.clone()).unwrap();
    let mut got = vec![0u8; BIG];
    assert_eq!(r.read_into(&b, 0, &mut got).unwrap(), BIG);
    assert!(got == big);
    let before = chunk_reads(&repo);
    let mut got = vec![0u8; want.len()];
    assert_eq!(r.read_into(&t, 0, &mut got).unwrap(), want.len());
    assert!(got == want);
    let reads = chunk_reads(&repo) - before;
    let leaves = r.leaf_ranges(&t, 0, want.len() as u64).unwrap().len() as u64;
    assert!(
        reads < leaves,
        "{reads} chunk reads for {leaves} decoded chunks"
    );
}
