//! `cairn-bench chunking`: chunker throughput against in-run baselines.
//!
//! Generates `--mib N` MiB (default 256) of deterministic pseudo-random bytes
//! (splitmix64), then times, best of `--runs` (default 3) each:
//!
//! * baseline `scan`: XOR of every little-endian u64 word, i.e. the cost of
//!   reading the buffer once (memory bandwidth);
//! * baseline `blake3`: single-threaded BLAKE3 over the whole buffer (the
//!   default fingerprint's cost per byte);
//! * `fixed`, `rabin`, `fastcdc`, `regression` with `--avg` (default 8 KiB),
//!   min = avg/4, max = avg*8 (`ChunkerConfig::from_name`), via `cut_points`
//!   over the whole buffer;
//! * `fastcdc+reader`: FastCDC through `ChunkReader` (4 MiB batches), which
//!   adds the look-ahead buffer and the copy into batches;
//! * `fastcdc+blake3`: FastCDC cut points, then a BLAKE3 fingerprint per chunk
//!   (the ingest front end without I/O).
//!
//! Prints MB/s (10^6 bytes per second), the ratio to each baseline, the chunk
//! count, mean chunk size and, for content-defined chunkers, the share of
//! cuts forced at the maximum size (from an untimed pass). `--json` prints the
//! same as one JSON object.

use std::hint::black_box;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use cairn_chunk::{
    cut_points, fingerprint, new_chunker, ChunkBatch, ChunkReader, Chunker, CutKind,
    FastCdcChunker, RabinChunker, RegressionChunker,
};
use cairn_core::{ChunkerConfig, FingerprintAlgo};
use serde_json::{json, Value};

struct Options {
    mib: usize,
    avg: u32,
    runs: usize,
    json: bool,
}

fn parse(args: &[String]) -> Result<Options> {
    let mut o = Options {
        mib: 256,
        avg: 8192,
        runs: 3,
        json: false,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = |name: &str| -> Result<usize> {
            let v = it.next().with_context(|| format!("{name} needs a value"))?;
            v.parse()
                .with_context(|| format!("{name}: {v:?} is not a number"))
        };
        match a.as_str() {
            "--mib" => o.mib = value("--mib")?,
            "--avg" => o.avg = value("--avg")?.try_into().context("--avg too large")?,
            "--runs" => o.runs = value("--runs")?,
            "--json" => o.json = true,
            other => bail!("chunking: unknown option {other:?}"),
        }
    }
    if o.mib == 0 || o.runs == 0 {
        bail!("--mib and --runs must be positive");
    }
    Ok(o)
}

/// `len` pseudo-random bytes (splitmix64 from a fixed seed).
fn generate(len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    cairn_core::rng::SplitMix64::new(0x6361_6972_6e2d_626e).fill_bytes(&mut v);
    v
}

/// Best wall time of `runs` calls; `f` returns the chunk count.
fn best_of(runs: usize, mut f: impl FnMut() -> usize) -> (Duration, usize) {
    let mut best = Duration::MAX;
    let mut count = 0;
    for _ in 0..runs {
        let t = Instant::now();
        count = black_box(f());
        best = best.min(t.elapsed());
    }
    (best, count)
}

fn scan(data: &[u8]) -> u64 {
    data.chunks_exact(8)
        .map(|w| u64::from_le_bytes(w.try_into().unwrap()))
        .fold(0, |a, w| a ^ w)
}

/// Share of forced cuts, from a pass with the concrete chunker.
fn forced_share<C: Chunker>(mut c: C, kind: impl Fn(&C) -> CutKind, data: &[u8]) -> f64 {
    let (mut pos, mut forced, mut total) = (0, 0usize, 0usize);
    while pos < data.len() {
        pos += c.next_boundary(&data[pos..], true).unwrap();
        total += 1;
        forced += (kind(&c) == CutKind::Forced) as usize;
    }
    forced as f64 / total.max(1) as f64
}

struct Row {
    name: String,
    time: Duration,
    chunks: Option<usize>,
    forced: Option<f64>,
}

