//! `cairn volume create|optimize|gc|scrub|status|snapshot|mount`: the
//! primary volume of docs/volume.md (`gc`, `scrub` and `snapshot` in
//! `volume_gc.rs`, `volume_scrub.rs`, `volume_snapshot.rs`). `mount`
//! serves it read-write until it is unmounted, and runs its jobs (on a
//! schedule, and on request through its control socket). The jobs and
//! `status` ask that daemon when the volume is mounted (`volume_client`),
//! else open the volume themselves and hold its lock while they run; both
//! paths print the same report.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use serde_json::json;

use cairn_crypto::PromptMode;
use cairn_volume::job_state::JobState;
use cairn_volume::policy::MIN_AGE_FLOOR;
use cairn_volume::{OptimizeOptions, Policy, StoreEncryption, Volume, VolumeSettings};

use super::{volume_client, volume_gc, volume_scrub, volume_snapshot};
use crate::globals::{Globals, PasswordArgs};
use crate::output::bytes;
use crate::repo_open::EncryptionArgs;

/// `cairn volume ...`.
#[derive(Subcommand, Debug)]
pub enum VolumeCommand {
    /// Create a volume in DIR (new or empty): the backing tree DIR/files,
    /// the chunk store DIR/store (regression chunking at 64 KiB, the
    /// frugal index, selective compression; encrypted unless
    /// --encryption none), the stream-map table DIR/state.
    Create(CreateArgs),
    /// Optimize the volume's cold files: chunk them, store the new chunks,
    /// and replace each file's data by its stream map. A file changed
    /// during the run is left for the next one.
    Optimize(OptimizeArgs),
    /// Free the chunks no optimized file uses any more (files deleted,
    /// truncated or rewritten): the live stream maps become the chunk
    /// store's roots and its garbage collector runs.
    Gc(volume_gc::GcArgs),
    /// Read and verify every chunk of the chunk store, keep a second copy
    /// of chunks referenced more than N times (DIR/copies), repair damaged
    /// chunks from their copies; name each file that needs a chunk it
    /// cannot repair (exit 1).
    Scrub(volume_scrub::ScrubArgs),
    /// Logical and physical bytes, optimized and unoptimized files and
    /// bytes, the savings rate and the chunk store's size.
    Status(StatusArgs),
    /// Record the volume's files as a snapshot in its chunk store: an
    /// optimized file by its stream map, unread; the rest read. Restore,
    /// list or mount it with `cairn restore|ls|mount --repo DIR/store`.
    Snapshot(volume_snapshot::SnapshotArgs),
    /// Serve the volume read-write through FUSE at MOUNTPOINT until Ctrl-C,
    /// SIGTERM or `fusermount -u MOUNTPOINT`: optimized files are read from
    /// the chunk store and recalled range by range when written; plain files
    /// are served by the kernel directly where it can (FUSE passthrough).
    Mount(MountArgs),
}

/// The policy options of `create` (recorded in DIR/volume.json) and
/// `optimize` (this run only).
#[derive(Args, Debug, Clone)]
pub struct PolicyArgs {
    /// Optimize only files unchanged (mtime and ctime) for this long: 30s,
    /// 10m, 2h, 3d (at least 1s; default: the volume's, 3d at creation).
    #[arg(long, value_name = "DURATION", value_parser = parse_min_age)]
    pub min_age: Option<Duration>,
    /// Optimize only files at least this long, e.g. 32KiB (default: the
    /// volume's; every non-empty file at creation).
    #[arg(long, value_name = "SIZE", value_parser = crate::values::size)]
    pub min_size: Option<u64>,
}

/// `cairn volume create`.
#[derive(Args, Debug)]
pub struct CreateArgs {
    /// The volume directory (created if absent; must be empty).
    pub dir: PathBuf,
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// Never optimize paths matching this glob (relative to DIR/files; a
    /// pattern without `/` matches names at any depth, e.g. `*.vhdx`).
    /// Repeatable.
    #[arg(long, value_name = "GLOB")]
    pub exclude: Vec<String>,
    #[command(flatten)]
    pub encryption: EncryptionArgs,
    #[command(flatten)]
    pub password: PasswordArgs,
}

