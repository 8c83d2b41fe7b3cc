//! `cairn unlock --for DURATION` and `cairn lock` (issue 31, friction 6;
//! docs/security.md, "The unlocked-key cache"): after an unlock, commands
//! need no password until the entry expires or `lock` forgets it; a wrong
//! password caches nothing; repositories never share an entry; changing or
//! removing a key forgets it.
//!
//! Each test runs in a key cache scope of its own (`CAIRN_KEY_CACHE_SCOPE`),
//! so it never sees nor clears the user's entries or another test's. The
//! kernel keyring is used where it works (the default), and one test uses
//! the tmpfs file store explicitly, so both stores run here: nothing skips.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::*;

/// A scratch directory with an encrypted repository (password `secret`)
/// holding one backup, and the cache scope of this test.
struct Setup {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    repo: PathBuf,
    scope: String,
    /// Extra environment for every command (the cache store).
    store: Vec<(&'static str, String)>,
}

impl Setup {
    fn new(test: &str) -> Setup {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_path_buf();
        let t = Setup {
            repo: root.join("repo"),
            root,
            _tmp: tmp,
            scope: format!("{test}-{}", std::process::id()),
            store: Vec::new(),
        };
        t.repository(&t.repo);
        t
    }

    /// Creates an encrypted repository at `repo` holding one backup.
    fn repository(&self, repo: &Path) {
        let src = self.root.join("tree");
        if !src.exists() {
            std::fs::create_dir_all(&src).unwrap();
            std::fs::write(src.join("a.txt"), b"some bytes\n").unwrap();
        }
        init_encrypted(repo, "aes-256-gcm", "secret").ok();
        self.run(repo, Some("secret"), &["backup", "-q", s(&src)])
            .ok();
    }

    /// `cairn --repo repo args` in this test's cache scope, with `password`
    /// as `CAIRN_PASSWORD` or no password source at all.
    fn run(&self, repo: &Path, password: Option<&str>, args: &[&str]) -> Run {
        let mut env: Vec<(&str, &str)> = vec![("CAIRN_KEY_CACHE_SCOPE", &self.scope)];
        env.extend(self.store.iter().map(|(k, v)| (*k, v.as_str())));
        if let Some(p) = password {
            env.push(("CAIRN_PASSWORD", p));
        }
        cairn_with_env(repo, args, &env)
    }

