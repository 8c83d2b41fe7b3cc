//! `cairn-bench encryption`: what encryption costs (issue 13: at most 10% on
//! a duplicate generation, 20% on a unique one).
//!
//! On the two-generation dataset of [`crate::dataset`] (`--mib`, default
//! 512, and `--dup-pct`, default 90), each run creates a clear and an
//! encrypted repository (AES-256-GCM, `docs/security.md`), in alternating
//! order, and times in each: the backup of gen1 (unique), the backup of
//! gen2 (mostly duplicate) and the restore of gen2. Best of `--runs`
//! (default 3) per step; the ratio is encrypted time / clear time (1.10 is
//! 10% slower), in wall and in CPU seconds. The repositories use the
//! default configuration; the key file uses tiny Argon2 parameters, since
//! unlocking is not what is measured. As in `backup`, an untimed pass reads
//! every file first (the page cache is warm for both), and `sync` runs
//! before every timed step.

use std::path::Path;
use std::sync::Arc;

use anyhow::{ensure, Context, Result};
use cairn_backend::LocalBackend;
use cairn_crypto::{Algorithm, KdfParams, KeyLabel, Password};
use cairn_engine::read::{CacheOptions, Reader};
use cairn_engine::{catalog, BackupOptions, Progress, Repository};
use serde_json::{json, Value};
use zeroize::Zeroizing;

use crate::backup::{chunk_hash_pass, sources, tags, Streams, Timed};
use crate::common::{mbps, prefault, sync, DatasetOptions, WorkDir};
use crate::dataset::Dataset;

/// Targets of the issue: encrypted / clear time.
const TARGET_DUP: f64 = 1.10;
const TARGET_UNIQUE: f64 = 1.20;

type Options = DatasetOptions;

fn parse(args: &[String]) -> Result<Options> {
    DatasetOptions::parse("encryption", args, 512)
}

fn password() -> Password {
    Password::new(Zeroizing::new("cairn-bench".into()), "cairn-bench").expect("non-empty")
}

/// Steps timed in each repository.
const STEPS: [&str; 3] = ["backup gen1 (unique)", "backup gen2 (dup)", "restore gen2"];

fn open(path: &Path, encrypted: bool) -> cairn_core::Result<Repository> {
    if encrypted {
        Repository::open_local_with_password(path, &mut || Ok(password()))
    } else {
        Repository::open_local(path)
    }
}

fn create(path: &Path, encrypted: bool) -> Result<()> {
    if encrypted {
        Repository::init_encrypted(
            Arc::new(LocalBackend::create(path)?),
            Repository::default_config(),
            Algorithm::Aes256Gcm,
            &password(),
            KdfParams::for_tests(),
            KeyLabel {
                host: "cairn-bench".into(),
                user: "cairn-bench".into(),
            },
        )?;
    } else {
        Repository::init_local(path, Repository::default_config())?;
    }
    Ok(())
}

/// The three steps in a fresh repository at `repo`; their times.
fn one_repository(ds: &Dataset, repo: &Path, target: &Path, encrypted: bool) -> Result<[Timed; 3]> {
    create(repo, encrypted)?;
    let mut times = Vec::new();
    let mut last = String::new();
    for g in 1..=2 {
        sync();
        let t = tags(ds, g);
        let (time, outcome) = Timed::measure(|| {
            let r = open(repo, encrypted)?;
            let lock = r.lock_writer(false)?;
            Ok(cairn_engine::backup(
                &r,
                &lock,
                BackupOptions {
                    sources: sources(&ds.gen_dir(g), Streams::One)?,
                    tags: t.to_vec(),
                    host: Some("cairn-bench".into()),
                    ..Default::default()
                },
            )?)
        })?;
        ensure!(
            outcome.skipped.is_empty(),
            "backup skipped {:?}",
            outcome.skipped
        );
        last = outcome.snapshot_id;
        times.push(time);
    }
    sync();
    let (time, sum) = Timed::measure(|| {
        let r = open(repo, encrypted)?;
        let snap = catalog::resolve(&**r.backend(), &last)?;
        let mut reader = Reader::open(&r, CacheOptions::default())?;
        Ok(reader.restore(&snap.record, target, None, &Progress::default())?)
    })?;
    ensure!(sum.errors.is_empty(), "restore errors: {:?}", sum.errors);
    times.push(time);
    std::fs::remove_dir_all(target).with_context(|| format!("removing {}", target.display()))?;
    Ok([times[0], times[1], times[2]])
}