/// `cairn volume optimize`.
#[derive(Args, Debug)]
pub struct OptimizeArgs {
    /// The volume directory.
    pub dir: PathBuf,
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// CPU the run may use, percent of one core (1 to 6400; 200: two
    /// cores' worth): it sleeps to stay within it (default: unlimited).
    #[arg(long, value_name = "PERCENT", value_parser = parse_job_cpu)]
    pub job_cpu: Option<u32>,
    /// Stop the run once the process has grown by more than this, e.g.
    /// 512MiB (default: unlimited). A run with --job-cpu or --job-memory
    /// also stops on the kernel's memory pressure; what it finished stays
    /// optimized.
    #[arg(long, value_name = "SIZE", value_parser = crate::values::size)]
    pub job_memory: Option<u64>,
    /// Optimization sessions run in parallel, each over its own path
    /// subtrees with its own chunk log (004's parallel sessions; default:
    /// the cores, at most 4). Copies two sessions store at once are
    /// reconciled by the next `cairn volume gc`.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=64))]
    pub sessions: Option<u32>,
    /// How several sessions split the files (004's partitioned dedup):
    /// `type` (by file extension: each type deduplicated against its own
    /// chunk log and the reconciled base, which keeps nearly all the
    /// savings) or `path` (by the first directory). Cross-partition
    /// copies are reconciled by the next `cairn volume gc`.
    #[arg(long, value_name = "HOW", default_value = "type")]
    pub partition_by: cairn_volume::partitions::PartitionBy,
    /// A type (or directory) with fewer bytes to optimize in the run than
    /// this, and no chunk log of its own yet, shares one partition with
    /// the other small ones (each partition is a backup of its own).
    #[arg(long, value_name = "SIZE", value_parser = crate::values::size, default_value = "64MiB")]
    pub min_partition_size: u64,
    #[command(flatten)]
    pub password: PasswordArgs,
}

/// The sessions an on-demand optimization runs: `--sessions`, or the
/// cores up to 4.
pub fn sessions(a: &OptimizeArgs) -> usize {
    a.sessions.map_or_else(
        || std::thread::available_parallelism().map_or(1, |n| n.get().min(4)),
        |n| n as usize,
    )
}

/// A read-ahead size, in KiB: a multiple of 1 KiB, at most 64 MiB.
fn parse_read_ahead(text: &str) -> std::result::Result<u32, String> {
    let bytes = crate::values::size(text)?;
    if bytes % 1024 != 0 || bytes > 64 << 20 {
        return Err(format!("{text} is not a whole number of KiB up to 64MiB"));
    }
    Ok((bytes / 1024) as u32)
}

/// `cairn volume status`.
#[derive(Args, Debug)]
pub struct StatusArgs {
    /// The volume directory.
    pub dir: PathBuf,
    #[command(flatten)]
    pub password: PasswordArgs,
}

