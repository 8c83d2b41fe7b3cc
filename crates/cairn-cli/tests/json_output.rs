//! The machine-readable output is an interface: pin its shape.

mod common;

use serde_json::Value;

use common::*;

fn is_hex64(v: &Value) -> bool {
    v.as_str()
        .is_some_and(|s| s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit()))
}

#[test]
fn snapshots_json_is_an_array_oldest_first_with_pinned_fields() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    let tree = tmp.path().join("tree");
    let mut rng = Rng::new(2);
    build_sample_tree(&tree, &mut rng);

    let mut backups = Vec::new();
    let mut manifests = Vec::new();
    for (i, tags) in [vec!["first"], vec!["second", "x"], vec![]]
        .iter()
        .enumerate()
    {
        write_file(&tree.join("docs/gen.txt"), &rng.text(1000 + i), 0o644);
        manifests.push(Manifest::capture(&tree));
        let mut args = vec!["backup", "--json", s(&tree)];
        for t in tags {
            args.push("--tag");
            args.push(t);
        }
        let b = cairn(&repo, &args).ok().json();
        // backup --json: one object.
        assert!(is_hex64(&b["id"]), "backup id: {b}");
        assert!(b["time"].is_string());
        assert_eq!(b["paths"], serde_json::json!([s(&tree)]));
        assert_eq!(b["tags"], serde_json::json!(tags));
        for k in [
            "logical_bytes",
            "new_raw_bytes",
            "new_stored_bytes",
            "chunks",
            "new_chunks",
            "files",
            "dirs",
            "symlinks",
            "containers_written",
        ] {
            assert!(b["stats"][k].is_u64(), "backup stats.{k}: {b}");
        }
        assert!(b["skipped"].as_array().unwrap().is_empty());
        backups.push(b);
    }

    let snaps = snapshots(&repo);
    assert_eq!(snaps.len(), 3);
    let mut last_time = String::new();
    for (i, snap) in snaps.iter().enumerate() {
        // Oldest first: the order the backups ran in.
        assert_eq!(snap["id"], backups[i]["id"], "snapshot {i} out of order");
        assert!(is_hex64(&snap["id"]));
        let time = snap["time"].as_str().expect("time is a string");
        assert!(time.ends_with('Z') && time.len() >= 20, "time {time:?}");
        assert!(time >= last_time.as_str(), "times not ascending");
        last_time = time.to_string();
        assert_eq!(snap["paths"], serde_json::json!([s(&tree)]));
        assert!(snap["tags"].is_array());
        assert_eq!(snap["tags"], backups[i]["tags"]);
        assert_eq!(
            snap["logical_bytes"].as_u64().unwrap(),
            manifests[i].total_file_bytes()
        );
    }

    // Every id, whole or as an 8-character prefix, is accepted by ls, cat
    // and restore; and so is `latest`.
    for (i, snap) in snaps.iter().enumerate() {
        let id = snap["id"].as_str().unwrap();
        for spec in [id, &id[..8]] {
            let ls = cairn(&repo, &["ls", spec, "--json"]).ok().json();
            let rows = ls.as_array().expect("ls --json is an array");
            assert_eq!(rows.len(), manifests[i].0.len(), "ls {spec}");
            let cat = cairn(&repo, &["cat", spec, "tree/docs/gen.txt"]).ok();
            assert_eq!(cat.stdout, manifests[i].file("docs/gen.txt"));
            let out = tmp.path().join(format!("out-{i}-{}", spec.len()));
            cairn(&repo, &["restore", spec, "--target", s(&out)]).ok();
            assert_tree_matches(&manifests[i], &out.join("tree"));
        }
    }
    let cat = cairn(&repo, &["cat", "latest", "tree/docs/gen.txt"]).ok();
    assert_eq!(cat.stdout, manifests[2].file("docs/gen.txt"));
}

