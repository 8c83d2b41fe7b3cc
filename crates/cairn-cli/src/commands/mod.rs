//! One file per command, each holding its options (`clap::Args`) and the
//! function that runs it; `run` dispatches. The commands sit above the
//! shared modules (`encryption` opens repositories, `output`, `progress`,
//! `snapshot_args`, `backup_select`, `repo_config`, `exit_codes`), which
//! never import a command or `cli.rs`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{anyhow, Result};

use cairn_engine::tag::TagChange;

use crate::cli::{Cli, Command};
use crate::snapshot_args::snapshot_os_path;

pub mod analyze;
pub mod backup;
pub mod cat;
pub mod check;
pub mod completions;
pub mod copy;
pub mod diff;
pub mod dump;
pub mod experiment;
pub mod fastcopy;
pub mod find;
pub mod forget;
pub mod gc;
pub mod init;
pub mod key;
pub mod ls;
pub mod man;
pub mod mount;
pub mod repair;
pub mod restore;
pub mod sim;
pub mod snapshots;
pub mod stats;
pub mod tag;
pub mod trace;
pub mod unlock;
pub mod volume;
pub mod volume_client;
pub mod volume_gc;
pub mod volume_scrub;
pub mod volume_snapshot;

pub fn run(cli: Cli) -> Result<ExitCode> {
    let Cli {
        globals, command, ..
    } = cli;
    let cli = &globals;
    let repo_path = || -> Result<PathBuf> {
        let path = cli
            .repo()
            .map(PathBuf::from)
            .ok_or_else(|| anyhow!("no repository given: pass --repo PATH or set CAIRN_REPO"))?;
        crate::repo_location::refuse_url(&path)?;
        Ok(path)
    };
    let open = || crate::repo_open::open_repository(cli, &repo_path()?);
    let open_uncached = || crate::repo_open::open_repository_uncached(cli, &repo_path()?);
    match &command {
        Command::Init(a) => init::run(cli, &repo_path()?, &a.settings, &a.encryption, &a.identity),
        Command::Copy(a) => copy::copy(cli, &repo_path()?, a),
        Command::Key(k) => key::run(cli, &repo_path()?, k),
        Command::Unlock(a) => unlock::unlock(cli, &repo_path()?, a),
        Command::Lock(a) => unlock::lock(cli, cli.repo(), a),
        Command::Backup(a) => backup::run(cli, &repo_path()?, a),
        Command::Snapshots(a) => {
            snapshots::snapshots(cli, &open()?, a.group_by, a.latest, &a.filter)
        }
        Command::Ls(a) => {
            let path = a.path.as_deref().map(snapshot_os_path).transpose()?;
            ls::ls(
                cli,
                &open()?,
                &a.snapshot,
                path.as_deref(),
                &a.filter.filter()?,
            )
        }
        Command::Restore(a) => restore::restore(cli, &open()?, a),
        Command::Dump(a) => {
            let path = a.path.as_deref().map(snapshot_os_path).transpose()?;
            dump::dump(&open()?, &a.snapshot, path.as_deref(), &a.filter.filter()?)
        }
        Command::Cat(a) => cat::cat(
            &open()?,
            &a.snapshot,
            &snapshot_os_path(&a.path)?,
            &a.filter.filter()?,
        ),
        Command::Mount(a) => crate::mount::mount(cli, &a.mountpoint, &open),
        Command::Stats(_) => stats::run(cli, &open()?),
        Command::Check(a) => check::run(cli, &open_uncached()?, a.read_data),
        Command::Repair(repair::RepairCommand::Index {
            read_data, wait, ..
        }) => repair::repair_index(cli, &open_uncached()?, *read_data, *wait),
        Command::Repair(repair::RepairCommand::Snapshots {
            snapshots,
            forget,
            dry_run,
            read_data,
            wait,
            filter,
            ..
        }) => {
            let opts = cairn_engine::repair_snapshots::RepairSnapshotsOptions {
                snapshots: repair::snapshot_ids(&open_uncached()?, snapshots, &filter.filter()?)?,
                forget: *forget,
                dry_run: *dry_run,
                read_data: *read_data,
            };
            repair::repair_snapshots(cli, &open_uncached()?, &opts, *wait)
        }
        Command::Forget(a) => forget::run(cli, &open()?, a),
        Command::Fastcopy(a) => fastcopy::run(
            cli,
            &open()?,
            &a.snapshot,
            &a.tag,
            a.wait,
            &a.filter.filter()?,
        ),
        Command::Gc(a) => gc::gc(cli, &open()?, a),
        Command::Trace(a) => trace::run(cli, a),
        Command::Sim(a) => sim::sim(cli, a),
        Command::Analyze(a) => analyze::run(cli, a),
        Command::Experiment(a) => experiment::run(cli, a),
        Command::Diff(a) => {
            let repo = open()?;
            let path = a.path.as_deref().map(snapshot_os_path).transpose()?;
            let filter = a.filter.filter()?;
            diff::run(
                cli,
                &repo,
                [&a.old, &a.new],
                path.as_deref(),
                a.metadata,
                &filter,
            )
        }
        Command::Find(a) => {
            let repo = open()?;
            find::run(
                cli,
                &repo,
                (&cairn_engine::names::os_pattern(&a.pattern), a.ignore_case),
                &a.snapshots,
                &a.filter.filter()?,
            )
        }
        Command::Tag(a) => {
            let repo = open()?;
            let change = TagChange {
                // `--set ''` clears every tag.
                set: a
                    .set
                    .as_ref()
                    .map(|s| s.iter().filter(|t| !t.is_empty()).cloned().collect()),
                add: a.add.clone(),
                remove: a.remove.clone(),
            };
            tag::run(
                cli,
                &repo,
                &a.snapshots,
                &change,
                a.wait,
                &a.filter.filter()?,
            )
        }
        Command::Completions(a) => completions::run(crate::cli::command(), a.shell),
        Command::Man(a) => man::man_pages(cli, crate::cli::command(), &a.out),
        Command::Volume(v) => volume::run(cli, v),
    }
}
