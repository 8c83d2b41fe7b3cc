//! `cairn copy --to` and `cairn init --copy-identity-from` (or restic's
//! `--from-repo SRC --copy-chunker-params`) end to end (docs/copy.md): a
//! destination made by init with the source's identity, a copy to a place
//! holding no repository refused,
//! incremental copies, reruns that move nothing, the destination's own
//! password, refusals of a destination of another identity or without a
//! password, clear repositories, and a local repository copied to S3.

mod common;

use std::path::Path;

use cairn_backend::s3::test_server::S3TestServer;
use common::*;

const OTHER: &str = "the-destination-password";

/// `cairn --repo repo args...` with extra variables.
fn cairn_with(repo: &Path, args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut all = vec!["--repo", s(repo)];
    all.extend_from_slice(args);
    let env: Vec<(&str, &Path)> = env.iter().map(|(k, v)| (*k, Path::new(*v))).collect();
    cairn_env(&all, &env)
}

fn copy_json(src: &Path, dst: &Path, extra: &[&str]) -> serde_json::Value {
    let mut args = vec!["--json", "copy", "--to", s(dst)];
    args.extend_from_slice(extra);
    cairn_with(src, &args, &[("CAIRN_TO_PASSWORD", OTHER)])
        .ok()
        .json()
}

/// `cairn init --repo dst --from-repo src --copy-chunker-params` (restic's
/// spelling), with the destination's own password.
fn init_from(src: &Path, dst: &Path) {
    cairn_with(
        dst,
        &["init", "-q", "--from-repo", s(src), "--copy-chunker-params"],
        &[
            ("CAIRN_FROM_PASSWORD", TEST_PASSWORD),
            ("CAIRN_PASSWORD", OTHER),
        ],
    )
    .ok();
}

fn ids_with(repo: &Path, password: &str) -> Vec<String> {
    cairn_with(
        repo,
        &["snapshots", "--json"],
        &[("CAIRN_PASSWORD", password)],
    )
    .snapshot_ids()
}

#[test]
fn copy_into_a_repository_made_by_init_from_repo_moves_only_what_changed() {
    let tmp = tempfile::tempdir().unwrap();
    let (src, dst) = (tmp.path().join("src"), tmp.path().join("dst"));
    let tree = tmp.path().join("tree");
    build_sample_tree(&tree, &mut Rng::new(41));
    let first = Manifest::capture(&tree);
    cairn(&src, &["backup", "-q", s(&tree)]).ok();
    // No surprise repository: a copy to an empty place says how to make one.
    let e = cairn_with(
        &src,
        &["copy", "--to", s(&dst)],
        &[("CAIRN_TO_PASSWORD", OTHER)],
    )
    .one_line_error();
    assert!(
        e.contains("holds no repository") && e.contains("--copy-chunker-params"),
        "{e}"
    );
    assert!(!dst.exists(), "the refused copy created the destination");
    init_from(&src, &dst);

    let report = copy_json(&src, &dst, &[]);
    assert_eq!(report["snapshots"].as_array().unwrap().len(), 1);
    assert!(report["chunks_copied"].as_u64().unwrap() > 0);
    assert_eq!(
        ids_with(&dst, OTHER),
        snapshot_ids(&src),
        "records keep their names"
    );
    // The destination opens with its own password only.
    let wrong = cairn(&dst, &["snapshots"]).one_line_error();
    assert!(wrong.contains("password"), "{wrong}");
    let out = tmp.path().join("out1");
    cairn_with(
        &dst,
        &["restore", "-q", "latest", "-t", s(&out)],
        &[("CAIRN_PASSWORD", OTHER)],
    )
    .ok();
    assert_tree_matches(&first, &out.join("tree"));

    // One file changes: the second copy moves a few chunks, the first
    // snapshot is already there.
    write_file(&tree.join("big.bin"), &Rng::new(42).bytes(300_000), 0o644);
    let second = Manifest::capture(&tree);
    cairn(&src, &["backup", "-q", s(&tree)]).ok();
    let report = copy_json(&src, &dst, &[]);
    let snaps = report["snapshots"].as_array().unwrap();
    assert_eq!(snaps[0]["skipped"], true);
    assert_eq!(snaps[1]["skipped"], false);
    let moved = snaps[1]["chunks"].as_u64().unwrap();
    assert!(
        moved > 0 && moved * 2 < report["chunks_reached"].as_u64().unwrap() + moved,
        "{report}"
    );
    let out = tmp.path().join("out2");
    cairn_with(
        &dst,
        &["restore", "-q", "latest", "-t", s(&out)],
        &[("CAIRN_PASSWORD", OTHER)],
    )
    .ok();
    assert_tree_matches(&second, &out.join("tree"));
    cairn_with(
        &dst,
        &["check", "--read-data"],
        &[("CAIRN_PASSWORD", OTHER)],
    )
    .ok();

    // A rerun moves nothing; a dry run says so too.
    let rerun = cairn_with(
        &src,
        &["copy", "--to", s(&dst)],
        &[("CAIRN_TO_PASSWORD", OTHER)],
    )
    .ok();
    assert!(
        rerun.stdout_str().contains("already in the destination"),
        "{}",
        rerun.stdout_str()
    );
    let dry = copy_json(&src, &dst, &["--dry-run"]);
    assert_eq!(dry["chunks_copied"], 0);

    // Same identity: a backup of the same tree into the destination stores
    // no data chunk again.
    let backup = cairn_with(
        &dst,
        &["--json", "backup", "--force", s(&tree)],
        &[("CAIRN_PASSWORD", OTHER)],
    )
    .ok()
    .json();
    assert_eq!(backup["stats"]["new_data_chunks"], 0, "{backup}");
}

