//! Tests of the snapshot catalog (`catalog.rs`): listing, resolving,
//! filters, grouping and the record memo with its summary.

use super::*;
use cairn_backend::MemBackend;
use cairn_format::snapshot::BlobRefRecord;

/// The memoized listing gives what a fresh one gives, reads each
/// record once, drops forgotten ones and does not remember a record
/// that failed to load.
#[test]
fn a_memoized_listing_reads_each_record_once() {
    let plan = cairn_backend::FaultPlan::new();
    let backend = cairn_backend::FaultBackend::new(MemBackend::new(), plan.clone());
    let memo = RecordMemo::default();
    let a = commit(&backend, &record(1, "h", &["/a"], &[])).unwrap();
    let b = commit(&backend, &record(2, "h", &["/b"], &[])).unwrap();
    let ids =
        |l: &(Vec<SnapshotInfo>, Unreadable)| l.0.iter().map(|s| s.id.clone()).collect::<Vec<_>>();
    assert_eq!(
        ids(&list_memoized(&backend, &memo).unwrap()),
        [a.clone(), b.clone()]
    );
    // Held in the memo: a read that would now fail is not made.
    plan.corrupt_reads_with_prefix(
        object_names::SNAPSHOTS,
        cairn_backend::CorruptAt::Start(0),
        1,
    );
    let again = list_memoized(&backend, &memo).unwrap();
    assert_eq!(ids(&again), [a.clone(), b.clone()]);
    assert!(again.1.is_empty());
    assert_eq!(
        list(&backend).unwrap().1.len(),
        2,
        "a fresh listing reads them"
    );
    // A new record that fails to load is reported, and not remembered.
    let c = commit(&backend, &record(3, "h", &["/c"], &[])).unwrap();
    let with_c = list_memoized(&backend, &memo).unwrap();
    assert_eq!(with_c.1.len(), 1);
    plan.clear_corruptions();
    assert_eq!(
        ids(&list_memoized(&backend, &memo).unwrap()),
        [a.clone(), b.clone(), c]
    );
    // A forgotten record is no longer listed, nor held.
    remove(&backend, &a).unwrap();
    assert_eq!(ids(&list_memoized(&backend, &memo).unwrap())[0], b);
    assert!(!memo.0.lock().records.contains_key(&a));
}

/// A handle's first listing takes the records the summary holds and
/// reads only those written since; an entry whose bytes do not hash
/// to its id, or whose record was forgotten, counts for nothing.
#[test]
fn a_fresh_listing_reads_only_the_records_the_summary_lacks() {
    let plan = cairn_backend::FaultPlan::new();
    let backend = cairn_backend::FaultBackend::new(MemBackend::new(), plan.clone());
    let ids: Vec<String> = (0..40)
        .map(|i| commit(&backend, &record(i, "h", &["/a"], &[])).unwrap())
        .collect();
    let first = RecordMemo::default();
    assert_eq!(list_memoized(&backend, &first).unwrap().0.len(), 40);
    assert!(first.summary_due());
    first.write_summary(&backend).unwrap();
    assert!(!first.summary_due());
    let late = commit(&backend, &record(99, "h", &["/b"], &[])).unwrap();
    remove(&backend, &ids[0]).unwrap();
    // Every record read one by one would now fail: only the late one is.
    plan.corrupt_reads_with_prefix(
        object_names::SNAPSHOTS,
        cairn_backend::CorruptAt::Start(0),
        1,
    );
    let fresh = RecordMemo::default();
    let (good, bad) = list_memoized(&backend, &fresh).unwrap();
    assert_eq!(good.len(), 39);
    assert!(good.iter().all(|s| s.id != ids[0]));
    assert_eq!(bad.len(), 1);
    assert_eq!(bad[0].0, late);
    plan.clear_corruptions();
    // A summary entry under another record's id is not taken.
    let mut entries = crate::catalog_summary::read(&backend).unwrap();
    entries[1].1 = entries[2].1.clone();
    crate::catalog_summary::write(&backend, &entries).unwrap();
    let checked = RecordMemo::default();
    let (good, bad) = list_memoized(&backend, &checked).unwrap();
    assert!(bad.is_empty());
    let fresh_list = list(&backend).unwrap().0;
    let show = |l: &[SnapshotInfo]| {
        l.iter()
            .map(|s| (s.id.clone(), s.record.time_unix_ns))
            .collect::<Vec<_>>()
    };
    assert_eq!(show(&good), show(&fresh_list));
}

#[test]
fn group_by_displays_as_it_parses() {
    for text in ["host,paths", "", "tags", "host,paths,tags"] {
        assert_eq!(GroupBy::parse(text).unwrap().to_string(), text);
    }
    assert_eq!(GroupBy::default().to_string(), "host,paths");
}

