//! Experiments: fixed runs of the simulator that reproduce a table or figure
//! of the papers, each returning rows (JSON), a CSV, a printable table and a
//! plot written next to the CSV. `docs/experiments/` documents each one with
//! its measured numbers next to the paper's.
//!
//! * [`index_io`] (`cairn experiment index-io`): DDFS
//!   (`001_3652cceaf162c5a1.txt`) §5.2 Table 4, index and locality reads with
//!   and without the Summary Vector and the Locality Preserved Cache.
//! * [`index_ram`] (`cairn experiment index-ram`): RAM per chunk and
//!   throughput of the DDFS index and the RAM-frugal index of `004`.
//! * [`eager_vs_lazy`] and [`ring_size`] (`cairn experiment eager-vs-lazy`,
//!   `ring-size`): `000_d04706aa48332137.txt` §5.2-5.3, eager vs lazy
//!   lookup per device and the best locality-ring size.
//! * [`partition()`] (`cairn experiment partition`): paper 004
//!   (`004_62bf1a5ddd5ed253.txt`) partitioned dedup by file type, path and
//!   stream, and reconciliation `k` partitions at a time.
//! * [`restore()`] (`cairn experiment restore`): `002_c5d78fa3332f6f9f.txt`
//!   Fig. 6-8, restore caches and rewrite schemes, and restore time per
//!   device class.
//! * [`gc()`] (`cairn experiment gc`): `003_ea5fccc485a97c5d.txt` Fig. 6(a),
//!   7(a), 7(b) and §5.2, mark time of LGC, PGC and PGC+ against capacity,
//!   total compression (fastcopy doubling) and file count, and the copy phase.
//! * [`relayout()`] (`cairn experiment relayout`): issue 34's re-layout at
//!   collection time, the newest backup's speed factor per generation and
//!   the bytes the collector copies, with and without it.

mod gc;
mod gc_plot;
mod gc_scale;
mod gc_variants;
mod index_io;
pub mod index_ram;
pub mod lookup_strategy;
mod partition;
mod relayout;
mod restore;
mod tabulate;

#[cfg(test)]
mod gc_tests;
#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};

use cairn_core::error::IoContext;
use cairn_core::Result;

/// The plot file formats (`--plot-format`).
pub use crate::figure::PlotFormat;
pub use gc::gc;
pub use gc_scale::gc_scale;
pub use index_io::{ddfs_params, index_io, CASES, DDFS_TABLE4};
pub use index_ram::{index_ram, IndexRamOptions};
pub use lookup_strategy::{eager_vs_lazy, ring_size};
pub use partition::partition;
pub use relayout::relayout;
pub use restore::restore;

/// The experiments `cairn experiment NAME` runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Experiment {
    IndexIo,
    IndexRam,
    EagerVsLazy,
    RingSize,
    Partition,
    Restore,
    Gc,
    Relayout,
}

impl Experiment {
    pub const ALL: [Experiment; 8] = [
        Experiment::IndexIo,
        Experiment::IndexRam,
        Experiment::EagerVsLazy,
        Experiment::RingSize,
        Experiment::Partition,
        Experiment::Restore,
        Experiment::Gc,
        Experiment::Relayout,
    ];
    /// The names [`std::str::FromStr`] accepts, in the order of [`Self::ALL`].
    pub const NAMES: [&'static str; 8] = [
        "index-io",
        "index-ram",
        "eager-vs-lazy",
        "ring-size",
        "partition",
        "restore",
        "gc",
        "relayout",
    ];

    pub fn name(self) -> &'static str {
        match self {
            Experiment::IndexIo => "index-io",
            Experiment::IndexRam => "index-ram",
            Experiment::EagerVsLazy => "eager-vs-lazy",
            Experiment::RingSize => "ring-size",
            Experiment::Partition => "partition",
            Experiment::Restore => "restore",
            Experiment::Gc => "gc",
            Experiment::Relayout => "relayout",
        }
    }
}

impl std::fmt::Display for Experiment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Experiment {
    type Err = cairn_core::Error;
    fn from_str(s: &str) -> Result<Self> {
        Experiment::ALL
            .into_iter()
            .find(|e| e.name() == s)
            .ok_or_else(|| {
                cairn_core::Error::invalid(format!(
                    "unknown experiment {s:?} (available: {})",
                    Experiment::NAMES.join(", ")
                ))
            })
    }
}

/// Options of the experiments that run a workload: `index-io`,
/// `eager-vs-lazy`, `ring-size`, `partition`.
#[derive(Clone, Debug)]
pub struct ExperimentOptions {
    /// Small workloads (seconds in a debug build), for tests and CI.
    pub quick: bool,
    /// A real dataset traced with `cairn trace` (one file per generation or
    /// stream, in order), studied as workload `trace` when not empty.
    pub traces: Vec<PathBuf>,
    /// Where the CSV and the plot are written (created if missing).
    pub out_dir: PathBuf,
    /// `"svg"` or `"png"`.
    pub plot_ext: String,
}

