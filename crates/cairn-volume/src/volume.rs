//! An open volume: its directory locked, its chunk store and stream-map
//! table open, and recovery run (docs/volume.md, "Layout" and the
//! crash-safety argument).

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Arc;

use cairn_core::{ChunkerConfig, Error, Result};
use cairn_crypto::{Algorithm, KdfParams, Password};
use cairn_engine::config::{IndexConfig, IndexKind};
use cairn_engine::{MasterKeySource, RepoConfig, Repository};

use crate::backing;
use crate::inode_locks::InodeLocks;
use crate::layout::{sync_dir, VolumeConfig, VolumeDir, VolumeLock, VOLUME_VERSION};
use crate::policy::Policy;
use crate::scheduler::{JobBudget, Pacer, Scheduler};
use crate::state::{Change, Entry, Identity, StreamMapTable};
use crate::volume_content::VolumeContent;
use crate::walk;

/// Average chunk size of a volume's store: 64 KiB, as 004's regression
/// chunking.
pub const VOLUME_AVG_CHUNK: u32 = 64 << 10;

/// How a new volume's chunk store is encrypted.
pub struct StoreEncryption {
    pub algorithm: Algorithm,
    pub password: Password,
    pub kdf: KdfParams,
}

/// What `Volume::create` makes.
pub struct VolumeSettings {
    pub policy: Policy,
    /// `None`: a clear store (scratch data on a trusted disk).
    pub encryption: Option<StoreEncryption>,
}

/// The chunk store's settings (004): regression chunking at about 64 KiB
/// average, the RAM-frugal index, selective compression (the repository
/// default: zstd, a chunk stored raw unless it saves 10%).
pub fn store_config() -> Result<RepoConfig> {
    let mut cfg = Repository::default_config();
    cfg.chunker = ChunkerConfig::from_name("regression", VOLUME_AVG_CHUNK)?;
    cfg.index.kind = IndexKind::Frugal;
    cfg.index.expected_chunks = IndexConfig::NEW_REPOSITORY_EXPECTED_CHUNKS;
    cfg.rewrite = cfg.index.lookup.strategy.default_rewrite();
    cfg.validate()?;
    Ok(cfg)
}

/// What opening the volume repaired (docs/volume.md, recovery).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recovery {
    /// Entries whose backing file still held stream-map bytes: punched.
    pub punched: u64,
    /// Entries whose `valid` passed the backing file's length: clipped.
    /// (A file's times recorded by an unfinished switch are put back too.)
    pub clipped: u64,
    /// Entries whose file is gone (or whose inode now holds another file),
    /// or that no longer hold a stream-map byte: dropped.
    pub dropped: u64,
    /// Entries whose backing file was written outside the volume since its
    /// switch (data where the switch punched): what was written recalled,
    /// never punched.
    pub written_outside: u64,
}

/// An open volume. Only one exists per directory at a time (`volume.lock`).
pub struct Volume {
    dir: VolumeDir,
    config: VolumeConfig,
    repo: Repository,
    table: Arc<StreamMapTable>,
    locks: Arc<InodeLocks>,
    /// The content state, made on first use and shared from then on.
    content: parking_lot::Mutex<Option<Arc<VolumeContent>>>,
    /// The scheduler that paces this volume's jobs, and each job's budget
    /// (set by the mount daemon; `None`: jobs run unpaced).
    scheduler: parking_lot::Mutex<Option<(Arc<Scheduler>, JobBudget)>>,
    recovery: Recovery,
    _lock: VolumeLock,
}

