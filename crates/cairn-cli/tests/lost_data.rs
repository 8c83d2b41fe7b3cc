//! The data-safety defects of issue 8, each reproduced through the binary:
//! no path may exit 0 with a snapshot that does not restore byte-identically.
//!
//! 1. `init` racing the first `backup` (and two racing `init`s): creation is
//!    exclusive, the backup writes with the config that won.
//! 2. A lost container's id is never reused, so the index never places a
//!    chunk in a container that does not hold it.
//! 3. A backup that meets a missing container stores the chunk again and
//!    says so; `repair index` rebuilds derived data; `check` names the repair.
//! 4. A deleted index is derived data: restore falls back to the
//!    containers and `check` says the index is missing, not the chunks.

mod common;

use std::fs;
use std::path::{Path, PathBuf};

use common::*;

fn config_text(repo: &Path) -> String {
    String::from_utf8_lossy(&fs::read(repo.join("config")).unwrap()).into_owned()
}

fn restore_matches(repo: &Path, spec: &str, out: &Path, expected: &Manifest, tree_name: &str) {
    let _ = fs::remove_dir_all(out);
    cairn(repo, &["restore", spec, "--target", s(out)]).ok();
    assert_tree_matches(expected, &out.join(tree_name));
}

/// Runs `body` on clear repositories, then on encrypted ones (AES-256-GCM).
fn clear_and_encrypted(body: impl Fn()) {
    for algorithm in ["none", "aes-256-gcm"] {
        set_encryption(algorithm);
        body();
    }
}

fn container_files(repo: &Path) -> Vec<PathBuf> {
    let mut v = files_under(&repo.join("containers"));
    v.sort();
    v
}

/// Defect 1: `backup` and `init --fingerprint sha256` race on a new
/// repository. Whatever wins, a backup that exits 0 restores byte-identically,
/// and an `init` that exits 0 left its settings in the config.
#[test]
fn init_racing_the_first_backup_never_loses_either() {
    clear_and_encrypted(|| {
        let tmp = tempfile::tempdir().unwrap();
        let tree = tmp.path().join("tree");
        build_random_files(&tree, &mut Rng::new(1), 6, 150_000);
        let m = Manifest::capture(&tree);
        let (mut init_won, mut backup_first) = (0, 0);
        for round in 0..16 {
            let repo = tmp.path().join(format!("repo{round}"));
            let b = command(&repo, &["backup", "-q", "--json", s(&tree)])
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            // The init asks for other settings than the backup's defaults: a
            // fingerprint in the clear, an algorithm when encrypted.
            let setting = if encrypting() {
                "chacha20poly1305"
            } else {
                "sha256"
            };
            let init_args = if encrypting() {
                ["init", "-q", "--encryption", setting]
            } else {
                ["init", "-q", "--fingerprint", setting]
            };
            let i = command(&repo, &init_args)
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            let b = finish(b, &["backup"]);
            let i = finish(i, &["init"]);
            let config = config_text(&repo);
            if i.code == Some(0) {
                init_won += 1;
                assert!(
                    config.contains(setting),
                    "round {round}: init exited 0 but its config lost: {config}"
                );
            } else {
                backup_first += 1;
                let line = i.one_line_error();
                assert!(
                    line.contains("already holds a cairn repository") || line.contains("not empty"),
                    "round {round}: {line}"
                );
            }
            if b.code == Some(0) {
                restore_matches(&repo, "latest", &tmp.path().join("out"), &m, "tree");
            } else {
                b.one_line_error();
            }
            cairn(&repo, &["check", "--read-data"]).ok();
        }
        eprintln!("init won {init_won}, backup created first {backup_first}");
    });
}

