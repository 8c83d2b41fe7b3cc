//! `cairn analyze`: study a dataset's dedup and compression potential.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Result;
use clap::Args;

use cairn_core::FingerprintAlgo;
use cairn_engine::Progress;

use crate::globals::Globals;
use crate::progress::{estimate_total, Display};

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
    /// Fingerprint.
    #[arg(
        long,
        default_value_t = cairn_sim::analyze::AnalyzeOptions::default().fingerprint,
        value_parser = crate::values::choice::<FingerprintAlgo>(&FingerprintAlgo::NAMES)
    )]
    pub fingerprint: FingerprintAlgo,
}

pub fn run(cli: &Globals, a: &AnalyzeArgs) -> Result<ExitCode> {
    use cairn_sim::analyze::{self as study, AnalyzeOptions};
    let mut opts = AnalyzeOptions {
        fingerprint: a.fingerprint,
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
