//! `cairn init`: create a repository with the given settings.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use serde_json::json;

use super::copy::IdentityArgs;
use crate::globals::Globals;
use crate::repo_config::{config_from, new_repository, resolve_auto, InitArgs};

/// The options of `cairn init`.
#[derive(Args, Debug)]
pub struct InitCommandArgs {
    #[command(flatten)]
    pub repository: crate::globals::RepoArgs,
    #[command(flatten)]
    pub settings: InitArgs,
    #[command(flatten)]
    pub encryption: crate::repo_open::EncryptionArgs,
    #[command(flatten)]
    pub identity: IdentityArgs,
}

pub fn run(
    cli: &Globals,
    path: &Path,
    a: &InitArgs,
    encryption: &crate::repo_open::EncryptionArgs,
    identity: &IdentityArgs,
) -> Result<ExitCode> {
    let cfg = resolve_auto(cli, new_repository(config_from(a)?), a)?;
    let repo = if identity.source().is_some() {
        super::copy::init_with_identity(cli, path, cfg, encryption, identity)?
    } else {
        crate::repo_open::init_repository(cli, path, cfg, encryption)?
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
