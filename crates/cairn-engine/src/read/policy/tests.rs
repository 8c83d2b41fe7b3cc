//! Properties every restore policy honours, over random plans and
//! container layouts: a step served from memory is one whose chunk the
//! policy holds (checked by `PolicyRun`), memory stays within the budget
//! plus one container, forward assembly reads each container at most once
//! per window, and every policy is deterministic.

use std::collections::{HashMap, HashSet};

use cairn_core::{ContainerId, Fingerprint, FpMap};
use proptest::prelude::*;

use super::*;

fn fp(n: u32) -> Fingerprint {
    let mut b = [0u8; 32];
    b[..4].copy_from_slice(&n.to_le_bytes());
    Fingerprint::from_slice(&b)
}

/// Chunks 0..n in containers of `per` chunks, sizes 1..=4 KiB; a plan of
/// `steps` references drawn with locality.
fn layout(
    n: u32,
    per: u32,
    sizes: &[u64],
) -> (
    FpMap<ContainerId>,
    HashMap<ContainerId, Vec<ContainerChunk>>,
) {
    let mut place = FpMap::default();
    let mut containers: HashMap<ContainerId, Vec<ContainerChunk>> = HashMap::new();
    for i in 0..n {
        let id = ContainerId((i / per) as u64);
        place.insert(fp(i), id);
        containers.entry(id).or_default().push(ContainerChunk {
            fp: fp(i),
            size: sizes[i as usize % sizes.len()],
        });
    }
    (place, containers)
}

struct Outcome {
    reads: Vec<(usize, ContainerId)>,
    peak: u64,
}

fn run(
    kind: PolicyKind,
    budget: u64,
    plans: &[Vec<PlanStep>],
    place: &FpMap<ContainerId>,
    containers: &HashMap<ContainerId, Vec<ContainerChunk>>,
) -> Outcome {
    let mut run = PolicyRun::new(kind, budget, 8 << 10);
    let mut mirror: HashSet<Fingerprint> = HashSet::new();
    let mut reads = Vec::new();
    let mut at = 0;
    for plan in plans {
        run.begin(plan);
        for ch in run.changes() {
            match ch {
                Change::Drop(f) => assert!(mirror.remove(&f)),
                Change::Keep(_) => panic!("begin keeps"),
            }
        }
        for pos in 0..plan.len() {
            let held = mirror.contains(&plan[pos].fp);
            let hit = run.serve(pos, plan);
            if hit {
                assert!(held, "{kind}: served what it does not hold");
            }
            for ch in run.changes() {
                match ch {
                    Change::Drop(f) => assert!(mirror.remove(&f)),
                    Change::Keep(_) => panic!("serve keeps"),
                }
            }
            if !hit {
                let id = place[&plan[pos].fp];
                let chunks = &containers[&id];
                run.read(pos, plan, id, 100, chunks);
                reads.push((at + pos, id));
                for ch in run.changes() {
                    match ch {
                        Change::Drop(f) => assert!(mirror.remove(&f), "{kind}: dropped twice"),
                        Change::Keep(f) => {
                            assert!(chunks.iter().any(|c| c.fp == f));
                            assert!(mirror.insert(f), "{kind}: kept twice");
                        }
                    }
                }
            }
        }
        at += plan.len();
    }
    let st = run.stats();
    assert_eq!(st.container_reads as usize, reads.len());
    Outcome {
        reads,
        peak: st.peak_memory_bytes,
    }
}

fn plans_from(refs: &[Vec<u32>], sizes: &[u64]) -> Vec<Vec<PlanStep>> {
    refs.iter()
        .map(|r| {
            let mut off = 0;
            r.iter()
                .map(|&i| {
                    let size = sizes[i as usize % sizes.len()];
                    let s = PlanStep {
                        fp: fp(i),
                        size,
                        offset: off,
                    };
                    off += size;
                    s
                })
                .collect()
        })
        .collect()
}

