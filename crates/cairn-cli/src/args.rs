//! Command-line arguments (clap derive).

use std::ffi::OsString;
use std::path::PathBuf;

use clap::builder::TypedValueParser;
use clap::{Args, Parser, Subcommand};

use crate::snapshot_args::FilterArgs;

#[derive(Parser, Debug)]
#[command(
    name = "cairn",
    version,
    about = "Deduplicating backups: DDFS-style dedup, Merkle-tree recipes, verified restores"
)]
pub struct Cli {
    /// Repository directory (created by `init`, or by the first `backup`),
    /// or an S3 bucket prefix: s3:https://HOST[:PORT]/BUCKET/PREFIX, s3://BUCKET/PREFIX.
    #[arg(short, long, env = "CAIRN_REPO", global = true)]
    pub repo: Option<PathBuf>,

    #[command(flatten)]
    pub s3: crate::repo_location::S3Args,

    /// Machine-readable JSON on standard output.
    #[arg(long, global = true)]
    pub json: bool,

    /// No progress bar and no summary lines (errors and warnings still go to stderr).
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub quiet: bool,

    /// More detail: backup's lookup, cache and index statistics, restore's
    /// policy and I/O counters and one line per file (new, replaced or
    /// skipped), per-snapshot statistics in `snapshots`.
    #[arg(short, long, global = true)]
    pub verbose: bool,

