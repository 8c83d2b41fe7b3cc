//! The analytic cost model of eager vs lazy fingerprint lookup,
//! `000_d04706aa48332137.txt` §4.1, eqs. (1)-(8), as pure functions.
//!
//! Names follow the paper: `V_disk`, `V_DRAM` (latency of one fingerprint
//! access in external storage / DRAM), `F_Dup` (duplicate fingerprints),
//! `R_cache^eager`, `R_first_cache`, `R_second_cache` (cache hit rates),
//! `F_disk^eager`, `F_disk^lazy` (fingerprints looked up in external storage),
//! `F_cache^post-lookup` (extra cache accesses of the lazy Post Lookup),
//! `T_bloom` (Bloom filter time, independent of the device, §3.2).
//!
//! Units: pass `V_disk`, `V_DRAM` and `T_bloom` in one unit (seconds per
//! access and seconds, e.g. [`v_of`]); the costs come out in that unit. Counts
//! are `f64` so that estimates and rates mix freely.
//!
//! The paper treats `F_disk^lazy` and `F_cache^post-lookup` as measured
//! inputs and states only how they move with the bucket threshold and the
//! locality-ring size (§4.2). [`lazy_disk_lookups`] and
//! [`post_lookup_accesses`] are cairn's own first-order estimates of them.

use cairn_core::CountersSnapshot;
use serde::{Deserialize, Serialize};

use super::class::DeviceClass;

/// `V` of a device class: seconds per access (`000` Table 1 for built-ins).
pub fn v_of(class: &DeviceClass) -> f64 {
    class.latency_seconds()
}

/// Inputs of eq. (3), the eager (DDFS-style) lookup of `000` §2.2.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EagerParams {
    /// `T_bloom^eager`.
    pub t_bloom_eager: f64,
    /// `F_Dup`.
    pub f_dup: f64,
    /// `R_cache^eager`.
    pub r_cache_eager: f64,
    /// `F_disk^eager`.
    pub f_disk_eager: f64,
}

/// Inputs of eq. (5), the lazy lookup of `000` §2.3 (Ma et al.).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LazyParams {
    /// `T_bloom^lazy`.
    pub t_bloom_lazy: f64,
    /// `F_Dup`.
    pub f_dup: f64,
    /// `R_first_cache`: hit rate of the Pre Lookup.
    pub r_first_cache: f64,
    /// `R_second_cache`: hit rate of the second (post-lookup) cache search.
    pub r_second_cache: f64,
    /// `F_disk^lazy`.
    pub f_disk_lazy: f64,
    /// `F_cache^post-lookup`.
    pub f_cache_post_lookup: f64,
}

/// The terms of eq. (3); their sum is eq. (2).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EagerCost {
    /// `T_bloom^eager`.
    pub bloom: f64,
    /// `T_cache^eager = V_DRAM * F_Dup * R_cache^eager`.
    pub cache: f64,
    /// `T_disk^eager = V_disk * F_disk^eager`.
    pub disk: f64,
}

impl EagerCost {
    /// Eq. (2): `T_eager = T_bloom^eager + T_cache^eager + T_disk^eager`.
    pub fn total(&self) -> f64 {
        self.bloom + self.cache + self.disk
    }
}

/// The terms of eq. (5); their sum is eq. (4).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LazyCost {
    /// `T_bloom^lazy`.
    pub bloom: f64,
    /// `T_pre-lookup = V_DRAM * F_Dup * R_first_cache`.
    pub pre_lookup: f64,
    /// `T_disk^lazy = V_disk * F_disk^lazy`.
    pub disk: f64,
    /// `T_post-lookup^cache = V_DRAM * F_cache^post-lookup + V_DRAM * F_Dup * R_second_cache`.
    pub post_lookup: f64,
}

impl LazyCost {
    /// Eq. (4): `T_lazy = T_bloom^lazy + T_pre-lookup + T_disk^lazy + T_post-lookup^cache`.
    pub fn total(&self) -> f64 {
        self.bloom + self.pre_lookup + self.disk + self.post_lookup
    }
}

/// Eq. (3): `T_eager = T_bloom^eager + V_DRAM * F_Dup * R_cache^eager + V_disk * F_disk^eager`.
pub fn eager_cost(v_disk: f64, v_dram: f64, p: &EagerParams) -> EagerCost {
    EagerCost {
        bloom: p.t_bloom_eager,
        cache: v_dram * p.f_dup * p.r_cache_eager,
        disk: v_disk * p.f_disk_eager,
    }
}

