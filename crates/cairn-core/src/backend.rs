//! The storage backend trait: a flat namespace of immutable objects.
//!
//! Keys are `/`-separated relative paths (`containers/00/0000000000000001`).
//! Objects are written whole and atomically ([`Backend::write_atomic`]:
//! durable and visible only when it returns, never half-written), read whole
//! or by range, listed by prefix and deleted. Containers, index files, Bloom
//! checkpoints and snapshots are all such objects, so crash safety reduces to
//! ordering these writes (DESIGN: "never modify a written file").

use crate::error::Result;

/// Shared locks let readers proceed together; an exclusive lock admits one writer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockMode {
    Shared,
    Exclusive,
}

/// An object read by [`Backend::read_salvaging`].
#[derive(Debug, Default)]
pub struct Salvaged {
    /// The object's bytes, with every damaged range zero-filled.
    pub bytes: Vec<u8>,
    /// Byte ranges of `bytes` that failed to read (zero-filled), ascending,
    /// each with the reason.
    pub damaged: Vec<(std::ops::Range<u64>, String)>,
}

/// Held for as long as the lock should last; dropping releases it.
pub trait LockGuard: Send + Sync {
    /// Releases the lock and removes what the backend keeps to name it (a
    /// lock file), for a lock whose name nobody takes again: a writer
    /// session's (docs/concurrency.md). Default: released only.
    fn release_removing(self: Box<Self>) {}
}

/// An object being written in pieces and published whole
/// (`streamed.rs`, which hands them out).
pub trait StreamedObject {
    /// Appends `bytes` at the end.
    fn append(&mut self, bytes: &[u8]) -> Result<()>;
    /// Overwrites bytes already appended, from `offset` on. Fails if the
    /// range reaches past what was appended.
    fn patch(&mut self, offset: u64, bytes: &[u8]) -> Result<()>;
    /// Bytes appended so far.
    fn len(&self) -> u64;
    /// Whether nothing was appended yet.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Publishes the object under its key if no object has that key:
    /// `true` if this call created it, `false` if the key was taken (the
    /// existing object is left as it was). Answers as
    /// [`create_new_or_own`] does where a store may lose a create's answer.
    fn create(self: Box<Self>) -> Result<bool>;
}

pub trait Backend: Send + Sync {
    /// Reads the whole object.
    fn read(&self, key: &str) -> Result<Vec<u8>>;

    /// Reads `len` bytes at `offset`; an error if the object is shorter.
    fn read_at(&self, key: &str, offset: u64, len: usize) -> Result<Vec<u8>>;

    /// [`Backend::read_at`] into `out` (replacing what it held), so a
    /// caller reading many ranges reuses one buffer's memory instead of
    /// touching fresh pages for each read. Default: `read_at`'s own buffer
    /// becomes `out`; a backend that reads into memory it is given (local
    /// files) reads into `out`'s capacity.
    fn read_at_into(&self, key: &str, offset: u64, len: usize, out: &mut Vec<u8>) -> Result<()> {
        *out = self.read_at(key, offset, len)?;
        Ok(())
    }

    /// Reads exactly `out.len()` bytes at `offset` into `out`, memory the
    /// caller owns (a volume read filling the reply it sends with no
    /// buffer between); an error if the object is shorter. Default: through
    /// [`Backend::read_at`] and one copy; a backend that reads into memory
    /// it is given (local files) reads into `out`.
    fn read_at_slice(&self, key: &str, offset: u64, out: &mut [u8]) -> Result<()> {
        let bytes = self.read_at(key, offset, out.len())?;
        if bytes.len() != out.len() {
            return Err(crate::Error::corrupt(
                key,
                format!(
                    "read {} bytes at {offset} where {} were asked",
                    bytes.len(),
                    out.len()
                ),
            ));
        }
        out.copy_from_slice(&bytes);
        Ok(())
    }

    /// A hint that bytes `[offset, offset + len)` of the object will be
    /// read soon: a backend that can fetch them in the background (local
    /// files: into the page cache) starts to and returns true. Default:
    /// nothing, false (the caller then reads ahead itself if it wants to).
    /// Never an error: a hint that cannot be taken is dropped.
    fn prefetch(&self, key: &str, offset: u64, len: u64) -> bool {
        let _ = (key, offset, len);
        false
    }

