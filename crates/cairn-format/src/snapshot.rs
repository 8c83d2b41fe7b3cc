//! Snapshot records: one catalog entry per backup, a JSON document inside an
//! [`envelope`](crate::envelope) with magic `CAIRNSNP`, version 1.
//!
//! The record names the root of the snapshot's tree (the root directory
//! listing, a blob whose Merkle tree follows `003_ea5fccc485a97c5d.txt` §2)
//! and the statistics of the run that wrote it. Logical GC starts its mark
//! phase from these roots. The engine stores it under
//! `snapshots/<BLAKE3 of the encoded bytes>`; the encoding is deterministic
//! (fields in declaration order, compact JSON) so equal records hash equal.
//!
//! JSON because records are few, small and worth reading with `jq`; unknown
//! fields are ignored and missing statistics default to zero, so minor
//! additions do not need a version bump.

use cairn_core::{Error, Fingerprint, Result};
use serde::{Deserialize, Serialize};

use crate::dir::BlobRef;
use crate::envelope::{open, seal};

/// Envelope magic of snapshot records.
pub const SNAPSHOT_MAGIC: [u8; 8] = *b"CAIRNSNP";
/// The record version this build writes and the newest it reads.
pub const SNAPSHOT_VERSION: u32 = 1;

const WHAT: &str = "snapshot record";

/// A catalog entry: what was backed up, when, and where its tree starts.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SnapshotRecord {
    pub time_unix_ns: i64,
    pub host: String,
    pub paths: Vec<String>,
    pub tags: Vec<String>,
    pub root: BlobRefRecord,
    pub stats: SnapshotStats,
    /// Every container id below this had been allocated when the snapshot
    /// was committed: a writer never allocates below the largest such mark,
    /// so a lost container's id is never reused (0 in records written before
    /// the field existed).
    #[serde(default)]
    pub next_container: u64,
    /// Set on a `fastcopy` (003 §2): the snapshot whose tree this record
    /// names again. Absent from records that are not copies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fastcopy_of: Option<String>,
    /// Set on a record that replaced another to change its tags
    /// (`cairn tag`): the id of the record it replaced. Absent otherwise, so
    /// records without it encode (and hash) as before the field existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub original: Option<String>,
}

/// Counters of the backup run that wrote a snapshot.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct SnapshotStats {
    pub logical_bytes: u64,
    pub files: u64,
    pub dirs: u64,
    pub symlinks: u64,
    /// Chunk references of every kind (data, tree nodes, listings).
    pub chunks: u64,
    /// Chunks stored new, of every kind.
    pub new_chunks: u64,
    /// Data (L0 file content) chunk references, and how many were new.
    pub data_chunks: u64,
    pub new_data_chunks: u64,
    /// Raw and stored bytes of the new data chunks.
    pub new_data_raw_bytes: u64,
    pub new_data_stored_bytes: u64,
    pub new_raw_bytes: u64,
    pub new_stored_bytes: u64,
    /// Duplicate data chunks the rewrite scheme stored again (not counted
    /// as new), their raw and stored bytes, and the scheme (its text form,
    /// empty for none): `002_c5d78fa3332f6f9f.txt` §3-§5.
    pub rewritten_data_chunks: u64,
    pub rewritten_data_raw_bytes: u64,
    pub rewritten_data_stored_bytes: u64,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub rewrite: String,
    pub containers_written: u64,
    pub duration_ns: u64,
    pub skipped_paths: u64,
    /// Files compared with the parent snapshot (`parent`, its id; empty
    /// when the backup had none): not in it, in it but changed (read), and
    /// unchanged (size, mtime, ctime and inode equal: not read), with the
    /// bytes of the unchanged ones. Without a parent every file is new.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub parent: String,
    pub files_new: u64,
    pub files_changed: u64,
    pub files_unmodified: u64,
    pub unmodified_bytes: u64,
    /// No path below the sources was excluded or skipped: every directory's
    /// listing names every entry it had, so a later backup may take an
    /// unchanged directory's names from it (absent, false, in older records).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub listings_complete: bool,
    /// Files that changed while the backup read them (size, mtime or ctime
    /// differ after the read): stored as read, possibly inconsistent.
    pub files_changed_while_read: u64,
    /// Lookup and I/O counters of the run (DDFS Table 4 quantities among them).
    pub counters: cairn_core::CountersSnapshot,
    /// Seconds spent per pipeline phase (open, read_chunk, hash, dedup,
    /// compress, write, commit, total), summed over threads.
    pub phases: std::collections::BTreeMap<String, f64>,
}

