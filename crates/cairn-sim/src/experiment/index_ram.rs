//! `index-ram`: RAM per indexed chunk and lookup rate of the two chunk
//! indexes, side by side, on the same fingerprints:
//!
//! * `ddfs`: the DDFS Summary Vector (Bloom filter, 10 bits/chunk, sized for
//!   N) in front of the paged on-disk index (`DiskIndex`, built by one
//!   `write_merged` of all N entries). Resident per chunk: the Bloom bits
//!   only; the `DiskIndex` keeps just its header in RAM.
//! * `frugal`: the RAM-frugal index of paper 004 (`FrugalIndex`: cuckoo
//!   table of 6-byte slots over a log on disk), all N inserted and flushed.
//!   Resident per chunk: `ram().bytes_per_chunk` (every slot, empty ones
//!   included, plus the stash).
//!
//! Both stores are a `MemBackend`, so "disk reads" are counted (backend
//! `read_at` calls through `Counters::index_page_reads`) but cost only a
//! memory copy: the lookup rates are CPU rates, not device rates.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde_json::{json, Value};

use cairn_backend::MemBackend;
use cairn_core::{Backend, ContainerId, Counters, Fingerprint, FingerprintAlgo, Result};
use cairn_engine::index::disk_index::DiskIndex;
use cairn_engine::index::frugal::{FrugalConfig, FrugalIndex};
use cairn_engine::index::summary_vector::SummaryVector;
use cairn_format::index::IndexEntry;

use super::tabulate::{self, f, s, u};
use super::{plot_format, ExperimentOutput};
use crate::figure::{Area, Drawn, T};

/// Bloom bits per chunk of the Summary Vector (cairn's default, DDFS's).
pub const BLOOM_BITS_PER_CHUNK: u32 = 10;
/// Index page size (cairn's default).
pub const PAGE_SIZE: usize = 4096;
/// Fingerprint width (BLAKE3-256).
pub const FP_WIDTH: usize = 32;
/// Chunks per container id in the entries (about a 4 MiB container of 4 KiB
/// chunks; only the id's value is stored).
const CHUNKS_PER_CONTAINER: u64 = 1024;
/// Paper 004's RAM per indexed chunk (2-byte signature + 4-byte pointer).
pub const PAPER_004_BYTES_PER_CHUNK: f64 = 6.0;

/// Options of [`index_ram`].
#[derive(Clone, Debug)]
pub struct IndexRamOptions {
    /// 100,000 chunks instead of 4,000,000 (seconds in a debug build).
    pub quick: bool,
    /// Where `index-ram.csv` and the plot are written (created if missing).
    pub out_dir: PathBuf,
    /// `"svg"` or `"png"`.
    pub plot_ext: String,
}

impl Default for IndexRamOptions {
    fn default() -> Self {
        IndexRamOptions {
            quick: false,
            out_dir: PathBuf::from("."),
            plot_ext: "svg".into(),
        }
    }
}

/// Indexed chunks N of a run.
pub fn chunk_count(quick: bool) -> u64 {
    if quick {
        100_000
    } else {
        4_000_000
    }
}

/// The `i`-th fingerprint: BLAKE3 of the little-endian counter.
fn fp(i: u64) -> Fingerprint {
    cairn_chunk::fingerprint(FingerprintAlgo::Blake3, &i.to_le_bytes())
}

/// The lookup stream over N indexed fingerprints `0..n`: N lookups,
/// alternating present (the first N/2 in insertion order) and absent
/// (counters `n..n + n/2`).
fn lookup_stream(n: u64) -> Vec<(Fingerprint, bool)> {
    (0..n)
        .map(|j| {
            if j % 2 == 0 {
                (fp(j / 2), true)
            } else {
                (fp(n + j / 2), false)
            }
        })
        .collect()
}

struct Measured {
    index: &'static str,
    entries: u64,
    ram_bytes: u64,
    bytes_per_chunk: f64,
    insert_seconds: f64,
    lookups: u64,
    lookup_seconds: f64,
    hits: u64,
    wrong: u64,
    index_page_reads: u64,
    detail: Value,
}

