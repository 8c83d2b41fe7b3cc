//! cairn-bench: the benchmark driver.
//!
//! `cairn-bench <subcommand> [options]`; each subcommand lives in its own
//! module and parses its own options, so this file only dispatches.
//!
//! * `chunking`: throughput of every chunker against a plain memory scan and
//!   BLAKE3 over the same buffer ([`chunking`]).

use std::process::ExitCode;

mod chunking;

const USAGE: &str = "usage: cairn-bench <subcommand> [options]

subcommands:
  chunking [--mib N] [--avg BYTES] [--runs R] [--json]
      chunker throughput (fixed, rabin, fastcdc, regression) vs a memory
      scan and BLAKE3 over N MiB (default 256) of pseudo-random bytes";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("chunking") => chunking::run(&args[1..]),
        Some("help" | "-h" | "--help") => {
            println!("{USAGE}");
            Ok(())
        }
        None => {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
        Some(other) => Err(anyhow::anyhow!("unknown subcommand {other:?}\n\n{USAGE}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cairn-bench: {e:#}");
            ExitCode::FAILURE
        }
    }
}
