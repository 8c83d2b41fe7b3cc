//! `cairn mount MOUNTPOINT`: serves the repository's snapshots as a
//! read-only FUSE file system (docs/mount.md) until it is unmounted: by
//! Ctrl-C or SIGTERM (the handler unmounts; the command exits 0), or by
//! `fusermount -u MOUNTPOINT` from outside (the session ends; exit 0).
//!
//! The mount holds a readers lock for its whole life, so a garbage
//! collection cannot delete containers a mounted file still needs. The
//! snapshot list is read once: snapshots committed later appear at the next
//! mount.
//!
//! `layout` builds the virtual top (ids, snapshots, tags, hosts); `fs`
//! answers the kernel's requests; file bytes come from the engine's
//! `RandomAccess` (ranges through the recipe tree, bounded caches).

mod fs;
mod layout;

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::ExitCode;
use std::time::SystemTime;

use anyhow::{anyhow, bail, Context, Result};
use cairn_engine::catalog;
use cairn_engine::random_access::{CacheLimits, RandomAccess};
use cairn_engine::Repository;
use fuser::{Config, MountOption, Session};

use crate::globals::Globals;
use crate::repo_open::read_lock;
use fs::{SnapshotFs, VirtualMeta};
use layout::Layout;

/// The character device every FUSE mount talks through.
const FUSE_DEVICE: &str = "/dev/fuse";

/// Checks the mountpoint before anything else: it must be an existing
/// directory, and the FUSE device must exist.
pub(crate) fn check_mountpoint(mountpoint: &Path) -> Result<std::fs::Metadata> {
    let meta = match std::fs::metadata(mountpoint) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            bail!("mountpoint {} does not exist", mountpoint.display())
        }
        Err(e) => return Err(e).with_context(|| format!("inspecting {}", mountpoint.display())),
    };
    if !meta.is_dir() {
        bail!("mountpoint {} is not a directory", mountpoint.display());
    }
    if !Path::new(FUSE_DEVICE).exists() {
        bail!("FUSE unavailable: {FUSE_DEVICE} does not exist (is the fuse kernel module loaded?)");
    }
    Ok(meta)
}

/// A mount failure as one line that says whether FUSE itself is missing
/// or refused (no helper, no permission to mount, the device not usable):
/// the errors of the mount syscall and of fusermount's own messages.
fn mount_error(mountpoint: &Path, e: std::io::Error) -> anyhow::Error {
    use std::io::ErrorKind::{NotFound, PermissionDenied};
    let text = e.to_string().trim().replace('\n', "; ");
    let refused = ["not permitted", "Permission denied", "/dev/fuse"]
        .iter()
        .any(|w| text.contains(w));
    match e.kind() {
        NotFound => anyhow!(
            "FUSE unavailable: mounting {} needs fusermount3 or fusermount ({text})",
            mountpoint.display()
        ),
        PermissionDenied => anyhow!(
            "FUSE unavailable: mounting {} is not permitted ({text})",
            mountpoint.display()
        ),
        _ if refused => anyhow!(
            "FUSE unavailable: mounting {} failed ({text})",
            mountpoint.display()
        ),
        _ => anyhow!("mounting {}: {text}", mountpoint.display()),
    }
}

pub fn mount(
    cli: &Globals,
    mountpoint: &Path,
    open: &dyn Fn() -> Result<Repository>,
) -> Result<ExitCode> {
    let mp_meta = check_mountpoint(mountpoint)?;
    let repo = open()?;
    let _reading = read_lock(&repo)?;

    let (snaps, bad) = catalog::list(&**repo.backend())?;
    for (id, e) in &bad {
        eprintln!("cairn: warning: snapshot {id} unreadable, not mounted: {e}");
    }
    // An unreadable record may be the newest: no `latest` link then points
    // at an older snapshot as if it were (docs/snapshot-filters.md).
    if !bad.is_empty() {
        let ids: Vec<&str> = bad.iter().map(|(id, _)| catalog::short_id(id)).collect();
        eprintln!(
            "cairn: warning: no `latest` links while snapshot records are unreadable; \
             `cairn forget {}` removes them",
            ids.join(" ")
        );
    }
    let layout = Layout::new(&snaps, bad.is_empty());
    for what in &layout.skipped {
        eprintln!("cairn: warning: {what} is not a valid file name; no directory for it");
    }
    let meta = VirtualMeta {
        uid: mp_meta.uid(),
        gid: mp_meta.gid(),
        mtime: snaps
            .last()
            .map(|s| fs::system_time(s.record.time_unix_ns))
            .unwrap_or_else(SystemTime::now),
    };
    let access = RandomAccess::open(&repo, CacheLimits::default())?;
    let count = snaps.len();
    let filesystem = SnapshotFs::new(layout, snaps, access, meta);

    let mut config = Config::default();
    config.mount_options = vec![
        MountOption::RO,
        MountOption::NoDev,
        MountOption::NoSuid,
        MountOption::FSName("cairn".into()),
        MountOption::Subtype("cairn".into()),
    ];
    let mut session =
        Session::new(filesystem, mountpoint, &config).map_err(|e| mount_error(mountpoint, e))?;

    let mut unmounter = session.unmount_callable();
    let shown = mountpoint.display().to_string();
    ctrlc::set_handler(move || {
        if let Err(e) = unmounter.unmount() {
            eprintln!(
                "cairn: error: unmounting {shown}: {e}; still mounted until \
                 `fusermount -u {shown}` succeeds"
            );
        }
    })
    .context("installing the signal handler")?;

    if !cli.quiet {
        eprintln!(
            "mounted {count} snapshots at {} (read-only); Ctrl-C or `fusermount -u {}` unmounts",
            mountpoint.display(),
            mountpoint.display()
        );
    }
    // Returns once the file system is unmounted, from here or from outside.
    session
        .run()
        .with_context(|| format!("serving {}", mountpoint.display()))?;
    Ok(ExitCode::SUCCESS)
}
