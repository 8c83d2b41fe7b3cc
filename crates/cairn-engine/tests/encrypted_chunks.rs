//! Encrypted repositories name chunks by keyed BLAKE3 and cut files with a
//! chunker seeded per repository (`docs/security.md`): a backup restores
//! byte for byte and checks clean; every chunk read back through the engine
//! (data, listing and tree chunks, and the index) carries the keyed
//! fingerprint of its bytes and never the plain one; the file chunks are
//! exactly those of the repository's seeded chunker; two repositories cut
//! the same file differently; and a second backup of the same tree stores
//! no new data.

mod common;

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use cairn_backend::LocalBackend;
use cairn_core::{ChunkKind, ChunkerConfig, Fingerprint};
use cairn_crypto::{Algorithm, KdfParams, KeyLabel, Password};
use cairn_engine::index::disk_index::DiskIndex;
use cairn_engine::{RepoConfig, Repository};
use common::{assert_check_clean, assert_restores, backup_with, tiny_config, Rng};

fn password() -> Password {
    Password::new(zeroize::Zeroizing::new("secret".to_string()), "test").unwrap()
}

/// A new encrypted repository in a fresh directory (kept alive by the
/// returned guard).
fn encrypted_repo(cfg: RepoConfig, algorithm: Algorithm) -> (tempfile::TempDir, Repository) {
    let dir = tempfile::tempdir().unwrap();
    let backend = Arc::new(LocalBackend::create(&dir.path().join("repo")).unwrap());
    let repo = Repository::init_encrypted(
        backend,
        cfg,
        algorithm,
        &password(),
        KdfParams::for_tests(),
        KeyLabel {
            host: "h".into(),
            user: "u".into(),
        },
    )
    .unwrap();
    (dir, repo)
}

fn random(seed: u64, len: usize) -> Vec<u8> {
    let mut rng = Rng(seed);
    (0..len).map(|_| rng.next() as u8).collect()
}

/// A small tree: two random files, a text file, a file in a subdirectory.
fn source_tree() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let top = dir.path().join("data");
    std::fs::create_dir_all(top.join("sub")).unwrap();
    std::fs::write(top.join("big.bin"), random(1, 300_000)).unwrap();
    std::fs::write(top.join("small.bin"), random(2, 40_000)).unwrap();
    let text: String = (0..3000).map(|i| format!("line {i} of a text\n")).collect();
    std::fs::write(top.join("notes.txt"), text).unwrap();
    std::fs::write(top.join("sub/inner.bin"), random(3, 90_000)).unwrap();
    (dir, top)
}

/// The files of the tree, in a fixed order.
fn files(top: &Path) -> Vec<Vec<u8>> {
    ["big.bin", "small.bin", "notes.txt", "sub/inner.bin"]
        .iter()
        .map(|n| std::fs::read(top.join(n)).unwrap())
        .collect()
}

/// The chunks `data` is cut into by `cfg` seeded with `seed`.
fn chunks<'a>(cfg: &ChunkerConfig, seed: Option<&[u8; 32]>, data: &'a [u8]) -> Vec<&'a [u8]> {
    let mut ends = Vec::new();
    let mut chunker = cairn_chunk::new_chunker_seeded(cfg, seed);
    cairn_chunk::cut_points(chunker.as_mut(), data, &mut ends);
    let mut start = 0;
    ends.iter()
        .map(|&e| {
            let c = &data[start..e];
            start = e;
            c
        })
        .collect()
}

fn plain(chunk: &[u8]) -> Fingerprint {
    Fingerprint::from_slice(blake3::hash(chunk).as_bytes())
}

fn keyed(repo: &Repository, chunk: &[u8]) -> Fingerprint {
    let key = repo.keys().unwrap().fingerprint_key();
    Fingerprint::from_slice(blake3::keyed_hash(key, chunk).as_bytes())
}

/// Every stored chunk as the engine reads it back: descriptor and raw bytes.
fn stored_chunks(repo: &Repository) -> Vec<(cairn_format::container::Descriptor, Vec<u8>)> {
    let mut out = Vec::new();
    for id in repo.log.ids().unwrap() {
        let meta = repo.log.read_meta(id).unwrap();
        for d in &meta.descriptors {
            let stored = repo.log.read_chunk(&meta, d).unwrap();
            let mut raw = Vec::new();
            cairn_format::compress::decompress(d.codec, &stored, d.raw_len as usize, &mut raw)
                .unwrap();
            out.push((*d, raw));
        }
    }
    out
}

fn index_fps(repo: &Repository) -> HashSet<Fingerprint> {
    let ix = DiskIndex::open(repo.backend().clone(), repo.counters.clone()).unwrap();
    ix.read_all().unwrap().into_iter().map(|e| e.fp).collect()
}

