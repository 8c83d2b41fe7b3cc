//! One function per subcommand: open the repository, call the engine, print.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use serde_json::json;

use cairn_core::{ChunkerConfig, CompressionCodec, CompressionConfig, FingerprintAlgo};
use cairn_engine::catalog::SnapshotFilter;
use cairn_engine::config::{IndexKind, LookupStrategy, RewriteConfig};
use cairn_engine::names::name_text;
use cairn_engine::restore::Reader;
use cairn_engine::{
    BackupOptions, DedupMode, ParentChoice, Progress, RepoConfig, Repository, Source,
};
use cairn_format::dir::EntryKind;

use crate::args::{BackupArgs, Cli, Command, InitArgs, RepairCommand};
use crate::output::{bytes, display_name, mode_string, parse_size, time};
use crate::progress::{estimate_backup, Display};
use crate::snapshot_args::{resolve, snapshot_os_path};

/// Exit code of a backup that committed a snapshot but skipped paths.
pub(crate) const EXIT_INCOMPLETE: u8 = 3;

pub fn run(cli: Cli) -> Result<ExitCode> {
    let repo_path = || -> Result<PathBuf> {
        let path = cli
            .repo
            .clone()
            .ok_or_else(|| anyhow!("no repository given: pass --repo PATH or set CAIRN_REPO"))?;
        refuse_url(&path)?;
        Ok(path)
    };
    let open = || crate::encryption::open_repository(&cli, &repo_path()?);
    let open_uncached = || crate::encryption::open_repository_uncached(&cli, &repo_path()?);
    match &cli.command {
        Command::Init {
            settings,
            encryption,
            identity,
        } => init(&cli, &repo_path()?, settings, encryption, identity),
        Command::Copy(a) => crate::copy_commands::copy(&cli, &repo_path()?, a),
        Command::Key(k) => crate::encryption::key(&cli, &repo_path()?, k),
        Command::Unlock(a) => crate::unlock_commands::unlock(&cli, &repo_path()?, a),
        Command::Lock(a) => crate::unlock_commands::lock(&cli, cli.repo.as_deref(), a),
        Command::Backup(a) => backup(&cli, &repo_path()?, a),
        Command::Snapshots { group_by, filter } => {
            crate::snapshots_cmd::snapshots(&cli, &open()?, group_by.as_deref(), filter)
        }
        Command::Ls {
            snapshot,
            path,
            filter,
        } => {
            let path = path.as_deref().map(snapshot_os_path).transpose()?;
            ls(&cli, &open()?, snapshot, path.as_deref(), &filter.filter()?)
        }
        Command::Restore(a) => crate::restore_commands::restore(&cli, &open()?, a),
        Command::Dump {
            snapshot,
            path,
            archive: _,
            filter,
        } => {
            let path = path.as_deref().map(snapshot_os_path).transpose()?;
            crate::restore_commands::dump(&open()?, snapshot, path.as_deref(), &filter.filter()?)
        }
        Command::Cat {
            snapshot,
            path,
            filter,
        } => cat(
            &open()?,
            snapshot,
            &snapshot_os_path(path)?,
            &filter.filter()?,
        ),
        Command::Mount { mountpoint } => crate::mount::mount(&cli, mountpoint, &open),
        Command::Stats => stats(&cli, &open()?),
        Command::Check { read_data } => check(&cli, &open_uncached()?, *read_data),
        Command::Repair(RepairCommand::Index { read_data, wait }) => {
            crate::repair_commands::repair_index(&cli, &open_uncached()?, *read_data, *wait)
        }
        Command::Repair(RepairCommand::Snapshots {
            snapshots,
            forget,
            dry_run,
            read_data,
            wait,
            filter,
        }) => {
            let opts = cairn_engine::repair_snapshots::RepairSnapshotsOptions {
                snapshots: crate::repair_commands::snapshot_ids(
                    &open_uncached()?,
                    snapshots,
                    &filter.filter()?,
                )?,
                forget: *forget,
                dry_run: *dry_run,
                read_data: *read_data,
            };
            crate::repair_commands::repair_snapshots(&cli, &open_uncached()?, &opts, *wait)
        }
        Command::Forget(a) => crate::gc_commands::forget(&cli, &open()?, a),
        Command::Fastcopy {
            snapshot,
            tag,
            wait,
            filter,
        } => crate::gc_commands::fastcopy(&cli, &open()?, snapshot, tag, *wait, &filter.filter()?),
        Command::Gc(a) => crate::gc_commands::gc(&cli, &open()?, a),
        Command::Trace(a) => crate::sim_commands::trace(&cli, a),
        Command::Sim(a) => crate::sim_commands::sim(&cli, a),
        Command::Analyze(a) => crate::sim_commands::analyze(&cli, a),
        Command::Experiment(a) => crate::sim_commands::experiment(&cli, a),
        Command::Browse(b) => crate::browse_commands::run(&cli, &open()?, b),
        Command::Completions { shell } => crate::generate::completions(*shell),
        Command::Man { out } => crate::generate::man_pages(&cli, out),
    }
}

