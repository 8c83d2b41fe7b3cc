//! The FUSE layer's tests: whether FUSE can be mounted here (else the test
//! skips with one line, or fails when `CAIRN_TEST_NO_SKIP=1`, as the CLI's
//! tests do), a volume mounted in-process on a temporary backing tree, and
//! a test [`Content`] that serves one file's bytes from memory.

#![allow(dead_code)]

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cairn_volume::content::{read_full_at, Content};
use cairn_volume::fuse::{mount, MountHandle, MountOptions};
use cairn_volume::inode_locks::InodeLocks;
use parking_lot::Mutex;

const NO_SKIP_VAR: &str = "CAIRN_TEST_NO_SKIP";

/// Prints `skipped: <reason>` (the caller returns next), or panics when
/// `CAIRN_TEST_NO_SKIP=1`.
#[track_caller]
pub fn skip_or_fail(reason: &str) {
    if std::env::var(NO_SKIP_VAR).is_ok_and(|v| v == "1") {
        panic!("skipped: {reason} ({NO_SKIP_VAR}=1 makes this a failure)");
    }
    println!("skipped: {reason}");
}

pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// Why FUSE cannot be mounted here, if it cannot.
pub fn fuse_missing() -> Option<String> {
    if !Path::new("/dev/fuse").exists() {
        return Some("/dev/fuse does not exist".into());
    }
    if let Err(e) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/fuse")
    {
        return Some(format!("/dev/fuse cannot be opened by this user: {e}"));
    }
    if !is_root() {
        return Some("mounting in-process needs root".into());
    }
    None
}

/// A mounted volume on a temporary backing tree.
pub struct Vol {
    pub backing: PathBuf,
    pub mnt: PathBuf,
    pub locks: Arc<InodeLocks>,
    handle: Option<MountHandle>,
    _tmp: tempfile::TempDir,
}

impl Vol {
    /// The backing path of `rel`.
    pub fn b(&self, rel: &str) -> PathBuf {
        self.backing.join(rel)
    }

    /// The mount's path of `rel`.
    pub fn m(&self, rel: &str) -> PathBuf {
        self.mnt.join(rel)
    }

    /// Unmounts (every file on it closed) and mounts the same backing tree
    /// again with `content` and `options`.
    pub fn remount(&mut self, content: Arc<dyn Content>, options: MountOptions) {
        self.handle.take().unwrap().unmount().expect("unmount");
        self.locks = InodeLocks::new();
        let h = mount(
            &self.backing,
            &self.mnt,
            content,
            self.locks.clone(),
            options,
        )
        .expect("remount");
        self.handle = Some(h);
    }
}

/// Mounts a fresh backing tree, filled by `prepare` first. `None` (after
/// [`skip_or_fail`]) when FUSE is unavailable.
pub fn mount_with(
    content: Arc<dyn Content>,
    options: MountOptions,
    prepare: impl FnOnce(&Path),
) -> Option<Vol> {
    if let Some(why) = fuse_missing() {
        skip_or_fail(&format!("FUSE unavailable: {why}"));
        return None;
    }
    let tmp = tempfile::tempdir().unwrap();
    let backing = tmp.path().join("files");
    let mnt = tmp.path().join("mnt");
    std::fs::create_dir(&backing).unwrap();
    std::fs::create_dir(&mnt).unwrap();
    prepare(&backing);
    let locks = InodeLocks::new();
    let handle = mount(&backing, &mnt, content, locks.clone(), options).expect("mounting");
    Some(Vol {
        backing,
        mnt,
        locks,
        handle: Some(handle),
        _tmp: tmp,
    })
}

/// Mounts with every file plain and the default options.
pub fn mount_plain(prepare: impl FnOnce(&Path)) -> Option<Vol> {
    mount_with(
        Arc::new(cairn_volume::content::Plain),
        MountOptions::default(),
        prepare,
    )
}

/// Waits (at most 5 s) until `cond` holds: the kernel sends `release`
/// after `close` returns.
pub fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting: {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `n` bytes of a pattern that differs at every offset of a small file
/// and between seeds.
pub fn pattern(seed: u8, n: usize) -> Vec<u8> {
    (0..n)
        .map(|i| {
            (i as u32)
                .wrapping_mul(2_654_435_761)
                .rotate_left(seed as u32 % 31) as u8
                ^ seed
        })
        .collect()
}

/// A content state for tests: the file with inode `ino` is "optimized",
/// its first `data.len()` bytes served from memory (its backing file holds
/// zeros there); a write anywhere recalls all of them into the backing
/// file; a truncate drops what is cut off. Every call is recorded.
#[derive(Default)]
pub struct MemContent {
    pub files: Mutex<HashMap<u64, Vec<u8>>>,
    pub calls: Mutex<Vec<String>>,
    pub released: Mutex<Vec<u64>>,
}

impl MemContent {
    fn log(&self, s: String) {
        self.calls.lock().push(s);
    }

    pub fn count(&self, prefix: &str) -> usize {
        self.calls
            .lock()
            .iter()
            .filter(|c| c.starts_with(prefix))
            .count()
    }

    /// Makes `path` (a backing file) optimized: its bytes kept here, its
    /// backing bytes zeroed (length kept).
    pub fn optimize(&self, path: &Path) {
        let bytes = std::fs::read(path).unwrap();
        let f = File::options().write(true).open(path).unwrap();
        f.write_all_at(&vec![0u8; bytes.len()], 0).unwrap();
        let ino = std::fs::metadata(path).unwrap().ino();
        self.files.lock().insert(ino, bytes);
    }
}

impl Content for MemContent {
    fn read_at(&self, ino: u64, file: &File, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        let n = read_full_at(file, offset, buf)?;
        if let Some(data) = self.files.lock().get(&ino) {
            self.log(format!("read {ino} {offset} {}", buf.len()));
            let start = (offset as usize).min(data.len());
            let end = (offset as usize + n).min(data.len());
            buf[..end - start].copy_from_slice(&data[start..end]);
        }
        Ok(n)
    }

    fn prepare_write(&self, ino: u64, file: &File, offset: u64, len: u64) -> io::Result<()> {
        if let Some(data) = self.files.lock().remove(&ino) {
            self.log(format!("recall {ino} {offset} {len}"));
            file.write_all_at(&data, 0)?;
        }
        Ok(())
    }

    fn truncated(&self, ino: u64, _file: &File, new_size: u64) -> io::Result<()> {
        if let Some(data) = self.files.lock().get_mut(&ino) {
            self.log(format!("truncated {ino} {new_size}"));
            data.truncate(new_size as usize);
        }
        Ok(())
    }

    fn released(&self, ino: u64) -> io::Result<()> {
        self.released.lock().push(ino);
        self.files.lock().remove(&ino);
        Ok(())
    }

    fn is_plain(&self, ino: u64) -> bool {
        !self.files.lock().contains_key(&ino)
    }
}
