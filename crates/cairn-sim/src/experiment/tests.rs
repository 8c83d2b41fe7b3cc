use super::*;

fn quick(dir: &std::path::Path, ext: &str) -> ExperimentOutput {
    index_io(&IndexIoOptions {
        quick: true,
        traces: Vec::new(),
        out_dir: dir.to_path_buf(),
        plot_ext: ext.into(),
    })
    .unwrap()
}

fn get<'a>(out: &'a ExperimentOutput, case: &str) -> &'a serde_json::Value {
    out.rows
        .iter()
        .find(|r| r["workload"] == "ddfs" && r["case"] == case)
        .unwrap_or_else(|| panic!("no row for {case}"))
}

#[test]
fn index_io_quick_has_four_cases_and_meets_acceptance() {
    let tmp = tempfile::tempdir().unwrap();
    let out = quick(tmp.path(), "svg");
    eprintln!("{}", out.table);
    assert_eq!(out.experiment, "index-io");
    assert_eq!(out.rows.len(), 4);
    let reads = |c: &str| get(&out, c)["index_page_reads"].as_u64().unwrap();
    let none = reads("none");
    assert!(none > 0);
    for (case, ..) in CASES {
        let r = get(&out, case);
        assert!(reads(case) <= none, "{case}: {} > {none}", reads(case));
        assert_eq!(
            r["disk_reads"].as_u64().unwrap(),
            reads(case) + r["prefetches"].as_u64().unwrap()
        );
        assert_eq!(r["lookups"], get(&out, "none")["lookups"]);
    }
    // Issue acceptance: Summary Vector + locality cache avoid >= 99% of the
    // index page reads on the generations workload.
    let both = get(&out, "both")["index_page_read_reduction_vs_none"]
        .as_f64()
        .unwrap();
    assert!(both >= 0.99, "both avoids only {:.4}", both);
    // Each mechanism alone avoids some reads, together more than either.
    let red = |c: &str| get(&out, c)["reduction_vs_none"].as_f64().unwrap();
    assert!(red("bloom") > 0.0 && red("cache") > red("bloom") && red("both") > red("cache"));
    assert!(out.extra.contains_key("summary"));
    assert_eq!(out.csv.lines().count(), 5);
    assert!(out.table.contains("both"));
    let csv = std::fs::read_to_string(tmp.path().join("index-io.csv")).unwrap();
    assert_eq!(csv, out.csv);
    let svg = std::fs::read_to_string(tmp.path().join("index-io.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("bloom"));
}

#[test]
fn index_io_rejects_unknown_plot_format() {
    let tmp = tempfile::tempdir().unwrap();
    let err = index_io(&IndexIoOptions {
        quick: true,
        traces: Vec::new(),
        out_dir: tmp.path().to_path_buf(),
        plot_ext: "gif".into(),
    })
    .unwrap_err();
    assert!(err.to_string().contains("svg, png or pdf"), "{err}");
}

/// The full-size run documented in `docs/experiments/lookup.md`:
/// `cargo test --release -p cairn-sim experiment::tests::index_io_full -- --ignored --nocapture`
#[test]
#[ignore]
fn index_io_full() {
    let dir = std::env::var_os("CAIRN_EXPERIMENT_OUT")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("cairn-index-io"));
    let started = std::time::Instant::now();
    let out = index_io(&IndexIoOptions {
        quick: false,
        traces: Vec::new(),
        out_dir: dir.clone(),
        plot_ext: std::env::var("CAIRN_EXPERIMENT_EXT").unwrap_or_else(|_| "svg".into()),
    })
    .unwrap();
    println!("{}", out.table);
    println!("{}", serde_json::to_string_pretty(&out.to_json()).unwrap());
    println!(
        "wrote {} in {:.1} s",
        dir.display(),
        started.elapsed().as_secs_f64()
    );
}

#[test]
fn index_io_adds_a_trace_workload() {
    let tmp = tempfile::tempdir().unwrap();
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/destor");
    let out = index_io(&IndexIoOptions {
        quick: true,
        traces: vec![data.join("gen0.trace"), data.join("gen1.trace")],
        out_dir: tmp.path().to_path_buf(),
        plot_ext: "svg".into(),
    })
    .unwrap();
    assert_eq!(out.rows.len(), 8);
    let trace: Vec<_> = out
        .rows
        .iter()
        .filter(|r| r["workload"] == "trace")
        .collect();
    assert_eq!(trace.len(), 4);
    let none = trace[0]["index_page_reads"].as_u64().unwrap();
    for r in &trace {
        assert!(r["index_page_reads"].as_u64().unwrap() <= none);
    }
    assert!(out.extra["summary"]["trace"]["both"].is_object());
}

fn lookup_quick(dir: &std::path::Path) -> LookupOptions {
    LookupOptions {
        quick: true,
        traces: Vec::new(),
        out_dir: dir.to_path_buf(),
        plot_ext: "svg".into(),
    }
}

/// Both strategies run on the same input and find the same duplicates; the
/// stages add up to the total; lazy reads fewer index pages.
#[test]
fn eager_vs_lazy_quick_rows_add_up() {
    let tmp = tempfile::tempdir().unwrap();
    let out = eager_vs_lazy(&lookup_quick(tmp.path())).unwrap();
    eprintln!("{}", out.table);
    assert_eq!(out.rows.len(), 8);
    for r in &out.rows {
        let sum: f64 = [
            "bloom_seconds",
            "pre_lookup_seconds",
            "disk_seconds",
            "post_lookup_seconds",
        ]
        .iter()
        .map(|k| r[*k].as_f64().unwrap())
        .sum();
        let total = r["total_seconds"].as_f64().unwrap();
        assert!((sum - total).abs() <= 1e-9 * total.max(1.0), "{r}");
    }
    let row = |d: &str, s: &str| {
        out.rows
            .iter()
            .find(|r| r["device"] == d && r["strategy"] == s)
            .unwrap()
    };
    assert_eq!(
        row("HDD", "eager")["lookups"],
        row("HDD", "lazy")["lookups"]
    );
    assert!(
        row("HDD", "lazy")["index_page_reads"].as_u64()
            < row("HDD", "eager")["index_page_reads"].as_u64()
    );
    assert_eq!(
        row("PM", "eager")["post_lookup_seconds"].as_f64(),
        Some(0.0)
    );
    assert_eq!(out.extra["winner"]["HDD"], "lazy");
    assert_eq!(out.extra["winner"]["PM"], "eager");
    let svg = std::fs::read_to_string(tmp.path().join("eager-vs-lazy.svg")).unwrap();
    assert!(svg.starts_with("<svg"));
}

/// Ring size 1 means no post-lookup; larger rings walk more ring entries.
#[test]
fn ring_size_quick_optimum_and_post_lookup_growth() {
    let tmp = tempfile::tempdir().unwrap();
    let out = ring_size(&lookup_quick(tmp.path())).unwrap();
    assert_eq!(out.rows.len(), 48);
    let hdd: Vec<&serde_json::Value> = out.rows.iter().filter(|r| r["device"] == "HDD").collect();
    assert_eq!(hdd[0]["ring_size"], 1);
    assert_eq!(hdd[0]["post_lookup_hits"], 0);
    assert!(
        hdd[11]["post_lookup_seconds"].as_f64().unwrap()
            > hdd[0]["post_lookup_seconds"].as_f64().unwrap()
    );
    for d in crate::experiment::lookup_strategy::DEVICES {
        assert!(out.extra["optimum"][d].as_u64().is_some(), "{d}");
    }
}

/// The full-size runs documented in `docs/experiments/lookup.md`:
/// `cargo test --release -p cairn-sim experiment::tests::lookup_full -- --ignored --nocapture`
#[test]
#[ignore]
fn lookup_full() {
    let dir = std::env::var_os("CAIRN_EXPERIMENT_OUT")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("cairn-lookup"));
    let opts = LookupOptions {
        quick: false,
        ..lookup_quick(&dir)
    };
    for out in [eager_vs_lazy(&opts).unwrap(), ring_size(&opts).unwrap()] {
        println!("{}", out.table);
        println!("{}", serde_json::to_string_pretty(&out.to_json()).unwrap());
    }
}

