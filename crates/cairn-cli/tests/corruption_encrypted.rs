//! The corruption matrix of `corruption.rs`, on an encrypted repository
//! (AES-256-GCM, the default): damage every kind of stored object (flip a
//! byte, truncate, delete, swap or move sealed blocks) and check that cairn
//! notices, says what is damaged, never panics and never restores wrong
//! bytes with exit 0.
//!
//! Every object but `config` and the key files is stored as sealed blocks of
//! 16 KiB of plaintext (`docs/security.md`, "Sealed storage"), so damage is
//! felt at block granularity: a flipped byte costs the chunks that overlap
//! its block, and an authentication failure is handled like corruption.
//!
//! | object | damage | expectation |
//! |---|---|---|
//! | container | a data block | `check --read-data` names container, snapshots and path; restore fails for that file only; `repair index --read-data` salvages the other blocks' chunks |
//! | container | first block, last block (metadata), truncation, deletion, swapped blocks, another container's bytes | `check` (the first block: `--read-data`) names the container; restore fails cleanly for the files it holds |
//! | `index/..`, delta | any block | `check` reports the index once; restore works; the next backup rebuilds it |
//! | `bloom/..` | any | derived: reported (naming the repair), restore works, the next backup rebuilds it |
//! | `snapshots/..` | any, or another record's bytes | `check` and `snapshots` name it; the other snapshot restores |
//! | `config` | a flipped byte, or a sealed part re-framed with a valid checksum | every command fails with one line; nothing is written |
//! | `keys/..` | any | the key does not open (one line); another key still does |

mod common;

use std::fs;
use std::path::{Path, PathBuf};

use common::damage::*;
use common::*;

fn index_files(repo: &Path, deltas: bool) -> Vec<PathBuf> {
    files_under(&repo.join("index"))
        .into_iter()
        .filter(|p| file_name(p).contains('.') == deltas)
        .collect()
}

fn damage_lines(r: &Run) -> Vec<&str> {
    r.stderr
        .lines()
        .filter(|l| l.starts_with("cairn: damage:"))
        .collect()
}

// ---------------------------------------------------------------------------
// Containers
// ---------------------------------------------------------------------------

/// One flipped byte in a data block: the chunks overlapping that block are
/// lost, nothing else. `a` fills container 1, so only `a` is damaged.
#[test]
fn a_damaged_data_block_costs_only_the_file_it_holds() {
    let fx = Fixture::new(50);
    let repo = fx.copy("repo");
    let c1 = containers(&repo)[0].clone();
    let cid = file_name(&c1);
    flip_byte(&c1, (40 * SEALED_BLOCK + 1000) as i64);

    let r = cairn(&repo, &["check", "--read-data"]).code(1);
    let out = r.all_output();
    assert!(out.contains(&cid), "container id missing: {out}");
    assert!(out.contains("block 40"), "damaged block not named: {out}");
    assert!(out.contains(&fx.id1[..8]), "snapshot 1 not named: {out}");
    assert!(out.contains(&fx.id2[..8]), "snapshot 2 not named: {out}");
    assert!(out.contains("tree/a"), "damaged path not named: {out}");
    assert!(!out.contains("tree/b"), "undamaged path blamed: {out}");

    for (id, m) in [(&fx.id1, &fx.m1), (&fx.id2, &fx.m2)] {
        let out = fx.out(&id[..8]);
        let r = cairn(&repo, &["restore", id, "-t", s(&out)]).code(1);
        assert!(
            r.stderr.lines().any(|l| l.starts_with("cairn: error: ")
                && l.contains("tree/a")
                && l.contains(&cid)),
            "restore must name the damaged file and container: {}",
            r.stderr
        );
        let mut rest = m.clone();
        rest.0.remove("a");
        rest.0.remove("");
        let mut got = Manifest::capture(&out.join("tree"));
        got.0.remove("a");
        got.0.remove("");
        assert_eq!(got, rest, "undamaged files must restore exactly");
    }
    let err = cairn(&repo, &["cat", "latest", "tree/a"]).one_line_error();
    assert!(err.contains(&cid), "{err}");
    assert!(cairn(&repo, &["cat", "latest", "tree/b"]).ok().stdout == fx.m2.file("b"));

    // Salvage keeps every chunk outside the damaged block: the next backup
    // stores only what overlapped it (at most 16 KiB of plaintext plus the
    // chunks reaching into it), and heals both snapshots.
    let r = cairn(&repo, &["repair", "index", "--read-data", "--json"]).ok();
    let j = r.json();
    let damaged = j["damaged_chunks"].as_u64().unwrap();
    assert!((1..=most_chunks_in_a_block()).contains(&damaged), "{j}");
    assert_eq!(j["salvaged_containers"].as_array().unwrap().len(), 1, "{j}");
    assert!(
        !c1.exists(),
        "the damaged container is removed after salvage"
    );
    let b = cairn(&repo, &["backup", "--json", s(&fx.tree)]).ok().json();
    let new = b["stats"]["new_raw_bytes"].as_u64().unwrap();
    assert!(new > 0 && new < 200_000, "re-stored {new} bytes: {b}");
    for (id, m) in [(&fx.id1, &fx.m1), (&fx.id2, &fx.m2)] {
        fx.restore_is_exact_or_fails(&repo, id, m, &format!("healed-{}", &id[..8]))
            .unwrap_or_else(|r| panic!("after salvage: {}", r.stderr));
    }
    cairn(&repo, &["check", "--read-data"]).ok();
}

