//! Damage every kind of repository file (flip one byte, truncate, delete) in
//! a copy of a good repository and check that cairn notices and says what is
//! damaged, never panics, and never restores wrong bytes with exit 0.
//!
//! What each file kind is expected to do:
//!
//! | file | damage | expectation |
//! |---|---|---|
//! | `containers/..` | data byte | `check --read-data` fails naming container, snapshot and path; restore fails for that file only |
//! | `containers/..` | header, metadata, trailer, truncation, deletion | `check` fails naming the container; restore fails cleanly |
//! | `index/..` | any | `check` fails naming the index; the next backup rebuilds it |
//! | `bloom/..` | any | derived data: check reports the damaged checkpoint (naming the repair), restore works, the next backup rebuilds it and still dedups |
//! | `snapshots/..` | any | `check` and `snapshots` fail naming the snapshot; other snapshots restore |
//! | `config` | any | every command fails with one line; nothing is written |

mod common;

use std::fs;
use std::path::{Path, PathBuf};

use common::damage::*;
use common::*;

fn only_file(dir: &Path) -> PathBuf {
    let f = files_under(dir);
    assert_eq!(f.len(), 1, "expected one file in {}: {f:?}", dir.display());
    f[0].clone()
}

/// The paged index file (not its deltas, `<generation>.<seq>`).
fn index_file(repo: &Path) -> PathBuf {
    let f: Vec<PathBuf> = files_under(&repo.join("index"))
        .into_iter()
        .filter(|p| !file_name(p).contains('.'))
        .collect();
    assert_eq!(f.len(), 1, "expected one index file: {f:?}");
    f[0].clone()
}

// ---------------------------------------------------------------------------
// Containers
// ---------------------------------------------------------------------------

#[test]
fn container_data_byte_flip_names_container_snapshots_and_path() {
    let fx = Fixture::new(30);
    let repo = fx.copy("repo");
    let c1 = containers(&repo)[0].clone();
    let cid = file_name(&c1);
    // One byte in the middle of `a`'s data (`a` is first in the stream and
    // larger than a container, so container 1 is all `a`).
    flip_byte(&c1, 1_000_000);

    // Plain check reads metadata only and may not see it; if it reports
    // anything it must name the container.
    let plain = cairn(&repo, &["check"]);
    if plain.code != Some(0) {
        assert!(plain.all_output().contains(&cid), "{}", plain.all_output());
    }
    let r = cairn(&repo, &["check", "--read-data"]);
    assert_eq!(r.code, Some(1), "{}", r.all_output());
    let out = r.all_output();
    assert!(out.contains(&cid), "container id missing: {out}");
    assert!(out.contains(&fx.id1[..8]), "snapshot 1 not named: {out}");
    assert!(out.contains(&fx.id2[..8]), "snapshot 2 not named: {out}");
    assert!(out.contains("tree/a"), "damaged path not named: {out}");
    assert!(!out.contains("tree/b"), "undamaged path blamed: {out}");
    r.stderr
        .lines()
        .last()
        .filter(|l| l.starts_with("cairn: error: check found"))
        .expect("last line is the summary error");
    let json = cairn(&repo, &["check", "--read-data", "--json"]);
    assert_eq!(json.code, Some(1));
    let problems = json.json()["problems"].as_array().unwrap().clone();
    assert!(!problems.is_empty());
    assert!(problems
        .iter()
        .any(|p| p["container"].as_str() == Some(cid.as_str())));

    // Restore reports the damaged file, restores the rest, exits non-zero.
    for (id, m) in [(&fx.id1, &fx.m1), (&fx.id2, &fx.m2)] {
        let out = fx.out(&id[..8]);
        let r = cairn(&repo, &["restore", id, "-t", s(&out)]);
        assert_eq!(r.code, Some(1), "{}", r.all_output());
        let errors: Vec<&str> = r
            .stderr
            .lines()
            .filter(|l| l.starts_with("cairn: error: "))
            .collect();
        assert!(
            errors
                .iter()
                .any(|l| l.contains("tree/a") && l.contains(&cid)),
            "restore must name the damaged file and container: {}",
            r.stderr
        );
        let mut rest = m.clone();
        rest.0.remove("a");
        rest.0.remove(""); // the root's mtime may differ when a child failed
        let mut got = Manifest::capture(&out.join("tree"));
        got.0.remove("a");
        got.0.remove("");
        assert_eq!(got, rest, "undamaged files must restore exactly");
    }
    // cat: the damaged file fails with one line, the others work.
    let r = cairn(&repo, &["cat", "latest", "tree/a"]);
    let err = r.one_line_error();
    assert!(err.contains(&cid), "{err}");
    let r = cairn(&repo, &["cat", "latest", "tree/b"]).ok();
    assert!(r.stdout == fx.m2.file("b"));
}