/// The serde form of a [`BlobRef`]: the root fingerprint as lowercase hex.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct BlobRefRecord {
    pub root: String,
    pub level: u8,
    pub size: u64,
}

impl From<BlobRef> for BlobRefRecord {
    fn from(b: BlobRef) -> Self {
        BlobRefRecord {
            root: b.root.to_hex(),
            level: b.level,
            size: b.size,
        }
    }
}

impl From<&BlobRef> for BlobRefRecord {
    fn from(b: &BlobRef) -> Self {
        BlobRefRecord::from(*b)
    }
}

impl TryFrom<&BlobRefRecord> for BlobRef {
    type Error = Error;

    /// [`Error::Corrupt`] if `root` is not 1..=32 bytes of hex.
    fn try_from(r: &BlobRefRecord) -> Result<Self> {
        let root = Fingerprint::from_hex(&r.root).ok_or_else(|| {
            Error::corrupt(
                WHAT,
                format!("root {:?} is not a hex fingerprint of 1..=32 bytes", r.root),
            )
        })?;
        Ok(BlobRef {
            root,
            level: r.level,
            size: r.size,
        })
    }
}

impl TryFrom<BlobRefRecord> for BlobRef {
    type Error = Error;

    fn try_from(r: BlobRefRecord) -> Result<Self> {
        BlobRef::try_from(&r)
    }
}

impl SnapshotRecord {
    /// The root as a [`BlobRef`] (validated by [`decode_snapshot`]).
    pub fn root_ref(&self) -> Result<BlobRef> {
        BlobRef::try_from(&self.root)
    }
}

/// The envelope-framed JSON bytes of `rec`. Deterministic.
pub fn encode_snapshot(rec: &SnapshotRecord) -> Vec<u8> {
    // Plain structs of strings and integers: serialization cannot fail.
    let json = serde_json::to_vec(rec).unwrap_or_default();
    seal(&SNAPSHOT_MAGIC, SNAPSHOT_VERSION, &json)
}