    /// One run of a sequential pass over the object, the first run at
    /// offset 0 and each next one where the last ended (an index merge
    /// reading the old generation): the same bytes as
    /// [`Backend::read_at_into`]. A layer that models a device charges
    /// the pass as one access, as it would a whole read.
    fn read_run(&self, key: &str, offset: u64, len: usize, out: &mut Vec<u8>) -> Result<()> {
        self.read_at_into(key, offset, len, out)
    }

    /// Reads the last `min(len, size)` bytes and returns them with the object's size.
    fn read_tail(&self, key: &str, len: usize) -> Result<(u64, Vec<u8>)> {
        let size = self.size(key)?;
        let take = (len as u64).min(size);
        let bytes = self.read_at(key, size - take, take as usize)?;
        Ok((size, bytes))
    }

    /// Reads the whole object, keeping what can be read of a damaged one:
    /// a layer that authenticates parts of an object on their own (sealed
    /// blocks) zero-fills the parts that fail and lists them, instead of
    /// refusing the object. Never returns a byte that failed to
    /// authenticate. Callers must verify what they use (chunks against
    /// their fingerprints). Default: [`Backend::read`], nothing damaged.
    fn read_salvaging(&self, key: &str) -> Result<Salvaged> {
        Ok(Salvaged {
            bytes: self.read(key)?,
            damaged: Vec::new(),
        })
    }

    /// [`Backend::read`] of an object the caller knows to keep these bytes
    /// under its name for as long as anyone reads it this way (an index
    /// delta of the generation its listing shows newest: none of those is
    /// deleted, so none recreated, while that generation is the newest,
    /// docs/concurrency.md). A layer that keeps copies (the local cache)
    /// may serve it from one and keep it. Default: [`Backend::read`].
    fn read_stable(&self, key: &str) -> Result<Vec<u8>> {
        self.read(key)
    }

    /// Object size in bytes.
    fn size(&self, key: &str) -> Result<u64>;

    fn exists(&self, key: &str) -> Result<bool>;

    /// Writes the object so that it is either entirely present and durable or
    /// absent, replacing any previous object under `key` atomically.
    fn write_atomic(&self, key: &str, data: &[u8]) -> Result<()>;

    /// [`Backend::write_atomic`] of bytes the caller gives up: a store that
    /// sends them as they are (S3's request body) takes them without a
    /// copy. Layers that keep nothing of the bytes pass them on.
    fn write_atomic_owned(&self, key: &str, data: Vec<u8>) -> Result<()> {
        self.write_atomic(key, &data)
    }

    /// Writes the object only if no object exists under `key`, atomically
    /// (create-if-absent: of two racing creators exactly one succeeds, and an
    /// existing object is never replaced). Returns whether it was created.
    fn create_new(&self, key: &str, data: &[u8]) -> Result<bool>;

    /// Deletes the object; deleting a missing object is not an error.
    fn delete(&self, key: &str) -> Result<()>;

    /// Deletes every object named, in no particular order (callers whose
    /// safety rests on an order delete one by one); missing objects are not
    /// an error. On an error some of them may be gone and others not.
    /// Default: [`Backend::delete`] for each; object storage deletes up to
    /// a thousand in one request.
    fn delete_many(&self, keys: &[String]) -> Result<()> {
        keys.iter().try_for_each(|k| self.delete(k))
    }

    /// All keys starting with `prefix` (a directory such as `"snapshots/"`), sorted.
    fn list(&self, prefix: &str) -> Result<Vec<String>>;

    /// Takes the named repository lock. With `wait == false`, fails with
    /// `Error::Locked` at once if it is held incompatibly.
    fn lock(&self, name: &str, mode: LockMode, wait: bool) -> Result<Box<dyn LockGuard>>;

    /// Removes leftovers of interrupted writes (temporary files). Called by a
    /// writer that holds the exclusive lock.
    fn clean_temporaries(&self) -> Result<usize> {
        Ok(0)
    }

    /// Whether an interrupted write can leave something behind that
    /// [`Backend::clean_temporaries`] removes. A store whose writes are
    /// single requests that either happen or not (object storage) says
    /// no, and a writer then skips the clean-up and what it takes to know
    /// that no other process is between writes (a probe of the collector
    /// lock: three requests on object storage).
    fn leaves_temporaries(&self) -> bool {
        true
    }

    /// Whether leftovers of interrupted writes may be present now (a
    /// look, not a clean-up): a writer takes the lock alone to remove
    /// them only when there is something to remove. Default: whenever the
    /// store can leave any.
    fn has_temporaries(&self) -> Result<bool> {
        Ok(self.leaves_temporaries())
    }

