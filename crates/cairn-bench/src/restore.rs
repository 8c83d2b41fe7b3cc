//! `cairn-bench restore`: restore throughput against an in-run copy baseline.
//!
//! Uses the dataset and repository of `cairn-bench backup --dir D --keep`
//! when `--dir D` holds them (snapshots tagged `gen1`/`gen2` of the same
//! `--mib`/`--dup-pct`); otherwise prepares the dataset and backs up both
//! generations into a fresh repository (untimed here). Then, best of
//! `--runs` (default 3), for each generation:
//!
//! * baseline: copy the generation's files to a new directory on one thread
//!   (read + write through a 1 MiB buffer, no `copy_file_range`, no fsync);
//! * cairn: open the repository, `read::Reader::open` with `--policy` and `--cache` (MiB)
//!   containers (default 16, the CLI default) and restore the snapshot into
//!   a new directory (cairn does not fsync restored files either).
//!
//! The source files and every repository object are read once (untimed)
//! before timing, so both sides read from the page cache (dropping caches
//! needs root), and one untimed copy of both generations, deleted at once,
//! pre-faults the page-cache memory the timed writes will use (on a VM, the
//! first touch of guest memory is slow and would penalize whichever step
//! writes first); `sync` runs untimed before each timed step so write-back
//! of one step does not land in the next. The first run compares every restored
//! byte with the source (untimed; `--no-verify` skips it).
//!
//! Reports MB/s, the ratio restore/copy, containers read and the speed factor
//! (MB restored per container read; 4.19 MB would be one read per 4 MiB of
//! unique data), and backend bytes read per restored byte.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use anyhow::{ensure, Context, Result};
use cairn_core::CountersSnapshot;
use cairn_engine::catalog::{self, SnapshotInfo};
use cairn_engine::read::{CacheOptions, PolicyKind, Reader};
use cairn_engine::restore::RestoreSummary;
use cairn_engine::{Progress, Repository};
use serde_json::{json, Value};

use crate::backup::{cairn_backup, sources, tags, Streams, Timed};
use crate::common::{
    copy_tree, mbps, mib, prefault, sync, value, walk, warm, DatasetOptions, WorkDir,
};

use crate::dataset::Dataset;

struct Options {
    data: DatasetOptions,
    /// Restore policy memory, MiB.
    cache: u64,
    policy: PolicyKind,
    verify: bool,
}

fn parse(args: &[String]) -> Result<Options> {
    let (mut cache, mut policy, mut verify) = (64, PolicyKind::default(), true);
    let data = DatasetOptions::parse_with("restore", args, 1024, &mut |a, it| {
        match a {
            "--cache" => cache = value(it, a)?,
            "--policy" => {
                let p: String = value(it, a)?;
                policy = p.parse().map_err(|e| anyhow::anyhow!("{e}"))?;
            }
            "--no-verify" => verify = false,
            _ => return Ok(false),
        }
        Ok(true)
    })?;
    ensure!(cache > 0, "--cache must be positive");
    Ok(Options {
        data,
        cache,
        policy,
        verify,
    })
}

/// Compares every file under `src` with its restored copy under `dst`;
/// returns the number of files compared.
pub fn verify(src: &Path, dst: &Path) -> Result<u64> {
    let (mut a, mut b) = (vec![0u8; 1 << 20], vec![0u8; 1 << 20]);
    let mut files = 0;
    walk(src, &mut |_| Ok(()), &mut |p, rel| {
        let q = dst.join(rel);
        let (mut f, mut g) = (
            File::open(p)?,
            File::open(&q).with_context(|| format!("restored file {} is missing", q.display()))?,
        );
        loop {
            let n = read_full(&mut f, &mut a)?;
            let m = read_full(&mut g, &mut b)?;
            ensure!(
                n == m && a[..n] == b[..m],
                "{} differs from {}",
                q.display(),
                p.display()
            );
            if n == 0 {
                break;
            }
        }
        files += 1;
        Ok(())
    })?;
    Ok(files)
}

fn read_full(f: &mut File, buf: &mut [u8]) -> Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        let k = f.read(&mut buf[n..])?;
        if k == 0 {
            break;
        }
        n += k;
    }
    Ok(n)
}

/// The snapshots of gen1 and gen2 of `ds` in `repo`, if both are there.
fn find_snapshots(repo: &Path, ds: &Dataset) -> Option<[SnapshotInfo; 2]> {
    let r = Repository::open_local(repo).ok()?;
    let (all, _) = catalog::list(&**r.backend()).ok()?;
    let find = |g: usize| {
        let want = tags(ds, g);
        all.iter()
            .rev()
            .find(|s| want.iter().all(|t| s.record.tags.contains(t)))
            .cloned()
    };
    Some([find(1)?, find(2)?])
}

