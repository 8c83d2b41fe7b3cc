//! The rewrite scheme of a repository or of one backup (`rewrite` in the
//! config, `--rewrite` per backup), with typed parameters, and its text
//! form: `none`, `capping:segment=20MiB,cap=20`, `fcrc:loss=5,cap=20`,
//! `lbw:window=8,loss=5,cap=20,candidates=16MiB`, `har:utilization=50`
//! (any parameter may be left out for its default). HAR combines with the
//! others as a parameter of theirs: `lbw:loss=5,har=50` rewrites what HAR
//! names first and hands the rest to LBW (`har.rs`).

use std::fmt;

use cairn_core::{Error, Result};
use serde::{Deserialize, Serialize};

/// Which duplicates a backup stores again for restore speed
/// (`002_c5d78fa3332f6f9f.txt` §3-§5).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "scheme", rename_all = "snake_case", deny_unknown_fields)]
pub enum RewriteConfig {
    /// Normal deduplication: every duplicate is referenced where it is.
    #[default]
    None,
    /// Capping (Lillibridge et al., FAST'13, as 002 §2-§3 describe it): per
    /// fixed segment, at most `cap` old containers are referenced; chunks
    /// of the others are rewritten.
    Capping {
        segment_bytes: u64,
        cap: u32,
        /// HAR's utilization threshold in front of it (`har.rs`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        har: Option<f64>,
    },
    /// FCRC (002 §3.2): per segment, a container-referenced-count threshold
    /// between the bound from the dedup-ratio-reduction limit `loss` and the
    /// bound from `cap` container reads, with credits carried over.
    Fcrc {
        segment_bytes: u64,
        cap: u32,
        /// The dedup-ratio reduction limit x, a fraction (0.05 = 5%).
        loss: f64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        har: Option<f64>,
    },
    /// LBW (002 §4-§5): a look-back window of `window` containers moved a
    /// container at a time, a rewrite candidate cache of `candidate_bytes`,
    /// and the threshold T_dc adjusted by Algorithm 1 every `window` moves.
    Lbw {
        window: u32,
        cap: u32,
        loss: f64,
        candidate_bytes: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        har: Option<f64>,
    },
    /// HAR (Fu et al., USENIX ATC 2014, "history-aware rewriting"): the
    /// duplicates that point into a container the previous backup of the
    /// same host used below `utilization` of its size (a *sparse*
    /// container) are stored again; every other duplicate is referenced.
    Har {
        /// The utilization threshold, a fraction (0.5 = 50%, HAR's default).
        utilization: f64,
    },
}

/// 002 §6 runs Capping and FCRC with segments of 5 containers (4 MiB each).
pub const DEFAULT_SEGMENT_BYTES: u64 = 20 << 20;
/// Containers referenced per segment (Capping's level T, FCRC's and LBW's Cap).
pub const DEFAULT_CAP: u32 = 20;
/// 002 §6 tunes every scheme to a 7% dedup-ratio reduction; we bound it at 5%.
pub const DEFAULT_LOSS: f64 = 0.05;
/// 002 §6: an LBW of 8 containers (matching an 8-container FAA).
pub const DEFAULT_WINDOW: u32 = 8;
pub const DEFAULT_CANDIDATE_BYTES: u64 = 16 << 20;
/// HAR's utilization threshold (its paper's default: 50%).
pub const DEFAULT_HAR_UTILIZATION: f64 = 0.5;

impl RewriteConfig {
    /// The scheme of a new repository: LBW with a 15% per-backup budget
    /// (which cost 3.9% of the dedup ratio over the 20-generation DDFS and
    /// lineage workloads for +10.5% and +3.7% mean speed factor; the
    /// measurements and the choice: `docs/restore-speed.md`).
    pub fn default_for_new_repositories() -> Self {
        RewriteConfig::Lbw {
            window: DEFAULT_WINDOW,
            cap: DEFAULT_CAP,
            loss: 0.15,
            candidate_bytes: DEFAULT_CANDIDATE_BYTES,
            har: None,
        }
    }