fn rate(n: u64, secs: f64) -> f64 {
    if secs > 0.0 {
        n as f64 / secs
    } else {
        0.0
    }
}

fn measure_ddfs(fps: &[Fingerprint], stream: &[(Fingerprint, bool)]) -> Result<Measured> {
    let n = fps.len() as u64;
    let backend: Arc<dyn Backend> = Arc::new(MemBackend::new());
    let counters = Arc::new(Counters::default());
    let disk = DiskIndex::open(backend, counters.clone())?;
    let t0 = Instant::now();
    let mut sv = SummaryVector::with_capacity(n, BLOOM_BITS_PER_CHUNK);
    let mut entries = Vec::with_capacity(fps.len());
    for (i, f) in fps.iter().enumerate() {
        sv.insert(f);
        entries.push(IndexEntry {
            fp: *f,
            container: ContainerId(i as u64 / CHUNKS_PER_CONTAINER),
        });
    }
    disk.write_merged(
        entries,
        ContainerId(n.div_ceil(CHUNKS_PER_CONTAINER)),
        FP_WIDTH,
        PAGE_SIZE,
    )?;
    let insert_seconds = t0.elapsed().as_secs_f64();

    let before = counters.snapshot();
    let (mut hits, mut wrong, mut negatives, mut false_positives) = (0u64, 0u64, 0u64, 0u64);
    let t0 = Instant::now();
    for (f, present) in stream {
        let found = if sv.contains(f) {
            let r = disk.lookup(f)?;
            if r.is_none() {
                false_positives += 1;
            }
            r
        } else {
            negatives += 1;
            None
        };
        hits += found.is_some() as u64;
        wrong += (found.is_some() != *present) as u64;
    }
    let lookup_seconds = t0.elapsed().as_secs_f64();
    let reads = counters.snapshot().since(&before).index_page_reads;
    let ram_bytes = sv.ram_bytes();
    let header = disk.header();
    Ok(Measured {
        index: "ddfs",
        entries: n,
        ram_bytes,
        bytes_per_chunk: ram_bytes as f64 / n as f64,
        insert_seconds,
        lookups: stream.len() as u64,
        lookup_seconds,
        hits,
        wrong,
        index_page_reads: reads,
        detail: json!({
            "bloom_bits": sv.num_bits(),
            "bloom_bits_per_chunk": BLOOM_BITS_PER_CHUNK,
            "bloom_negatives": negatives,
            "bloom_false_positives": false_positives,
            "disk_index_pages": header.map_or(0, |h| h.page_count),
            "disk_index_page_size": PAGE_SIZE,
            "disk_index_bytes": header.map_or(0, |h| (h.page_count + 1) * h.page_size as u64),
        }),
    })
}

fn measure_frugal(fps: &[Fingerprint], stream: &[(Fingerprint, bool)]) -> Result<Measured> {
    let backend: Arc<dyn Backend> = Arc::new(MemBackend::new());
    let counters = Arc::new(Counters::default());
    let cfg = FrugalConfig {
        expected_chunks: fps.len(),
        ..FrugalConfig::default()
    };
    let t0 = Instant::now();
    let mut idx = FrugalIndex::open(backend, counters.clone(), cfg.clone())?;
    for (i, f) in fps.iter().enumerate() {
        idx.insert(f, ContainerId(i as u64 / CHUNKS_PER_CONTAINER))?;
    }
    idx.flush()?;
    let insert_seconds = t0.elapsed().as_secs_f64();
    let ram = idx.ram();
    let build_stats = idx.stats();
    idx.reset_stats();

    let before = counters.snapshot();
    let (mut hits, mut wrong) = (0u64, 0u64);
    let t0 = Instant::now();
    for (f, present) in stream {
        let found = idx.lookup(f)?;
        hits += found.is_some() as u64;
        wrong += (found.is_some() != *present) as u64;
    }
    let lookup_seconds = t0.elapsed().as_secs_f64();
    let reads = counters.snapshot().since(&before).index_page_reads;
    let st = idx.stats();
    Ok(Measured {
        index: "frugal",
        entries: ram.entries as u64,
        ram_bytes: (ram.table_slot_bytes + ram.stash_bytes) as u64,
        bytes_per_chunk: ram.bytes_per_chunk,
        insert_seconds,
        lookups: stream.len() as u64,
        lookup_seconds,
        hits,
        wrong,
        index_page_reads: reads,
        detail: json!({
            "load_factor": ram.load_factor,
            "table_slot_bytes": ram.table_slot_bytes,
            "stash_bytes": ram.stash_bytes,
            "bucket_slots": cfg.bucket_slots,
            "max_load": cfg.max_load,
            "prefetch_run": cfg.prefetch_run,
            "prefetch_cache_entries": ram.prefetch_cache_entries,
            "write_buffer_entries": ram.write_buffer_entries,
            "build_rebuilds": build_stats.rebuilds,
            "table_negatives": st.table_negatives,
            "prefetch_hits": st.prefetch_hits,
            "buffer_hits": st.buffer_hits,
            "log_hits": st.log_hits,
            "log_reads": st.log_reads,
            "false_matches": st.false_matches,
            "false_match_reads": st.false_match_reads,
        }),
    })
}