#[test]
fn container_structure_damage_is_found_by_check() {
    let fx = Fixture::new(31);
    let cases = [
        ("header", Damage::Flip(5)),
        ("trailer-magic", Damage::Flip(-10)),
        ("metadata", Damage::Flip(-100)),
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

            // The header is only read with the data; everything else is
            // visible to a metadata-only check.
            let args: &[&str] = if name == "header" {
                &["check", "--read-data"]
            } else {
                &["check"]
            };
            let r = cairn(&repo, args);
            assert_eq!(r.code, Some(1), "{ctx}: {}", r.all_output());
            assert!(r.all_output().contains(&cid), "{ctx}: {}", r.all_output());
            let r = cairn(&repo, &["check", "--read-data"]);
            assert_eq!(r.code, Some(1), "{ctx}: {}", r.all_output());

            // A damaged header hides no chunk: each chunk is still verified
            // by its fingerprint, so restore must be exact (check reports it).
            if name == "header" {
                assert!(
                    fx.restore_is_exact_or_fails(&repo, "latest", &fx.m2, &ctx)
                        .is_ok(),
                    "{ctx}: header damage must not cost any file"
                );
                continue;
            }
            // Container 1 holds only `a`'s data, so the newest snapshot is
            // damaged in any case; restore must say so.
            if let Err(r) = fx.restore_is_exact_or_fails(&repo, "latest", &fx.m2, &ctx) {
                assert!(
                    r.stderr.contains(&cid) || r.stderr.contains("container"),
                    "{ctx}: restore error does not name the damage: {}",
                    r.stderr
                );
            } else {
                panic!("{ctx}: restore succeeded from a damaged repository");
            }
        }
    }
}

#[test]
fn a_missing_container_is_reported_in_a_few_lines() {
    let fx = Fixture::new(32);
    let repo = fx.copy("repo");
    let c1 = containers(&repo)[0].clone();
    let cid = file_name(&c1);
    fs::remove_file(&c1).unwrap();
    let r = cairn(&repo, &["check"]);
    assert_eq!(r.code, Some(1));
    let damage: Vec<&str> = r
        .stderr
        .lines()
        .filter(|l| l.starts_with("cairn: damage:"))
        .collect();
    assert!(
        damage.len() <= 5,
        "{} damage lines for one missing container",
        damage.len()
    );
    assert!(
        damage
            .iter()
            .any(|l| l.contains(&cid) && (l.contains("missing") || l.contains("not found"))),
        "no line says container {cid} is missing: {damage:?}"
    );
}

// ---------------------------------------------------------------------------
// Index
// ---------------------------------------------------------------------------

#[test]
fn index_damage_is_found_by_check_and_reported_once() {
    let fx = Fixture::new(33);
    let cases = [
        // covered_below in the header (checksummed): a corrupt header.
        ("header", Damage::Flip(40)),
        ("page", Damage::Flip(-3000)),
        ("page-crc", Damage::Flip(-1)),
        ("truncated-half", Damage::Truncate(500)),
        ("truncated-empty", Damage::Truncate(0)),
    ];
    for (name, damage) in cases {
        let repo = fx.copy(&format!("repo-{name}"));
        let index = index_file(&repo);
        apply(&index, damage);
        let ctx = format!("index {name}");
        for args in [&["check"][..], &["check", "--read-data"][..]] {
            let r = cairn(&repo, args);
            assert_eq!(r.code, Some(1), "{ctx}: {}", r.all_output());
            let damage: Vec<&str> = r
                .stderr
                .lines()
                .filter(|l| l.starts_with("cairn: damage:"))
                .collect();
            assert_eq!(damage.len(), 1, "{ctx}: {}", r.stderr);
            assert!(damage[0].contains("index"), "{ctx}: {}", r.stderr);
            assert!(
                r.stderr
                    .lines()
                    .last()
                    .unwrap()
                    .starts_with("cairn: error: "),
                "{ctx}: {}",
                r.stderr
            );
        }
        // Restore either works exactly or fails cleanly (see the ignored
        // test below for the header case).
        let _ = fx.restore_is_exact_or_fails(&repo, &fx.id2, &fx.m2, &ctx);
    }
}