/// A record of a tree that is never read (for catalog-level tests).
pub(crate) fn record(t: i64, host: &str, paths: &[&str], tags: &[&str]) -> SnapshotRecord {
    SnapshotRecord {
        time_unix_ns: t,
        host: host.into(),
        paths: paths.iter().map(|s| s.to_string()).collect(),
        tags: tags.iter().map(|s| s.to_string()).collect(),
        root: BlobRefRecord {
            root: "00".into(),
            level: 0,
            size: 0,
        },
        stats: Default::default(),
        next_container: 0,
        fastcopy_of: None,
        original: None,
    }
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// Four snapshots: (id, record), oldest first.
fn repo() -> (MemBackend, Vec<String>) {
    let b = MemBackend::new();
    let ids = [
        record(1, "alpha", &["/data"], &["daily"]),
        record(2, "beta", &["/data", "/etc"], &["daily", "keep"]),
        record(3, "alpha", &["/etc/"], &["keep"]),
        record(4, "beta", &["/data/."], &[]),
    ]
    .iter()
    .map(|r| commit(&b, r).unwrap())
    .collect();
    (b, ids)
}

#[test]
fn filter_parts_combine() {
    let r = record(0, "alpha", &["/data/", "/etc"], &["a", "b"]);
    let f = |hosts: &[&str], tags: &[&[&str]], paths: &[&str]| SnapshotFilter {
        hosts: strings(hosts),
        tags: tags.iter().map(|s| strings(s)).collect(),
        paths: strings(paths),
        skip_damaged: false,
    };
    assert!(f(&[], &[], &[]).matches(&r));
    assert!(f(&["beta", "alpha"], &[], &[]).matches(&r));
    assert!(!f(&["beta"], &[], &[]).matches(&r));
    assert!(f(&[], &[&["a", "b"]], &[]).matches(&r));
    assert!(!f(&[], &[&["a", "c"]], &[]).matches(&r));
    assert!(f(&[], &[&["a", "c"], &["b"]], &[]).matches(&r));
    assert!(f(&[], &[], &["/data", "/etc/"]).matches(&r));
    assert!(!f(&[], &[], &["/data", "/home"]).matches(&r));
    assert!(!f(&["alpha"], &[&["a"]], &["/home"]).matches(&r));
    // The empty tag set: snapshots without tags.
    assert!(!f(&[], &[&[]], &[]).matches(&r));
    assert!(f(&[], &[&[]], &[]).matches(&record(0, "x", &[], &[])));
}

#[test]
fn paths_are_cleaned_for_display_and_comparison() {
    assert_eq!(clean_path("/a//b/./c/"), "/a/b/c");
    assert_eq!(clean_path("/"), "/");
    assert_eq!(clean_path("/a/../b"), "/a/../b");
    assert_eq!(clean_path("<stdin:db.sql>"), "<stdin:db.sql>");
}

#[test]
fn latest_is_the_newest_of_the_filtered_group() {
    let (b, ids) = repo();
    let latest = |f: &SnapshotFilter| resolve_filtered(&b, "latest", f).map(|(s, _)| s.id);
    assert_eq!(latest(&SnapshotFilter::default()).unwrap(), ids[3]);
    let alpha = SnapshotFilter {
        hosts: strings(&["alpha"]),
        ..Default::default()
    };
    assert_eq!(latest(&alpha).unwrap(), ids[2]);
    let daily_keep = SnapshotFilter {
        tags: vec![strings(&["daily", "keep"])],
        ..Default::default()
    };
    assert_eq!(latest(&daily_keep).unwrap(), ids[1]);
    let data = SnapshotFilter {
        paths: strings(&["/data"]),
        ..Default::default()
    };
    assert_eq!(latest(&data).unwrap(), ids[3]);
    let none = SnapshotFilter {
        hosts: strings(&["gamma"]),
        ..Default::default()
    };
    let e = latest(&none).unwrap_err();
    assert!(matches!(e, Error::NotFound(_)), "{e}");
    assert!(e.to_string().contains("host=gamma"), "{e}");
    let (listed, _) = list_filtered(&b, &data).unwrap();
    let listed: Vec<&str> = listed.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(listed, [&ids[0], &ids[1], &ids[3]]);
}

#[test]
fn an_explicit_id_must_match_the_filter() {
    let (b, ids) = repo();
    let alpha = SnapshotFilter {
        hosts: strings(&["alpha"]),
        ..Default::default()
    };
    let short = short_id(&ids[0]).to_ascii_uppercase();
    assert_eq!(resolve_filtered(&b, &short, &alpha).unwrap().0.id, ids[0]);
    assert_eq!(resolve_filtered(&b, &ids[2], &alpha).unwrap().0.id, ids[2]);
    let e = resolve_filtered(&b, short_id(&ids[1]), &alpha).unwrap_err();
    assert!(e.to_string().contains("does not match host=alpha"), "{e}");
    assert!(resolve_filtered(&b, &ids[0][..3], &alpha).is_err());
    assert!(resolve_filtered(&b, "latex", &alpha).is_err());
}

#[test]
fn groups_follow_the_chosen_fields() {
    let (b, ids) = repo();
    let (all, _) = list(&b).unwrap();
    let by_host = group(all.clone(), GroupBy::parse("host").unwrap());
    let shape: Vec<(String, Vec<&str>)> = by_host
        .iter()
        .map(|(k, m)| (k.to_string(), m.iter().map(|s| s.id.as_str()).collect()))
        .collect();
    assert_eq!(
        shape,
        [
            ("host=alpha".to_string(), vec![&*ids[0], &*ids[2]]),
            ("host=beta".to_string(), vec![&*ids[1], &*ids[3]]),
        ]
    );
    // `/data/.` and `/data` are the same source path.
    let by_paths = group(all.clone(), GroupBy::parse("paths").unwrap());
    assert_eq!(by_paths.len(), 3);
    assert_eq!(by_paths[0].0.to_string(), "paths=[/data]");
    assert_eq!(by_paths[0].1.len(), 2);
    let by_all = group(all.clone(), GroupBy::parse("host,paths,tags").unwrap());
    assert_eq!(by_all.len(), 4);
    assert_eq!(
        by_all[0].0,
        GroupKey {
            host: Some("alpha".into()),
            paths: Some(strings(&["/data"])),
            tags: Some(strings(&["daily"])),
        }
    );
    let one = group(all, GroupBy::parse("").unwrap());
    assert_eq!(one.len(), 1);
    assert_eq!(one[0].0.to_string(), "");
    assert!(GroupBy::parse("host,colour").is_err());
}
