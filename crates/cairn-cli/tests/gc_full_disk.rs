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

/// A repository on an 8 MiB tmpfs (`mnt`), its source tree outside it.
/// The tmpfs is unmounted (field order) before the directory is removed.
struct SmallDisk {
    _mount: Tmpfs,
    mnt: PathBuf,
    repo: PathBuf,
    tree: PathBuf,
    tmp: tempfile::TempDir,
}

impl SmallDisk {
    /// `None` where a tmpfs cannot be mounted (the test was skipped).
    fn new() -> Option<SmallDisk> {
        let tmp = tempfile::tempdir().unwrap();
        let mnt = tmp.path().join("mnt");
        let mount = Tmpfs::mount(&mnt, "8m")?;
        Some(SmallDisk {
            _mount: mount,
            repo: mnt.join("repo"),
            tree: tmp.path().join("tree"),
            mnt,
            tmp,
        })
    }

    /// A scratch path outside the small disk.
    fn outside(&self, name: &str) -> PathBuf {
        self.tmp.path().join(name)
    }

    /// `n` files `dir/fNN` of 40 kB of random bytes in the source tree.
    fn small_files(&self, rng: &mut Rng, dir: &str, n: usize) {
        for i in 0..n {
            let name = format!("{dir}/f{i:02}");
            write_file(&self.tree.join(name), &rng.bytes(40_000), 0o644);
        }
    }
}

/// Removes every `step`th of the `n` files `dir/fNN` of `tree`.
fn remove_every(tree: &Path, dir: &str, n: usize, step: usize) {
    for i in (0..n).step_by(step) {
        std::fs::remove_file(tree.join(format!("{dir}/f{i:02}"))).unwrap();
    }
}

/// A full disk with room for an index delta but not for one copied
/// container: the whole dead containers go first, and the collection then
/// completes in the space they freed.
#[test]
fn gc_on_a_full_disk_deletes_whole_dead_containers_first() {
    let Some(disk) = SmallDisk::new() else {
        return;
    };
    let (repo, mnt) = (&disk.repo, &disk.mnt);
    let mut rng = Rng::new(81);
    // A large file that dies whole, beside small files of which half die.
    write_file(&disk.tree.join("big"), &rng.bytes(2_500_000), 0o644);
    disk.small_files(&mut rng, "small", 40);
    let expected = garbage(repo, &disk.tree, |t| {
        std::fs::remove_file(t.join("big")).unwrap();
        remove_every(t, "small", 40, 2);
    });
    let before = container_bytes(repo);
    // Room for the pending list and an index delta, not for a container
    // (256 KiB) nor for a new index generation and its checkpoint.
    let _filler = fill_leaving(mnt, 64 << 10);

    let j = cairn(repo, &["--json", "gc"]).ok().json();
    assert!(
        j["dead_containers_deleted_first"].as_u64().unwrap() > 0,
        "{j}"
    );
    assert!(j["containers_written"].as_u64().unwrap() > 0, "{j}");
    assert!(container_bytes(repo) < before / 2, "{j}");
    cairn(repo, &["check", "--read-data"]).ok();
    restores(repo, &expected, &disk.outside("out"));
}

/// No whole dead container and no room for the copies: one line says how
/// much space the copies need; nothing is lost, and with the space freed
/// the next collection completes.
#[test]
fn gc_out_of_space_says_how_much_it_needs() {
    let Some(disk) = SmallDisk::new() else {
        return;
    };
    let (repo, mnt) = (&disk.repo, &disk.mnt);
    disk.small_files(&mut Rng::new(82), ".", 60);
    let expected = garbage(repo, &disk.tree, |t| remove_every(t, ".", 60, 3));
    let filler = fill_leaving(mnt, 200_000);

    let e = cairn(repo, &["gc"]).code(1).one_line_error();
    assert!(
        e.contains("ran out of space copying live chunks forward")
            && e.contains("MiB (")
            && e.contains("bytes) free for its copies")
            && e.contains("--reclaim"),
        "{e}"
    );
    cairn(repo, &["check", "--read-data"]).ok();
    restores(repo, &expected, &disk.outside("out"));

    std::fs::remove_file(filler).unwrap();
    let j = cairn(repo, &["--json", "gc"]).ok().json();
    assert!(j["containers_deleted"].as_u64().unwrap() > 0, "{j}");
    cairn(repo, &["check", "--read-data"]).ok();
    restores(repo, &expected, &disk.outside("out2"));
}

/// A disk with no byte free: the collection cannot even reserve its ids.
/// One line says so and what to do; nothing is deleted or lost.
#[test]
fn gc_on_a_disk_with_no_room_at_all_is_one_line() {
    let Some(disk) = SmallDisk::new() else {
        return;
    };
    let (repo, mnt) = (&disk.repo, &disk.mnt);
    disk.small_files(&mut Rng::new(83), ".", 20);
    let expected = garbage(repo, &disk.tree, |t| remove_every(t, ".", 20, 2));
    let before = container_bytes(repo);
    let _filler = fill_leaving(mnt, 0);
    let e = cairn(repo, &["gc"]).code(1).one_line_error();
    assert!(
        e.contains("garbage collection has no room for")
            && e.contains("nothing was deleted")
            && e.contains("Free some space"),
        "{e}"
    );
    assert_eq!(container_bytes(repo), before);
    cairn(repo, &["check", "--read-data"]).ok();
    restores(repo, &expected, &disk.outside("out"));
}
