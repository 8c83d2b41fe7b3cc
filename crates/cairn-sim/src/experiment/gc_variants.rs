//! The collector configurations the `gc` experiment compares (LGC, PGC and
//! PGC+ with one or two mark passes, 003 §3), shared by the runs
//! (`gc.rs`) and the figures (`gc_plot.rs`).

use cairn_engine::gc::Collector;

/// One collector configuration of the comparison.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Variant {
    pub label: &'static str,
    pub collector: Collector,
    /// Memory for about a third of the fingerprints: two mark passes.
    pub two_pass: bool,
}

/// The variants, in the order rows and legends show them.
pub(crate) const VARIANTS: [Variant; 5] = [
    Variant {
        label: "lgc",
        collector: Collector::Lgc,
        two_pass: false,
    },
    Variant {
        label: "lgc-2",
        collector: Collector::Lgc,
        two_pass: true,
    },
    Variant {
        label: "pgc",
        collector: Collector::Pgc,
        two_pass: false,
    },
    Variant {
        label: "pgc-2",
        collector: Collector::Pgc,
        two_pass: true,
    },
    Variant {
        label: "pgc+",
        collector: Collector::PgcPlus,
        two_pass: false,
    },
];
