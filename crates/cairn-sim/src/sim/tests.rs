//! Properties of the simulator: exact dedup stores exactly the distinct
//! fingerprints of a trace, whatever the files, duplicates and ablations.

use std::collections::HashSet;
use std::path::PathBuf;

use cairn_core::{Fingerprint, TraceChunk, TraceEvent, TraceMeta};
use proptest::prelude::*;

use super::*;
use crate::device::DeviceClass;
use crate::trace::CairnTraceWriter;

fn fp(i: u16) -> Fingerprint {
    let mut b = [0u8; 20];
    b[..8].copy_from_slice(&cairn_core::mix64(i as u64 + 1).to_le_bytes());
    b[8..16].copy_from_slice(&cairn_core::mix64(i as u64 + 7).to_le_bytes());
    Fingerprint::from_slice(&b)
}

fn write_trace(dir: &std::path::Path, name: &str, files: &[Vec<u16>]) -> PathBuf {
    let path = dir.join(name);
    let mut w = CairnTraceWriter::new(std::fs::File::create(&path).unwrap(), 20).unwrap();
    let meta = TraceMeta {
        mode: 0o040755,
        ..Default::default()
    };
    w.write_event(&TraceEvent::DirStart {
        name: b"root".to_vec(),
        meta,
    })
    .unwrap();
    for (i, chunks) in files.iter().enumerate() {
        let meta = TraceMeta {
            mode: 0o100644,
            ..Default::default()
        };
        w.write_event(&TraceEvent::FileStart {
            name: format!("f{i:04}").into_bytes(),
            meta,
        })
        .unwrap();
        for &c in chunks {
            let size = 1000 + (c as u32 % 7) * 500;
            w.write_event(&TraceEvent::Chunk(TraceChunk {
                fp: fp(c),
                size,
                stored_size: size / 2 + 1,
            }))
            .unwrap();
        }
        w.write_event(&TraceEvent::FileEnd).unwrap();
    }
    w.write_event(&TraceEvent::DirEnd).unwrap();
    w.finish().unwrap();
    path
}

/// One trace file per generation in `dir`.
fn trace_inputs(dir: &std::path::Path, gens: &[Vec<Vec<u16>>]) -> Vec<GenerationInput> {
    gens.iter()
        .enumerate()
        .map(|(g, files)| GenerationInput::Trace {
            path: write_trace(dir, &format!("g{g}.ctr"), files),
            format: None,
        })
        .collect()
}

/// Small containers and a two-container locality cache, so that a few
/// hundred chunks span many containers and evict.
fn small_config(summary: bool, cache: bool) -> cairn_engine::RepoConfig {
    let mut config = cairn_engine::Repository::default_config();
    config.container_size = 64 * 1024;
    config.index.summary_vector = summary;
    config.index.locality_cache = cache;
    config.index.cache_containers = 2;
    config
}

/// Re-layout of any container the generation uses in part.
fn relayout_options() -> cairn_engine::gc::relayout::RelayoutOptions {
    cairn_engine::gc::relayout::RelayoutOptions {
        share_of_heads: 10.0,
        ..Default::default()
    }
}

/// The guards' configuration: small pages, and Capping when asked.
fn guard_config(summary: bool, cache: bool, capping: bool) -> cairn_engine::RepoConfig {
    let mut config = small_config(summary, cache);
    config.index.page_size = 512;
    if capping {
        config.rewrite =
            cairn_engine::config::RewriteConfig::parse("capping:segment=64KiB,cap=2").unwrap();
    }
    config
}

/// A report's rows and totals (wall seconds zeroed) and its counters, as
/// JSON for [`agree`].
fn rows_and_counters(report: &SimReport) -> (serde_json::Value, serde_json::Value) {
    let mut rows: Vec<GenerationRow> = report.generations.clone();
    rows.push(report.totals.clone());
    for r in &mut rows {
        r.wall_seconds = 0.0;
    }
    (
        serde_json::to_value(&rows).unwrap(),
        serde_json::to_value(report.counters).unwrap(),
    )
}