/// URL schemes of remote repositories (cairn's and its peers'): a `--repo`
/// naming one is refused rather than created as a local directory of that name.
const REMOTE_SCHEMES: &[&str] = &[
    "s3", "sftp", "rest", "gs", "azure", "b2", "swift", "rclone", "http", "https", "ftp", "ssh",
    "file",
];

/// Refuses a `--repo` that is a URL of a kind cairn cannot open (S3 is
/// `repo_location`'s).
pub(crate) fn refuse_url(path: &Path) -> Result<()> {
    let s = path.to_string_lossy();
    if s.starts_with("s3:") {
        return Ok(());
    }
    let Some((scheme, _)) = s.split_once(':') else {
        return Ok(());
    };
    let is_scheme = !scheme.is_empty()
        && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c));
    if is_scheme
        && (REMOTE_SCHEMES.contains(&scheme.to_ascii_lowercase().as_str())
            || s[scheme.len()..].starts_with("://"))
    {
        bail!("unsupported repository {s:?}: {scheme}: repositories are not supported, only local directories and S3 (s3:https://HOST/BUCKET/PREFIX, s3://BUCKET/PREFIX)");
    }
    Ok(())
}

pub fn config_from(a: &InitArgs) -> Result<RepoConfig> {
    let mut cfg = Repository::default_config();
    let avg = parse_size(&a.avg_size)?;
    let mut chunker = ChunkerConfig::from_name(&a.chunker, avg)?;
    if a.min_size.is_some() || a.max_size.is_some() {
        let min = a.min_size.as_deref().map(parse_size).transpose()?;
        let max = a.max_size.as_deref().map(parse_size).transpose()?;
        chunker = match chunker {
            ChunkerConfig::Fixed { .. } => {
                bail!("--min-size/--max-size do not apply to fixed chunking")
            }
            ChunkerConfig::Rabin {
                min: m0,
                avg,
                max: x0,
            } => ChunkerConfig::Rabin {
                min: min.unwrap_or(m0),
                avg,
                max: max.unwrap_or(x0),
            },
            ChunkerConfig::FastCdc {
                min: m0,
                avg,
                max: x0,
            } => ChunkerConfig::FastCdc {
                min: min.unwrap_or(m0),
                avg,
                max: max.unwrap_or(x0),
            },
            ChunkerConfig::Regression {
                min: m0,
                avg,
                max: x0,
            } => ChunkerConfig::Regression {
                min: min.unwrap_or(m0),
                avg,
                max: max.unwrap_or(x0),
            },
        };
    }
    cfg.chunker = chunker;
    cfg.fingerprint = FingerprintAlgo::from_name(&a.fingerprint)?;
    cfg.compression = CompressionConfig {
        codec: CompressionCodec::from_name(&a.compression)?,
        level: a.zstd_level,
        min_savings_pct: a.min_savings,
    };
    if a.min_savings > 99 {
        bail!("--min-savings must be a percentage below 100");
    }
    cfg.container_size = parse_size(&a.container_size)?;
    cfg.index.cache_containers = a.cache_containers;
    cfg.index.summary_vector = !a.no_summary_vector;
    cfg.index.locality_cache = !a.no_locality_cache;
    cfg.index.kind = IndexKind::parse(&a.index)?;
    let lookup = &mut cfg.index.lookup;
    lookup.strategy = LookupStrategy::parse(&a.lookup)?;
    lookup.bucket_threshold = a.bucket_threshold;
    lookup.ring_size = a.ring_size;
    lookup.buffer_fingerprints = a.lookup_buffer;
    lookup.device = a.lookup_device.clone();
    match &a.rewrite {
        Some(r) => cfg.rewrite = RewriteConfig::parse(r)?,
        // Rewriting needs eager lookup: lazy (or auto) lookup gets none
        // unless a scheme is asked for (then the backup refuses, saying why).
        None if lookup.strategy != LookupStrategy::Eager => cfg.rewrite = RewriteConfig::None,
        None => {}
    }
    cfg.validate()?;
    Ok(cfg)
}