/// Defect 1, second half: two concurrent `init`s with different settings:
/// exactly one exits 0 and the config is that one's.
#[test]
fn two_racing_inits_exactly_one_wins() {
    clear_and_encrypted(|| {
        let tmp = tempfile::tempdir().unwrap();
        for round in 0..16 {
            let repo = tmp.path().join(format!("repo{round}"));
            let option = if encrypting() {
                "--encryption"
            } else {
                "--fingerprint"
            };
            let spawn = |setting: &str| {
                command(&repo, &["init", "-q", option, setting])
                    .stdin(std::process::Stdio::null())
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            };
            let (sa, sb) = if encrypting() {
                ("aes-256-gcm", "chacha20poly1305")
            } else {
                ("sha256", "sha1")
            };
            let a = spawn(sa);
            let b = spawn(sb);
            let a = finish(a, &["init"]);
            let b = finish(b, &["init"]);
            assert!(
                (a.code == Some(0)) != (b.code == Some(0)),
                "round {round}: exactly one init must win ({:?}, {:?})",
                a.code,
                b.code
            );
            let config = config_text(&repo);
            let (winner, loser) = if a.code == Some(0) { (sa, b) } else { (sb, a) };
            assert!(
                config.contains(&format!("\"{winner}\"")),
                "round {round}: config is not the winner's"
            );
            assert!(loser
                .one_line_error()
                .contains("already holds a cairn repository"));
            if encrypting() {
                // The loser's key file is gone: one key, and it opens.
                assert_eq!(files_under(&repo.join("keys")).len(), 1, "round {round}");
                cairn(&repo, &["check"]).ok();
            }
        }
    });
}

/// Three "releases" of a tree: each changes a few files.
fn releases(root: &Path) -> Vec<(PathBuf, Manifest)> {
    let mut rng = Rng::new(9);
    let mut out = Vec::new();
    let base = root.join("base");
    build_random_files(&base, &mut rng, 8, 700_000);
    for r in 0..4 {
        let dir = root.join(format!("rel{r}"));
        copy_dir(&base, &dir);
        for k in 0..=r {
            write_file(
                &dir.join(format!("changed{k}.bin")),
                &rng.bytes(1_200_000),
                0o644,
            );
        }
        write_file(&dir.join("f00.bin"), &rng.bytes(900_000), 0o644);
        out.push((dir.clone(), Manifest::capture(&dir)));
    }
    out
}

/// Defect 2: delete the newest container, back up a fourth release (a new
/// container must not take the deleted one's id), back up the third release
/// again: every snapshot that exits 0 restores byte-identically.
#[test]
fn a_lost_containers_id_is_never_reused() {
    clear_and_encrypted(|| {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        let rel = releases(tmp.path());
        for (dir, _) in &rel[..3] {
            cairn(&repo, &["backup", "-q", s(dir)]).ok();
        }
        let before = container_files(&repo);
        let newest = before.last().unwrap().clone();
        fs::remove_file(&newest).unwrap();
        cairn(&repo, &["backup", "-q", s(&rel[3].0)]).ok();
        assert!(
            !newest.exists(),
            "the deleted container's id {} was handed out again",
            newest.display()
        );
        let again = cairn(&repo, &["backup", s(&rel[2].0)]).ok();
        assert!(
            again.all_output().contains("stored again"),
            "the backup must say it stored lost chunks again: {}",
            again.all_output()
        );
        restore_matches(&repo, "latest", &tmp.path().join("out"), &rel[2].1, "rel2");
    });
}