/// Containers are self-describing: a damaged index page does not stop a
/// restore, and the next backup rebuilds the index, whichever page is bad.
#[test]
fn a_damaged_index_page_is_survivable() {
    let fx = Fixture::new(35);
    for name in ["pages", "truncated"] {
        let repo = fx.copy(&format!("repo-{name}"));
        let index = index_file(&repo);
        // Damage every data page, so that whichever page a lookup reads is bad.
        let header = fs::read(&index).unwrap();
        let page_size = u32::from_le_bytes(header[16..20].try_into().unwrap()) as u64;
        let len = header.len() as u64;
        assert!(page_size >= 256 && len.is_multiple_of(page_size) && len > page_size);
        if name == "pages" {
            for page in 1..len / page_size {
                flip_byte(&index, (page * page_size + 20) as i64);
            }
        } else {
            truncate(&index, page_size);
        }
        fx.restore_is_exact_or_fails(&repo, &fx.id1, &fx.m1, name)
            .unwrap_or_else(|r| panic!("index {name}: restore failed: {}", r.stderr));
        let r = cairn(&repo, &["backup", "--json", s(&fx.tree)]).ok();
        assert!(
            r.stderr.contains("rebuilding the index"),
            "{name}: {}",
            r.stderr
        );
        let new = r.json()["stats"]["new_raw_bytes"].as_u64().unwrap();
        assert!(new < 100_000, "index {name}: re-stored {new} bytes");
        cairn(&repo, &["check", "--read-data"]).ok();
    }
}

/// An index delta (the second backup's, `index/<generation>.<seq>`) is
/// derived data like the index file: damage is reported once by `check`,
/// restores go on through the containers, the next backup rebuilds it.
#[test]
fn a_damaged_index_delta_is_derived_data() {
    let fx = Fixture::new(36);
    let deltas: Vec<PathBuf> = files_under(&fx.good.join("index"))
        .into_iter()
        .filter(|p| file_name(p).contains('.'))
        .collect();
    assert_eq!(
        deltas.len(),
        1,
        "the second backup wrote a delta: {deltas:?}"
    );
    for (name, damage) in [
        ("flip", Damage::Flip(30)),
        ("truncated", Damage::Truncate(10)),
    ] {
        let repo = fx.copy(&format!("repo-delta-{name}"));
        let delta = repo.join("index").join(file_name(&deltas[0]));
        apply(&delta, damage);
        let r = cairn(&repo, &["check"]);
        assert_eq!(r.code, Some(1), "{name}: {}", r.all_output());
        let damage: Vec<&str> = r
            .stderr
            .lines()
            .filter(|l| l.starts_with("cairn: damage:"))
            .collect();
        assert_eq!(damage.len(), 1, "{name}: {}", r.stderr);
        assert!(damage[0].contains("index"), "{name}: {}", damage[0]);
        fx.restore_is_exact_or_fails(&repo, &fx.id2, &fx.m2, name)
            .unwrap_or_else(|r| panic!("delta {name}: restore failed: {}", r.stderr));
        let b = cairn(&repo, &["backup", "--json", s(&fx.tree)]).ok();
        assert!(
            b.stderr.contains("rebuilding the index"),
            "{name}: {}",
            b.stderr
        );
        let new = b.json()["stats"]["new_raw_bytes"].as_u64().unwrap();
        assert!(new < 100_000, "delta {name}: re-stored {new} bytes");
        cairn(&repo, &["check", "--read-data"]).ok();
    }
}

#[test]
fn restore_survives_a_damaged_index_header() {
    let fx = Fixture::new(40);
    for (name, damage) in [("header", Damage::Flip(40)), ("empty", Damage::Truncate(0))] {
        let repo = fx.copy(&format!("repo-{name}"));
        apply(&index_file(&repo), damage);
        fx.restore_is_exact_or_fails(&repo, &fx.id1, &fx.m1, name)
            .unwrap_or_else(|r| panic!("index {name}: restore failed: {}", r.stderr));
        let cat = cairn(&repo, &["cat", "latest", "tree/d/c.txt"]).ok();
        assert!(cat.stdout == fx.m2.file("d/c.txt"));
    }
}

#[test]
fn a_damaged_index_header_is_rebuilt_by_the_next_backup() {
    let fx = Fixture::new(34);
    for (name, damage) in [("header", Damage::Flip(40)), ("empty", Damage::Truncate(0))] {
        let repo = fx.copy(&format!("repo-{name}"));
        apply(&index_file(&repo), damage);
        let b = cairn(&repo, &["backup", "--json", s(&fx.tree)]).ok();
        assert!(
            b.stderr.contains("rebuilding the index"),
            "{name}: {}",
            b.stderr
        );
        // Rebuilt from container metadata: dedup still works.
        let st = &b.json()["stats"];
        let new = st["new_raw_bytes"].as_u64().unwrap();
        assert!(new < 100_000, "{name}: re-stored {new} bytes: {st}");
        cairn(&repo, &["check", "--read-data"]).ok();
        fx.restore_is_exact_or_fails(&repo, &fx.id1, &fx.m1, name)
            .unwrap_or_else(|r| panic!("{name}: {}", r.stderr));
    }
}

