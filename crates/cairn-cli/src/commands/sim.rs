//! `cairn sim`: replay chunk traces or synthetic workloads through a
//! simulated repository.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{anyhow, Context, Result};
use clap::Args;
use std::path::PathBuf;

use cairn_sim::device::{find_class, load_classes, DeviceClass, DeviceModel};
use cairn_sim::sim::{self, GenerationInput, GenerationRow, SimOptions};
use cairn_sim::trace::TraceFormat;
use cairn_sim::workload::{self, WorkloadKind};
use cairn_sim::writers::{self, Unit, WritersOptions, WritersReport};

use crate::globals::Globals;
use crate::output::bytes;
use crate::repo_config::{config_from, refuse_unused, InitArgs};
use crate::values::choice;

#[derive(Args, Debug)]
pub struct SimArgs {
    /// Trace files, one per generation, in order.
    pub traces: Vec<PathBuf>,
    /// Trace format (default: detected from content).
    #[arg(long, value_parser = choice::<TraceFormat>(&TraceFormat::NAMES))]
    pub format: Option<TraceFormat>,
    /// Synthetic workload instead of traces.
    #[arg(long, conflicts_with = "traces", value_parser = choice::<WorkloadKind>(&WorkloadKind::NAMES))]
    pub workload: Option<WorkloadKind>,
    /// Workload parameter k=v (repeatable), e.g. --param generations=10.
    #[arg(long = "param")]
    pub params: Vec<String>,
    /// Device class of the model: hdd, ssd, optane, pm, dram, or one from --device-file.
    #[arg(long, default_value = DeviceClass::DEFAULT_NAME)]
    pub device: String,
    /// TOML file with custom device classes.
    #[arg(long)]
    pub device_file: Option<PathBuf>,
    /// Also simulate a restore of each generation (containers read, speed factor).
    #[arg(long)]
    pub restore: bool,
    /// After each generation's backup, run the product's collection
    /// maintenance: its re-layout of the containers the generation uses
    /// in part, in the generation's order (docs/restore-speed.md). Without
    /// it, the simulated repository ages as Destor's and 002's do.
    #[arg(long)]
    pub relayout: bool,
    /// Also print the RAM each structure of the simulated repository holds
    /// per unique chunk, and the process's peak (always in --json, under
    /// "memory"). With --csv it goes to standard error.
    #[arg(long)]
    pub memory_report: bool,
    /// Size the Summary Vector for N unique chunks, as DDFS sizes it for
    /// the index it fronts. The default, 4194304, is the fixed size the
    /// DDFS Table 4 reproductions use; a workload whose first backup holds
    /// more unique chunks fills that filter past its design false-positive
    /// rate until the next backup rebuilds it for the index.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub summary_vector_chunks: Option<u64>,
    /// The policy of the simulated restore and its memory.
    #[command(flatten)]
    pub cache: crate::restore_cache::RestoreCacheArgs,
    /// Rows as CSV.
    #[arg(long, conflicts_with = "json")]
    pub csv: bool,
    /// Instead of simulating, write each generation of --workload as real
    /// files under DIR/gen<N> (to run the same workload through `backup`).
    #[arg(long, value_name = "DIR", requires = "workload")]
    pub write_bytes: Option<PathBuf>,
    /// Replay the backups as N writers sharing one repository, in rounds
    /// (every writer of a round deduplicates against the repository as of
    /// the round's start plus its own chunks); reports the dedup lost to
    /// concurrency before and after reconciliation. 1: one backup after
    /// another through the engine (the usual report).
    #[arg(long, value_name = "N", default_value_t = 1, conflicts_with = "write_bytes", value_parser = clap::value_parser!(u32).range(1..))]
    pub writers: u32,
    /// With --writers: one backup stream is a top-level entry of each input
    /// (a DDFS stream, a lineage, a top-level directory), a file, or a
    /// whole input (trace file, generation); streams go round-robin to the
    /// writers [default: top].
    #[arg(long, value_name = "UNIT", value_parser = choice::<Unit>(&Unit::NAMES))]
    pub writer_unit: Option<Unit>,
    /// Engine settings (container size, locality cache, ablations); chunker
    /// choices are fixed by the trace and ignored.
    #[command(flatten)]
    pub init: InitArgs,
}

