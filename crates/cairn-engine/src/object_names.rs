//! Storage object names: where each object lives in the repository namespace
//! (`config`, `containers/<id>`, `index/`, `snapshots/`, `keys/<id>`, locks),
//! the paths a `Backend` stores them under (docs/FORMAT.md, "Layout"). Not
//! encryption keys: those are `crypto.rs` and `repo_keys.rs`.

use cairn_core::ContainerId;

pub const CONFIG: &str = "config";
pub const CONTAINERS: &str = "containers/";
pub const INDEX: &str = "index/";
pub const BLOOM: &str = "bloom/";
pub const SNAPSHOTS: &str = "snapshots/";
/// Key files of an encrypted repository (`crypto.rs`).
pub const KEYS: &str = "keys/";
/// The writer lock (exclusive).
pub const WRITE_LOCK: &str = "write";
/// The readers lock: shared by every reader, exclusive for a writer while it
/// deletes objects readers may be using.
pub const READERS_LOCK: &str = "readers";
/// The collector lock (exclusive): one garbage collection at a time; held
/// for the whole collection, while the writer lock is held only for its
/// Merge and its commit.
pub const GC_LOCK: &str = "gc";
/// The compaction lock (exclusive): one merge of the index's deltas at a
/// time, taken beside the writer lock shared (`compact.rs`).
pub const COMPACT_LOCK: &str = "compact";
/// The lock of frugal-index partition `k` (exclusive): held by the one
/// writer appending to that partition's chunk log while others run
/// beside it (`index::open_frugal`, docs/concurrency.md).
pub fn frugal_partition_lock(k: u32) -> String {
    format!("frugal-{k}")
}

/// Writer sessions: one object per running backup (`session.rs`,
/// docs/concurrency.md "A writer's session").
pub const SESSIONS: &str = "sessions/";
/// Snapshot records a backup staged before its final check, one per
/// session, invisible to readers (`session.rs`).
pub const STAGED: &str = "staged/";

/// The object of writer session `id`.
pub fn session(id: &str) -> String {
    format!("{SESSIONS}{id}")
}

/// The commit marker of session `id`, created once (`create_new`): by the
/// writer, `commit`, at its commit point, or by a collection that found the
/// writer gone, `reaped`, which then forbids the commit forever. Whoever
/// creates it first decides.
pub fn session_end(id: &str) -> String {
    format!("{SESSIONS}{id}{SESSION_END_SUFFIX}")
}

pub const SESSION_END_SUFFIX: &str = ".end";

/// The lock a running writer holds for as long as session `id` lives: its
/// holder's death releases it, which is how a collection proves the
/// session gone.
pub fn session_lock(id: &str) -> String {
    format!("session-{id}")
}

/// The snapshot record session `id` staged.
pub fn staged(id: &str) -> String {
    format!("{STAGED}{id}")
}

/// The key file with id `id` (16 hex digits).
pub fn key_file(id: &str) -> String {
    format!("{KEYS}{id}")
}

/// The id of the key file stored as `name` (the inverse of [`key_file`]).
pub fn key_file_id(name: &str) -> &str {
    name.strip_prefix(KEYS).unwrap_or(name)
}

pub fn container(id: ContainerId) -> String {
    format!("containers/{:02x}/{:016x}", id.0 & 0xff, id.0)
}

/// Parses a container key back to its id (`None` for foreign files).
pub fn parse_container(key: &str) -> Option<ContainerId> {
    let rest = key.strip_prefix(CONTAINERS)?;
    let (dir, name) = rest.split_once('/')?;
    if dir.len() != 2 || name.len() != 16 {
        return None;
    }
    let id = u64::from_str_radix(name, 16).ok()?;
    (format!("{:02x}", id & 0xff) == dir).then_some(ContainerId(id))
}

pub fn index(generation: u64) -> String {
    format!("index/{generation:016x}")
}

/// Delta `seq` (1, 2, ...) over index generation `generation`.
pub fn index_delta(generation: u64, seq: u32) -> String {
    format!("index/{generation:016x}.{seq:08x}")
}

/// Parses an index delta key back to `(generation, seq)`.
pub fn parse_index_delta(key: &str) -> Option<(u64, u32)> {
    let (g, s) = key.strip_prefix(INDEX)?.split_once('.')?;
    if g.len() != 16 || s.len() != 8 {
        return None;
    }
    Some((
        u64::from_str_radix(g, 16).ok()?,
        u32::from_str_radix(s, 16).ok()?,
    ))
}

pub fn bloom(generation: u64) -> String {
    format!("bloom/{generation:016x}")
}

pub fn parse_generation(key: &str, prefix: &str) -> Option<u64> {
    let name = key.strip_prefix(prefix)?;
    (name.len() == 16).then(|| u64::from_str_radix(name, 16).ok())?
}

pub fn snapshot(id_hex: &str) -> String {
    format!("snapshots/{id_hex}")
}

/// Where HAR keeps the sparse containers of a backup (`backup/rewrite/har.rs`).
pub const HAR: &str = "har/";

/// The sparse containers snapshot `id_hex`'s backup recorded for HAR.
pub fn har(id_hex: &str) -> String {
    format!("{HAR}{id_hex}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn container_keys_round_trip() {
        for id in [0u64, 1, 255, 256, 0xdead_beef, u64::MAX] {
            let k = container(ContainerId(id));
            assert_eq!(parse_container(&k), Some(ContainerId(id)), "{k}");
        }
        assert_eq!(parse_container("containers/01/zz"), None);
        assert_eq!(parse_container("containers/02/0000000000000001"), None);
        assert_eq!(parse_generation(&index(7), INDEX), Some(7));
        assert_eq!(parse_generation("index/xyz", INDEX), None);
        assert_eq!(parse_generation(&index_delta(7, 2), INDEX), None);
        assert_eq!(parse_index_delta(&index_delta(7, 2)), Some((7, 2)));
        assert_eq!(parse_index_delta(&index(7)), None);
    }
}