pub fn run(args: &[String]) -> Result<Value> {
    let o = parse(args)?;
    let data = generate(o.mib << 20);
    let mut rows = Vec::new();

    let (t, _) = best_of(o.runs, || scan(&data) as usize);
    rows.push(Row {
        name: "scan (baseline)".into(),
        time: t,
        chunks: None,
        forced: None,
    });
    let (t, _) = best_of(o.runs, || blake3::hash(&data).as_bytes()[0] as usize);
    rows.push(Row {
        name: "blake3 (baseline)".into(),
        time: t,
        chunks: None,
        forced: None,
    });

    let mut ends = Vec::with_capacity(data.len() / 1024);
    for name in ["fixed", "rabin", "fastcdc", "regression"] {
        let cfg = ChunkerConfig::from_name(name, o.avg)?;
        let mut chunker = new_chunker(&cfg);
        let (t, n) = best_of(o.runs, || {
            cut_points(chunker.as_mut(), &data, &mut ends);
            ends.len()
        });
        let forced = match cfg {
            ChunkerConfig::Fixed { .. } => None,
            ChunkerConfig::Rabin { min, avg, max } => Some(forced_share(
                RabinChunker::new(min as usize, avg as usize, max as usize),
                RabinChunker::last_cut_kind,
                &data,
            )),
            ChunkerConfig::FastCdc { min, avg, max } => Some(forced_share(
                FastCdcChunker::new(min as usize, avg as usize, max as usize),
                FastCdcChunker::last_cut_kind,
                &data,
            )),
            ChunkerConfig::Regression { min, avg, max } => Some(forced_share(
                RegressionChunker::new(min as usize, avg as usize, max as usize),
                RegressionChunker::last_cut_kind,
                &data,
            )),
        };
        rows.push(Row {
            name: name.into(),
            time: t,
            chunks: Some(n),
            forced,
        });
    }

    let fastcdc = ChunkerConfig::from_name("fastcdc", o.avg)?;
    let mut batch = ChunkBatch::new();
    let (t, n) = best_of(o.runs, || {
        let mut r = ChunkReader::new(&data[..], new_chunker(&fastcdc), 4 << 20);
        let mut n = 0;
        while r.next_batch(&mut batch).expect("in-memory read") {
            n += batch.len();
        }
        n
    });
    rows.push(Row {
        name: "fastcdc+reader".into(),
        time: t,
        chunks: Some(n),
        forced: None,
    });
    let mut chunker = new_chunker(&fastcdc);
    let (t, n) = best_of(o.runs, || {
        cut_points(chunker.as_mut(), &data, &mut ends);
        let mut start = 0;
        for &end in &ends {
            black_box(fingerprint(FingerprintAlgo::Blake3, &data[start..end]));
            start = end;
        }
        ends.len()
    });
    rows.push(Row {
        name: "fastcdc+blake3".into(),
        time: t,
        chunks: Some(n),
        forced: None,
    });

    Ok(report(&o, data.len(), &rows))
}

fn report(o: &Options, bytes: usize, rows: &[Row]) -> Value {
    let mbps = |t: Duration| bytes as f64 / t.as_secs_f64() / 1e6;
    let (scan_mbps, b3_mbps) = (mbps(rows[0].time), mbps(rows[1].time));
    let doc = {
        let results: Vec<_> = rows
            .iter()
            .map(|r| {
                let m = mbps(r.time);
                json!({
                    "algorithm": r.name,
                    "seconds": r.time.as_secs_f64(),
                    "mb_per_s": m,
                    "ratio_vs_scan": m / scan_mbps,
                    "ratio_vs_blake3": m / b3_mbps,
                    "chunks": r.chunks,
                    "mean_chunk_bytes": r.chunks.map(|n| bytes as f64 / n.max(1) as f64),
                    "forced_cut_share": r.forced,
                })
            })
            .collect();
        json!({
            "benchmark": "chunking",
            "mib": o.mib,
            "avg": o.avg,
            "runs": o.runs,
            "results": results,
        })
    };
    if o.json {
        println!("{doc:#}");
        return doc;
    }
    println!(
        "chunking: {} MiB pseudo-random, avg {} B (min avg/4, max avg*8), best of {}",
        o.mib, o.avg, o.runs
    );
    println!(
        "{:<20} {:>10} {:>9} {:>10} {:>9} {:>10} {:>8}",
        "algorithm", "MB/s", "vs scan", "vs blake3", "chunks", "mean B", "forced"
    );
    for r in rows {
        let m = mbps(r.time);
        let chunks = r.chunks.map_or("-".into(), |n| n.to_string());
        let mean = r.chunks.map_or("-".into(), |n| {
            format!("{:.0}", bytes as f64 / n.max(1) as f64)
        });
        let forced = r
            .forced
            .map_or("-".into(), |f| format!("{:.3}%", f * 100.0));
        println!(
            "{:<20} {:>10.0} {:>8.3}x {:>9.3}x {:>9} {:>10} {:>8}",
            r.name,
            m,
            m / scan_mbps,
            m / b3_mbps,
            chunks,
            mean,
            forced
        );
    }
    doc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_parse() {
        let args: Vec<String> = ["--mib", "4", "--json", "--runs", "1"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let o = parse(&args).unwrap();
        assert_eq!((o.mib, o.runs, o.avg, o.json), (4, 1, 8192, true));
        assert!(parse(&["--bogus".to_string()]).is_err());
        assert!(parse(&["--mib".to_string()]).is_err());
        assert_eq!(generate(13).len(), 13);
    }
}
