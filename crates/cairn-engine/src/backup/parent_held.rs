//! The parent check's record: for each file of several chunks that a
//! backup kept from its parent unread, the containers that held its recipe
//! nodes and data chunks when the check last looked them up, kept as a
//! local note of this host ([`Backend::read_local_note`]) from one backup
//! to the next.
//!
//! The parent check (`parent.rs`, `ParentTree::stored`) carries a file's
//! content into the new snapshot only if every chunk of it is in a
//! container that is present; done from scratch it reads the file's
//! recipe nodes and looks each chunk up in the index, which was 11% of an
//! incremental backup's CPU with eight writers on S3 (bench/README.md,
//! "writer-cpu.sh"). With the record, a file whose containers are all
//! still present is kept at the cost of a few set lookups.
//!
//! **Why that is enough**: a container's bytes never change once written
//! and its id is never used again (`docs/FORMAT.md`), so a chunk that a
//! present container held when the record was made is in it still. A
//! collection that moved the chunk away deleted the container, which is
//! then absent, and the file is checked from scratch (and recorded anew).
//! Containers a collection has condemned (`gc-pending`) are absent to a
//! backup already. The record only ever adds a way to say "held"; what it
//! says was true when written, and a damaged, missing or foreign note
//! (another repository's cache directory, another key) reads as empty.
//!
//! **Its limit**: the record answers for the copies it names, not for a
//! newer copy of the same chunk that the index names instead (two writers
//! that stored it at once; the newest copy is canonical). Should that
//! newer copy's container be lost from the store (damage, not anything
//! cairn does), the full check would store the chunk again and the record
//! does not; the copy the record names is still there, so `check` reports
//! the loss and `repair index`, which indexes every present container's
//! chunks, points the chunk back at it.
//!
//! **Where**: one note per host name in the repository's local cache
//! (none for a repository without one: a local repository's check is
//! cheap), sealed like the store's objects in an encrypted repository.
//! A backup writes the entries it used or made, so the note follows the
//! host's current tree.
//!
//! The note's bytes: `cairn_format::parent_held` (`docs/FORMAT.md`,
//! "Local notes").

use std::collections::{HashMap, HashSet};
use std::hash::BuildHasherDefault;

use cairn_core::ids::FpHasher;
use cairn_core::{Backend, ContainerId, Fingerprint};
use cairn_format::parent_held::{decode_parent_held, encode_parent_held, MAX_CONTAINERS_PER_ENTRY};
use parking_lot::Mutex;

/// The containers each content root's chunks were found in.
type Held = HashMap<Fingerprint, Box<[ContainerId]>, BuildHasherDefault<FpHasher>>;

/// The record of one host, as read at the backup's start and as this
/// backup confirms and extends it.
pub(crate) struct ParentHeld {
    note: String,
    known: Held,
    used: Mutex<Held>,
}

impl ParentHeld {
    /// The record `backend` keeps for `host`; empty when there is none.
    pub fn load(backend: &dyn Backend, host: &str) -> Self {
        let note = note_name(host);
        let known = backend
            .read_local_note(&note)
            .and_then(|b| decode(&b))
            .unwrap_or_default();
        ParentHeld {
            note,
            known,
            used: Mutex::new(Held::default()),
        }
    }

    /// Whether the record says that `root`'s chunks are all in containers
    /// of `present`; a yes is kept for the next backup.
    pub fn holds(&self, root: &Fingerprint, present: &HashSet<ContainerId>) -> bool {
        let Some(ids) = self.known.get(root) else {
            return false;
        };
        let held = ids.iter().all(|c| present.contains(c));
        if held {
            self.used.lock().insert(*root, ids.clone());
        }
        held
    }

    /// Records that `root`'s nodes and chunks were found in `containers`.
    pub fn record(&self, root: Fingerprint, mut containers: Vec<ContainerId>) {
        containers.sort_unstable();
        containers.dedup();
        if containers.len() <= MAX_CONTAINERS_PER_ENTRY {
            self.used.lock().insert(root, containers.into());
        }
    }

    /// Writes what this backup used and made as the host's record, best
    /// effort; nothing when that is the record it read (a backup of an
    /// unchanged tree, or one that met no file of several chunks): a cache
    /// file rewritten costs a file creation, every backup.
    pub fn save(&self, backend: &dyn Backend) {
        let used = self.used.lock();
        if *used == self.known {
            return;
        }
        backend.write_local_note(&self.note, &encode(&used));
    }
}

/// The note of `host`: named by a hash, since a host name may hold any
/// character.
fn note_name(host: &str) -> String {
    let h = blake3::hash(host.as_bytes()).to_hex();
    format!("parent-held-{}", &h[..16])
}

fn encode(held: &Held) -> Vec<u8> {
    encode_parent_held(held.iter().map(|(root, ids)| (root, &ids[..])))
}

/// The record in `b`; `None` if it is not one, whole and exactly.
fn decode(b: &[u8]) -> Option<Held> {
    decode_parent_held(b)
        .ok()
        .map(|entries| entries.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_backend::MemBackend;

    fn fp(b: u8) -> Fingerprint {
        Fingerprint::from_slice(&[b; 32])
    }

    #[test]
    fn only_containers_still_present_hold_and_only_used_entries_are_kept() {
        let store = MemBackend::new();
        let first = ParentHeld::load(&store, "h");
        first.record(fp(1), vec![ContainerId(5), ContainerId(2), ContainerId(5)]);
        first.record(fp(2), vec![ContainerId(7)]);
        first.save(&store);
        assert!(ParentHeld::load(&store, "other host").known.is_empty());

        let second = ParentHeld::load(&store, "h");
        let present: HashSet<ContainerId> = [2, 5].map(ContainerId).into();
        assert!(second.holds(&fp(1), &present));
        assert!(!second.holds(&fp(2), &present), "container 7 is gone");
        assert!(!second.holds(&fp(3), &present), "never recorded");
        second.save(&store);
        let third = ParentHeld::load(&store, "h");
        // Unchanged, the record is not written again.
        assert!(third.holds(&fp(1), &present));
        store.write_local_note(&note_name("h"), b"left alone");
        third.save(&store);
        assert_eq!(
            store.read_local_note(&note_name("h")).unwrap(),
            b"left alone"
        );
        assert_eq!(third.known.len(), 1, "the entry not used is dropped");
        assert_eq!(&*third.known[&fp(1)], &[ContainerId(2), ContainerId(5)]);

        // A damaged note reads as no record.
        let mut bytes = store.read_local_note(&note_name("h")).unwrap();
        bytes.pop();
        store.write_local_note(&note_name("h"), &bytes);
        assert!(ParentHeld::load(&store, "h").known.is_empty());
    }
}