/// File plans: runs of consecutive chunks from random places (a backup's
/// duplicates), so containers are revisited at various distances.
fn arb_refs(n: u32) -> impl Strategy<Value = Vec<Vec<u32>>> {
    prop::collection::vec(
        prop::collection::vec((0..n, 1u32..12), 1..30).prop_map(move |runs| {
            runs.into_iter()
                .flat_map(|(start, len)| (start..(start + len).min(n)).collect::<Vec<_>>())
                .collect::<Vec<u32>>()
        }),
        1..4,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn every_policy_serves_only_what_it_holds_within_its_budget(
        refs in arb_refs(300),
        per in 4u32..40,
        budget_kib in 4u64..200,
    ) {
        let sizes = [1024u64, 2048, 3072, 4096];
        let (place, containers) = layout(300, per, &sizes);
        let plans = plans_from(&refs, &sizes);
        let budget = budget_kib << 10;
        let biggest: u64 = containers.values().map(|c| c.iter().map(|x| x.size).sum::<u64>()).max().unwrap();
        for kind in PolicyKind::ALL {
            let a = run(kind, budget, &plans, &place, &containers);
            let b = run(kind, budget, &plans, &place, &containers);
            prop_assert_eq!(&a.reads, &b.reads, "{} is deterministic", kind);
            prop_assert!(a.peak <= budget + biggest, "{}: peak {} over {} + {}", kind, a.peak, budget, biggest);
        }
    }

    #[test]
    fn forward_assembly_reads_a_container_once_per_window(
        refs in arb_refs(200),
        per in 4u32..30,
        budget_kib in 4u64..100,
    ) {
        let sizes = [1024u64, 4096];
        let (place, containers) = layout(200, per, &sizes);
        let plans = plans_from(&refs, &sizes);
        let budget = budget_kib << 10;
        let out = run(PolicyKind::Faa, budget, &plans, &place, &containers);
        // Rebuild the windows and check no container repeats inside one.
        let mut at = 0;
        let mut reads = out.reads.iter().peekable();
        for plan in &plans {
            let mut start = 0;
            while start < plan.len() {
                let end = window_end(plan, start, budget);
                let mut seen = HashSet::new();
                while let Some(&&(p, id)) = reads.peek() {
                    if p >= at + end {
                        break;
                    }
                    prop_assert!(seen.insert(id), "container {:?} read twice in one window", id);
                    reads.next();
                }
                start = end;
            }
            at += plan.len();
        }
    }
}

#[test]
fn lru_reads_once_per_residency_and_evicts_the_least_recent() {
    // Containers of one 1 KiB chunk each; room for two.
    let sizes = [1024u64];
    let (place, containers) = layout(4, 1, &sizes);
    let plans = plans_from(&[vec![1, 2, 1, 3, 2, 1]], &sizes);
    let out = run(PolicyKind::ContainerLru, 2048, &plans, &place, &containers);
    let ids: Vec<u64> = out.reads.iter().map(|r| r.1 .0).collect();
    // 1, 2 read; 1 hit; 3 evicts 2; 2 evicts 1; 1 evicts 3.
    assert_eq!(ids, vec![1, 2, 3, 2, 1]);
}

#[test]
fn belady_keeps_the_chunk_needed_soonest() {
    // One chunk per container, room for one: after 1 and 2, Belady keeps 1
    // (needed next) where LRU would keep 2.
    let sizes = [1024u64];
    let (place, containers) = layout(4, 1, &sizes);
    let plans = plans_from(&[vec![1, 2, 1, 2]], &sizes);
    let b = run(PolicyKind::Belady, 1024, &plans, &place, &containers);
    let l = run(PolicyKind::ChunkLru, 1024, &plans, &place, &containers);
    assert_eq!(b.reads.len(), 3);
    assert_eq!(l.reads.len(), 4);
}

#[test]
fn forward_assembly_fills_the_window_from_one_read() {
    // Chunks 0..8 in one container; a window covering the whole plan reads it once.
    let sizes = [1024u64];
    let (place, containers) = layout(8, 8, &sizes);
    let plans = plans_from(&[vec![0, 1, 2, 3, 0, 1, 2, 3]], &sizes);
    assert_eq!(
        run(PolicyKind::Faa, 8 << 10, &plans, &place, &containers)
            .reads
            .len(),
        1
    );
    // A window of two chunks reads it once per window.
    assert_eq!(
        run(PolicyKind::Faa, 2 << 10, &plans, &place, &containers)
            .reads
            .len(),
        4
    );
}

#[test]
fn policy_names_round_trip() {
    for k in PolicyKind::ALL {
        assert_eq!(k.name().parse::<PolicyKind>().unwrap(), k);
    }
    assert!("lru".parse::<PolicyKind>().is_err());
}