#[test]
fn sealed_container_damage_is_found_and_named() {
    let fx = Fixture::new(51);
    let cases = [
        ("first-block", Damage::Flip(5)),
        ("last-block-tag", Damage::Flip(-3)),
        ("metadata", Damage::Flip(-100)),
        ("swapped-blocks", Damage::SwapBlocks),
        ("truncated-half", Damage::Truncate(500)),
        ("truncated-empty", Damage::Truncate(0)),
        ("deleted", Damage::Delete),
    ];
    for (name, damage) in cases {
        for which in [0, 2] {
            let repo = fx.copy(&format!("repo-{name}-{which}"));
            let target = containers(&repo)[which].clone();
            let cid = file_name(&target);
            apply(&target, damage);
            let ctx = format!("{name} of container {cid}");

            // A metadata-only check reads the last blocks; damage before
            // them shows with the data.
            let args: &[&str] = if matches!(name, "first-block" | "swapped-blocks") {
                &["check", "--read-data"]
            } else {
                &["check"]
            };
            let r = cairn(&repo, args).code(1);
            assert!(r.all_output().contains(&cid), "{ctx}: {}", r.all_output());
            cairn(&repo, &["check", "--read-data"]).code(1);

            // Container 1 is all `a`, in every snapshot: restore must fail
            // and say why; no wrong byte is ever written with exit 0.
            match fx.restore_is_exact_or_fails(&repo, "latest", &fx.m2, &ctx) {
                Err(r) => assert!(
                    r.stderr.contains(&cid) || r.stderr.contains("container"),
                    "{ctx}: restore error does not name the damage: {}",
                    r.stderr
                ),
                Ok(()) => panic!("{ctx}: restore succeeded from a damaged repository"),
            }
        }
    }
}

/// A container replaced by another container's (authentic) bytes: the
/// block's associated data names the object, so it fails to open.
#[test]
fn a_container_moved_under_another_name_fails_to_open() {
    let fx = Fixture::new(52);
    let repo = fx.copy("repo");
    let c = containers(&repo);
    let cid = file_name(&c[0]);
    fs::copy(&c[1], &c[0]).unwrap();
    let r = cairn(&repo, &["check"]).code(1);
    assert!(r.all_output().contains(&cid), "{}", r.all_output());
    assert!(
        r.all_output().contains("authentication failed"),
        "{}",
        r.all_output()
    );
    assert!(fx
        .restore_is_exact_or_fails(&repo, "latest", &fx.m2, "moved")
        .is_err());
}

// ---------------------------------------------------------------------------
// Index, deltas, Summary Vector checkpoint: derived data
// ---------------------------------------------------------------------------

