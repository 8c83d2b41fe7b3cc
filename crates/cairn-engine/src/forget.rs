//! `forget`: which snapshots a retention policy keeps, and why; and
//! `fastcopy` (`003_ea5fccc485a97c5d.txt` §2: a new name for an existing
//! tree, constant time).
//!
//! The rules are the ones restic users know (docs/gc.md, "Retention"):
//! snapshots are grouped (by host and paths by default), each group is
//! taken newest first, and a snapshot is kept if any rule keeps it:
//!
//! - `last N`: the N newest;
//! - `hourly/daily/weekly/monthly/yearly N`: the newest snapshot of each of
//!   the N newest hours (days, ...) that have a snapshot;
//! - `within D`: every snapshot less than D older than the group's newest;
//! - `tags`: every snapshot carrying one of the tags.
//!
//! Differences from restic: calendar buckets are in UTC (restic uses local
//! time), weeks run Monday to Sunday by day count (restic uses ISO week
//! numbers, which differ only around New Year), and a negative count for
//! "unlimited" is not accepted (use a large number).
//!
//! Forgetting removes snapshot records only; their data goes at the next
//! garbage collection (`crate::gc`).

use std::collections::BTreeMap;

use serde::Serialize;

use cairn_core::{Error, Result};
use cairn_format::snapshot::SnapshotStats;

use crate::catalog::{self, SnapshotInfo};
use crate::repo::{Repository, WriteLock};

/// A retention policy; a rule with count 0 (or no duration) keeps nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Retention {
    pub last: u32,
    pub hourly: u32,
    pub daily: u32,
    pub weekly: u32,
    pub monthly: u32,
    pub yearly: u32,
    /// Keep snapshots less than this many nanoseconds older than the
    /// newest of their group.
    pub within_ns: Option<i64>,
    pub tags: Vec<String>,
}

impl Retention {
    /// No rule at all: `forget` refuses such a policy rather than removing
    /// every snapshot.
    pub fn is_empty(&self) -> bool {
        *self == Retention::default()
    }
}

pub use crate::catalog::GroupBy;

/// One snapshot's fate and the rules behind it.
#[derive(Clone, Debug, Serialize)]
pub struct Decision {
    pub id: String,
    pub time_unix_ns: i64,
    pub group: String,
    pub keep: bool,
    /// The rules that keep it (empty when it goes).
    pub reasons: Vec<String>,
}

/// Parses a restic-style duration: `1y2m3d4h` (years of 365 days, months
/// of 30 days), into nanoseconds.
pub fn parse_within(s: &str) -> Result<i64> {
    let bad = || {
        Error::invalid(format!(
            "duration {s:?}: expected numbers with units y, m, d, h, e.g. 1y6m or 36h"
        ))
    };
    let mut total: i64 = 0;
    let mut num = String::new();
    for c in s.trim().chars() {
        if c.is_ascii_digit() {
            num.push(c);
            continue;
        }
        let n: i64 = num.parse().map_err(|_| bad())?;
        num.clear();
        let hours = match c {
            'y' => 365 * 24,
            'm' => 30 * 24,
            'd' => 24,
            'h' => 1,
            _ => return Err(bad()),
        };
        total = n
            .checked_mul(hours * 3_600_000_000_000)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(bad)?;
    }
    if !num.is_empty() || total == 0 {
        return Err(bad());
    }
    Ok(total)
}

/// The calendar buckets of a time: hour, day, week, month, year.
fn buckets(t_ns: i64) -> [i64; 5] {
    let secs = t_ns.div_euclid(1_000_000_000);
    let hour = secs.div_euclid(3600);
    let day = secs.div_euclid(86_400);
    // 1970-01-01 was a Thursday: +3 makes weeks start on Monday.
    let week = (day + 3).div_euclid(7);
    let (y, m, _) = cairn_core::time::civil_from_days(day);
    [hour, day, week, y * 12 + i64::from(m) - 1, y]
}

const BUCKET_RULES: [&str; 5] = ["hourly", "daily", "weekly", "monthly", "yearly"];

