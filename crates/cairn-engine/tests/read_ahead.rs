//! Reading large files ahead on a pool of threads (`backup/read_ahead.rs`)
//! changes nothing that is stored: the same tree backed up with and without
//! the pool gives the same snapshot root and the same containers, and the
//! snapshot restores byte-identically. The tree has more large files than
//! may be outstanding at once, interleaved with small files, a sparse file
//! and subdirectories, so the walker's queue fills, waits and drains.

mod common;

use std::path::Path;

use cairn_engine::{catalog, BackupOptions, Repository};
use common::*;

fn tree(root: &Path) {
    let mut rng = Rng(31);
    let mut bytes = |n: usize| -> Vec<u8> { (0..n).map(|_| rng.next() as u8).collect() };
    for d in 0..3 {
        let dir = root.join(format!("d{d}"));
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        for f in 0..4 {
            // 1 to 3 MiB: every one goes to the pool.
            let big = bytes((1 << 20) + f * (600 << 10));
            std::fs::write(dir.join(format!("big{f}")), &big).unwrap();
            std::fs::write(dir.join(format!("small{f}")), bytes(100 + f * 3000)).unwrap();
            std::fs::write(dir.join("sub").join(format!("s{f}")), bytes(5000)).unwrap();
        }
    }
    // A sparse file: only its data regions are read, on the pool too.
    let sparse = std::fs::File::create(root.join("sparse")).unwrap();
    use std::os::unix::fs::FileExt;
    sparse.write_all_at(&bytes(300_000), 1 << 20).unwrap();
    sparse.set_len(8 << 20).unwrap();
}

fn backup(repo: &Repository, path: &Path, read_threads: usize) -> String {
    let opts = BackupOptions {
        read_threads: Some(read_threads),
        ..Default::default()
    };
    backup_opts(repo, path, opts).unwrap().snapshot_id
}

#[test]
fn the_pool_changes_nothing_stored() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    tree(&src);
    let mut roots = Vec::new();
    let mut containers = Vec::new();
    for threads in [0, 1, 3] {
        let repo_dir = dir.path().join(format!("repo{threads}"));
        let repo = Repository::init_local(&repo_dir, tiny_config()).unwrap();
        let id = backup(&repo, &src, threads);
        let snap = catalog::resolve(&**repo.backend(), &id).unwrap();
        roots.push(snap.record.root.clone());
        let mut listed: Vec<Vec<u8>> = repo
            .backend()
            .list("containers/")
            .unwrap()
            .iter()
            .map(|k| repo.backend().read(k).unwrap())
            .collect();
        listed.sort();
        containers.push(listed);
        assert_restores(&repo, &id, &src);
        assert_check_clean(&repo);
    }
    assert_eq!(roots[0], roots[1], "one reader thread");
    assert_eq!(roots[0], roots[2], "three reader threads");
    assert!(containers[0] == containers[1] && containers[0] == containers[2]);
}