    /// A short description for messages (`/path/to/repo`, `memory`).
    fn describe(&self) -> String;

    /// How many whole-object writes a writer should keep in flight at once:
    /// 1 for a local disk (one fsync stream), more for a store whose
    /// requests wait on the network (object storage), where throughput
    /// comes from parallel requests. Every write stays durable when it
    /// returns; this only says how many threads may be writing.
    fn write_parallelism(&self) -> usize {
        1
    }

    /// How many reads a reader should keep in flight at once (restore's
    /// container fetches): 1 for a local disk, where reads are cheap and
    /// decoding is the work, more for a store whose requests wait on the
    /// network.
    fn read_parallelism(&self) -> usize {
        1
    }

    /// Bytes the object takes in the store: its [`Backend::size`], except
    /// under a layer that stores more than it hands out (sealing).
    fn stored_size(&self, key: &str) -> Result<u64> {
        self.size(key)
    }

    /// The key that names content-addressed objects (snapshot records) in
    /// an encrypted repository, where a plain hash of a record would let
    /// whoever guesses the record confirm it; `None`: plain hashes.
    fn naming_key(&self) -> Option<&[u8; 32]> {
        None
    }

    /// This backend's own writer of an object in pieces, if it has one
    /// (`streamed.rs`); `None`: callers of
    /// `streamed::create_streamed` get the pieces buffered and
    /// published by [`create_new_or_own`]. A layer that changes writes
    /// (sealing, fault injection) keeps the default, so its `create_new`
    /// sees every byte.
    fn create_streamed(&self, _key: &str) -> Result<Option<Box<dyn StreamedObject + '_>>> {
        Ok(None)
    }

    /// A note this host keeps beside its local cache of the repository:
    /// derived data of its own that the engine can always do without and
    /// rebuild (the parent check's record, `backup/parent_held.rs`), never
    /// an object of the store. `None`: no local cache, no such note, or a
    /// damaged one. A sealing layer opens what it sealed.
    fn read_local_note(&self, _name: &str) -> Option<Vec<u8>> {
        None
    }

    /// Keeps a local note (see [`Backend::read_local_note`]), best effort:
    /// without a local cache, or when the disk refuses, it is dropped.
    fn write_local_note(&self, _name: &str, _bytes: &[u8]) {}
}

macro_rules! forward_backend {
    ($ptr:ident) => {
        impl<T: Backend + ?Sized> Backend for $ptr<T> {
            fn read(&self, key: &str) -> Result<Vec<u8>> {
                (**self).read(key)
            }
            fn read_stable(&self, key: &str) -> Result<Vec<u8>> {
                (**self).read_stable(key)
            }
            fn read_at(&self, key: &str, offset: u64, len: usize) -> Result<Vec<u8>> {
                (**self).read_at(key, offset, len)
            }
            fn read_at_into(
                &self,
                key: &str,
                offset: u64,
                len: usize,
                out: &mut Vec<u8>,
            ) -> Result<()> {
                (**self).read_at_into(key, offset, len, out)
            }
            fn read_at_slice(&self, key: &str, offset: u64, out: &mut [u8]) -> Result<()> {
                (**self).read_at_slice(key, offset, out)
            }
            fn prefetch(&self, key: &str, offset: u64, len: u64) -> bool {
                (**self).prefetch(key, offset, len)
            }
            fn read_tail(&self, key: &str, len: usize) -> Result<(u64, Vec<u8>)> {
                (**self).read_tail(key, len)
            }
            fn read_salvaging(&self, key: &str) -> Result<Salvaged> {
                (**self).read_salvaging(key)
            }
            fn size(&self, key: &str) -> Result<u64> {
                (**self).size(key)
            }
            fn exists(&self, key: &str) -> Result<bool> {
                (**self).exists(key)
            }
            fn write_atomic(&self, key: &str, data: &[u8]) -> Result<()> {
                (**self).write_atomic(key, data)
            }
            fn write_atomic_owned(&self, key: &str, data: Vec<u8>) -> Result<()> {
                (**self).write_atomic_owned(key, data)
            }
            fn create_new(&self, key: &str, data: &[u8]) -> Result<bool> {
                (**self).create_new(key, data)
            }
            fn delete(&self, key: &str) -> Result<()> {
                (**self).delete(key)
            }
            fn delete_many(&self, keys: &[String]) -> Result<()> {
                (**self).delete_many(keys)
            }
            fn list(&self, prefix: &str) -> Result<Vec<String>> {
                (**self).list(prefix)
            }
            fn lock(&self, name: &str, mode: LockMode, wait: bool) -> Result<Box<dyn LockGuard>> {
                (**self).lock(name, mode, wait)
            }
            fn clean_temporaries(&self) -> Result<usize> {
                (**self).clean_temporaries()
            }
            fn leaves_temporaries(&self) -> bool {
                (**self).leaves_temporaries()
            }
            fn has_temporaries(&self) -> Result<bool> {
                (**self).has_temporaries()
            }
            fn describe(&self) -> String {
                (**self).describe()
            }
            fn write_parallelism(&self) -> usize {
                (**self).write_parallelism()
            }
            fn read_parallelism(&self) -> usize {
                (**self).read_parallelism()
            }
            fn naming_key(&self) -> Option<&[u8; 32]> {
                (**self).naming_key()
            }
            fn create_streamed(&self, key: &str) -> Result<Option<Box<dyn StreamedObject + '_>>> {
                (**self).create_streamed(key)
            }
            fn read_run(
                &self,
                key: &str,
                offset: u64,
                len: usize,
                out: &mut Vec<u8>,
            ) -> Result<()> {
                (**self).read_run(key, offset, len, out)
            }
            fn stored_size(&self, key: &str) -> Result<u64> {
                (**self).stored_size(key)
            }
            fn read_local_note(&self, name: &str) -> Option<Vec<u8>> {
                (**self).read_local_note(name)
            }
            fn write_local_note(&self, name: &str, bytes: &[u8]) {
                (**self).write_local_note(name, bytes)
            }
        }
    };
}

