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
            ["--index", "frugal"] => {
                // The frugal index answered the lookups: its chunk log is on
                // disk and no Summary Vector was used.
                assert!(!files_under(&repo.join("frugal")).is_empty());
                assert_eq!(st["bloom_inserts"].as_u64(), Some(0), "{st}");
                assert!(files_under(&repo.join("bloom")).is_empty());
            }
            ["--lookup", "lazy", ..] => {
                // Lazy lookup ran: buffered fingerprints were resolved by
                // batched page reads or by post-lookup.
                assert!(
                    st["lazy_disk_resolved"].as_u64().unwrap()
                        + st["post_lookup_hits"].as_u64().unwrap()
                        > 0,
                    "{st}"
                );
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
fn frugal_index_round_trips() {
    round_trips(&[&["--index", "frugal"]]);
}

/// The frugal index's chunk log is derived data: a damaged or lost segment
/// is rebuilt from the paged index with a note, and dedup goes on.
#[test]
fn a_damaged_frugal_log_is_rebuilt() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    let tree = tmp.path().join("tree");
    cairn(&repo, &["init", "-q", "--index", "frugal"]).ok();
    two_generations(&repo, &tree, 12);
    let segments = files_under(&repo.join("frugal"));
    flip_byte(&segments[0], 30);
    // check reports the damage (derived data, rebuilt by the next backup).
    let err = cairn(&repo, &["check"]).code(1).stderr;
    assert!(err.contains("frugal index unreadable"), "{err}");
    let b = cairn(&repo, &["backup", "--json", s(&tree)]).ok();
    assert!(
        b.stderr.contains("rebuilding the frugal index"),
        "{}",
        b.stderr
    );
    assert_eq!(b.json()["stats"]["new_data_chunks"].as_u64(), Some(0));
    for seg in files_under(&repo.join("frugal")) {
        fs::remove_file(seg).unwrap();
    }
    let b = cairn(&repo, &["backup", "--json", s(&tree)]).ok();
    assert!(
        b.stderr.contains("rebuilding the frugal index"),
        "{}",
        b.stderr
    );
    assert_eq!(b.json()["stats"]["new_data_chunks"].as_u64(), Some(0));
    let check = cairn(&repo, &["check", "--read-data"]).ok().stdout_str();
    assert!(check.contains("no problems found"), "{check}");
}

#[test]
fn lazy_lookup_round_trips() {
    // Tiny buckets, rings and buffer so every lazy path runs on small data.
    round_trips(&[
        &[
            "--lookup",
            "lazy",
            "--bucket-threshold",
            "2",
            "--ring-size",
            "8",
            "--lookup-buffer",
            "16",
            "--cache-containers",
            "1",
            "--container-size",
            "256KiB",
        ],
        &["--lookup", "lazy"],
    ]);
}

/// Lazy lookup stores exactly what eager lookup stores.
#[test]
fn lazy_and_eager_lookup_store_the_same_chunks() {
    let tmp = tempfile::tempdir().unwrap();
    let mut new_chunks = Vec::new();
    for lookup in ["eager", "lazy"] {
        let repo = tmp.path().join(lookup);
        let tree = tmp.path().join(format!("tree-{lookup}"));
        cairn(
            &repo,
            &[
                "init",
                "-q",
                "--lookup",
                lookup,
                "--bucket-threshold",
                "3",
                "--ring-size",
                "32",
                "--lookup-buffer",
                "64",
                "--container-size",
                "256KiB",
            ],
        )
        .ok();
        two_generations(&repo, &tree, 77);
        let st = cairn(&repo, &["stats", "--json"]).ok().json();
        new_chunks.push((st["unique_chunks"].clone(), st["stored_bytes"].clone()));
    }
    assert_eq!(new_chunks[0], new_chunks[1]);
}