/// Eq. (5): `T_lazy = T_bloom^lazy + V_DRAM * F_Dup * R_first_cache + V_disk * F_disk^lazy
/// + V_DRAM * F_cache^post-lookup + V_DRAM * F_Dup * R_second_cache`.
pub fn lazy_cost(v_disk: f64, v_dram: f64, p: &LazyParams) -> LazyCost {
    LazyCost {
        bloom: p.t_bloom_lazy,
        pre_lookup: v_dram * p.f_dup * p.r_first_cache,
        disk: v_disk * p.f_disk_lazy,
        post_lookup: v_dram * p.f_cache_post_lookup + v_dram * p.f_dup * p.r_second_cache,
    }
}

/// Eq. (7): `R_cache^lazy = R_first_cache + R_second_cache`.
pub fn r_cache_lazy(r_first_cache: f64, r_second_cache: f64) -> f64 {
    r_first_cache + r_second_cache
}

/// Left side of eq. (8): `V_disk / V_DRAM`. With `000` Table 1 this is
/// 88415.38 (HDD), 192.31 (Optane SSD), 6.15 (PM) (§5.2).
pub fn latency_ratio(v_disk: f64, v_dram: f64) -> f64 {
    v_disk / v_dram
}

/// Right side of eq. (8):
/// `(F_Dup * (R_cache^lazy - R_cache^eager) + F_cache^post-lookup) / (F_disk^eager - F_disk^lazy)`.
/// `None` when lazy saves no disk lookups (`F_disk^eager <= F_disk^lazy`):
/// dividing would flip or void the inequality; use [`eq8_lazy_wins`].
pub fn eq8_rhs(
    f_dup: f64,
    r_cache_lazy: f64,
    r_cache_eager: f64,
    f_cache_post_lookup: f64,
    f_disk_eager: f64,
    f_disk_lazy: f64,
) -> Option<f64> {
    let saved = f_disk_eager - f_disk_lazy;
    (saved > 0.0).then(|| (f_dup * (r_cache_lazy - r_cache_eager) + f_cache_post_lookup) / saved)
}

/// Eq. (8) in multiplied-out form, valid for any sign of the denominator:
/// lazy is faster (eq. (1), `T_eager > T_lazy`, equal Bloom times cancelled
/// as in eq. (6)) iff
/// `V_disk * (F_disk^eager - F_disk^lazy) > V_DRAM * (F_Dup * (R_cache^lazy - R_cache^eager) + F_cache^post-lookup)`.
pub fn eq8_lazy_wins(v_disk: f64, v_dram: f64, eager: &EagerParams, lazy: &LazyParams) -> bool {
    let r_lazy = r_cache_lazy(lazy.r_first_cache, lazy.r_second_cache);
    // Eq. (6) writes F_Dup once; both algorithms see the same stream.
    let extra_dram = eager.f_dup * (r_lazy - eager.r_cache_eager) + lazy.f_cache_post_lookup;
    v_disk * (eager.f_disk_eager - lazy.f_disk_lazy) > v_dram * extra_dram
}

/// Which fingerprint lookup the model prefers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Choice {
    Eager,
    Lazy,
}

/// Eq. (1) on the full costs (Bloom times included): [`Choice::Lazy`] iff
/// `T_eager > T_lazy`; ties go to eager (simpler, better locality, §4.2).
pub fn choose(v_disk: f64, v_dram: f64, eager: &EagerParams, lazy: &LazyParams) -> Choice {
    let te = eager_cost(v_disk, v_dram, eager).total();
    let tl = lazy_cost(v_disk, v_dram, lazy).total();
    if te > tl {
        Choice::Lazy
    } else {
        Choice::Eager
    }
}

/// cairn's estimate (not the paper's) of `F_disk^lazy`: `buffered` cache
/// misses reach the buffer, a bucket is searched in one external access when
/// it holds `bucket_threshold` fingerprints (`000` §2.3, Fig. 2: four lookups
/// merged into one), so `buffered / bucket_threshold` (threshold below 1 is taken as 1).
pub fn lazy_disk_lookups(buffered: f64, bucket_threshold: f64) -> f64 {
    buffered / bucket_threshold.max(1.0)
}