/// A real repository's Summary Vector starts small and grows with it
/// (`IndexConfig::NEW_REPOSITORY_EXPECTED_CHUNKS`); `sim` keeps its fixed size.
fn new_repository(mut cfg: RepoConfig) -> RepoConfig {
    cfg.index.expected_chunks = cairn_engine::config::IndexConfig::NEW_REPOSITORY_EXPECTED_CHUNKS;
    cfg
}

/// The settings `init` fixes, as a backup into an existing repository was
/// given them on its command line (`given`: argument ids): each one given
/// must equal the repository's, or the backup is refused before anything
/// is written; a flag that silently did nothing would be a defect.
fn refuse_differing_init_flags(
    given: &[String],
    flags: &RepoConfig,
    stored: &RepoConfig,
) -> Result<()> {
    let (g, r) = (flags, stored);
    let show = |v: &dyn std::fmt::Debug| format!("{v:?}");
    let checks: [(&[&str], String, String); 9] = [
        (
            &["chunker", "avg_size", "min_size", "max_size"],
            show(&g.chunker),
            show(&r.chunker),
        ),
        (&["fingerprint"], show(&g.fingerprint), show(&r.fingerprint)),
        (
            &["compression", "zstd_level", "min_savings"],
            show(&g.compression),
            show(&r.compression),
        ),
        (
            &["container_size"],
            show(&g.container_size),
            show(&r.container_size),
        ),
        (
            &["cache_containers"],
            show(&g.index.cache_containers),
            show(&r.index.cache_containers),
        ),
        (
            &["no_summary_vector"],
            show(&g.index.summary_vector),
            show(&r.index.summary_vector),
        ),
        (
            &["no_locality_cache"],
            show(&g.index.locality_cache),
            show(&r.index.locality_cache),
        ),
        (&["index"], show(&g.index.kind), show(&r.index.kind)),
        (
            &[
                "lookup",
                "bucket_threshold",
                "ring_size",
                "lookup_buffer",
                "lookup_device",
            ],
            show(&g.index.lookup),
            show(&r.index.lookup),
        ),
    ];
    for (ids, want, have) in checks {
        let Some(id) = ids.iter().find(|id| given.iter().any(|g| g == *id)) else {
            continue;
        };
        if want != have {
            bail!(
                "--{} gives {want}, but this repository was created with {have}; \
                 these settings are fixed at init: drop the flag, or back up into a new repository",
                id.replace('_', "-")
            );
        }
    }
    Ok(())
}

/// The configuration a new repository is created with: `--lookup auto` is
/// replaced by the strategy and ring size the device model picks for
/// `--lookup-device`, calibrated on a small synthetic backup workload
/// (there is no data yet).
///
/// A configuration no backup could use (a rewrite scheme with lazy lookup)
/// is refused here, before the repository directory exists.
fn resolve_auto(cli: &Cli, cfg: RepoConfig, a: &InitArgs) -> Result<RepoConfig> {
    let cfg = choose_lookup(cli, cfg, a)?;
    if !cfg.rewrite.is_none() && cfg.index.lookup.strategy == LookupStrategy::Lazy {
        bail!(
            "--rewrite {} needs eager lookup, but this repository would use lazy lookup; \
             drop --rewrite or use --lookup eager",
            cfg.rewrite.name()
        );
    }
    Ok(cfg)
}

