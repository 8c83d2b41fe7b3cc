//! `cairn unlock --for DURATION` and `cairn lock [--all]`: the opt-in
//! cache of unlocked repository keys (`cairn_crypto::key_cache`;
//! docs/security.md, "The unlocked-key cache").
//!
//! `unlock` takes the password from the usual sources, proves it by
//! opening the repository, and caches the master key under the
//! repository's id for the given time. `lock` forgets it at once. Where
//! commands use the cache: `key_cache_hook.rs`.

use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Result};
use clap::Args;
use serde_json::json;

use cairn_crypto::password::process_env;
use cairn_crypto::{KeyCache, MasterKey, PromptMode};
use cairn_engine::crypto::{self as repo_crypto, StoredConfig};
use cairn_engine::Repository;

use crate::globals::Globals;
use crate::output::time;
use crate::repo_location::{self, RepoLocation};
use crate::repo_open;

/// `cairn unlock`.
#[derive(Args, Debug, Clone)]
pub struct UnlockArgs {
    #[command(flatten)]
    pub repository: crate::globals::RepoArgs,
    /// How long the repository stays unlocked: 30s, 10m, 2h, 1d (at most 7d).
    #[arg(long = "for", value_name = "DURATION", value_parser = parse_lifetime)]
    pub lifetime: Duration,
}

/// `cairn lock`.
#[derive(Args, Debug, Clone)]
pub struct LockArgs {
    #[command(flatten)]
    pub repository: crate::globals::RepoArgs,
    /// Forget the unlocked keys of every repository, not only --repo's.
    #[arg(long)]
    pub all: bool,
}

/// A duration such as `10m`, `1h30m` or `90s`, whole seconds, 1s to 7d.
fn parse_lifetime(text: &str) -> std::result::Result<Duration, String> {
    let lifetime = humantime::parse_duration(text)
        .map_err(|e| format!("{e} (write a duration such as 30s, 10m, 2h or 1d)"))?;
    let max = cairn_crypto::key_cache::MAX_LIFETIME;
    if lifetime < Duration::from_secs(1) || lifetime > max {
        return Err(format!(
            "an unlock lasts from 1s to {}",
            humantime::format_duration(max)
        ));
    }
    Ok(Duration::from_secs(lifetime.as_secs()))
}

/// The cache the environment chooses (`CAIRN_KEY_CACHE`, `CAIRN_KEY_CACHE_SCOPE`).
fn key_cache() -> Result<KeyCache> {
    Ok(KeyCache::from_env(&process_env)?)
}

/// `cairn unlock --for DURATION`.
pub fn unlock(cli: &Globals, path: &Path, a: &UnlockArgs) -> Result<ExitCode> {
    let cache = key_cache()?;
    if cache.is_off() {
        bail!(
            "no place to keep an unlocked key: the kernel keyring is refused here and no \
             tmpfs directory is usable (set CAIRN_KEY_CACHE_DIR to a private directory on a \
             tmpfs; docs/security.md)"
        );
    }
    // The password is asked for even if a key is cached: unlock proves it.
    let mut unlocked: Option<MasterKey> = None;
    let repo = repo_open::announcing_lock_waits(open_local_or_s3(cli, path, &mut |b, s| {
        let master = repo_crypto::unlock_with_password(b, s, &mut || {
            repo_open::password(cli, PromptMode::Once)
        })?;
        unlocked = Some(master.clone());
        Ok(master)
    })?);
    let Some(master) = unlocked else {
        bail!("the repository is not encrypted: there is no key to unlock");
    };
    cache.put(&repo.config.id, &master, a.lifetime)?;
    let until = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
        + a.lifetime.as_secs();
    let until_ns = i64::try_from(until).unwrap_or(i64::MAX / 1_000_000_000) * 1_000_000_000;
    if cli.json {
        println!(
            "{}",
            json!({
                "repository": repo.config.id,
                "seconds": a.lifetime.as_secs(),
                "until": time(until_ns),
                "store": cache.describe(),
            })
        );
    } else if !cli.quiet {
        println!(
            "unlocked repository {} until {} ({}), key kept in {}; `cairn lock` forgets it",
            repo.config.id,
            time(until_ns),
            humantime::format_duration(a.lifetime),
            cache.describe()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Opens the repository at `path` with `master_key` deciding its key.
fn open_local_or_s3(
    cli: &Globals,
    path: &Path,
    master_key: &mut cairn_engine::MasterKeySource<'_>,
) -> Result<Repository> {
    Ok(match repo_location::parse(path, cli.s3())? {
        RepoLocation::Local(path) => Repository::open_local_with_master_key(path, master_key)?,
        RepoLocation::S3(config) => Repository::open_with_master_key(
            repo_location::s3_backend_cached(*config, cli.s3())?,
            master_key,
        )?,
    })
}

/// `cairn lock [--all]`.
pub fn lock(cli: &Globals, path: Option<&Path>, a: &LockArgs) -> Result<ExitCode> {
    let cache = key_cache()?;
    let forgotten = match (a.all, path) {
        (true, _) => cache.forget_all()?,
        (false, Some(path)) => {
            // Only the id is needed, and it is readable without a key.
            let bytes = repo_open::backend(cli, path)?.read(cairn_engine::object_names::CONFIG)?;
            let id = StoredConfig::decode(&bytes)?.id().to_string();
            usize::from(cache.forget(&id)?)
        }
        (false, None) => {
            bail!("no repository given: pass --repo PATH (or set CAIRN_REPO), or lock --all")
        }
    };
    if cli.json {
        println!("{}", json!({ "forgotten": forgotten }));
    } else if !cli.quiet {
        match forgotten {
            0 => println!("nothing was unlocked"),
            1 => println!("locked: 1 unlocked key forgotten"),
            n => println!("locked: {n} unlocked keys forgotten"),
        }
    }
    Ok(ExitCode::SUCCESS)
}