    /// HAR's utilization threshold, alone or in front of this scheme.
    pub fn har_threshold(&self) -> Option<f64> {
        match *self {
            RewriteConfig::None => None,
            RewriteConfig::Har { utilization } => Some(utilization),
            RewriteConfig::Capping { har, .. }
            | RewriteConfig::Fcrc { har, .. }
            | RewriteConfig::Lbw { har, .. } => har,
        }
    }

    /// The scheme behind HAR: this one without it (`None` for HAR alone).
    pub fn without_har(&self) -> RewriteConfig {
        let mut inner = *self;
        match &mut inner {
            RewriteConfig::Har { .. } => return RewriteConfig::None,
            RewriteConfig::None => {}
            RewriteConfig::Capping { har, .. }
            | RewriteConfig::Fcrc { har, .. }
            | RewriteConfig::Lbw { har, .. } => *har = None,
        }
        inner
    }

    pub fn name(&self) -> &'static str {
        match self {
            RewriteConfig::None => "none",
            RewriteConfig::Capping { .. } => "capping",
            RewriteConfig::Fcrc { .. } => "fcrc",
            RewriteConfig::Lbw { .. } => "lbw",
            RewriteConfig::Har { .. } => "har",
        }
    }

    pub fn is_none(&self) -> bool {
        *self == RewriteConfig::None
    }

    /// Parses the text form (see the module doc).
    pub fn parse(s: &str) -> Result<Self> {
        let (scheme, params) = s.split_once(':').unwrap_or((s, ""));
        let mut cfg = match scheme.trim().to_ascii_lowercase().as_str() {
            "none" | "normal" => RewriteConfig::None,
            "capping" => RewriteConfig::Capping {
                segment_bytes: DEFAULT_SEGMENT_BYTES,
                cap: DEFAULT_CAP,
                har: None,
            },
            "fcrc" => RewriteConfig::Fcrc {
                segment_bytes: DEFAULT_SEGMENT_BYTES,
                cap: DEFAULT_CAP,
                loss: DEFAULT_LOSS,
                har: None,
            },
            "lbw" => RewriteConfig::Lbw {
                window: DEFAULT_WINDOW,
                cap: DEFAULT_CAP,
                loss: DEFAULT_LOSS,
                candidate_bytes: DEFAULT_CANDIDATE_BYTES,
                har: None,
            },
            "har" => RewriteConfig::Har {
                utilization: DEFAULT_HAR_UTILIZATION,
            },
            other => {
                return Err(Error::invalid(format!(
                    "rewrite scheme {other:?}: must be none, capping, fcrc, lbw or har"
                )))
            }
        };
        for kv in params.split(',').filter(|p| !p.trim().is_empty()) {
            let (k, v) = kv.split_once('=').ok_or_else(|| {
                Error::invalid(format!("rewrite parameter {kv:?}: expected key=value"))
            })?;
            cfg.set(k.trim(), v.trim())?;
        }
        cfg.validate()?;
        Ok(cfg)
    }

    fn set(&mut self, key: &str, v: &str) -> Result<()> {
        let name = self.name();
        let bad = || {
            Error::invalid(format!(
                "rewrite parameter {key:?} does not apply to {name}"
            ))
        };
        match (self, key) {
            (
                RewriteConfig::Capping { segment_bytes, .. }
                | RewriteConfig::Fcrc { segment_bytes, .. },
                "segment",
            ) => *segment_bytes = parse_bytes(v)?,
            (
                RewriteConfig::Capping { cap, .. }
                | RewriteConfig::Fcrc { cap, .. }
                | RewriteConfig::Lbw { cap, .. },
                "cap",
            ) => *cap = parse_num(key, v)?,
            (RewriteConfig::Fcrc { loss, .. } | RewriteConfig::Lbw { loss, .. }, "loss") => {
                *loss = parse_percent(v)?
            }
            (RewriteConfig::Lbw { window, .. }, "window") => *window = parse_num(key, v)?,
            (RewriteConfig::Har { utilization }, "utilization") => *utilization = parse_percent(v)?,
            (
                RewriteConfig::Capping { har, .. }
                | RewriteConfig::Fcrc { har, .. }
                | RewriteConfig::Lbw { har, .. },
                "har",
            ) => *har = Some(parse_percent(v)?),
            (
                RewriteConfig::Lbw {
                    candidate_bytes, ..
                },
                "candidates",
            ) => *candidate_bytes = parse_bytes(v)?,
            _ => return Err(bad()),
        }
        Ok(())
    }

    pub fn validate(&self) -> Result<()> {
        if self.har_threshold().is_some_and(|u| !(u > 0.0 && u <= 1.0)) {
            return Err(Error::invalid(format!(
                "rewrite {self}: HAR's utilization threshold must be above 0% and at most 100%"
            )));
        }
        let ok = match *self {
            RewriteConfig::None | RewriteConfig::Har { .. } => true,
            RewriteConfig::Capping { segment_bytes, .. } => segment_bytes > 0,
            RewriteConfig::Fcrc {
                segment_bytes,
                loss,
                ..
            } => segment_bytes > 0 && (0.0..1.0).contains(&loss),
            RewriteConfig::Lbw {
                window,
                loss,
                candidate_bytes,
                ..
            } => window >= 2 && (0.0..1.0).contains(&loss) && candidate_bytes > 0,
        };
        if ok {
            Ok(())
        } else {
            Err(Error::invalid(format!(
                "rewrite {self}: segment and candidate cache must be positive, the window at \
                 least 2 containers, the loss limit below 100%"
            )))
        }
    }
}

