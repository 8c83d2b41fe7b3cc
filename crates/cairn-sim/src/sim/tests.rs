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

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    #[test]
    fn exact_dedup_stores_each_distinct_fingerprint_once(
        gens in proptest::collection::vec(
            proptest::collection::vec(proptest::collection::vec(0u16..400, 0..80), 1..6), 1..4),
        summary in any::<bool>(),
        cache in any::<bool>(),
    ) {
        let tmp = tempfile::tempdir().unwrap();
        let inputs: Vec<GenerationInput> = gens.iter().enumerate().map(|(g, files)| GenerationInput::Trace {
            path: write_trace(tmp.path(), &format!("g{g}.ctr"), files),
            format: None,
        }).collect();
        let mut config = cairn_engine::Repository::default_config();
        config.container_size = 64 * 1024;
        config.index.summary_vector = summary;
        config.index.locality_cache = cache;
        config.index.cache_containers = 2;
        let report = run(&inputs, &SimOptions {
            config,
            device: DeviceModel::for_device(DeviceClass::ssd()),
            restore: true,
            restore_cache_containers: 4,
        }).unwrap();
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
