//! `cairn volume create|optimize|status`: the primary volume of
//! docs/volume.md, offline (each command opens the volume itself and holds
//! its lock while it runs; the mount daemon comes later).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{anyhow, Result};
use clap::{Args, Subcommand};
use serde_json::json;

use cairn_crypto::{Algorithm, PromptMode};
use cairn_volume::policy::MIN_AGE_FLOOR;
use cairn_volume::{OptimizeOptions, Policy, StoreEncryption, Volume, VolumeSettings};

use crate::encryption::EncryptionArgs;
use crate::globals::Globals;
use crate::output::bytes;

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
    /// Logical and physical bytes, optimized and unoptimized files and
    /// bytes, the savings rate and the chunk store's size.
    Status(StatusArgs),
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
    /// volume's, 32KiB at creation).
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
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
}

/// `cairn volume optimize`.
#[derive(Args, Debug)]
pub struct OptimizeArgs {
    /// The volume directory.
    pub dir: PathBuf,
    #[command(flatten)]
    pub policy: PolicyArgs,
}

/// `cairn volume status`.
#[derive(Args, Debug)]
pub struct StatusArgs {
    /// The volume directory.
    pub dir: PathBuf,
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

fn parse_size(text: &str) -> std::result::Result<u64, String> {
    crate::output::parse_size_u64(text).map_err(|e| e.to_string())
}

pub fn run(cli: &Globals, cmd: &VolumeCommand) -> Result<ExitCode> {
    match cmd {
        VolumeCommand::Create(a) => create(cli, a),
        VolumeCommand::Optimize(a) => optimize(cli, a),
        VolumeCommand::Status(a) => status(cli, &a.dir),
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
    let encryption = if a.encryption.encryption == "none" {
        None
    } else {
        let algorithm: Algorithm = a.encryption.encryption.parse().map_err(|_| {
            anyhow!(
                "unknown --encryption {:?} (aes-256-gcm, chacha20poly1305 or none)",
                a.encryption.encryption
            )
        })?;
        Some(StoreEncryption {
            algorithm,
            password: crate::encryption::new_repository_password(cli)?,
            kdf: a.encryption.kdf.params()?,
        })
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
    let mut password = || crate::encryption::password(cli, PromptMode::Once);
    let mut master_key = crate::key_cache_hook::cached_or_password(&mut password);
    Ok(Volume::open(dir, &mut master_key)?)
}

fn optimize(cli: &Globals, a: &OptimizeArgs) -> Result<ExitCode> {
    let vol = open(cli, &a.dir)?;
    let policy = with_options(vol.config().policy.clone(), &a.policy);
    let report = cairn_volume::optimize(
        &vol,
        &OptimizeOptions {
            policy: Some(policy),
            ..Default::default()
        },
    )?;
    if cli.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else if !cli.quiet {
        println!(
            "optimized {} of {} files ({}), {} new in the chunk store, in {:.1} s",
            report.files_optimized,
            report.files_scanned,
            bytes(report.bytes_optimized),
            bytes(report.new_chunk_bytes),
            report.seconds
        );
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
    Ok(ExitCode::SUCCESS)
}

fn status(cli: &Globals, dir: &Path) -> Result<ExitCode> {
    let vol = open(cli, dir)?;
    let s = cairn_volume::status(&vol)?;
    if cli.json {
        println!("{}", serde_json::to_string_pretty(&s)?);
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
    }
    Ok(ExitCode::SUCCESS)
}
