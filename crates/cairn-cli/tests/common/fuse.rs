//! `cairn mount` in tests: whether FUSE can work here, starting a mount and
//! waiting for it, and a background process that is killed and unmounted
//! when a test fails while it runs.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::environment::is_root;
use super::{command, finish, s, skip_or_fail, Run};

/// Why FUSE cannot be used here, if it cannot (checked before mounting).
pub fn fuse_missing() -> Option<String> {
    if !Path::new("/dev/fuse").exists() {
        return Some("/dev/fuse does not exist".into());
    }
    if !is_root() && fusermount().is_none() {
        return Some("no fusermount3 or fusermount for a non-root user".into());
    }
    // The mount opens the device itself (fuser falls back to fusermount
    // only where it is missing): a device this user may not open (mode
    // 0600 in some containers) leaves FUSE out of reach, which root, as
    // CI runs, never meets.
    if let Err(e) = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/fuse")
    {
        return Some(format!("/dev/fuse cannot be opened by this user: {e}"));
    }
    None
}

/// The fusermount helper on PATH, if any.
pub fn fusermount() -> Option<&'static str> {
    ["fusermount3", "fusermount"].into_iter().find(|b| {
        Command::new(b)
            .arg("-V")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok()
    })
}

pub fn is_mounted(mnt: &Path) -> bool {
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let want = mnt.to_string_lossy();
    mountinfo
        .lines()
        .any(|l| l.split(' ').nth(4) == Some(want.as_ref()))
}

/// A `cairn` process running in the background (a mount, or a command
/// waiting on one); killed, and `mnt` lazily unmounted if mounted, when a
/// test fails while it runs.
pub struct Background {
    /// The arguments, for messages.
    pub args: &'static [&'static str],
    pub child: Option<Child>,
    pub mnt: PathBuf,
}

impl Drop for Background {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        if is_mounted(&self.mnt) {
            let _ = Command::new("umount").arg("-l").arg(&self.mnt).status();
        }
        if is_mounted(&self.mnt) {
            if let Some(f) = fusermount() {
                let _ = Command::new(f).arg("-u").arg("-z").arg(&self.mnt).status();
            }
        }
    }
}

impl Background {
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// Waits for the process to exit (at most 30 s) and returns its run.
    pub fn wait_exit(mut self) -> Run {
        let mut child = self.child.take().expect("running");
        let deadline = Instant::now() + Duration::from_secs(30);
        while child.try_wait().expect("polling cairn mount").is_none() {
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("the background cairn did not exit in time");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        finish(child, self.args)
    }
}

/// Starts `cairn mount` and waits until the mount is there. `None` (after
/// [`skip_or_fail`]) when FUSE is unavailable; a mount that fails for any
/// other reason fails the test.
pub fn mount(repo: &Path, mnt: &Path) -> Option<Background> {
    let mnt = fs::canonicalize(mnt).unwrap();
    let c = command(repo, &["mount", s(&mnt)]);
    mount_with(c, &["mount"], &mnt)
}

/// Starts `cairn volume mount DIR MNT` and waits until the mount is there,
/// as [`mount`].
pub fn volume_mount(dir: &Path, mnt: &Path) -> Option<Background> {
    let mnt = fs::canonicalize(mnt).unwrap();
    let mut c = super::base_command();
    c.args(["volume", "mount", s(dir), s(&mnt)]);
    mount_with(c, &["volume", "mount"], &mnt)
}

/// [`volume_mount`] with more options (`--optimize-every 1s`).
pub fn volume_mount_with(dir: &Path, mnt: &Path, options: &[&str]) -> Option<Background> {
    let mnt = fs::canonicalize(mnt).unwrap();
    let mut c = super::base_command();
    c.args(["volume", "mount", s(dir), s(&mnt)]).args(options);
    mount_with(c, &["volume", "mount"], &mnt)
}

/// Runs the mount command `c` (named `args` in messages) in the
/// background until `mnt` is mounted.
fn mount_with(mut c: Command, args: &'static [&'static str], mnt: &Path) -> Option<Background> {
    if let Some(why) = fuse_missing() {
        skip_or_fail(&format!("FUSE unavailable: {why}"));
        return None;
    }
    let child = c
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawning the mount");
    let mut m = Background {
        args,
        child: Some(child),
        mnt: mnt.to_path_buf(),
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while !is_mounted(mnt) {
        let child = m.child.as_mut().unwrap();
        if child.try_wait().unwrap().is_some() {
            let run = finish(m.child.take().unwrap(), args);
            panic!("{args:?} exited early: {:?}\n{}", run.code, run.stderr);
        }
        assert!(Instant::now() < deadline, "the mount did not appear");
        std::thread::sleep(Duration::from_millis(50));
    }
    Some(m)
}
