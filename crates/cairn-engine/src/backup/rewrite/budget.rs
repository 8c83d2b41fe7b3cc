//! The two bounds of a container-referenced-count threshold
//! (`002_c5d78fa3332f6f9f.txt` §3.2), shared by FCRC (per segment) and
//! LBW (per moving cycle, Algorithm 1):
//!
//! - **dedup-ratio bound** `RC_rw`: at most `N_rw_total = N_unique · x /
//!   (1 − x)` chunks are rewritten in a backup, `H_rw` per unit (segment or
//!   cycle); unit `i` may rewrite `H_rw · i − N_rw^{i−1}` (unspent budget is
//!   credit, never debt). `RC_rw` is found by adding the old containers'
//!   counts from low to high until the sum passes that limit.
//! - **container-read bound** `RC_reads`: unit `i` may reference
//!   `Cap · i − N_reads^{i−1}` old containers; counting them from high to
//!   low, the count of that container is `RC_reads` (0 when fewer are
//!   referenced: the credit accumulates).
//!
//! `N_unique` is the previous backup's unique chunk count and the number of
//! units is estimated from its size (002 §3.2); without a previous backup
//! the running totals of this one stand in ("run deduplication for a short
//! period of time").

/// What the rewriter knows of the previous backup.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct History {
    /// Data chunks it stored (new plus rewritten): 002's `N_unique`.
    pub unique_chunks: u64,
    pub logical_bytes: u64,
}

pub struct Budget {
    loss: f64,
    cap: u64,
    /// `H_rw`, from the previous backup; `None`: running estimate.
    per_unit: Option<f64>,
    /// Units closed so far (`i − 1` while unit `i` is open).
    units: u64,
    /// `N_rw^{i−1}`: chunks rewritten so far.
    rewritten: u64,
    /// `N_reads^{i−1}`: old containers referenced so far.
    reads: u64,
    /// Unique chunks seen so far (the running estimate of `N_unique`).
    unique: u64,
    /// The threshold of the previous unit.
    pub last: Option<f64>,
}

impl Budget {
    pub fn new(loss: f64, cap: u32, history: Option<History>, unit_bytes: u64) -> Self {
        let per_unit = history.filter(|h| h.unique_chunks > 0).map(|h| {
            let total = h.unique_chunks as f64 * loss / (1.0 - loss);
            let units = (h.logical_bytes as f64 / unit_bytes.max(1) as f64).max(1.0);
            total / units
        });
        Budget {
            loss,
            cap: cap as u64,
            per_unit,
            units: 0,
            rewritten: 0,
            reads: 0,
            unique: 0,
            last: None,
        }
    }

    /// A chunk stored new (counts toward the running `N_unique`).
    pub fn note_unique(&mut self) {
        self.unique += 1;
    }

    /// Chunks unit `i` may rewrite.
    pub fn rewrite_limit(&self) -> f64 {
        let i = (self.units + 1) as f64;
        let allowed = match self.per_unit {
            Some(h) => h * i,
            None => self.unique as f64 * self.loss / (1.0 - self.loss),
        };
        (allowed - self.rewritten as f64).max(0.0)
    }

    /// Old containers unit `i` may reference (may be negative: over budget).
    pub fn read_allowance(&self) -> i64 {
        (self.cap * (self.units + 1)) as i64 - self.reads as i64
    }

    /// `(RC_rw, RC_reads)` over the old containers' counts.
    pub fn bounds(&self, counts: &[u32]) -> (f64, f64) {
        (
            rc_rw(self.rewrite_limit(), counts),
            rc_reads(self.read_allowance(), counts),
        )
    }

    /// Unit `i` closed: it rewrote `rewritten` chunks and referenced `reads`
    /// old containers.
    pub fn close_unit(&mut self, rewritten: u64, reads: u64) {
        self.units += 1;
        self.rewritten += rewritten;
        self.reads += reads;
    }
}

/// The dedup-ratio bound: rewriting the containers whose count is below it
/// rewrites at most `limit` chunks.
pub fn rc_rw(limit: f64, counts: &[u32]) -> f64 {
    let mut asc = counts.to_vec();
    asc.sort_unstable();
    let mut sum = 0.0;
    for &c in &asc {
        sum += c as f64;
        if sum > limit {
            return c as f64;
        }
    }
    asc.last().map_or(0.0, |&m| m as f64 + 1.0)
}

