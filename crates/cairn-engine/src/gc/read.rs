//! How a collection reads containers: every read goes through these, so
//! that a container it cannot read (damaged, or a file under `containers/`
//! that is not a container) stops it with the file's name and the repair.
//! And how it reads the index: every entry, with what a dry run's Merge
//! did not write ([`Entries`]).

use cairn_core::{ContainerId, Error, FpMap, Result};
use cairn_format::container::ContainerMeta;
use cairn_format::index::IndexEntry;

use crate::container_log::{ContainerStore, LoadedContainer};
use crate::index::disk_index::DiskIndex;

/// A container's metadata section, as every phase reads it: damage (or a
/// file under `containers/` that is not a container) stops the collection
/// before anything is deleted, with what `container_damage` says.
pub(crate) fn meta_of(log: &dyn ContainerStore, id: ContainerId) -> Result<ContainerMeta> {
    log.read_meta(id).map_err(|e| container_damage(id, e))
}

/// A whole container (Copy), with damage explained as [`meta_of`] does. A
/// damaged data section is not an error here: its chunks are verified one
/// by one as they are copied.
pub(crate) fn whole_container(
    log: &dyn ContainerStore,
    id: ContainerId,
) -> Result<LoadedContainer> {
    log.read(id).map_err(|e| container_damage(id, e))
}

/// The error of a container the collection cannot read: which file, that it
/// is damaged or not a container, that nothing was deleted, and the repair
/// (the same as `check` names for an unreadable container, after the file
/// is moved out of the way: a collection must know every stored chunk).
fn container_damage(id: ContainerId, e: Error) -> Error {
    let detail = match e {
        Error::Corrupt { detail, .. } => detail,
        e if e.is_corruption() => e.to_string(),
        other => return other,
    };
    Error::corrupt(
        format!("container file {}", crate::object_names::container(id)),
        format!(
            "{detail}; it is damaged or not a cairn container, and garbage collection \
             stopped before deleting anything (`cairn check` names what it held; move the \
             file out of the repository, then run `cairn repair index` and \
             `cairn repair snapshots`)"
        ),
    )
}

/// Every index entry: the committed index, or in a dry run the index plus
/// the containers it does not cover yet (nothing is written).
pub(super) struct Entries {
    pub disk: DiskIndex,
    pub pending: FpMap<ContainerId>,
}

impl Entries {
    pub fn for_each(&self, f: &mut dyn FnMut(&IndexEntry)) -> Result<u64> {
        let mut n = 0;
        self.disk.for_each_entry(&mut |e| {
            if !self.pending.contains_key(&e.fp) {
                n += 1;
                f(e);
            }
        })?;
        for (fp, c) in &self.pending {
            n += 1;
            f(&IndexEntry {
                fp: *fp,
                container: *c,
            });
        }
        Ok(n)
    }

    pub fn len(&self) -> u64 {
        self.disk.entry_count() + self.pending.len() as u64
    }
}