#[test]
fn restore_quick_sweeps_every_scheme_and_writes_its_figure() {
    let tmp = tempfile::tempdir().unwrap();
    let out = restore(&ExperimentOptions {
        quick: true,
        traces: Vec::new(),
        out_dir: tmp.path().to_path_buf(),
        plot_ext: "svg".into(),
    })
    .unwrap();
    eprintln!("{}", out.table);
    assert_eq!(out.experiment, "restore");
    let runs = out.extra["runs"].as_array().unwrap();
    // Two workloads x (Normal + 2 Capping + 2 FCRC + 2 LBW + 1 HAR + 2 HAR+LBW
    // + re-layout + LBW with re-layout).
    assert_eq!(runs.len(), 24);
    for r in runs {
        let loss = r["dedup_loss"].as_f64().unwrap();
        let rewritten = r["rewritten_chunks"].as_u64().unwrap();
        match r["scheme"].as_str().unwrap() {
            "normal" | "relayout" => assert_eq!((loss, rewritten), (0.0, 0)),
            // Capping level 1 rewrites most duplicates.
            "capping" if r["param"] == "cap=1" => assert!(loss > 0.2 && rewritten > 0, "{r}"),
            _ => assert!((0.0..1.0).contains(&loss), "{r}"),
        }
        // Belady's bound is never beaten by the other caches by much (it
        // is optimal for demand reads; bulk container reads can differ).
        let b = r["mean_speed_factor_belady"].as_f64().unwrap();
        assert!(
            b >= 0.95 * r["mean_speed_factor_faa"].as_f64().unwrap(),
            "{r}"
        );
    }
    for w in ["ddfs", "lineage"] {
        let t = &out.extra["tuned"][w];
        for fam in [
            "capping",
            "fcrc",
            "lbw",
            "har",
            "har+lbw",
            "relayout",
            "lbw+relayout",
        ] {
            assert!(t[fam]["dedup_loss"].is_number(), "{w} {fam}");
        }
        assert_eq!(out.extra["devices"][w].as_array().unwrap().len(), 8);
        // Re-layout after every backup: the newest generation restores
        // faster than with Normal, at no dedup loss.
        let last = |fam: &str| {
            runs.iter()
                .find(|r| r["workload"] == w && r["scheme"] == fam)
                .unwrap()["last_speed_factor_faa"]
                .as_f64()
                .unwrap()
        };
        assert!(last("relayout") > last("normal"), "{w}");
    }
    // One CSV row per run and generation (6 generations each).
    assert_eq!(out.csv.lines().count(), 1 + 24 * 6);
    let svg = std::fs::read_to_string(tmp.path().join("restore.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("LBW") && svg.contains("backup version"));
}
