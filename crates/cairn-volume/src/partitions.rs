//! The partitions of 004's parallel optimization sessions ("Data
//! Partitioning and Reconciliation", "Efficient partitioning strategies"):
//! the eligible files are split by file type (004's finding: savings almost
//! those of global dedup) or by path subtree (fewer savings kept), each
//! partition deduplicated against its own index, the sessions running side
//! by side; duplicates across partitions are reconciled later by the
//! volume's garbage collection (the store's canonical-copy rule).
//!
//! Each partition key owns a chunk log of the store's frugal index
//! (docs/concurrency.md, "Frugal logs per writer"), the same log run after
//! run, recorded in `partitions.json` beside `volume.json`: a session's
//! batch of key `k` appends to `k`'s log and its table indexes only that
//! log and partition 0 (`BackupOptions::index_partition`), so a session's
//! index RAM is its partition's and the base's, not the whole store's.
//! The map is derived data: lost or damaged, it is started afresh (a key
//! may then land on another log; its chunks are found again after the next
//! collection reconciles them into the base).

use std::collections::{BTreeMap, HashMap};
use std::path::{Component, Path};

use serde::{Deserialize, Serialize};

use cairn_core::Result;
use cairn_engine::index::MAX_FRUGAL_PARTITIONS;

use crate::layout::{write_json, VolumeDir};

/// How the files are partitioned among sessions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PartitionBy {
    /// By file type (the name's extension, case folded): 004's better
    /// strategy for keeping the savings.
    #[default]
    Type,
    /// By the first directory under the volume's root.
    Path,
}

impl std::str::FromStr for PartitionBy {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "type" => Ok(PartitionBy::Type),
            "path" => Ok(PartitionBy::Path),
            _ => Err("expected `type` or `path`".to_string()),
        }
    }
}

/// The longest extension kept as a type of its own; longer ones (and
/// those with characters other than ASCII letters and digits) are not
/// types but names, and share the key of files without one.
const MAX_TYPE_LEN: usize = 16;

/// The partition key of the file at `rel` (relative to the volume's root).
pub fn key(rel: &Path, by: PartitionBy) -> String {
    match by {
        PartitionBy::Type => {
            let ext = rel
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.trim_start_matches('.').rsplit_once('.'))
                .map(|(_, e)| e)
                .filter(|e| {
                    !e.is_empty()
                        && e.len() <= MAX_TYPE_LEN
                        && e.bytes().all(|b| b.is_ascii_alphanumeric())
                })
                .map(str::to_ascii_lowercase)
                .unwrap_or_default();
            format!("type:{ext}")
        }
        PartitionBy::Path => {
            let dirs = rel.components().count().saturating_sub(1);
            let first = rel
                .components()
                .take(dirs.min(1))
                .find_map(|c| match c {
                    Component::Normal(s) => Some(s.to_string_lossy().into_owned()),
                    _ => None,
                })
                .unwrap_or_default();
            format!("path:{first}")
        }
    }
}

/// A key with no chunk log yet whose files in a run add up to less than
/// this shares the run's partition of small keys (`small:type` or
/// `small:path`) instead of becoming one: each partition is a backup of
/// its own per batch, whose fixed costs (a snapshot, an index delta, a
/// container left partly filled) would outweigh a few files' ingest (60
/// types of 250 KiB each took 3.8 times one session's time as 60
/// partitions). A quarter of a batch.
pub const MIN_PARTITION_BYTES: u64 = 64 << 20;

impl PartitionBy {
    /// The key of the partition the run's small keys share (no key of
    /// [`key`] has its prefix).
    pub fn small_key(self) -> &'static str {
        match self {
            PartitionBy::Type => "small:type",
            PartitionBy::Path => "small:path",
        }
    }
}

/// The run's partitions from its keys' bytes: a key that has a chunk log
/// already (it was a partition before: its chunks are there) or holds at
/// least `min_bytes` stays a partition; the others join
/// [`PartitionBy::small_key`]. Returns the partitions' bytes and, for
/// each key, its partition.
pub fn coalesce(
    groups: &BTreeMap<String, u64>,
    map: &PartitionMap,
    by: PartitionBy,
    min_bytes: u64,
) -> (BTreeMap<String, u64>, HashMap<String, String>) {
    let mut parts: BTreeMap<String, u64> = BTreeMap::new();
    let mut of = HashMap::new();
    for (k, &bytes) in groups {
        let part = if map.logs.contains_key(k) || bytes >= min_bytes {
            k.clone()
        } else {
            by.small_key().to_string()
        };
        *parts.entry(part.clone()).or_default() += bytes;
        of.insert(k.clone(), part);
    }
    (parts, of)
}

/// `partitions.json`: each key's chunk log, kept from run to run.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PartitionMap {
    version: u32,
    logs: BTreeMap<String, u32>,
}

impl PartitionMap {
    /// The map as stored; a missing, unreadable or damaged file gives an
    /// empty map (derived data, module doc).
    pub fn load(dir: &VolumeDir) -> Self {
        std::fs::read(dir.partitions())
            .ok()
            .and_then(|b| serde_json::from_slice::<PartitionMap>(&b).ok())
            .filter(|m| m.version == 1 && m.logs.values().all(|&k| valid_log(k)))
            .unwrap_or_default()
    }

