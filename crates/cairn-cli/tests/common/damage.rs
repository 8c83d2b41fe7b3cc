//! The damaged-repository fixture shared by `corruption.rs` (clear
//! repositories) and `corruption_encrypted.rs`: a good repository with two
//! snapshots of a known tree, copies of it to damage, and the damage kinds.
//! A new repository is clear or encrypted by the test file's default
//! (`CLEAR_REPOSITORY_TESTS`).

use std::fs;
use std::path::{Path, PathBuf};

use super::*;

/// Plaintext bytes per sealed block of an encrypted repository, and the
/// bytes a sealed block adds (`docs/security.md`, "Sealed storage").
pub const BLOCK: u64 = 16 * 1024;
pub const SEALED_BLOCK: u64 = BLOCK + 40;

/// The most chunks a damaged sealed block costs with the default chunker.
/// An encrypted repository keys its chunker, so where chunks end differs
/// from run to run: a block's plaintext overlaps at most one chunk per
/// minimum chunk size and one more reaching into it. (A bound of 4 failed
/// CI once, on 5.)
pub fn most_chunks_in_a_block() -> u64 {
    let cairn_core::ChunkerConfig::FastCdc { min, .. } = cairn_core::ChunkerConfig::default()
    else {
        panic!("the default chunker is FastCDC");
    };
    BLOCK / u64::from(min) + 1
}

/// A good repository with two snapshots of a tree and copies to damage.
pub struct Fixture {
    pub tmp: tempfile::TempDir,
    pub good: PathBuf,
    pub tree: PathBuf,
    /// The tree at each snapshot.
    pub m1: Manifest,
    pub m2: Manifest,
    pub id1: String,
    pub id2: String,
}

impl Fixture {
    /// Tree: `a` (5 MiB random: fills container 1), `b` (3 MiB random),
    /// `d/c.txt`, `sub/text.txt`; snapshot 2 changes `sub/text.txt` and adds
    /// `new.txt`.
    pub fn new(seed: u64) -> Fixture {
        let tmp = tempfile::tempdir().unwrap();
        let good = tmp.path().join("good");
        let tree = tmp.path().join("tree");
        let mut rng = Rng::new(seed);
        write_file(&tree.join("a"), &rng.bytes(5 << 20), 0o644);
        write_file(&tree.join("b"), &rng.bytes(3 << 20), 0o644);
        write_file(&tree.join("d/c.txt"), &rng.text(3_000), 0o644);
        write_file(&tree.join("sub/text.txt"), &rng.text(200_000), 0o644);
        randomize_mtimes(&tree, &mut rng);
        let m1 = Manifest::capture(&tree);
        let backup = || {
            cairn(&good, &["backup", "--json", s(&tree)]).ok().json()["id"]
                .as_str()
                .unwrap()
                .to_string()
        };
        let id1 = backup();
        write_file(&tree.join("sub/text.txt"), &rng.text(210_000), 0o644);
        write_file(&tree.join("new.txt"), &rng.text(10_000), 0o644);
        let m2 = Manifest::capture(&tree);
        let id2 = backup();
        cairn(&good, &["check", "--read-data"]).ok();
        Fixture {
            tmp,
            good,
            tree,
            m1,
            m2,
            id1,
            id2,
        }
    }

    /// A fresh copy of the good repository.
    pub fn copy(&self, name: &str) -> PathBuf {
        let dst = self.tmp.path().join(name);
        copy_dir(&self.good, &dst);
        dst
    }

    pub fn out(&self, name: &str) -> PathBuf {
        self.tmp.path().join(format!("out-{name}"))
    }

    /// Restoring `snapshot` either fails cleanly (returned as `Err(run)`) or
    /// succeeds with exactly the expected tree: never wrong bytes with exit 0.
    pub fn restore_is_exact_or_fails(
        &self,
        repo: &Path,
        snapshot: &str,
        expected: &Manifest,
        name: &str,
    ) -> Result<(), Run> {
        let out = self.out(name);
        let r = cairn(repo, &["restore", snapshot, "-t", s(&out)]);
        if r.code == Some(0) {
            assert_tree_matches(expected, &out.join("tree"));
            Ok(())
        } else {
            assert!(r.code.is_some(), "{name}: restore killed by a signal");
            assert!(
                r.stderr.lines().any(|l| l.starts_with("cairn: error: ")),
                "{name}: restore failed without an error line: {}",
                r.stderr
            );
            Err(r)
        }
    }
}

/// The container files of a repository, oldest first.
pub fn containers(repo: &Path) -> Vec<PathBuf> {
    files_under(&repo.join("containers"))
}

pub fn file_name(p: &Path) -> String {
    p.file_name().unwrap().to_string_lossy().into_owned()
}

#[derive(Clone, Copy, Debug)]
pub enum Damage {
    /// Flip the byte at this offset (negative: from the end).
    Flip(i64),
    /// Truncate to this fraction (per mille) of the size.
    Truncate(u64),
    Delete,
    /// Exchange the first two sealed blocks (encrypted repositories).
    SwapBlocks,
}

pub fn apply(path: &Path, d: Damage) {
    match d {
        Damage::Flip(off) => flip_byte(path, off),
        Damage::Truncate(pm) => {
            let len = fs::metadata(path).unwrap().len();
            truncate(path, len * pm / 1000);
        }
        Damage::Delete => fs::remove_file(path).unwrap(),
        Damage::SwapBlocks => {
            let mut b = fs::read(path).unwrap();
            let n = SEALED_BLOCK as usize;
            assert!(
                b.len() > 2 * n,
                "{} has fewer than 3 blocks",
                path.display()
            );
            let (first, rest) = b.split_at_mut(n);
            first.swap_with_slice(&mut rest[..n]);
            fs::write(path, b).unwrap();
        }
    }
}
