//! A repository in S3, end to end through the `cairn` binary, against a real
//! S3 server (VersityGW on 127.0.0.1 started by cairn-backend's test
//! support, or the server of `CAIRN_TEST_S3_ENDPOINT`): init (encrypted),
//! backup, a byte-identical restore, `check --read-data`, and the errors of
//! a bad location or credential.

mod common;

use std::path::Path;

use cairn_backend::s3::test_server::S3TestServer;
use common::*;

/// `cairn --repo URL args...` with the server's credentials in the AWS
/// variables (`secret`: a different secret key).
fn cairn_s3(server: &S3TestServer, url: &str, args: &[&str], secret: Option<&str>) -> Run {
    let mut all = vec!["--repo", url];
    all.extend_from_slice(args);
    let env = [
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

#[test]
fn backup_restore_check_in_s3() {
    let server = S3TestServer::start();
    let url = server.url(&server.config());
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
}