impl Volume {
    /// Creates a volume in `root` (absent or an empty directory) and opens
    /// it. `volume.json` is written last: a crash before leaves a directory
    /// that is not a volume, which `create` then refuses (not empty).
    pub fn create(root: &Path, settings: VolumeSettings) -> Result<Volume> {
        settings.policy.compile()?;
        let dir = VolumeDir::new(root);
        match fs::read_dir(root) {
            Ok(mut entries) => {
                if entries.next().is_some() {
                    return Err(Error::invalid(format!(
                        "{} is not empty: a volume is created in a new or empty directory",
                        root.display()
                    )));
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                fs::create_dir_all(root)
                    .map_err(|e| Error::io(format!("creating {}", root.display()), e))?;
            }
            Err(e) => return Err(Error::io(format!("reading {}", root.display()), e)),
        }
        let lock = VolumeLock::take(&dir)?;
        for sub in [dir.files(), dir.state()] {
            fs::create_dir(&sub)
                .map_err(|e| Error::io(format!("creating {}", sub.display()), e))?;
        }
        let cfg = store_config()?;
        let repo = match settings.encryption {
            None => Repository::init_local(&dir.store(), cfg)?,
            Some(enc) => Repository::init_local_encrypted(
                &dir.store(),
                cfg,
                enc.algorithm,
                &enc.password,
                enc.kdf,
                cairn_engine::crypto::local_key_label(),
            )?,
        };
        let table = StreamMapTable::open(&dir.state())?;
        sync_dir(root).map_err(|e| Error::io(format!("syncing {}", root.display()), e))?;
        let config = VolumeConfig {
            version: VOLUME_VERSION,
            id: Repository::default_config().id,
            policy: settings.policy,
        };
        config.write(&dir)?;
        Ok(Volume {
            dir,
            config,
            repo,
            table: Arc::new(table),
            locks: InodeLocks::new(),
            content: parking_lot::Mutex::new(None),
            scheduler: parking_lot::Mutex::new(None),
            recovery: Recovery::default(),
            _lock: lock,
        })
    }

    /// Opens the volume in `root`: takes its lock (a second opener gets one
    /// clear error), opens the store (`master_key` decides an encrypted
    /// store's key, asked only if it is encrypted) and the stream-map
    /// table, and runs recovery.
    pub fn open(root: &Path, master_key: &mut MasterKeySource<'_>) -> Result<Volume> {
        let dir = VolumeDir::new(root);
        let config = VolumeConfig::read(&dir)?;
        let lock = VolumeLock::take(&dir)?;
        let repo = Repository::open_local_with_master_key(&dir.store(), master_key)?;
        let table = Arc::new(StreamMapTable::open(&dir.state())?);
        let mut vol = Volume {
            dir,
            config,
            repo,
            table,
            locks: InodeLocks::new(),
            content: parking_lot::Mutex::new(None),
            scheduler: parking_lot::Mutex::new(None),
            recovery: Recovery::default(),
            _lock: lock,
        };
        vol.recovery = vol.recover()?;
        Ok(vol)
    }

    pub fn dir(&self) -> &VolumeDir {
        &self.dir
    }
    pub fn config(&self) -> &VolumeConfig {
        &self.config
    }
    pub fn repo(&self) -> &Repository {
        &self.repo
    }
    pub fn table(&self) -> &Arc<StreamMapTable> {
        &self.table
    }
    pub fn locks(&self) -> &Arc<InodeLocks> {
        &self.locks
    }
    /// Paces every job run on this volume from now on with `scheduler`,
    /// each within `budget` (the mount daemon's, fed by its mount's meter).
    pub fn pace_jobs(&self, scheduler: Arc<Scheduler>, budget: JobBudget) {
        *self.scheduler.lock() = Some((scheduler, budget));
    }

    /// A pacing handle for a job starting now, if jobs are paced.
    pub fn job_pacer(&self) -> Option<Arc<Pacer>> {
        self.scheduler
            .lock()
            .as_ref()
            .map(|(s, budget)| Arc::new(s.job(*budget)))
    }

    /// What opening repaired.
    pub fn recovery(&self) -> &Recovery {
        &self.recovery
    }

    /// The content state the FUSE layer and tests read files through: one
    /// per open volume, kept current by the optimization job.
    pub fn content(&self) -> Result<Arc<VolumeContent>> {
        let mut slot = self.content.lock();
        if let Some(c) = &*slot {
            return Ok(c.clone());
        }
        let c = Arc::new(VolumeContent::new(&self.repo, self.table.clone())?);
        *slot = Some(c.clone());
        Ok(c)
    }

    /// Recovery, run by `open` before anything reads the volume. For each
    /// entry: (1) its inode is no regular file of the backing tree any
    /// more, or holds another file (birth time differs): dropped; (2)
    /// `valid` past the backing file's length (a truncate after the last
    /// commit): clipped; (3) nothing left from the stream map: dropped;
    /// (4) stream-map ranges of the backing file still holding data: with
    /// the switch's times still pending (a crash between its entry write
    /// and its times' commit), punched, the file's times kept; else the
    /// file was written outside the volume since its switch (the backing
    /// tree changed while nothing served it), and what was written is
    /// recalled, never punched: the writes are the file's bytes now. All
    /// table changes commit as one transaction.
    fn recover(&self) -> Result<Recovery> {
        let mut report = Recovery::default();
        if self.table.is_empty() {
            return Ok(report);
        }
        // The entries' files, found by their directory entries' inode
        // numbers without a `stat` of every other file; only if one is
        // missing (removed outside the volume, or a file system whose
        // `d_ino` is not `st_ino`) does a full walk decide, so that no
        // entry whose file exists is ever dropped.
        let entries = self.table.all();
        let mut files = HashMap::new();
        let keep =
            |files: &mut HashMap<u64, walk::BackingFile>, f: walk::BackingFile| -> Result<()> {
                if self.table.contains(f.meta.ino()) {
                    files.insert(f.meta.ino(), f);
                }
                Ok(())
            };
        walk::regular_files_among(
            &self.dir.files(),
            &|ino| self.table.contains(ino),
            &mut |f| keep(&mut files, f),
        )?;
        fn found<'a>(
            files: &'a HashMap<u64, walk::BackingFile>,
            e: &Entry,
        ) -> Option<&'a walk::BackingFile> {
            files.get(&e.identity.ino).filter(|f| same_file(e, &f.meta))
        }
        if !entries.iter().all(|e| found(&files, e).is_some()) {
            files.clear();
            walk::regular_files(&self.dir.files(), &mut |f| keep(&mut files, f))?;
        }
        let mut changes = Vec::new();
        for mut entry in entries {
            let ino = entry.identity.ino;
            let Some(file) = found(&files, &entry) else {
                changes.push(Change::Remove(ino));
                report.dropped += 1;
                continue;
            };
            let len = file.meta.len();
            if entry.valid > len {
                entry.clip(len);
                report.clipped += 1;
                changes.push(Change::Put(entry.clone()));
            }
            let block = file.meta.blksize();
            let allocated = backing::allocated_bytes(&file.meta) > 0;
            if allocated && !entry.is_spent() && entry.times_pending.is_none() {
                // The switch finished (its times were committed after its
                // punch), so bytes in its ranges were written since, outside
                // the volume, or are what a punch lost in a crash left (the
                // file's own bytes): either way they are the file's now.
                let written = written_ranges(&file.path, &entry, block)?;
                if !written.is_empty() {
                    for (s, e) in written {
                        entry.recalled.insert(s, e);
                    }
                    report.written_outside += 1;
                    changes.push(Change::Put(entry.clone()));
                }
            }
            if entry.is_spent() {
                changes.push(Change::Remove(ino));
                report.dropped += 1;
                continue;
            }
            let punch = allocated
                && entry.times_pending.is_some()
                && holds_data(&file.path, &entry, block)?;
            if punch || entry.times_pending.is_some() {
                let f = OpenOptions::new()
                    .write(true)
                    .open(&file.path)
                    .map_err(|e| Error::io(format!("opening {}", file.path.display()), e))?;
                let times = entry
                    .times_pending
                    .take()
                    .unwrap_or_else(|| backing::times_of(&file.meta));
                if punch {
                    backing::punch_stream_map_ranges(&f, &entry)
                        .map_err(|e| Error::io(format!("punching {}", file.path.display()), e))?;
                    report.punched += 1;
                }
                backing::set_times(&f, times)
                    .and_then(|()| f.sync_all())
                    .map_err(|e| Error::io(format!("restoring {}", file.path.display()), e))?;
                changes.push(Change::Put(entry));
            }
        }
        self.table.apply(&changes)?;
        Ok(report)
    }
}

