//! What a test needs from the machine it runs on: the one way to skip a test
//! whose environment lacks something ([`skip_or_fail`], fatal in CI), and
//! running `cairn` as an unprivileged user so that permission tests mean
//! something when the suite runs as root ([`unprivileged_cairn`]), and a
//! pseudo-terminal for output drawn only on one ([`on_terminal`]).

use std::path::Path;
use std::process::{Command, Stdio};

use super::{arg_list, base_command, Run};

/// Set to `1`, every skip is a failure: CI sets it (`.ci/run`), so a test
/// that cannot run there fails instead of passing unseen.
pub const NO_SKIP_VAR: &str = "CAIRN_TEST_NO_SKIP";

/// Gives up the rest of the test for want of `reason` (a missing tool, a
/// file system without a feature): prints `skipped: <reason>` and returns,
/// so the caller returns next; panics instead when `CAIRN_TEST_NO_SKIP=1`.
#[track_caller]
pub fn skip_or_fail(reason: &str) {
    if std::env::var(NO_SKIP_VAR).is_ok_and(|v| v == "1") {
        panic!("skipped: {reason} ({NO_SKIP_VAR}=1 makes this a failure)");
    }
    println!("skipped: {reason}");
}

/// Whether the tests run as root (file permissions do not stop root).
pub fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

/// The user and group (`nobody`) a permission test runs `cairn` as when the
/// suite runs as root.
pub const UNPRIVILEGED_ID: u32 = 65534;

/// Runs `cairn --repo repo args...` where permissions apply: directly when
/// the tests are not root; as root, as [`UNPRIVILEGED_ID`] through
/// util-linux `setpriv`, after handing everything under `owned` (the
/// repository, the source tree, a cache directory) to that user with
/// `chown -R`. Modes are kept, so a chmod-000 file stays unreadable.
/// `None` (after [`skip_or_fail`]) when root has no `setpriv`.
pub fn unprivileged_cairn(owned: &Path, repo: &Path, args: &[&str]) -> Option<Run> {
    let mut c = base_command();
    if is_root() {
        let setpriv = Command::new("setpriv")
            .arg("--version")
            .stdout(Stdio::null())
            .status();
        if !setpriv.is_ok_and(|s| s.success()) {
            skip_or_fail("running as root without util-linux `setpriv` to drop privileges");
            return None;
        }
        let id = UNPRIVILEGED_ID.to_string();
        let chown = Command::new("chown")
            .args(["-R", &format!("{id}:{id}")])
            .arg(owned)
            .status()
            .expect("running chown");
        assert!(chown.success(), "chown -R {}", owned.display());
        // `setpriv` runs the binary with the test environment `c` holds.
        let mut wrapped = Command::new("setpriv");
        wrapped
            .args([&format!("--reuid={id}"), &format!("--regid={id}")])
            .args(["--clear-groups", "--"])
            .arg(c.get_program());
        for (k, v) in c.get_envs() {
            match v {
                Some(v) => wrapped.env(k, v),
                None => wrapped.env_remove(k),
            };
        }
        c = wrapped;
    }
    // Anything cairn caches goes below `owned`, where it may write.
    c.env("XDG_CACHE_HOME", owned.join(".cache"))
        .arg("--repo")
        .arg(repo)
        .args(args)
        .stdin(Stdio::null());
    let out = c.output().expect("running cairn");
    Some(Run::from_output(arg_list(Some(repo), args), out))
}

/// A tmpfs mounted for a test (root only), unmounted when dropped.
pub struct Tmpfs(std::path::PathBuf);

impl Tmpfs {
    /// Mounts a tmpfs of `size` (a mount option value: `1m`, `8m`) at
    /// `dir` (created if missing), or skips the test through
    /// [`skip_or_fail`] and returns `None` where mounting is not permitted.
    pub fn mount(dir: &Path, size: &str) -> Option<Tmpfs> {
        std::fs::create_dir_all(dir).unwrap();
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .output();
        match mounted {
            Ok(o) if o.status.success() => Some(Tmpfs(dir.to_path_buf())),
            // Mounting a tmpfs needs root (CI runs as root).
            Ok(o) => {
                let why = String::from_utf8_lossy(&o.stderr);
                skip_or_fail(&format!("cannot mount a small tmpfs: {}", why.trim()));
                None
            }
            Err(e) => {
                skip_or_fail(&format!("cannot run mount for a small tmpfs: {e}"));
                None
            }
        }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// Runs `cairn args` on a pseudo-terminal (util-linux `script`), so the
/// progress bar is drawn; returns everything it wrote, or `None`
/// ([`skip_or_fail`]) where `script` is missing.
pub fn on_terminal(repo: &Path, args: &[&str]) -> Option<String> {
    if std::process::Command::new("script")
        .arg("--version")
        .output()
        .is_err()
    {
        skip_or_fail("util-linux `script` is not installed (needed for a terminal)");
        return None;
    }
    let mut line = format!("{} --repo {}", super::BIN, super::s(repo));
    for a in super::init_if_missing(repo, args) {
        line += &format!(" '{a}'");
    }
    let mut script = std::process::Command::new("script");
    super::test_env(&mut script);
    let out = script
        .args(["-qec", &line, "/dev/null"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}
