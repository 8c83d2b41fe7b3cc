//! Encrypted repositories from the command line (issue 13; docs/security.md,
//! "Commands"): `init --encryption`, where passwords come from and in which
//! order, the errors of a wrong or missing one, `cairn key list|add|remove|
//! passwd`, and that a clear repository never asks for a password.

mod common;

use std::fs;
use std::path::{Path, PathBuf};

use common::*;

/// A temporary directory with a small source tree in it.
struct Setup {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    repo: PathBuf,
    src: PathBuf,
}

fn setup(seed: u64) -> Setup {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().to_path_buf();
    let src = root.join("tree");
    let mut rng = Rng::new(seed);
    build_sample_tree(&src, &mut rng);
    Setup {
        repo: root.join("repo"),
        _tmp: tmp,
        root,
        src,
    }
}

/// An encrypted repository (password `secret`) holding one backup of the tree.
fn backed_up(seed: u64, algorithm: &str) -> Setup {
    let t = setup(seed);
    init_encrypted(&t.repo, algorithm, "secret").ok();
    cairn_pw(&t.repo, "secret", &["backup", "-q", s(&t.src)]).ok();
    t
}

fn key_ids(repo: &Path, password: &str) -> Vec<(String, bool)> {
    cairn_pw(repo, password, &["key", "list", "--json"])
        .ok()
        .json()
        .as_array()
        .expect("key list --json is an array")
        .iter()
        .map(|k| {
            (
                k["id"].as_str().unwrap().to_string(),
                k["current"].as_bool().unwrap(),
            )
        })
        .collect()
}

fn opens(repo: &Path, password: &str) -> bool {
    cairn_pw(repo, password, &["snapshots", "--json"]).code == Some(0)
}

fn write_password(dir: &Path, name: &str, password: &str) -> PathBuf {
    let path = dir.join(name);
    fs::write(&path, format!("{password}\n")).unwrap();
    path
}

#[test]
fn both_algorithms_back_up_restore_and_check() {
    for (seed, algorithm) in [(1, "aes-256-gcm"), (2, "chacha20poly1305")] {
        let t = setup(seed);
        let tree = Manifest::capture(&t.src);
        let out = init_encrypted(&t.repo, algorithm, "secret")
            .ok()
            .stdout_str();
        assert!(out.contains("created cairn repository"), "{out}");
        assert!(t.repo.join("keys").read_dir().unwrap().count() == 1);
        let config = fs::read(t.repo.join("config")).unwrap();
        assert!(String::from_utf8_lossy(&config).contains(algorithm));

        cairn_pw(&t.repo, "secret", &["backup", "-q", s(&t.src)]).ok();
        let target = t.root.join("out");
        cairn_pw(
            &t.repo,
            "secret",
            &["restore", "latest", "--target", s(&target)],
        )
        .ok();
        assert_tree_matches(&tree, &target.join("tree"));
        cairn_pw(&t.repo, "secret", &["check", "--read-data"]).ok();
        let json = cairn_pw(&t.repo, "secret", &["stats", "--json"]).ok();
        assert!(json.json().is_object());
    }
}

#[test]
fn a_wrong_or_missing_password_is_one_line() {
    let t = backed_up(3, "chacha20poly1305");
    for args in [
        &["snapshots"][..],
        &["ls", "latest"],
        &["backup", s(&t.src)],
        &["check"],
        &["key", "list"],
    ] {
        let e = cairn_pw(&t.repo, "not the password", args).one_line_error();
        assert!(e.contains("wrong password"), "{args:?}: {e}");
        // No password anywhere and no terminal to ask on.
        let e = cairn_with_env(&t.repo, args, &[]).one_line_error();
        assert!(
            e.contains(
                "no password given: use --password-file, CAIRN_PASSWORD or CAIRN_PASSWORD_COMMAND"
            ),
            "{args:?}: {e}"
        );
    }
    // The wrong password changed nothing.
    assert_eq!(snapshots_pw(&t.repo, "secret").len(), 1);
}

fn snapshots_pw(repo: &Path, password: &str) -> Vec<serde_json::Value> {
    cairn_pw(repo, password, &["snapshots", "--json"])
        .ok()
        .json()
        .as_array()
        .unwrap()
        .clone()
}

