//! The backup's `FileContent` hook (`backup/file_content.rs`): a file the
//! hook calls stored is recorded by the recipe it names, unread; one it
//! gives a reader for holds the reader's bytes; the rest are read from the
//! file system. The snapshot restores to exactly that, and check passes.

mod common;

use std::collections::HashMap;
use std::fs::{File, Metadata};
use std::io::{self, Cursor};
use std::os::unix::fs::MetadataExt;
use std::sync::Arc;

use cairn_engine::backup::file_content::{FileContent, FileSource};
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