#[test]
fn ls_json_describes_every_entry() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    let tree = tmp.path().join("tree");
    build_sample_tree(&tree, &mut Rng::new(3));
    let m = Manifest::capture(&tree);
    cairn(&repo, &["backup", "-q", s(&tree)]).ok();

    let rows = cairn(&repo, &["ls", "latest", "--json"]).ok().json();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), m.0.len());
    for row in rows {
        let path = row["path"].as_str().unwrap();
        let rel = path.strip_prefix("tree").unwrap().trim_start_matches('/');
        let e = &m.0[rel];
        let (ty, size) = match &e.kind {
            Kind::File(d) => ("file", Some(d.len() as u64)),
            Kind::Dir => ("dir", None),
            Kind::Symlink(t) => {
                assert_eq!(row["target"].as_str().unwrap(), t.to_str().unwrap());
                ("symlink", Some(t.as_os_str().len() as u64))
            }
        };
        assert_eq!(row["type"], ty, "{path}");
        if let Some(size) = size {
            assert_eq!(row["size"].as_u64(), Some(size), "{path}");
        }
        if ty != "symlink" {
            assert_eq!(row["mode"].as_u64(), Some(e.mode as u64), "{path}");
        }
        let ns = e.mtime.0 as i128 * 1_000_000_000 + e.mtime.1 as i128;
        assert_eq!(row["mtime_ns"].as_i64().map(i128::from), Some(ns), "{path}");
    }

    // ls of a subtree lists only that subtree.
    let paths = cairn(&repo, &["ls", "latest", "tree/sub", "--json"])
        .ok()
        .json_paths();
    assert_eq!(
        paths,
        [
            "tree/sub",
            "tree/sub/dir",
            "tree/sub/dir/leaf0.txt",
            "tree/sub/dir/leaf1.txt",
            "tree/sub/dir/leaf2.txt",
            "tree/sub/other.txt"
        ]
    );
}

#[test]
fn stats_and_check_json_are_objects_with_pinned_fields() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    let tree = tmp.path().join("tree");
    let mut rng = Rng::new(4);
    build_sample_tree(&tree, &mut rng);
    cairn(&repo, &["backup", "-q", s(&tree)]).ok();
    write_file(&tree.join("more.txt"), &rng.text(50_000), 0o644);
    cairn(&repo, &["backup", "-q", "--force", s(&tree)]).ok(); // read again: cache hits

    let st = cairn(&repo, &["stats", "--json"]).ok().json();
    assert!(st.is_object(), "stats --json: {st}");
    for k in [
        "logical_bytes",
        "stored_bytes",
        "dedup_ratio",
        "compression_ratio",
        "total_compression",
        "chunks",
        "unique_chunks",
        "bloom_negatives",
        "cache_hits",
        "index_page_reads",
        "prefetches",
        "containers_written",
        "containers_read",
        "index_ram_bytes_per_chunk",
    ] {
        assert!(st[k].is_number(), "stats --json lacks numeric {k}: {st}");
    }
    // Two nearly identical generations: dedup close to 2x, and text compresses.
    let dedup = st["dedup_ratio"].as_f64().unwrap();
    assert!((1.8..=2.2).contains(&dedup), "dedup_ratio {dedup}");
    assert!(st["compression_ratio"].as_f64().unwrap() > 1.0);
    let total = st["total_compression"].as_f64().unwrap();
    let product = dedup * st["compression_ratio"].as_f64().unwrap();
    assert!(
        (total - product).abs() < 1e-6 * total,
        "{total} != {product}"
    );
    assert!(st["unique_chunks"].as_u64().unwrap() <= st["chunks"].as_u64().unwrap());
    assert!(
        st["cache_hits"].as_u64().unwrap() > 0,
        "second backup hit no cache"
    );
    // On-disk bytes by kind add up to every file of the repository (locks
    // and temporaries aside), and their ratio is below the data-only one.
    let d = &st["on_disk"];
    let part = |k: &str| d[k].as_u64().unwrap_or_else(|| panic!("on_disk.{k}: {st}"));
    let parts: u64 = ["data", "metadata", "index", "filter", "snapshots", "other"]
        .iter()
        .map(|k| part(k))
        .sum();
    assert_eq!(parts, part("total"));
    assert_eq!(part("data"), st["compressed_bytes"].as_u64().unwrap());
    assert!(part("index") > 0 && part("snapshots") > 0 && part("metadata") > 0);
    let files: u64 = walk(&repo)
        .iter()
        .filter(|p| {
            p.is_file() && !p.starts_with(repo.join("locks")) && !p.starts_with(repo.join("tmp"))
        })
        .map(|p| p.metadata().unwrap().len())
        .sum();
    assert_eq!(
        part("total"),
        files,
        "every file of the repository counted once"
    );
    let on_disk = st["on_disk_total_compression"].as_f64().unwrap();
    assert!(on_disk > 0.0 && on_disk < total, "{on_disk} vs {total}");

    let check = cairn(&repo, &["check", "--json"]).ok().json();
    assert!(check.is_object(), "check --json: {check}");
    assert_eq!(check["problems"], serde_json::json!([]));
    assert_eq!(check["snapshots"].as_u64(), Some(2));
    let check = cairn(&repo, &["check", "--json", "--read-data"])
        .ok()
        .json();
    assert!(check["chunks_verified"].as_u64().unwrap() > 0);
    assert_eq!(check["problems"], serde_json::json!([]));
}