/// Runs the experiment and writes `index-ram.csv` and `index-ram.<plot_ext>`
/// into `out_dir`.
pub fn index_ram(opts: &IndexRamOptions) -> Result<ExperimentOutput> {
    let ext = plot_format(&opts.plot_ext)?;
    let n = chunk_count(opts.quick);
    let fps: Vec<Fingerprint> = (0..n).map(fp).collect();
    let stream = lookup_stream(n);
    let results = [measure_ddfs(&fps, &stream)?, measure_frugal(&fps, &stream)?];
    drop(fps);
    drop(stream);

    let rows: Vec<Value> = results.iter().map(row).collect();
    let mut extra = serde_json::Map::new();
    extra.insert(
        "params".into(),
        json!({
            "chunks": n,
            "fp_width": FP_WIDTH,
            "lookups": n,
            "lookup_stream": "alternating: present (first N/2, insertion order) / absent",
            "bloom_bits_per_chunk": BLOOM_BITS_PER_CHUNK,
            "page_size": PAGE_SIZE,
            "backend": "mem",
        }),
    );
    extra.insert(
        "paper_004_bytes_per_chunk".into(),
        PAPER_004_BYTES_PER_CHUNK.into(),
    );
    extra.insert(
        "detail".into(),
        results
            .iter()
            .map(|m| (m.index.to_string(), m.detail.clone()))
            .collect::<serde_json::Map<_, _>>()
            .into(),
    );
    let csv = tabulate::csv(&rows, &COLUMNS);
    let table = table(&rows, n);
    let svg = plot_svg(&rows)?;
    ExperimentOutput::new("index-ram", rows, extra, csv, table).written(
        &opts.out_dir,
        &ext,
        svg,
        SIZE,
    )
}

fn row(m: &Measured) -> Value {
    json!({
        "index": m.index,
        "chunks": m.entries,
        "ram_bytes": m.ram_bytes,
        "bytes_per_chunk": m.bytes_per_chunk,
        "insert_chunks_per_second": rate(m.entries, m.insert_seconds),
        "lookups": m.lookups,
        "chunks_per_second": rate(m.lookups, m.lookup_seconds),
        "hits": m.hits,
        "wrong_answers": m.wrong,
        "index_page_reads": m.index_page_reads,
        "disk_reads_per_lookup": if m.lookups == 0 { 0.0 } else { m.index_page_reads as f64 / m.lookups as f64 },
        "insert_seconds": m.insert_seconds,
        "lookup_seconds": m.lookup_seconds,
    })
}

const COLUMNS: [&str; 13] = [
    "index",
    "chunks",
    "ram_bytes",
    "bytes_per_chunk",
    "insert_chunks_per_second",
    "lookups",
    "chunks_per_second",
    "hits",
    "wrong_answers",
    "index_page_reads",
    "disk_reads_per_lookup",
    "insert_seconds",
    "lookup_seconds",
];

