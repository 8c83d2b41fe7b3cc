//! The volume directory (docs/volume.md, "Layout"; docs/FORMAT.md,
//! "Volume"): where each part lives, `volume.json`, and the lock that
//! keeps a second opener out.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use cairn_core::{Error, Result};

use crate::policy::Policy;

/// The version of the volume layout `volume.json` records.
pub const VOLUME_VERSION: u32 = 1;

/// The paths of a volume directory.
#[derive(Clone, Debug)]
pub struct VolumeDir {
    root: PathBuf,
}

impl VolumeDir {
    pub fn new(root: &Path) -> Self {
        VolumeDir {
            root: root.to_path_buf(),
        }
    }
    pub fn root(&self) -> &Path {
        &self.root
    }
    /// `volume.json`: version, id, policy.
    pub fn config(&self) -> PathBuf {
        self.root.join("volume.json")
    }
    /// The backing tree.
    pub fn files(&self) -> PathBuf {
        self.root.join("files")
    }
    /// The chunk store (a cairn repository).
    pub fn store(&self) -> PathBuf {
        self.root.join("store")
    }
    /// The stream-map table.
    pub fn state(&self) -> PathBuf {
        self.root.join("state")
    }
    /// Each partition key's chunk log (`partitions.rs`; derived data).
    pub fn partitions(&self) -> PathBuf {
        self.root.join("partitions.json")
    }
    /// `flock`ed by whoever has the volume open.
    pub fn lock(&self) -> PathBuf {
        self.root.join("volume.lock")
    }
}

/// `volume.json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VolumeConfig {
    pub version: u32,
    /// Random hex id, fixed at creation.
    pub id: String,
    pub policy: Policy,
}

impl VolumeConfig {
    pub fn read(dir: &VolumeDir) -> Result<Self> {
        let path = dir.config();
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(Error::invalid(format!(
                "{} is not a cairn volume (no volume.json; create one with `cairn volume create`)",
                dir.root().display()
            )))
            }
            Err(e) => return Err(Error::io(format!("reading {}", path.display()), e)),
        };
        let config: VolumeConfig = serde_json::from_slice(&bytes)
            .map_err(|e| Error::corrupt(path.display().to_string(), e.to_string()))?;
        if config.version != VOLUME_VERSION {
            return Err(Error::UnsupportedVersion {
                what: "volume".into(),
                found: config.version,
                supported: VOLUME_VERSION,
            });
        }
        Ok(config)
    }

    /// Writes `volume.json` durably ([`write_json`]).
    pub fn write(&self, dir: &VolumeDir) -> Result<()> {
        write_json(dir, &dir.config(), self)
    }
}

/// Writes `value` as JSON to `path` (a file of the volume directory's
/// root) durably: `<path>.tmp` written and fsynced, renamed over the old
/// file, and the directory fsynced.
pub fn write_json(dir: &VolumeDir, path: &Path, value: &impl Serialize) -> Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let io_err = |e| Error::io(format!("writing {}", path.display()), e);
    let mut bytes = serde_json::to_vec_pretty(value).expect("the volume's JSON serializes");
    bytes.push(b'\n');
    let mut f = File::create(&tmp).map_err(io_err)?;
    f.write_all(&bytes).map_err(io_err)?;
    f.sync_all().map_err(io_err)?;
    fs::rename(&tmp, path).map_err(io_err)?;
    sync_dir(dir.root()).map_err(io_err)
}

/// Fsyncs a directory, so the names created or renamed in it are durable.
pub fn sync_dir(path: &Path) -> io::Result<()> {
    File::open(path)?.sync_all()
}

/// The exclusive `flock` on `volume.lock`, held until dropped.
#[derive(Debug)]
pub struct VolumeLock {
    _file: File,
}

impl VolumeLock {
    /// Takes the lock without waiting: a volume already open elsewhere is
    /// one clear error.
    pub fn take(dir: &VolumeDir) -> Result<Self> {
        let path = dir.lock();
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
        match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {
                // The holder's pid, for a client told the volume is busy;
                // best effort (the lock is what counts).
                let _ = file.set_len(0);
                let _ = (&file).write_all(format!("{}\n", std::process::id()).as_bytes());
                Ok(VolumeLock { _file: file })
            }
            Err(rustix::io::Errno::WOULDBLOCK) => Err(Error::invalid(format!(
                "volume {} is open elsewhere (mounted, or another cairn volume command is \
                 running); try again when it is done",
                dir.root().display()
            ))),
            Err(e) => Err(Error::io(format!("locking {}", path.display()), e.into())),
        }
    }
}
