//! Snapshot filters (`--host`, `--tag`, `--path`) on every command that
//! takes a snapshot, `snapshots --group-by`, the one id form (8-digit short
//! ids shown, any unique prefix of 4 or more accepted, full ids in JSON),
//! paths inside a snapshot with a leading `/`, absolute source paths,
//! `--verbose`, and generated completions and man pages.

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::Value;

use common::*;

/// Three snapshots: `docs` from host alpha tagged daily+keep, `docs` from
/// host beta tagged daily, `media` from host alpha untagged (backed up by
/// a relative path from `tmp`). Returns (tmp, repo, [ids oldest first]).
fn three_snapshots() -> (tempfile::TempDir, PathBuf, [String; 3]) {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    write_file(&tmp.path().join("docs/a.txt"), b"alpha docs", 0o644);
    write_file(&tmp.path().join("docs/sub/b.txt"), b"bee", 0o644);
    write_file(&tmp.path().join("media/m.bin"), b"media", 0o644);
    let docs = tmp.path().join("docs");
    cairn(
        &repo,
        &[
            "backup",
            "-q",
            s(&docs),
            "--host",
            "alpha",
            "--tag",
            "daily,keep",
        ],
    )
    .ok();
    write_file(&tmp.path().join("docs/a.txt"), b"beta docs!", 0o644);
    cairn(
        &repo,
        &["backup", "-q", s(&docs), "--host", "beta", "--tag", "daily"],
    )
    .ok();
    run_in(
        tmp.path(),
        &repo,
        &["backup", "-q", "media", "--host", "alpha"],
    )
    .ok();
    let ids = snapshot_ids(&repo);
    assert_eq!(ids.len(), 3);
    (tmp, repo, [ids[0].clone(), ids[1].clone(), ids[2].clone()])
}

/// `cairn --repo repo args...` run from `dir`.
fn run_in(dir: &Path, repo: &Path, args: &[&str]) -> Run {
    let child = command(repo, args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawning cairn");
    finish(child, args)
}

fn listed<'a>(repo: &Path, filter: &[&str], ids: &'a [String]) -> Vec<&'a String> {
    let args = [&["snapshots", "--json"][..], filter].concat();
    cairn(repo, &args)
        .ok()
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let id = s["id"].as_str().unwrap();
            ids.iter().find(|i| *i == id).expect("a known id")
        })
        .collect()
}

fn short(id: &str) -> &str {
    &id[..8]
}

#[test]
fn filters_choose_what_snapshots_lists() {
    let (tmp, repo, ids) = three_snapshots();
    let docs = tmp.path().join("docs");
    assert_eq!(listed(&repo, &[], &ids), [&ids[0], &ids[1], &ids[2]]);
    assert_eq!(
        listed(&repo, &["--host", "alpha"], &ids),
        [&ids[0], &ids[2]]
    );
    assert_eq!(
        listed(&repo, &["--host", "alpha", "--host", "beta"], &ids).len(),
        3
    );
    // `a,b`: both tags; repeated options: any of them; `''`: no tags.
    assert_eq!(listed(&repo, &["--tag", "daily,keep"], &ids), [&ids[0]]);
    assert_eq!(listed(&repo, &["--tag", "daily"], &ids), [&ids[0], &ids[1]]);
    assert_eq!(
        listed(&repo, &["--tag", "keep", "--tag", ""], &ids),
        [&ids[0], &ids[2]]
    );
    assert_eq!(
        listed(&repo, &["--path", s(&docs)], &ids),
        [&ids[0], &ids[1]]
    );
    let trailing = format!("{}/", s(&docs));
    assert_eq!(
        listed(&repo, &["--path", &trailing, "--host", "beta"], &ids),
        [&ids[1]]
    );
    assert!(listed(&repo, &["--host", "gamma"], &ids).is_empty());
    // A relative --path is taken from the current directory.
    let media = run_in(
        tmp.path(),
        &repo,
        &["snapshots", "--json", "--path", "media"],
    )
    .ok();
    assert_eq!(media.json()[0]["id"], ids[2].as_str());
    // Human form: only the matching rows.
    let out = cairn(&repo, &["snapshots", "--host", "beta"])
        .ok()
        .stdout_str();
    assert!(out.contains(short(&ids[1])), "{out}");
    assert!(
        !out.contains(short(&ids[0])) && !out.contains(short(&ids[2])),
        "{out}"
    );
}

