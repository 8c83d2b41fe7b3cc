//! `cairn experiment NAME`: run a reproduction experiment.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{anyhow, Result};
use clap::Args;

use crate::globals::Globals;

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

pub fn run(cli: &Globals, a: &ExperimentArgs) -> Result<ExitCode> {
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