#[test]
fn passwords_come_from_a_file_or_a_command_in_order() {
    let t = backed_up(4, "aes-256-gcm");
    let good = write_password(&t.root, "good", "secret");
    let bad = write_password(&t.root, "bad", "wrong");
    let snapshots = ["snapshots", "--json"];

    // --password-file, and CAIRN_PASSWORD_FILE for it.
    let with_flag = ["--password-file", s(&good), "snapshots", "--json"];
    cairn_with_env(&t.repo, &with_flag, &[]).ok();
    cairn_with_env(&t.repo, &snapshots, &[("CAIRN_PASSWORD_FILE", s(&good))]).ok();
    // Set but empty, a password variable counts as unset.
    cairn_with_env(
        &t.repo,
        &snapshots,
        &[
            ("CAIRN_PASSWORD_FILE", ""),
            ("CAIRN_PASSWORD", "secret"),
            ("CAIRN_PASSWORD_COMMAND", ""),
        ],
    )
    .ok();
    let e = cairn_with_env(&t.repo, &["--password-file", "", "snapshots"], &[]).one_line_error();
    assert!(e.contains("password file"), "{e}");
    // The file comes before CAIRN_PASSWORD, which comes before the command.
    cairn_with_env(&t.repo, &with_flag, &[("CAIRN_PASSWORD", "wrong")]).ok();
    let with_bad = ["--password-file", s(&bad), "snapshots"];
    let e = cairn_with_env(&t.repo, &with_bad, &[("CAIRN_PASSWORD", "secret")]).one_line_error();
    assert!(e.contains("wrong password"), "{e}");
    cairn_with_env(
        &t.repo,
        &snapshots,
        &[
            ("CAIRN_PASSWORD", "secret"),
            ("CAIRN_PASSWORD_COMMAND", "echo wrong"),
        ],
    )
    .ok();

    // CAIRN_PASSWORD_COMMAND: its first line of output.
    let cmd = format!("cat {}", s(&good));
    cairn_with_env(&t.repo, &snapshots, &[("CAIRN_PASSWORD_COMMAND", &cmd)]).ok();
    let e = cairn_with_env(&t.repo, &snapshots, &[("CAIRN_PASSWORD_COMMAND", "exit 3")])
        .one_line_error();
    assert!(e.contains("CAIRN_PASSWORD_COMMAND"), "{e}");
    let missing = t.root.join("missing");
    let e = cairn_with_env(&t.repo, &["--password-file", s(&missing), "snapshots"], &[])
        .one_line_error();
    assert!(e.contains("password file"), "{e}");
}

#[test]
fn a_clear_repository_never_asks_for_a_password() {
    let t = setup(5);
    // A password command that leaves a mark if it is ever run.
    let mark = t.root.join("asked");
    let ask = format!("touch {} && echo secret", s(&mark));
    let env = [("CAIRN_PASSWORD_COMMAND", ask.as_str())];
    cairn_with_env(&t.repo, &["init", "--encryption", "none"], &env).ok();
    cairn_with_env(&t.repo, &["backup", "-q", s(&t.src)], &env).ok();
    cairn_with_env(&t.repo, &["snapshots"], &env).ok();
    let target = t.root.join("out");
    cairn_with_env(&t.repo, &["restore", "latest", "-t", s(&target)], &env).ok();
    cairn_with_env(&t.repo, &["check"], &env).ok();
    assert!(
        !mark.exists(),
        "a clear repository ran the password command"
    );
    // No password variable at all.
    cairn_with_env(&t.repo, &["ls", "latest"], &[]).ok();

    // `key` on a clear repository says it has no keys.
    let e = cairn_pw(&t.repo, "secret", &["key", "list"]).one_line_error();
    assert!(e.contains("not encrypted"), "{e}");
}