pub fn run(args: &[String]) -> Result<Value> {
    let o = parse(args)?;
    let mut work = WorkDir::new(o.dir.as_deref(), "encryption", o.keep)?;
    let ds = Dataset::prepare(&work.path, o.mib, o.dup_pct)?;
    for g in 1..=2 {
        chunk_hash_pass(&ds.gen_dir(g), &mut |_, _| {})?;
    }
    prefault(&mut work, &[&ds.gen_dir(1)])?;
    // best[encrypted][step]
    let mut best: [[Option<Timed>; 3]; 2] = Default::default();
    for run in 0..o.runs {
        let order = if run % 2 == 0 {
            [false, true]
        } else {
            [true, false]
        };
        for encrypted in order {
            let repo = work.scratch(if encrypted { "repo-enc" } else { "repo-clear" }, false)?;
            let target = work.path.join("restored");
            let times = one_repository(&ds, &repo, &target, encrypted)?;
            for (b, t) in best[encrypted as usize].iter_mut().zip(times) {
                *b = Some(t.better(*b));
            }
            std::fs::remove_dir_all(&repo)
                .with_context(|| format!("removing {}", repo.display()))?;
        }
    }
    let best = best.map(|row| row.map(|t| t.expect("at least one run")));
    let bytes = [ds.gen_bytes[0], ds.gen_bytes[1], ds.gen_bytes[1]];
    let wall = |i: usize| best[1][i].wall.as_secs_f64() / best[0][i].wall.as_secs_f64().max(1e-9);
    let cpu = |i: usize| best[1][i].cpu.as_secs_f64() / best[0][i].cpu.as_secs_f64().max(1e-9);
    let targets = [TARGET_UNIQUE, TARGET_DUP, TARGET_UNIQUE];
    let noisy = best.iter().flatten().any(Timed::disturbed);
    let rows: Vec<Value> = (0..3)
        .map(|i| {
            json!({
                "step": STEPS[i],
                "bytes": bytes[i],
                "clear_seconds": best[0][i].wall.as_secs_f64(),
                "encrypted_seconds": best[1][i].wall.as_secs_f64(),
                "clear_cpu_seconds": best[0][i].cpu.as_secs_f64(),
                "encrypted_cpu_seconds": best[1][i].cpu.as_secs_f64(),
                "clear_mb_per_s": mbps(bytes[i], best[0][i].wall),
                "encrypted_mb_per_s": mbps(bytes[i], best[1][i].wall),
                "wall_ratio": wall(i),
                "cpu_ratio": cpu(i),
                "target_ratio": targets[i],
            })
        })
        .collect();
    let doc = json!({
        "benchmark": "encryption",
        "mib": o.mib,
        "dup_pct": o.dup_pct,
        "runs": o.runs,
        "algorithm": "aes-256-gcm",
        "steps": rows,
        "disturbed": noisy,
    });
    if o.json {
        println!("{doc:#}");
        return Ok(doc);
    }
    println!(
        "encryption: AES-256-GCM vs clear, gen1 {} MiB unique, gen2 {}% duplicate; best of {} run(s), \
         repositories alternated",
        o.mib, o.dup_pct, o.runs
    );
    println!(
        "{:<22} {:>10} {:>10} {:>10} {:>10} {:>8}",
        "step", "clear MB/s", "enc MB/s", "wall x", "CPU x", "target"
    );
    for i in 0..3 {
        println!(
            "{:<22} {:>10.0} {:>10.0} {:>9.3}x {:>9.3}x {:>7.2}x {}",
            STEPS[i],
            mbps(bytes[i], best[0][i].wall),
            mbps(bytes[i], best[1][i].wall),
            wall(i),
            cpu(i),
            targets[i],
            if wall(i) <= targets[i] || cpu(i) <= targets[i] {
                "ok"
            } else {
                "OVER"
            }
        );
    }
    if noisy {
        println!("WARNING: other processes used CPU during timed steps; rerun on a quiet machine");
    }
    Ok(doc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::args;

    #[test]
    fn options_parse() {
        let o = parse(&args(&["--mib", "8", "--runs", "2"])).unwrap();
        assert_eq!((o.mib, o.runs, o.dup_pct), (8, 2, 90));
        assert!(parse(&args(&["--bogus"])).is_err());
    }

    #[test]
    fn small_run() {
        let dir = std::env::temp_dir().join(format!("cairn-bench-enc-{}", std::process::id()));
        run(&args(&[
            "--mib",
            "4",
            "--runs",
            "1",
            "--dir",
            dir.to_str().unwrap(),
            "--json",
        ]))
        .unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
