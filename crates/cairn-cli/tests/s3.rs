//! A repository in S3, end to end through the `cairn` binary, against a real
//! S3 server (VersityGW on 127.0.0.1 started by cairn-backend's test
//! support, or the server of `CAIRN_TEST_S3_ENDPOINT`): init (encrypted),
//! backup, a byte-identical restore, `check --read-data`, the local
//! metadata cache (used, deleted, damaged, turned off), and the errors of a
//! bad location or credential.

mod common;

use std::path::Path;

use cairn_backend::s3::test_server::S3TestServer;
use common::*;

/// `cairn --repo URL args...` with the server's credentials in the AWS
/// variables (`secret`: a different secret key), the metadata cache in a
/// directory of the server's test (never the user's).
fn cairn_s3(server: &S3TestServer, url: &str, args: &[&str], secret: Option<&str>) -> Run {
    let mut all = vec!["--repo", url];
    all.extend_from_slice(args);
    let cache = cache_dir(server);
    let env = [
        ("CAIRN_CACHE_DIR", cache.as_path()),
        ("AWS_ACCESS_KEY_ID", Path::new(server.access_key())),
        (
            "AWS_SECRET_ACCESS_KEY",
            Path::new(secret.unwrap_or(server.secret_key())),
        ),
        ("AWS_SESSION_TOKEN", Path::new("")),
        ("AWS_ENDPOINT_URL", Path::new("")),
    ];
    cairn_env(&all, &env)
}

/// The metadata cache of the commands run against `server`'s repositories.
fn cache_dir(server: &S3TestServer) -> std::path::PathBuf {
    std::env::temp_dir().join(format!(
        "cairn-test-cache-{}-{}",
        std::process::id(),
        server.endpoint().rsplit(':').next().unwrap_or("")
    ))
}

/// Files under `dir`, recursively.
fn files_under(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else {
                out.push(e.path());
            }
        }
    }
    out
}

#[test]
fn backup_restore_check_in_s3() {
    let server = S3TestServer::start();
    let config = server.config();
    let url = server.url(&config);
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("tree");
    build_sample_tree(&src, &mut Rng::new(14));
    let tree = Manifest::capture(&src);

    let init = cairn_s3(&server, &url, &["init"], None).ok();
    assert!(init.stdout_str().contains(&url), "{}", init.stdout_str());
    let again = cairn_s3(&server, &url, &["init"], None).one_line_error();
    assert!(
        again.contains("already holds a cairn repository"),
        "{again}"
    );

    cairn_s3(&server, &url, &["backup", "-q", s(&src)], None).ok();
    // A second backup of the same tree: the parent's files, nothing new.
    cairn_s3(&server, &url, &["backup", "-q", s(&src)], None).ok();
    let listed = cairn_s3(&server, &url, &["snapshots", "--json"], None).ok();
    assert_eq!(listed.json().as_array().map(Vec::len), Some(2));

    let out = tmp.path().join("out");
    cairn_s3(
        &server,
        &url,
        &["restore", "-q", "latest", "--target", s(&out)],
        None,
    )
    .ok();
    assert_tree_matches(&tree, &out.join("tree"));

    cairn_s3(&server, &url, &["check", "--read-data"], None).ok();

    let wrong = cairn_s3(&server, &url, &["snapshots"], Some("not-the-secret")).one_line_error();
    assert!(wrong.contains(server.endpoint()), "{wrong}");

    // The backups filled the metadata cache (index files, container
    // tails); damaged, deleted or turned off, restores stay byte-identical.
    let cache = cache_dir(&server);
    let entries = files_under(&cache);
    assert!(
        entries
            .iter()
            .any(|p| p.to_string_lossy().contains("/containers/"))
            && entries
                .iter()
                .any(|p| p.to_string_lossy().contains("/index/")),
        "{entries:?}"
    );
    for p in &entries {
        let mut b = std::fs::read(p).unwrap();
        if let Some(last) = b.last_mut() {
            *last ^= 0x5a;
        }
        std::fs::write(p, b).unwrap();
    }
    let restore = |out: &Path, extra: &[&str]| {
        let mut args = vec!["restore", "-q", "latest", "--target", s(out)];
        args.extend_from_slice(extra);
        cairn_s3(&server, &url, &args, None).ok();
        assert_tree_matches(&tree, &out.join("tree"));
    };
    restore(&tmp.path().join("damaged-cache"), &[]);
    std::fs::remove_dir_all(&cache).unwrap();
    restore(&tmp.path().join("no-cache"), &["--no-cache"]);
    assert!(!cache.exists(), "--no-cache wrote a cache");
    restore(&tmp.path().join("fresh-cache"), &[]);
    assert!(!files_under(&cache).is_empty());

    // `check` judges the store's objects, not the cache's copies: a
    // container tail damaged on the store is found though the cache holds
    // a sound one.
    let store = cairn_backend::S3Backend::open(config).unwrap();
    use cairn_core::Backend;
    let container = store
        .list("containers/")
        .unwrap()
        .into_iter()
        .next()
        .unwrap();
    let mut bytes = store.read(&container).unwrap();
    let at = bytes.len() - 100;
    bytes[at] ^= 0x40;
    store.write_atomic(&container, &bytes).unwrap();
    let report = cairn_s3(&server, &url, &["check"], None).code(1);
    assert!(
        report.stdout_str().contains(&container) || report.stdout_str().contains("container"),
        "{}",
        report.stdout_str()
    );
    std::fs::remove_dir_all(&cache).unwrap();
}

#[test]
fn bad_s3_locations_are_one_line_errors() {
    let server = S3TestServer::start();
    for url in ["s3:ftp://host/bucket", "s3:https://host", "s3://"] {
        let msg = cairn_s3(&server, url, &["snapshots"], None).one_line_error();
        assert!(msg.contains("invalid repository"), "{msg}");
    }
    let missing = format!("s3:{}/no-such-bucket/repo", server.endpoint());
    let msg = cairn_s3(&server, &missing, &["snapshots"], None).one_line_error();
    assert!(msg.contains("does not exist"), "{msg}");
    let empty = server.url(&server.config());
    let msg = cairn_s3(&server, &empty, &["snapshots"], None).one_line_error();
    assert!(msg.contains("not a cairn repository"), "{msg}");
    // A backup without --init into a prefix holding no repository says how
    // to create one and writes nothing (found by the open's own read of
    // the config, no separate look first).
    let tree = tempfile::tempdir().unwrap();
    std::fs::write(tree.path().join("a"), b"a").unwrap();
    let tree = tree.path().to_str().unwrap();
    let msg = cairn_s3(&server, &empty, &["backup", tree], None).one_line_error();
    assert!(
        msg.contains("no repository at") && msg.contains("cairn init --repo"),
        "{msg}"
    );
    let msg = cairn_s3(&server, &empty, &["snapshots"], None).one_line_error();
    assert!(msg.contains("not a cairn repository"), "{msg}");
}