#[test]
fn latest_is_the_newest_snapshot_of_the_filtered_group() {
    let (tmp, repo, ids) = three_snapshots();
    // ls, cat, restore: `latest` among alpha's docs is the first snapshot.
    let ls = cairn(
        &repo,
        &[
            "ls", "--json", "latest", "--host", "alpha", "--tag", "daily",
        ],
    )
    .ok();
    let entries = ls.json();
    let paths: Vec<&str> = entries
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap())
        .collect();
    assert!(paths.iter().all(|p| p.starts_with("docs")), "{paths:?}");
    let ls = cairn(&repo, &["ls", "--json", "latest", "--host", "alpha"]).ok();
    assert_eq!(ls.json()[0]["path"], "media");
    let cat = cairn(
        &repo,
        &[
            "cat",
            "latest",
            "docs/a.txt",
            "--host",
            "alpha",
            "--tag",
            "keep",
        ],
    )
    .ok();
    assert_eq!(cat.stdout, b"alpha docs");
    let cat = cairn(&repo, &["cat", "latest", "docs/a.txt", "--tag", "daily"]).ok();
    assert_eq!(cat.stdout, b"beta docs!");
    let out = tmp.path().join("out");
    let r = cairn(
        &repo,
        &[
            "--json",
            "restore",
            "latest",
            "-t",
            s(&out),
            "--tag",
            "keep",
        ],
    )
    .ok();
    assert_eq!(r.json()["snapshot"], ids[0].as_str());
    assert_eq!(fs::read(out.join("docs/a.txt")).unwrap(), b"alpha docs");
    // diff and find.
    let d = cairn(
        &repo,
        &["--json", "diff", &ids[0][..4], "latest", "--tag", "daily"],
    )
    .ok();
    assert_eq!(d.json()["new"], ids[1].as_str());
    let f = cairn(&repo, &["--json", "find", "a.txt", "--host", "beta"])
        .ok()
        .json();
    let found: Vec<&str> = f
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["snapshot"].as_str().unwrap())
        .collect();
    assert_eq!(found, [ids[1].as_str()]);
    let f = cairn(
        &repo,
        &["--json", "find", "*", "-s", "latest", "--host", "beta"],
    )
    .ok()
    .json();
    assert!(f
        .as_array()
        .unwrap()
        .iter()
        .all(|m| m["snapshot"] == ids[1].as_str()));
    // fastcopy: `--tag` names the copy's tags, `--filter-tag` filters.
    let c = cairn(
        &repo,
        &[
            "--json",
            "fastcopy",
            "latest",
            "--filter-tag",
            "keep",
            "--tag",
            "copy",
        ],
    )
    .ok()
    .json();
    assert_eq!(c["fastcopy_of"], ids[0].as_str());
    let copy = c["snapshot_id"].as_str().unwrap().to_string();
    // tag: `latest` of host beta.
    let t = cairn(
        &repo,
        &["--json", "tag", "latest", "--host", "beta", "--add", "x"],
    )
    .ok()
    .json();
    assert_eq!(t[0]["old_id"], ids[1].as_str());
    // forget: the policy sees the filtered snapshots only.
    let fg = cairn(
        &repo,
        &[
            "--json",
            "forget",
            "--keep-last",
            "1",
            "--host",
            "alpha",
            "--group-by",
            "",
            "--dry-run",
        ],
    )
    .ok()
    .json();
    let decided: Vec<&str> = fg["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["id"].as_str().unwrap())
        .collect();
    assert_eq!(decided.len(), 3, "{fg}");
    assert!(decided.contains(&copy.as_str()) && decided.contains(&ids[0].as_str()));
    assert!(decided.contains(&ids[2].as_str()));
    // Nothing matches: one line naming the filter.
    let err = cairn(&repo, &["ls", "latest", "--host", "gamma"]).one_line_error();
    assert!(err.contains("no snapshot matches host=gamma"), "{err}");
}

