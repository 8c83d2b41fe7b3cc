//! `sim`: simulator throughput on the DDFS workload (`cairn sim --workload
//! ddfs`), so a slowdown of the trace-driven path cannot slip by unseen.
//!
//! * **Baseline**: generating the same workload's chunk events alone (the
//!   input the simulator consumes), in the same run.
//! * **Measured**: the whole simulation (dedup path, packing, recipes,
//!   commits, device model) over those events.
//! * **Reports**: chunks, wall and CPU seconds of both, chunks per wall and
//!   per CPU second, and the ratio simulation / generation. Issue 9's target
//!   is >= 1 M chunks per second on one core for the default run
//!   (10 generations of 16 GiB, 4 streams: about 21 M chunks).

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use serde_json::json;

use cairn_core::TraceEvent;
use cairn_sim::sim::{self, GenerationInput, SimOptions};
use cairn_sim::workload;

use crate::common::value;
use crate::sys::cpu_time;

struct Timed {
    wall: Duration,
    cpu: Duration,
}

fn timed<T>(f: impl FnOnce() -> Result<T>) -> Result<(T, Timed)> {
    let (w, c) = (Instant::now(), cpu_time());
    let out = f()?;
    Ok((
        out,
        Timed {
            wall: w.elapsed(),
            cpu: cpu_time().saturating_sub(c),
        },
    ))
}

pub fn run(args: &[String]) -> Result<serde_json::Value> {
    let mut generations = 10u64;
    let mut bytes = "16GiB".to_string();
    let mut streams = 4u64;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--generations" => generations = value(&mut it, a)?,
            "--generation-bytes" => bytes = value(&mut it, a)?,
            "--streams" => streams = value(&mut it, a)?,
            other => anyhow::bail!("sim: unknown option {other}"),
        }
    }
    let params = vec![
        ("generations".to_string(), generations.to_string()),
        ("generation_bytes".to_string(), bytes.clone()),
        ("streams".to_string(), streams.to_string()),
    ];
    let w: Arc<dyn workload::Workload> = Arc::from(workload::from_name("ddfs", &params)?);

    let (chunks, gen) = timed(|| {
        let mut n = 0u64;
        for g in 0..w.generations() {
            let mut src = w.generation(g);
            while let Some(ev) = src.next_event()? {
                if let TraceEvent::Chunk(_) = ev {
                    n += 1;
                }
            }
        }
        Ok(n)
    })?;
    let inputs: Vec<GenerationInput> = (0..w.generations())
        .map(|g| GenerationInput::Workload {
            workload: w.clone(),
            generation: g,
        })
        .collect();
    let (report, simulated) = timed(|| {
        Ok(sim::run(
            &inputs,
            &SimOptions::backups_only(cairn_engine::Repository::default_config()),
        )?)
    })?;
    anyhow::ensure!(
        report.totals.chunks == chunks,
        "the simulation saw {} chunks, the workload has {chunks}",
        report.totals.chunks
    );
    let per = |t: Duration| chunks as f64 / t.as_secs_f64().max(1e-9);
    println!(
        "cairn sim --workload ddfs, {generations} generations of {bytes}, {streams} streams: {chunks} chunks"
    );
    println!(
        "{:>12} {:>10} {:>10} {:>16} {:>16}",
        "", "wall s", "cpu s", "chunks/wall s", "chunks/cpu s"
    );
    for (name, t) in [("generation", &gen), ("simulation", &simulated)] {
        println!(
            "{name:>12} {:>10.2} {:>10.2} {:>16.0} {:>16.0}",
            t.wall.as_secs_f64(),
            t.cpu.as_secs_f64(),
            per(t.wall),
            per(t.cpu)
        );
    }
    let ratio = simulated.cpu.as_secs_f64() / gen.cpu.as_secs_f64().max(1e-9);
    println!("simulation / generation CPU time: {ratio:.2}x; target >= 1,000,000 chunks per second on one core");
    Ok(json!({
        "benchmark": "sim",
        "generations": generations,
        "generation_bytes": bytes,
        "streams": streams,
        "chunks": chunks,
        "generation": {"wall_seconds": gen.wall.as_secs_f64(), "cpu_seconds": gen.cpu.as_secs_f64()},
        "simulation": {"wall_seconds": simulated.wall.as_secs_f64(), "cpu_seconds": simulated.cpu.as_secs_f64()},
        "chunks_per_wall_second": per(simulated.wall),
        "chunks_per_cpu_second": per(simulated.cpu),
        "cpu_ratio_to_generation": ratio,
    }))
}