// ---------------------------------------------------------------------------
// Summary Vector checkpoint
// ---------------------------------------------------------------------------

/// The Bloom-filter checkpoint is derived data: `check` reports a flipped,
/// truncated, zeroed or missing one as such (naming the repair), restores
/// are unaffected, and the next backup rebuilds it from the index.
#[test]
fn bloom_checkpoint_damage_is_reported_and_rebuilt() {
    let fx = Fixture::new(36);
    let cases = [
        ("magic", Damage::Flip(2)),
        ("middle", Damage::Flip(-30_000)),
        ("crc", Damage::Flip(-1)),
        ("truncated-half", Damage::Truncate(500)),
        ("truncated-empty", Damage::Truncate(0)),
        ("deleted", Damage::Delete),
    ];
    for (name, damage) in cases {
        let repo = fx.copy(&format!("repo-{name}"));
        apply(&only_file(&repo.join("bloom")), damage);
        let r = cairn(&repo, &["check"]).code(1);
        assert!(
            r.stderr.contains("Summary Vector checkpoint damaged")
                && r.stderr.contains("repair index"),
            "{name}: {}",
            r.stderr
        );
        fx.restore_is_exact_or_fails(&repo, &fx.id2, &fx.m2, name)
            .unwrap_or_else(|r| panic!("bloom {name}: {}", r.stderr));
        // The next backup succeeds and still deduplicates everything.
        let b = cairn(&repo, &["backup", "--json", s(&fx.tree)]).ok().json();
        let new = b["stats"]["new_raw_bytes"].as_u64().unwrap();
        assert!(new < 10_000, "bloom {name}: re-stored {new} bytes");
        cairn(&repo, &["check", "--read-data"]).ok();
        assert_eq!(files_under(&repo.join("bloom")).len(), 1, "{name}");
    }
    // A zeroed checkpoint of full length is caught too.
    let repo = fx.copy("repo-zeroed");
    let file = only_file(&repo.join("bloom"));
    let len = fs::metadata(&file).unwrap().len() as usize;
    fs::write(&file, vec![0u8; len]).unwrap();
    let r = cairn(&repo, &["check"]).code(1);
    assert!(
        r.stderr.contains("Summary Vector checkpoint damaged"),
        "{}",
        r.stderr
    );
}

// ---------------------------------------------------------------------------
// Container-id mark
// ---------------------------------------------------------------------------

/// The container-id mark (`container-ids`) is derived data a writer starts
/// from: `check` (plain and `--read-data`) reports a damaged one, naming it
/// and what rewrites it, and the next backup does rewrite it.
#[test]
fn container_id_mark_damage_is_reported_and_rewritten() {
    let fx = Fixture::new(37);
    for (name, damage) in [
        ("payload", Damage::Flip(-6)),
        ("crc", Damage::Flip(-1)),
        ("magic", Damage::Flip(1)),
        ("truncated", Damage::Truncate(500)),
    ] {
        let repo = fx.copy(&format!("repo-mark-{name}"));
        apply(&repo.join("container-ids"), damage);
        for args in [&["check"][..], &["check", "--read-data"][..]] {
            let r = cairn(&repo, args).code(1);
            let damage_lines: Vec<&str> = r
                .stderr
                .lines()
                .filter(|l| l.starts_with("cairn: damage:"))
                .collect();
            assert_eq!(damage_lines.len(), 1, "{name} {args:?}: {}", r.stderr);
            assert!(
                damage_lines[0].contains("container-ids")
                    && damage_lines[0].contains("damaged")
                    && damage_lines[0].contains("repair index"),
                "{name} {args:?}: {}",
                r.stderr
            );
        }
        fx.restore_is_exact_or_fails(&repo, &fx.id2, &fx.m2, name)
            .unwrap_or_else(|r| panic!("mark {name}: {}", r.stderr));
        cairn(&repo, &["backup", "-q", s(&fx.tree)]).ok();
        cairn(&repo, &["check", "--read-data"]).ok();
    }
}

// ---------------------------------------------------------------------------
// Snapshot records
// ---------------------------------------------------------------------------