#[test]
fn index_damage_is_reported_once_and_rebuilt() {
    let fx = Fixture::new(53);
    let index = index_files(&fx.good, false);
    let deltas = index_files(&fx.good, true);
    assert_eq!((index.len(), deltas.len()), (1, 1), "{index:?} {deltas:?}");
    let cases = [
        ("file-first-block", &index[0], Damage::Flip(40)),
        ("file-last-block", &index[0], Damage::Flip(-1)),
        ("file-truncated", &index[0], Damage::Truncate(500)),
        ("file-empty", &index[0], Damage::Truncate(0)),
        ("delta-flip", &deltas[0], Damage::Flip(30)),
        ("delta-truncated", &deltas[0], Damage::Truncate(10)),
    ];
    for (name, file, damage) in cases {
        let repo = fx.copy(&format!("repo-{name}"));
        let target = repo.join("index").join(file_name(file));
        apply(&target, damage);
        for args in [&["check"][..], &["check", "--read-data"][..]] {
            let r = cairn(&repo, args).code(1);
            let damage = damage_lines(&r);
            assert_eq!(damage.len(), 1, "{name}: {}", r.stderr);
            assert!(damage[0].contains("index"), "{name}: {}", r.stderr);
        }
        fx.restore_is_exact_or_fails(&repo, &fx.id2, &fx.m2, name)
            .unwrap_or_else(|r| panic!("{name}: restore failed: {}", r.stderr));
        let b = cairn(&repo, &["backup", "--json", s(&fx.tree)]).ok();
        assert!(
            b.stderr.contains("rebuilding the index"),
            "{name}: {}",
            b.stderr
        );
        let new = b.json()["stats"]["new_raw_bytes"].as_u64().unwrap();
        assert!(new < 100_000, "{name}: re-stored {new} bytes");
        cairn(&repo, &["check", "--read-data"]).ok();
    }
}

/// Every sealed block of the index damaged: whichever page a lookup reads
/// fails to open, and restores still go through the containers.
#[test]
fn an_index_with_every_block_damaged_is_survivable() {
    let fx = Fixture::new(54);
    let repo = fx.copy("repo");
    let index = index_files(&repo, false).remove(0);
    let len = fs::metadata(&index).unwrap().len();
    for block in 0..len.div_ceil(SEALED_BLOCK) {
        flip_byte(&index, (block * SEALED_BLOCK + 30).min(len - 1) as i64);
    }
    fx.restore_is_exact_or_fails(&repo, &fx.id1, &fx.m1, "index")
        .unwrap_or_else(|r| panic!("restore failed: {}", r.stderr));
    let cat = cairn(&repo, &["cat", "latest", "tree/d/c.txt"]).ok();
    assert!(cat.stdout == fx.m2.file("d/c.txt"));
}

#[test]
fn bloom_checkpoint_damage_is_reported_and_rebuilt() {
    let fx = Fixture::new(55);
    let cases = [
        ("first-block", Damage::Flip(2)),
        ("last-block", Damage::Flip(-1)),
        ("truncated-half", Damage::Truncate(500)),
        ("truncated-empty", Damage::Truncate(0)),
        ("deleted", Damage::Delete),
    ];
    for (name, damage) in cases {
        let repo = fx.copy(&format!("repo-{name}"));
        let files = files_under(&repo.join("bloom"));
        assert_eq!(files.len(), 1);
        apply(&files[0], damage);
        let r = cairn(&repo, &["check"]).code(1);
        assert!(
            r.stderr.contains("Summary Vector checkpoint damaged")
                && r.stderr.contains("repair index"),
            "{name}: {}",
            r.stderr
        );
        fx.restore_is_exact_or_fails(&repo, &fx.id2, &fx.m2, name)
            .unwrap_or_else(|r| panic!("bloom {name}: {}", r.stderr));
        let b = cairn(&repo, &["backup", "--json", s(&fx.tree)]).ok().json();
        let new = b["stats"]["new_raw_bytes"].as_u64().unwrap();
        assert!(new < 10_000, "bloom {name}: re-stored {new} bytes");
        cairn(&repo, &["check", "--read-data"]).ok();
    }
}

// ---------------------------------------------------------------------------
// Snapshot records
// ---------------------------------------------------------------------------

