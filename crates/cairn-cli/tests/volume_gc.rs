//! `cairn volume gc` through the binary: a volume optimized, half its
//! files deleted through the mount, then collected: a dry run changes
//! nothing, the collection frees the deleted files' chunks (the store and
//! `status`'s physical bytes fall), and the files left read back through
//! the mount. Bad options fail with one line.

mod common;

use std::path::Path;

use common::volume::{age, volume, while_mounted};
use common::{s, Rng};

fn physical_and_store(dir: &Path) -> (u64, u64) {
    let st = volume(&["volume", "status", s(dir), "--json"]).ok().json();
    (
        st["physical_bytes"].as_u64().unwrap(),
        st["store_bytes"].as_u64().unwrap(),
    )
}

#[test]
fn gc_frees_the_chunks_of_deleted_files_and_keeps_the_others() {
    let (_tmp, dir, mnt) = common::volume::created(&[]);
    let files = dir.join("files");
    let mut rng = Rng::new(77);
    // Incompressible and unshared: each file's chunks are its own.
    let contents: Vec<Vec<u8>> = (0..8).map(|_| rng.bytes(600_000)).collect();
    for (i, c) in contents.iter().enumerate() {
        std::fs::write(files.join(format!("f{i}")), c).unwrap();
    }
    age(&files);
    volume(&["volume", "optimize", s(&dir), "--min-age", "1s"]).ok();

    let mounted = while_mounted(&dir, &mnt, |mnt| {
        for i in (0..8).step_by(2) {
            std::fs::remove_file(mnt.join(format!("f{i}"))).unwrap();
        }
    });
    if !mounted {
        return;
    }
    let (physical, store) = physical_and_store(&dir);

    let dry = volume(&["volume", "gc", s(&dir), "--dry-run", "--json"])
        .ok()
        .json();
    assert_eq!(dry["dry_run"], true, "{dry}");
    assert_eq!(dry["roots"], 4, "{dry}");
    assert_eq!(
        physical_and_store(&dir).1,
        store,
        "a dry run changed the store"
    );

    let out = volume(&["volume", "gc", s(&dir), "--collector", "pgc"]).ok();
    let text = out.stdout_str();
    assert!(text.contains("4 stream maps as roots"), "{text}");
    assert!(text.contains("collected (pgc): reclaimed"), "{text}");

    // The deleted files' bytes, less a tenth for the containers' and the
    // new roots snapshot's own bytes.
    let deleted = 4 * 600_000 * 9 / 10;
    let (physical_after, store_after) = physical_and_store(&dir);
    assert!(
        store_after + deleted <= store,
        "store {store} -> {store_after}"
    );
    assert!(
        physical_after + deleted <= physical,
        "physical {physical} -> {physical_after}"
    );

    // A second collection frees at most what the first one's Bloom filter
    // (PGC's Live Instance filter) took for live by a false positive and
    // the first roots snapshot's listing: far less than a file.
    let again = volume(&["volume", "gc", s(&dir), "--json"]).ok().json();
    assert!(
        again["reclaimed_bytes"].as_i64().unwrap() < 300_000,
        "{again}"
    );
    assert_eq!(again["roots"], 4, "{again}");

    while_mounted(&dir, &mnt, |mnt| {
        for (i, c) in contents.iter().enumerate() {
            let path = mnt.join(format!("f{i}"));
            if i % 2 == 0 {
                assert!(!path.exists(), "f{i} deleted");
            } else {
                assert!(std::fs::read(&path).unwrap() == *c, "f{i} reads back");
            }
        }
    });
}

#[test]
fn bad_volume_gc_commands_fail_with_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("vol");
    let err = volume(&["volume", "gc", s(&dir)]).code(1).one_line_error();
    assert!(err.contains("is not a cairn volume"), "{err}");
    volume(&["volume", "create", s(&dir), "--encryption", "none"]).ok();
    let err = volume(&["volume", "gc", s(&dir), "--collector", "fast"])
        .code(2)
        .one_line_error();
    assert!(err.contains("--collector"), "{err}");
    // An empty volume collects to nothing.
    let out = volume(&["volume", "gc", s(&dir)]).ok();
    assert!(
        out.stdout_str().contains("0 stream maps as roots"),
        "{}",
        out.stdout_str()
    );
}