/// Backups, each followed by a simulated restore through a default-policy
/// cache of `cache_bytes`, on `device`.
fn with_restores(
    config: cairn_engine::RepoConfig,
    device: DeviceClass,
    cache_bytes: u64,
    relayout: Option<cairn_engine::gc::relayout::RelayoutOptions>,
) -> SimOptions {
    SimOptions {
        config,
        device: DeviceModel::for_device(device),
        restore: true,
        restore_cache: cairn_engine::read::CacheOptions {
            policy: Default::default(),
            bytes: cache_bytes,
        },
        also_restore: Vec::new(),
        relayout,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    /// With or without re-layout between generations.
    #[test]
    fn exact_dedup_stores_each_distinct_fingerprint_once(
        gens in proptest::collection::vec(
            proptest::collection::vec(proptest::collection::vec(0u16..400, 0..80), 1..6), 1..4),
        summary in any::<bool>(),
        cache in any::<bool>(),
        relayout in any::<bool>(),
    ) {
        let tmp = tempfile::tempdir().unwrap();
        let inputs = trace_inputs(tmp.path(), &gens);
        let config = small_config(summary, cache);
        // Re-layout moves chunks between generations: later lookups must
        // find them where they went, or chunks are stored twice.
        let opts = with_restores(config, DeviceClass::ssd(), 256 << 10, relayout.then(relayout_options));
        let report = run(&inputs, &opts).unwrap();
        let mut seen = HashSet::new();
        for (files, row) in gens.iter().zip(&report.generations) {
            let chunks: Vec<u16> = files.iter().flatten().copied().collect();
            let new = chunks.iter().filter(|c| seen.insert(**c)).count() as u64;
            prop_assert_eq!(row.chunks, chunks.len() as u64);
            prop_assert_eq!(row.unique_chunks, new);
        }
        prop_assert_eq!(report.totals.unique_chunks, seen.len() as u64);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(10))]

    /// Issue 35's exactness guard: the compact state (container metadata
    /// sections in the scratch directory, the streamed index merge, the
    /// narrow in-memory index slots) makes every decision the exact state
    /// makes: every row (dedup, index page reads, prefetches, containers
    /// written and read, speed factors, modeled seconds) and every counter
    /// agree with the run that keeps the metadata whole in memory.
    #[test]
    fn the_compact_state_decides_as_the_exact_state(
        gens in proptest::collection::vec(
            proptest::collection::vec(proptest::collection::vec(0u16..600, 0..120), 1..6), 1..5),
        summary in any::<bool>(),
        cache in any::<bool>(),
        relayout in any::<bool>(),
        capping in any::<bool>(),
    ) {
        let tmp = tempfile::tempdir().unwrap();
        let inputs = trace_inputs(tmp.path(), &gens);
        let config = guard_config(summary, cache, capping);
        // A fresh device model per run: a model's clones share its totals.
        let opts = || with_restores(config.clone(), DeviceClass::hdd(), 96 << 10, relayout.then(relayout_options));
        let rows = |metadata| rows_and_counters(&run_with(&inputs, &opts(), metadata).unwrap());
        let (exact, compact) = (rows(ContainerMetadata::InMemory), rows(ContainerMetadata::Scratch));
        agree(&exact.0, &compact.0, "rows")?;
        agree(&exact.1, &compact.1, "counters")?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(10))]

    /// Issue 35's parallel replay: a generation's restores running beside
    /// the next generation's backup report what they report run in turn:
    /// every row (containers read, speed factors, the other policies'
    /// restores, modeled seconds), every counter and the device usage,
    /// with the index or the map placing chunks, with re-layout and with
    /// Capping (whose copies move chunks' canonical containers at the next
    /// commit), also when every restore starts only after the next backup
    /// committed.
    #[test]
    fn restores_beside_the_next_backup_report_what_they_report_in_turn(
        gens in proptest::collection::vec(
            proptest::collection::vec(proptest::collection::vec(0u16..600, 0..120), 1..6), 2..5),
        in_memory in any::<bool>(),
        relayout in any::<bool>(),
        capping in any::<bool>(),
    ) {
        let tmp = tempfile::tempdir().unwrap();
        let inputs = trace_inputs(tmp.path(), &gens);
        let config = guard_config(true, true, capping);
        let metadata = if in_memory { ContainerMetadata::InMemory } else { ContainerMetadata::Scratch };
        let opts = || {
            let mut o = with_restores(config.clone(), DeviceClass::hdd(), 96 << 10, relayout.then(relayout_options));
            o.also_restore = vec![cairn_engine::read::CacheOptions {
                policy: cairn_engine::read::PolicyKind::Faa,
                bytes: 256 << 10,
            }];
            o
        };
        let rows = |overlap| {
            let report = run_overlapped(&inputs, &opts(), metadata, overlap).unwrap();
            let (rows, counters) = rows_and_counters(&report);
            (rows, counters, report.usage)
        };
        let in_turn = rows(Overlap::InTurn);
        for overlap in [Overlap::Beside, Overlap::AfterNextBackup] {
            let beside = rows(overlap);
            agree(&in_turn.0, &beside.0, "rows")?;
            agree(&in_turn.1, &beside.1, "counters")?;
            // Every access; every byte but a snapshot record's, whose
            // phase times vary (as `agree` allows).
            prop_assert_eq!(in_turn.2.accesses, beside.2.accesses);
            for stage in [Stage::IndexPageRead, Stage::MetadataPrefetch, Stage::ContainerRead, Stage::ContainerWrite] {
                prop_assert_eq!(in_turn.2.bytes(stage), beside.2.bytes(stage));
            }
        }
        prop_assert!(in_turn.2.accesses(Stage::ContainerRead) > 0);
    }
}