#[test]
fn snapshot_damage_is_found_and_named() {
    let fx = Fixture::new(56);
    let cases = [
        ("nonce", Damage::Flip(1)),
        ("payload", Damage::Flip(50)),
        ("tag", Damage::Flip(-1)),
        ("truncated-half", Damage::Truncate(500)),
        ("truncated-empty", Damage::Truncate(0)),
    ];
    let mut runs: Vec<(String, PathBuf)> = cases
        .into_iter()
        .map(|(name, damage)| {
            let repo = fx.copy(&format!("repo-{name}"));
            apply(&repo.join("snapshots").join(&fx.id1), damage);
            (format!("snapshot {name}"), repo)
        })
        .collect();
    // The other snapshot's authentic record under this one's name.
    let repo = fx.copy("repo-swapped");
    let dir = repo.join("snapshots");
    fs::copy(dir.join(&fx.id2), dir.join(&fx.id1)).unwrap();
    runs.push(("snapshot swapped".into(), repo));

    for (ctx, repo) in runs {
        let r = cairn(&repo, &["check"]).code(1);
        assert!(r.stderr.contains(&fx.id1[..8]), "{ctx}: {}", r.stderr);
        let r = cairn(&repo, &["snapshots", "--json"]).code(1);
        assert!(r.stderr.contains(&fx.id1[..8]), "{ctx}: {}", r.stderr);
        let listed = r.json();
        assert_eq!(listed.as_array().unwrap().len(), 1, "{ctx}");
        assert_eq!(listed[0]["id"].as_str(), Some(fx.id2.as_str()), "{ctx}");
        let err = cairn(&repo, &["ls", fx.id1.as_str()]).one_line_error();
        assert!(err.contains(&fx.id1[..8]), "{ctx}: {err}");
        fx.restore_is_exact_or_fails(&repo, &fx.id2, &fx.m2, &ctx)
            .unwrap_or_else(|r| panic!("{ctx}: {}", r.stderr));
    }
}

// ---------------------------------------------------------------------------
// Config and key files
// ---------------------------------------------------------------------------

/// Re-frames a config whose payload was edited, with a valid checksum: what
/// someone who can write the storage (but lacks the key) can do.
fn reframe_config(repo: &Path, edit: impl FnOnce(&mut serde_json::Value)) {
    let bytes = fs::read(repo.join("config")).unwrap();
    let (version, payload) =
        cairn_format::envelope::open(b"CAIRNCFG", u32::MAX, "config", &bytes).unwrap();
    let mut json: serde_json::Value = serde_json::from_slice(payload).unwrap();
    edit(&mut json);
    let payload = serde_json::to_vec(&json).unwrap();
    fs::write(
        repo.join("config"),
        cairn_format::envelope::seal(b"CAIRNCFG", version, &payload),
    )
    .unwrap();
}

#[test]
fn config_damage_or_tampering_gives_one_line_for_every_command() {
    let fx = Fixture::new(57);
    let mut runs: Vec<(String, PathBuf)> = Vec::new();
    for (name, damage) in [
        ("magic", Damage::Flip(0)),
        ("id", Damage::Flip(30)),
        ("sealed", Damage::Flip(-40)),
        ("crc", Damage::Flip(-1)),
        ("truncated-half", Damage::Truncate(500)),
        ("deleted", Damage::Delete),
    ] {
        let repo = fx.copy(&format!("repo-{name}"));
        apply(&repo.join("config"), damage);
        runs.push((format!("config {name}"), repo));
    }
    // Tampered with a valid checksum: one hex digit of the sealed part, or
    // the algorithm, changed.
    let repo = fx.copy("repo-tampered-sealed");
    reframe_config(&repo, |j| {
        let sealed = j["sealed"].as_str().unwrap().to_string();
        let mid = sealed.len() / 2;
        let digit = if &sealed[mid..=mid] == "0" { "1" } else { "0" };
        j["sealed"] = format!("{}{digit}{}", &sealed[..mid], &sealed[mid + 1..]).into();
    });
    runs.push(("config tampered sealed part".into(), repo));
    let repo = fx.copy("repo-tampered-algorithm");
    reframe_config(&repo, |j| j["encryption"] = "chacha20poly1305".into());
    runs.push(("config tampered algorithm".into(), repo));

    for (ctx, repo) in runs {
        let before = Manifest::capture(&repo);
        let out = fx.out(&ctx.replace(' ', "-"));
        for args in [
            vec!["snapshots"],
            vec!["ls", "latest"],
            vec!["restore", "latest", "-t", s(&out)],
            vec!["stats", "--json"],
            vec!["check", "--read-data"],
            vec!["backup", s(&fx.tree)],
            vec!["key", "list"],
        ] {
            let r = cairn(&repo, &args).code(1);
            let err = r.one_line_error();
            assert!(r.stdout.is_empty(), "{ctx}: {args:?} wrote stdout");
            if args[0] != "backup" {
                assert!(
                    err.contains("config") || err.contains("not a cairn repository"),
                    "{ctx}: {args:?}: {err}"
                );
            }
            assert!(
                !err.contains("wrong password"),
                "{ctx}: {args:?}: damage blamed on the password: {err}"
            );
        }
        assert!(!out.exists(), "{ctx}: restore created its target");
        assert_eq!(
            Manifest::capture(&repo),
            before,
            "{ctx}: a command modified the repository"
        );
    }
}