/// [`Backend::create_new`], counting an object that holds exactly `bytes`
/// as created by this call. On object storage a create that the store
/// applied but whose answer was lost is retried and refused by its own
/// object; this tells that apart from a create that lost to another
/// writer. Only for payloads that no other creator of `key` writes
/// byte-identically (a writer's session id, a merge's folded index: two
/// merges that fold the same deltas write the same bytes and may both
/// proceed, since what they delete is the same).
pub fn create_new_or_own(backend: &dyn Backend, key: &str, bytes: &[u8]) -> Result<bool> {
    create_new_or_own_read_with(backend, key, bytes, |k| backend.read(k))
}

/// [`create_new_or_own`] of an object whose name is stable
/// ([`Backend::read_stable`]): the object found in the way is read so, and
/// a local cache keeps it (an index delta another writer took the number
/// of, which this host's next open reads anyway).
pub fn create_new_or_own_stable(backend: &dyn Backend, key: &str, bytes: &[u8]) -> Result<bool> {
    create_new_or_own_read_with(backend, key, bytes, |k| backend.read_stable(k))
}

fn create_new_or_own_read_with(
    backend: &dyn Backend,
    key: &str,
    bytes: &[u8],
    read: impl Fn(&str) -> Result<Vec<u8>>,
) -> Result<bool> {
    if backend.create_new(key, bytes)? {
        return Ok(true);
    }
    match read(key) {
        Ok(found) => Ok(found == bytes),
        Err(crate::Error::NotFound(_)) => Ok(false),
        Err(e) => Err(e),
    }
}

use std::sync::Arc;
forward_backend!(Arc);
forward_backend!(Box);

