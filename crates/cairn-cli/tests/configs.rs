//! Repository settings chosen at `init` (or by the first `backup`): every
//! chunker, fingerprint and codec round-trips, the settings stick, and
//! invalid settings fail with one line without creating anything.

mod common;

use std::fs;
use std::path::Path;

use common::*;

/// A small two-generation workload: returns the manifests and snapshot ids.
fn two_generations(repo: &Path, tree: &Path, seed: u64) -> Vec<(String, Manifest)> {
    let mut rng = Rng::new(seed);
    build_random_files(tree, &mut rng, 3, 400_000);
    write_file(&tree.join("text/a.txt"), &rng.text(300_000), 0o644);
    symlink("f00.bin", &tree.join("link"));
    let mut gens = Vec::new();
    for g in 0..2 {
        if g == 1 {
            let mut data = fs::read(tree.join("f01.bin")).unwrap();
            data.splice(0..0, rng.bytes(333));
            write_file(&tree.join("f01.bin"), &data, 0o600);
            fs::remove_file(tree.join("f02.bin")).unwrap();
        }
        let m = Manifest::capture(tree);
        let b = cairn(repo, &["backup", "--json", s(tree)]).ok().json();
        gens.push((b["id"].as_str().unwrap().to_string(), m));
    }
    gens
}

#[test]
fn every_chunker_round_trips() {
    round_trips(&[
        &["--chunker", "fixed", "--avg-size", "4KiB"],
        &["--chunker", "rabin"],
        &["--chunker", "regression", "--avg-size", "16KiB"],
        &[
            "--chunker",
            "fastcdc",
            "--min-size",
            "1KiB",
            "--max-size",
            "32KiB",
        ],
    ]);
}

#[test]
fn every_fingerprint_and_codec_round_trips() {
    round_trips(&[
        &["--fingerprint", "sha256"],
        &["--fingerprint", "sha1"],
        &["--compression", "lz4"],
        &["--compression", "none"],
        &[
            "--compression",
            "zstd",
            "--zstd-level",
            "19",
            "--min-savings",
            "0",
        ],
    ]);
}

#[test]
fn small_containers_and_ablations_round_trip() {
    round_trips(&[
        &["--container-size", "256KiB"],
        &["--no-summary-vector", "--no-locality-cache"],
    ]);
}

/// For each set of init options: init, two generations, restore both
/// exactly, `check --read-data` clean, and the setting visibly in effect.
fn round_trips(configs: &[&[&str]]) {
    let tmp = tempfile::tempdir().unwrap();
    for (i, opts) in configs.iter().enumerate() {
        let repo = tmp.path().join(format!("repo{i}"));
        let tree = tmp.path().join(format!("tree{i}"));
        let mut args = vec!["init", "--json"];
        args.extend_from_slice(opts);
        let init = cairn(&repo, &args).ok().json();
        let cfg = &init["config"];
        match opts {
            ["--chunker", c, ..] => assert_eq!(cfg["chunker"]["algorithm"], *c),
            ["--fingerprint", f] => assert_eq!(cfg["fingerprint"], *f),
            ["--compression", c, ..] => assert_eq!(cfg["compression"]["codec"], *c),
            ["--container-size", _] => assert_eq!(cfg["container_size"], 256 << 10),
            _ => {}
        }

        let gens = two_generations(&repo, &tree, 90 + i as u64);
        for (id, m) in &gens {
            let out = tmp.path().join(format!("out{i}-{}", &id[..8]));
            cairn(&repo, &["restore", id, "-q", "-t", s(&out)]).ok();
            assert_tree_matches(m, &out.join(format!("tree{i}")));
        }
        let check = cairn(&repo, &["check", "--read-data"]).ok().stdout_str();
        assert!(check.contains("no problems found"), "{opts:?}: {check}");

        // The settings are in effect.
        let st = cairn(&repo, &["stats", "--json"]).ok().json();
        match opts {
            ["--compression", "none"] => {
                assert_eq!(st["compression_ratio"].as_f64(), Some(1.0), "{st}")
            }
            ["--container-size", _] => {
                let biggest = files_under(&repo.join("containers"))
                    .iter()
                    .map(|p| fs::metadata(p).unwrap().len())
                    .max()
                    .unwrap();
                assert!(biggest <= 300 << 10, "a container of {biggest} bytes");
            }
            ["--no-summary-vector", ..] => {
                assert_eq!(st["bloom_negatives"].as_u64(), Some(0), "{st}");
                assert_eq!(st["cache_hits"].as_u64(), Some(0), "{st}");
            }
            _ => {}
        }
        // Dedup works with every setting: gen 2 shares most of gen 1.
        assert!(st["dedup_ratio"].as_f64().unwrap() > 1.3, "{opts:?}: {st}");
    }
}

#[test]
fn the_first_backup_uses_its_init_options() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    let tree = tmp.path().join("tree");
    let mut rng = Rng::new(95);
    write_file(&tree.join("a.txt"), &rng.text(500_000), 0o644);
    cairn(&repo, &["backup", "-q", "--compression", "none", s(&tree)]).ok();
    let st = cairn(&repo, &["stats", "--json"]).ok().json();
    assert_eq!(st["compression_ratio"].as_f64(), Some(1.0), "{st}");
    // Options of later backups do not change an existing repository.
    write_file(&tree.join("b.txt"), &rng.text(500_000), 0o644);
    cairn(&repo, &["backup", "-q", "--compression", "zstd", s(&tree)]).ok();
    let st = cairn(&repo, &["stats", "--json"]).ok().json();
    assert_eq!(st["compression_ratio"].as_f64(), Some(1.0), "{st}");
}

#[test]
fn invalid_settings_fail_with_one_line_and_create_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("tree");
    write_file(&tree.join("f"), b"data", 0o644);
    let bad: &[&[&str]] = &[
        &["--chunker", "bogus"],
        &["--avg-size", "3x"],
        &["--avg-size", "1"],
        &["--avg-size", "1GiB"],
        &["--avg-size", "12345"],
        &["--min-size", "64KiB", "--max-size", "1KiB"],
        &["--chunker", "fixed", "--min-size", "1KiB"],
        &["--fingerprint", "md5"],
        &["--compression", "gzip"],
        &["--zstd-level", "99"],
        &["--min-savings", "100"],
        &["--container-size", "0"],
        &["--container-size", "100GiB"],
        &["--cache-containers", "0"],
    ];
    for (i, opts) in bad.iter().enumerate() {
        let repo = tmp.path().join(format!("repo{i}"));
        for cmd in ["init", "backup"] {
            let mut args = vec![cmd];
            args.extend_from_slice(opts);
            if cmd == "backup" {
                args.push(s(&tree));
            }
            let err = cairn(&repo, &args).code(1).one_line_error();
            assert!(err.len() > 20, "{args:?}: terse error {err:?}");
            assert!(!repo.exists(), "{args:?} created {}", repo.display());
        }
    }
}
