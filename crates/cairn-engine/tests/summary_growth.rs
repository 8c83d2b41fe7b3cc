//! The Summary Vector (DDFS §4.1) is sized from the repository's chunk
//! count: a repository that starts with a small filter grows it as chunks
//! arrive (at a merge commit, or at open when the checkpoint is overfull),
//! so its false-positive rate stays near the 10-bits-per-chunk design point
//! while a small repository keeps a small checkpoint.

mod common;

use std::sync::Arc;

use cairn_backend::MemBackend;
use cairn_core::{Backend, Fingerprint};
use cairn_engine::Repository;

fn random_file(path: &std::path::Path, rng: &mut common::Rng, bytes: usize) {
    let data: Vec<u8> = (0..bytes / 8)
        .flat_map(|_| rng.next().to_le_bytes())
        .collect();
    std::fs::write(path, data).unwrap();
}

fn checkpoint_bytes(backend: &dyn Backend) -> u64 {
    let keys = backend
        .list(cairn_engine::object_names::BLOOM)
        .unwrap_or_default();
    keys.iter()
        .map(|k| backend.read(k).map(|b| b.len() as u64).unwrap_or(0))
        .max()
        .unwrap_or(0)
}

#[test]
fn the_summary_vector_grows_with_the_repository() {
    let dir = tempfile::tempdir().unwrap();
    let backend: Arc<dyn Backend> = Arc::new(MemBackend::new());
    let mut cfg = common::tiny_config();
    // The smallest filter there is: 1,024 chunks at 10 bits.
    cfg.index.expected_chunks = 1;
    let repo = Repository::init(backend.clone(), cfg.clone()).unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let mut rng = common::Rng(7);
    let mut sizes = Vec::new();
    for generation in 0..6 {
        // ~1 MiB of new chunks (~500 at 2 KiB) each generation.
        random_file(&data.join(format!("f{generation}")), &mut rng, 1 << 20);
        let id = common::backup(&Repository::open(backend.clone()).unwrap(), &data).unwrap();
        common::assert_restores(&repo, &id, &data);
        sizes.push(checkpoint_bytes(&*backend));
    }
    let opened = cairn_engine::index::open_for_write(
        backend.clone(),
        repo.counters.clone(),
        &*repo.log,
        &cfg.index,
        &Default::default(),
    )
    .unwrap();
    let kind = opened.kind;
    let entries = kind.entry_count();
    assert!(entries > 2_000, "only {entries} chunks indexed");
    // Sized for at least twice the entries at 10 bits each.
    assert!(
        kind.ram_bytes() * 8 >= entries * 2 * 10,
        "{} filter bytes for {entries} chunks (checkpoints {sizes:?})",
        kind.ram_bytes()
    );
    // The checkpoint written by the last merge already has the room: growth
    // happens at the commit, not only when the next open finds it overfull.
    assert!(
        sizes.last().unwrap() * 8 >= entries * 2 * 10,
        "checkpoint of {sizes:?} bytes for {entries} chunks"
    );
    assert!(
        sizes.last() > sizes.first(),
        "the checkpoint never grew: {sizes:?}"
    );
    let mut fps = common::Rng(99);
    let trials = 20_000;
    let maybe = (0..trials)
        .filter(|_| {
            let bytes: Vec<u8> = (0..4).flat_map(|_| fps.next().to_le_bytes()).collect();
            !kind.certainly_new(&Fingerprint::from_slice(&bytes))
        })
        .count();
    // 10 bits a chunk at half load: ~0.1%; a filter left at 1,024 chunks
    // with thousands inserted answers "maybe" almost always.
    assert!(
        maybe * 100 < trials,
        "{maybe} of {trials} unseen fingerprints maybe present"
    );
}