#[test]
fn snapshot_damage_is_found_and_named() {
    let fx = Fixture::new(37);
    let cases = [
        ("magic", Damage::Flip(1)),
        ("payload", Damage::Flip(50)),
        ("crc", Damage::Flip(-1)),
        ("truncated-half", Damage::Truncate(500)),
        ("truncated-empty", Damage::Truncate(0)),
    ];
    for (name, damage) in cases {
        let repo = fx.copy(&format!("repo-{name}"));
        apply(&repo.join("snapshots").join(&fx.id1), damage);
        let ctx = format!("snapshot {name}");

        let r = cairn(&repo, &["check"]);
        assert_eq!(r.code, Some(1), "{ctx}: {}", r.all_output());
        assert!(r.stderr.contains(&fx.id1[..8]), "{ctx}: {}", r.stderr);

        // `snapshots` lists the good one and warns about the damaged one.
        let r = cairn(&repo, &["snapshots", "--json"]);
        assert_eq!(r.code, Some(1), "{ctx}: {}", r.all_output());
        assert!(r.stderr.contains(&fx.id1[..8]), "{ctx}: {}", r.stderr);
        let listed = r.json();
        assert_eq!(listed.as_array().unwrap().len(), 1, "{ctx}");
        assert_eq!(listed[0]["id"].as_str(), Some(fx.id2.as_str()));

        // Using it: one line naming it. The other snapshot is unaffected.
        for args in [
            vec!["ls", fx.id1.as_str()],
            vec!["cat", &fx.id1[..8], "tree/d/c.txt"],
        ] {
            let err = cairn(&repo, &args).one_line_error();
            assert!(err.contains(&fx.id1[..8]), "{ctx}: {err}");
        }
        fx.restore_is_exact_or_fails(&repo, &fx.id2, &fx.m2, &ctx)
            .unwrap_or_else(|r| panic!("{ctx}: {}", r.stderr));
    }
}

#[test]
fn latest_does_not_silently_skip_a_damaged_newest_snapshot() {
    let fx = Fixture::new(38);
    let repo = fx.copy("repo");
    flip_byte(&repo.join("snapshots").join(&fx.id2), 50);
    // `latest` over an unreadable record fails, naming the record: its
    // time is unknown, so it may be the newest.
    let r = cairn(&repo, &["cat", "latest", "tree/sub/text.txt"]);
    assert_ne!(r.code, Some(0), "`cat latest` succeeded: {}", r.stderr);
    assert!(r.stdout.is_empty(), "older bytes were written");
    assert!(r.stderr.contains(&fx.id2[..8]), "{}", r.stderr);
    // The opt-in fallback serves the older snapshot, and says so.
    let r = cairn(
        &repo,
        &["cat", "latest", "tree/sub/text.txt", "--skip-damaged"],
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(!r.stdout.is_empty());
    assert!(r.stderr.contains(&fx.id2[..8]), "{}", r.stderr);
}

// ---------------------------------------------------------------------------
// Config
// ---------------------------------------------------------------------------

#[test]
fn config_damage_gives_one_line_for_every_command() {
    let fx = Fixture::new(39);
    let cases = [
        ("magic", Damage::Flip(0)),
        ("version", Damage::Flip(9)),
        ("payload", Damage::Flip(30)),
        ("crc", Damage::Flip(-1)),
        ("truncated-short", Damage::Truncate(100)),
        ("truncated-half", Damage::Truncate(500)),
        ("truncated-empty", Damage::Truncate(0)),
        ("deleted", Damage::Delete),
    ];
    for (name, damage) in cases {
        let repo = fx.copy(&format!("repo-{name}"));
        apply(&repo.join("config"), damage);
        let before = Manifest::capture(&repo);
        let out = fx.out(name);
        for args in [
            vec!["snapshots"],
            vec!["ls", "latest"],
            vec!["cat", "latest", "tree/d/c.txt"],
            vec!["restore", "latest", "-t", s(&out)],
            vec!["restore", fx.id1.as_str(), "-t", s(&out)],
            vec!["stats", "--json"],
            vec!["check"],
            vec!["check", "--read-data"],
            vec!["backup", s(&fx.tree)],
            vec!["init"],
        ] {
            let r = cairn(&repo, &args).code(1);
            let err = r.one_line_error();
            assert!(r.stdout.is_empty(), "config {name}: {args:?} wrote stdout");
            if args[0] != "init" && args[0] != "backup" {
                assert!(
                    err.contains("config") || err.contains("not a cairn repository"),
                    "config {name}: {args:?}: {err}"
                );
            }
        }
        assert!(!out.exists(), "config {name}: restore created its target");
        assert_eq!(
            Manifest::capture(&repo),
            before,
            "config {name}: a command modified the repository"
        );
    }
}
