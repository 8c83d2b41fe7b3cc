//! Properties of every rewrite scheme over random streams: each held chunk
//! gets exactly one decision and nothing else does; Capping references at
//! most `cap` old containers per segment; FCRC never rewrites more than
//! its dedup-ratio budget; LBW decides within a window and rewrites nothing
//! when every container is well referenced.

use std::collections::{HashMap, HashSet};

use cairn_core::{ContainerId, Fingerprint};
use proptest::prelude::*;

use super::*;

fn fp(n: u64) -> Fingerprint {
    let mut b = [0u8; 32];
    b[..8].copy_from_slice(&n.to_le_bytes());
    Fingerprint::from_slice(&b)
}

/// A stream of chunks: `None` = new, `Some(c)` = duplicate in old container c.
fn arb_stream() -> impl Strategy<Value = Vec<Option<u64>>> {
    prop::collection::vec(
        prop_oneof![
            1 => Just(None),
            3 => (0u64..40).prop_map(Some),
        ],
        1..600,
    )
}

/// Runs `policy` over the stream (1 KiB chunks; the stream opens container
/// 1000+k every 8 new chunks). Returns the rewritten sequence numbers.
fn drive(policy: &mut dyn RewritePolicy, stream: &[Option<u64>]) -> Vec<u64> {
    let mut held = HashSet::new();
    let mut decided = HashSet::new();
    let mut rewritten = Vec::new();
    let mut out = Vec::new();
    let mut new = 0;
    let mut apply = |out: &mut Vec<Action>, held: &mut HashSet<u64>| {
        for a in out.drain(..) {
            let seq = match a {
                Action::Rewrite(s) => {
                    rewritten.push(s);
                    s
                }
                Action::Release(s) => s,
            };
            assert!(held.remove(&seq), "decision on {seq}, not held");
            assert!(decided.insert(seq), "{seq} decided twice");
        }
    };
    for (seq, c) in stream.iter().enumerate() {
        let seq = seq as u64;
        let loc = match c {
            None => {
                if new % 8 == 0 {
                    policy.container_opened(ContainerId(1000 + new / 8));
                }
                new += 1;
                Location::New
            }
            Some(c) => Location::Stored(ContainerId(*c)),
        };
        if policy.push(seq, fp(seq % 97), 1024, loc, &mut out) {
            held.insert(seq);
        }
        apply(&mut out, &mut held);
    }
    policy.finish(&mut out);
    apply(&mut out, &mut held);
    assert!(held.is_empty(), "undecided after finish: {held:?}");
    rewritten
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn every_held_chunk_is_decided_exactly_once(stream in arb_stream()) {
        // HAR alone and in front of each scheme, with containers 1 and 3
        // inherited as sparse: every held chunk is still decided once.
        let har = super::har::HarState::new(
            [ContainerId(1), ContainerId(3)].into_iter().collect(),
            ContainerId(1000),
            0.5,
        );
        for spec in [
            "capping:segment=20KiB,cap=3", "fcrc:segment=16KiB,cap=2,loss=10",
            "lbw:window=3,cap=2,loss=10,candidates=8KiB", "har:utilization=50",
            "capping:segment=20KiB,cap=3,har=50", "lbw:window=3,cap=2,loss=10,candidates=8KiB,har=50",
        ] {
            let cfg = RewriteConfig::parse(spec).unwrap();
            prop_assert_eq!(RewriteConfig::parse(&cfg.to_string()).unwrap(), cfg);
            for history in [None, Some(History { unique_chunks: 100, logical_bytes: 600 << 10 })] {
                let mut p = for_config(&cfg, 8 << 10, history, Some(&har)).unwrap();
                drive(p.as_mut(), &stream);
            }
        }
    }

    #[test]
    fn capping_references_at_most_cap_old_containers_per_segment(stream in arb_stream(), cap in 0u32..6) {
        let cfg = RewriteConfig::Capping { segment_bytes: 32 << 10, cap, har: None };
        let mut p = for_config(&cfg, 8 << 10, None, None).unwrap();
        let rewritten: HashSet<u64> = drive(p.as_mut(), &stream).into_iter().collect();
        for seg in stream.chunks(32).enumerate() {
            let kept: HashSet<u64> = seg.1.iter().enumerate()
                .filter(|(i, c)| c.is_some() && !rewritten.contains(&((seg.0 * 32 + i) as u64)))
                .map(|(_, c)| c.unwrap())
                .collect();
            prop_assert!(kept.len() <= cap as usize, "segment {}: {} old containers", seg.0, kept.len());
        }
    }

    #[test]
    fn fcrc_stays_within_its_rewrite_budget(stream in arb_stream(), loss in 1u32..30) {
        let unique = 200;
        let cfg = RewriteConfig::Fcrc { segment_bytes: 16 << 10, cap: 2, loss: loss as f64 / 100.0, har: None };
        let history = History { unique_chunks: unique, logical_bytes: (stream.len() as u64) << 10 };
        let mut p = for_config(&cfg, 8 << 10, Some(history), None).unwrap();
        let n = drive(p.as_mut(), &stream).len() as f64;
        let segments = (stream.len() as f64 / 16.0).ceil();
        let units = (stream.len() as f64 / 16.0).max(1.0);
        let x = loss as f64 / 100.0;
        let budget = unique as f64 * x / (1.0 - x) / units * segments;
        prop_assert!(n <= budget + 1e-9, "{} rewrites over a budget of {}", n, budget);
    }
}

