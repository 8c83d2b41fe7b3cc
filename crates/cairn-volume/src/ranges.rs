//! Sets of byte ranges `[start, end)` kept sorted, disjoint and merged: a
//! stream-map entry's recalled ranges.

/// Sorted, non-empty, non-touching half-open ranges (`[0, 4)` and `[4, 8)`
/// are stored as `[0, 8)`): equal sets have equal representations, so the
/// encoded entry of a set is unique.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RangeSet {
    ranges: Vec<(u64, u64)>,
}

impl RangeSet {
    pub fn new() -> Self {
        Self::default()
    }

    /// The set of `ranges` (any order, overlapping, empty ones ignored).
    pub fn from_ranges(ranges: impl IntoIterator<Item = (u64, u64)>) -> Self {
        let mut s = RangeSet::new();
        for (a, b) in ranges {
            s.insert(a, b);
        }
        s
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// The ranges, in order.
    pub fn ranges(&self) -> &[(u64, u64)] {
        &self.ranges
    }

    /// Adds `[start, end)`, merging with every range it overlaps or touches.
    pub fn insert(&mut self, start: u64, end: u64) {
        if start >= end {
            return;
        }
        // First range that ends at or after `start` (may merge), and the
        // first that starts after `end` (may not).
        let lo = self.ranges.partition_point(|&(_, e)| e < start);
        let hi = self.ranges.partition_point(|&(s, _)| s <= end);
        let mut merged = (start, end);
        if lo < hi {
            merged.0 = merged.0.min(self.ranges[lo].0);
            merged.1 = merged.1.max(self.ranges[hi - 1].1);
        }
        self.ranges.splice(lo..hi, std::iter::once(merged));
    }

    /// Drops everything at or past `len`.
    pub fn clip(&mut self, len: u64) {
        self.ranges.retain(|&(s, _)| s < len);
        if let Some(last) = self.ranges.last_mut() {
            last.1 = last.1.min(len);
        }
    }

    /// The range holding `pos`, if any.
    pub fn containing(&self, pos: u64) -> Option<(u64, u64)> {
        let i = self.ranges.partition_point(|&(_, e)| e <= pos);
        self.ranges.get(i).copied().filter(|&(s, _)| s <= pos)
    }

    /// The start of the first range beginning after `pos`, if any.
    pub fn next_start_after(&self, pos: u64) -> Option<u64> {
        let i = self.ranges.partition_point(|&(s, _)| s <= pos);
        self.ranges.get(i).map(|&(s, _)| s)
    }

    /// Whether `[start, end)` lies wholly inside the set.
    pub fn covers(&self, start: u64, end: u64) -> bool {
        start >= end || self.containing(start).is_some_and(|(_, e)| e >= end)
    }

    /// The parts of `[start, end)` outside the set, in order.
    pub fn gaps(&self, start: u64, end: u64) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        let mut pos = start;
        for &(s, e) in &self.ranges {
            if e <= pos {
                continue;
            }
            if s >= end {
                break;
            }
            if s > pos {
                out.push((pos, s));
            }
            pos = pos.max(e);
        }
        if pos < end {
            out.push((pos, end));
        }
        out
    }

    /// Bytes the set covers.
    pub fn total(&self) -> u64 {
        self.ranges.iter().map(|&(s, e)| e - s).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn inserts_merge_touching_and_overlapping_ranges() {
        let mut s = RangeSet::new();
        s.insert(10, 20);
        s.insert(30, 40);
        s.insert(20, 25);
        assert_eq!(s.ranges(), &[(10, 25), (30, 40)]);
        s.insert(0, 35);
        assert_eq!(s.ranges(), &[(0, 40)]);
        s.insert(5, 5);
        assert_eq!(s.ranges(), &[(0, 40)]);
        s.clip(12);
        assert_eq!(s.ranges(), &[(0, 12)]);
        assert_eq!(s.gaps(5, 20), vec![(12, 20)]);
        assert!(s.covers(3, 12) && !s.covers(3, 13));
    }

    proptest! {
        /// The set agrees with a bitmap of the same inserts and clips.
        #[test]
        fn matches_a_bitmap(ops in proptest::collection::vec((0u64..64, 0u64..64, any::<bool>()), 0..40)) {
            let mut s = RangeSet::new();
            let mut bits = [false; 64];
            for (a, b, clip) in ops {
                if clip {
                    s.clip(a);
                    for x in bits.iter_mut().skip(a as usize) { *x = false; }
                } else {
                    let (a, b) = (a.min(b), a.max(b));
                    s.insert(a, b);
                    for x in &mut bits[a as usize..b as usize] { *x = true; }
                }
            }
            for (i, &bit) in bits.iter().enumerate() {
                prop_assert_eq!(s.containing(i as u64).is_some(), bit);
            }
            prop_assert_eq!(s.total(), bits.iter().filter(|&&b| b).count() as u64);
            for w in s.ranges().windows(2) {
                prop_assert!(w[0].1 < w[1].0);
            }
            let gaps: u64 = s.gaps(0, 64).iter().map(|&(a, b)| b - a).sum();
            prop_assert_eq!(gaps, 64 - s.total());
        }
    }
}