/// cairn's estimate (not the paper's) of `F_cache^post-lookup`: every disk
/// hit searches the cache for the other fingerprints of its locality ring
/// (`000` §5.3), at most `L_local_ring - 1` each; ring size 1 means no Post
/// Lookup (§4.2).
pub fn post_lookup_accesses(disk_hits: f64, l_local_ring: f64) -> f64 {
    disk_hits * (l_local_ring - 1.0).max(0.0)
}

/// Eq. (3)'s inputs measured by an eager run: `F_Dup` = duplicates found
/// (cache hits + index hits), `R_cache^eager` = cache hits / `F_Dup`,
/// `F_disk^eager` = external accesses of the lookup (index page reads +
/// metadata prefetches, both charged at `V_disk` by the device model).
pub fn eager_params_from(c: &CountersSnapshot, t_bloom: f64) -> EagerParams {
    let f_dup = (c.cache_hits + c.index_hits) as f64;
    EagerParams {
        t_bloom_eager: t_bloom,
        f_dup,
        r_cache_eager: rate(c.cache_hits as f64, f_dup),
        f_disk_eager: (c.index_page_reads + c.prefetches) as f64,
    }
}

/// Eq. (5)'s inputs measured by a lazy run: `R_first_cache` = pre-lookup
/// hits / `F_Dup`, `R_second_cache` = post-lookup hits / `F_Dup`,
/// `F_disk^lazy` as for eager, and `F_cache^post-lookup` = ring entries
/// walked + second probes that missed (the hits are the `R_second_cache`
/// term), so eq. (5)'s DRAM terms add up to what the device model charges
/// for post-lookup.
pub fn lazy_params_from(c: &CountersSnapshot, t_bloom: f64) -> LazyParams {
    let f_dup = (c.cache_hits + c.index_hits + c.post_lookup_hits) as f64;
    LazyParams {
        t_bloom_lazy: t_bloom,
        f_dup,
        r_first_cache: rate(c.cache_hits as f64, f_dup),
        r_second_cache: rate(c.post_lookup_hits as f64, f_dup),
        f_disk_lazy: (c.index_page_reads + c.prefetches) as f64,
        f_cache_post_lookup: (c.post_lookup_visits
            + c.post_lookup_probes.saturating_sub(c.post_lookup_hits))
            as f64,
    }
}

