//! The backup's `FileContent` hook (`backup/file_content.rs`): a file the
//! hook calls stored is recorded by the recipe it names, unread; one it
//! gives a reader for holds the reader's bytes; the rest are read from the
//! file system; one it gives as pieces keeps its stored chunks unread and
//! chunks only the pieces it reads. The snapshot restores to exactly that,
//! and check passes.

mod common;

use std::collections::HashMap;
use std::fs::{File, Metadata};
use std::io::{self, Cursor};
use std::os::unix::fs::MetadataExt;
use std::sync::Arc;

use cairn_engine::backup::file_content::{FileContent, FileSource, Piece, StoredChunk};
use cairn_engine::random_access::{CacheLimits, RandomAccess};
use cairn_engine::read::{CacheOptions, Reader};
use cairn_engine::{catalog, BackupOptions, Repository};
use cairn_format::dir::{BlobRef, EntryKind};
use common::*;

/// Answers by inode: a stored recipe, bytes to read instead, or nothing.
struct ByInode {
    stored: HashMap<u64, BlobRef>,
    replaced: HashMap<u64, Vec<u8>>,
}

impl FileContent for ByInode {
    fn source(&self, _file: &File, meta: &Metadata) -> io::Result<Option<FileSource>> {
        if let Some(blob) = self.stored.get(&meta.ino()) {
            return Ok(Some(FileSource::Stored(*blob)));
        }
        Ok(self
            .replaced
            .get(&meta.ino())
            .map(|b| FileSource::Read(Box::new(Cursor::new(b.clone())))))
    }
}

/// The content of the one regular file in snapshot `id`.
fn file_blob(repo: &Repository, id: &str) -> BlobRef {
    let snap = catalog::resolve(&**repo.backend(), id).unwrap();
    let mut blob = None;
    let mut reader = Reader::open(repo, CacheOptions::default()).unwrap();
    reader
        .walk(&snap.record, "", &mut |w| {
            if w.entry.kind == EntryKind::File {
                blob = w.entry.content;
            }
            Ok(())
        })
        .unwrap();
    blob.expect("the snapshot's file")
}

#[test]
fn stored_files_are_recorded_unread_and_replaced_ones_hold_the_readers_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(7);
    let mut bytes = |n: usize| -> Vec<u8> { (0..n).map(|_| rng.next() as u8).collect() };
    let repo = Repository::init_local(&dir.path().join("repo"), tiny_config()).unwrap();

    // A first snapshot holds the content the hook will name.
    let first = dir.path().join("first");
    std::fs::create_dir(&first).unwrap();
    let stored_bytes = bytes(3 << 20);
    std::fs::write(first.join("data"), &stored_bytes).unwrap();
    let id = backup(&repo, &first).unwrap();
    let blob = file_blob(&repo, &id);

    // The tree: `stored` is a hole of the stored length (its bytes on
    // disk are not its content), `replaced` is read from the hook,
    // `plain` from the disk.
    let src = dir.path().join("src");
    std::fs::create_dir(&src).unwrap();
    File::create(src.join("stored"))
        .unwrap()
        .set_len(stored_bytes.len() as u64)
        .unwrap();
    std::fs::write(src.join("replaced"), b"not these bytes").unwrap();
    let replacement = bytes(300_000);
    let plain = bytes(200_000);
    std::fs::write(src.join("plain"), &plain).unwrap();
    let ino = |name: &str| std::fs::metadata(src.join(name)).unwrap().ino();
    let hook = ByInode {
        stored: HashMap::from([(ino("stored"), blob)]),
        replaced: HashMap::from([(ino("replaced"), replacement.clone())]),
    };
    let outcome = backup_opts(
        &repo,
        &src,
        BackupOptions {
            file_content: Some(Arc::new(hook)),
            ..Default::default()
        },
    )
    .unwrap();
    assert!(outcome.skipped.is_empty(), "{:?}", outcome.skipped);
    // The stored file's 3 MiB were neither read nor stored again.
    assert!(
        outcome.record.stats.new_stored_bytes < 1 << 20,
        "{}",
        outcome.record.stats.new_stored_bytes
    );

    let expected = dir.path().join("expected");
    std::fs::create_dir(&expected).unwrap();
    std::fs::write(expected.join("stored"), &stored_bytes).unwrap();
    std::fs::write(expected.join("replaced"), &replacement).unwrap();
    std::fs::write(expected.join("plain"), &plain).unwrap();
    assert_restores_as(&repo, &outcome.snapshot_id, "src", &expected);
    assert_check_clean(&repo);
}