impl fmt::Display for RewriteConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            RewriteConfig::None => write!(f, "none")?,
            RewriteConfig::Capping {
                segment_bytes, cap, ..
            } => write!(f, "capping:segment={segment_bytes},cap={cap}")?,
            RewriteConfig::Fcrc {
                segment_bytes,
                cap,
                loss,
                ..
            } => write!(
                f,
                "fcrc:segment={segment_bytes},cap={cap},loss={}",
                loss * 100.0
            )?,
            RewriteConfig::Lbw {
                window,
                cap,
                loss,
                candidate_bytes,
                ..
            } => write!(
                f,
                "lbw:window={window},cap={cap},loss={},candidates={candidate_bytes}",
                loss * 100.0
            )?,
            RewriteConfig::Har { utilization } => {
                return write!(f, "har:utilization={}", utilization * 100.0)
            }
        }
        match self.har_threshold() {
            Some(u) => write!(f, ",har={}", u * 100.0),
            None => Ok(()),
        }
    }
}

fn parse_num(key: &str, v: &str) -> Result<u32> {
    v.parse()
        .map_err(|_| Error::invalid(format!("rewrite parameter {key}={v:?}: not a number")))
}

/// A percentage ("5", "5%") as a fraction.
fn parse_percent(v: &str) -> Result<f64> {
    let n: f64 = v
        .trim_end_matches('%')
        .parse()
        .map_err(|_| Error::invalid(format!("rewrite loss {v:?}: not a percentage")))?;
    Ok(n / 100.0)
}

fn parse_bytes(v: &str) -> Result<u64> {
    let split = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let (num, unit) = v.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| Error::invalid(format!("rewrite size {v:?}: expected e.g. 20MiB")))?;
    let mult: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" | "kb" => 1 << 10,
        "m" | "mib" | "mb" => 1 << 20,
        "g" | "gib" | "gb" => 1 << 30,
        _ => return Err(Error::invalid(format!("rewrite size {v:?}: unknown unit"))),
    };
    Ok(n * mult)
}
