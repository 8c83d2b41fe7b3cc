//! Files unchanged since the parent snapshot are not read again (issue 12):
//! the shortcut needs size, mtime, ctime and inode to match, never applies
//! to `--stdin`, and `--force` turns it off. Every snapshot restores
//! byte-identically either way.

mod common;

use common::*;

/// The first object in `v` (depth-first) that has `key`.
fn stats_with<'a>(v: &'a serde_json::Value, key: &str) -> &'a serde_json::Value {
    fn find<'a>(v: &'a serde_json::Value, key: &str) -> Option<&'a serde_json::Value> {
        match v {
            serde_json::Value::Object(m) if m.contains_key(key) => Some(v),
            serde_json::Value::Object(m) => m.values().find_map(|x| find(x, key)),
            serde_json::Value::Array(a) => a.iter().find_map(|x| find(x, key)),
            _ => None,
        }
    }
    find(v, key).unwrap_or_else(|| panic!("no {key} in {v}"))
}

fn backup(repo: &std::path::Path, args: &[&str]) -> serde_json::Value {
    let mut all = vec!["backup", "--json"];
    all.extend_from_slice(args);
    let json = cairn(repo, &all).ok().json();
    stats_with(&json, "files_unmodified").clone()
}

fn restored(repo: &std::path::Path, dir: &std::path::Path, name: &str) -> std::path::PathBuf {
    let target = dir.join(format!("restore-{name}"));
    cairn(repo, &["restore", "latest", "--target", s(&target)]).ok();
    target
}

/// Lets the clock pass the racy margin (`backup/parent.rs`): an entry whose
/// ctime is within 20 ms of the parent backup's start is read again.
fn settle() {
    std::thread::sleep(std::time::Duration::from_millis(60));
}

#[test]
fn unchanged_files_are_not_read_and_changed_ones_are() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    let src = dir.path().join("src");
    let mut rng = Rng::new(12);
    build_random_files(&src, &mut rng, 40, 3000);
    settle();
    let first = backup(&repo, &[s(&src)]);
    assert_eq!(first["files_unmodified"], 0);
    assert_eq!(first["files_new"], 40);

    let again = backup(&repo, &[s(&src)]);
    assert_eq!(again["files_unmodified"], 40, "{again}");
    assert_eq!(again["new_chunks"], 0, "{again}");
    assert_tree_matches(
        &Manifest::capture(&src),
        &restored(&repo, dir.path(), "a").join("src"),
    );

    // Same size and mtime, different bytes: only ctime tells. Read again.
    let files = files_under(&src);
    let victim = &files[3];
    let meta = std::fs::metadata(victim).unwrap();
    let mut bytes = std::fs::read(victim).unwrap();
    bytes[0] ^= 0xff;
    std::fs::write(victim, &bytes).unwrap();
    let mtime = filetime::FileTime::from_last_modification_time(&meta);
    filetime::set_file_mtime(victim, mtime).unwrap();
    assert_eq!(std::fs::metadata(victim).unwrap().len(), meta.len());
    let third = backup(&repo, &[s(&src)]);
    assert_eq!(third["files_changed"], 1, "{third}");
    assert_eq!(third["files_unmodified"], 39, "{third}");
    assert_tree_matches(
        &Manifest::capture(&src),
        &restored(&repo, dir.path(), "b").join("src"),
    );

    // --force reads everything; --parent names the comparison explicitly.
    let forced = backup(&repo, &["--force", s(&src)]);
    assert_eq!(forced["files_unmodified"], 0, "{forced}");
    let ids = snapshot_ids(&repo);
    let named = backup(&repo, &["--parent", &ids[0][..8], s(&src)]);
    assert_eq!(named["parent"], ids[0].as_str(), "{named}");
    assert_eq!(named["files_changed"], 1, "{named}");
}

/// A stream has no mtime, ctime or inode: two `--stdin` backups of the
/// same name but different bytes must store both contents.
#[test]
fn stdin_is_always_read() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    for (i, text) in [
        b"first stream".as_slice(),
        b"second stream",
        b"third stream",
    ]
    .iter()
    .enumerate()
    {
        let out = cairn_stdin(
            &repo,
            &["backup", "--stdin", "--stdin-name", "db.sql", "--json"],
            text,
        )
        .ok()
        .json();
        assert_eq!(
            stats_with(&out, "files_unmodified")["files_unmodified"],
            0,
            "run {i}"
        );
        let cat = cairn(&repo, &["cat", "latest", "db.sql"]).ok();
        assert_eq!(cat.stdout, *text, "run {i}");
    }
}

/// An unchanged directory is not read again (its names are the parent
/// listing's); a directory that gained, lost or renamed an entry is.
#[test]
fn a_directory_that_changed_is_listed_again() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    let src = dir.path().join("src");
    let mut rng = Rng::new(5);
    build_random_files(&src, &mut rng, 30, 2000);
    settle();
    backup(&repo, &[s(&src)]);
    let files = files_under(&src);
    std::fs::write(files[0].parent().unwrap().join("added.txt"), b"new file").unwrap();
    std::fs::remove_file(&files[1]).unwrap();
    std::fs::rename(&files[2], files[2].with_extension("moved")).unwrap();
    let again = backup(&repo, &[s(&src)]);
    assert_eq!(again["files_new"], 2, "added and renamed: {again}");
    assert_tree_matches(
        &Manifest::capture(&src),
        &restored(&repo, dir.path(), "a").join("src"),
    );
}

/// A parent that left paths out (an exclude, an unreadable file) does not
/// name every entry of its directories: the next backup lists them all.
#[test]
fn names_left_out_of_the_parent_are_found_again() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("d")).unwrap();
    std::fs::write(src.join("d/keep.txt"), b"kept").unwrap();
    std::fs::write(src.join("d/skip.log"), b"left out once").unwrap();
    settle();
    let first = backup(&repo, &["--exclude", "*.log", s(&src)]);
    assert_eq!(
        first["listings_complete"],
        serde_json::Value::Null,
        "{first}"
    );
    let again = backup(&repo, &[s(&src)]);
    assert_eq!(again["files_new"], 1, "{again}");
    assert_eq!(again["listings_complete"], true, "{again}");
    assert_tree_matches(
        &Manifest::capture(&src),
        &restored(&repo, dir.path(), "a").join("src"),
    );
}