/// Parallel streams sharing content: lazy lookup in each stream, one shared
/// index, still stores every distinct chunk exactly once.
#[test]
fn lazy_lookup_with_parallel_streams_stores_each_chunk_once() {
    let tmp = tempfile::tempdir().unwrap();
    let mut rng = Rng::new(31);
    let shared = rng.bytes(1_500_000);
    let mut dirs = Vec::new();
    for d in 0..4 {
        let dir = tmp.path().join(format!("src{d}"));
        write_file(&dir.join("shared.bin"), &shared, 0o644);
        write_file(&dir.join("own.bin"), &rng.bytes(200_000), 0o644);
        dirs.push(dir);
    }
    let mut stats = Vec::new();
    for lookup in ["eager", "lazy"] {
        let repo = tmp.path().join(format!("repo-{lookup}"));
        cairn(
            &repo,
            &[
                "init",
                "-q",
                "--lookup",
                lookup,
                "--bucket-threshold",
                "2",
                "--ring-size",
                "16",
                "--lookup-buffer",
                "32",
            ],
        )
        .ok();
        // The first backup fills the on-disk index, so the second one's
        // streams buffer their Bloom positives.
        cairn(&repo, &["backup", "-q", s(&dirs[0])]).ok();
        let mut args = vec!["backup", "-q"];
        args.extend(dirs.iter().map(|d| s(d)));
        cairn(&repo, &args).ok();
        let st = cairn(&repo, &["stats", "--json"]).ok().json();
        if lookup == "lazy" {
            assert!(st["lazy_disk_resolved"].as_u64().unwrap() > 0, "{st}");
        }
        stats.push((st["unique_chunks"].clone(), st["stored_bytes"].clone()));
        let out = tmp.path().join(format!("out-{lookup}"));
        cairn(&repo, &["restore", "latest", "-q", "-t", s(&out)]).ok();
        assert_eq!(fs::read(out.join("src3/shared.bin")).unwrap(), shared);
    }
    assert_eq!(stats[0], stats[1]);
}

#[test]
fn lookup_auto_is_chosen_for_the_device_at_init() {
    let tmp = tempfile::tempdir().unwrap();
    for (device, want) in [("hdd", None), ("pm", Some("eager"))] {
        let repo = tmp.path().join(device);
        let run = cairn(
            &repo,
            &["init", "--lookup", "auto", "--lookup-device", device],
        )
        .ok();
        let err = run.stderr.clone();
        assert!(
            err.contains("lookup auto:") && err.contains("eq. (8)"),
            "{err}"
        );
        let text = fs::read(repo.join("config")).unwrap();
        let text = String::from_utf8_lossy(&text);
        assert!(
            !text.contains("\"auto\""),
            "auto left in the config: {text}"
        );
        if let Some(w) = want {
            assert!(text.contains(&format!("\"strategy\": \"{w}\"")), "{text}");
        }
        // The repository works with whatever was chosen.
        let tree = tmp.path().join(format!("tree-{device}"));
        two_generations(&repo, &tree, 5);
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
    // Options of later backups do not change an existing repository: given
    // again, even with the same value, they are refused (they would do
    // nothing); a backup without them keeps the repository's.
    write_file(&tree.join("b.txt"), &rng.text(500_000), 0o644);
    for value in ["zstd", "none"] {
        let r = cairn(&repo, &["backup", "-q", "--compression", value, s(&tree)]);
        assert!(r.one_line_error().contains("--compression"));
    }
    cairn(&repo, &["backup", "-q", s(&tree)]).ok();
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
        &["--lookup", "sometimes"],
        &["--lookup", "lazy", "--ring-size", "0"],
        &["--lookup", "lazy", "--bucket-threshold", "0"],
        &["--lookup", "auto"],
        &["--lookup", "auto", "--lookup-device", "floppy"],
        &["--index", "btree"],
        &["--index", "frugal", "--lookup", "lazy"],
    ];
    for (i, opts) in bad.iter().enumerate() {
        let repo = tmp.path().join(format!("repo{i}"));
        for cmd in ["init", "backup"] {
            let mut args = vec![cmd];
            args.extend_from_slice(opts);
            if cmd == "backup" {
                args.push(s(&tree));
            }
            // A value outside an option's list is clap's usage error (exit
            // 2, naming the valid values); a bad combination is one line.
            let r = cairn(&repo, &args);
            if r.code == Some(2) {
                assert!(r.stderr.contains("invalid value"), "{args:?}: {}", r.stderr);
            } else {
                let err = r.code(1).one_line_error();
                assert!(err.len() > 20, "{args:?}: terse error {err:?}");
            }
            assert!(!repo.exists(), "{args:?} created {}", repo.display());
        }
    }
}