fn parse_params(params: &[String]) -> Result<Vec<(String, String)>> {
    params
        .iter()
        .map(|p| {
            p.split_once('=')
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .ok_or_else(|| anyhow!("--param {p:?} must be key=value"))
        })
        .collect()
}

pub fn sim(cli: &Globals, a: &SimArgs) -> Result<ExitCode> {
    refuse_unused(
        cli,
        "sim",
        &["chunker", "avg_size", "min_size", "max_size"],
        "the trace or workload fixes the chunks",
    )?;
    let mut config = config_from(&a.init)?;
    if let Some(n) = a.summary_vector_chunks {
        config.index.expected_chunks = n;
    }
    if a.init.lookup_device.is_some() {
        return Err(anyhow!(
            "--lookup-device is for init and backup; cairn sim chooses --lookup auto for --device"
        ));
    }
    let custom = match &a.device_file {
        Some(p) => load_classes(p)?,
        None => Vec::new(),
    };
    let class = find_class(&a.device, &custom).ok_or_else(|| {
        anyhow!(
            "unknown device class {:?} (built in: {})",
            a.device,
            DeviceClass::BUILTIN_NAMES.join(", ")
        )
    })?;
    let format = a.format;
    let inputs: Vec<GenerationInput> = match a.workload {
        Some(kind) => {
            let w: Arc<dyn workload::Workload> =
                Arc::from(workload::from_kind(kind, &parse_params(&a.params)?)?);
            if let Some(dir) = &a.write_bytes {
                return write_bytes(cli, &*w, dir);
            }
            (0..w.generations())
                .map(|g| GenerationInput::Workload {
                    workload: w.clone(),
                    generation: g,
                })
                .collect()
        }
        None => {
            if !a.params.is_empty() {
                return Err(anyhow!("--param needs --workload"));
            }
            a.traces
                .iter()
                .map(|p| GenerationInput::Trace {
                    path: p.clone(),
                    format,
                })
                .collect()
        }
    };
    if a.writers > 1 {
        return many_writers(cli, a, &inputs);
    }
    if a.writer_unit.is_some() {
        return Err(anyhow!("--writer-unit needs --writers greater than 1"));
    }
    let report = sim::run(
        &inputs,
        &SimOptions {
            config,
            device: DeviceModel::for_device(class),
            restore: a.restore,
            restore_cache: a.cache.options(),
            also_restore: Vec::new(),
            relayout: a.relayout.then(Default::default),
        },
    )?;
    if cli.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else if a.csv {
        println!("{}", CSV_HEADER);
        for r in report
            .generations
            .iter()
            .chain(std::iter::once(&report.totals))
        {
            println!("{}", csv_row(r));
        }
    } else {
        println!(
            "{:>5} {:>10} {:>10} {:>11} {:>7} {:>7} {:>9} {:>10} {:>8} {:>8} {:>6} {:>6} {:>6} {:>9} {:>8}",
            "gen", "chunks", "unique", "logical", "dedup", "total", "bloom-neg", "cache-hit", "idx-read",
            "prefetch", "c-wr", "c-rd", "speed", "model-s", "wall-s"
        );
        for r in report
            .generations
            .iter()
            .chain(std::iter::once(&report.totals))
        {
            println!(
                "{:>5} {:>10} {:>10} {:>11} {:>7.2} {:>7.2} {:>9} {:>10} {:>8} {:>8} {:>6} {:>6} {:>6.2} {:>9.3} {:>8.3}",
                r.id, r.chunks, r.unique_chunks, bytes(r.logical_bytes), r.dedup_ratio, r.total_compression,
                r.bloom_negatives, r.cache_hits, r.index_page_reads, r.prefetches, r.containers_written,
                r.containers_read, r.speed_factor, r.modeled_seconds, r.wall_seconds
            );
        }
    }
    if a.memory_report && !cli.json {
        if a.csv {
            eprint!("{}", report.memory.text());
        } else {
            print!("{}", report.memory.text());
        }
    }
    if let Some(choice) = &report.lookup_choice {
        if !cli.json && !cli.quiet {
            eprintln!("lookup auto: {}", choice.reason);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `--writers N` (N > 1): the fingerprint-level replay of
/// `cairn_sim::writers`; the engine and device settings do not apply.
fn many_writers(cli: &Globals, a: &SimArgs, inputs: &[GenerationInput]) -> Result<ExitCode> {
    for (given, name) in [
        (a.restore, "--restore"),
        (a.csv, "--csv"),
        (a.relayout, "--relayout"),
        (a.memory_report, "--memory-report"),
        (a.summary_vector_chunks.is_some(), "--summary-vector-chunks"),
        (a.init.index_part_budget.is_some(), "--index-part-budget"),
    ] {
        if given {
            return Err(anyhow!(
                "{name} does not apply with --writers greater than 1"
            ));
        }
    }
    let report = writers::run(
        inputs,
        &WritersOptions {
            writers: a.writers as usize,
            unit: a.writer_unit.unwrap_or(Unit::Top),
        },
    )?;
    if cli.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_writers(&report);
    }
    Ok(ExitCode::SUCCESS)
}

fn print_writers(r: &WritersReport) {
    println!(
        "{} writers, {} streams (unit {}) in {} rounds: {} chunks, {} logical",
        r.writers,
        r.streams,
        r.unit,
        r.rounds,
        r.chunks,
        bytes(r.logical_bytes)
    );
    println!(
        "{:<24} {:>12} {:>11} {:>11} {:>7}",
        "", "chunks", "stored", "compressed", "dedup"
    );
    for (name, s) in [
        ("before reconciliation", &r.before_reconciliation),
        ("one after another", &r.one_after_another),
        ("after reconciliation", &r.after_reconciliation),
    ] {
        println!(
            "{:<24} {:>12} {:>11} {:>11} {:>7.2}",
            name,
            s.chunks,
            bytes(s.bytes),
            bytes(s.compressed_bytes),
            s.dedup_ratio
        );
    }
    println!(
        "{:<24} {:>12} {:>11} {:>11} {:>6.2}% of one after another; at most {} copies of a chunk",
        "lost to concurrency",
        r.lost_chunks,
        bytes(r.lost_bytes),
        bytes(r.lost_compressed_bytes),
        r.lost_fraction * 100.0,
        r.max_copies
    );
}

const CSV_HEADER: &str = "id,chunks,unique_chunks,logical_bytes,stored_bytes,dedup_ratio,total_compression,bloom_negatives,cache_hits,index_page_reads,prefetches,containers_written,containers_read,speed_factor,modeled_seconds,wall_seconds,rewritten_chunks,restore_bytes_read,restore_memory_bytes";

fn csv_row(r: &GenerationRow) -> String {
    format!(
        "{},{},{},{},{},{:.6},{:.6},{},{},{},{},{},{},{:.6},{:.6},{:.6},{},{},{}",
        r.id,
        r.chunks,
        r.unique_chunks,
        r.logical_bytes,
        r.stored_bytes,
        r.dedup_ratio,
        r.total_compression,
        r.bloom_negatives,
        r.cache_hits,
        r.index_page_reads,
        r.prefetches,
        r.containers_written,
        r.containers_read,
        r.speed_factor,
        r.modeled_seconds,
        r.wall_seconds,
        r.rewritten_chunks,
        r.restore_bytes_read,
        r.restore_memory_bytes
    )
}

/// Materializes every generation of a workload as real files.
fn write_bytes(
    cli: &Globals,
    w: &dyn workload::Workload,
    dir: &std::path::Path,
) -> Result<ExitCode> {
    let mut rows = Vec::new();
    for g in 0..w.generations() {
        let out = dir.join(format!("gen{g}"));
        let st = workload::write_generation_bytes(w, g, &out)
            .with_context(|| format!("writing generation {g} to {}", out.display()))?;
        if !cli.quiet && !cli.json {
            println!(
                "gen{g}: {} files, {} -> {}",
                st.files,
                bytes(st.bytes),
                out.display()
            );
        }
        rows.push(serde_json::json!({"generation": g, "dir": out, "files": st.files, "bytes": st.bytes, "chunks": st.chunks}));
    }
    if cli.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    }
    Ok(ExitCode::SUCCESS)
}
