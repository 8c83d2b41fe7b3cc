//! cairn-bench: the benchmark driver.
//!
//! `cairn-bench <subcommand> [options]`; each subcommand lives in its own
//! module and parses its own options, so this file only dispatches.
//!
//! * `chunking`: throughput of every chunker against a plain memory scan and
//!   BLAKE3 over the same buffer ([`chunking`]).
//! * `backup`: cairn backups of a unique and a mostly-duplicate generation of
//!   real files against a single-threaded read + FastCDC + BLAKE3 pass
//!   ([`backup`]).
//! * `restore`: restores of both generations against a single-threaded file
//!   copy ([`restore`]).
//! * `commit`: commit cost of a small backup into a repository of 100 k
//!   and of 1 M indexed chunks ([`commit`]).
//! * `sim`: simulator throughput on the DDFS workload against generating
//!   the workload alone ([`sim`]).
//! * `deferred`: a mostly-duplicate generation backed up with inline and
//!   with deferred dedup on copies of one repository, and the `gc` that
//!   removes the deferred one's duplicates ([`deferred`]).
//! * `gc`: `cairn forget` + `cairn gc` (each collector) against `restic
//!   forget --prune` on the same generations of a changing tree ([`gc`]).
//! * `encryption`: backups and a restore in a clear and an encrypted
//!   repository, alternated ([`encryption`]).
//! * `memory`: peak RSS of `cairn backup --stdin` fed GiBs of generated data,
//!   against trivial child processes ([`memory`]).
//!
//! Every benchmark reports ratios against a baseline measured in the same
//! run, prints a table, and prints one JSON object with `--json` (or writes
//! it to a file with `--json-out PATH`, keeping the table).

use std::path::PathBuf;
use std::process::ExitCode;

mod backup;
mod chunking;
mod commit;
mod common;
mod dataset;
mod deferred;
mod encryption;
mod gc;
mod memory;
mod restore;
mod sim;
mod sys;

const USAGE: &str = "usage: cairn-bench <subcommand> [options]

subcommands:
  chunking [--mib N] [--avg BYTES] [--runs R] [--json]
      chunker throughput (fixed, rabin, fastcdc, regression) vs a memory
      scan and BLAKE3 over N MiB (default 256) of pseudo-random bytes

  backup [--mib N] [--dup-pct P] [--runs R] [--streams one|dirs] [--dir D] [--keep] [--json]
      cairn backup of a generated N MiB (default 1024) file tree (gen1, unique)
      and of an edited copy with >= P% (default 90) duplicate bytes (gen2),
      vs a single-threaded read + FastCDC + BLAKE3 pass over the same files

  restore [--mib N] [--dup-pct P] [--runs R] [--cache MIB] [--policy P] [--no-verify] [--dir D] [--keep] [--json]
      restore of gen1 and gen2 (reusing `backup --dir D --keep`'s repository
      if present) vs a single-threaded copy of the same files

  deferred [--mib N] [--dup-pct P] [--runs R] [--dir D] [--keep] [--json]
      gen2 of the backup dataset (N MiB, default 256) backed up inline vs
      deferred (004 post-processing dedup) on copies of a repository holding
      gen1, alternated: ingest MB/s and CPU seconds, repository size, and the
      size and time of the `cairn gc` that removes the deferred duplicates

  encryption [--mib N] [--dup-pct P] [--runs R] [--dir D] [--keep] [--json]
      backup of gen1 (unique) and gen2 (dup) and restore of gen2 in a clear
      and an AES-256-GCM repository, alternated: encrypted / clear time
      (targets 1.20 unique, 1.10 dup)

  memory [--gib G] [--dup-pct P] [--encrypted] [--seed N] [--repo R] [--cairn PATH] [--dir D] [--keep] [--json]
      peak RSS of `cairn backup --stdin` fed G GiB (default 4) of generated
      data vs `cat > /dev/null` on the same stream and `cairn --version`

  commit [--chunks N] [--new K] [--backups B] [--dir D] [--json]
      commit time and bytes written to index/ and bloom/ of B backups of K
      new chunks into repositories of N/10 and N (default 1000000) indexed
      chunks (fixed 256-byte chunks of random bytes)

  gc [--mib N] [--generations G] [--change-pct P] [--runs R] [--collectors pgc+,pgc,lgc]
     [--max-unused X] [--cairn PATH] [--restic PATH] [--no-install] [--dir D] [--keep] [--json]
      G generations (default 8) of an N MiB (default 512) tree, P% (default 20)
      of its files changed each, backed up into cairn and restic; then cairn
      forget --keep-last 1 + gc per collector vs restic forget --keep-last 1
      --prune --max-unused X (default 0): time, CPU, peak RSS, bytes
      reclaimed, final size vs a fresh backup; checks and restores after

  sim [--generations G] [--generation-bytes B] [--streams S] [--json]
      cairn sim --workload ddfs throughput (chunks per second, wall and CPU)
      against generating the same workload's chunk events alone

  --dir D keeps the generated dataset in D for reuse (default: a temporary
  directory under $TMPDIR, removed at the end); --keep keeps repositories.
  Every subcommand also takes --json-out PATH: write the JSON result to PATH
  and still print the table.";

/// Takes `--json-out PATH` out of `args`.
fn json_out(args: &mut Vec<String>) -> anyhow::Result<Option<PathBuf>> {
    let Some(i) = args.iter().position(|a| a == "--json-out") else {
        return Ok(None);
    };
    anyhow::ensure!(i + 1 < args.len(), "--json-out needs a value");
    let path = PathBuf::from(args.remove(i + 1));
    args.remove(i);
    Ok(Some(path))
}

fn run(args: &mut Vec<String>) -> anyhow::Result<()> {
    let out = json_out(args)?;
    let sub = &args[1..];
    let doc = match args[0].as_str() {
        "chunking" => chunking::run(sub)?,
        "backup" => backup::run(sub)?,
        "restore" => restore::run(sub)?,
        "memory" => memory::run(sub)?,
        "deferred" => deferred::run(sub)?,
        "encryption" => encryption::run(sub)?,
        "commit" => commit::run(sub)?,
        "sim" => sim::run(sub)?,
        "gc" => gc::run(sub)?,
        "help" | "-h" | "--help" => {
            println!("{USAGE}");
            return Ok(());
        }
        other => anyhow::bail!("unknown subcommand {other:?}\n\n{USAGE}"),
    };
    if let Some(p) = out {
        let mut text = serde_json::to_string_pretty(&doc)?;
        text.push('\n');
        std::fs::write(&p, text).map_err(|e| anyhow::anyhow!("writing {}: {e}", p.display()))?;
    }
    Ok(())
}

fn main() -> ExitCode {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        None => {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
        Some(_) => run(&mut args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cairn-bench: {e:#}");
            ExitCode::FAILURE
        }
    }
}