/// Runs agree: every count exactly; what a snapshot record's size moves
/// within 1% (the record holds its backup's phase times, so its
/// compressed size differs by a few bytes between runs): the bytes
/// written and read, the "other" stages and the modeled totals.
fn agree(a: &serde_json::Value, b: &serde_json::Value, at: &str) -> Result<(), TestCaseError> {
    use serde_json::Value;
    const NEAR: [&str; 6] = [
        "bytes_written",
        "bytes_read",
        "other_read_seconds",
        "other_write_seconds",
        "total_seconds",
        "modeled_seconds",
    ];
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            prop_assert_eq!(x.keys().collect::<Vec<_>>(), y.keys().collect::<Vec<_>>());
            for (k, v) in x {
                let here = format!("{at}.{k}");
                if NEAR.contains(&k.as_str()) {
                    let (p, q) = (v.as_f64().unwrap(), y[k].as_f64().unwrap());
                    prop_assert!(
                        (p - q).abs() <= 0.01 * p.abs().max(q.abs()),
                        "{} {} {}",
                        here,
                        p,
                        q
                    );
                } else {
                    agree(v, &y[k], &here)?;
                }
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            prop_assert_eq!(x.len(), y.len());
            for (i, (v, w)) in x.iter().zip(y).enumerate() {
                agree(v, w, &format!("{at}[{i}]"))?;
            }
        }
        _ => prop_assert_eq!(a, b, "{}", at),
    }
    Ok(())
}

/// A first generation without chunks does not fix the fingerprint width:
/// the next generation's 20-byte fingerprints still fit the repository
/// (this once panicked in the container writer and hung the backup).
#[test]
fn first_generation_without_chunks_does_not_fix_the_width() {
    let tmp = tempfile::tempdir().unwrap();
    let inputs: Vec<GenerationInput> = [vec![vec![]], vec![vec![1u16, 2, 3, 1]]]
        .iter()
        .enumerate()
        .map(|(g, files)| GenerationInput::Trace {
            path: write_trace(tmp.path(), &format!("g{g}.ctr"), files),
            format: None,
        })
        .collect();
    let report = run(
        &inputs,
        &SimOptions::backups_only(cairn_engine::Repository::default_config()),
    )
    .unwrap();
    assert_eq!(report.totals.unique_chunks, 3);
}