#[test]
fn init_copy_identity_from_shares_the_identity_and_refuses_conflicts() {
    let tmp = tempfile::tempdir().unwrap();
    let (src, dst) = (tmp.path().join("src"), tmp.path().join("dst"));
    let tree = tmp.path().join("tree");
    build_sample_tree(&tree, &mut Rng::new(43));
    let manifest = Manifest::capture(&tree);
    cairn(&src, &["backup", "-q", s(&tree)]).ok();

    let from = [
        ("CAIRN_FROM_PASSWORD", TEST_PASSWORD),
        ("CAIRN_PASSWORD", OTHER),
    ];
    let e = cairn_with(
        &dst,
        &[
            "init",
            "--copy-identity-from",
            s(&src),
            "--chunker",
            "rabin",
        ],
        &from,
    )
    .one_line_error();
    assert!(e.contains("--chunker"), "{e}");
    if encrypting() {
        let e = cairn_with(
            &dst,
            &[
                "init",
                "--copy-identity-from",
                s(&src),
                "--encryption",
                "none",
            ],
            &from,
        )
        .one_line_error();
        assert!(e.contains("encrypted"), "{e}");
    }
    let e = cairn_with(
        &dst,
        &["init", "--copy-identity-from", s(&src)],
        &[("CAIRN_PASSWORD", OTHER)],
    );
    if encrypting() {
        let e = e.one_line_error();
        assert!(e.contains("CAIRN_FROM_PASSWORD"), "{e}");
        cairn_with(&dst, &["init", "--copy-identity-from", s(&src)], &from).ok();
    } else {
        e.ok();
    }
    cairn_with(
        &src,
        &["copy", "--to", s(&dst)],
        &[("CAIRN_TO_PASSWORD", OTHER)],
    )
    .ok();
    let out = tmp.path().join("out");
    cairn_with(
        &dst,
        &["restore", "-q", "latest", "-t", s(&out)],
        &[("CAIRN_PASSWORD", OTHER)],
    )
    .ok();
    assert_tree_matches(&manifest, &out.join("tree"));
}

#[test]
fn a_destination_of_another_identity_or_without_a_password_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let (src, dst) = (tmp.path().join("src"), tmp.path().join("dst"));
    let tree = tmp.path().join("tree");
    build_sample_tree(&tree, &mut Rng::new(44));
    cairn(&src, &["backup", "-q", s(&tree)]).ok();
    // Another repository, initialised on its own: another key (encrypted)
    // or another fingerprint (clear).
    let fingerprint = if encrypting() { "blake3" } else { "sha256" };
    cairn(&dst, &["init", "--fingerprint", fingerprint]).ok();
    let e = cairn_with(
        &src,
        &["copy", "--to", s(&dst)],
        &[("CAIRN_TO_PASSWORD", TEST_PASSWORD)],
    )
    .one_line_error();
    assert!(e.contains("--copy-identity-from"), "{e}");
    assert!(snapshot_ids(&dst).is_empty());
    if encrypting() {
        let e = cairn(&src, &["copy", "--to", s(&dst)]).one_line_error();
        assert!(e.contains("CAIRN_TO_PASSWORD"), "{e}");
        let e = cairn_with(
            &src,
            &["copy", "--to", s(&dst)],
            &[("CAIRN_TO_PASSWORD", "wrong")],
        )
        .one_line_error();
        assert!(e.contains("password"), "{e}");
    }
    let e = cairn(
        &src,
        &["copy", "--to", s(&tmp.path().join("nowhere")), "--dry-run"],
    )
    .one_line_error();
    assert!(e.contains("holds no repository"), "{e}");
    let e = cairn(&tmp.path().join("missing"), &["copy", "--to", s(&dst)]).one_line_error();
    assert!(e.contains("missing"), "{e}");
}