/// Whether `meta` describes the file `entry` was switched from (its birth
/// time, where both know one, is the same).
pub(crate) fn same_file(entry: &Entry, meta: &std::fs::Metadata) -> bool {
    let now = Identity::of(meta);
    now.ino == entry.identity.ino
        && match (now.birth_ns, entry.identity.birth_ns) {
            (Some(a), Some(b)) => a == b,
            _ => true,
        }
}

/// The byte ranges of `entry`'s stream-map ranges that were written in
/// the backing file after its switch: every whole block that is data (the
/// switch punched them all), and of a block only partly in a range (its
/// edges), the part in the range when it holds a byte other than zero (a
/// punch leaves such a block allocated, with that part zeroed). Zeros
/// written there outside the volume read as the stream map's bytes.
fn written_ranges(path: &Path, entry: &Entry, block: u64) -> Result<Vec<(u64, u64)>> {
    use std::os::unix::fs::FileExt;
    let io = |e: std::io::Error| Error::io(format!("reading {}", path.display()), e);
    let f = File::open(path).map_err(io)?;
    let block = block.max(1);
    let mut out = Vec::new();
    let mut buf = Vec::new();
    let mut edge = |out: &mut Vec<(u64, u64)>, a: u64, b: u64| -> Result<()> {
        if a < b {
            buf.resize((b - a) as usize, 0);
            f.read_exact_at(&mut buf, a).map_err(io)?;
            if buf.iter().any(|&x| x != 0) {
                out.push((a, b));
            }
        }
        Ok(())
    };
    for (s, e) in entry.recalled.gaps(0, entry.valid) {
        let mut at = s;
        while at < e {
            let ds = match rustix::fs::seek(&f, rustix::fs::SeekFrom::Data(at)) {
                Ok(x) => x,
                // Past the last data, or no SEEK_DATA: nothing known written.
                Err(_) => break,
            };
            if ds >= e {
                break;
            }
            let de = rustix::fs::seek(&f, rustix::fs::SeekFrom::Hole(ds))
                .unwrap_or(e)
                .min(e);
            let (a, b) = (ds.max(s), de);
            let (inner_a, inner_b) = (a.div_ceil(block) * block, b / block * block);
            if inner_a < inner_b {
                out.push((inner_a, inner_b));
                edge(&mut out, a, inner_a)?;
                edge(&mut out, inner_b, b)?;
            } else {
                edge(&mut out, a, b)?;
            }
            at = de.max(at + 1);
        }
    }
    Ok(out)
}

/// Whether any whole block of the backing file in `entry`'s stream-map
/// ranges is data rather than a hole (`SEEK_DATA`). A punch leaves the
/// partial blocks at a range's edges allocated (zeroed): they do not count.
fn holds_data(path: &Path, entry: &Entry, block: u64) -> Result<bool> {
    let f = File::open(path).map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
    let block = block.max(1);
    for (start, end) in entry.recalled.gaps(0, entry.valid) {
        let (start, end) = (start.div_ceil(block) * block, end / block * block);
        if start >= end {
            continue;
        }
        match rustix::fs::seek(&f, rustix::fs::SeekFrom::Data(start)) {
            Ok(at) if at < end => return Ok(true),
            Ok(_) | Err(rustix::io::Errno::NXIO) => {}
            // No SEEK_DATA here: assume data, punching is harmless.
            Err(_) => return Ok(true),
        }
    }
    Ok(false)
}