/// Generations whose fingerprints have different widths are refused with
/// one clear error, not a panic.
#[test]
fn generations_of_different_widths_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let narrow = write_trace(tmp.path(), "g0.ctr", &[vec![1, 2]]);
    let wide = tmp.path().join("g1.ctr");
    {
        let mut w = CairnTraceWriter::new(std::fs::File::create(&wide).unwrap(), 32).unwrap();
        let meta = TraceMeta {
            mode: 0o100644,
            ..Default::default()
        };
        w.write_event(&TraceEvent::FileStart {
            name: b"f".to_vec(),
            meta,
        })
        .unwrap();
        w.write_event(&TraceEvent::Chunk(TraceChunk {
            fp: Fingerprint::from_slice(&[7u8; 32]),
            size: 100,
            stored_size: 50,
        }))
        .unwrap();
        w.write_event(&TraceEvent::FileEnd).unwrap();
        w.finish().unwrap();
    }
    let inputs = [narrow, wide].map(|path| GenerationInput::Trace { path, format: None });
    let err = run(
        &inputs,
        &SimOptions::backups_only(cairn_engine::Repository::default_config()),
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("32 bytes") && err.contains("20 bytes"),
        "{err}"
    );
}

/// Re-layout between generations (issue 34, `SimOptions::relayout`): the
/// DDFS workload's newest generation restores faster than without it, and
/// every generation deduplicates exactly as without it.
/// Every generation of the DDFS workload with `generations` of 8 MiB.
fn ddfs_inputs(generations: &str) -> Vec<GenerationInput> {
    let w: std::sync::Arc<dyn crate::workload::Workload> = std::sync::Arc::from(
        crate::workload::from_name(
            "ddfs",
            &crate::experiment::params(&[
                ("generations", generations),
                ("generation_bytes", "8MiB"),
            ]),
        )
        .unwrap(),
    );
    (0..w.generations())
        .map(|generation| GenerationInput::Workload {
            workload: w.clone(),
            generation,
        })
        .collect()
}

#[test]
fn relayout_between_generations_speeds_up_restores_and_keeps_dedup() {
    let inputs = ddfs_inputs("6");
    let run_with = |relayout| {
        let mut config = cairn_engine::Repository::default_config();
        config.container_size = 256 << 10;
        // Without rewriting: a rewrite scheme decides by the layout, which
        // re-layout changes (its stored bytes differ, never its new chunks).
        config.rewrite = cairn_engine::config::RewriteConfig::None;
        run(
            &inputs,
            &SimOptions {
                config,
                device: DeviceModel::for_device(DeviceClass::hdd()),
                restore: true,
                restore_cache: cairn_engine::read::CacheOptions {
                    policy: cairn_engine::read::PolicyKind::Faa,
                    bytes: 1 << 20,
                },
                also_restore: Vec::new(),
                relayout,
            },
        )
        .unwrap()
    };
    let aged = run_with(None);
    let relaid = run_with(Some(Default::default()));
    for (a, r) in aged.generations.iter().zip(&relaid.generations) {
        assert_eq!(a.unique_chunks, r.unique_chunks, "generation {}", a.id);
        assert_eq!(a.stored_bytes, r.stored_bytes, "generation {}", a.id);
    }
    let speeds =
        |rep: &SimReport| -> Vec<f64> { rep.generations.iter().map(|g| g.speed_factor).collect() };
    let (a, r) = (speeds(&aged), speeds(&relaid));
    eprintln!("aged {a:?}\nrelaid {r:?}");
    // Never slower by more than a container read's rounding, and faster
    // at the end.
    for (x, y) in a.iter().zip(&r) {
        assert!(*y >= x * 0.97, "{a:?} vs {r:?}");
    }
    assert!(
        r.last().unwrap() > &(a.last().unwrap() * 1.05),
        "{a:?} vs {r:?}"
    );
    assert!(relaid.totals.relayout_chunks > 0);
}

