//! LocalBackend specifics: opening, temporaries, truncation, permissions, locks.

mod common;

use cairn_backend::LocalBackend;
use cairn_core::{Backend, Error, LockMode};
use common::TempDir;
use std::fs;

#[test]
fn open_and_create() {
    let dir = TempDir::new();
    let missing = dir.path().join("missing");
    let err = LocalBackend::open(&missing).unwrap_err();
    assert!(err.to_string().contains("missing"), "{err}");
    fs::write(dir.path().join("file"), b"x").unwrap();
    assert!(matches!(
        LocalBackend::open(&dir.path().join("file")),
        Err(Error::InvalidInput(_))
    ));
    assert!(LocalBackend::create(&dir.path().join("file")).is_err());
    let nested = dir.path().join("a/b/repo");
    let b = LocalBackend::create(&nested).unwrap();
    assert_eq!(b.describe(), nested.display().to_string());
    LocalBackend::create(&nested).unwrap();
    LocalBackend::open(&nested).unwrap();
}

#[test]
fn reserved_names_are_rejected() {
    let dir = TempDir::new();
    let b = LocalBackend::create(dir.path()).unwrap();
    for key in ["tmp/x", "locks/repo", "tmp", "locks"] {
        assert!(
            matches!(b.write_atomic(key, b"x"), Err(Error::InvalidInput(_))),
            "{key}"
        );
    }
    assert!(b.list("tmp/").unwrap().is_empty());
}

#[test]
fn clean_temporaries_removes_leftovers() {
    let dir = TempDir::new();
    let b = LocalBackend::create(dir.path()).unwrap();
    assert_eq!(b.clean_temporaries().unwrap(), 0, "no tmp dir yet");
    b.write_atomic("containers/00/0000000000000001", b"data")
        .unwrap();
    let tmp = dir.path().join("tmp");
    assert_eq!(
        fs::read_dir(&tmp).unwrap().count(),
        0,
        "a write left a temporary"
    );
    // Leftovers of writes interrupted before the rename.
    fs::write(tmp.join("123-0-0.tmp"), b"half").unwrap();
    fs::write(tmp.join("123-1-0.tmp"), b"half").unwrap();
    fs::create_dir(tmp.join("odd")).unwrap();
    assert_eq!(b.list("").unwrap(), vec!["containers/00/0000000000000001"]);
    assert_eq!(b.clean_temporaries().unwrap(), 3);
    assert_eq!(fs::read_dir(&tmp).unwrap().count(), 0);
    assert_eq!(b.read("containers/00/0000000000000001").unwrap(), b"data");
}

#[test]
fn truncated_file_gives_a_clear_error() {
    let dir = TempDir::new();
    let b = LocalBackend::create(dir.path()).unwrap();
    let key = "containers/00/0000000000000007";
    b.write_atomic(key, &[9; 100]).unwrap();
    let f = fs::OpenOptions::new()
        .write(true)
        .open(dir.path().join(key))
        .unwrap();
    f.set_len(40).unwrap();
    let err = b.read_at(key, 50, 10).unwrap_err();
    assert!(err.is_corruption(), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains(key) && msg.contains("truncated: wanted 10 bytes at offset 50, size 40"),
        "{msg}"
    );
    assert_eq!(b.read_tail(key, 100).unwrap(), (40, vec![9; 40]));
}

#[test]
fn locks_conflict_across_handles() {
    let dir = TempDir::new();
    let one = LocalBackend::create(dir.path()).unwrap();
    let two = LocalBackend::open(dir.path()).unwrap();
    let guard = one.lock("repo", LockMode::Exclusive, false).unwrap();
    match two.lock("repo", LockMode::Shared, false) {
        Err(Error::Locked(what)) => assert!(what.ends_with("locks/repo is held"), "{what}"),
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("second handle got the lock"),
    }
    drop(guard);
    let _shared = two.lock("repo", LockMode::Shared, false).unwrap();
    let _shared2 = one.lock("repo", LockMode::Shared, false).unwrap();
}

#[cfg(unix)]
#[test]
fn read_only_directory_gives_an_io_error() {
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new();
    let root = dir.path().join("repo");
    let b = LocalBackend::create(&root).unwrap();
    b.write_atomic("config", b"cfg").unwrap();
    fs::set_permissions(&root, fs::Permissions::from_mode(0o555)).unwrap();
    fs::set_permissions(root.join("tmp"), fs::Permissions::from_mode(0o555)).unwrap();
    let privileged = fs::write(root.join("probe"), b"").is_ok();
    let result = b.write_atomic("snapshots/aa", b"snap");
    let _ = fs::set_permissions(root.join("tmp"), fs::Permissions::from_mode(0o755));
    let _ = fs::set_permissions(&root, fs::Permissions::from_mode(0o755));
    if privileged {
        // Root ignores the modes: the test runs again as an unprivileged user.
        return common::rerun_unprivileged("read_only_directory_gives_an_io_error");
    }
    match result {
        Err(Error::Io { context, .. }) => assert!(context.contains("snapshots/aa"), "{context}"),
        other => panic!("expected an Io error, got {other:?}"),
    }
    assert_eq!(b.read("config").unwrap(), b"cfg");
}