    /// Read the repository password from the first line of PATH (an
    /// encrypted repository only; see docs/security.md).
    // An empty CAIRN_PASSWORD_FILE counts as unset (`encryption::password`),
    // so clap must accept the empty value its default path parser refuses.
    #[arg(
        long,
        env = "CAIRN_PASSWORD_FILE",
        global = true,
        value_name = "PATH",
        value_parser = clap::builder::OsStringValueParser::new().map(PathBuf::from)
    )]
    pub password_file: Option<PathBuf>,

    #[command(subcommand)]
    pub command: Command,

    /// The settings given on the command line of `backup`, `trace` or `sim`
    /// (argument ids), filled in by `main` from clap's value sources.
    #[arg(skip)]
    pub given_init_flags: Vec<String>,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Create a repository with the given algorithms (stored in its config).
    Init {
        #[command(flatten)]
        settings: InitArgs,
        #[command(flatten)]
        encryption: crate::encryption::EncryptionArgs,
        #[command(flatten)]
        identity: crate::copy_commands::IdentityArgs,
    },
    /// Copy snapshots into another repository (a directory or S3) that
    /// shares this one's identity, moving only the chunks it lacks; a
    /// destination holding no repository is created so. See docs/copy.md.
    Copy(crate::copy_commands::CopyArgs),
    /// Back up paths (each its own stream) or standard input.
    Backup(BackupArgs),
    /// List snapshots, oldest first (those matching --host/--tag/--path).
    Snapshots {
        /// Group the listing by these fields: any of host, paths, tags
        /// (comma-separated), e.g. `--group-by host,paths`.
        #[arg(long, value_name = "FIELDS")]
        group_by: Option<String>,
        #[command(flatten)]
        filter: FilterArgs,
    },
    /// List the entries of a snapshot.
    Ls {
        /// Snapshot id (a unique prefix of at least 4 hex digits) or `latest`.
        snapshot: String,
        /// Path inside the snapshot to list (default: everything); a
        /// leading `/` is the snapshot's root.
        path: Option<OsString>,
        #[command(flatten)]
        filter: FilterArgs,
    },
    /// Restore a snapshot (or one subtree of it) into a directory.
    ///
    /// A restore touches nothing outside its target: each file is written to
    /// a temporary and renamed into place (a hard link or symlink already at
    /// its name is replaced, never written through or followed), and a
    /// symlink where a directory goes is replaced by a real directory.
    /// A full target file system stops the restore with one error.
    /// See docs/restore-target.md.
    Restore(RestoreArgs),
    /// Write one file of a snapshot to standard output.
    Cat {
        /// Snapshot id (a unique prefix of at least 4 hex digits) or `latest`.
        snapshot: String,
        /// The file, from the snapshot's root (a leading `/` is optional).
        path: OsString,
        #[command(flatten)]
        filter: FilterArgs,
    },
    /// Serve the snapshots as a read-only FUSE file system at MOUNTPOINT
    /// (by id, time, tag and host; docs/mount.md) until Ctrl-C, SIGTERM or
    /// `fusermount -u MOUNTPOINT`.
    Mount {
        /// An existing directory to mount on.
        mountpoint: PathBuf,
    },
    /// Write a file of a snapshot to standard output, or a directory (`/`
    /// or no PATH: the whole snapshot) as a tar archive with modes, owners,
    /// mtimes and symlinks. See docs/restore-select.md.
    Dump {
        /// Snapshot id (a unique prefix of at least 4 hex digits) or `latest`.
        snapshot: String,
        /// Path inside the snapshot (default: the whole snapshot).
        path: Option<OsString>,
        /// Archive format for a directory (tar is the only one).
        #[arg(long, default_value = "tar", value_parser = ["tar"])]
        archive: String,
        #[command(flatten)]
        filter: FilterArgs,
    },
    /// Repository statistics: dedup, compression, counters, index RAM.
    Stats,
    /// Record what a backup of PATH would ingest as a cairn chunk trace
    /// (fingerprint, size and compressed size of every chunk, plus the
    /// directory tree), so a dataset can be studied without keeping it.
    Trace(TraceArgs),
    /// Replay chunk traces or a synthetic workload, one generation each,
    /// through a simulated repository; one row per generation.
    Sim(SimArgs),
    /// Dataset study (primary-dedup paper): savings vs chunk size, basic vs
    /// regression chunking, duplicate bytes by reference count, global vs
    /// partitioned dedup.
    Analyze(AnalyzeArgs),
    /// Run a reproduction experiment; prints a table (or --json) and writes
    /// CSV and a plot. Available: index-io (DDFS Table 4), index-ram (index
    /// RAM per chunk and throughput, DDFS vs the primary-dedup cuckoo index),
    /// eager-vs-lazy and ring-size (fingerprint lookup per device class),
    /// partition (partitioned dedup with reconciliation, primary-dedup paper),
    /// restore (restore caches and rewriting, 002 Fig. 6-8).
    Experiment(ExperimentArgs),
    /// Verify the repository; exit non-zero if anything is damaged.
    Check {
        /// Also read every container and rehash every chunk.
        #[arg(long)]
        read_data: bool,
    },
    /// Rebuild derived data after damage (`check` says which to run).
    #[command(subcommand)]
    Repair(RepairCommand),
    /// Remove snapshots, by id or by a retention policy (restic's rules:
    /// docs/gc.md). Their data goes at the next `gc` (or with --prune).
    Forget(ForgetArgs),
    /// A new snapshot naming the same tree as SNAPSHOT (003 §2): constant
    /// time, nothing written but the record.
    ///
    /// `--tag` names the copy's tags, so the tag filter is `--filter-tag` here.
    #[command(mut_arg("filter_tag", |a| a.long("filter-tag")))]
    Fastcopy {
        snapshot: String,
        /// Tags of the copy (default: the source's).
        #[arg(long)]
        tag: Vec<String>,
        /// Wait for a running backup instead of failing at once.
        #[arg(long)]
        wait: bool,
        #[command(flatten)]
        filter: FilterArgs,
    },
    /// Garbage collection: find the chunks no snapshot needs and reclaim
    /// their space (mark, select, copy forward, commit, delete; 003 §3).
    #[command(alias = "prune")]
    Gc(GcArgs),
    #[command(flatten)]
    Browse(BrowseCommand),
    /// The key files of an encrypted repository: list, add, remove, passwd.
    #[command(subcommand)]
    Key(crate::encryption::KeyCommand),
    /// Take the password once and keep the repository's key unlocked for
    /// DURATION (kernel keyring, or a tmpfs file; docs/security.md): until
    /// then commands need no password.
    Unlock(crate::unlock_commands::UnlockArgs),
    /// Forget the unlocked key of --repo (or of every repository: --all) at once.
    Lock(crate::unlock_commands::LockArgs),
    /// Print a shell completion script for SHELL to standard output, e.g.
    /// `cairn completions bash > /etc/bash_completion.d/cairn`.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Write man pages (cairn.1 and one cairn-COMMAND.1 per subcommand) into DIR.
    Man {
        /// Directory for the pages (created if missing).
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
    },
}