/// Backs up, restores, checks, and verifies the fingerprints and
/// boundaries of one encrypted repository with chunker `chunker`.
fn back_up_and_verify(chunker: ChunkerConfig, algorithm: Algorithm) {
    let mut cfg = tiny_config();
    cfg.chunker = chunker;
    let (_guard, repo) = encrypted_repo(cfg, algorithm);
    let seed = *repo.keys().unwrap().chunker_seed();
    let (_src, top) = source_tree();

    let first = backup_with(&repo, &top, Default::default()).unwrap();
    assert_restores(&repo, &first.snapshot_id, &top);
    assert_check_clean(&repo);

    let stored = stored_chunks(&repo);
    let stored_fps: HashSet<Fingerprint> = stored.iter().map(|(d, _)| d.fp).collect();
    let kinds: HashSet<ChunkKind> = stored.iter().map(|(d, _)| d.kind).collect();
    assert!(
        kinds.contains(&ChunkKind::Data) && kinds.len() > 1,
        "{kinds:?}"
    );
    // Every chunk, whatever its kind, is named by the keyed hash of its bytes.
    for (d, raw) in &stored {
        assert_eq!(d.fp, keyed(&repo, raw), "{:?} chunk", d.kind);
        assert_ne!(d.fp, plain(raw));
    }
    // The index lists the same fingerprints.
    assert_eq!(index_fps(&repo), stored_fps);

    // The files were cut by the seeded chunker: each of its chunks is
    // stored under its keyed fingerprint, and no chunk's plain digest
    // appears anywhere.
    let mut unseeded_found = 0;
    let mut unseeded_total = 0;
    for data in files(&top) {
        for c in chunks(&chunker, Some(&seed), &data) {
            assert!(
                stored_fps.contains(&keyed(&repo, c)),
                "seeded chunk missing"
            );
            assert!(!stored_fps.contains(&plain(c)), "plain fingerprint stored");
        }
        for c in chunks(&chunker, None, &data) {
            unseeded_total += 1;
            unseeded_found += stored_fps.contains(&keyed(&repo, c)) as usize;
            assert!(!stored_fps.contains(&plain(c)), "plain fingerprint stored");
        }
    }
    // Unseeded cuts only coincide for files shorter than one chunk, or by
    // chance; most of them are not what was stored.
    assert!(
        unseeded_found * 2 < unseeded_total,
        "{unseeded_found} of {unseeded_total} unseeded chunks stored"
    );

    // Dedup within the repository: the same tree again stores no new data.
    let second = backup_with(&repo, &top, Default::default()).unwrap();
    assert_eq!(second.record.stats.new_data_chunks, 0);
    assert!(second.record.stats.data_chunks > 0);
    assert_restores(&repo, &second.snapshot_id, &top);
    assert_eq!(stored_chunks(&repo).len(), stored.len(), "no chunk added");
    assert_check_clean(&repo);
}

#[test]
fn fastcdc_chunks_are_keyed_seeded_and_deduplicated() {
    back_up_and_verify(tiny_config().chunker, Algorithm::Aes256Gcm);
}

#[test]
fn rabin_and_regression_chunks_are_keyed_seeded_and_deduplicated() {
    for (name, algorithm) in [
        ("rabin", Algorithm::ChaCha20Poly1305),
        ("regression", Algorithm::Aes256Gcm),
    ] {
        back_up_and_verify(ChunkerConfig::from_name(name, 2048).unwrap(), algorithm);
    }
}

/// Two encrypted repositories cut the same file at different boundaries
/// (their chunker seeds differ), and neither stores a chunk the other does.
#[test]
fn two_repositories_cut_the_same_file_differently() {
    let (_src, top) = source_tree();
    let data = std::fs::read(top.join("big.bin")).unwrap();
    let ends = |repo: &Repository| {
        let seed = repo.keys().unwrap().chunker_seed();
        let mut pos = 0;
        chunks(&tiny_config().chunker, Some(seed), &data)
            .iter()
            .map(|c| {
                pos += c.len();
                pos
            })
            .collect::<HashSet<usize>>()
    };
    let (_g1, a) = encrypted_repo(tiny_config(), Algorithm::Aes256Gcm);
    let (_g2, b) = encrypted_repo(tiny_config(), Algorithm::Aes256Gcm);
    for repo in [&a, &b] {
        backup_with(repo, &top, Default::default()).unwrap();
    }
    let (ea, eb) = (ends(&a), ends(&b));
    let shared = ea.intersection(&eb).count();
    // Only the file's end is certainly shared; a few more by chance.
    assert!(
        shared * 10 < ea.len().min(eb.len()),
        "{shared} of {} boundaries shared",
        ea.len()
    );
    // The sizes of the data chunks each repository stored differ too.
    let sizes = |repo: &Repository| {
        let mut v: Vec<u32> = stored_chunks(repo)
            .iter()
            .filter(|(d, _)| d.kind == ChunkKind::Data)
            .map(|(d, _)| d.raw_len)
            .collect();
        v.sort_unstable();
        v
    };
    assert_ne!(sizes(&a), sizes(&b));
    let fps = |repo: &Repository| -> HashSet<Fingerprint> {
        stored_chunks(repo).iter().map(|(d, _)| d.fp).collect()
    };
    assert_eq!(fps(&a).intersection(&fps(&b)).count(), 0);
}

/// A clear repository keeps plain BLAKE3 fingerprints and the fixed chunker.
#[test]
fn a_clear_repository_is_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let repo = Repository::init(
        Arc::new(LocalBackend::create(&dir.path().join("repo")).unwrap()),
        tiny_config(),
    )
    .unwrap();
    assert!(repo.keys().is_none());
    let (_src, top) = source_tree();
    backup_with(&repo, &top, Default::default()).unwrap();
    let stored = stored_chunks(&repo);
    for (d, raw) in &stored {
        assert_eq!(d.fp, plain(raw));
    }
    let fps: HashSet<Fingerprint> = stored.iter().map(|(d, _)| d.fp).collect();
    for data in files(&top) {
        for c in chunks(&tiny_config().chunker, None, &data) {
            assert!(fps.contains(&plain(c)));
        }
    }
}
