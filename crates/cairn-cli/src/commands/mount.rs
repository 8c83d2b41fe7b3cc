//! `cairn mount`: the options; the file system is `crate::mount`.

use std::path::PathBuf;

use clap::Args;

#[derive(Args, Debug)]
pub struct MountArgs {
    #[command(flatten)]
    pub repository: crate::globals::RepoArgs,
    /// An existing directory to mount on.
    pub mountpoint: PathBuf,
}