/// Commands that compare, search and relabel snapshots
/// (`browse_commands.rs`, docs/browse.md).
#[derive(Subcommand, Debug)]
pub enum BrowseCommand {
    /// What changed from snapshot OLD to NEW: added (+), removed (-),
    /// modified (M) and, with --metadata, metadata-only (U) changes.
    /// Unchanged subtrees and files are recognised by their fingerprints
    /// and never read.
    Diff {
        /// Snapshot id (a unique prefix of at least 4 hex digits) or `latest`.
        old: String,
        new: String,
        /// Compare only this path (a leading `/` is the snapshot's root).
        path: Option<OsString>,
        /// Also report changes of mode, owner, group or mtime alone.
        #[arg(long)]
        metadata: bool,
        #[command(flatten)]
        filter: FilterArgs,
    },
    /// Paths matching a glob in every snapshot (or the given ones):
    /// `*` and `?` stay within a name, `**` crosses directories; a pattern
    /// without `/` matches names, one with `/` whole paths.
    Find {
        pattern: OsString,
        /// Search only this snapshot (repeatable; id prefix or `latest`).
        #[arg(long = "snapshot", short = 's', value_name = "ID")]
        snapshots: Vec<String>,
        #[command(flatten)]
        filter: FilterArgs,
    },
    /// Change the tags of snapshots. Each changed snapshot gets a new id
    /// (records are named by their content): the new record is written,
    /// then the old one deleted.
    Tag {
        /// Snapshots to change (id prefixes or `latest`); none given: every
        /// snapshot the filter (--host, --tag, --path; one is required then)
        /// lets through.
        #[arg(value_name = "SNAPSHOT")]
        snapshots: Vec<String>,
        /// Add tags (repeatable or comma-separated).
        #[arg(long, value_delimiter = ',')]
        add: Vec<String>,
        /// Remove tags (repeatable or comma-separated).
        #[arg(long, value_delimiter = ',')]
        remove: Vec<String>,
        /// Replace all tags (`--set ''` removes every tag).
        #[arg(long, value_delimiter = ',')]
        set: Option<Vec<String>>,
        /// Wait for a running backup instead of failing at once.
        #[arg(long)]
        wait: bool,
        #[command(flatten)]
        filter: FilterArgs,
    },
}

/// How a garbage collection runs (shared by `gc` and `forget --prune`).
#[derive(Args, Debug, Clone)]
pub struct GcTuning {
    /// Collector: lgc (logical, 003 §3.1), pgc (physical, §3.2) or pgc+
    /// (physical with the perfect-hash live vector, §3.4).
    #[arg(long, default_value = "pgc+")]
    pub collector: String,
    /// Share of the dead space to reclaim, in percent: containers are
    /// cleaned mostly dead first until this much is covered.
    #[arg(long, default_value_t = 100.0, conflicts_with = "max_seconds")]
    pub reclaim: f64,
    /// Stop copying after this many seconds; what is left waits for the next run.
    #[arg(long)]
    pub max_seconds: Option<f64>,
    /// Memory for the mark structures; LGC and PGC clean in two passes
    /// (focused cleaning) and PGC+ falls back to PGC when they do not fit.
    #[arg(long, default_value = "1GiB")]
    pub memory: String,
    /// Wait for a running backup instead of failing at once.
    #[arg(long)]
    pub wait: bool,
}

