//! `cairn experiment NAME`: run a reproduction experiment.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{anyhow, Result};
use clap::Args;

use cairn_sim::experiment::{Experiment, PlotFormat};

use crate::globals::Globals;
use crate::values::choice;

#[derive(Args, Debug)]
pub struct ExperimentArgs {
    /// Experiment name.
    #[arg(value_parser = choice::<Experiment>(&Experiment::NAMES))]
    pub name: Experiment,
    /// Small sizes (seconds instead of minutes).
    #[arg(long)]
    pub quick: bool,
    /// A real dataset recorded with `cairn trace`, one file per generation (repeatable).
    #[arg(long = "trace")]
    pub traces: Vec<PathBuf>,
    /// gc only: run 003's mark phases on a repository on disk grown to about
    /// N fingerprints (millions fit this machine), instead of 003's sweeps.
    #[arg(long, value_name = "N")]
    pub fingerprints: Option<u64>,
    /// Directory for the CSV and the plot.
    #[arg(long, default_value = "experiments-out")]
    pub out: PathBuf,
    /// Plot format.
    #[arg(long, default_value_t = PlotFormat::default(), value_parser = choice::<PlotFormat>(&PlotFormat::NAMES))]
    pub plot_format: PlotFormat,
}

pub fn run(cli: &Globals, a: &ExperimentArgs) -> Result<ExitCode> {
    use cairn_sim::experiment::{
        eager_vs_lazy, gc, gc_scale, index_io, index_ram, partition, relayout, restore, ring_size,
        ExperimentOptions, IndexRamOptions,
    };
    let opts = ExperimentOptions {
        quick: a.quick,
        traces: a.traces.clone(),
        out_dir: a.out.clone(),
        plot_ext: a.plot_format.ext().to_string(),
    };
    if a.fingerprints.is_some() && a.name != Experiment::Gc {
        return Err(anyhow!("--fingerprints applies to `experiment gc` only"));
    }
    let out = match a.name {
        Experiment::IndexIo => index_io(&opts)?,
        Experiment::IndexRam if !a.traces.is_empty() => {
            return Err(anyhow!(
                "index-ram measures indexes on generated fingerprints; it takes no --trace"
            ))
        }
        Experiment::IndexRam => index_ram(&IndexRamOptions {
            quick: a.quick,
            out_dir: a.out.clone(),
            plot_ext: a.plot_format.ext().to_string(),
        })?,
        Experiment::EagerVsLazy => eager_vs_lazy(&opts)?,
        Experiment::RingSize => ring_size(&opts)?,
        Experiment::Partition => partition(&opts)?,
        Experiment::Restore => restore(&opts)?,
        Experiment::Gc if !a.traces.is_empty() => {
            return Err(anyhow!(
                "gc backs up generated files (DDFS and lineage workloads); it takes no --trace"
            ))
        }
        Experiment::Gc => match a.fingerprints {
            Some(n) => gc_scale(&opts, n)?,
            None => gc(&opts)?,
        },
        Experiment::Relayout if !a.traces.is_empty() => {
            return Err(anyhow!(
                "relayout backs up generated files (the DDFS workload); it takes no --trace"
            ))
        }
        Experiment::Relayout => relayout(&opts)?,
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
