//! `cairn trace` and `cairn sim`: record a dataset as a chunk trace; replay
//! traces or synthetic workloads through a simulated repository.

use std::io::BufWriter;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{anyhow, Context, Result};

use cairn_engine::backup::trace_recorder::record_trace;
use cairn_engine::Progress;
use cairn_sim::device::{find_class, load_classes, DeviceModel};
use cairn_sim::sim::{self, GenerationInput, GenerationRow, SimOptions};
use cairn_sim::trace::{CairnTraceWriter, TraceFormat};
use cairn_sim::workload;

use crate::args::{AnalyzeArgs, Cli, ExperimentArgs, SimArgs, TraceArgs};
use crate::commands::config_from;
use crate::output::bytes;
use crate::progress::{estimate_total, Display};

/// Refuses flags of the shared `init` set that `command` does not use.
fn refuse_unused(cli: &Cli, command: &str, unused: &[&str], why: &str) -> Result<()> {
    match unused
        .iter()
        .find(|id| cli.given_init_flags.iter().any(|g| g == *id))
    {
        Some(id) => Err(anyhow!(
            "--{} does not apply to cairn {command}: {why}",
            id.replace('_', "-")
        )),
        None => Ok(()),
    }
}

pub fn trace(cli: &Cli, a: &TraceArgs) -> Result<ExitCode> {
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

pub fn sim(cli: &Cli, a: &SimArgs) -> Result<ExitCode> {
    refuse_unused(
        cli,
        "sim",
        &["chunker", "avg_size", "min_size", "max_size"],
        "the trace or workload fixes the chunks",
    )?;
    let config = config_from(&a.init)?;
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
            "unknown device class {:?} (built in: hdd, ssd, optane, pm, dram)",
            a.device
        )
    })?;
    let format = a
        .format
        .as_deref()
        .map(|f| f.parse::<TraceFormat>().map_err(|e| anyhow!("{e}")))
        .transpose()?;
    let inputs: Vec<GenerationInput> = match &a.workload {
        Some(name) => {
            let w: Arc<dyn workload::Workload> =
                Arc::from(workload::from_name(name, &parse_params(&a.params)?)?);
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
    let report = sim::run(
        &inputs,
        &SimOptions {
            config,
            device: DeviceModel::for_device(class),
            restore: a.restore,
            restore_cache: crate::commands::restore_cache_options(
                &a.restore_policy,
                &a.restore_cache,
            )?,
            also_restore: Vec::new(),
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
    if let Some(choice) = &report.lookup_choice {
        if !cli.json && !cli.quiet {
            eprintln!("lookup auto: {}", choice.reason);
        }
    }
    Ok(ExitCode::SUCCESS)
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
fn write_bytes(cli: &Cli, w: &dyn workload::Workload, dir: &std::path::Path) -> Result<ExitCode> {
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

pub fn analyze(cli: &Cli, a: &AnalyzeArgs) -> Result<ExitCode> {
    use cairn_sim::analyze::{self as study, AnalyzeOptions};
    let mut opts = AnalyzeOptions {
        fingerprint: cairn_core::FingerprintAlgo::from_name(&a.fingerprint)?,
        max_files: a.max_files,
        exclude_names: a.exclude.clone(),
        ..AnalyzeOptions::default()
    };
    if a.no_compression {
        opts.compression = None;
    }
    if let Some(p) = &a.plot {
        // Refuse a bad figure name before reading gigabytes.
        study::check_plot_path(p)?;
    }
    let progress = Arc::new(Progress::default());
    let display = Display::start(progress.clone(), !cli.quiet && !cli.json, "analyze");
    if display.active() {
        estimate_total(a.paths.clone(), progress.clone());
    }
    let report = study::analyze(&a.paths, &opts, Some(&progress.bytes_done));
    drop(display);
    let report = report?;
    if let Some(p) = &a.plot {
        study::plot(&report, p)?;
    }
    if cli.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", study::render_table(&report));
        if let Some(p) = &a.plot {
            if !cli.quiet {
                println!("figure written to {}", p.display());
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Experiments `cairn experiment NAME` runs.
pub const EXPERIMENTS: [&str; 7] = [
    "index-io",
    "index-ram",
    "eager-vs-lazy",
    "ring-size",
    "partition",
    "restore",
    "gc",
];

pub fn experiment(cli: &Cli, a: &ExperimentArgs) -> Result<ExitCode> {
    use cairn_sim::experiment::{
        eager_vs_lazy, gc, index_io, index_ram, partition, restore, ring_size, ExperimentOptions,
        IndexRamOptions,
    };
    let opts = ExperimentOptions {
        quick: a.quick,
        traces: a.traces.clone(),
        out_dir: a.out.clone(),
        plot_ext: a.plot_format.clone(),
    };
    let out = match a.name.as_str() {
        "index-io" => index_io(&opts)?,
        "index-ram" if !a.traces.is_empty() => {
            return Err(anyhow!(
                "index-ram measures indexes on generated fingerprints; it takes no --trace"
            ))
        }
        "index-ram" => index_ram(&IndexRamOptions {
            quick: a.quick,
            out_dir: a.out.clone(),
            plot_ext: a.plot_format.clone(),
        })?,
        "eager-vs-lazy" => eager_vs_lazy(&opts)?,
        "ring-size" => ring_size(&opts)?,
        "partition" => partition(&opts)?,
        "restore" => restore(&opts)?,
        "gc" if !a.traces.is_empty() => {
            return Err(anyhow!(
                "gc backs up generated files (DDFS and lineage workloads); it takes no --trace"
            ))
        }
        "gc" => gc(&opts)?,
        other => {
            return Err(anyhow!(
                "unknown experiment {other:?} (available: {})",
                EXPERIMENTS.join(", ")
            ))
        }
    };
    if cli.json {
        println!("{}", serde_json::to_string_pretty(&out.to_json())?);
    } else {
        print!("{}", out.table);
        if !cli.quiet {
            println!("CSV and plot written to {}", a.out.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}