impl Default for ExperimentOptions {
    fn default() -> Self {
        ExperimentOptions {
            quick: false,
            traces: Vec::new(),
            out_dir: PathBuf::from("."),
            plot_ext: crate::figure::PlotFormat::default().ext().into(),
        }
    }
}

/// Options of [`index_io`].
pub type IndexIoOptions = ExperimentOptions;
/// Options of [`eager_vs_lazy`] and [`ring_size`].
pub type LookupOptions = ExperimentOptions;
/// Options of [`partition`].
pub type PartitionOptions = ExperimentOptions;

/// `key=value` workload parameters as owned pairs.
pub(crate) fn params(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// What an experiment produced: one JSON object per row, experiment-level
/// results under `extra` (e.g. `"summary"`), the rows as CSV (with a header
/// line) and as a printable table.
#[derive(Clone, Debug)]
pub struct ExperimentOutput {
    pub experiment: String,
    pub rows: Vec<serde_json::Value>,
    pub extra: serde_json::Map<String, serde_json::Value>,
    pub csv: String,
    pub table: String,
}

impl ExperimentOutput {
    /// One JSON object: `{"experiment": .., "rows": [..], ..extra}`.
    pub fn to_json(&self) -> serde_json::Value {
        let mut m = serde_json::Map::new();
        m.insert("experiment".into(), self.experiment.clone().into());
        m.insert("rows".into(), self.rows.clone().into());
        for (k, v) in &self.extra {
            m.insert(k.clone(), v.clone());
        }
        serde_json::Value::Object(m)
    }
}

/// The plot format named by `plot_ext`: `svg`, `png` or `pdf` (any case).
/// Checked before an experiment runs, so a bad name costs nothing.
fn plot_format(plot_ext: &str) -> Result<String> {
    Ok(plot_ext
        .parse::<crate::figure::PlotFormat>()?
        .ext()
        .to_string())
}

impl ExperimentOutput {
    pub(crate) fn new(
        experiment: &str,
        rows: Vec<serde_json::Value>,
        extra: serde_json::Map<String, serde_json::Value>,
        csv: String,
        table: String,
    ) -> Self {
        ExperimentOutput {
            experiment: experiment.into(),
            rows,
            extra,
            csv,
            table,
        }
    }

    /// Writes `<experiment>.csv` and `<experiment>.<ext>` into `out_dir` (a
    /// PNG is the SVG figure of `width` x `height` rasterized, a PDF the SVG
    /// converted) and records
    /// both under `extra["files"]`.
    pub(crate) fn written(
        mut self,
        out_dir: &Path,
        ext: &str,
        svg: String,
        (width, height): (u32, u32),
    ) -> Result<Self> {
        let name = &self.experiment;
        let csv_path = write_file(out_dir, &format!("{name}.csv"), self.csv.as_bytes())?;
        let plot_name = format!("{name}.{ext}");
        let format = crate::figure::PlotFormat::from_ext(ext)
            .ok_or_else(|| cairn_core::Error::invalid(format!("plot format {ext:?}")))?;
        let bytes = format.render(
            svg,
            (width, height),
            &out_dir.join(&plot_name).display().to_string(),
        )?;
        let plot_path = write_file(out_dir, &plot_name, &bytes)?;
        self.extra.insert(
            "files".into(),
            serde_json::json!([
                csv_path.display().to_string(),
                plot_path.display().to_string()
            ]),
        );
        Ok(self)
    }
}

impl ExperimentOutput {
    /// Writes `<experiment>.csv`, the extra CSVs `csvs` (file name, text)
    /// and every figure of `figures` (file stem, SVG, size) as
    /// `<stem>.<ext>` into `out_dir`, and records them all under
    /// `extra["files"]`: for experiments with more than one table or figure.
    pub(crate) fn written_files(
        mut self,
        out_dir: &Path,
        ext: &str,
        csvs: &[(String, String)],
        figures: Vec<(String, String, (u32, u32))>,
    ) -> Result<Self> {
        let format = crate::figure::PlotFormat::from_ext(ext)
            .ok_or_else(|| cairn_core::Error::invalid(format!("plot format {ext:?}")))?;
        let mut files = vec![write_file(
            out_dir,
            &format!("{}.csv", self.experiment),
            self.csv.as_bytes(),
        )?];
        for (name, text) in csvs {
            files.push(write_file(out_dir, name, text.as_bytes())?);
        }
        for (stem, svg, size) in figures {
            let name = format!("{stem}.{ext}");
            let bytes = format.render(svg, size, &out_dir.join(&name).display().to_string())?;
            files.push(write_file(out_dir, &name, &bytes)?);
        }
        let names: Vec<String> = files.iter().map(|p| p.display().to_string()).collect();
        self.extra.insert("files".into(), serde_json::json!(names));
        Ok(self)
    }
}

/// Writes `bytes` to `dir/name`, creating `dir`.
fn write_file(dir: &Path, name: &str, bytes: &[u8]) -> Result<std::path::PathBuf> {
    std::fs::create_dir_all(dir).ctx(|| format!("create {}", dir.display()))?;
    let path = dir.join(name);
    std::fs::write(&path, bytes).ctx(|| format!("write {}", path.display()))?;
    Ok(path)
}