/// `cairn volume mount`.
#[derive(Args, Debug)]
pub struct MountArgs {
    /// The volume directory.
    pub dir: PathBuf,
    /// An existing directory to serve the volume at.
    pub mountpoint: PathBuf,
    /// Serve every read and write of plain files through cairn instead of
    /// letting the kernel serve them directly (to measure the difference).
    #[arg(long)]
    pub no_passthrough: bool,
    /// Let users other than the one who mounted use the mount.
    #[arg(long)]
    pub allow_other: bool,
    /// Optimize with the volume's policy this often while mounted: 30s,
    /// 10m, 1h, or `off` (runs on request only). Default: 1h.
    #[arg(long, value_name = "DURATION", value_parser = parse_every, default_value = "1h")]
    pub optimize_every: Every,
    /// CPU each job of the mount may use, percent of one core (1 to 6400;
    /// default: one core). Jobs also pause while the mount is busy.
    #[arg(long, value_name = "PERCENT", value_parser = parse_job_cpu)]
    pub job_cpu: Option<u32>,
    /// Stop a job of the mount once the process has grown by more than
    /// this since it started (default: 1GiB); what it finished stays.
    #[arg(long, value_name = "SIZE", value_parser = crate::values::size)]
    pub job_memory: Option<u64>,
    /// How far the kernel reads ahead of a sequential reader of the mount
    /// (default: 1MiB, the most one request carries; 0 keeps the kernel's
    /// 128KiB). Setting it needs root; otherwise the kernel's default stays.
    #[arg(long, value_name = "SIZE", value_parser = parse_read_ahead)]
    pub read_ahead: Option<u32>,
    #[command(flatten)]
    pub password: PasswordArgs,
}

/// A minimum age: a duration of whole seconds, at least 1 s.
fn parse_min_age(text: &str) -> std::result::Result<Duration, String> {
    let d = humantime::parse_duration(text)
        .map_err(|e| format!("{e} (write a duration such as 30s, 10m, 2h or 3d)"))?;
    if d < MIN_AGE_FLOOR {
        return Err(format!(
            "the minimum age is at least {}s: a write right after the scan must change the \
             file's times",
            MIN_AGE_FLOOR.as_secs()
        ));
    }
    Ok(Duration::from_secs(d.as_secs()))
}

/// How often a mount runs a job: a period, or never.
#[derive(Clone, Copy, Debug)]
pub struct Every(pub Option<Duration>);

/// `off`, or a duration of at least 1 s.
fn parse_every(text: &str) -> std::result::Result<Every, String> {
    if text == "off" {
        return Ok(Every(None));
    }
    let d = humantime::parse_duration(text)
        .map_err(|e| format!("{e} (write a duration such as 30s, 10m or 1h, or off)"))?;
    if d < Duration::from_secs(1) {
        return Err("the period is at least 1s (or off)".into());
    }
    Ok(Every(Some(d)))
}

/// A job's CPU budget, percent of one core.
fn parse_job_cpu(text: &str) -> std::result::Result<u32, String> {
    let percent = text
        .trim_end_matches('%')
        .parse()
        .map_err(|_| format!("not a whole percentage: {text}"))?;
    cairn_volume::scheduler::JobBudget::new(percent, 0).map_err(|e| e.to_string())?;
    Ok(percent)
}

/// The pacer of an offline run with a budget (docs/volume.md,
/// "Scheduler"); no mount, so no foreground to yield to.
fn job_pacer(a: &OptimizeArgs) -> Option<std::sync::Arc<cairn_volume::scheduler::Pacer>> {
    use cairn_volume::scheduler::{JobBudget, Scheduler, MAX_CPU_PERCENT};
    if a.job_cpu.is_none() && a.job_memory.is_none() {
        return None;
    }
    let scheduler = Scheduler::new(Default::default(), Default::default());
    Some(std::sync::Arc::new(scheduler.job(JobBudget {
        cpu_percent: a.job_cpu.unwrap_or(MAX_CPU_PERCENT),
        memory_bytes: a.job_memory.unwrap_or(u64::MAX),
    })))
}