/// Verifies the envelope, parses the JSON and checks the root fingerprint.
pub fn decode_snapshot(bytes: &[u8]) -> Result<SnapshotRecord> {
    let (_, payload) = open(&SNAPSHOT_MAGIC, SNAPSHOT_VERSION, WHAT, bytes)?;
    let rec: SnapshotRecord = serde_json::from_slice(payload)
        .map_err(|e| Error::corrupt(WHAT, format!("invalid JSON: {e}")))?;
    rec.root_ref()?;
    Ok(rec)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{check_mutations, reseal_envelope, MutationRun};
    use proptest::prelude::*;

    fn sample() -> SnapshotRecord {
        SnapshotRecord {
            next_container: 0,
            fastcopy_of: None,
            original: None,
            time_unix_ns: 1_700_000_000_000_000_000,
            host: "host-1".into(),
            paths: vec!["/home/a".into(), "/etc".into()],
            tags: vec!["daily".into()],
            root: BlobRef {
                root: Fingerprint::from_slice(&[0xab; 32]),
                level: 2,
                size: 4096,
            }
            .into(),
            stats: SnapshotStats {
                files: 3,
                chunks: 10,
                ..Default::default()
            },
        }
    }

    #[test]
    fn round_trip_and_determinism() {
        let r = sample();
        let a = encode_snapshot(&r);
        assert_eq!(a, encode_snapshot(&r.clone()));
        assert_eq!(decode_snapshot(&a).unwrap(), r);
        assert_eq!(
            r.root_ref().unwrap().root,
            Fingerprint::from_slice(&[0xab; 32])
        );
    }

    #[test]
    fn every_prefix_and_bit_flip_is_rejected() {
        let a = encode_snapshot(&sample());
        for cut in 0..a.len() {
            assert!(decode_snapshot(&a[..cut]).is_err());
        }
        for i in (0..a.len() * 8).step_by(7) {
            let mut b = a.clone();
            b[i / 8] ^= 1 << (i % 8);
            assert!(decode_snapshot(&b).is_err(), "flip {i}");
        }
    }

    #[test]
    fn bad_payloads_are_corrupt() {
        let bad_json = seal(&SNAPSHOT_MAGIC, 1, b"{not json");
        let e = decode_snapshot(&bad_json).unwrap_err();
        assert!(
            e.is_corruption() && e.to_string().contains("invalid JSON"),
            "{e}"
        );
        let mut r = sample();
        r.root.root = "xyz".into();
        let e = decode_snapshot(&encode_snapshot(&r)).unwrap_err();
        assert!(e.to_string().contains("hex fingerprint"), "{e}");
        r.root.root = String::new();
        assert!(decode_snapshot(&encode_snapshot(&r)).is_err());
        let newer = seal(&SNAPSHOT_MAGIC, 2, b"{}");
        assert!(matches!(
            decode_snapshot(&newer),
            Err(Error::UnsupportedVersion { found: 2, .. })
        ));
    }

    #[test]
    fn tolerant_of_missing_stats_and_unknown_fields() {
        let json = br#"{"time_unix_ns":5,"host":"h","paths":[],"tags":[],
            "root":{"root":"0102","level":0,"size":2},"stats":{"files":1},"future":true}"#;
        let r = decode_snapshot(&seal(&SNAPSHOT_MAGIC, 1, json)).unwrap();
        assert_eq!(r.stats.files, 1);
        assert_eq!(r.stats.dirs, 0);
    }

    /// Snapshot records over the whole range of every field.
    fn record_strategy() -> impl Strategy<Value = SnapshotRecord> {
        (
            any::<i64>(),
            ".{0,20}",
            proptest::collection::vec(".{0,20}", 0..4),
            proptest::collection::vec("[a-z]{0,8}", 0..4),
            proptest::collection::vec(any::<u8>(), 1..=32),
            any::<u8>(),
            any::<[u64; 11]>(),
        )
            .prop_map(
                |(time, host, paths, tags, fp, level, stats)| SnapshotRecord {
                    next_container: 0,
                    fastcopy_of: None,
                    original: (stats[2] % 2 == 1).then(|| format!("{:064x}", stats[5])),
                    time_unix_ns: time,
                    host,
                    paths,
                    tags,
                    root: BlobRef {
                        root: Fingerprint::from_slice(&fp),
                        level,
                        size: stats[0],
                    }
                    .into(),
                    stats: SnapshotStats {
                        logical_bytes: stats[0],
                        files: stats[1],
                        dirs: stats[2],
                        symlinks: stats[3],
                        chunks: stats[4],
                        new_chunks: stats[5],
                        new_raw_bytes: stats[6],
                        new_stored_bytes: stats[7],
                        containers_written: stats[8],
                        duration_ns: stats[9],
                        skipped_paths: stats[10],
                        data_chunks: stats[4],
                        new_data_chunks: stats[5],
                        new_data_raw_bytes: stats[6],
                        new_data_stored_bytes: stats[7],
                        rewritten_data_chunks: stats[1],
                        rewritten_data_raw_bytes: stats[2],
                        rewritten_data_stored_bytes: stats[3],
                        rewrite: if stats[3] % 2 == 0 {
                            String::new()
                        } else {
                            "lbw:window=8".into()
                        },
                        counters: cairn_core::CountersSnapshot {
                            lookups: stats[1],
                            ..Default::default()
                        },
                        phases: [("hash".to_string(), 0.25)].into_iter().collect(),
                        parent: if stats[4] % 2 == 0 {
                            String::new()
                        } else {
                            format!("{:064x}", stats[6])
                        },
                        files_new: stats[1],
                        files_changed: stats[2],
                        files_unmodified: stats[3],
                        unmodified_bytes: stats[0],
                        files_changed_while_read: stats[8],
                        listings_complete: stats[5] % 2 == 0,
                    },
                },
            )
    }

    /// Mutated valid records (JSON edits behind a repaired envelope among
    /// them) never panic the decoder, and what decodes is stable: encoding
    /// it and decoding again gives the same record. (The JSON decoder
    /// tolerates unknown fields, so the bytes are not canonical.)
    #[test]
    fn mutated_records_round_trip_or_fail() {
        let valid = record_strategy().prop_map(|r| ((), encode_snapshot(&r)));
        let run = MutationRun {
            name: "snapshot record",
            cases: 512,
            min_decoded_pct: 15,
        };
        check_mutations(run, valid, reseal_envelope, |(), bytes| {
            let Ok(r) = decode_snapshot(bytes) else {
                return Ok(false);
            };
            prop_assert_eq!(decode_snapshot(&encode_snapshot(&r)).unwrap(), r);
            Ok(true)
        });
    }

    proptest! {
        #[test]
        fn prop_round_trip(r in record_strategy()) {
            prop_assert_eq!(decode_snapshot(&encode_snapshot(&r)).unwrap(), r);
        }

        #[test]
        fn prop_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode_snapshot(&bytes);
        }
    }
}