/// Inside `impl Backend for Wrapper`, passes the named methods through to
/// the wrapped backend `self.FIELD` unchanged: a layer (sealing, caching,
/// counting, fault injection) writes out only the methods it changes.
///
/// ```ignore
/// cairn_core::delegate_backend!(inner: list, lock, describe);
/// ```
#[macro_export]
macro_rules! delegate_backend {
    ($field:ident: $($method:ident),+ $(,)?) => {
        $( $crate::delegate_backend!(@one $field $method); )+
    };
    (@one $f:ident read) => {
        fn read(&self, key: &str) -> $crate::Result<Vec<u8>> {
            self.$f.read(key)
        }
    };
    (@one $f:ident read_stable) => {
        fn read_stable(&self, key: &str) -> $crate::Result<Vec<u8>> {
            self.$f.read_stable(key)
        }
    };
    (@one $f:ident read_at) => {
        fn read_at(&self, key: &str, offset: u64, len: usize) -> $crate::Result<Vec<u8>> {
            self.$f.read_at(key, offset, len)
        }
    };
    (@one $f:ident size) => {
        fn size(&self, key: &str) -> $crate::Result<u64> {
            self.$f.size(key)
        }
    };
    (@one $f:ident write_atomic) => {
        fn write_atomic(&self, key: &str, data: &[u8]) -> $crate::Result<()> {
            self.$f.write_atomic(key, data)
        }
    };
    (@one $f:ident write_atomic_owned) => {
        fn write_atomic_owned(&self, key: &str, data: Vec<u8>) -> $crate::Result<()> {
            self.$f.write_atomic_owned(key, data)
        }
    };
    (@one $f:ident create_new) => {
        fn create_new(&self, key: &str, data: &[u8]) -> $crate::Result<bool> {
            self.$f.create_new(key, data)
        }
    };
    (@one $f:ident delete) => {
        fn delete(&self, key: &str) -> $crate::Result<()> {
            self.$f.delete(key)
        }
    };
    (@one $f:ident delete_many) => {
        fn delete_many(&self, keys: &[String]) -> $crate::Result<()> {
            self.$f.delete_many(keys)
        }
    };
    (@one $f:ident exists) => {
        fn exists(&self, key: &str) -> $crate::Result<bool> {
            self.$f.exists(key)
        }
    };
    (@one $f:ident read_at_into) => {
        fn read_at_into(
            &self,
            key: &str,
            offset: u64,
            len: usize,
            out: &mut Vec<u8>,
        ) -> $crate::Result<()> {
            self.$f.read_at_into(key, offset, len, out)
        }
    };
    (@one $f:ident read_at_slice) => {
        fn read_at_slice(&self, key: &str, offset: u64, out: &mut [u8]) -> $crate::Result<()> {
            self.$f.read_at_slice(key, offset, out)
        }
    };
    (@one $f:ident prefetch) => {
        fn prefetch(&self, key: &str, offset: u64, len: u64) -> bool {
            self.$f.prefetch(key, offset, len)
        }
    };
    (@one $f:ident read_salvaging) => {
        fn read_salvaging(&self, key: &str) -> $crate::Result<$crate::Salvaged> {
            self.$f.read_salvaging(key)
        }
    };
    (@one $f:ident list) => {
        fn list(&self, prefix: &str) -> $crate::Result<Vec<String>> {
            self.$f.list(prefix)
        }
    };
    (@one $f:ident lock) => {
        fn lock(
            &self,
            name: &str,
            mode: $crate::LockMode,
            wait: bool,
        ) -> $crate::Result<Box<dyn $crate::LockGuard>> {
            self.$f.lock(name, mode, wait)
        }
    };
    (@one $f:ident clean_temporaries) => {
        fn clean_temporaries(&self) -> $crate::Result<usize> {
            self.$f.clean_temporaries()
        }
        fn leaves_temporaries(&self) -> bool {
            self.$f.leaves_temporaries()
        }
        fn has_temporaries(&self) -> $crate::Result<bool> {
            self.$f.has_temporaries()
        }
    };
    (@one $f:ident describe) => {
        fn describe(&self) -> String {
            self.$f.describe()
        }
    };
    (@one $f:ident write_parallelism) => {
        fn write_parallelism(&self) -> usize {
            self.$f.write_parallelism()
        }
    };
    (@one $f:ident read_parallelism) => {
        fn read_parallelism(&self) -> usize {
            self.$f.read_parallelism()
        }
    };
    (@one $f:ident naming_key) => {
        fn naming_key(&self) -> Option<&[u8; 32]> {
            self.$f.naming_key()
        }
    };
    (@one $f:ident read_run) => {
        fn read_run(
            &self,
            key: &str,
            offset: u64,
            len: usize,
            out: &mut Vec<u8>,
        ) -> $crate::Result<()> {
            self.$f.read_run(key, offset, len, out)
        }
    };
    (@one $f:ident create_streamed) => {
        fn create_streamed(
            &self,
            key: &str,
        ) -> $crate::Result<Option<Box<dyn $crate::backend::StreamedObject + '_>>> {
            self.$f.create_streamed(key)
        }
    };
    (@one $f:ident stored_size) => {
        fn stored_size(&self, key: &str) -> $crate::Result<u64> {
            self.$f.stored_size(key)
        }
    };
    (@one $f:ident local_notes) => {
        fn read_local_note(&self, name: &str) -> Option<Vec<u8>> {
            self.$f.read_local_note(name)
        }
        fn write_local_note(&self, name: &str, bytes: &[u8]) {
            self.$f.write_local_note(name, bytes)
        }
    };
}