/// A backup into an existing repository with an init-only flag that differs
/// from the repository's config is refused with one line naming the flag,
/// before anything is written; the same value, or no flag, is accepted.
#[test]
fn backup_refuses_init_flags_that_differ_from_the_repository() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    let tree = tmp.path().join("tree");
    build_random_files(&tree, &mut Rng::new(3), 3, 50_000);
    cairn(
        &repo,
        &[
            "init",
            "-q",
            "--container-size",
            "256KiB",
            "--compression",
            "lz4",
        ],
    )
    .ok();
    let config_before = std::fs::read(repo.join("config")).unwrap();
    for flags in [
        &["--container-size", "1MiB"][..],
        &["--compression", "zstd"][..],
        &["--fingerprint", "sha256"][..],
        &["--chunker", "rabin"][..],
        &["--lookup", "lazy"][..],
    ] {
        let mut args = vec!["backup"];
        args.extend_from_slice(flags);
        args.push(s(&tree));
        let r = cairn(&repo, &args);
        let line = r.one_line_error();
        assert!(
            line.contains(flags[0])
                && (line.contains("fixed at init") || line.contains("already holds one")),
            "{flags:?}: {line}"
        );
        assert!(
            snapshot_ids(&repo).is_empty(),
            "{flags:?}: nothing committed"
        );
    }
    assert_eq!(std::fs::read(repo.join("config")).unwrap(), config_before);
    cairn(&repo, &["backup", "-q", s(&tree)]).ok();
    cairn(&repo, &["backup", "-q", s(&tree)]).ok();
    assert_eq!(snapshot_ids(&repo).len(), 2);
    // The persisted config never says "auto".
    let r = cairn(
        &tmp.path().join("auto"),
        &["init", "--lookup", "auto", "--lookup-device", "ssd"],
    );
    assert_eq!(r.code, Some(0), "{}", r.all_output());
    let cfg = String::from_utf8_lossy(&std::fs::read(tmp.path().join("auto/config")).unwrap())
        .into_owned();
    assert!(!cfg.contains("\"auto\""), "{cfg}");
}

/// Every rewrite scheme round-trips (and the default, LBW); a scheme is
/// recorded in the snapshot; lazy lookup gets no scheme by default and an
/// explicit one is refused in one line, before anything is written.
#[test]
fn rewrite_schemes_round_trip_and_lazy_lookup_refuses_them() {
    round_trips(&[
        &["--rewrite", "capping:segment=1MiB,cap=1"],
        &["--rewrite", "fcrc:segment=1MiB,cap=1,loss=30"],
        &["--rewrite", "lbw:window=2,cap=1,loss=30"],
        &["--lookup", "lazy"],
    ]);
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("tree");
    build_random_files(&tree, &mut Rng::new(3), 3, 100_000);
    let repo = tmp.path().join("repo");
    // Refused before a repository exists: no backup could use it.
    for cmd in [&["init", "-q"][..], &["backup", "-q", s(&tree)]] {
        let args = [cmd, &["--lookup", "lazy", "--rewrite", "lbw"]].concat();
        let err = cairn(&repo, &args).code(1).one_line_error();
        assert!(err.contains("needs eager lookup"), "{err}");
        assert!(!repo.exists(), "{args:?} created the repository");
    }
    cairn(&repo, &["init", "-q", "--lookup", "lazy"]).ok();
    let err = cairn(&repo, &["backup", "--rewrite", "lbw", s(&tree)])
        .code(1)
        .one_line_error();
    assert!(err.contains("needs eager lookup"), "{err}");
    assert!(snapshot_ids(&repo).is_empty());
    let repo = tmp.path().join("repo2");
    let b = cairn(
        &repo,
        &["backup", "--json", "--rewrite", "fcrc:loss=9", s(&tree)],
    )
    .ok()
    .json();
    assert_eq!(b["stats"]["rewrite"], "fcrc:segment=20971520,cap=20,loss=9");
    let b = cairn(&repo, &["backup", "--json", "--rewrite", "none", s(&tree)])
        .ok()
        .json();
    assert!(b["stats"].get("rewrite").is_none(), "{b}");
    let b = cairn(&repo, &["backup", "--json", s(&tree)]).ok().json();
    assert!(
        b["stats"]["rewrite"].as_str().unwrap().starts_with("fcrc:"),
        "{b}"
    );
    // A scheme that does not parse is a usage error, checked with the
    // command line.
    let err = cairn(&repo, &["backup", "--rewrite", "lbw:window=1", s(&tree)])
        .code(2)
        .one_line_error();
    assert!(err.contains("window"), "{err}");
}