/// Defect 3: an old container is lost. The next backup whose data overlaps
/// it succeeds (storing the chunks again, saying so), restores
/// byte-identically, and `check` names the snapshots that lost data and the
/// repair command; `repair index` makes the next backups clean again.
#[test]
fn losing_an_old_container_does_not_block_later_backups() {
    clear_and_encrypted(|| {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        let rel = releases(tmp.path());
        cairn(&repo, &["backup", "-q", s(&rel[0].0)]).ok();
        cairn(&repo, &["backup", "-q", s(&rel[1].0)]).ok();
        let first = container_files(&repo)[0].clone();
        fs::remove_file(&first).unwrap();

        let b = cairn(&repo, &["backup", s(&rel[1].0)]).ok();
        assert!(
            b.all_output().contains("stored again"),
            "{}",
            b.all_output()
        );
        restore_matches(&repo, "latest", &tmp.path().join("out"), &rel[1].1, "rel1");

        let check = cairn(&repo, &["check"]).code(1);
        let text = check.all_output();
        assert!(
            text.contains("repair"),
            "check must name the repair command: {text}"
        );

        // The repair rebuilds the index from the containers; afterwards a
        // backup of the same data stores nothing again and check only reports
        // the older snapshots' lost data.
        let r = cairn(&repo, &["repair", "index"]).ok();
        assert!(r.all_output().contains("index"), "{}", r.all_output());
        let b = cairn(&repo, &["backup", s(&rel[1].0)]).ok();
        assert!(
            !b.all_output().contains("stored again"),
            "{}",
            b.all_output()
        );
        restore_matches(&repo, "latest", &tmp.path().join("out"), &rel[1].1, "rel1");
        cairn(&repo, &["backup", "-q", s(&rel[3].0)]).ok();
        restore_matches(&repo, "latest", &tmp.path().join("out"), &rel[3].1, "rel3");
    });
}

/// Defect 4: with `index/` removed, restore reads through container
/// metadata and `check` reports a missing index (derived data), not missing
/// chunks or reclaimable containers.
#[test]
fn a_deleted_index_is_derived_data() {
    clear_and_encrypted(|| {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        let rel = releases(tmp.path());
        cairn(&repo, &["backup", "-q", s(&rel[0].0)]).ok();
        cairn(&repo, &["backup", "-q", s(&rel[1].0)]).ok();
        fs::remove_dir_all(repo.join("index")).unwrap();

        restore_matches(&repo, "latest", &tmp.path().join("out"), &rel[1].1, "rel1");
        let check = cairn(&repo, &["check", "--json"]);
        let j = check.json();
        let problems = j["problems"].as_array().unwrap();
        assert_eq!(problems.len(), 1, "one problem, the index: {problems:?}");
        let msg = problems[0]["message"].as_str().unwrap();
        assert!(
            msg.contains("index missing") && msg.contains("repair index"),
            "{msg}"
        );
        assert_eq!(j["reclaimable_containers"], 0, "{j}");

        // The next backup rebuilds it.
        cairn(&repo, &["backup", "-q", s(&rel[2].0)]).ok();
        cairn(&repo, &["check"]).ok();
        restore_matches(&repo, "latest", &tmp.path().join("out"), &rel[2].1, "rel2");
    });
}

/// Silent bit rot in a container's data section is invisible to a backup
/// (it reads metadata only) until `check --read-data`; `repair index
/// --read-data` salvages the container's sound chunks and drops the damaged
/// one, so the next backup stores it again, which heals every snapshot that
/// referenced it.
#[test]
fn repair_with_read_data_salvages_a_rotten_container() {
    clear_and_encrypted(|| {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        let rel = releases(tmp.path());
        cairn(&repo, &["backup", "-q", s(&rel[0].0)]).ok();
        let first = container_files(&repo)[0].clone();
        flip_byte(&first, 5_000);
        cairn(&repo, &["check", "--read-data"]).code(1);

        let r = cairn(&repo, &["repair", "index", "--read-data", "--json"]).ok();
        let j = r.json();
        // Clear: the one chunk holding the byte. Encrypted: the chunks that
        // overlap the sealed block holding it (16 KiB of plaintext).
        let damaged = j["damaged_chunks"].as_u64().unwrap();
        if encrypting() {
            let most = common::damage::most_chunks_in_a_block();
            assert!((1..=most).contains(&damaged), "{j}");
        } else {
            assert_eq!(damaged, 1, "{j}");
        }
        assert_eq!(j["salvaged_containers"].as_array().unwrap().len(), 1, "{j}");
        assert!(
            !first.exists(),
            "the damaged container is removed after salvage"
        );

        let b = cairn(&repo, &["backup", "--json", s(&rel[0].0)])
            .ok()
            .json();
        assert_eq!(
            b["stats"]["new_data_chunks"], damaged,
            "only the damaged chunks are stored again: {b}"
        );
        restore_matches(&repo, "latest", &tmp.path().join("out"), &rel[0].1, "rel0");
        // Chunks are addressed by content: storing the chunk again heals the
        // first snapshot too.
        let first_id = &snapshot_ids(&repo)[0];
        restore_matches(&repo, first_id, &tmp.path().join("out"), &rel[0].1, "rel0");
        cairn(&repo, &["check", "--read-data"]).ok();
    });
}