    /// `snapshots` with no password source: whether it opened.
    fn opens_without_password(&self, repo: &Path) -> bool {
        let run = self.run(repo, None, &["snapshots", "--json"]);
        if run.code == Some(0) {
            return true;
        }
        let error = run.one_line_error();
        assert!(error.contains("no password given"), "{error}");
        false
    }
}

impl Drop for Setup {
    /// Leaves nothing of this scope behind, even when a test fails.
    fn drop(&mut self) {
        let _ = self.run(&self.repo, None, &["lock", "--all"]);
    }
}

#[test]
fn after_unlock_commands_need_no_password_until_lock() {
    let t = Setup::new("unlock-lock");
    assert!(!t.opens_without_password(&t.repo), "locked at first");
    let out = t
        .run(&t.repo, Some("secret"), &["unlock", "--for", "10m"])
        .ok()
        .stdout_str();
    assert!(out.contains("unlocked repository"), "{out}");
    assert!(t.opens_without_password(&t.repo));
    // A command that reads contents and one that writes, too.
    t.run(&t.repo, None, &["check"]).ok();
    t.run(&t.repo, None, &["backup", "-q", s(&t.root.join("tree"))])
        .ok();
    let out = t.run(&t.repo, None, &["lock"]).ok().stdout_str();
    assert!(out.contains("1 unlocked key forgotten"), "{out}");
    assert!(!t.opens_without_password(&t.repo), "lock forgets at once");
    let out = t.run(&t.repo, None, &["lock"]).ok().stdout_str();
    assert!(out.contains("nothing was unlocked"), "{out}");
}

#[test]
fn the_file_store_works_where_the_keyring_is_not_used() {
    let mut t = Setup::new("file-store");
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let cache_dir = dir.path().join("keys");
    t.store = vec![
        ("CAIRN_KEY_CACHE", "file".to_string()),
        ("CAIRN_KEY_CACHE_DIR", cache_dir.display().to_string()),
    ];
    let out = t
        .run(&t.repo, Some("secret"), &["unlock", "--for", "10m"])
        .ok()
        .stdout_str();
    assert!(
        out.contains(&format!("files in {}", cache_dir.display())),
        "{out}"
    );
    let files: Vec<_> = std::fs::read_dir(&cache_dir).unwrap().collect();
    assert_eq!(files.len(), 1);
    assert!(t.opens_without_password(&t.repo));
    t.run(&t.repo, None, &["lock"]).ok();
    assert_eq!(std::fs::read_dir(&cache_dir).unwrap().count(), 0);
    assert!(!t.opens_without_password(&t.repo));
}

#[test]
fn an_unlock_expires() {
    let t = Setup::new("expiry");
    let unlocked = std::time::Instant::now();
    t.run(&t.repo, Some("secret"), &["unlock", "--for", "2s"])
        .ok();
    assert!(t.opens_without_password(&t.repo));
    std::thread::sleep(Duration::from_millis(3100).saturating_sub(unlocked.elapsed()));
    assert!(!t.opens_without_password(&t.repo), "expired after 2s");
}

#[test]
fn a_wrong_password_unlocks_nothing() {
    let t = Setup::new("wrong");
    let error = t
        .run(&t.repo, Some("not-it"), &["unlock", "--for", "10m"])
        .one_line_error();
    assert!(error.contains("wrong password"), "{error}");
    let error = t
        .run(&t.repo, None, &["unlock", "--for", "10m"])
        .one_line_error();
    assert!(error.contains("no password given"), "{error}");
    assert!(!t.opens_without_password(&t.repo));
    let run = t.run(&t.repo, Some("secret"), &["unlock", "--for", "0s"]);
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert!(run.stderr.contains("from 1s"), "{}", run.stderr);
    assert!(!t.opens_without_password(&t.repo));
}

#[test]
fn repositories_do_not_share_an_unlock() {
    let t = Setup::new("two-repos");
    let other = t.root.join("other");
    t.repository(&other);
    // The same password, and still the other stays locked: entries are
    // the repository's id, not the password's.
    t.run(&t.repo, Some("secret"), &["unlock", "--for", "10m"])
        .ok();
    assert!(t.opens_without_password(&t.repo));
    assert!(!t.opens_without_password(&other));
    t.run(&other, Some("secret"), &["unlock", "--for", "10m"])
        .ok();
    t.run(&other, None, &["lock"]).ok();
    assert!(!t.opens_without_password(&other));
    assert!(
        t.opens_without_password(&t.repo),
        "lock forgets one repository"
    );
    t.run(&other, Some("secret"), &["unlock", "--for", "10m"])
        .ok();
    let out = t.run(&t.repo, None, &["lock", "--all"]).ok().stdout_str();
    assert!(out.contains("2 unlocked keys forgotten"), "{out}");
    assert!(!t.opens_without_password(&t.repo));
    assert!(!t.opens_without_password(&other));
}

#[test]
fn changing_or_removing_a_key_forgets_the_unlock() {
    let t = Setup::new("key-change");
    let new_pw = t.root.join("new-password");
    std::fs::write(&new_pw, "changed\n").unwrap();
    let new_pw = s(&new_pw);
    t.run(&t.repo, Some("secret"), &["unlock", "--for", "10m"])
        .ok();
    let mut passwd = vec!["key", "passwd", "--new-password-file", new_pw];
    passwd.extend(TINY_KDF);
    t.run(&t.repo, Some("secret"), &passwd).ok();
    assert!(!t.opens_without_password(&t.repo), "key passwd forgets it");

    let third_pw = t.root.join("third-password");
    std::fs::write(&third_pw, "third\n").unwrap();
    let mut add = vec!["key", "add", "--new-password-file", s(&third_pw)];
    add.extend(TINY_KDF);
    let added = t.run(&t.repo, Some("changed"), &add).ok().stdout_str();
    let added = added.trim().rsplit(' ').next().unwrap().to_string();
    t.run(&t.repo, Some("changed"), &["unlock", "--for", "10m"])
        .ok();
    t.run(&t.repo, Some("changed"), &["key", "remove", &added])
        .ok();
    assert!(!t.opens_without_password(&t.repo), "key remove forgets it");
}

#[test]
fn a_clear_repository_has_nothing_to_unlock() {
    let t = Setup::new("clear");
    let clear = t.root.join("clear");
    cairn_with_env(&clear, &["init", "--encryption", "none"], &[]).ok();
    let error = t
        .run(&clear, None, &["unlock", "--for", "10m"])
        .one_line_error();
    assert!(error.contains("not encrypted"), "{error}");
    let error = t.run(&t.repo, None, &["lock", "--all", "--bogus"]).stderr;
    assert!(error.contains("--bogus"), "{error}");
}
