//! The data path's fallback to the scrub's second copies (docs/volume.md,
//! "Scrub"): a read of an optimized range that the store cannot serve
//! sound (a damaged or missing chunk) is served from the chunk's copy in
//! `DIR/copies/` (`scrub/copies.rs` makes them), if it has one, until a
//! scrub repairs the store. Apart from the scrub so the content state
//! uses it without depending on the job.

use parking_lot::Mutex;

use cairn_core::{Error, Result};
use cairn_engine::chunk_repair::{self, RecipeWalker};
use cairn_engine::Repository;
use cairn_format::dir::BlobRef;

/// The directory of the copies, below the volume directory.
pub const COPIES_DIR: &str = "copies";

/// A reader of stream-map ranges whose chunks come from the store, or,
/// where the store cannot give one sound, from its second copy. `None`
/// while the volume of the store `repo` has no copies.
pub fn copy_reader(repo: &Repository) -> Result<Option<RecipeWalker>> {
    let Some(dir) = repo
        .local_root()
        .and_then(|store| store.parent())
        .map(|root| root.join(COPIES_DIR))
        .filter(|dir| dir.is_dir())
    else {
        return Ok(None);
    };
    let side = chunk_repair::open_side_store(repo, &dir, false)?;
    Ok(Some(RecipeWalker::open(repo)?.with_side_store(side)))
}

/// Appends `blob`'s bytes `[offset, offset + len)` to `out` through
/// `fallback` (a [`copy_reader`]).
pub fn read_through_copies(
    fallback: &Mutex<Option<RecipeWalker>>,
    blob: &BlobRef,
    offset: u64,
    len: usize,
    out: &mut Vec<u8>,
) -> Result<()> {
    match fallback.lock().as_mut() {
        Some(reader) => reader.read_at(blob, offset, len, out),
        None => Err(Error::invalid("the volume has no second copies")),
    }
}
