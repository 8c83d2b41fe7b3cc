//! Two generations of a tree: each restores byte-identical (content, mode,
//! mtime, symlinks, structure) and the second stores only what changed.

mod common;

use std::fs;
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::PermissionsExt;

use common::*;

/// The edits between generation 1 and 2, each a different kind of change.
fn edit_tree(root: &std::path::Path, rng: &mut Rng) {
    // Modify 100 bytes in the middle of a large file (in place).
    let mut f = fs::OpenOptions::new()
        .write(true)
        .open(root.join(BIG1))
        .unwrap();
    f.seek(SeekFrom::Start(1 << 20)).unwrap();
    f.write_all(&rng.bytes(100)).unwrap();
    drop(f);
    // Insert bytes at the start of another.
    let old = fs::read(root.join(BIG2)).unwrap();
    let mut new = rng.bytes(1_000);
    new.extend_from_slice(&old);
    fs::write(root.join(BIG2), new).unwrap();
    // Append to one.
    let mut f = fs::OpenOptions::new()
        .append(true)
        .open(root.join(LOG))
        .unwrap();
    f.write_all(&rng.text(5_000)).unwrap();
    drop(f);
    // Delete two files.
    fs::remove_file(root.join("docs/notes/n1.txt")).unwrap();
    fs::remove_file(root.join("data/r3.bin")).unwrap();
    // Add a new file, with a custom mtime.
    let new_file = root.join("docs/new.txt");
    write_file(&new_file, &rng.text(10_000), 0o640);
    set_mtime(&new_file, rng.mtime());
    // Change modes.
    fs::set_permissions(root.join(TOOL), fs::Permissions::from_mode(0o700)).unwrap();
    fs::set_permissions(root.join(KEY), fs::Permissions::from_mode(0o640)).unwrap();
    // Retarget a symlink.
    symlink(BIG2, &root.join(LINK));
    // Metadata-only change: a new mtime, same content.
    set_mtime(&root.join("docs/readme.txt"), rng.mtime());
}

#[test]
fn two_generations_restore_identically_and_the_second_stores_little() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    let tree = tmp.path().join("tree");
    let mut rng = Rng::new(1);
    build_sample_tree(&tree, &mut rng);
    let gen1 = Manifest::capture(&tree);
    let files = gen1
        .0
        .values()
        .filter(|e| matches!(e.kind, Kind::File(_)))
        .count();
    assert!((25..=40).contains(&files), "sample tree has {files} files");

    let b1 = cairn(&repo, &["backup", "--json", s(&tree)]).ok().json();
    let id1 = b1["id"].as_str().unwrap().to_string();
    assert_eq!(
        b1["stats"]["logical_bytes"].as_u64().unwrap(),
        gen1.total_file_bytes()
    );

    edit_tree(&tree, &mut rng);
    let gen2 = Manifest::capture(&tree);
    assert_ne!(gen1, gen2);
    let b2 = cairn(&repo, &["backup", "--json", s(&tree)]).ok().json();
    let id2 = b2["id"].as_str().unwrap().to_string();
    assert_ne!(id1, id2);

    // Dedup: the second generation stores only a small fraction of its bytes.
    let st = &b2["stats"];
    let logical = st["logical_bytes"].as_u64().unwrap();
    let new_raw = st["new_raw_bytes"].as_u64().unwrap();
    assert_eq!(logical, gen2.total_file_bytes());
    assert!(new_raw > 0, "the edits must store something: {st}");
    let fraction = new_raw as f64 / logical as f64;
    eprintln!("second generation: {new_raw} new of {logical} logical bytes");
    // The edits touch ~120 KiB of content; with 8 KiB average chunks (64 KiB
    // at most) plus the changed tree nodes and listings, a few hundred KiB of
    // ~8 MiB. 10% leaves ample room yet fails if a whole file is re-stored.
    assert!(
        fraction < 0.10,
        "second generation stored {new_raw} of {logical} bytes ({:.1}%): {st}",
        fraction * 100.0
    );
    assert!(st["new_chunks"].as_u64().unwrap() < st["chunks"].as_u64().unwrap() / 5);

    assert_eq!(snapshot_ids(&repo), vec![id1.clone(), id2.clone()]);

    // Each generation restores byte-identical to the tree at its backup.
    for (id, expected) in [(&id1, &gen1), (&id2, &gen2)] {
        let out = tmp.path().join(format!("restore-{}", &id[..8]));
        cairn(&repo, &["restore", id, "--target", s(&out)]).ok();
        assert_tree_matches(expected, &out.join("tree"));
        let top: Vec<_> = fs::read_dir(&out).unwrap().collect();
        assert_eq!(top.len(), 1, "restore puts exactly the backed-up tree");
    }

    let check = cairn(&repo, &["check", "--read-data"]).ok();
    assert!(check.stdout_str().contains("no problems found"));
}