#[test]
fn a_damaged_key_file_does_not_open_and_another_key_still_does() {
    let fx = Fixture::new(58);
    let repo = fx.copy("repo");
    let second = fx.tmp.path().join("second-password");
    fs::write(&second, "a second password\n").unwrap();
    cairn(&repo, &["key", "add", "--new-password-file", s(&second)]).ok();
    let keys = files_under(&repo.join("keys"));
    assert_eq!(keys.len(), 2);
    // Which key file does the test password open? Damage that one.
    let listed = cairn(&repo, &["key", "list", "--json"]).ok().json();
    let mine = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["current"].as_bool() == Some(true))
        .unwrap_or_else(|| panic!("no current key: {listed}"))["id"]
        .as_str()
        .unwrap()
        .to_string();
    let key = repo.join("keys").join(&mine);
    let good_key = fs::read(&key).unwrap();
    // A byte of the wrapped key changed: it parses but does not open, which
    // by design looks like a wrong password (docs/security.md).
    let hex_at = good_key.len() - 20;
    let mut bad = good_key.clone();
    bad[hex_at] = if bad[hex_at] == b'0' { b'1' } else { b'0' };
    fs::write(&key, &bad).unwrap();
    let err = cairn(&repo, &["snapshots"]).one_line_error();
    assert!(err.contains("wrong password"), "{err}");
    // Cut in half: it no longer parses, and the error says which file.
    fs::write(&key, &good_key[..good_key.len() / 2]).unwrap();
    let before = Manifest::capture(&repo);
    let err = cairn(&repo, &["snapshots"]).one_line_error();
    assert!(
        err.contains("wrong password") && err.contains(&format!("keys/{mine}")),
        "{err}"
    );
    assert_eq!(Manifest::capture(&repo), before, "a failed open wrote");
    // The damaged key file does not stop the other one from opening the
    // repository, which lists it as damaged and can remove it.
    let with_second = |args: &[&str]| {
        let mut c = base_command();
        c.arg("--repo")
            .arg(&repo)
            .args(["--password-file", s(&second)])
            .args(args);
        let r = c.output().unwrap();
        assert!(
            r.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&r.stderr)
        );
        String::from_utf8(r.stdout).unwrap()
    };
    with_second(&["snapshots", "--json"]);
    let listed: serde_json::Value =
        serde_json::from_str(&with_second(&["key", "list", "--json"])).unwrap();
    let damaged: Vec<_> = listed
        .as_array()
        .unwrap()
        .iter()
        .filter(|k| k["damaged"].is_string())
        .collect();
    assert_eq!(damaged.len(), 1, "{listed}");
    assert_eq!(damaged[0]["id"].as_str(), Some(mine.as_str()));
    with_second(&["key", "remove", &mine]);
    assert_eq!(files_under(&repo.join("keys")).len(), 1);
    cairn(&repo, &["snapshots"]).code(1);
    with_second(&["check"]);
}