#[test]
fn the_memory_report_names_the_repository_structures() {
    let inputs = ddfs_inputs("3");
    let mut config = cairn_engine::Repository::default_config();
    config.container_size = 256 << 10;
    let report = run(&inputs, &SimOptions::backups_only(config)).unwrap();
    let m = &report.memory;
    assert_eq!(m.unique_chunks, report.totals.unique_chunks);
    let bytes = |name: &str| {
        m.structures
            .iter()
            .find(|s| s.name == name)
            .map_or(0, |s| s.bytes)
    };
    // The containers' metadata sections are in the scratch directory: one
    // record per container in RAM, far below a descriptor (about 50
    // bytes) per stored chunk.
    let containers = report.totals.containers_written;
    assert!(bytes("container metadata") > 0, "{m:?}");
    assert!(bytes("container metadata") <= 200 * containers, "{m:?}");
    // The index, checkpoints, snapshots and those sections are on disk,
    // not in RAM: at least one descriptor per stored chunk.
    assert!(m.scratch_disk_bytes > 40 * m.unique_chunks, "{m:?}");
    assert!(!m.structures.iter().any(|s| s.name.contains("objects")));
    // A real restore's chunk bytes are a row's figure, not the process's.
    assert!(!m.structures.iter().any(|s| s.name.contains("restore")));
    assert!(m.process_peak_bytes > 0);
    assert_eq!(m.structures.last().unwrap().name, "unattributed");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(10))]

    /// A bounded in-memory index part (`dedup::part_budget`) decides as
    /// the unbounded one: the chunks it moves into the index mid-backup are
    /// found there (Summary Vector, then a page) and confirmed as before,
    /// so dedup, cache hits, prefetches, containers and the restores agree;
    /// only the index's reads and writes may rise.
    #[test]
    fn a_bounded_in_memory_part_decides_as_the_unbounded_one(
        gens in proptest::collection::vec(
            proptest::collection::vec(proptest::collection::vec(0u16..600, 0..120), 1..6), 1..5),
        summary in any::<bool>(),
        cache in any::<bool>(),
        capping in any::<bool>(),
        budget in 1u64..80,
    ) {
        let tmp = tempfile::tempdir().unwrap();
        let inputs = trace_inputs(tmp.path(), &gens);
        let mut config = guard_config(summary, cache, capping);
        // A small Summary Vector, rebuilt larger at some merges: the chunks
        // the part keeps must join the new one.
        config.index.expected_chunks = 64;
        let run_with_budget = |budget: Option<u64>| {
            let mut config = config.clone();
            config.index.part_budget = budget;
            run(&inputs, &with_restores(config, DeviceClass::hdd(), 96 << 10, None)).unwrap()
        };
        let (free, bounded) = (run_with_budget(None), run_with_budget(Some(budget)));
        let decided = |r: &GenerationRow| (
            r.chunks, r.unique_chunks, r.rewritten_chunks, r.stored_bytes, r.bloom_negatives,
            r.cache_hits, r.prefetches, r.containers_written, r.containers_read,
            r.restore_bytes_read, r.speed_factor.to_bits(),
        );
        for (a, b) in free.generations.iter().zip(&bounded.generations) {
            prop_assert_eq!(decided(a), decided(b));
            prop_assert!(b.index_page_reads >= a.index_page_reads);
        }
    }
}

/// The budget takes effect: a first backup of more new chunks than the
/// budget writes index generations before its commit, and a later backup
/// finds every chunk of it.
#[test]
fn a_bounded_in_memory_part_merges_during_the_backup() {
    let tmp = tempfile::tempdir().unwrap();
    let files: Vec<Vec<u16>> = (0..8).map(|f| (f * 100..f * 100 + 100).collect()).collect();
    let inputs = trace_inputs(tmp.path(), &[files.clone(), files]);
    let mut config = small_config(true, true);
    config.index.page_size = 512;
    let with = |budget| {
        let mut config = config.clone();
        config.index.part_budget = budget;
        run(&inputs, &SimOptions::backups_only(config)).unwrap()
    };
    let (free, bounded) = (with(None), with(Some(50)));
    let bytes = |r: &SimReport| r.counters.bytes_written;
    assert!(
        bytes(&bounded) > bytes(&free),
        "no index generation was written mid-backup"
    );
    assert_eq!(bounded.generations[0].unique_chunks, 800);
    assert_eq!(bounded.generations[1].unique_chunks, 0);
    assert_eq!(
        bounded.generations[1].cache_hits,
        free.generations[1].cache_hits
    );
}
