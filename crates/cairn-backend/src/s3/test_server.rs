//! A real S3 server for tests (feature `test-support`): nothing mocked.
//!
//! With `CAIRN_TEST_S3_ENDPOINT` set (and `CAIRN_TEST_S3_ACCESS_KEY`,
//! `CAIRN_TEST_S3_SECRET_KEY`, `CAIRN_TEST_S3_BUCKET`, an existing bucket),
//! tests use that server. Otherwise each [`S3TestServer`] starts its own
//! VersityGW (pinned to [`VERSITYGW_VERSION`], its posix backend) on
//! 127.0.0.1 with a free port, a temporary data directory and fixed
//! credentials, and kills it when dropped. The binary is built once with
//! `go install` into `<target>/tools/bin` (a file lock keeps concurrent
//! test processes from building it twice). VersityGW rather than s3s-fs:
//! s3s-fs answers HEAD of a key that is a directory on its disk with 500,
//! and checks `If-None-Match` apart from the write, so two racing
//! conditional PUTs can both succeed (docs/object-storage.md).

use super::{S3Config, DEFAULT_LEASE};
use fs4::fs_std::FileExt;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The pinned version of VersityGW, the server the tests start.
pub const VERSITYGW_VERSION: &str = "v1.8.0";
const VERSITYGW_MODULE: &str = "github.com/versity/versitygw/cmd/versitygw";
const ACCESS_KEY: &str = "cairn-test-key";
const SECRET_KEY: &str = "cairn-test-secret";
const BUCKET: &str = "cairn-test";

/// A running S3 server (or the one named by the environment).
pub struct S3TestServer {
    endpoint: String,
    access_key: String,
    secret_key: String,
    bucket: String,
    child: Option<Child>,
    data_dir: Option<PathBuf>,
}

fn unique(tag: &str) -> String {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!(
        "{tag}-{}-{}-{nanos}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    )
}

fn tools_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    target.join("tools")
}

/// The `versitygw` binary, built first (`go install`, through the Go
/// module proxy) if missing.
pub fn versitygw_binary() -> PathBuf {
    let tools = tools_dir();
    let binary = tools.join("bin").join("versitygw");
    if binary.exists() {
        return binary;
    }
    std::fs::create_dir_all(tools.join("bin")).expect("creating the tools directory");
    let lock = std::fs::File::create(tools.join("install.lock")).expect("install lock file");
    lock.lock_exclusive().expect("locking the tools directory");
    if !binary.exists() {
        eprintln!(
            "building versitygw {VERSITYGW_VERSION} into {} (go install)",
            tools.display()
        );
        // Built aside and renamed into place: a test process that checks
        // `binary.exists()` without the lock never sees half a file.
        let staging = tools.join("staging");
        let status = Command::new("go")
            .args([
                "install",
                &format!("{VERSITYGW_MODULE}@{VERSITYGW_VERSION}"),
            ])
            .env("GOBIN", &staging)
            .status()
            .unwrap_or_else(|e| {
                panic!(
                    "the S3 tests need Go to build VersityGW ({e}); install Go, \
                     or point CAIRN_TEST_S3_ENDPOINT at an S3 server"
                )
            });
        assert!(status.success(), "go install {VERSITYGW_MODULE} failed");
        std::fs::rename(staging.join("versitygw"), &binary).expect("moving versitygw into place");
    }
    binary
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

impl S3TestServer {
    pub fn start() -> S3TestServer {
        if let Ok(endpoint) = std::env::var("CAIRN_TEST_S3_ENDPOINT") {
            let var = |name: &str| {
                std::env::var(name)
                    .unwrap_or_else(|_| panic!("CAIRN_TEST_S3_ENDPOINT is set but {name} is not"))
            };
            return S3TestServer {
                endpoint,
                access_key: var("CAIRN_TEST_S3_ACCESS_KEY"),
                secret_key: var("CAIRN_TEST_S3_SECRET_KEY"),
                bucket: var("CAIRN_TEST_S3_BUCKET"),
                child: None,
                data_dir: None,
            };
        }
        let binary = versitygw_binary();
        let data_dir = std::env::temp_dir().join(unique("cairn-s3-test"));
        // The posix backend keeps a bucket as a directory of its root.
        std::fs::create_dir_all(data_dir.join(BUCKET)).expect("creating the server's data dir");
        for _attempt in 0..5 {
            let port = free_port();
            let log = std::fs::File::create(data_dir.with_extension("log")).expect("server log");
            let mut child = Command::new(&binary)
                .args(["--port", &format!("127.0.0.1:{port}")])
                .args(["--access", ACCESS_KEY, "--secret", SECRET_KEY, "posix"])
                .arg(&data_dir)
                .stdin(Stdio::null())
                .stdout(log.try_clone().expect("server log"))
                .stderr(log)
                .spawn()
                .expect("starting versitygw");
            let deadline = Instant::now() + Duration::from_secs(20);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    break; // exited: most likely the port was taken meanwhile
                }
                if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return S3TestServer {
                        endpoint: format!("http://127.0.0.1:{port}"),
                        access_key: ACCESS_KEY.into(),
                        secret_key: SECRET_KEY.into(),
                        bucket: BUCKET.into(),
                        child: Some(child),
                        data_dir: Some(data_dir),
                    };
                }
                std::thread::sleep(Duration::from_millis(25));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!(
            "versitygw did not start; its log: {}",
            data_dir.with_extension("log").display()
        );
    }

    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    pub fn access_key(&self) -> &str {
        &self.access_key
    }

    pub fn secret_key(&self) -> &str {
        &self.secret_key
    }

    /// A configuration for a fresh, empty repository prefix on this server.
    pub fn config(&self) -> S3Config {
        let mut config = S3Config::new(Some(self.endpoint.clone()), &self.bucket, &unique("repo"));
        config.access_key_id = Some(self.access_key.clone());
        config.secret_access_key = Some(self.secret_key.clone());
        config.lease = DEFAULT_LEASE;
        config
    }

    /// The `s3:` repository URL of `config`'s prefix (for the CLI).
    pub fn url(&self, config: &S3Config) -> String {
        format!("s3:{}/{}/{}", self.endpoint, self.bucket, config.prefix)
    }
}

impl Drop for S3TestServer {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if let Some(dir) = self.data_dir.take() {
            let _ = std::fs::remove_dir_all(&dir);
            let _ = std::fs::remove_file(dir.with_extension("log"));
        }
    }
}