#[test]
fn key_add_gives_a_second_password() {
    let t = backed_up(6, "aes-256-gcm");
    let first = key_ids(&t.repo, "secret");
    assert_eq!(first.len(), 1);
    assert!(first[0].1, "the key that opened is marked");

    let new = write_password(&t.root, "new", "second");
    let mut add = vec!["key", "add", "--new-password-file", s(&new)];
    add.extend(TINY_KDF);
    let out = cairn_pw(&t.repo, "secret", &add).ok().stdout_str();
    assert!(out.starts_with("added key "), "{out}");
    for pw in ["secret", "second"] {
        let keys = key_ids(&t.repo, pw);
        assert_eq!(keys.len(), 2);
        let current: Vec<_> = keys.iter().filter(|k| k.1).collect();
        assert_eq!(current.len(), 1, "{keys:?}");
        assert_eq!(current[0].0 == first[0].0, pw == "secret", "{keys:?}");
        assert!(opens(&t.repo, pw));
    }
    assert!(!opens(&t.repo, "third"));
    let human = cairn_pw(&t.repo, "second", &["key", "list"])
        .ok()
        .stdout_str();
    assert_eq!(human.lines().count(), 3, "{human}");
    assert!(human.contains("argon2id m=8KiB t=1 p=1"), "{human}");

    // No new password and no terminal: refused, nothing written.
    let e = cairn_pw(&t.repo, "secret", &["key", "add"]).one_line_error();
    assert!(e.contains("no new password given"), "{e}");
    // A wrong current password adds nothing.
    let e = cairn_pw(&t.repo, "wrong", &add).one_line_error();
    assert!(e.contains("wrong password"), "{e}");
    assert_eq!(key_ids(&t.repo, "secret").len(), 2);
}

#[test]
fn key_remove_refuses_the_last_key() {
    let t = backed_up(7, "chacha20poly1305");
    let only = key_ids(&t.repo, "secret")[0].0.clone();
    let e = cairn_pw(&t.repo, "secret", &["key", "remove", &only]).one_line_error();
    assert!(e.contains("last one"), "{e}");
    assert!(opens(&t.repo, "secret"));

    let new = write_password(&t.root, "new", "second");
    let mut add = vec!["key", "add", "--new-password-file", s(&new)];
    add.extend(TINY_KDF);
    cairn_pw(&t.repo, "secret", &add).ok();
    let e = cairn_pw(&t.repo, "secret", &["key", "remove", "nothex"]).one_line_error();
    assert!(e.contains("no key file nothex"), "{e}");
    // Removing the first key (by a prefix) leaves only the second password.
    let out = cairn_pw(&t.repo, "second", &["key", "remove", &only[..8]])
        .ok()
        .stdout_str();
    assert_eq!(out.trim(), format!("removed key {only}"));
    assert!(!opens(&t.repo, "secret"));
    assert!(opens(&t.repo, "second"));
    let left = key_ids(&t.repo, "second");
    assert_eq!(left.len(), 1);
    let e = cairn_pw(&t.repo, "second", &["key", "remove", &left[0].0]).one_line_error();
    assert!(e.contains("last one"), "{e}");
}

/// The key file the password in use opened is not removed without
/// `--force` (issue 30, defect 4): the password would stop working.
#[test]
fn key_remove_refuses_the_key_in_use_unless_forced() {
    let t = backed_up(9, "aes-256-gcm");
    let first = key_ids(&t.repo, "secret")[0].0.clone();
    let new = write_password(&t.root, "new", "second");
    let mut add = vec!["key", "add", "--new-password-file", s(&new)];
    add.extend(TINY_KDF);
    cairn_pw(&t.repo, "secret", &add).ok();

    let e = cairn_pw(&t.repo, "secret", &["key", "remove", &first[..8]]).one_line_error();
    assert!(e.contains("the password in use opened"), "{e}");
    assert!(e.contains("--force"), "{e}");
    assert!(
        opens(&t.repo, "secret"),
        "the refused removal removed the key"
    );
    assert_eq!(key_ids(&t.repo, "secret").len(), 2);

    let out = cairn_pw(
        &t.repo,
        "secret",
        &["key", "remove", "--force", &first[..8]],
    )
    .ok()
    .stdout_str();
    assert_eq!(out.trim(), format!("removed key {first}"));
    assert!(!opens(&t.repo, "secret"));
    assert!(opens(&t.repo, "second"));
}

#[test]
fn key_passwd_replaces_the_password() {
    let t = backed_up(8, "aes-256-gcm");
    let before = key_ids(&t.repo, "secret");
    let new = write_password(&t.root, "new", "changed");
    let mut passwd = vec!["key", "passwd", "--new-password-file", s(&new)];
    passwd.extend(TINY_KDF);
    let out = cairn_pw(&t.repo, "secret", &passwd).ok().stdout_str();
    assert!(out.contains(&before[0].0), "{out}");
    assert!(!opens(&t.repo, "secret"));
    assert!(opens(&t.repo, "changed"));
    // The same key file, under the same name.
    assert_eq!(key_ids(&t.repo, "changed"), before);
    assert_eq!(t.repo.join("keys").read_dir().unwrap().count(), 1);
    let target = t.root.join("out");
    cairn_pw(
        &t.repo,
        "changed",
        &["restore", "latest", "--target", s(&target)],
    )
    .ok();

    // `passwd ID` changes another key file's password.
    let second = write_password(&t.root, "second", "second");
    let mut add = vec!["key", "add", "--new-password-file", s(&second)];
    add.extend(TINY_KDF);
    cairn_pw(&t.repo, "changed", &add).ok();
    let other = key_ids(&t.repo, "second")
        .into_iter()
        .find(|k| k.1)
        .unwrap()
        .0;
    let third = write_password(&t.root, "third", "third");
    let mut passwd = vec!["key", "passwd", &other, "--new-password-file", s(&third)];
    passwd.extend(TINY_KDF);
    cairn_pw(&t.repo, "changed", &passwd).ok();
    assert!(!opens(&t.repo, "second"));
    assert!(opens(&t.repo, "third"));
    assert!(opens(&t.repo, "changed"));
}

