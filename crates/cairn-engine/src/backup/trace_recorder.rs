//! Records what a backup of a path would ingest as a chunk trace: the real
//! walker reads and chunks the files, each chunk is fingerprinted and
//! compressed with the repository configuration to learn its stored size,
//! and every walker event becomes a `TraceEvent`. Replaying the trace
//! (`Source::Trace` with `flat = false`) therefore feeds the engine the very
//! event stream a real backup of the same files would, which is what makes
//! simulated and real counters agree exactly.

use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use crate::pipe::bounded;
use rayon::prelude::*;

use cairn_chunk::ChunkBatch;
use cairn_core::{Error, Result, TraceChunk, TraceEvent, TraceMeta};

use super::events::{EntryMeta, Event};
use super::walker::{Source, Walker};
use crate::config::RepoConfig;
use crate::progress::Progress;

fn meta(m: &EntryMeta) -> TraceMeta {
    TraceMeta {
        mode: m.mode,
        uid: m.uid,
        gid: m.gid,
        mtime_ns: m.mtime_ns,
        size: m.size,
    }
}

/// What a recording saw besides its events.
#[derive(Debug, Default)]
pub struct Recorded {
    pub skipped: Vec<String>,
    pub notices: Vec<String>,
    pub chunks: u64,
    pub bytes: u64,
}

/// Walks `path` as a backup would and hands every event to `sink`, in order.
pub fn record_trace(
    path: &Path,
    cfg: &RepoConfig,
    progress: Arc<Progress>,
    sink: &mut dyn FnMut(TraceEvent) -> Result<()>,
) -> Result<Recorded> {
    let (tx, rx) = bounded::<Vec<Event>>(4);
    let (recycle_tx, recycle_rx) = bounded::<ChunkBatch>(8);
    // A trace records sizes and fingerprints of a tree, not a repository:
    // clear fingerprints and the unseeded chunker.
    let codec = crate::codec::ChunkCodec::new(cfg, None);
    let source = Source::Path(path.to_path_buf());
    let mut rec = Recorded::default();
    std::thread::scope(|s| {
        let walker = s.spawn(|| {
            let mut w = Walker::new(
                cairn_chunk::ChunkerSpec::unseeded(&cfg.chunker),
                tx,
                recycle_rx,
                progress,
                None,
                Arc::new(AtomicU64::new(0)),
            );
            w.run(&source);
            (w.skipped, w.notices)
        });
        let mut result = Ok(());
        for ev in rx.iter().flatten() {
            let r = match ev {
                Event::DirStart { name, meta: m, .. } => sink(TraceEvent::DirStart {
                    name,
                    meta: meta(&m),
                }),
                Event::DirEnd => sink(TraceEvent::DirEnd),
                Event::FileStart { name, meta: m, .. } => sink(TraceEvent::FileStart {
                    name,
                    meta: meta(&m),
                }),
                // A file that failed mid-read (`ok == false`) still ends here:
                // its chunks were recorded, as the backup stored them.
                Event::FileEnd { .. } => sink(TraceEvent::FileEnd),
                Event::Symlink {
                    name,
                    meta: m,
                    target,
                } => sink(TraceEvent::Symlink {
                    name,
                    meta: meta(&m),
                    target,
                }),
                Event::Data(batch) => {
                    let chunks: Vec<TraceChunk> = (0..batch.len())
                        .into_par_iter()
                        .map_init(Vec::new, |out, i| {
                            let c = batch.chunk(i);
                            codec.encode(c, out);
                            TraceChunk {
                                fp: codec.fingerprint(c),
                                size: c.len() as u32,
                                stored_size: out.len() as u32,
                            }
                        })
                        .collect();
                    rec.chunks += chunks.len() as u64;
                    rec.bytes += batch.bytes() as u64;
                    let _ = recycle_tx.try_send(batch);
                    chunks
                        .into_iter()
                        .try_for_each(|c| sink(TraceEvent::Chunk(c)))
                }
                Event::Fingerprinted(chunks) => chunks
                    .into_iter()
                    .try_for_each(|c| sink(TraceEvent::Chunk(c))),
                // Special files and later names of hard-linked files have
                // no chunks of their own: a trace has no place for them.
                Event::Kept(e) if e.kind.is_special() => Ok(()),
                Event::Linked(..) => Ok(()),
                // Stored entries carry no chunks to record.
                Event::Kept(_) | Event::StoredChunks(_) => Err(Error::invalid(
                    "a trace records files read from disk, not stored entries",
                )),
            };
            if r.is_err() {
                result = r;
                break;
            }
        }
        drop(rx);
        let (sk, no) = walker.join().expect("walker thread panicked");
        rec.skipped = sk;
        rec.notices = no;
        result
    })?;
    Ok(rec)
}