pub fn run(cli: &Globals, cmd: &VolumeCommand) -> Result<ExitCode> {
    let mut cli = cli.clone();
    let password = match cmd {
        VolumeCommand::Create(a) => &a.password,
        VolumeCommand::Optimize(a) => &a.password,
        VolumeCommand::Gc(a) => &a.password,
        VolumeCommand::Scrub(a) => &a.password,
        VolumeCommand::Status(a) => &a.password,
        VolumeCommand::Snapshot(a) => &a.password,
        VolumeCommand::Mount(a) => &a.password,
    };
    cli.set_password(password.clone());
    let cli = &cli;
    match cmd {
        VolumeCommand::Create(a) => create(cli, a),
        VolumeCommand::Optimize(a) => match volume_client::daemon(&a.dir)? {
            Some(daemon) => {
                let p = &a.policy;
                let report = volume_client::optimize(
                    cli,
                    daemon,
                    p.min_age,
                    p.min_size,
                    sessions(a),
                    a.partition_by,
                    a.min_partition_size,
                )?;
                print_optimize(cli, &report)
            }
            None => optimize(cli, a),
        },
        VolumeCommand::Status(a) => match volume_client::daemon(&a.dir)? {
            Some(daemon) => print_status(cli, &a.dir, &volume_client::status(cli, daemon)?),
            None => status(cli, &a.dir),
        },
        VolumeCommand::Gc(a) => {
            let report = job_report(cli, &a.dir, "gc", volume_gc::request(a), |vol| {
                Ok(serde_json::to_value(cairn_volume::gc(
                    vol,
                    &volume_gc::options(a),
                )?)?)
            })?;
            volume_gc::print(cli, a, &report)
        }
        VolumeCommand::Scrub(a) => {
            let report = job_report(cli, &a.dir, "scrub", volume_scrub::request(a), |vol| {
                Ok(cairn_volume::scrub(vol, &volume_scrub::options(a))?)
            })?;
            volume_scrub::print(cli, &report)
        }
        VolumeCommand::Snapshot(a) => {
            let report = job_report(
                cli,
                &a.dir,
                "snapshot",
                volume_snapshot::request(a),
                |vol| {
                    Ok(cairn_volume::snapshot::snapshot(
                        vol,
                        &volume_snapshot::options(a),
                    )?)
                },
            )?;
            volume_snapshot::print(cli, a, &report)
        }
        VolumeCommand::Mount(a) => mount(cli, a),
    }
}

/// `policy` with the options given on the command line applied.
fn with_options(mut policy: Policy, a: &PolicyArgs) -> Policy {
    if let Some(age) = a.min_age {
        policy.min_age_secs = age.as_secs();
    }
    if let Some(size) = a.min_size {
        policy.min_size = size;
    }
    policy
}