fn table(rows: &[Value], n: u64) -> String {
    let head = [
        "index",
        "chunks",
        "RAM bytes",
        "bytes/chunk",
        "inserts/s",
        "lookups",
        "lookups/s",
        "hits",
        "disk reads",
        "reads/lookup",
    ];
    let mut lines: Vec<Vec<String>> = vec![head.iter().map(|h| h.to_string()).collect()];
    for r in rows {
        lines.push(vec![
            s(r, "index").into(),
            u(r, "chunks").to_string(),
            u(r, "ram_bytes").to_string(),
            format!("{:.3}", f(r, "bytes_per_chunk")),
            format!("{:.0}", f(r, "insert_chunks_per_second")),
            u(r, "lookups").to_string(),
            format!("{:.0}", f(r, "chunks_per_second")),
            u(r, "hits").to_string(),
            u(r, "index_page_reads").to_string(),
            format!("{:.5}", f(r, "disk_reads_per_lookup")),
        ]);
    }
    let title = format!(
        "index-ram: RAM per indexed chunk and lookup rate, {n} BLAKE3 fingerprints, \
         {n} lookups (50% present in insertion order, 50% absent), in-memory backend \
         (paper 004: {PAPER_004_BYTES_PER_CHUNK} bytes/chunk)\n"
    );
    tabulate::align(&title, &lines, 1)
}

const SIZE: (u32, u32) = crate::figure::size(2);

const COLORS: [RGBColor; 2] = [RGBColor(0x1f, 0x77, 0xb4), RGBColor(0xd6, 0x27, 0x28)];

/// Two bar panels: RAM bytes per chunk (with paper 004's 6 bytes/chunk as a
/// dashed line) and lookups per second.
fn plot_svg(rows: &[Value]) -> Result<String> {
    crate::figure::svg(SIZE, |root| draw(rows, root))
}

fn draw(rows: &[Value], root: &Area) -> Drawn {
    let panels = crate::figure::panels(root, "Index RAM and speed: DDFS vs frugal", 2)?;
    panel(
        rows,
        &panels[0],
        "bytes_per_chunk",
        "RAM per indexed chunk",
        "bytes per chunk",
        Some(PAPER_004_BYTES_PER_CHUNK),
    )?;
    panel(
        rows,
        &panels[1],
        "chunks_per_second",
        "lookups per second (half present)",
        "lookups per second",
        None,
    )?;
    root.present()
}