    /// The logs of `keys`, giving each key not yet mapped the next log
    /// (1 to 255, then round again: two keys may then share a log, which
    /// merges their partitions), and storing the map when it grew.
    pub fn assign<'k>(
        &mut self,
        dir: &VolumeDir,
        keys: impl IntoIterator<Item = &'k str>,
    ) -> Result<HashMap<String, u32>> {
        let mut out = HashMap::new();
        let mut grew = false;
        for k in keys {
            let next = self.logs.len() as u32 % (MAX_FRUGAL_PARTITIONS - 1) + 1;
            let log = *self.logs.entry(k.to_string()).or_insert_with(|| {
                grew = true;
                next
            });
            out.insert(k.to_string(), log);
        }
        if grew {
            self.store(dir)?;
        }
        Ok(out)
    }

    fn store(&mut self, dir: &VolumeDir) -> Result<()> {
        self.version = 1;
        write_json(dir, &dir.partitions(), self)
    }
}

fn valid_log(k: u32) -> bool {
    (1..MAX_FRUGAL_PARTITIONS).contains(&k)
}

/// Gives groups (key, bytes) to at most `sessions` sessions, largest first,
/// each to the session with the fewest bytes so far (ties: the lower
/// session); returns each key's session. Deterministic for one input.
pub fn balance(groups: &BTreeMap<String, u64>, sessions: usize) -> HashMap<String, usize> {
    let mut order: Vec<(&String, u64)> = groups.iter().map(|(k, b)| (k, *b)).collect();
    order.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    let mut load = vec![0u64; sessions.clamp(1, order.len().max(1))];
    let mut owner = HashMap::new();
    for (key, bytes) in order {
        let (i, _) = load
            .iter()
            .enumerate()
            .min_by_key(|&(i, b)| (*b, i))
            .expect("at least one session");
        load[i] += bytes;
        owner.insert(key.clone(), i);
    }
    owner
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_by_type_fold_case_and_leave_out_names_that_are_not_types() {
        let k = |p: &str| key(Path::new(p), PartitionBy::Type);
        assert_eq!(k("a/b/disk.VHDX"), "type:vhdx");
        assert_eq!(k("x.tar.gz"), "type:gz");
        assert_eq!(k("Makefile"), "type:");
        assert_eq!(k(".bashrc"), "type:");
        assert_eq!(k("notes.a-b"), "type:");
        assert_eq!(k("f.abcdefghijklmnopq"), "type:");
    }

    #[test]
    fn keys_by_path_are_the_first_directory() {
        let k = |p: &str| key(Path::new(p), PartitionBy::Path);
        assert_eq!(k("home/ann/x.rs"), "path:home");
        assert_eq!(k("top.txt"), "path:");
    }

    #[test]
    fn a_key_keeps_its_log_across_runs_and_a_damaged_map_starts_afresh() {
        let d = tempfile::tempdir().unwrap();
        let dir = VolumeDir::new(d.path());
        let first = PartitionMap::load(&dir)
            .assign(&dir, ["type:rs", "type:img"])
            .unwrap();
        assert_eq!(first["type:rs"], 1);
        assert_eq!(first["type:img"], 2);
        let again = PartitionMap::load(&dir)
            .assign(&dir, ["type:md", "type:img"])
            .unwrap();
        assert_eq!(again["type:img"], 2);
        assert_eq!(again["type:md"], 3);
        std::fs::write(dir.partitions(), b"{\"version\":1,\"logs\":{\"a\":0}}").unwrap();
        assert!(PartitionMap::load(&dir).logs.is_empty());
    }

    #[test]
    fn logs_wrap_round_below_the_partition_limit() {
        let d = tempfile::tempdir().unwrap();
        let dir = VolumeDir::new(d.path());
        let keys: Vec<String> = (0..300).map(|i| format!("type:k{i}")).collect();
        let logs = PartitionMap::default()
            .assign(&dir, keys.iter().map(String::as_str))
            .unwrap();
        assert!(logs.values().all(|&k| valid_log(k)));
        assert_eq!(logs["type:k0"], 1);
        assert_eq!(logs["type:k255"], 1);
    }

    #[test]
    fn small_keys_without_a_log_share_one_partition() {
        let d = tempfile::tempdir().unwrap();
        let dir = VolumeDir::new(d.path());
        let mut map = PartitionMap::default();
        map.assign(&dir, ["type:old"]).unwrap();
        let groups: BTreeMap<String, u64> = [
            ("type:big", 100),
            ("type:old", 1),
            ("type:a", 5),
            ("type:b", 6),
        ]
        .into_iter()
        .map(|(k, b)| (k.to_string(), b))
        .collect();
        let (parts, of) = coalesce(&groups, &map, PartitionBy::Type, 50);
        assert_eq!(parts["type:big"], 100);
        assert_eq!(parts["type:old"], 1, "a key with a log stays a partition");
        assert_eq!(parts["small:type"], 11);
        assert_eq!(parts.len(), 3);
        assert_eq!(of["type:a"], "small:type");
        assert_eq!(of["type:big"], "type:big");
    }

    #[test]
    fn balance_gives_the_largest_groups_to_the_emptiest_sessions() {
        let groups: BTreeMap<String, u64> = [("a", 10), ("b", 7), ("c", 5), ("d", 1)]
            .into_iter()
            .map(|(k, b)| (k.to_string(), b))
            .collect();
        let owner = balance(&groups, 2);
        assert_eq!(owner["a"], 0);
        assert_eq!(owner["b"], 1);
        assert_eq!(owner["c"], 1);
        assert_eq!(owner["d"], 0);
        assert_eq!(balance(&groups, 9).values().max(), Some(&3));
    }
}
