//! Real-vs-trace agreement: a trace recorded from the files a backup reads,
//! replayed into a repository whose containers are metadata only, yields
//! exactly the chunk, unique-chunk, lookup, index-read, prefetch and
//! container counts of the real backup, generation after generation.

use std::path::Path;
use std::sync::Arc;

use cairn_backend::MemBackend;
use cairn_core::{Backend, Counters, CountersSnapshot, Result, TraceEvent, TraceSource};
use cairn_engine::backup::trace_recorder::record_trace;
use cairn_engine::meta_store::MetaOnlyStore;
use cairn_engine::{BackupOptions, Progress, RepoConfig, Repository, Source};

struct VecTrace(std::vec::IntoIter<TraceEvent>);

impl TraceSource for VecTrace {
    fn next_event(&mut self) -> Result<Option<TraceEvent>> {
        Ok(self.0.next())
    }
    fn describe(&self) -> String {
        "recorded".into()
    }
}

fn write_files(root: &Path, seed: u64, n: usize) {
    std::fs::create_dir_all(root.join("d")).unwrap();
    let mut s = seed | 1;
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    for i in 0..n {
        let len = 10_000 + (next() % 150_000) as usize;
        // Half random, half text-like so compression matters.
        let data: Vec<u8> = (0..len)
            .map(|j| {
                if j % 2 == 0 {
                    next() as u8
                } else {
                    b'a' + (j % 7) as u8
                }
            })
            .collect();
        let dir = if i % 3 == 0 {
            root.join("d")
        } else {
            root.to_path_buf()
        };
        std::fs::write(dir.join(format!("f{i}")), &data).unwrap();
        if i % 4 == 0 {
            // A duplicate file: dedup within a generation.
            std::fs::write(dir.join(format!("copy{i}")), &data).unwrap();
        }
    }
}

fn config() -> RepoConfig {
    let mut cfg = Repository::default_config();
    cfg.container_size = 128 * 1024;
    cfg.chunker = cairn_core::ChunkerConfig::FastCdc {
        min: 1024,
        avg: 4096,
        max: 16384,
    };
    cfg.index.expected_chunks = 4096;
    cfg.index.cache_containers = 4;
    cfg
}

fn run(repo: &Repository, source: Source) -> (CountersSnapshot, u64, u64) {
    let lock = repo.lock_writer(false).unwrap();
    let out = cairn_engine::backup(
        repo,
        &lock,
        BackupOptions {
            sources: vec![source],
            host: Some("h".into()),
            ..Default::default()
        },
    )
    .unwrap();
    (
        out.counters,
        out.record.stats.chunks,
        out.record.stats.new_chunks,
    )
}

#[test]
fn replaying_a_recorded_trace_reproduces_the_real_counters() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let cfg = config();
    let real = Repository::init(Arc::new(MemBackend::new()), cfg.clone()).unwrap();
    let counters = Arc::new(Counters::default());
    let sim_backend: Arc<dyn Backend> = Arc::new(MemBackend::new());
    let sim = Repository::init_with_store(
        sim_backend,
        cfg.clone(),
        counters.clone(),
        Arc::new(MetaOnlyStore::new(counters)),
    )
    .unwrap();

    for (generation, seed) in [(0, 11u64), (1, 12), (2, 12)] {
        if generation == 1 {
            // Rewrite a third of the files; the rest stay.
            write_files(&data, seed, 4);
        } else if generation == 0 {
            write_files(&data, seed, 12);
        }
        let mut events = Vec::new();
        record_trace(&data, &cfg, Arc::new(Progress::default()), &mut |e| {
            events.push(e);
            Ok(())
        })
        .unwrap();
        let (rc, r_chunks, r_new) = run(&real, Source::Path(data.clone()));
        let (sc, s_chunks, s_new) = run(
            &sim,
            Source::Trace {
                name: "data".into(),
                source: parking_lot::Mutex::new(Box::new(VecTrace(events.into_iter()))),
                flat: false,
            },
        );
        let g = generation;
        assert_eq!(r_chunks, s_chunks, "gen {g}: chunks");
        assert_eq!(r_new, s_new, "gen {g}: unique chunks");
        assert!(r_new > 0 || g == 2);
        assert_eq!(rc.lookups, sc.lookups, "gen {g}: lookups");
        assert_eq!(
            rc.bloom_negatives, sc.bloom_negatives,
            "gen {g}: bloom negatives"
        );
        assert_eq!(rc.cache_hits, sc.cache_hits, "gen {g}: cache hits");
        assert_eq!(
            rc.index_page_reads, sc.index_page_reads,
            "gen {g}: index page reads"
        );
        assert_eq!(rc.prefetches, sc.prefetches, "gen {g}: prefetches");
        assert_eq!(
            rc.containers_written, sc.containers_written,
            "gen {g}: containers written"
        );
        assert_eq!(
            rc.chunks_written, sc.chunks_written,
            "gen {g}: chunks written"
        );
        if g > 0 {
            assert!(rc.cache_hits > 0, "gen {g} should dedup through the cache");
        }
    }
}