fn panel(
    rows: &[Value],
    area: &Area,
    key: &str,
    caption: &str,
    y_desc: &str,
    reference: Option<f64>,
) -> Drawn {
    let n = rows.len().max(1);
    let top = rows
        .iter()
        .map(|r| f(r, key))
        .fold(reference.unwrap_or(0.0), f64::max)
        .max(1e-9)
        * 1.45;
    let names: Vec<String> = rows.iter().map(|r| s(r, "index").to_string()).collect();
    let mut chart = crate::figure::chart(area, caption)
        .y_label_area_size(T.px(40.0))
        .build_cartesian_2d(0f64..n as f64, 0f64..top)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n * 2 + 1)
        .x_label_formatter(&|x| crate::figure::category_label(names.as_slice(), *x))
        .disable_y_mesh()
        .y_labels(6)
        .x_desc("index")
        .y_desc(y_desc)
        .label_style(T.tick())
        .axis_desc_style(T.axis())
        .y_label_formatter(&|v| {
            if top >= 1e4 {
                format!("{v:.1e}")
            } else {
                format!("{v:.1}")
            }
        })
        .draw()?;
    let bars: Vec<(f64, f64, f64, RGBColor)> = rows
        .iter()
        .enumerate()
        .map(|(i, r)| {
            (
                i as f64 + 0.2,
                i as f64 + 0.8,
                f(r, key),
                COLORS[i % COLORS.len()],
            )
        })
        .collect();
    chart.draw_series(
        bars.iter()
            .map(|&(x0, x1, v, c)| Rectangle::new([(x0, 0.0), (x1, v)], c.filled())),
    )?;
    chart.draw_series(bars.iter().map(|&(x0, x1, v, _)| {
        let label = if v >= 1e4 {
            format!("{v:.3e}")
        } else {
            format!("{v:.3}")
        };
        Text::new(
            label,
            ((x0 + x1) / 2.0, v),
            T.tick()
                .into_font()
                .color(&BLACK)
                .pos(Pos::new(HPos::Center, VPos::Bottom)),
        )
    }))?;
    if let Some(y) = reference {
        chart
            .draw_series(DashedLineSeries::new(
                vec![(0.0, y), (n as f64, y)],
                6,
                4,
                BLACK.stroke_width(1),
            ))?
            .label(format!("paper 004: {y} bytes/chunk"))
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], BLACK));
        crate::figure::legend(&mut chart, SeriesLabelPosition::UpperRight)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row<'a>(out: &'a ExperimentOutput, index: &str) -> &'a Value {
        out.rows
            .iter()
            .find(|r| r["index"] == index)
            .unwrap_or_else(|| panic!("no row for {index}"))
    }

    /// Structure, correctness and RAM only; the rates are measured, never
    /// asserted.
    #[test]
    fn index_ram_quick_rows_files_and_ram() {
        let tmp = tempfile::tempdir().unwrap();
        let out = index_ram(&IndexRamOptions {
            quick: true,
            out_dir: tmp.path().to_path_buf(),
            plot_ext: "svg".into(),
        })
        .unwrap();
        eprintln!("{}", out.table);
        assert_eq!(out.experiment, "index-ram");
        assert_eq!(out.rows.len(), 2);
        let n = chunk_count(true);
        for index in ["ddfs", "frugal"] {
            let r = row(&out, index);
            assert_eq!(r["chunks"].as_u64(), Some(n), "{index}");
            assert_eq!(r["lookups"].as_u64(), Some(n), "{index}");
            assert_eq!(r["hits"].as_u64(), Some(n / 2), "{index}");
            assert_eq!(r["wrong_answers"].as_u64(), Some(0), "{index}");
            for k in [
                "chunks_per_second",
                "insert_chunks_per_second",
                "disk_reads_per_lookup",
            ] {
                assert!(r[k].as_f64().is_some_and(|v| v >= 0.0), "{index} {k}");
            }
        }
        let ddfs = f(row(&out, "ddfs"), "bytes_per_chunk");
        assert!((ddfs - 1.25).abs() < 1e-9, "ddfs {ddfs}");
        let frugal = f(row(&out, "frugal"), "bytes_per_chunk");
        assert!((6.0..=6.3).contains(&frugal), "frugal {frugal}");
        // DDFS reads one page per Bloom-positive lookup: at least every
        // present lookup.
        assert!(u(row(&out, "ddfs"), "index_page_reads") >= n / 2);
        assert_eq!(out.csv.lines().count(), 3);
        assert!(out
            .csv
            .starts_with("index,chunks,ram_bytes,bytes_per_chunk"));
        let svg = std::fs::read_to_string(tmp.path().join("index-ram.svg")).unwrap();
        assert!(svg.starts_with("<svg"));
        assert!(tmp.path().join("index-ram.csv").exists());
        let j = out.to_json();
        assert_eq!(j["paper_004_bytes_per_chunk"], 6.0);
        assert!(j["detail"]["frugal"]["load_factor"].as_f64().unwrap() > 0.9);
    }

    #[test]
    fn index_ram_rejects_bad_plot_format() {
        let tmp = tempfile::tempdir().unwrap();
        let err = index_ram(&IndexRamOptions {
            quick: true,
            out_dir: tmp.path().to_path_buf(),
            plot_ext: "gif".into(),
        });
        assert!(err.is_err());
    }

    /// The full run documented in `docs/experiments/lookup.md`:
    /// `cargo test -p cairn-sim --release index_ram_full -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn index_ram_full() {
        let dir = std::env::temp_dir().join("cairn-index-ram");
        let out = index_ram(&IndexRamOptions {
            quick: false,
            out_dir: dir.clone(),
            plot_ext: "svg".into(),
        })
        .unwrap();
        println!("{}", out.table);
        println!("{}", serde_json::to_string_pretty(&out.to_json()).unwrap());
        println!("files in {}", dir.display());
    }
}