#[test]
fn lbw_keeps_well_referenced_containers_and_rewrites_stray_chunks() {
    // Long runs from container 1 with a stray chunk of container 2 every
    // 40 chunks: after the first cycle T_dc is set, the strays are rewritten
    // and container 1's chunks never are.
    let mut stream = Vec::new();
    for i in 0..2000 {
        stream.push(Some(if i % 40 == 39 { 2 } else { 1 }));
        if i % 10 == 0 {
            stream.push(None);
        }
    }
    let cfg = RewriteConfig::parse("lbw:window=4,cap=1,loss=20,candidates=64KiB").unwrap();
    let history = History {
        unique_chunks: 200,
        logical_bytes: (stream.len() as u64) << 10,
    };
    let mut p = for_config(&cfg, 8 << 10, Some(history), None).unwrap();
    let rewritten = drive(p.as_mut(), &stream);
    let by_c: HashMap<u64, usize> = rewritten.iter().fold(HashMap::new(), |mut m, s| {
        *m.entry(stream[*s as usize].unwrap()).or_insert(0) += 1;
        m
    });
    assert_eq!(by_c.get(&1), None, "{by_c:?}");
    assert!(by_c.get(&2).copied().unwrap_or(0) > 10, "{by_c:?}");
}

#[test]
fn specs_parse_and_print() {
    for s in [
        "none",
        "capping",
        "fcrc:loss=7,cap=10",
        "lbw:window=8,candidates=8MiB",
    ] {
        let c = RewriteConfig::parse(s).unwrap();
        assert_eq!(RewriteConfig::parse(&c.to_string()).unwrap(), c);
    }
    assert!(
        RewriteConfig::parse("capping:loss=5").is_err(),
        "capping has no loss limit"
    );
    assert!(RewriteConfig::parse("lbw:window=1").is_err());
    assert!(RewriteConfig::parse("sometimes").is_err());
}

#[test]
fn har_parses_alone_and_in_front_of_a_scheme_and_refuses_bad_thresholds() {
    let alone = RewriteConfig::parse("har").unwrap();
    assert_eq!(alone.har_threshold(), Some(0.5));
    assert!(alone.without_har().is_none());
    let front = RewriteConfig::parse("lbw:loss=5,har=30").unwrap();
    assert_eq!(front.har_threshold(), Some(0.3));
    assert_eq!(
        front.without_har(),
        RewriteConfig::parse("lbw:loss=5").unwrap()
    );
    assert_eq!(RewriteConfig::parse(&front.to_string()).unwrap(), front);
    // Stored as JSON, read back the same (docs/FORMAT.md, `rewrite`).
    let json = serde_json::to_string(&front).unwrap();
    assert!(json.contains("\"har\":0.3"), "{json}");
    assert_eq!(serde_json::from_str::<RewriteConfig>(&json).unwrap(), front);
    let lbw = RewriteConfig::parse("lbw").unwrap();
    assert!(!serde_json::to_string(&lbw).unwrap().contains("har"));
    for bad in [
        "har:utilization=0",
        "har:utilization=150",
        "lbw:har=0",
        "har:loss=5",
        "fcrc:utilization=50",
    ] {
        assert!(RewriteConfig::parse(bad).is_err(), "{bad} accepted");
    }
}
