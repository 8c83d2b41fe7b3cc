//! The engine's own small objects (config, container-id mark, gc pending
//! list, gc id reservation) under mutation: valid encodings of generated
//! values, mutated (`cairn_format::testutil`), never panic their decoders,
//! and whatever decodes re-encodes to the same bytes or value. Each run
//! asserts that a minimum share of its cases decoded, so those assertions
//! provably run.

use cairn_core::ContainerId;
use cairn_engine::config::RepoConfig;
use cairn_engine::crypto::StoredConfig;
use cairn_engine::gc::{pending, reservation::Reservation};
use cairn_engine::{id_mark, Repository};
use cairn_format::testutil::{check_mutations, reseal_envelope, MutationRun};
use proptest::prelude::*;

#[test]
fn mutated_container_id_marks_decode_canonically_or_not_at_all() {
    let valid = any::<u64>().prop_map(|id| ((), id_mark::encode(ContainerId(id))));
    let run = MutationRun {
        name: "container id mark",
        cases: 512,
        min_decoded_pct: 20,
    };
    check_mutations(run, valid, reseal_envelope, |(), bytes| {
        let Ok(mark) = id_mark::decode(bytes) else {
            return Ok(false);
        };
        prop_assert_eq!(id_mark::encode(mark), bytes);
        Ok(true)
    });
}

#[test]
fn mutated_pending_lists_decode_canonically_or_not_at_all() {
    let valid = proptest::collection::vec(any::<u64>(), 0..20).prop_map(|mut ids| {
        ids.sort_unstable();
        let ids: Vec<ContainerId> = ids.into_iter().map(ContainerId).collect();
        ((), pending::encode(&ids))
    });
    let run = MutationRun {
        name: "gc pending list",
        cases: 512,
        min_decoded_pct: 30,
    };
    check_mutations(run, valid, reseal_envelope, |(), bytes| {
        let Ok(ids) = pending::decode(bytes) else {
            return Ok(false);
        };
        prop_assert_eq!(pending::encode(&ids), bytes);
        Ok(true)
    });
}

#[test]
fn mutated_reservations_decode_canonically_or_not_at_all() {
    let valid = (any::<u64>(), any::<u64>()).prop_map(|(a, b)| {
        let r = Reservation {
            start: ContainerId(a.min(b)),
            end: ContainerId(a.max(b)),
        };
        ((), r.encode())
    });
    let run = MutationRun {
        name: "gc id reservation",
        cases: 512,
        min_decoded_pct: 30,
    };
    check_mutations(run, valid, reseal_envelope, |(), bytes| {
        let Ok(r) = Reservation::decode(bytes) else {
            return Ok(false);
        };
        prop_assert!(r.start <= r.end);
        prop_assert_eq!(r.encode(), bytes);
        Ok(true)
    });
}

/// Configs (pretty JSON in an envelope, validated on decode): what decodes
/// is a valid config that encodes and decodes to itself, and the stored-
/// config decoder agrees with it.
#[test]
fn mutated_configs_round_trip_or_fail() {
    let valid = (any::<u64>(), 0usize..4).prop_map(|(id, chunker)| {
        let mut cfg = Repository::default_config();
        cfg.id = format!("{id:016x}");
        cfg.chunker = [
            cairn_core::ChunkerConfig::default(),
            cairn_core::ChunkerConfig::Fixed { size: 4096 },
            cairn_core::ChunkerConfig::Rabin {
                min: 1024,
                avg: 4096,
                max: 16384,
            },
            cairn_core::ChunkerConfig::Regression {
                min: 2048,
                avg: 8192,
                max: 65536,
            },
        ][chunker];
        ((), cfg.encode())
    });
    let run = MutationRun {
        name: "config",
        cases: 512,
        // JSON edits rarely leave a valid config: mostly the unchanged
        // cases (one in eight) decode here.
        min_decoded_pct: 10,
    };
    check_mutations(run, valid, reseal_envelope, |(), bytes| {
        let stored = StoredConfig::decode(bytes);
        let Ok(cfg) = RepoConfig::decode(bytes) else {
            prop_assert!(!matches!(stored, Ok(StoredConfig::Clear(_))));
            return Ok(false);
        };
        prop_assert!(cfg.validate().is_ok());
        prop_assert_eq!(&RepoConfig::decode(&cfg.encode()).unwrap(), &cfg);
        match stored {
            Ok(StoredConfig::Clear(c)) => prop_assert_eq!(c, cfg),
            _ => prop_assert!(false, "the stored-config decoder disagrees"),
        }
        Ok(true)
    });
}
