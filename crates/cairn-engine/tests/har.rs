//! HAR through the product (`backup/rewrite/har.rs`, issue 34): a backup
//! records the containers it used sparsely (`har/<snapshot id>`), the next
//! backup of the same host stores again the duplicates that point into
//! them, and the one after finds those chunks in dense containers and
//! rewrites (almost) nothing. Every snapshot restores byte for byte, a
//! damaged record only costs the history, and forgetting a snapshot
//! deletes its record.

mod common;

use cairn_engine::config::RewriteConfig;
use cairn_engine::Repository;
use common::*;

fn random(rng: &mut Rng, n: usize) -> Vec<u8> {
    (0..n).map(|_| rng.next() as u8).collect()
}

#[test]
fn har_rewrites_what_the_previous_backup_used_sparsely() {
    let tmp = tempfile::tempdir().unwrap();
    let mut cfg = tiny_config();
    cfg.rewrite = RewriteConfig::parse("har:utilization=50").unwrap();
    let repo = Repository::init_local(&tmp.path().join("repo"), cfg).unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    let mut rng = Rng(7);
    let old = random(&mut rng, 2_000_000);
    std::fs::write(src.join("f"), &old).unwrap();
    let first = backup_with(&repo, &src, cairn_engine::DedupMode::Inline).unwrap();
    assert_eq!(first.record.stats.rewritten_data_chunks, 0);

    // The second version keeps a stretch of every 256 KB of the first and
    // replaces the rest: the first backup's containers are each used a
    // little, so the second backup records them as sparse.
    let mut new = Vec::new();
    for (i, piece) in old.chunks(256_000).enumerate() {
        if i % 2 == 0 {
            new.extend_from_slice(&piece[..40_000]);
        }
        new.extend_from_slice(&random(&mut rng, 100_000));
    }
    std::fs::write(src.join("f"), &new).unwrap();
    let second = backup_with(&repo, &src, cairn_engine::DedupMode::Inline).unwrap();
    // Nothing inherited yet: the first backup used its containers fully.
    assert_eq!(second.record.stats.rewritten_data_chunks, 0);
    let sparse_key = format!("har/{}", second.snapshot_id);
    let recorded = repo.backend().read(&sparse_key).unwrap();
    assert!(recorded.len() > 16, "no sparse container recorded");

    // The same data again: its duplicates in those sparse containers are
    // stored again...
    let third = backup_with(&repo, &src, cairn_engine::DedupMode::Inline).unwrap();
    let rewritten = third.record.stats.rewritten_data_chunks;
    assert!(rewritten > 0, "HAR rewrote nothing");
    // ...and the next backup finds them in containers it uses fully.
    let fourth = backup_with(&repo, &src, cairn_engine::DedupMode::Inline).unwrap();
    assert!(
        fourth.record.stats.rewritten_data_chunks * 10 <= rewritten,
        "{} rewritten again after {rewritten}",
        fourth.record.stats.rewritten_data_chunks
    );
    assert_restores(&repo, &fourth.snapshot_id, &src);
    assert_restores(&repo, &third.snapshot_id, &src);
    assert_check_clean(&repo);

    // A damaged record: the next backup warns and rewrites by HAR nothing.
    repo.backend()
        .write_atomic(&format!("har/{}", fourth.snapshot_id), b"garbage")
        .unwrap();
    let fifth = backup_with(&repo, &src, cairn_engine::DedupMode::Inline).unwrap();
    assert_eq!(fifth.record.stats.rewritten_data_chunks, 0);
    assert_restores(&repo, &fifth.snapshot_id, &src);

    // Forgetting a snapshot deletes its record of sparse containers.
    let lock = repo.lock_writer(false).unwrap();
    cairn_engine::forget::remove(&repo, &lock, std::slice::from_ref(&second.snapshot_id)).unwrap();
    drop(lock);
    assert!(!repo.backend().exists(&sparse_key).unwrap());
    assert!(repo
        .backend()
        .exists(&format!("har/{}", fifth.snapshot_id))
        .unwrap());
    assert_check_clean(&repo);
}
