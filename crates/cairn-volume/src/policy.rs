//! The optimization policy (004; docs/volume.md, step 1): which files the
//! optimization job takes.

use std::path::Path;
use std::time::Duration;

use globset::{Glob, GlobSet, GlobSetBuilder};
use serde::{Deserialize, Serialize};

use cairn_core::{Error, Result};

/// Default minimum age since the last change: 3 days, as Windows.
pub const DEFAULT_MIN_AGE: Duration = Duration::from_secs(3 * 24 * 3600);
/// The shortest minimum age allowed: a write after the scan then always
/// changes the file's ctime to a time the scan did not see.
pub const MIN_AGE_FLOOR: Duration = Duration::from_secs(1);
/// Default minimum size: 1 byte, every non-empty file. Windows skips files
/// under 32 KiB (its per-file cost is a reparse point and a stream map in
/// NTFS); here an optimized file costs one table entry of about 100 bytes
/// and frees every block of its backing file, so small files save space
/// too, and a source tree is mostly small files: on the benchmark's source
/// and document set, 32 KiB left the volume at 3.3x a backup repository of
/// the same data, 4 KiB at 1.43x, 1 byte at 1.01x (docs/volume.md,
/// "Measured"). The age policy keeps hot small files plain.
pub const DEFAULT_MIN_SIZE: u64 = 1;

/// What `volume.json` records and the job applies.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    /// Seconds since the last change (mtime and ctime) before a file is taken.
    pub min_age_secs: u64,
    /// Smallest file taken, in bytes.
    pub min_size: u64,
    /// Glob patterns of paths (relative to `DIR/files`, `/`-separated) never
    /// taken; a pattern without `/` matches a name at any depth (`*.vhdx`).
    #[serde(default)]
    pub excluded: Vec<String>,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            min_age_secs: DEFAULT_MIN_AGE.as_secs(),
            min_size: DEFAULT_MIN_SIZE,
            excluded: Vec::new(),
        }
    }
}

impl Policy {
    /// The minimum age in force: never below [`MIN_AGE_FLOOR`].
    pub fn min_age(&self) -> Duration {
        Duration::from_secs(self.min_age_secs).max(MIN_AGE_FLOOR)
    }

    /// Checks the policy and compiles its exclusions.
    pub fn compile(&self) -> Result<CompiledPolicy> {
        if Duration::from_secs(self.min_age_secs) < MIN_AGE_FLOOR {
            return Err(Error::invalid(format!(
                "minimum age {} s is below the floor of {} s: a write right after the scan \
                 might then leave the file's times unchanged",
                self.min_age_secs,
                MIN_AGE_FLOOR.as_secs()
            )));
        }
        let mut b = GlobSetBuilder::new();
        for p in &self.excluded {
            let pattern = if p.contains('/') {
                p.trim_start_matches('/').to_string()
            } else {
                format!("**/{p}")
            };
            b.add(
                Glob::new(&pattern)
                    .map_err(|e| Error::invalid(format!("excluded pattern {p:?}: {e}")))?,
            );
        }
        let excluded = b
            .build()
            .map_err(|e| Error::invalid(format!("excluded patterns: {e}")))?;
        Ok(CompiledPolicy {
            policy: self.clone(),
            excluded,
        })
    }
}

/// A checked [`Policy`] with its patterns compiled.
#[derive(Clone, Debug)]
pub struct CompiledPolicy {
    pub policy: Policy,
    excluded: GlobSet,
}

impl CompiledPolicy {
    /// Whether `rel` (a path below `DIR/files`) is excluded.
    pub fn excludes(&self, rel: &Path) -> bool {
        self.excluded.is_match(rel)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exclusions_match_names_anywhere_and_paths_from_the_top() {
        let p = Policy {
            excluded: vec!["*.vhdx".into(), "tmp/**".into()],
            ..Policy::default()
        }
        .compile()
        .unwrap();
        assert!(p.excludes(Path::new("a/b/disk.vhdx")));
        assert!(p.excludes(Path::new("disk.vhdx")));
        assert!(p.excludes(Path::new("tmp/x")));
        assert!(!p.excludes(Path::new("a/tmp/x")));
        assert_eq!(p.policy.min_age(), DEFAULT_MIN_AGE);
    }

    #[test]
    fn a_minimum_age_below_one_second_is_refused() {
        let p = Policy {
            min_age_secs: 0,
            ..Policy::default()
        };
        assert!(p
            .compile()
            .unwrap_err()
            .to_string()
            .contains("below the floor"));
    }
}