fn choose_lookup(cli: &Cli, mut cfg: RepoConfig, a: &InitArgs) -> Result<RepoConfig> {
    if cfg.index.lookup.strategy != LookupStrategy::Auto {
        return Ok(cfg);
    }
    let name = a.lookup_device.as_deref().ok_or_else(|| {
        anyhow!("--lookup auto needs --lookup-device (hdd, ssd, optane or pm): the device the index is on")
    })?;
    let device = cairn_sim::device::DeviceClass::by_name(name)
        .ok_or_else(|| anyhow!("unknown device class {name:?} (hdd, ssd, optane, pm, dram)"))?;
    let choice = cairn_sim::sim::auto::choose_for_new_repository(&cfg, &device)?;
    if !cli.quiet && !cli.json {
        eprintln!("lookup auto: {}", choice.reason);
    }
    cfg.index.lookup.strategy = choice.strategy;
    cfg.index.lookup.ring_size = choice.ring_size;
    cfg.index.lookup.device = Some(device.name.clone());
    cfg.validate()?;
    Ok(cfg)
}

fn init(
    cli: &Cli,
    path: &Path,
    a: &InitArgs,
    encryption: &crate::encryption::EncryptionArgs,
    identity: &crate::copy_commands::IdentityArgs,
) -> Result<ExitCode> {
    let cfg = resolve_auto(cli, new_repository(config_from(a)?), a)?;
    let repo = if identity.copy_identity_from.is_some() {
        crate::copy_commands::init_with_identity(cli, path, cfg, encryption, identity)?
    } else {
        crate::encryption::init_repository(cli, path, cfg, encryption)?
    };
    if cli.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({"repository": path, "config": repo.config}))?
        );
    } else if !cli.quiet {
        println!("created cairn repository at {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// Opens the repository at `path`, or creates it with `config()` and
/// `encryption` if there is none. Of two processes creating it at once,
/// one wins and the other opens what it created.
fn open_or_create(
    cli: &Cli,
    path: &Path,
    config: impl FnOnce() -> Result<RepoConfig>,
    encryption: &crate::encryption::EncryptionArgs,
) -> Result<(Repository, bool)> {
    let exists = || crate::repo_location::has_config(path, &cli.s3);
    if let crate::repo_location::RepoLocation::S3(_) = crate::repo_location::parse(path, &cli.s3)? {
        // On object storage, asking first costs two round trips more than
        // opening and finding no config.
        match crate::encryption::open_repository(cli, path) {
            Err(e)
                if matches!(
                    e.downcast_ref::<cairn_core::Error>(),
                    Some(cairn_core::Error::NotARepository(_))
                ) => {}
            opened => return Ok((opened?, false)),
        }
    } else if exists()? {
        return Ok((crate::encryption::open_repository(cli, path)?, false));
    }
    match crate::encryption::init_repository(cli, path, config()?, encryption) {
        Ok(repo) => Ok((repo, true)),
        Err(e) => {
            // A concurrent creator writes its key file, then its config: give
            // it a moment before reporting what we found.
            for _ in 0..250 {
                if exists().unwrap_or(false) {
                    return Ok((crate::encryption::open_repository(cli, path)?, false));
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(e)
        }
    }
}

fn backup(cli: &Cli, path: &Path, a: &BackupArgs) -> Result<ExitCode> {
    // Positional paths and --files-from lines are treated alike.
    let paths = crate::backup_select::paths(a)?;
    if paths.is_empty() && !a.stdin {
        bail!("nothing to back up: give one or more paths, --files-from, or --stdin");
    }
    let mut sources: Vec<Source> = paths.iter().map(|p| Source::Path(p.clone())).collect();
    if a.stdin {
        sources.push(Source::Stdin {
            name: a.stdin_name.clone(),
        });
    }
    // Validated before anything is created, so bad flags or missing sources
    // never leave a repository behind.
    let cfg = new_repository(config_from(&a.init)?);
    let dedup: DedupMode = a.dedup.parse()?;
    let selection = crate::backup_select::selection(a)?;
    cairn_engine::backup::check_sources(&sources)?;
    if let (Some(id), false) = (&a.parent, a.dry_run) {
        // Refused before `open_or_init` would create the repository.
        let absent = match crate::repo_location::parse(path, &cli.s3)? {
            crate::repo_location::RepoLocation::Local(path) => {
                Repository::open_local(path).is_err() && !crate::encryption::is_encrypted_at(path)
            }
            crate::repo_location::RepoLocation::S3(_) => {
                !crate::repo_location::has_config(path, &cli.s3)?
            }
        };
        if absent {
            bail!(
                "--parent {id}: there is no repository at {} yet, so no snapshot to compare with",
                path.display()
            );
        }
    }
    if !a.stdin {
        // Through directory handles: a source may be longer than PATH_MAX.
        let mut dirs = cairn_engine::long_path::Dirs::new();
        let errors: Vec<_> = paths.iter().map(|p| dirs.lstat(p).err()).collect();
        if let Some((p, Some(e))) = paths
            .iter()
            .zip(errors.iter())
            .find(|(_, e)| e.is_some())
            .filter(|_| errors.iter().all(|e| e.is_some()))
        {
            bail!("nothing to back up: cannot read {}: {e}", p.display());
        }
    }
    if a.dry_run {
        return crate::backup_select::dry_run(cli, path, &sources, selection);
    }
    let given = cfg.clone();
    let cfg_rewrite = a.init.rewrite.is_some().then_some(cfg.rewrite);
    // A backup into a path without a repository creates one, encrypted
    // unless `--encryption none`, as `init` would.
    let (repo, created) =
        open_or_create(cli, path, || resolve_auto(cli, cfg, &a.init), &a.encryption)?;
    if created && !cli.quiet && !cli.json {
        eprintln!("created cairn repository at {}", path.display());
    }
    if !created {
        refuse_differing_init_flags(&cli.given_init_flags, &given, &repo.config)?;
    }
    let lock = repo.lock_writer(a.wait)?;
    let progress = Arc::new(Progress::default());
    let display = Display::start(progress.clone(), !cli.quiet && !cli.json, "backup");
    if display.active() && !a.stdin {
        estimate_backup(
            paths.clone(),
            selection.clone(),
            path.to_path_buf(),
            progress.clone(),
        );
    }
    let outcome = cairn_engine::backup(
        &repo,
        &lock,
        BackupOptions {
            sources,
            tags: a.tags.iter().filter(|t| !t.is_empty()).cloned().collect(),
            host: a.host.clone(),
            progress,
            // Given on an existing repository: this backup's scheme.
            rewrite_scheme: (!created).then_some(cfg_rewrite).flatten(),
            dedup,
            selection,
            parent: match (&a.parent, a.force) {
                (_, true) => ParentChoice::None,
                (Some(id), false) => ParentChoice::Id(id.clone()),
                (None, false) => ParentChoice::Latest,
            },
            ..Default::default()
        },
    );
    drop(display);
    let outcome = outcome?;
    for s in &outcome.skipped {
        eprintln!("cairn: warning: skipped {s}");
    }
    for n in &outcome.notices {
        eprintln!("cairn: note: {n}");
    }
    for p in &outcome.changed_while_read {
        eprintln!(
            "cairn: warning: {}: changed while it was read; the snapshot holds what was read",
            display_name(p)
        );
    }
    let st = &outcome.record.stats;
    if cli.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "id": outcome.snapshot_id,
                "time": time(outcome.record.time_unix_ns),
                "paths": outcome.record.paths,
                "tags": outcome.record.tags,
                "dedup": dedup.name(),
                "stats": st,
                "skipped": outcome.skipped,
                "excluded": outcome.excluded.len(),
                "excluded_paths": outcome.excluded,
                "changed_while_read": outcome.changed_while_read.len(),
                "changed_while_read_paths": outcome.changed_while_read,
                "phases": outcome.phases,
                "index_ram_bytes_per_chunk": outcome.index_ram_bytes_per_chunk,
                "replayed_containers": outcome.replayed_containers,
            }))?
        );
    } else if !cli.quiet {
        crate::output::print_backup(&outcome, dedup, cli.verbose);
    }
    if outcome.skipped.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!(
            "cairn: error: {} path(s) could not be read; the snapshot holds everything else",
            outcome.skipped.len()
        );
        Ok(ExitCode::from(EXIT_INCOMPLETE))
    }
}