fn create(cli: &Globals, a: &CreateArgs) -> Result<ExitCode> {
    let policy = Policy {
        excluded: a.exclude.clone(),
        ..Policy::default()
    };
    let policy = with_options(policy, &a.policy);
    // Everything that can fail is settled before the directory is touched.
    policy.compile()?;
    let encryption = match a.encryption.encryption.algorithm() {
        None => None,
        Some(algorithm) => Some(StoreEncryption {
            algorithm,
            password: crate::repo_open::new_repository_password(cli)?,
            kdf: a.encryption.kdf.params()?,
        }),
    };
    let vol = Volume::create(&a.dir, VolumeSettings { policy, encryption })?;
    if cli.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "volume": a.dir,
                "id": vol.config().id,
                "policy": vol.config().policy,
            }))?
        );
    } else if !cli.quiet {
        println!(
            "created cairn volume at {}: put files into {}",
            a.dir.display(),
            vol.dir().files().display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Opens the volume at `dir`; an encrypted store's key comes from the
/// unlocked-key cache or the password sources every command uses.
fn open(cli: &Globals, dir: &Path) -> Result<Volume> {
    let mut password = || crate::repo_open::password(cli, PromptMode::Once);
    let mut master_key = crate::key_cache_hook::cached_or_password(&mut password);
    Ok(Volume::open(dir, &mut master_key)?)
}

/// A job's report: from the mount daemon when one answers (the request
/// `name` with `args`), else from `offline` on the volume opened here.
fn job_report<T: serde::de::DeserializeOwned>(
    cli: &Globals,
    dir: &Path,
    name: &str,
    args: serde_json::Map<String, serde_json::Value>,
    offline: impl FnOnce(&Volume) -> Result<T>,
) -> Result<T> {
    match volume_client::daemon(dir)? {
        Some(daemon) => volume_client::job(cli, daemon, name, args),
        None => offline(&open(cli, dir)?),
    }
}

fn optimize(cli: &Globals, a: &OptimizeArgs) -> Result<ExitCode> {
    let vol = open(cli, &a.dir)?;
    let policy = with_options(vol.config().policy.clone(), &a.policy);
    let report = cairn_volume::optimize(
        &vol,
        &OptimizeOptions {
            policy: Some(policy),
            pacer: job_pacer(a),
            sessions: sessions(a),
            partition_by: a.partition_by,
            min_partition_bytes: Some(a.min_partition_size),
            ..Default::default()
        },
    )?;
    print_optimize(cli, &report)
}

fn print_optimize(cli: &Globals, report: &cairn_volume::OptimizeReport) -> Result<ExitCode> {
    if cli.json {
        println!("{}", serde_json::to_string_pretty(report)?);
    } else if !cli.quiet {
        println!(
            "optimized {} of {} files ({}), {} new in the chunk store, in {:.1} s",
            report.files_optimized,
            report.files_scanned,
            bytes(report.bytes_optimized),
            bytes(report.new_chunk_bytes),
            report.seconds
        );
        if report.partitions > 1 {
            println!(
                "{} sessions over {} partitions, each deduplicated against its own chunk log \
                 and the base; `cairn volume gc` reconciles their copies",
                report.sessions, report.partitions
            );
        }
        if report.files_reoptimized > 0 {
            println!(
                "of which {} optimized anew after writes: {} read again, the rest of their \
                 chunks kept",
                report.files_reoptimized,
                bytes(report.bytes_reread)
            );
        }
        if report.files_skipped > 0 {
            let reasons: Vec<String> = report
                .skipped
                .iter()
                .map(|(why, n)| format!("{n} {why}"))
                .collect();
            println!(
                "left as they are: {} ({})",
                report.files_skipped,
                reasons.join(", ")
            );
        }
    }
    if let Some(why) = &report.cancelled {
        eprintln!(
            "cairn: warning: run stopped early, {why}; the files not reached are as they were"
        );
        return Ok(ExitCode::from(crate::exit_codes::EXIT_INCOMPLETE));
    }
    Ok(ExitCode::SUCCESS)
}

fn status(cli: &Globals, dir: &Path) -> Result<ExitCode> {
    let vol = open(cli, dir)?;
    let mut s = cairn_volume::status(&vol)?;
    s.jobs = cairn_volume::daemon::idle_jobs();
    print_status(cli, dir, &s)
}

fn print_status(cli: &Globals, dir: &Path, s: &cairn_volume::Status) -> Result<ExitCode> {
    if cli.json {
        println!("{}", serde_json::to_string_pretty(s)?);
    } else {
        let pct = |n: u64| {
            if s.logical_bytes == 0 {
                0.0
            } else {
                100.0 * n as f64 / s.logical_bytes as f64
            }
        };
        println!("volume {}", dir.display());
        println!(
            "  logical:     {} in {} files",
            bytes(s.logical_bytes),
            s.optimized_files + s.unoptimized_files
        );
        println!(
            "  optimized:   {} in {} files ({:.1}%)",
            bytes(s.optimized_bytes),
            s.optimized_files,
            pct(s.optimized_bytes)
        );
        println!(
            "  unoptimized: {} in {} files",
            bytes(s.unoptimized_bytes),
            s.unoptimized_files
        );
        println!(
            "  physical:    {} (backing files {}, chunk store {}, stream maps {})",
            bytes(s.physical_bytes),
            bytes(s.backing_bytes),
            bytes(s.store_bytes),
            bytes(s.state_bytes)
        );
        println!(
            "  saved:       {} (savings rate {:.1}%)",
            bytes(s.saved_bytes),
            100.0 * s.savings_rate
        );
        for (name, job) in &s.jobs {
            println!("  {name} job: {}", volume_client::job_line(job));
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn mount(cli: &Globals, a: &MountArgs) -> Result<ExitCode> {
    crate::mount::check_mountpoint(&a.mountpoint)?;
    // The volume stays open (its lock held) while it is served; its jobs
    // run in this process, asked for through the control socket.
    let vol = Arc::new(open(cli, &a.dir)?);
    let content = vol.content()?;
    // The jobs yield to this mount's own requests (docs/volume.md,
    // "Scheduler"), each within the default budget or the one given.
    let meter = Arc::new(cairn_volume::scheduler::ForegroundMeter::default());
    let mut budget = cairn_volume::scheduler::JobBudget::default();
    if let Some(cpu) = a.job_cpu {
        budget.cpu_percent = cpu;
    }
    if let Some(memory) = a.job_memory {
        budget.memory_bytes = memory;
    }
    vol.pace_jobs(
        cairn_volume::scheduler::Scheduler::new(Default::default(), meter.clone()),
        budget,
    );
    let daemon = cairn_volume::daemon::Daemon::start(
        vol.clone(),
        cairn_volume::daemon::DaemonOptions {
            optimize_every: a.optimize_every.0,
            ..Default::default()
        },
    )?;
    let options = cairn_volume::fuse::MountOptions {
        passthrough: !a.no_passthrough,
        allow_other: a.allow_other,
        space: Arc::new(cairn_volume::space::VolumeSpace::new(&vol)),
        meter,
        read_ahead_kib: match a.read_ahead {
            None => Some(cairn_volume::fuse::DEFAULT_READ_AHEAD_KIB),
            Some(0) => None,
            Some(kib) => Some(kib),
        },
        ..Default::default()
    };
    let shown = a.mountpoint.display().to_string();
    let mut installed = Ok(());
    // Set once unmounted: a signal then stops the running job instead.
    let unmounted = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let served = cairn_volume::fuse::serve(
        &vol.dir().files(),
        &a.mountpoint,
        content,
        vol.locks().clone(),
        options,
        |mut unmounter| {
            let name = shown.clone();
            let unmounted = unmounted.clone();
            installed = ctrlc::set_handler(move || {
                if unmounted.swap(true, std::sync::atomic::Ordering::SeqCst) {
                    // The running job stops at its next safe point.
                    cairn_engine::interrupt::request();
                    return;
                }
                if let Err(e) = unmounter.unmount() {
                    eprintln!(
                        "cairn: error: unmounting {name}: {e}; still mounted until \
                         `fusermount -u {name}` succeeds"
                    );
                }
            });
            if !cli.quiet {
                eprintln!(
                    "mounted volume {} at {shown} (read-write); Ctrl-C or `fusermount -u {shown}` unmounts",
                    a.dir.display()
                );
                let every = a
                    .optimize_every
                    .0
                    .map_or("on request only".to_string(), |d| {
                        format!("every {}", humantime::format_duration(d))
                    });
                eprintln!(
                    "jobs: optimize {every}; `cairn volume optimize|status {}` asks this process",
                    a.dir.display()
                );
            }
        },
    );
    // Unmounted (or the mount failed): the running job ends before the
    // volume closes; a signal now stops it at its next safe point.
    unmounted.store(true, std::sync::atomic::Ordering::SeqCst);
    let running = daemon
        .jobs()
        .into_iter()
        .find(|(_, j)| j.state == JobState::Running);
    if let (Some((name, _)), false) = (running, cli.quiet) {
        eprintln!(
            "cairn: waiting for the running {name} job to end (Ctrl-C stops it at its next \
             safe point; every file is whole either way)"
        );
    }
    daemon.stop();
    served?;
    installed.context("installing the signal handler")?;
    Ok(ExitCode::SUCCESS)
}
