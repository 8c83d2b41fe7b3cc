//! Experiments: fixed runs of the simulator that reproduce a table or figure
//! of the papers, each returning rows (JSON), a CSV, a printable table and a
//! plot written next to the CSV. `docs/experiments/` documents each one with
//! its measured numbers next to the paper's.
//!
//! * [`index_io`] (`cairn experiment index-io`): DDFS
//!   (`001_3652cceaf162c5a1.txt`) §5.2 Table 4, index and locality reads with
//!   and without the Summary Vector and the Locality Preserved Cache.

mod index_io;
pub mod index_ram;

#[cfg(test)]
mod tests;

use std::path::Path;

use cairn_core::error::IoContext;
use cairn_core::Result;

pub use index_io::{ddfs_params, index_io, IndexIoOptions, CASES, DDFS_TABLE4};
pub use index_ram::{index_ram, IndexRamOptions};

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

/// The plot format named by `plot_ext`: `svg` or `png` (any case). Checked
/// before an experiment runs, so a bad name costs nothing.
fn plot_format(plot_ext: &str) -> Result<String> {
    let ext = plot_ext.to_ascii_lowercase();
    if ext != "svg" && ext != "png" {
        return Err(cairn_core::Error::invalid(format!(
            "plot format {plot_ext:?}: must be svg or png"
        )));
    }
    Ok(ext)
}

/// Writes `<experiment>.csv` and `<experiment>.<ext>` into `out_dir` (a PNG
/// is the SVG figure rasterized), records both under `extra["files"]` and
/// assembles the output.
#[allow(clippy::too_many_arguments)]
fn finish(
    experiment: &str,
    out_dir: &Path,
    ext: &str,
    svg: String,
    (width, height): (u32, u32),
    rows: Vec<serde_json::Value>,
    mut extra: serde_json::Map<String, serde_json::Value>,
    csv: String,
    table: String,
) -> Result<ExperimentOutput> {
    let csv_path = write_file(out_dir, &format!("{experiment}.csv"), csv.as_bytes())?;
    let plot_name = format!("{experiment}.{ext}");
    let bytes = if ext == "png" {
        crate::figure::rasterize(
            &svg,
            width,
            height,
            &out_dir.join(&plot_name).display().to_string(),
        )?
    } else {
        svg.into_bytes()
    };
    let plot_path = write_file(out_dir, &plot_name, &bytes)?;
    extra.insert(
        "files".into(),
        serde_json::json!([
            csv_path.display().to_string(),
            plot_path.display().to_string()
        ]),
    );
    Ok(ExperimentOutput {
        experiment: experiment.into(),
        rows,
        extra,
        csv,
        table,
    })
}

/// Writes `bytes` to `dir/name`, creating `dir`.
fn write_file(dir: &Path, name: &str, bytes: &[u8]) -> Result<std::path::PathBuf> {
    std::fs::create_dir_all(dir).ctx(|| format!("create {}", dir.display()))?;
    let path = dir.join(name);
    std::fs::write(&path, bytes).ctx(|| format!("write {}", path.display()))?;
    Ok(path)
}