/// Applies `policy` to `snapshots`; one decision per snapshot, newest first
/// within each group, groups in name order.
pub fn plan(snapshots: &[SnapshotInfo], policy: &Retention, group_by: GroupBy) -> Vec<Decision> {
    let mut groups: BTreeMap<String, Vec<&SnapshotInfo>> = BTreeMap::new();
    for s in snapshots {
        groups
            .entry(group_by.key(&s.record).to_string())
            .or_default()
            .push(s);
    }
    let mut out = Vec::new();
    for (group, mut members) in groups {
        members.sort_by(|a, b| (b.record.time_unix_ns, &b.id).cmp(&(a.record.time_unix_ns, &a.id)));
        let newest = members.first().map_or(0, |s| s.record.time_unix_ns);
        let counts = [
            policy.hourly,
            policy.daily,
            policy.weekly,
            policy.monthly,
            policy.yearly,
        ];
        let mut last_bucket: [Option<i64>; 5] = [None; 5];
        let mut used = [0u32; 5];
        for (i, s) in members.iter().enumerate() {
            let mut reasons = Vec::new();
            if (i as u32) < policy.last {
                reasons.push(format!("last {}", policy.last));
            }
            let b = buckets(s.record.time_unix_ns);
            for k in 0..5 {
                // Newest first: the first snapshot met in a bucket is its newest.
                if used[k] < counts[k] && last_bucket[k] != Some(b[k]) {
                    used[k] += 1;
                    last_bucket[k] = Some(b[k]);
                    reasons.push(format!("{} {}", BUCKET_RULES[k], counts[k]));
                }
            }
            if let Some(w) = policy.within_ns {
                if newest - s.record.time_unix_ns < w {
                    reasons.push("within".into());
                }
            }
            if let Some(t) = s.record.tags.iter().find(|t| policy.tags.contains(t)) {
                reasons.push(format!("tag {t}"));
            }
            out.push(Decision {
                id: s.id.clone(),
                time_unix_ns: s.record.time_unix_ns,
                group: group.clone(),
                keep: !reasons.is_empty(),
                reasons,
            });
        }
    }
    out
}

/// What a forget leaves in the repository: the snapshot records that stay
/// and those it removes (or, in a dry run, would remove). Counted over every
/// record in the repository, readable or not, so that forgetting named
/// snapshots reports the others as kept, and a policy applied to a
/// filtered set counts the snapshots outside the filter as kept too.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Tally {
    pub kept: usize,
    pub removed: usize,
}

/// The [`Tally`] of removing `ids` (full ids) from the repository as it is
/// now; call it before [`remove`]. An id twice, or one that is not there,
/// counts once or not at all.
pub fn tally(repo: &Repository, ids: &[String]) -> Result<Tally> {
    let removing: std::collections::HashSet<&str> = ids.iter().map(String::as_str).collect();
    let mut t = Tally::default();
    for key in repo.backend().list(crate::object_names::SNAPSHOTS)? {
        let Some(id) = key.strip_prefix(crate::object_names::SNAPSHOTS) else {
            continue;
        };
        if removing.contains(id) {
            t.removed += 1;
        } else {
            t.kept += 1;
        }
    }
    Ok(t)
}

/// Removes the snapshot records of `ids` (full ids). The data they alone
/// reference stays until the next garbage collection. HAR's records of
/// sparse containers (`har/<id>`) whose snapshot is gone go too.
pub fn remove(repo: &Repository, _lock: &WriteLock, ids: &[String]) -> Result<()> {
    for id in ids {
        catalog::remove(&**repo.backend(), id)?;
    }
    prune_har(&**repo.backend())
}

/// Deletes every `har/<id>` whose snapshot record is absent (forgotten, or
/// left by a forget that stopped between the two). `har/` is listed before
/// `snapshots/`: a backup writes its record before its `har/` object, so
/// one listed here has its record listed next, and a backup committing
/// meanwhile never loses its history.
fn prune_har(backend: &dyn cairn_core::Backend) -> Result<()> {
    let har = backend.list(crate::object_names::HAR)?;
    if har.is_empty() {
        return Ok(());
    }
    let records: std::collections::HashSet<String> = backend
        .list(crate::object_names::SNAPSHOTS)?
        .into_iter()
        .filter_map(|k| {
            k.strip_prefix(crate::object_names::SNAPSHOTS)
                .map(str::to_string)
        })
        .collect();
    for key in har {
        let id = key.strip_prefix(crate::object_names::HAR).unwrap_or("");
        if !records.contains(id) {
            match backend.delete(&key) {
                Err(e) if !e.is_not_found() => return Err(e),
                _ => {}
            }
        }
    }
    Ok(())
}