fn rate(x: f64, of: f64) -> f64 {
    if of > 0.0 {
        x / of
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-12 * a.abs().max(b.abs()).max(1e-300)
    }

    fn round2(x: f64) -> f64 {
        (x * 100.0).round() / 100.0
    }

    #[test]
    fn paper_latency_ratios() {
        // `000` §5.2: V_disk / V_DRAM = 88415.38 (HDD), 192.31 (Optane), 6.15 (PM).
        let dram = v_of(&DeviceClass::dram());
        assert_eq!(
            round2(latency_ratio(v_of(&DeviceClass::hdd()), dram)),
            88415.38
        );
        assert_eq!(
            round2(latency_ratio(v_of(&DeviceClass::optane()), dram)),
            192.31
        );
        assert_eq!(round2(latency_ratio(v_of(&DeviceClass::pm()), dram)), 6.15);
        // With the MIRROR right side 554.06: lazy on HDD (and SSD), eager on Optane and PM.
        let rhs = 554.06;
        for (class, lazy) in [
            (DeviceClass::hdd(), true),
            (DeviceClass::ssd(), true),
            (DeviceClass::optane(), false),
            (DeviceClass::pm(), false),
        ] {
            assert_eq!(
                latency_ratio(v_of(&class), dram) > rhs,
                lazy,
                "{}",
                class.name
            );
        }
    }

    fn example() -> (EagerParams, LazyParams) {
        let eager = EagerParams {
            t_bloom_eager: 2.0,
            f_dup: 1000.0,
            r_cache_eager: 0.9,
            f_disk_eager: 100.0,
        };
        let lazy = LazyParams {
            t_bloom_lazy: 2.0,
            f_dup: 1000.0,
            r_first_cache: 0.5,
            r_second_cache: 0.3,
            f_disk_lazy: 25.0,
            f_cache_post_lookup: 4000.0,
        };
        (eager, lazy)
    }

    #[test]
    fn hand_computed_costs() {
        let (eager, lazy) = example();
        // V_disk = 10, V_DRAM = 1 (any unit).
        let e = eager_cost(10.0, 1.0, &eager);
        assert_eq!((e.bloom, e.cache, e.disk), (2.0, 900.0, 1000.0));
        assert_eq!(e.total(), 1902.0);
        let l = lazy_cost(10.0, 1.0, &lazy);
        assert_eq!((l.bloom, l.pre_lookup, l.disk), (2.0, 500.0, 250.0));
        assert_eq!(l.post_lookup, 4000.0 + 300.0);
        assert_eq!(l.total(), 5052.0);
        assert!(close(r_cache_lazy(0.5, 0.3), 0.8));
        // RHS of (8): (1000 * (0.8 - 0.9) + 4000) / (100 - 25) = 3900 / 75 = 52.
        let rhs = eq8_rhs(1000.0, 0.8, 0.9, 4000.0, 100.0, 25.0).unwrap();
        assert!(close(rhs, 52.0));
        assert_eq!(eq8_rhs(1000.0, 0.8, 0.9, 4000.0, 25.0, 25.0), None);
        // Ratio 10 < 52: eager. Ratio 60 > 52: lazy. Consistent with (1).
        assert!(!eq8_lazy_wins(10.0, 1.0, &eager, &lazy));
        assert_eq!(choose(10.0, 1.0, &eager, &lazy), Choice::Eager);
        assert!(eq8_lazy_wins(60.0, 1.0, &eager, &lazy));
        assert_eq!(choose(60.0, 1.0, &eager, &lazy), Choice::Lazy);
        // Break-even at exactly 52: T_eager = 2 + 900 + 5200 = 6102 =
        // T_lazy = 2 + 500 + 1300 + 4300; a tie is eager.
        assert_eq!(eager_cost(52.0, 1.0, &eager).total(), 6102.0);
        assert_eq!(lazy_cost(52.0, 1.0, &lazy).total(), 6102.0);
        assert_eq!(choose(52.0, 1.0, &eager, &lazy), Choice::Eager);
    }

    #[test]
    fn estimates() {
        assert_eq!(lazy_disk_lookups(1000.0, 4.0), 250.0);
        assert_eq!(lazy_disk_lookups(1000.0, 0.0), 1000.0);
        assert_eq!(post_lookup_accesses(100.0, 2048.0), 204_700.0);
        assert_eq!(post_lookup_accesses(100.0, 1.0), 0.0);
        assert_eq!(post_lookup_accesses(100.0, 0.0), 0.0);
    }

    proptest! {
        // With equal Bloom times, eq. (8) (multiplied out) agrees with eq. (1).
        #[test]
        fn eq8_agrees_with_eq1(
            v_disk in 0.01f64..1e5, v_dram in 0.01f64..10.0,
            f_dup in 0.0f64..1e6, re in 0.0f64..1.0, r1 in 0.0f64..0.5, r2 in 0.0f64..0.5,
            fe in 0.0f64..1e5, fl in 0.0f64..1e5, fp in 0.0f64..1e6, tb in 0.0f64..100.0,
        ) {
            let eager = EagerParams { t_bloom_eager: tb, f_dup, r_cache_eager: re, f_disk_eager: fe };
            let lazy = LazyParams {
                t_bloom_lazy: tb, f_dup, r_first_cache: r1, r_second_cache: r2,
                f_disk_lazy: fl, f_cache_post_lookup: fp,
            };
            let te = eager_cost(v_disk, v_dram, &eager).total();
            let tl = lazy_cost(v_disk, v_dram, &lazy).total();
            prop_assume!((te - tl).abs() > 1e-6 * te.abs().max(tl.abs()).max(1.0));
            prop_assert_eq!(eq8_lazy_wins(v_disk, v_dram, &eager, &lazy), te > tl);
            prop_assert_eq!(choose(v_disk, v_dram, &eager, &lazy) == Choice::Lazy, te > tl);
            if let Some(rhs) = eq8_rhs(f_dup, r_cache_lazy(r1, r2), re, fp, fe, fl) {
                let lhs = latency_ratio(v_disk, v_dram);
                prop_assume!((lhs - rhs).abs() > 1e-6 * lhs.abs().max(rhs.abs()).max(1.0));
                prop_assert_eq!(lhs > rhs, te > tl);
            }
        }
    }
}
