//! Human-readable tables of an [`AnalyzeReport`], one per section of the
//! `004_62bf1a5ddd5ed253.txt` study (see `mod.rs` and `docs/analyze.md`).

use std::fmt::Write;

use super::{AnalyzeReport, ChunkSizes, PartitionSummary};

/// `1536` -> `1.5 KiB`.
pub(super) fn bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else if v.fract() == 0.0 {
        format!("{v:.0} {}", UNITS[u])
    } else {
        format!("{v:.2} {}", UNITS[u])
    }
}

fn pct(f: f64) -> String {
    format!("{:.2}%", f * 100.0)
}

fn sizes(s: ChunkSizes) -> String {
    format!(
        "{}/{}/{}",
        bytes(s.min as u64),
        bytes(s.avg as u64),
        bytes(s.max as u64)
    )
}

/// Aligned columns: the first left-aligned, the others right-aligned.
fn grid(out: &mut String, rows: &[Vec<String>]) {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let width: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for r in rows {
        let mut line = String::from("  ");
        for (c, cell) in r.iter().enumerate() {
            if c == 0 {
                let _ = write!(line, "{cell:<w$}", w = width[0]);
            } else {
                let _ = write!(line, "  {cell:>w$}", w = width[c]);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
}

fn row<const N: usize>(cells: [String; N]) -> Vec<String> {
    cells.to_vec()
}

/// Renders the report as text tables.
pub fn render_table(r: &AnalyzeReport) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "cairn analyze {}: {} files ({} empty), {} read in {:.1} s; fingerprint {}; index memory {} ({:.1} B per entry, {} entries)",
        r.paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(" "),
        r.files,
        r.empty_files,
        bytes(r.logical_bytes),
        r.seconds,
        r.fingerprint.name(),
        bytes(r.memory.index_bytes),
        r.memory.bytes_per_entry,
        r.memory.index_entries,
    );
    if r.truncated {
        o.push_str("  (stopped at --max-files: not every file was read)\n");
    }
    if r.non_regular_skipped > 0 {
        let _ = writeln!(
            o,
            "  {} symlinks and special files passed over",
            r.non_regular_skipped
        );
    }
    if r.notes_total > 0 {
        let _ = writeln!(o, "  {} entries skipped or cut short:", r.notes_total);
        for n in r.notes.iter().take(5) {
            let _ = writeln!(o, "    {n}");
        }
    }

    let with_c = r.compression.is_some();
    let codec = r
        .compression
        .map(|c| format!("{} {}", c.codec.name(), c.level));
    let _ = writeln!(
        o,
        "\n1. Dedup savings vs average chunk size (FastCDC, min avg/4, max avg*8; 004 \"Average Chunk Size\")"
    );
    let mut rows = vec![row([
        "min/avg/max".to_string(),
        "chunks".into(),
        "distinct".into(),
        "mean chunk".into(),
        "logical".into(),
        "unique".into(),
        "savings".into(),
        "forced".into(),
    ])];
    if let Some(c) = &codec {
        rows[0].push(format!("unique+{c}"));
        rows[0].push(format!("savings+{c}"));
    }
    for p in &r.chunk_size_sweep {
        let mut v = row([
            sizes(p.chunker),
            p.chunks.to_string(),
            p.distinct_chunks.to_string(),
            bytes(p.mean_chunk_bytes.round() as u64),
            bytes(p.logical_bytes),
            bytes(p.unique_bytes),
            pct(p.savings),
            pct(p.forced_share),
        ]);
        if with_c {
            v.push(bytes(p.compressed_unique_bytes.unwrap_or(0)));
            v.push(pct(p.savings_with_compression.unwrap_or(0.0)));
        }
        rows.push(v);
    }
    grid(&mut o, &rows);

    let c = &r.chunking;
    let _ = writeln!(
        o,
        "\n2. Basic (Rabin) vs regression chunking, min/avg/max {} (004 \"Regression Chunking\")",
        sizes(c.sizes)
    );
    let mut rows = vec![row([
        "chunker".to_string(),
        "chunks".into(),
        "mean".into(),
        "mean cut".into(),
        "full".into(),
        "regressed (1/2/3/4 bits)".into(),
        "forced".into(),
        "end of file".into(),
        "forced share".into(),
        "regressed share".into(),
        "savings".into(),
    ])];
    for s in [&c.basic, &c.regression] {
        let reg = if s.regressed_cuts.is_empty() {
            "-".to_string()
        } else {
            s.regressed_cuts
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join("/")
        };
        rows.push(row([
            s.algorithm.clone(),
            s.chunks.to_string(),
            bytes(s.mean_chunk_bytes.round() as u64),
            bytes(s.mean_cut_chunk_bytes.round() as u64),
            s.full_cuts.to_string(),
            reg,
            s.forced_cuts.to_string(),
            s.end_of_input_cuts.to_string(),
            pct(s.forced_share),
            pct(s.regressed_share),
            pct(s.savings),
        ]));
    }
    grid(&mut o, &rows);
    let _ = writeln!(
        o,
        "  size histogram: chunks cut by the chunker (+ chunks ended by end of file)"
    );
    let mut rows = vec![row([
        "size".to_string(),
        "basic".into(),
        "regression".into(),
    ])];
    for (b, g) in c.basic.histogram.iter().zip(&c.regression.histogram) {
        rows.push(row([
            format!("({}, {}]", bytes(b.lo - 1), bytes(b.hi)),
            format!("{} (+{})", b.chunks, b.eof_chunks),
            format!("{} (+{})", g.chunks, g.eof_chunks),
        ]));
    }
    grid(&mut o, &rows);

    let rc = &r.reference_counts;
    let _ = writeln!(
        o,
        "\n3. Duplicate bytes by chunk reference count (FastCDC {}; 004 \"Chunk Reference Count\")",
        sizes(rc.chunker)
    );
    let mut rows = vec![row([
        "references".to_string(),
        "distinct".into(),
        "unique".into(),
        "referenced".into(),
        "duplicate".into(),
        "share of duplicate".into(),
    ])];
    for g in &rc.groups {
        let label = if g.min_refs == g.max_refs {
            g.min_refs.to_string()
        } else {
            format!("{}-{}", g.min_refs, g.max_refs)
        };
        rows.push(row([
            label,
            g.distinct_chunks.to_string(),
            bytes(g.unique_bytes),
            bytes(g.logical_bytes),
            bytes(g.duplicate_bytes),
            pct(g.duplicate_share),
        ]));
    }
    grid(&mut o, &rows);
    let _ = writeln!(o, "  duplicate bytes in all: {}", bytes(rc.duplicate_bytes));

    let p = &r.partitioning;
    let _ = writeln!(
        o,
        "\n4. Global vs partitioned dedup (FastCDC {}; 004 \"Efficient partitioning strategies\")",
        sizes(p.chunker)
    );
    let mut rows = vec![row([
        "scheme".to_string(),
        "partitions".into(),
        "unique".into(),
        "savings".into(),
    ])];
    for s in [&p.global, &p.by_type, &p.by_path] {
        rows.push(row([
            s.scheme.clone(),
            s.partitions.to_string(),
            bytes(s.unique_bytes),
            pct(s.savings),
        ]));
    }
    grid(&mut o, &rows);
    let _ = writeln!(
        o,
        "  (file path: directory subtrees of at most {} of all bytes; a larger directory's own files are one partition)",
        pct(p.path_partition_share)
    );
    largest(&mut o, &p.by_type);
    largest(&mut o, &p.by_path);
    o
}

fn largest(o: &mut String, s: &PartitionSummary) {
    let _ = writeln!(o, "  largest partitions by {}:", s.scheme);
    let mut rows = vec![row([
        "partition".to_string(),
        "files".into(),
        "logical".into(),
        "unique".into(),
        "savings within".into(),
    ])];
    for e in &s.largest {
        rows.push(row([
            e.key.clone(),
            e.files.to_string(),
            bytes(e.logical_bytes),
            bytes(e.unique_bytes),
            pct(e.savings),
        ]));
    }
    grid(o, &rows);
}