/// `fastcopy` (003 §2): a new snapshot record naming the same tree root
/// as `source`. Nothing but the record is written; the new record's time
/// is now and its tags are `tags` (or the source's when empty).
pub fn fastcopy(
    repo: &Repository,
    _lock: &WriteLock,
    source: &SnapshotInfo,
    tags: Vec<String>,
) -> Result<SnapshotInfo> {
    let mut record = source.record.clone();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64);
    // Two copies in the same nanosecond would hash equal: keep times distinct.
    record.time_unix_ns = now.max(source.record.time_unix_ns + 1);
    if !tags.is_empty() {
        record.tags = tags;
    }
    // The tree's sizes and counts stay; the run's counters do not apply.
    let tree = &source.record.stats;
    record.stats = SnapshotStats {
        logical_bytes: tree.logical_bytes,
        files: tree.files,
        dirs: tree.dirs,
        symlinks: tree.symlinks,
        chunks: tree.chunks,
        data_chunks: tree.data_chunks,
        ..Default::default()
    };
    record.fastcopy_of = Some(source.id.clone());
    // A copy replaces nothing (the source stays).
    record.original = None;
    let id = catalog::commit(&**repo.backend(), &record)?;
    Ok(SnapshotInfo { id, record })
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: i64 = 3_600_000_000_000;
    const D: i64 = 24 * H;

    fn snap(id: &str, t: i64, host: &str, tags: &[&str]) -> SnapshotInfo {
        SnapshotInfo {
            id: id.into(),
            record: crate::catalog::tests::record(t, host, &["/data"], tags),
        }
    }

    fn kept(d: &[Decision]) -> Vec<&str> {
        let mut k: Vec<&str> = d.iter().filter(|d| d.keep).map(|d| d.id.as_str()).collect();
        k.sort();
        k
    }

    #[test]
    fn keep_last_and_daily_take_the_newest_of_each_day() {
        // Two snapshots a day for 5 days (days 100..105), at 01:00 and 13:00.
        let mut s = Vec::new();
        for day in 0..5 {
            for (j, h) in [1, 13].iter().enumerate() {
                s.push(snap(
                    &format!("{day}{j}"),
                    (100 + day) * D + h * H,
                    "a",
                    &[],
                ));
            }
        }
        let last2 = plan(
            &s,
            &Retention {
                last: 2,
                ..Default::default()
            },
            GroupBy::default(),
        );
        assert_eq!(kept(&last2), vec!["40", "41"]);
        let daily3 = plan(
            &s,
            &Retention {
                daily: 3,
                ..Default::default()
            },
            GroupBy::default(),
        );
        assert_eq!(kept(&daily3), vec!["21", "31", "41"]);
        let d = daily3.iter().find(|d| d.id == "31").unwrap();
        assert_eq!(d.reasons, vec!["daily 3"]);
    }

    #[test]
    fn within_counts_from_the_newest_snapshot_and_tags_keep() {
        let s = vec![
            snap("a", 10 * D, "h", &[]),
            snap("b", 9 * D, "h", &["keep"]),
            snap("c", 8 * D + H, "h", &[]),
            snap("d", 7 * D, "h", &[]),
        ];
        let p = Retention {
            within_ns: Some(parse_within("2d").unwrap()),
            tags: vec!["keep".into()],
            ..Default::default()
        };
        assert_eq!(kept(&plan(&s, &p, GroupBy::default())), vec!["a", "b", "c"]);
    }

    #[test]
    fn groups_are_judged_separately() {
        let s = vec![
            snap("a1", 2 * D, "a", &[]),
            snap("a2", 3 * D, "a", &[]),
            snap("b1", D, "b", &[]),
        ];
        let p = Retention {
            last: 1,
            ..Default::default()
        };
        assert_eq!(kept(&plan(&s, &p, GroupBy::default())), vec!["a2", "b1"]);
        let one_group = GroupBy::parse("").unwrap();
        assert_eq!(kept(&plan(&s, &p, one_group)), vec!["a2"]);
        assert!(GroupBy::parse("host,colour").is_err());
    }

    #[test]
    fn calendar_buckets_are_utc() {
        // Monday 2024-01-01 and Sunday 2024-01-07 share a week; Monday the 8th does not.
        let w = |d: i64| buckets(d * D)[2];
        assert_eq!(w(19_723), w(19_729));
        assert_ne!(w(19_729), w(19_730));
        assert_eq!(
            parse_within("1y2m3d4h").unwrap(),
            (365 + 60 + 3) * D + 4 * H
        );
        assert!(parse_within("3w").is_err());
        assert!(parse_within("12").is_err());
    }
}
