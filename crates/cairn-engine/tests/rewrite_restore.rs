//! Every rewrite scheme x every restore policy restores every snapshot of
//! a random aging workload byte-identically (`002_c5d78fa3332f6f9f.txt`):
//! generations are built from slices of earlier ones (so duplicates are
//! scattered over old containers and the schemes rewrite some) plus new
//! bytes, and each is restored through each policy with a small memory.

use std::path::Path;
use std::sync::Arc;

use cairn_backend::MemBackend;
use cairn_engine::config::RewriteConfig;
use cairn_engine::read::{CacheOptions, PolicyKind, Reader};
use cairn_engine::{catalog, Progress, RepoConfig, Repository};
use proptest::prelude::*;

mod common;
use common::{backup, tiny_config, Rng};

fn config(scheme: &str) -> RepoConfig {
    let mut cfg = tiny_config();
    cfg.index.cache_containers = 4;
    cfg.rewrite = RewriteConfig::parse(scheme).unwrap();
    cfg
}

/// Generation `g`: three files, each spliced from slices of the previous
/// generation's files with some fresh bytes.
fn generations(seed: u64, count: usize) -> Vec<Vec<Vec<u8>>> {
    let mut rng = Rng(seed | 1);
    let fresh = |rng: &mut Rng, n: usize| (0..n).map(|_| rng.next() as u8).collect::<Vec<u8>>();
    let mut gens = vec![(0..3).map(|_| fresh(&mut rng, 60_000)).collect::<Vec<_>>()];
    for _ in 1..count {
        let prev = gens.last().unwrap().clone();
        let mut files = Vec::new();
        for _ in 0..3 {
            let mut f = Vec::new();
            while f.len() < 60_000 {
                if rng.below(6) == 0 {
                    let n = 1 + rng.below(6000);
                    f.extend(fresh(&mut rng, n));
                } else {
                    let src = &prev[rng.below(prev.len())];
                    let at = rng.below(src.len() - 9000);
                    f.extend_from_slice(&src[at..at + 2000 + rng.below(7000)]);
                }
            }
            files.push(f);
        }
        gens.push(files);
    }
    gens
}

fn write(dir: &Path, files: &[Vec<u8>]) {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).unwrap();
    for (i, f) in files.iter().enumerate() {
        std::fs::write(dir.join(format!("f{i}")), f).unwrap();
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4))]

    #[test]
    fn every_scheme_and_policy_restores_byte_identically(seed in any::<u64>()) {
        let gens = generations(seed, 4);
        let tmp = tempfile::tempdir().unwrap();
        let data = tmp.path().join("data");
        for scheme in [
            "none",
            "capping:segment=32KiB,cap=1",
            "fcrc:segment=32KiB,cap=1,loss=20",
            "lbw:window=2,cap=1,loss=20,candidates=64KiB",
        ] {
            let repo = Repository::init(Arc::new(MemBackend::new()), config(scheme)).unwrap();
            let mut ids = Vec::new();
            for files in &gens {
                write(&data, files);
                ids.push(backup(&repo, &data).unwrap());
            }
            let rewritten: u64 = catalog::list(&**repo.backend()).unwrap().0.iter()
                .map(|s| s.record.stats.rewritten_data_chunks).sum();
            if scheme.starts_with("capping") {
                prop_assert!(rewritten > 0, "capping at level 1 rewrote nothing");
            }
            for policy in PolicyKind::ALL {
                for (id, files) in ids.iter().zip(&gens) {
                    let snap = catalog::resolve(&**repo.backend(), id).unwrap();
                    let target = tempfile::tempdir().unwrap();
                    let cache = CacheOptions { policy, bytes: 48 << 10 };
                    let sum = Reader::open(&repo, cache).unwrap()
                        .restore(&snap.record, target.path(), None, &Progress::default())
                        .unwrap();
                    prop_assert!(sum.errors.is_empty(), "{} {}: {:?}", scheme, policy, sum.errors);
                    for (i, f) in files.iter().enumerate() {
                        let got = std::fs::read(target.path().join("data").join(format!("f{i}"))).unwrap();
                        prop_assert!(&got == f, "{} {}: f{} differs", scheme, policy, i);
                    }
                }
            }
        }
    }
}