/// The newest index generation of the local repository at `repo`.
fn index_generation(repo: &Path) -> u64 {
    fs::read_dir(repo.join("index"))
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            u64::from_str_radix(&name, 16).ok()
        })
        .max()
        .unwrap_or(0)
}

/// `--index-part-budget` (docs/simulation.md, "Memory"): set at init it
/// bounds the repository's first backup, which merges its part into new
/// index generations as it goes; given to a later backup it bounds that
/// one (which holds the repository alone). Every snapshot restores
/// byte-identically. Refused where it could not act (the frugal index,
/// `trace`).
#[test]
fn the_index_part_budget_bounds_first_and_later_backups() {
    let tmp = tempfile::tempdir().unwrap();
    let mut rng = Rng::new(77);
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    build_random_files(&a, &mut rng, 4, 1 << 20);
    build_random_files(&b, &mut rng, 4, 1 << 20);
    let (free, bounded) = (tmp.path().join("free"), tmp.path().join("bounded"));
    // Small containers: a merge moves only what durable containers hold.
    let init = ["init", "--encryption", "none", "--container-size", "256KiB"];
    cairn(&free, &init).ok();
    cairn(
        &bounded,
        &[&init[..], &["--index-part-budget", "64"]].concat(),
    )
    .ok();
    for repo in [&free, &bounded] {
        cairn(repo, &["backup", s(&a)]).ok();
    }
    // About 512 new chunks against a budget of 64: several merges.
    assert!(
        index_generation(&bounded) > index_generation(&free) + 2,
        "{} vs {}",
        index_generation(&bounded),
        index_generation(&free)
    );
    // A later backup of the unbounded repository, bounded by its flag.
    let before = index_generation(&free);
    cairn(&free, &["backup", "--index-part-budget", "64", s(&b)]).ok();
    assert!(index_generation(&free) > before + 2, "{before}");
    for repo in [&free, &bounded] {
        cairn(repo, &["check", "--read-data"]).ok();
        for src in [&a, &b] {
            let out = tmp.path().join(format!(
                "out-{}-{}",
                repo.file_name().unwrap().to_string_lossy(),
                src.file_name().unwrap().to_string_lossy()
            ));
            if repo == &bounded && src == &b {
                continue;
            }
            let snap = cairn(repo, &["snapshots", "--json"]).ok().json();
            let id = snap
                .as_array()
                .unwrap()
                .iter()
                .find(|r| {
                    r["paths"][0]
                        .as_str()
                        .unwrap()
                        .ends_with(&*src.file_name().unwrap().to_string_lossy())
                })
                .unwrap()["id"]
                .as_str()
                .unwrap()
                .to_string();
            cairn(repo, &["restore", &id, "--target", s(&out)]).ok();
            let m = Manifest::capture(src);
            assert_tree_matches(&m, &out.join(src.file_name().unwrap()));
        }
    }
    // Refused where it could not act.
    let frugal = tmp.path().join("frugal");
    let e = cairn(
        &frugal,
        &[
            "init",
            "--encryption",
            "none",
            "--index",
            "frugal",
            "--index-part-budget",
            "5",
        ],
    )
    .code(1)
    .one_line_error();
    assert!(e.contains("--index-part-budget"), "{e}");
    cairn(
        &frugal,
        &["init", "--encryption", "none", "--index", "frugal"],
    )
    .ok();
    cairn(&frugal, &["backup", s(&a)]).ok();
    let e = cairn(&frugal, &["backup", "--index-part-budget", "5", s(&b)])
        .code(1)
        .one_line_error();
    assert!(e.contains("frugal"), "{e}");
    let e = cairn(
        &free,
        &[
            "trace",
            s(&a),
            "-o",
            s(&tmp.path().join("t")),
            "--index-part-budget",
            "5",
        ],
    )
    .code(1)
    .one_line_error();
    assert!(e.contains("--index-part-budget"), "{e}");
}