#[test]
fn clear_repositories_of_default_settings_share_an_identity() {
    set_encryption("none");
    let tmp = tempfile::tempdir().unwrap();
    let (src, dst) = (tmp.path().join("src"), tmp.path().join("dst"));
    let tree = tmp.path().join("tree");
    build_sample_tree(&tree, &mut Rng::new(45));
    let manifest = Manifest::capture(&tree);
    cairn(&src, &["backup", "-q", s(&tree)]).ok();
    cairn(&dst, &["init"]).ok();
    let dry = copy_json(&src, &dst, &["--dry-run"]);
    assert!(snapshot_ids(&dst).is_empty(), "a dry run wrote");
    let real = copy_json(&src, &dst, &[]);
    assert_eq!(dry["chunks_copied"], real["chunks_copied"]);
    let out = tmp.path().join("out");
    cairn(&dst, &["restore", "-q", "latest", "-t", s(&out)]).ok();
    assert_tree_matches(&manifest, &out.join("tree"));

    // Another chunker: the copy is sound, and the warning says what differs.
    let other = tmp.path().join("other");
    cairn(&other, &["init", "--chunker", "rabin"]).ok();
    let run = cairn(&src, &["copy", "--to", s(&other)]).ok();
    assert!(run.stderr.contains("chunker"), "{}", run.stderr);
}

#[test]
fn a_local_repository_copied_to_s3_restores_from_there() {
    let server = S3TestServer::start();
    let config = server.config();
    let url = server.url(&config);
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    let tree = tmp.path().join("tree");
    build_sample_tree(&tree, &mut Rng::new(46));
    let manifest = Manifest::capture(&tree);
    cairn(&src, &["backup", "-q", s(&tree)]).ok();

    let cache = tmp.path().join("cache");
    let env = |password: &'static str| {
        vec![
            ("CAIRN_CACHE_DIR", cache.to_str().unwrap().to_string()),
            ("AWS_ACCESS_KEY_ID", server.access_key().to_string()),
            ("AWS_SECRET_ACCESS_KEY", server.secret_key().to_string()),
            ("AWS_SESSION_TOKEN", String::new()),
            ("AWS_ENDPOINT_URL", String::new()),
            ("CAIRN_TO_PASSWORD", OTHER.to_string()),
            ("CAIRN_PASSWORD", password.to_string()),
        ]
    };
    let run = |args: &[&str], password: &'static str| {
        let e = env(password);
        let pairs: Vec<(&str, &Path)> =
            e.iter().map(|(k, v)| (*k, Path::new(v.as_str()))).collect();
        cairn_env(args, &pairs)
    };
    let from = [
        "--repo",
        &url,
        "init",
        "-q",
        "--from-repo",
        s(&src),
        "--copy-chunker-params",
    ];
    let e = env(OTHER);
    let mut pairs: Vec<(&str, &Path)> =
        e.iter().map(|(k, v)| (*k, Path::new(v.as_str()))).collect();
    pairs.push(("CAIRN_FROM_PASSWORD", Path::new(TEST_PASSWORD)));
    cairn_env(&from, &pairs).ok();
    run(&["--repo", s(&src), "copy", "--to", &url], TEST_PASSWORD).ok();
    let out = tmp.path().join("out");
    run(
        &["--repo", &url, "restore", "-q", "latest", "-t", s(&out)],
        OTHER,
    )
    .ok();
    assert_tree_matches(&manifest, &out.join("tree"));
    run(&["--repo", &url, "check", "--read-data"], OTHER).ok();
    let again = run(
        &["--repo", s(&src), "--json", "copy", "--to", &url],
        TEST_PASSWORD,
    )
    .ok()
    .json();
    assert_eq!(again["chunks_copied"], 0);
}

#[test]
fn copy_shows_progress_on_a_terminal_only() {
    let tmp = tempfile::tempdir().unwrap();
    let (src, dst) = (tmp.path().join("src"), tmp.path().join("dst"));
    let tree = tmp.path().join("tree");
    // Enough to move that the bar is drawn a few times.
    write_file(&tree.join("big.bin"), &Rng::new(47).bytes(6 << 20), 0o644);
    cairn(&src, &["backup", "-q", s(&tree)]).ok();
    let password = tmp.path().join("to-password");
    std::fs::write(&password, OTHER).unwrap();
    let to = |dst: &Path| {
        vec![
            "copy".to_string(),
            "--to".into(),
            s(dst).into(),
            "--to-password-file".into(),
            s(&password).into(),
        ]
    };
    fn args(v: &[String]) -> Vec<&str> {
        v.iter().map(String::as_str).collect()
    }

    init_from(&src, &dst);
    let Some(out) = on_terminal(&src, &args(&to(&dst))) else {
        return;
    };
    // The bar: the snapshots to copy as items, the bytes moved beside them.
    assert!(out.contains("copy ["), "no bar:\n{out}");
    assert!(out.contains("/1 "), "no count of the snapshots:\n{out}");

    // -q: nothing drawn. Off a terminal: one line per snapshot, no bar.
    let quiet = tmp.path().join("dst-quiet");
    init_from(&src, &quiet);
    let mut q = vec!["-q".to_string()];
    q.extend(to(&quiet));
    let out = on_terminal(&src, &args(&q)).unwrap();
    assert!(!out.contains("copy [") && !out.contains("copying"), "{out}");
    let piped = tmp.path().join("dst-piped");
    init_from(&src, &piped);
    let run = cairn(&src, &args(&to(&piped))).ok();
    assert!(run.stderr.contains("copying snapshot"), "{}", run.stderr);
    assert!(!run.stderr.contains("copy ["), "{}", run.stderr);
}