#[test]
fn a_stored_recipe_of_another_length_leaves_the_file_out_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let repo = Repository::init_local(&dir.path().join("repo"), tiny_config()).unwrap();
    let first = dir.path().join("first");
    std::fs::create_dir(&first).unwrap();
    std::fs::write(first.join("data"), vec![7u8; 100_000]).unwrap();
    let id = backup(&repo, &first).unwrap();
    let blob = file_blob(&repo, &id);
    let src = dir.path().join("src");
    std::fs::create_dir(&src).unwrap();
    std::fs::write(src.join("short"), b"shorter than the recipe").unwrap();
    let ino = std::fs::metadata(src.join("short")).unwrap().ino();
    let hook = ByInode {
        stored: HashMap::from([(ino, blob)]),
        replaced: HashMap::new(),
    };
    let outcome = backup_opts(
        &repo,
        &src,
        BackupOptions {
            file_content: Some(Arc::new(hook)),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(outcome.skipped.len(), 1, "{:?}", outcome.skipped);
    assert!(
        outcome.skipped[0].contains("not its length"),
        "{:?}",
        outcome.skipped
    );
}

/// Gives one file as pieces: the stored chunks before `cut.0` and from
/// `cut.1` on, and `middle` read between them.
struct Spliced {
    ino: u64,
    before: Vec<StoredChunk>,
    middle: Vec<u8>,
    after: Vec<StoredChunk>,
}

impl FileContent for Spliced {
    fn source(&self, _file: &File, meta: &Metadata) -> io::Result<Option<FileSource>> {
        if meta.ino() != self.ino {
            return Ok(None);
        }
        Ok(Some(FileSource::Pieces(vec![
            Piece::Stored(self.before.clone()),
            Piece::Read(Box::new(Cursor::new(self.middle.clone()))),
            Piece::Stored(self.after.clone()),
        ])))
    }
}

#[test]
fn pieces_keep_stored_chunks_unread_and_chunk_only_the_read_ones() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(11);
    let mut bytes = |n: usize| -> Vec<u8> { (0..n).map(|_| rng.next() as u8).collect() };
    let repo = Repository::init_local(&dir.path().join("repo"), tiny_config()).unwrap();
    let first = dir.path().join("first");
    std::fs::create_dir(&first).unwrap();
    let old = bytes(4 << 20);
    std::fs::write(first.join("data"), &old).unwrap();
    let id = backup(&repo, &first).unwrap();
    let blob = file_blob(&repo, &id);

    // The chunks of the old recipe; those over [1 MiB, 1 MiB + 100 KB)
    // are replaced by 150 KB of new bytes.
    let mut ra = RandomAccess::open(&repo, CacheLimits::default()).unwrap();
    let leaves = ra.leaf_ranges(&blob, 0, blob.size).unwrap();
    assert_eq!(leaves.iter().map(|l| l.size).sum::<u64>(), blob.size);
    assert!(leaves.windows(2).all(|w| w[0].end() == w[1].start));
    let a = leaves.iter().position(|l| l.end() > 1 << 20).unwrap();
    let b = leaves
        .iter()
        .position(|l| l.start >= (1 << 20) + 100_000)
        .unwrap();
    let stored = |l: &[cairn_engine::random_access::Leaf]| {
        l.iter()
            .map(|l| StoredChunk {
                fp: l.fp,
                size: l.size,
            })
            .collect::<Vec<_>>()
    };
    let middle = bytes(150_000);
    let mut expected_bytes = old[..leaves[a].start as usize].to_vec();
    expected_bytes.extend_from_slice(&middle);
    expected_bytes.extend_from_slice(&old[leaves[b].start as usize..]);

    let src = dir.path().join("src");
    std::fs::create_dir(&src).unwrap();
    // On disk: a hole of the file's length (its bytes are not read).
    File::create(src.join("data"))
        .unwrap()
        .set_len(expected_bytes.len() as u64)
        .unwrap();
    let hook = Spliced {
        ino: std::fs::metadata(src.join("data")).unwrap().ino(),
        before: stored(&leaves[..a]),
        middle,
        after: stored(&leaves[b..]),
    };
    let outcome = backup_opts(
        &repo,
        &src,
        BackupOptions {
            file_content: Some(Arc::new(hook)),
            ..Default::default()
        },
    )
    .unwrap();
    assert!(outcome.skipped.is_empty(), "{:?}", outcome.skipped);
    // Only the middle's chunks (and tree nodes, listings) are new.
    let new = outcome.record.stats.new_stored_bytes;
    assert!(new > 150_000 && new < 300_000, "{new}");

    // The new recipe's leaves are the old ones around the middle.
    let spliced = file_blob(&repo, &outcome.snapshot_id);
    assert_eq!(spliced.size, expected_bytes.len() as u64);
    let got = ra.leaf_ranges(&spliced, 0, spliced.size).unwrap();
    let fps = |l: &[cairn_engine::random_access::Leaf]| l.iter().map(|l| l.fp).collect::<Vec<_>>();
    assert_eq!(fps(&got[..a]), fps(&leaves[..a]));
    assert_eq!(
        fps(&got[got.len() - (leaves.len() - b)..]),
        fps(&leaves[b..])
    );

    let expected = dir.path().join("expected");
    std::fs::create_dir(&expected).unwrap();
    std::fs::write(expected.join("data"), &expected_bytes).unwrap();
    assert_restores_as(&repo, &outcome.snapshot_id, "src", &expected);
    assert_check_clean(&repo);
}