#[test]
fn an_id_outside_the_filter_is_refused() {
    let (_tmp, repo, ids) = three_snapshots();
    for cmd in [
        vec!["ls", short(&ids[1])],
        vec!["cat", short(&ids[1]), "docs/a.txt"],
        vec!["diff", short(&ids[0]), short(&ids[1])],
        vec!["find", "a.txt", "-s", short(&ids[1])],
        vec!["forget", short(&ids[1])],
        vec!["fastcopy", short(&ids[1])],
        vec!["tag", short(&ids[1]), "--add", "x"],
        vec!["repair", "snapshots", short(&ids[1]), "--dry-run"],
    ] {
        let args = [&cmd[..], &["--host", "alpha"]].concat();
        let err = cairn(&repo, &args).one_line_error();
        assert!(err.contains("does not match host=alpha"), "{args:?}: {err}");
    }
    assert_eq!(
        snapshot_ids(&repo),
        ids,
        "a refused command changed nothing"
    );
}

#[test]
fn ids_are_short_in_text_full_in_json_and_any_unique_prefix_works() {
    let (tmp, repo, ids) = three_snapshots();
    let is_short = |w: &str| w.len() == 8 && w.bytes().all(|b| b.is_ascii_hexdigit());
    let b = cairn(&repo, &["backup", s(&tmp.path().join("media"))])
        .ok()
        .stdout_str();
    let shown = b.lines().next().unwrap().split_whitespace().nth(1).unwrap();
    assert!(is_short(shown), "{b}");
    let table = cairn(&repo, &["snapshots"]).ok().stdout_str();
    for line in table.lines().skip(1) {
        assert!(is_short(line.split_whitespace().next().unwrap()), "{table}");
    }
    for spec in [
        &ids[0][..4],
        &ids[0][..8],
        &ids[0][..],
        &ids[0][..6].to_uppercase(),
    ] {
        let r = cairn(&repo, &["--json", "diff", spec, short(&ids[1])])
            .ok()
            .json();
        assert_eq!(r["old"], ids[0].as_str(), "{spec}");
        assert_eq!(r["new"], ids[1].as_str());
    }
    let err = cairn(&repo, &["ls", &ids[0][..3]]).one_line_error();
    assert!(err.contains("at least 4 hex digits"), "{err}");
    let fc = cairn(&repo, &["fastcopy", &ids[0][..5]]).ok().stdout_str();
    let words: Vec<&str> = fc.split_whitespace().collect();
    assert!(
        is_short(words[1]) && words.last() == Some(&short(&ids[0])),
        "{fc}"
    );
    let snaps = snapshots(&repo);
    for sn in &snaps {
        let id = sn["id"].as_str().unwrap();
        assert_eq!(id.len(), 64);
        assert_eq!(sn["short_id"], &id[..8]);
    }
}