struct Restored {
    time: Timed,
    sum: RestoreSummary,
    counters: CountersSnapshot,
}

fn cairn_restore(
    repo: &Path,
    snap: &SnapshotInfo,
    target: &Path,
    cache: CacheOptions,
) -> Result<Restored> {
    let (time, (sum, counters)) = Timed::measure(|| {
        let r = Repository::open_local(repo)?;
        let before = r.counters.snapshot();
        let mut reader = Reader::open(&r, cache)?;
        let sum = reader.restore(&snap.record, target, None, &Progress::default())?;
        Ok((sum, r.counters.snapshot().since(&before)))
    })?;
    ensure!(sum.errors.is_empty(), "restore errors: {:?}", sum.errors);
    Ok(Restored {
        time,
        sum,
        counters,
    })
}

pub fn run(args: &[String]) -> Result<Value> {
    let o = parse(args)?;
    let mut work = WorkDir::new(o.data.dir.as_deref(), "restore", o.data.keep)?;
    let ds = Dataset::prepare(&work.path, o.data.mib, o.data.dup_pct)?;
    let repo = work.path.join("repo");
    let mut setup = Vec::new();
    let snaps = match find_snapshots(&repo, &ds) {
        Some(s) => s,
        None => {
            crate::common::remove(&repo)?;
            for g in 1..=2 {
                let t = tags(&ds, g);
                let t: Vec<&str> = t.iter().map(String::as_str).collect();
                let (time, _) = cairn_backup(&repo, sources(&ds.gen_dir(g), Streams::One)?, &t)?;
                setup.push(time.wall.as_secs_f64());
            }
            find_snapshots(&repo, &ds).context("snapshots just written are missing")?
        }
    };
    let reused = setup.is_empty();
    if !o.data.keep && !reused {
        work.remove_later(&repo);
    }
    sync();
    warm(&[&ds.gen_dir(1), &ds.gen_dir(2), &repo])?;
    prefault(&mut work, &[&ds.gen_dir(1), &ds.gen_dir(2)])?;

    let mut copies: [Option<Timed>; 2] = [None, None];
    let mut restores: [Option<Restored>; 2] = [None, None];
    for run in 0..o.data.runs {
        for g in 0..2 {
            let src = ds.gen_dir(g + 1);
            let copy = work.scratch("copy", false)?;
            sync();
            let (t, n) = Timed::measure(|| copy_tree(&src, &copy))?;
            ensure!(
                n == ds.gen_bytes[g],
                "copied {n} bytes, expected {}",
                ds.gen_bytes[g]
            );
            if copies[g].is_none_or(|b| t.wall < b.wall) {
                copies[g] = Some(t);
            }
            crate::common::remove(&copy)?;

            let target = work.scratch("restored", false)?;
            sync();
            let r = cairn_restore(
                &repo,
                &snaps[g],
                &target,
                CacheOptions {
                    policy: o.policy,
                    bytes: o.cache << 20,
                },
            )?;
            ensure!(
                r.sum.bytes == ds.gen_bytes[g],
                "restored {} bytes, expected {}",
                r.sum.bytes,
                ds.gen_bytes[g]
            );
            if run == 0 && o.verify {
                let name = src.file_name().expect("gen dir has a name");
                let root = if target.join(name).is_dir() {
                    target.join(name)
                } else {
                    target.clone()
                };
                let files = verify(&src, &root)?;
                ensure!(
                    files == ds.gen_files[g],
                    "verified {files} files, expected {}",
                    ds.gen_files[g]
                );
            }
            if restores[g]
                .as_ref()
                .is_none_or(|b| r.time.wall < b.time.wall)
            {
                restores[g] = Some(r);
            }
            crate::common::remove(&target)?;
        }
    }
    let copies = copies.map(|c| c.expect("at least one run"));
    let restores = restores.map(|r| r.expect("at least one run"));
    Ok(report(&o, &ds, reused, &setup, &copies, &restores, &repo))
}