/// The shared readers lock: readers and backups never wait for it; a
/// writer deleting containers (garbage collection, `repair index
/// --read-data`) holds it exclusively for a while, and a reader says it is
/// waiting rather than hanging silently (the repository's lock-wait
/// observer, `encryption::announcing_lock_waits`, says it).
/// A repository this process cannot write to (read-only media, another
/// user's files) is read without the lock: nobody can be deleting there
/// through this process, and refusing to read it would be worse.
pub(crate) fn read_lock(repo: &Repository) -> Result<Option<cairn_engine::ReadLock>> {
    match repo.lock_reader(true) {
        Ok(l) => Ok(Some(l)),
        Err(cairn_core::Error::Io { .. }) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

pub(crate) fn kind_name(k: EntryKind) -> &'static str {
    match k {
        EntryKind::File => "file",
        EntryKind::Dir => "dir",
        EntryKind::Symlink => "symlink",
        EntryKind::Fifo => "fifo",
        EntryKind::CharDevice => "chardev",
        EntryKind::BlockDevice => "blockdev",
        EntryKind::Socket => "socket",
    }
}

fn ls(
    cli: &Cli,
    repo: &Repository,
    snapshot: &str,
    path: Option<&str>,
    filter: &SnapshotFilter,
) -> Result<ExitCode> {
    let _reading = read_lock(repo)?;
    let snap = resolve(repo, snapshot, filter)?;
    let mut reader = Reader::open(repo, Default::default())?;
    let mut rows = Vec::new();
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    reader.walk(&snap.record, path.unwrap_or(""), &mut |w| {
        let e = &w.entry;
        let kind = kind_name(e.kind);
        if cli.json {
            rows.push(json!({
                "path": w.path, "type": kind, "size": e.size, "mode": e.mode & 0o7777,
                "uid": e.uid, "gid": e.gid, "mtime": time(e.mtime_ns), "mtime_ns": e.mtime_ns,
                "target": e.target.as_deref().map(|t| name_text(t).into_owned()),
            }));
        } else {
            let target = e
                .target
                .as_ref()
                .map(|t| format!(" -> {}", name_text(t)))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "{} {:>12} {} {}{}",
                mode_string(kind, e.mode),
                e.size,
                time(e.mtime_ns),
                display_name(&w.path),
                display_name(&target)
            );
        }
        Ok(())
    })?;
    if cli.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&rows)?)?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// `--restore-policy` and `--restore-cache` as the engine's options.