#[test]
fn group_by_lists_one_table_per_group_in_both_forms() {
    let (tmp, repo, ids) = three_snapshots();
    let out = cairn(&repo, &["snapshots", "--group-by", "host"])
        .ok()
        .stdout_str();
    assert!(out.contains("snapshots for host=alpha:"), "{out}");
    assert!(out.contains("snapshots for host=beta:"), "{out}");
    let alpha = out.split("host=beta").next().unwrap();
    assert!(
        alpha.contains(short(&ids[0])) && alpha.contains(short(&ids[2])),
        "{out}"
    );
    assert!(!alpha.contains(short(&ids[1])), "{out}");
    let v = cairn(&repo, &["snapshots", "--json", "--group-by", "host,paths"])
        .ok()
        .json();
    let groups = v.as_array().unwrap();
    assert_eq!(groups.len(), 3, "{v}");
    let docs = tmp.path().join("docs").display().to_string();
    assert_eq!(groups[0]["group_key"]["host"], "alpha");
    assert_eq!(groups[0]["group_key"]["paths"], serde_json::json!([docs]));
    assert!(groups[0]["group_key"].get("tags").is_none());
    let members = |g: &Value| -> Vec<String> {
        g["snapshots"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["id"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(members(&groups[0]), [ids[0].clone()]);
    // With a filter, and by tags.
    let v = cairn(
        &repo,
        &[
            "snapshots",
            "--json",
            "--group-by",
            "tags",
            "--tag",
            "daily",
        ],
    )
    .ok()
    .json();
    assert_eq!(v.as_array().unwrap().len(), 2, "{v}");
    let err = cairn(&repo, &["snapshots", "--group-by", "colour"]).one_line_error();
    assert!(err.contains("colour"), "{err}");
}

#[test]
fn snapshot_paths_take_a_leading_slash_as_the_root() {
    let (tmp, repo, ids) = three_snapshots();
    let id = short(&ids[1]);
    let plain = cairn(&repo, &["ls", id, "docs/sub"]).ok().stdout;
    assert!(!plain.is_empty());
    assert_eq!(cairn(&repo, &["ls", id, "/docs/sub"]).ok().stdout, plain);
    assert_eq!(
        cairn(&repo, &["ls", id, "//docs/./sub/"]).ok().stdout,
        plain
    );
    assert_eq!(
        cairn(&repo, &["ls", id, "/"]).ok().stdout,
        cairn(&repo, &["ls", id]).ok().stdout
    );
    assert_eq!(
        cairn(&repo, &["cat", id, "/docs/a.txt"]).ok().stdout,
        b"beta docs!"
    );
    for args in [
        ["cat", id, "/"],
        ["cat", id, "/docs/../docs/a.txt"],
        ["ls", id, "docs/.."],
    ] {
        let err = cairn(&repo, &args).one_line_error();
        assert!(err.contains("snapshot"), "{args:?}: {err}");
    }
    // diff: the same path with or without the leading `/`.
    let diff_at = |path: &str| {
        let v = cairn(&repo, &["--json", "diff", &ids[0][..8], id, path])
            .ok()
            .json();
        assert_eq!(v["path"], path.trim_start_matches('/'));
        let changes: Vec<String> = v["changes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                format!(
                    "{} {}",
                    c["change"].as_str().unwrap(),
                    c["path"].as_str().unwrap()
                )
            })
            .collect();
        changes
    };
    assert_eq!(diff_at("/docs/a.txt"), ["modified docs/a.txt"]);
    assert_eq!(diff_at("docs/a.txt"), ["modified docs/a.txt"]);
    assert_eq!(diff_at("/docs"), ["modified docs/a.txt"]);
    assert!(diff_at("/docs/sub").is_empty());
    let err = cairn(&repo, &["diff", &ids[0][..8], id, "/docs/../etc"]).one_line_error();
    assert!(err.contains(".."), "{err}");
    let err = cairn(&repo, &["diff", &ids[0][..8], id, "/nope"]).one_line_error();
    assert!(err.contains("nope"), "{err}");
    // find: a leading `/` anchors at the root, a bare name matches anywhere.
    let found = |pat: &str| -> Vec<String> {
        cairn(&repo, &["--json", "find", pat, "-s", id])
            .ok()
            .json()
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["path"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(found("sub"), ["docs/sub"]);
    assert!(found("/sub").is_empty());
    assert_eq!(found("/docs/sub"), ["docs/sub"]);
    assert_eq!(found("/docs"), ["docs"]);
    // Source paths are shown absolute, also when given relative.
    let media = tmp.path().join("media").display().to_string();
    let snaps = snapshots(&repo);
    assert_eq!(snaps[2]["paths"], serde_json::json!([media]));
    let table = cairn(&repo, &["snapshots"]).ok().stdout_str();
    assert!(table.contains(&format!("  {media}")), "{table}");
}

#[test]
fn verbose_moves_engine_statistics_behind_a_flag() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    write_file(&tmp.path().join("d/f"), &Rng::new(1).bytes(50_000), 0o644);
    let d = tmp.path().join("d");
    let plain = cairn(&repo, &["backup", s(&d)]).ok().stdout_str();
    assert!(plain.contains("processed 1 files, 1 dirs"), "{plain}");
    assert!(plain.contains("added to the repository"), "{plain}");
    assert!(!plain.contains("lookups"), "{plain}");
    let verbose = cairn(&repo, &["backup", "-v", s(&d)]).ok().stdout_str();
    assert!(!verbose.contains("lookups"), "{verbose}");
    let stats = cairn(&repo, &["backup", "--stats", s(&d)])
        .ok()
        .stdout_str();
    assert!(
        stats.contains("lookups:") && stats.contains("phases:"),
        "{stats}"
    );
    let json = cairn(&repo, &["backup", "--json", s(&d)]).ok().json();
    assert!(json["stats"]["counters"].is_object(), "{json}");
    let out = tmp.path().join("out");
    let r = cairn(&repo, &["--verbose", "restore", "latest", "-t", s(&out)])
        .ok()
        .stdout_str();
    assert!(!r.contains("restore policy"), "{r}");
    let r = cairn(&repo, &["restore", "--stats", "latest", "-t", s(&out)])
        .ok()
        .stdout_str();
    assert!(r.contains("restore policy"), "{r}");
    let r = cairn(&repo, &["snapshots", "-v"]).ok().stdout_str();
    assert!(r.contains("added to the repository"), "{r}");
    cairn(&repo, &["ls", "-v", "latest"]).ok();
    let err = cairn(&repo, &["snapshots", "-q", "-v"]);
    assert_eq!(err.code, Some(2), "{}", err.stderr);
}

#[test]
fn completions_and_man_pages_come_from_the_cli_definition() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    let bash = cairn(&repo, &["completions", "bash"]).ok().stdout_str();
    assert!(
        bash.contains("backup") && bash.contains("--group-by"),
        "{}",
        &bash[..200]
    );
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        let out = cairn(&repo, &["completions", shell]).ok();
        assert!(out.stdout_str().contains("snapshots"), "{shell}");
    }
    assert_eq!(cairn(&repo, &["completions", "tcsh"]).code, Some(2));
    let man = tmp.path().join("man");
    cairn(&repo, &["man", "--out", s(&man)]).ok();
    for page in [
        "cairn.1",
        "cairn-backup.1",
        "cairn-repair-index.1",
        "cairn-snapshots.1",
    ] {
        let text = fs::read_to_string(man.join(page)).unwrap_or_else(|e| panic!("{page}: {e}"));
        assert!(text.contains(".TH"), "{page}");
    }
    let snap = fs::read_to_string(man.join("cairn-snapshots.1")).unwrap();
    assert!(snap.contains("group\\-by"), "{snap}");
    assert!(!repo.exists(), "completions and man need no repository");
}

/// A refused backup (missing path, bad flag value) leaves no repository.
#[test]
fn refused_backups_create_no_repository() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    write_file(&tmp.path().join("d/f"), b"x", 0o644);
    let d = tmp.path().join("d");
    let missing = tmp.path().join("missing");
    let bad: [&[&str]; 10] = [
        &[s(&missing)],
        &[s(&d), "--chunker", "nope"],
        &[s(&d), "--avg-size", "3x"],
        &[s(&d), "--dedup", "sometimes"],
        &[s(&d), "--rewrite", "bad"],
        &[s(&d), "--lookup", "auto"],
        &[s(&d), "--exclude-larger-than", "big"],
        &[s(&d), "--exclude", "["],
        &[s(&d), "--container-size", "1B"],
        &[s(&d), "--lookup", "lazy", "--rewrite", "lbw"],
    ];
    for args in bad {
        let args = [&["backup"][..], args].concat();
        cairn(&repo, &args).one_line_error();
        assert!(!repo.exists(), "{args:?} created the repository");
    }
}