#[derive(Args, Debug)]
pub struct RestoreArgs {
    /// Snapshot id (a unique prefix of at least 4 hex digits) or `latest`.
    pub snapshot: String,
    #[command(flatten)]
    pub filter: FilterArgs,
    /// Directory to restore into (created if missing).
    #[arg(short, long)]
    pub target: PathBuf,
    /// Restore only entries matching PATTERN (repeatable), with the
    /// directories leading to them; a matching directory with all below it.
    /// Patterns as for `backup --exclude`, matched against the snapshot path
    /// with or without a leading `/` (`tree/docs`, `/tree/docs`); an
    /// anchored pattern also matches the path the entry was backed up from.
    /// See docs/restore-select.md.
    #[arg(long, value_name = "PATTERN")]
    pub include: Vec<OsString>,
    /// As --include, ignoring case.
    #[arg(long, value_name = "PATTERN")]
    pub iinclude: Vec<OsString>,
    /// Leave out entries matching PATTERN (repeatable), with all below them.
    #[arg(long, value_name = "PATTERN")]
    pub exclude: Vec<OsString>,
    /// As --exclude, ignoring case.
    #[arg(long, value_name = "PATTERN")]
    pub iexclude: Vec<OsString>,
    /// After restoring, read back every restored regular file and compare
    /// its content (by fingerprint, at the snapshot's chunk boundaries),
    /// size, mode and mtime with the snapshot; each mismatch is reported and
    /// the exit is non-zero.
    #[arg(long)]
    pub verify: bool,
    /// Restore policy (002 §2): container-lru, chunk-lru, faa (forward
    /// assembly), alacc (assembly + look-ahead chunk cache) or belady
    /// (the optimal bound).
    #[arg(long, default_value = "alacc")]
    pub restore_policy: String,
    /// Memory of the restore policy: raw chunk bytes it may hold.
    #[arg(long, default_value = "64MiB")]
    pub restore_cache: String,
    /// Entries already in the target where the snapshot has one: `always`
    /// replaces files, symlinks and empty directories (a non-empty
    /// directory only with --delete; otherwise it is reported as an error
    /// and kept); `if-changed` is `always` but keeps a file whose size
    /// and mtime match; `never` keeps every existing entry (counted as
    /// skipped) and still descends into existing directories.
    #[arg(long, default_value = "always", value_parser = ["always", "if-changed", "never"])]
    pub overwrite: String,
    /// Also remove entries of the restored directories that the snapshot
    /// does not have (a full restore: of the whole target), and allow
    /// replacing a non-empty directory by a file or symlink. Removes only
    /// entries inside the target; symlinks are removed, never followed.
    /// Directories restored only to reach --include matches are not pruned.
    #[arg(long)]
    pub delete: bool,
}

#[derive(Args, Debug, Clone)]
pub struct GcArgs {
    #[command(flatten)]
    pub tuning: GcTuning,
    /// Print the plan; copy and delete nothing.
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(Args, Debug, Clone)]
pub struct ForgetArgs {
    /// Snapshot ids (unique prefixes) to remove; or give a policy instead.
    pub snapshots: Vec<String>,
    /// Keep the N newest snapshots (of each group).
    #[arg(long, default_value_t = 0)]
    pub keep_last: u32,
    /// Keep the newest snapshot of each of the N newest hours with one.
    #[arg(long, default_value_t = 0)]
    pub keep_hourly: u32,
    #[arg(long, default_value_t = 0)]
    pub keep_daily: u32,
    #[arg(long, default_value_t = 0)]
    pub keep_weekly: u32,
    #[arg(long, default_value_t = 0)]
    pub keep_monthly: u32,
    #[arg(long, default_value_t = 0)]
    pub keep_yearly: u32,
    /// Keep snapshots younger than this, counted from the newest of the
    /// group: e.g. 1y6m, 14d, 36h.
    #[arg(long)]
    pub keep_within: Option<String>,
    /// Keep snapshots with this tag (repeatable).
    #[arg(long)]
    pub keep_tag: Vec<String>,
    /// Group snapshots by these fields before applying the policy.
    #[arg(long, default_value = "host,paths")]
    pub group_by: String,
    /// Show what would be removed and why; remove nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Run a garbage collection after removing the snapshots.
    #[arg(long)]
    pub prune: bool,
    /// The policy applies to these snapshots only; ids must match too.
    #[command(flatten)]
    pub filter: FilterArgs,
    #[command(flatten)]
    pub tuning: GcTuning,
}

