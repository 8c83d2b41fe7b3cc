//! `cairn key list|add|remove|passwd`: the key files of an encrypted
//! repository (docs/security.md).

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{anyhow, bail, Result};
use clap::{Args, Subcommand};
use serde_json::json;

use cairn_crypto::password::process_env;
use cairn_crypto::{KeyFile, Password, PasswordSource, PromptMode};
use cairn_engine::Repository;
use cairn_engine::{crypto, key_admin};

use crate::globals::{Globals, RepoArgs};
use crate::output::time;
use crate::repo_open::{announcing_lock_waits, backend, password, KdfArgs};

/// Where the new password of `key add|passwd` comes from.
#[derive(Args, Debug, Clone)]
pub struct NewKeyArgs {
    /// Read the new password from the first line of PATH (otherwise it is
    /// asked for twice on the terminal).
    #[arg(long, value_name = "PATH")]
    pub new_password_file: Option<PathBuf>,
    #[command(flatten)]
    pub kdf: KdfArgs,
    /// Wait for another writer to finish instead of failing.
    #[arg(long)]
    pub wait: bool,
}

/// `cairn key`: the key files of an encrypted repository.
#[derive(Subcommand, Debug)]
pub enum KeyCommand {
    /// List the key files (the one the password opened is marked `*`).
    List(RepoArgs),
    /// Add a key file: a new password for the same repository.
    Add {
        #[command(flatten)]
        repository: RepoArgs,
        #[command(flatten)]
        new: NewKeyArgs,
    },
    /// Remove a key file (its id, or a unique prefix); the last one never
    /// is, and the one the password in use opened only with --force.
    Remove {
        #[command(flatten)]
        repository: RepoArgs,
        id: String,
        /// Remove the key file even if it is the one the password in use
        /// opened (that password then stops working).
        #[arg(long)]
        force: bool,
        /// Wait for another writer to finish instead of failing.
        #[arg(long)]
        wait: bool,
    },
    /// Change the password of a key file (default: the one the current
    /// password opens); the old password stops working.
    Passwd {
        #[command(flatten)]
        repository: RepoArgs,
        /// Key id or a unique prefix.
        id: Option<String>,
        #[command(flatten)]
        new: NewKeyArgs,
    },
}

/// A new password for `key add|passwd`: from `--new-password-file`, or
/// asked twice on the terminal. The repository password's sources are not
/// used: they hold the current password.
fn new_password(a: &NewKeyArgs) -> Result<Password> {
    let source = match &a.new_password_file {
        Some(path) => PasswordSource::File(path.clone()),
        None if std::io::stdin().is_terminal() => PasswordSource::Prompt,
        None => bail!("no new password given: use --new-password-file PATH"),
    };
    Ok(source.read(&process_env, PromptMode::Confirm)?)
}

/// `cairn key ...`.
pub fn run(cli: &Globals, path: &Path, command: &KeyCommand) -> Result<ExitCode> {
    // The password is kept: it opens the repository, then names the key
    // file it opened (the engine tries the key files once more).
    let mut given: Option<Password> = None;
    let repo = announcing_lock_waits(Repository::open_with_password(
        backend(cli, path)?,
        &mut || {
            let p = password(cli, PromptMode::Once)?;
            given = Some(p.clone());
            Ok(p)
        },
    )?);
    let current =
        given.ok_or_else(|| anyhow!("the repository is not encrypted: it has no key files"))?;
    match command {
        KeyCommand::List(_) => list(cli, &repo, &current),
        KeyCommand::Add { new: a, .. } => {
            let new = new_password(a)?;
            let params = a.kdf.params()?;
            let _lock = repo.lock_writer(a.wait)?;
            let opened = key_admin::opened_key(&repo, &current)?;
            let name = crypto::add_key_file(
                &**repo.backend(),
                &repo.config.id,
                &opened.master,
                &new,
                params,
                crypto::local_key_label(),
            )?;
            let id = cairn_engine::object_names::key_file_id(&name);
            report(cli, "added", id)
        }
        KeyCommand::Remove {
            id, force, wait, ..
        } => {
            let lock = repo.lock_writer(*wait)?;
            let opened = key_admin::opened_key(&repo, &current)?;
            let in_use = (!force).then(|| opened.key_file.id());
            let removed = key_admin::remove_key(&repo, &lock, id, in_use)?;
            crate::key_cache_hook::forget_cached_key(&repo.config.id)?;
            report(cli, "removed", &removed)
        }
        KeyCommand::Passwd { id, new: a, .. } => {
            let new = new_password(a)?;
            let params = a.kdf.params()?;
            let lock = repo.lock_writer(a.wait)?;
            let opened = key_admin::opened_key(&repo, &current)?;
            let target = match id {
                Some(id) => key_admin::find_key_file(&repo, id)?,
                None => (opened.name.clone(), opened.key_file.clone()),
            };
            let changed =
                key_admin::change_password(&repo, &lock, &opened.master, &target, &new, params)?;
            crate::key_cache_hook::forget_cached_key(&repo.config.id)?;
            report(cli, "changed the password of", changed.id())
        }
    }
}

fn report(cli: &Globals, done: &str, id: &str) -> Result<ExitCode> {
    if cli.json {
        println!("{}", json!({ "id": id }));
    } else if !cli.quiet {
        println!("{done} key {id}");
    }
    Ok(ExitCode::SUCCESS)
}

/// The creation time (a key file's clear text: any value is shown, none overflows).
fn created(kf: &KeyFile) -> String {
    time(i64::try_from(kf.created()).map_or(i64::MAX, |s| s.saturating_mul(1_000_000_000)))
}

fn key_json(kf: &KeyFile, current: bool) -> serde_json::Value {
    let p = kf.params();
    json!({
        "id": kf.id(),
        "current": current,
        "created": created(kf),
        "created_unix": kf.created(),
        "host": kf.label().host,
        "user": kf.label().user,
        "kdf": {
            "name": "argon2id",
            "m_cost_kib": p.m_cost_kib,
            "t_cost": p.t_cost,
            "p_cost": p.p_cost,
        },
    })
}

fn list(cli: &Globals, repo: &Repository, current: &Password) -> Result<ExitCode> {
    let opened = key_admin::opened_key(repo, current)?;
    let files = crypto::key_files(&**repo.backend(), &repo.config.id)?;
    if cli.json {
        let mut rows: Vec<_> = files
            .good
            .iter()
            .map(|(name, kf)| key_json(kf, *name == opened.name))
            .collect();
        rows.extend(files.damaged.iter().map(
            |(name, why)| json!({ "id": cairn_engine::object_names::key_file_id(name), "damaged": why }),
        ));
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "  {:<16}  {:<20}  {:<16}  {:<12}  kdf",
        "id", "created", "host", "user"
    );
    for (name, kf) in &files.good {
        let p = kf.params();
        println!(
            "{} {:<16}  {:<20}  {:<16}  {:<12}  argon2id m={}KiB t={} p={}",
            if *name == opened.name { '*' } else { ' ' },
            kf.id(),
            created(kf),
            crate::output::display_name(&kf.label().host),
            crate::output::display_name(&kf.label().user),
            p.m_cost_kib,
            p.t_cost,
            p.p_cost
        );
    }
    for (name, why) in &files.damaged {
        println!(
            "! {:<16}  damaged: {}",
            crate::output::display_name(cairn_engine::object_names::key_file_id(name)),
            why
        );
    }
    Ok(ExitCode::SUCCESS)
}