/// `repair snapshots` rewrites a snapshot that lost a container: the files
/// that can no longer be restored are dropped and listed, everything else
/// restores byte-identically from the repaired snapshot (same time, host
/// and paths, tagged `repaired`); a second run finds nothing to do, and with
/// `--forget` plus `repair index` the repository checks clean again.
#[test]
fn repair_snapshots_keeps_everything_still_whole() {
    clear_and_encrypted(|| {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        let tree = tmp.path().join("tree");
        let mut rng = Rng::new(5);
        for d in ["a", "b", "c/deep"] {
            build_random_files(&tree.join(d), &mut rng, 4, 90_000);
        }
        symlink("a/f0", &tree.join("link"));
        let m = Manifest::capture(&tree);
        cairn(&repo, &["init", "-q", "--container-size", "256KiB"]).ok();
        cairn(&repo, &["backup", "-q", "--tag", "t1", s(&tree)]).ok();
        let original = snapshots(&repo)[0].clone();
        let containers = container_files(&repo);
        assert!(containers.len() >= 4, "{containers:?}");
        fs::remove_file(&containers[1]).unwrap();

        let dry = cairn(&repo, &["--json", "repair", "snapshots", "--dry-run"])
            .ok()
            .json();
        assert_eq!(dry["repaired"].as_array().unwrap().len(), 1, "{dry}");
        assert_eq!(snapshots(&repo).len(), 1, "a dry run writes nothing");

        let j = cairn(&repo, &["--json", "repair", "snapshots"]).ok().json();
        let fix = &j["repaired"][0];
        let lost: Vec<String> = fix["lost"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l.as_str().unwrap().split(' ').next().unwrap().to_string())
            .collect();
        assert!(!lost.is_empty(), "{j}");
        let new_id = fix["new_id"].as_str().unwrap().to_string();
        let snaps = snapshots(&repo);
        assert_eq!(snaps.len(), 2, "the original is kept without --forget");
        let repaired = snaps.iter().find(|s| s["id"] == new_id.as_str()).unwrap();
        assert_eq!(repaired["time_unix_ns"], original["time_unix_ns"]);
        assert_eq!(repaired["paths"], original["paths"]);
        assert_eq!(repaired["host"], original["host"]);
        let tags = repaired["tags"].as_array().unwrap();
        assert!(tags.iter().any(|t| t == "t1") && tags.iter().any(|t| t == "repaired"));

        // Everything not lost restores byte-identically; lost paths are absent.
        let mut expected = m.clone();
        expected.0.retain(|k, _| {
            let path = format!("tree/{k}");
            !lost
                .iter()
                .any(|l| path == l.trim_end_matches('/') || path.starts_with(l.as_str()))
        });
        assert!(expected.0.len() < m.0.len() && expected.0.len() > m.0.len() / 2);
        let out = tmp.path().join("out");
        cairn(&repo, &["restore", &new_id[..12], "--target", s(&out)]).ok();
        assert_tree_matches(&expected, &out.join("tree"));

        let again = cairn(&repo, &["--json", "repair", "snapshots", &new_id[..12]])
            .ok()
            .json();
        assert_eq!(again["repaired"].as_array().unwrap().len(), 0, "{again}");

        let forget = cairn(&repo, &["--json", "repair", "snapshots", "--forget"])
            .ok()
            .json();
        assert_eq!(forget["repaired"][0]["forgotten"], true, "{forget}");
        assert_eq!(forget["repaired"][0]["id"], original["id"]);
        let ids = snapshot_ids(&repo);
        assert_eq!(ids.len(), 2, "original gone, two repaired copies: {ids:?}");
        cairn(&repo, &["repair", "index"]).ok();
        cairn(&repo, &["check"]).ok();
    });
}