pub fn restore_cache_options(
    policy: &str,
    size: &str,
) -> Result<cairn_engine::restore::CacheOptions> {
    Ok(cairn_engine::restore::CacheOptions {
        policy: policy.parse()?,
        bytes: crate::output::parse_size_u64(size)?,
    })
}

/// `path`: already a snapshot path ([`snapshot_os_path`]).
fn cat(repo: &Repository, snapshot: &str, path: &str, filter: &SnapshotFilter) -> Result<ExitCode> {
    if path.is_empty() {
        bail!("cat needs a file path inside the snapshot, e.g. /dir/file");
    }
    let _reading = read_lock(repo)?;
    let snap = resolve(repo, snapshot, filter)?;
    let mut reader = Reader::open(repo, Default::default())?;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::with_capacity(1 << 20, stdout.lock());
    reader.cat(&snap.record, path, &mut out)?;
    out.flush().context("writing to standard output")?;
    Ok(ExitCode::SUCCESS)
}

fn stats(cli: &Cli, repo: &Repository) -> Result<ExitCode> {
    let _reading = read_lock(repo)?;
    let s = cairn_engine::stats::stats(repo)?;
    if cli.json {
        println!("{}", serde_json::to_string_pretty(&s)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!("snapshots:              {}", s.snapshots);
    println!("logical bytes:          {}", bytes(s.logical_bytes));
    println!("stored after dedup:     {}", bytes(s.stored_bytes));
    println!("stored after compress:  {}", bytes(s.compressed_bytes));
    println!(
        "container files:        {} in {} containers",
        bytes(s.container_bytes),
        s.containers
    );
    println!("dedup ratio (global):   {:.2}x", s.dedup_ratio);
    println!("compression (local):    {:.2}x", s.compression_ratio);
    println!("total compression:      {:.2}x", s.total_compression);
    let d = &s.on_disk;
    println!(
        "on disk:                {} = data {} + metadata {} + index {} + filter {} + snapshots {} + other {}",
        bytes(d.total),
        bytes(d.data),
        bytes(d.metadata),
        bytes(d.index),
        bytes(d.filter),
        bytes(d.snapshots),
        bytes(d.other)
    );
    println!(
        "total compression, all bytes on disk: {:.2}x",
        s.on_disk_total_compression
    );
    println!(
        "chunks:                 {} referenced, {} unique ({} data, {} tree, {} listing)",
        s.chunks, s.unique_chunks, s.data_chunks, s.tree_chunks, s.meta_chunks
    );
    let c = &s.counters;
    println!(
        "lookups (all backups):  {} cache hits, {} bloom negatives, {} index page reads, {} prefetches",
        c.cache_hits, c.bloom_negatives, c.index_page_reads, c.prefetches
    );
    println!(
        "index RAM per chunk:    {:.2} bytes",
        s.index_ram_bytes_per_chunk
    );
    println!(
        "last backup:            {:.2}s ({:.1} MB/s)",
        s.last_backup_seconds, s.last_backup_mb_per_s
    );
    let phases: Vec<String> = s
        .last_backup_phases
        .iter()
        .filter(|(k, _)| k.as_str() != "total")
        .map(|(k, v)| format!("{k} {v:.2}s"))
        .collect();
    if !phases.is_empty() {
        println!("  per phase:            {}", phases.join(", "));
    }
    Ok(ExitCode::SUCCESS)
}

fn check(cli: &Cli, repo: &Repository, read_data: bool) -> Result<ExitCode> {
    let _reading = read_lock(repo)?;
    let progress = Arc::new(Progress::default());
    let display = Display::start_with(
        progress.clone(),
        !cli.quiet && !cli.json,
        "check",
        crate::progress::Unit::Items,
    );
    let report = cairn_engine::check::check_with_progress(repo, read_data, &progress);
    drop(display);
    let report = report?;
    if cli.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        for n in &report.notes {
            eprintln!("cairn: note: {n}");
        }
        for p in &report.problems {
            let mut line = format!("cairn: damage: {}", p.message);
            if let Some(c) = &p.container {
                line += &format!(" [container {c}]");
            }
            if !p.snapshots.is_empty() {
                let s: Vec<&str> = p.snapshots.iter().map(|s| &s[..8.min(s.len())]).collect();
                line += &format!(" [snapshots {}]", s.join(","));
            }
            if !p.paths.is_empty() {
                let paths: Vec<&str> = p.paths.iter().take(5).map(String::as_str).collect();
                line += &format!(
                    " [paths {}{}]",
                    paths.join(", "),
                    if p.paths.len() > 5 { ", ..." } else { "" }
                );
            }
            eprintln!("{line}");
        }
        if !cli.quiet {
            println!(
                "checked {} snapshots, {} containers, {} indexed chunks{}",
                report.snapshots,
                report.containers,
                report.indexed_chunks,
                if read_data {
                    format!(", {} chunks rehashed", report.chunks_verified)
                } else {
                    String::new()
                }
            );
            if report.reclaimable_containers > 0 {
                println!(
                    "{} containers ({}) are referenced by no snapshot and reclaimable",
                    report.reclaimable_containers,
                    bytes(report.reclaimable_bytes)
                );
            }
            if report.is_clean() {
                println!("no problems found");
            }
        }
    }
    if report.is_clean() {
        Ok(ExitCode::SUCCESS)
    } else {
        Err(anyhow!("check found {} problem(s)", report.problems.len()))
    }
}