fn report(
    o: &Options,
    ds: &Dataset,
    reused: bool,
    setup: &[f64],
    copies: &[Timed; 2],
    restores: &[Restored; 2],
    repo: &Path,
) -> Value {
    let m = |g: usize, t: Timed| mbps(ds.gen_bytes[g], t.wall);
    let noisy = copies.iter().any(Timed::disturbed) || restores.iter().any(|r| r.time.disturbed());
    let ratio = |g: usize| m(g, restores[g].time) / m(g, copies[g]);
    let speed = |g: usize| {
        let c = restores[g].counters.containers_read;
        if c == 0 {
            0.0
        } else {
            restores[g].sum.bytes as f64 / 1e6 / c as f64
        }
    };
    let amp =
        |g: usize| restores[g].counters.bytes_read as f64 / restores[g].sum.bytes.max(1) as f64;
    const CACHE_NOTE: &str = "page cache: warm; sources and repository objects were read once \
        untimed before timing (dropping caches needs root); sync before each timed step";
    let doc = {
        let row = |g: usize| {
            let r = &restores[g];
            json!({
                "generation": g + 1,
                "bytes": ds.gen_bytes[g],
                "files": ds.gen_files[g],
                "copy_seconds": copies[g].wall.as_secs_f64(),
                "copy_mb_per_s": m(g, copies[g]),
                "copy_other_processes_cpu_seconds": copies[g].others.as_secs_f64(),
                "restore_seconds": r.time.wall.as_secs_f64(),
                "restore_cpu_seconds": r.time.cpu.as_secs_f64(),
                "restore_mb_per_s": m(g, r.time),
                "restore_other_processes_cpu_seconds": r.time.others.as_secs_f64(),
                "ratio_vs_copy": ratio(g),
                "containers_read": r.counters.containers_read,
                "index_page_reads": r.counters.index_page_reads,
                "backend_bytes_read": r.counters.bytes_read,
                "read_amplification": amp(g),
                "speed_factor_mb_per_container": speed(g),
            })
        };
        json!({
            "benchmark": "restore",
            "mib": o.data.mib,
            "dup_pct": o.data.dup_pct,
            "runs": o.data.runs,
            "restore_cache_mib": o.cache,
            "restore_policy": o.policy,
            "verified": o.verify,
            "page_cache": CACHE_NOTE,
            "repository": repo,
            "repository_reused": reused,
            "setup_backup_seconds": setup,
            "dataset": ds.manifest,
            "results": [row(0), row(1)],
            "disturbed": noisy,
        })
    };
    if o.data.json {
        println!("{doc:#}");
        return doc;
    }
    println!(
        "restore: gen1 {} in {} files, gen2 {} in {} files; repository {} ({})",
        mib(ds.gen_bytes[0]),
        ds.gen_files[0],
        mib(ds.gen_bytes[1]),
        ds.gen_files[1],
        repo.display(),
        if reused {
            "reused from `backup --keep`".to_string()
        } else {
            format!(
                "backed up now in {:.1}s + {:.1}s, untimed here",
                setup[0], setup[1]
            )
        }
    );
    println!("{CACHE_NOTE}");
    println!(
        "best of {} run(s); restore policy {} with {} MiB; restored bytes {}",
        o.data.runs,
        o.policy,
        o.cache,
        if o.verify {
            "verified against the source"
        } else {
            "not verified"
        }
    );
    println!(
        "{:<34} {:>9} {:>9} {:>9} {:>11} {:>12} {:>9} {:>8}",
        "measurement",
        "MB/s",
        "ratio",
        "seconds",
        "containers",
        "MB/container",
        "read amp",
        "others"
    );
    for g in 0..2 {
        println!(
            "{:<34} {:>9.0} {:>8.3}x {:>9.2} {:>11} {:>12} {:>9} {:>7.2}s",
            format!("baseline copy gen{}, 1 thread", g + 1),
            m(g, copies[g]),
            1.0,
            copies[g].wall.as_secs_f64(),
            "-",
            "-",
            "-",
            copies[g].others.as_secs_f64()
        );
        let r = &restores[g];
        println!(
            "{:<34} {:>9.0} {:>8.3}x {:>9.2} {:>11} {:>12.2} {:>8.2}x {:>7.2}s",
            format!("cairn restore gen{}", g + 1),
            m(g, r.time),
            ratio(g),
            r.time.wall.as_secs_f64(),
            r.counters.containers_read,
            speed(g),
            amp(g),
            r.time.others.as_secs_f64()
        );
    }
    if noisy {
        println!(
            "WARNING: other processes used CPU during timed steps (column `others`, CPU-seconds); \
             the ratios are disturbed, rerun on a quiet machine"
        );
    }
    doc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_parse() {
        let a: Vec<String> = ["--mib", "8", "--cache", "4", "--no-verify"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let o = parse(&a).unwrap();
        assert_eq!(
            (o.data.mib, o.cache, o.verify, o.data.runs),
            (8, 4, false, 3)
        );
        assert!(parse(&["--cache".to_string(), "0".to_string()]).is_err());
    }

    #[test]
    fn small_restore_runs() {
        let dir = std::env::temp_dir().join(format!("cairn-bench-rs-{}", std::process::id()));
        let a: Vec<String> = [
            "--mib",
            "4",
            "--runs",
            "1",
            "--json",
            "--dir",
            dir.to_str().unwrap(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        run(&a).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