#[test]
fn init_refuses_bad_encryption_options_before_creating_anything() {
    let t = setup(9);
    for (args, want) in [
        (
            &["init", "--encryption", "rot13"][..],
            "invalid value 'rot13' for '--encryption",
        ),
        (
            &[
                "init",
                "--encryption",
                "aes-256-gcm",
                "--kdf-memory-kib",
                "8",
                "--kdf-passes",
                "0",
            ],
            "Argon2id parameters out of range",
        ),
    ] {
        let e = cairn_pw(&t.repo, "secret", args).one_line_error();
        assert!(e.contains(want), "{args:?}: {e}");
        assert!(!t.repo.exists(), "{args:?} created the repository");
    }
    let e = cairn_with_env(&t.repo, &["init", "--encryption", "aes-256-gcm"], &[]).one_line_error();
    assert!(e.contains("no password given"), "{e}");
    assert!(!t.repo.exists());
    // An encrypted repository is not created twice.
    init_encrypted(&t.repo, "aes-256-gcm", "secret").ok();
    let e = init_encrypted(&t.repo, "aes-256-gcm", "secret").one_line_error();
    assert!(e.contains("already holds a cairn repository"), "{e}");
}

#[test]
fn new_repositories_are_encrypted_by_default_and_the_options_are_documented() {
    let t = setup(10);
    let help = cairn_with_env(&t.repo, &["--help"], &[]).ok().stdout_str();
    assert!(help.contains("key "), "{help}");
    assert!(help.contains("--password-file"), "{help}");
    let help = cairn_with_env(&t.repo, &["init", "--help"], &[])
        .ok()
        .stdout_str();
    for shown in ["--encryption", "--kdf-memory-kib", "--kdf-passes"] {
        assert!(help.contains(shown), "{shown}: {help}");
    }
    let man = t.root.join("man");
    cairn_with_env(&t.repo, &["man", "--out", s(&man)], &[]).ok();
    assert!(man.join("cairn-key.1").exists());
    let init_page = fs::read_to_string(man.join("cairn-init.1")).unwrap();
    assert!(init_page.contains("encryption"), "{init_page}");
    // `init` and a first `backup` both create encrypted repositories.
    let mut args = vec!["init"];
    args.extend(TINY_KDF);
    cairn_pw(&t.repo, "secret", &args).ok();
    let config = fs::read(t.repo.join("config")).unwrap();
    assert!(String::from_utf8_lossy(&config).contains("\"encryption\":\"aes-256-gcm\""));
    let second = t.root.join("by-backup");
    let mut args = vec!["backup", s(&t.src)];
    args.extend(TINY_KDF);
    cairn_pw(&second, "secret", &args).ok();
    let config = fs::read(second.join("config")).unwrap();
    assert!(String::from_utf8_lossy(&config).contains("\"sealed\""));
    assert!(!opens(&second, "wrong"));
    assert!(opens(&second, "secret"));
    // Without a password a first backup creates nothing.
    let third = t.root.join("no-password");
    let e = cairn_with_env(&third, &["backup", s(&t.src)], &[]).one_line_error();
    assert!(e.contains("no password given"), "{e}");
    assert!(!third.join("config").exists());
    // `--encryption none` (or CAIRN_ENCRYPTION=none) makes a clear one.
    let clear = t.root.join("clear");
    cairn_with_env(&clear, &["backup", "--encryption", "none", s(&t.src)], &[]).ok();
    let config = fs::read(clear.join("config")).unwrap();
    assert!(!String::from_utf8_lossy(&config).contains("sealed"));
}