#[derive(Subcommand, Debug)]
pub enum RepairCommand {
    /// Rebuild the index, its Summary Vector checkpoint and the frugal log
    /// from the containers' metadata sections. Chunks of lost or damaged
    /// containers leave the index, so the next backup stores them again.
    Index {
        /// Read every container whole and leave damaged chunks out too.
        #[arg(long)]
        read_data: bool,
        /// Wait for a running backup instead of failing at once.
        #[arg(long)]
        wait: bool,
    },
    /// Rewrite snapshots that reference lost data: files and directories
    /// that can no longer be restored are dropped (and listed), everything
    /// else is kept as stored. The new snapshot keeps the original's time,
    /// host and paths and is tagged `repaired`.
    Snapshots {
        /// Snapshot ids, prefixes or `latest` (default: every snapshot).
        snapshots: Vec<String>,
        /// Remove each original snapshot record once its repaired copy is
        /// committed (and a snapshot with nothing left to keep).
        #[arg(long)]
        forget: bool,
        /// Show what would change; write nothing.
        #[arg(long)]
        dry_run: bool,
        /// Read and verify every chunk instead of trusting container metadata.
        #[arg(long)]
        read_data: bool,
        /// Wait for a running backup instead of failing at once.
        #[arg(long)]
        wait: bool,
        #[command(flatten)]
        filter: FilterArgs,
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
    /// Rewrite scheme for restore speed (002 §3-§5): none, capping, fcrc or
    /// lbw, with parameters, e.g. `capping:segment=20MiB,cap=20`,
    /// `fcrc:loss=5,cap=20`, `lbw:window=8,loss=5,cap=20,candidates=16MiB`.
    /// At init (or a backup that creates the repository): the repository's
    /// default; on a later backup: that backup's scheme.
    #[arg(long)]
    pub rewrite: Option<String>,
    /// Disable the Summary Vector (ablation).
    #[arg(long)]
    pub no_summary_vector: bool,
    /// Disable the Locality Preserved Cache (ablation).
    #[arg(long)]
    pub no_locality_cache: bool,
    /// Dedup index: paged (DDFS Summary Vector + paged on-disk index) or
    /// frugal (cuckoo table of 6 bytes per chunk over an on-disk chunk log).
    #[arg(long, default_value = "paged")]
    pub index: String,
    /// Fingerprint lookup: eager (DDFS), lazy (buffered, batched index page
    /// reads) or auto (chosen by the device model for --lookup-device; in
    /// `cairn sim`, for --device).
    #[arg(long, default_value = "eager")]
    pub lookup: String,
    /// Lazy lookup: fingerprints per buffer bucket before its index page is read.
    #[arg(long, default_value_t = 16)]
    pub bucket_threshold: u32,
    /// Lazy lookup: fingerprints per locality ring.
    #[arg(long, default_value_t = 2048)]
    pub ring_size: u32,
    /// Lazy lookup: most fingerprints (and their chunks) buffered per stream.
    #[arg(long, default_value_t = 8192)]
    pub lookup_buffer: u32,
    /// Device class the repository's index is on, for --lookup auto (init,
    /// backup): hdd, ssd, optane, pm.
    #[arg(long)]
    pub lookup_device: Option<String>,
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
    /// Compare files with this snapshot (id prefix or `latest`) instead of
    /// the latest snapshot of the same host and paths: a file whose size,
    /// mtime, ctime and inode are unchanged keeps its stored content unread.
    /// Never applies to --stdin.
    #[arg(long, conflicts_with = "force")]
    pub parent: Option<String>,
    /// Read every file, even those unchanged since the parent snapshot.
    #[arg(long)]
    pub force: bool,
    /// Tag the snapshot (repeatable or comma-separated).
    #[arg(long = "tag", value_delimiter = ',')]
    pub tags: Vec<String>,
    /// Host name recorded in the snapshot.
    #[arg(long)]
    pub host: Option<String>,
    /// Wait for another writer to finish instead of failing.
    #[arg(long)]
    pub wait: bool,
    /// When duplicates are removed: inline (at ingest, against everything
    /// stored) or deferred (004 post-processing: no index lookups now, every
    /// chunk is stored, a chunk repeated within this backup once; the next
    /// `cairn gc` removes the older copies).
    #[arg(long, default_value = "inline")]
    pub dedup: String,
    /// Leave out entries matching PATTERN (repeatable): `*`, `?`, `[...]`
    /// within a name, `**` across directories; without `/` it matches any
    /// entry's name, with a leading `/` the whole absolute path. A path
    /// given to back up is never left out. See docs/backup-selection.md.
    #[arg(long, value_name = "PATTERN")]
    pub exclude: Vec<String>,
    /// As --exclude, ignoring case.
    #[arg(long, value_name = "PATTERN")]
    pub iexclude: Vec<String>,
    /// Read --exclude patterns from FILE, one a line (blank lines and
    /// lines starting with `#` ignored); repeatable.
    #[arg(long, value_name = "FILE")]
    pub exclude_file: Vec<PathBuf>,
    /// As --exclude-file, the patterns ignoring case.
    #[arg(long, value_name = "FILE")]
    pub iexclude_file: Vec<PathBuf>,
    /// Leave out every directory holding an entry named NAME (repeatable).
    #[arg(long, value_name = "NAME")]
    pub exclude_if_present: Vec<String>,
    /// Leave out directories holding a valid CACHEDIR.TAG file.
    #[arg(long)]
    pub exclude_caches: bool,
    /// Leave out files larger than SIZE (e.g. 10MiB).
    #[arg(long, value_name = "SIZE")]
    pub exclude_larger_than: Option<String>,
    /// Do not cross into other file systems mounted below a path.
    #[arg(long)]
    pub one_file_system: bool,
    /// Also back up the paths listed in FILE, one a line (blank lines and
    /// lines starting with `#` ignored); repeatable.
    #[arg(long, value_name = "FILE")]
    pub files_from: Vec<PathBuf>,
    /// Only walk and report what would be backed up and what is left out;
    /// no repository is opened or created, nothing is written.
    #[arg(long, conflicts_with = "stdin")]
    pub dry_run: bool,
    /// Settings used if the repository does not exist yet.
    #[command(flatten)]
    pub init: InitArgs,
    /// Encryption of the repository if this backup creates it.
    #[command(flatten)]
    pub encryption: crate::encryption::EncryptionArgs,
}

#[derive(Args, Debug)]
pub struct TraceArgs {
    /// File or directory to trace.
    pub path: PathBuf,
    /// Output trace file.
    #[arg(short, long)]
    pub output: PathBuf,
    /// Chunker, fingerprint and compression (as for `init`).
    #[command(flatten)]
    pub init: InitArgs,
}

#[derive(Args, Debug)]
pub struct SimArgs {
    /// Trace files, one per generation, in order.
    pub traces: Vec<PathBuf>,
    /// Trace format (default: detected from content): destor, fsl or cairn.
    #[arg(long)]
    pub format: Option<String>,
    /// Synthetic workload instead of traces: ddfs or lineage.
    #[arg(long, conflicts_with = "traces")]
    pub workload: Option<String>,
    /// Workload parameter k=v (repeatable), e.g. --param generations=10.
    #[arg(long = "param")]
    pub params: Vec<String>,
    /// Device class of the model: hdd, ssd, optane, pm, dram, or one from --device-file.
    #[arg(long, default_value = "hdd")]
    pub device: String,
    /// TOML file with custom device classes.
    #[arg(long)]
    pub device_file: Option<PathBuf>,
    /// Also simulate a restore of each generation (containers read, speed factor).
    #[arg(long)]
    pub restore: bool,
    /// Policy of the simulated restore: container-lru, chunk-lru, faa,
    /// alacc or belady.
    #[arg(long, default_value = "alacc")]
    pub restore_policy: String,
    /// Memory of the simulated restore's policy (raw chunk bytes).
    #[arg(long, default_value = "64MiB")]
    pub restore_cache: String,
    /// Rows as CSV.
    #[arg(long, conflicts_with = "json")]
    pub csv: bool,
    /// Instead of simulating, write each generation of --workload as real
    /// files under DIR/gen<N> (to run the same workload through `backup`).
    #[arg(long, value_name = "DIR", requires = "workload")]
    pub write_bytes: Option<PathBuf>,
    /// Engine settings (container size, locality cache, ablations); chunker
    /// choices are fixed by the trace and ignored.
    #[command(flatten)]
    pub init: InitArgs,
}

#[derive(Args, Debug)]
pub struct AnalyzeArgs {
    /// Files and directories to study.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Write the figure to FILE (.svg, .png or .pdf).
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
    /// Stop after this many files.
    #[arg(long)]
    pub max_files: Option<u64>,
    /// Skip files and directories with this name anywhere (repeatable), e.g. --exclude .git
    #[arg(long = "exclude")]
    pub exclude: Vec<String>,
    /// Do not measure local compression (about halves the run time).
    #[arg(long)]
    pub no_compression: bool,
    /// Fingerprint: blake3, sha256 or sha1.
    #[arg(long, default_value = "blake3")]
    pub fingerprint: String,
}

#[derive(Args, Debug)]
pub struct ExperimentArgs {
    /// Experiment name: index-io, index-ram, eager-vs-lazy, ring-size, partition, restore or gc.
    pub name: String,
    /// Small sizes (seconds instead of minutes).
    #[arg(long)]
    pub quick: bool,
    /// A real dataset recorded with `cairn trace`, one file per generation (repeatable).
    #[arg(long = "trace")]
    pub traces: Vec<PathBuf>,
    /// Directory for the CSV and the plot.
    #[arg(long, default_value = "experiments-out")]
    pub out: PathBuf,
    /// Plot format: svg, png or pdf.
    #[arg(long, default_value = "svg")]
    pub plot_format: String,
}
