//! Command-line arguments (clap derive).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "cairn",
    version,
    about = "Deduplicating backups: DDFS-style dedup, Merkle-tree recipes, verified restores"
)]
pub struct Cli {
    /// Repository directory (created by `init`, or by the first `backup`).
    #[arg(short, long, env = "CAIRN_REPO", global = true)]
    pub repo: Option<PathBuf>,

    /// Machine-readable JSON on standard output.
    #[arg(long, global = true)]
    pub json: bool,

    /// No progress bar and no summary lines (errors and warnings still go to stderr).
    #[arg(short, long, global = true)]
    pub quiet: bool,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Create a repository with the given algorithms (stored in its config).
    Init(InitArgs),
    /// Back up paths (each its own stream) or standard input.
    Backup(BackupArgs),
    /// List snapshots, oldest first.
    Snapshots,
    /// List the entries of a snapshot.
    Ls {
        /// Snapshot id (a unique prefix of at least 4 hex digits) or `latest`.
        snapshot: String,
        /// Path inside the snapshot to list (default: everything).
        path: Option<String>,
    },
    /// Restore a snapshot (or one subtree of it) into a directory.
    Restore {
        snapshot: String,
        /// Directory to restore into (created if missing).
        #[arg(short, long)]
        target: PathBuf,
        /// Restore only this path inside the snapshot.
        #[arg(long)]
        include: Option<String>,
        /// Restore cache size in containers.
        #[arg(long, default_value_t = 16)]
        cache_containers: usize,
    },
    /// Write one file of a snapshot to standard output.
    Cat { snapshot: String, path: String },
    /// Repository statistics: dedup, compression, counters, index RAM.
    Stats,
    /// Verify the repository; exit non-zero if anything is damaged.
    Check {
        /// Also read every container and rehash every chunk.
        #[arg(long)]
        read_data: bool,
    },
}

#[derive(Args, Debug, Clone)]
pub struct InitArgs {
    /// Chunker: fastcdc, rabin, regression or fixed.
    #[arg(long, default_value = "fastcdc")]
    pub chunker: String,
    /// Average chunk size (fixed: the block size), e.g. 8KiB.
    #[arg(long, default_value = "8KiB")]
    pub avg_size: String,
    /// Minimum chunk size (default avg/4).
    #[arg(long)]
    pub min_size: Option<String>,
    /// Maximum chunk size (default avg*8).
    #[arg(long)]
    pub max_size: Option<String>,
    /// Fingerprint: blake3, sha256 or sha1.
    #[arg(long, default_value = "blake3")]
    pub fingerprint: String,
    /// Compression: zstd, lz4 or none.
    #[arg(long, default_value = "zstd")]
    pub compression: String,
    /// zstd level.
    #[arg(long, default_value_t = 3)]
    pub zstd_level: i32,
    /// Store a chunk raw unless compression saves at least this percentage.
    #[arg(long, default_value_t = 10)]
    pub min_savings: u8,
    /// Container size, e.g. 4MiB.
    #[arg(long, default_value = "4MiB")]
    pub container_size: String,
    /// Locality cache capacity in containers.
    #[arg(long, default_value_t = 256)]
    pub cache_containers: u32,
    /// Disable the Summary Vector (ablation).
    #[arg(long)]
    pub no_summary_vector: bool,
    /// Disable the Locality Preserved Cache (ablation).
    #[arg(long)]
    pub no_locality_cache: bool,
}

#[derive(Args, Debug)]
pub struct BackupArgs {
    /// Files and directories to back up.
    pub paths: Vec<PathBuf>,
    /// Back up standard input as one file.
    #[arg(long)]
    pub stdin: bool,
    /// File name for --stdin.
    #[arg(long, default_value = "stdin", requires = "stdin")]
    pub stdin_name: String,
    /// Tag the snapshot (repeatable).
    #[arg(long = "tag")]
    pub tags: Vec<String>,
    /// Host name recorded in the snapshot.
    #[arg(long)]
    pub host: Option<String>,
    /// Wait for another writer to finish instead of failing.
    #[arg(long)]
    pub wait: bool,
    /// Settings used if the repository does not exist yet.
    #[command(flatten)]
    pub init: InitArgs,
}
