//! Rewrite schemes in the backup path (`002_c5d78fa3332f6f9f.txt` §3-§5):
//! a stream hands every data chunk, with where dedup found it
//! ([`Location`]), to its [`RewritePolicy`]. Unique chunks are packed at
//! once; a duplicate in an old container that the policy may still rewrite
//! is held (its bytes, or its sizes for a traced chunk) until the policy
//! says [`Action::Rewrite`] (pack it again into the stream's open container,
//! where it becomes the canonical copy: `crate::canonical`, newest wins) or
//! [`Action::Release`] (reference it where it is).
//!
//! | scheme | file |
//! | --- | --- |
//! | Capping, FCRC (fixed segments) | `segment.rs` |
//! | LBW (sliding look-back window) | `lbw.rs` |
//! | the bounds both FCRC and LBW use | `budget.rs` |
//! | HAR (history-aware rewriting), alone or in front of the others | `har.rs` |

mod budget;
pub(crate) mod config;
pub mod har;
mod lbw;
mod segment;
#[cfg(test)]
mod tests;

use cairn_core::{ContainerId, Fingerprint};

pub use budget::History;
pub use config::RewriteConfig;

use crate::dedup::location::Location;

/// A decision on a held duplicate, by its sequence number in the stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Rewrite(u64),
    Release(u64),
}

pub trait RewritePolicy: Send {
    /// The stream opened container `id`: its chunks are the stream's own
    /// recent writes, never "old".
    fn container_opened(&mut self, id: ContainerId);

    /// Data chunk `seq` (stream order) of `size` raw bytes was deduplicated
    /// at `loc`. `true`: hold its bytes until an [`Action`] names it
    /// (possibly one in `out` already).
    fn push(
        &mut self,
        seq: u64,
        fp: Fingerprint,
        size: u64,
        loc: Location,
        out: &mut Vec<Action>,
    ) -> bool;

    /// The stream ends: decide every held chunk.
    fn finish(&mut self, out: &mut Vec<Action>);
}

/// The policy of `cfg` for one stream; `None` for normal deduplication.
/// `container_size` is the LBW's move step; `history` the previous backup;
/// `har` the backup's HAR state where `cfg` has HAR.
pub fn for_config(
    cfg: &RewriteConfig,
    container_size: u64,
    history: Option<History>,
    har: Option<&std::sync::Arc<har::HarState>>,
) -> Option<Box<dyn RewritePolicy>> {
    let inner = scheme(&cfg.without_har(), container_size, history);
    match (cfg.har_threshold(), har) {
        (Some(_), Some(state)) => Some(Box::new(har::Har::new(state.clone(), inner))),
        _ => inner,
    }
}

/// 002's schemes (no HAR).
fn scheme(
    cfg: &RewriteConfig,
    container_size: u64,
    history: Option<History>,
) -> Option<Box<dyn RewritePolicy>> {
    Some(match *cfg {
        RewriteConfig::None | RewriteConfig::Har { .. } => return None,
        RewriteConfig::Capping {
            segment_bytes, cap, ..
        } => Box::new(segment::Segmented::new(
            segment_bytes,
            segment::Select::Capping { cap },
        )),
        RewriteConfig::Fcrc {
            segment_bytes,
            cap,
            loss,
            ..
        } => Box::new(segment::Segmented::new(
            segment_bytes,
            segment::Select::Fcrc(budget::Budget::new(loss, cap, history, segment_bytes)),
        )),
        RewriteConfig::Lbw {
            window,
            cap,
            loss,
            candidate_bytes,
            ..
        } => {
            let cycle = window as u64 * container_size;
            Box::new(lbw::Lbw::new(
                window,
                container_size,
                candidate_bytes,
                budget::Budget::new(loss, cap, history, cycle),
            ))
        }
    })
}
