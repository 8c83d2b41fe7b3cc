//! The key cache against both stores, each test in a scope of its own.

use std::ffi::OsString;
use std::time::Duration;

use super::*;

/// A cache in a fresh scope, on `store` (`keyring` or `file`).
fn cache(store: &str, scope: &str) -> KeyCache {
    let scope = format!("unit-{scope}-{}", std::process::id());
    let store = store.to_string();
    KeyCache::from_env(&move |name: &str| match name {
        KEY_CACHE_ENV => Some(OsString::from(&store)),
        KEY_CACHE_SCOPE_ENV => Some(OsString::from(&scope)),
        _ => None,
    })
    .unwrap()
}

fn key(byte: u8) -> MasterKey {
    MasterKey::from_bytes([byte; 32])
}

/// Both stores where the kernel keyring works; the file store alone where
/// it is refused (the keyring's own error is tested then).
fn stores() -> Vec<&'static str> {
    match KeyringStore::open() {
        Ok(_) => vec!["keyring", "file"],
        Err(_) => vec!["file"],
    }
}

#[test]
fn put_get_forget_round_trip() {
    for store in stores() {
        let c = cache(store, "round");
        assert!(c.get("aa11").is_none(), "{store}");
        c.put("aa11", &key(7), Duration::from_secs(60)).unwrap();
        assert!(c.get("aa11") == Some(key(7)), "{store}");
        assert!(c.get("bb22").is_none(), "{store}: another repository");
        assert!(c.forget("aa11").unwrap(), "{store}");
        assert!(c.get("aa11").is_none(), "{store}");
        assert!(!c.forget("aa11").unwrap(), "{store}");
    }
}

#[test]
fn scopes_do_not_see_each_other() {
    for store in stores() {
        let a = cache(store, "scope-a");
        let b = cache(store, "scope-b");
        a.put("cc33", &key(1), Duration::from_secs(60)).unwrap();
        assert!(b.get("cc33").is_none(), "{store}");
        assert_eq!(b.forget_all().unwrap(), 0, "{store}");
        assert!(a.get("cc33").is_some(), "{store}");
        a.put("dd44", &key(2), Duration::from_secs(60)).unwrap();
        assert_eq!(a.forget_all().unwrap(), 2, "{store}");
        assert!(
            a.get("cc33").is_none() && a.get("dd44").is_none(),
            "{store}"
        );
    }
}

#[test]
fn an_entry_expires() {
    for store in stores() {
        let c = cache(store, "expiry");
        c.put("ee55", &key(3), Duration::from_secs(1)).unwrap();
        assert!(c.get("ee55").is_some(), "{store}");
        std::thread::sleep(Duration::from_millis(2100));
        assert!(c.get("ee55").is_none(), "{store}");
    }
}

#[test]
fn lifetimes_and_names_are_checked() {
    let c = cache("file", "limits");
    assert!(c.put("ff66", &key(4), Duration::from_millis(500)).is_err());
    assert!(c.put("ff66", &key(4), MAX_LIFETIME * 2).is_err());
    assert!(c.put("../x", &key(4), Duration::from_secs(5)).is_err());
    assert!(c.get("../x").is_none());
    let bad_scope = KeyCache::from_env(&|name: &str| {
        (name == KEY_CACHE_SCOPE_ENV).then(|| OsString::from("a/b"))
    });
    assert!(bad_scope.is_err());
    let bad_store =
        KeyCache::from_env(&|name: &str| (name == KEY_CACHE_ENV).then(|| OsString::from("disk")));
    assert!(bad_store.is_err());
}

#[test]
fn entries_decode_only_for_their_repository_and_time() {
    let payload = entry::encode("ab", &key(9), 100);
    assert!(entry::decode(&payload, "ab", 99) == Some(key(9)));
    assert!(entry::decode(&payload, "ab", 100).is_none(), "expired");
    assert!(entry::decode(&payload, "abc", 99).is_none(), "other id");
    assert!(
        entry::decode(&payload[1..], "ab", 99).is_none(),
        "bad magic"
    );
    assert!(entry::decode(&payload[..30], "ab", 99).is_none(), "short");
}

#[test]
fn the_file_store_refuses_a_directory_on_disk() {
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let on_disk = dir.path().join("keys");
    // /var/tmp is on a disk here; where it happens to be a
    // tmpfs the store is accepted, and that is right too.
    let is_tmpfs = nix::sys::statfs::statfs(dir.path())
        .map(|s| s.filesystem_type() == nix::sys::statfs::TMPFS_MAGIC)
        .unwrap();
    let opened = FileStore::open(Some(on_disk.into_os_string()));
    assert_eq!(opened.is_ok(), is_tmpfs);
}

#[test]
fn the_file_store_refuses_a_directory_others_can_read() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let err = FileStore::open(Some(dir.path().as_os_str().to_owned()))
        .err()
        .unwrap();
    assert!(err.to_string().contains("mode 0700"), "{err}");
}