/// The container-read bound: keeping the containers whose count is at
/// least it keeps about `allow` containers.
pub fn rc_reads(allow: i64, counts: &[u32]) -> f64 {
    let mut desc = counts.to_vec();
    desc.sort_unstable_by(|a, b| b.cmp(a));
    if allow <= 0 {
        return desc.first().map_or(0.0, |&m| m as f64 + 1.0);
    }
    match desc.get(allow as usize - 1) {
        Some(&c) if (allow as usize) < desc.len() => c as f64,
        _ => 0.0,
    }
}

/// FCRC's threshold for one segment (002 §3.2, "T_cnrc Calculation").
pub fn fcrc_threshold(rc_rw: f64, rc_reads: f64, last: Option<f64>) -> f64 {
    if rc_rw < rc_reads {
        return rc_rw;
    }
    match last {
        Some(t) if rc_reads <= t && t <= rc_rw => t,
        _ => (rc_rw + rc_reads) / 2.0,
    }
}

/// 002 Algorithm 1: the next cycle's T_dc from this cycle's bounds and
/// referenced chunk closeness (current `lc`, previous `lc_prev`).
pub fn adjust_t_dc(t: f64, lc: f64, lc_prev: f64, rc_rw: f64, rc_reads: f64) -> f64 {
    if rc_rw < rc_reads {
        return rc_rw;
    }
    let start = if rc_reads < t && t < rc_rw {
        t
    } else {
        (rc_reads + rc_rw) / 2.0
    };
    if lc < lc_prev {
        start - 1.0
    } else {
        start + 1.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_follow_the_papers_definitions() {
        let counts = [50, 1, 3, 2, 20, 1];
        // Ascending 1,1,2,3,20,50: limit 4 passes at the third (sum 4 -> 1+1+2=4 not > 4, then 7 > 4).
        assert_eq!(rc_rw(4.0, &counts), 3.0);
        assert_eq!(rc_rw(0.0, &counts), 1.0);
        assert_eq!(rc_rw(1000.0, &counts), 51.0);
        // Descending 50,20,3,2,1,1: two containers allowed -> the second's count.
        assert_eq!(rc_reads(2, &counts), 20.0);
        assert_eq!(rc_reads(6, &counts), 0.0, "all may stay");
        assert_eq!(rc_reads(0, &counts), 51.0, "over budget: all go");
    }

    #[test]
    fn fcrc_keeps_its_threshold_while_it_lies_between_the_bounds() {
        assert_eq!(
            fcrc_threshold(5.0, 10.0, Some(7.0)),
            5.0,
            "dedup bound wins"
        );
        assert_eq!(fcrc_threshold(10.0, 4.0, Some(6.0)), 6.0);
        assert_eq!(fcrc_threshold(10.0, 4.0, Some(12.0)), 7.0);
        assert_eq!(fcrc_threshold(10.0, 4.0, None), 7.0);
    }

    #[test]
    fn algorithm_1_moves_by_closeness() {
        assert_eq!(adjust_t_dc(9.0, 0.2, 0.3, 3.0, 5.0), 3.0);
        assert_eq!(adjust_t_dc(6.0, 0.2, 0.3, 10.0, 4.0), 5.0, "closer: lower");
        assert_eq!(
            adjust_t_dc(6.0, 0.4, 0.3, 10.0, 4.0),
            7.0,
            "farther: higher"
        );
        assert_eq!(adjust_t_dc(12.0, 0.4, 0.3, 10.0, 4.0), 8.0);
    }

    #[test]
    fn credit_carries_over_and_is_never_debt() {
        let mut b = Budget::new(
            0.05,
            2,
            Some(History {
                unique_chunks: 1900,
                logical_bytes: 10,
            }),
            1,
        );
        // N_rw_total = 1900 * 0.05 / 0.95 = 100 over 10 units: 10 per unit.
        assert!((b.rewrite_limit() - 10.0).abs() < 1e-9);
        b.close_unit(4, 1);
        assert!((b.rewrite_limit() - 16.0).abs() < 1e-9, "6 saved");
        assert_eq!(b.read_allowance(), 3);
        b.close_unit(16, 5);
        assert!((b.rewrite_limit() - 10.0).abs() < 1e-9);
        assert_eq!(b.read_allowance(), 0);
    }
}
