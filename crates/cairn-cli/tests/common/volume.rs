//! `cairn volume` in tests: running its commands, aging a volume's files
//! past a 1 s minimum age, finding a restored file.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::{cairn_env, Run};

/// Runs `cairn ARGS` (a `volume` command, or one on its store) in the test
/// environment.
pub fn volume(args: &[&str]) -> Run {
    cairn_env(args, &[])
}

/// Sets every file directly below `dir` an hour back, then waits until
/// their ctimes are over a second old: eligible under `--min-age 1s`.
pub fn age(dir: &Path) {
    let old = filetime::FileTime::from_system_time(SystemTime::now() - Duration::from_secs(3600));
    for e in std::fs::read_dir(dir).unwrap() {
        filetime::set_file_times(e.unwrap().path(), old, old).unwrap();
    }
    std::thread::sleep(Duration::from_millis(1100));
}

/// The regular file named `name` somewhere below `dir` (empty if none).
pub fn find(dir: &Path, name: &str) -> PathBuf {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            let found = find(&p, name);
            if !found.as_os_str().is_empty() {
                return found;
            }
        } else if p.file_name().unwrap() == name {
            return p;
        }
    }
    PathBuf::new()
}

/// Ends a `cairn volume mount` as Ctrl-C would (SIGTERM): it unmounts and
/// exits 0.
pub fn stop_mount(m: super::fuse::Background) {
    let mnt = m.mnt.clone();
    std::process::Command::new("kill")
        .args(["-TERM", &m.pid().to_string()])
        .status()
        .unwrap();
    m.wait_exit().ok();
    assert!(!super::fuse::is_mounted(&mnt));
}

/// Serves the volume `dir` at `mnt` while `check` uses the mount, then
/// stops the mount. False (after the skip line) when FUSE is unavailable.
pub fn while_mounted(dir: &Path, mnt: &Path, check: impl FnOnce(&Path)) -> bool {
    let Some(m) = super::fuse::volume_mount(dir, mnt) else {
        return false;
    };
    check(mnt);
    stop_mount(m);
    true
}

/// A scratch directory holding a volume `vol` made by `cairn volume create`
/// (with `create_args` added) and an empty mount point `mnt`.
pub fn created(create_args: &[&str]) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("vol");
    let mnt = tmp.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let mut args = vec!["volume", "create", super::s(&dir)];
    args.extend_from_slice(create_args);
    volume(&args).ok();
    (tmp, dir, mnt)
}
