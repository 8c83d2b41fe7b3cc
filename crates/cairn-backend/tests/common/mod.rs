//! Test helpers: a self-deleting temporary directory (no extra dependency),
//! the one way to skip a test ([`skip_or_fail`], as in cairn-cli's
//! `tests/common`), and running a permission test as an unprivileged user.
// Each test file uses some of these helpers.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};

pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new() -> TempDir {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let path = std::env::temp_dir().join(format!(
            "cairn-backend-test-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Gives up the rest of the test for want of `reason`: prints
/// `skipped: <reason>` (the caller returns next), or panics when
/// `CAIRN_TEST_NO_SKIP=1` (CI), so no test passes there without running.
#[track_caller]
pub fn skip_or_fail(reason: &str) {
    if std::env::var("CAIRN_TEST_NO_SKIP").is_ok_and(|v| v == "1") {
        panic!("skipped: {reason} (CAIRN_TEST_NO_SKIP=1 makes this a failure)");
    }
    println!("skipped: {reason}");
}

/// Runs the test `name` of this test binary again as `nobody` (uid and gid
/// 65534, through util-linux `setpriv`), for a permission test that runs as
/// root: the test's own body then runs where permissions apply. Panics
/// unless that run passed exactly one test; skips ([`skip_or_fail`]) when
/// there is no `setpriv`.
pub fn rerun_unprivileged(name: &str) {
    let exe = std::env::current_exe().expect("the test binary's path");
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(&exe)
        .args(["--exact", name, "--test-threads=1"])
        .output();
    let out = match out {
        Ok(out) => out,
        Err(e) => return skip_or_fail(&format!("running as root without `setpriv`: {e}")),
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("test result: ok. 1 passed"),
        "{name} as an unprivileged user: {}\n{stdout}{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}
