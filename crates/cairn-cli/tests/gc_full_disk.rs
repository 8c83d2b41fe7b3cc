//! `gc` on a full disk (a small tmpfs; mounting needs root): whole dead
//! containers are deleted before anything is copied, so a collection that
//! could not write a single copy still frees their space and then has room
//! for its copies; when copying still runs out of space, one line says how
//! much it needs, what was freed is kept, and nothing is lost.

mod common;

use std::path::{Path, PathBuf};

use common::*;

/// Fills the file system of `dir` and leaves `free` bytes (about: the file
/// system counts pages).
fn fill_leaving(dir: &Path, free: u64) -> PathBuf {
    use std::io::Write;
    let filler = dir.join("filler");
    let mut f = std::fs::File::create(&filler).unwrap();
    let block = vec![0u8; 64 << 10];
    while f.write_all(&block).is_ok() {}
    drop(f);
    let len = std::fs::metadata(&filler).unwrap().len();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&filler)
        .unwrap();
    f.set_len(len.saturating_sub(free)).unwrap();
    filler
}

/// Two snapshots of `tree`, the first forgotten: `tree` is rewritten by
/// `change` in between. Returns the kept snapshot's manifest.
fn garbage(repo: &Path, tree: &Path, change: impl FnOnce(&Path)) -> Manifest {
    cairn(repo, &["init", "-q", "--container-size", "256KiB"]).ok();
    cairn(repo, &["backup", "-q", s(tree)]).ok();
    change(tree);
    cairn(repo, &["backup", "-q", s(tree)]).ok();
    cairn(repo, &["forget", "--keep-last", "1", "-q"]).ok();
    Manifest::capture(tree)
}

fn restores(repo: &Path, expected: &Manifest, out: &Path) {
    let _ = std::fs::remove_dir_all(out);
    cairn(repo, &["restore", "latest", "-q", "-t", s(out)]).ok();
    assert_tree_matches(expected, &out.join("tree"));
}

/// A full disk with room for an index delta but not for one copied
/// container: the whole dead containers go first, and the collection then
/// completes in the space they freed.
#[test]
fn gc_on_a_full_disk_deletes_whole_dead_containers_first() {
    let tmp = tempfile::tempdir().unwrap();
    let mnt = tmp.path().join("mnt");
    let Some(_mount) = Tmpfs::mount(&mnt, "8m") else {
        return;
    };
    let repo = mnt.join("repo");
    let tree = tmp.path().join("tree");
    let mut rng = Rng::new(81);
    // A large file that dies whole, beside small files of which half die.
    write_file(&tree.join("big"), &rng.bytes(2_500_000), 0o644);
    for i in 0..40 {
        write_file(
            &tree.join(format!("small/f{i:02}")),
            &rng.bytes(40_000),
            0o644,
        );
    }
    let expected = garbage(&repo, &tree, |t| {
        std::fs::remove_file(t.join("big")).unwrap();
        for i in (0..40).step_by(2) {
            std::fs::remove_file(t.join(format!("small/f{i:02}"))).unwrap();
        }
    });
    let before = container_bytes(&repo);
    // Room for the pending list and an index delta, not for a container
    // (256 KiB) nor for a new index generation and its checkpoint.
    let _filler = fill_leaving(&mnt, 64 << 10);

    let j = cairn(&repo, &["--json", "gc"]).ok().json();
    assert!(
        j["dead_containers_deleted_first"].as_u64().unwrap() > 0,
        "{j}"
    );
    assert!(j["containers_written"].as_u64().unwrap() > 0, "{j}");
    assert!(container_bytes(&repo) < before / 2, "{j}");
    cairn(&repo, &["check", "--read-data"]).ok();
    restores(&repo, &expected, &tmp.path().join("out"));
}

/// No whole dead container and no room for the copies: one line says how
/// much space the copies need; nothing is lost, and with the space freed
/// the next collection completes.
#[test]
fn gc_out_of_space_says_how_much_it_needs() {
    let tmp = tempfile::tempdir().unwrap();
    let mnt = tmp.path().join("mnt");
    let Some(_mount) = Tmpfs::mount(&mnt, "8m") else {
        return;
    };
    let repo = mnt.join("repo");
    let tree = tmp.path().join("tree");
    let mut rng = Rng::new(82);
    for i in 0..60 {
        write_file(&tree.join(format!("f{i:02}")), &rng.bytes(40_000), 0o644);
    }
    let expected = garbage(&repo, &tree, |t| {
        for i in (0..60).step_by(3) {
            std::fs::remove_file(t.join(format!("f{i:02}"))).unwrap();
        }
    });
    let filler = fill_leaving(&mnt, 200_000);

    let e = cairn(&repo, &["gc"]).code(1).one_line_error();
    assert!(
        e.contains("ran out of space copying live chunks forward")
            && e.contains("MiB (")
            && e.contains("bytes) free for its copies")
            && e.contains("--reclaim"),
        "{e}"
    );
    cairn(&repo, &["check", "--read-data"]).ok();
    restores(&repo, &expected, &tmp.path().join("out"));

    std::fs::remove_file(filler).unwrap();
    let j = cairn(&repo, &["--json", "gc"]).ok().json();
    assert!(j["containers_deleted"].as_u64().unwrap() > 0, "{j}");
    cairn(&repo, &["check", "--read-data"]).ok();
    restores(&repo, &expected, &tmp.path().join("out2"));
}

/// A disk with no byte free: the collection cannot even reserve its ids.
/// One line says so and what to do; nothing is deleted or lost.
#[test]
fn gc_on_a_disk_with_no_room_at_all_is_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    let mnt = tmp.path().join("mnt");
    let Some(_mount) = Tmpfs::mount(&mnt, "8m") else {
        return;
    };
    let repo = mnt.join("repo");
    let tree = tmp.path().join("tree");
    let mut rng = Rng::new(83);
    for i in 0..20 {
        write_file(&tree.join(format!("f{i:02}")), &rng.bytes(40_000), 0o644);
    }
    let expected = garbage(&repo, &tree, |t| {
        for i in (0..20).step_by(2) {
            std::fs::remove_file(t.join(format!("f{i:02}"))).unwrap();
        }
    });
    let before = container_bytes(&repo);
    let _filler = fill_leaving(&mnt, 0);
    let e = cairn(&repo, &["gc"]).code(1).one_line_error();
    assert!(
        e.contains("garbage collection has no room for")
            && e.contains("nothing was deleted")
            && e.contains("Free some space"),
        "{e}"
    );
    assert_eq!(container_bytes(&repo), before);
    cairn(&repo, &["check", "--read-data"]).ok();
    restores(&repo, &expected, &tmp.path().join("out"));
}
