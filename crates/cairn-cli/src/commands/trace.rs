//! `cairn trace`: record what a backup would ingest as a chunk trace.

use std::io::BufWriter;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{anyhow, Context, Result};
use clap::Args;

use cairn_engine::backup::trace_recorder::record_trace;
use cairn_engine::Progress;
use cairn_sim::trace::CairnTraceWriter;

use crate::globals::Globals;
use crate::output::bytes;
use crate::progress::{estimate_total, Display};
use crate::repo_config::{config_from, refuse_unused, InitArgs};

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

pub fn run(cli: &Globals, a: &TraceArgs) -> Result<ExitCode> {
    refuse_unused(
        cli,
        "trace",
        &[
            "container_size",
            "cache_containers",
            "rewrite",
            "no_summary_vector",
            "no_locality_cache",
            "index",
            "lookup",
            "bucket_threshold",
            "ring_size",
            "lookup_buffer",
            "lookup_device",
            "index_part_budget",
        ],
        "a trace records chunks (chunker, fingerprint, compression), not a repository",
    )?;
    let cfg = config_from(&a.init)?;
    if !a.path.exists() {
        return Err(anyhow!("{}: no such file or directory", a.path.display()));
    }
    let file = std::fs::File::create(&a.output)
        .with_context(|| format!("creating {}", a.output.display()))?;
    let mut w = CairnTraceWriter::new(BufWriter::with_capacity(1 << 20, file), cfg.fp_width())?;
    let progress = Arc::new(Progress::default());
    let display = Display::start(progress.clone(), !cli.quiet && !cli.json, "trace");
    if display.active() {
        estimate_total(vec![a.path.clone()], progress.clone());
    }
    let rec = record_trace(&a.path, &cfg, progress, &mut |ev| w.write_event(&ev));
    drop(display);
    let rec = rec?;
    w.finish()?;
    for s in &rec.skipped {
        eprintln!("cairn: warning: skipped {s}");
    }
    if cli.json {
        println!(
            "{}",
            serde_json::json!({"trace": a.output, "chunks": rec.chunks, "bytes": rec.bytes, "skipped": rec.skipped})
        );
    } else if !cli.quiet {
        println!(
            "traced {} chunks ({}) into {}",
            rec.chunks,
            bytes(rec.bytes),
            a.output.display()
        );
    }
    Ok(if rec.skipped.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(3)
    })
}
