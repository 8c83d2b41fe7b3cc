//! `cairn volume scrub` through the binary: a byte flipped in the chunk
//! every file starts with is read from its second copy through the mount,
//! then repaired from it by the scrub (the files read back through the
//! mount, a second scrub finds nothing); without a copy
//! the scrub names every file that needs the chunk, one line each, and
//! exits 1.

mod common;

use std::collections::BTreeMap;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use common::volume::volume;
use common::{s, Rng};

const FILES: usize = 6;

/// A clear volume whose files all start with the same 256 KiB of random
/// bytes, optimized. Returns the files' bytes by name.
fn optimized_volume(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    volume(&["volume", "create", s(dir), "--encryption", "none"]).ok();
    let files = dir.join("files");
    let mut rng = Rng::new(14);
    let base = rng.bytes(256 << 10);
    let mut tree = BTreeMap::new();
    for i in 0..FILES {
        let mut bytes = base.clone();
        bytes.extend_from_slice(&rng.bytes(100_000 + i * 10));
        std::fs::write(files.join(format!("f{i}")), &bytes).unwrap();
        tree.insert(format!("f{i}"), bytes);
    }
    let old = filetime::FileTime::from_system_time(SystemTime::now() - Duration::from_secs(3600));
    for name in tree.keys() {
        filetime::set_file_times(files.join(name), old, old).unwrap();
    }
    std::thread::sleep(Duration::from_millis(1100));
    let out = volume(&["volume", "optimize", s(dir), "--min-age", "1s"]).ok();
    assert!(
        out.stdout_str()
            .contains(&format!("optimized {FILES} of {FILES} files")),
        "{}",
        out.stdout_str()
    );
    tree
}

/// Flips a byte early in the data section of the store's first container:
/// inside its first chunk, the first chunk of `f0`, which every file
/// shares (data chunks are stored in file order, recipe nodes last).
fn damage_first_chunk(dir: &Path) {
    let mut containers: Vec<PathBuf> = common::walk(&dir.join("store/containers"))
        .into_iter()
        .filter(|p| p.is_file())
        .collect();
    containers.sort();
    let first = &containers[0];
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(first)
        .unwrap();
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, 4096).unwrap();
    f.write_all_at(&[b[0] ^ 0xff], 4096).unwrap();
}

/// Mounts the volume at `mnt` and reads every file of `tree` through it
/// (nothing when FUSE is unavailable: the test is skipped there).
fn assert_reads_through_mount(dir: &Path, mnt: &Path, tree: &BTreeMap<String, Vec<u8>>) {
    std::fs::create_dir(mnt).unwrap();
    let Some(m) = common::fuse::volume_mount(dir, mnt) else {
        return;
    };
    for (name, bytes) in tree {
        let read = std::fs::read(mnt.join(name));
        assert!(
            read.as_ref().is_ok_and(|r| r == bytes),
            "{name} reads back: {:?}",
            read.err()
        );
    }
    std::process::Command::new("kill")
        .args(["-TERM", &m.pid().to_string()])
        .status()
        .unwrap();
    m.wait_exit().ok();
}

#[test]
fn scrub_repairs_a_popular_chunk_from_its_second_copy() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("vol");
    let tree = optimized_volume(&dir);
    // Six references each: more than 2, so the base's chunks are copied.
    let first = volume(&["volume", "scrub", s(&dir), "--copies-above", "2", "--json"])
        .ok()
        .json();
    assert_eq!(first["damaged_chunks"], 0, "{first}");
    assert!(first["copies_made"].as_u64().unwrap() >= 1, "{first}");
    assert!(dir.join("copies").is_dir());

    damage_first_chunk(&dir);
    // Until the scrub repairs it, reads of the damaged chunk are served
    // from its second copy.
    assert_reads_through_mount(&dir, &tmp.path().join("mnt"), &tree);
    let out = volume(&["volume", "scrub", s(&dir), "--copies-above", "2"]).ok();
    let text = out.stdout_str();
    assert!(
        text.contains("1 damaged, 1 repaired, 0 lost"),
        "{}",
        out.all_output()
    );
    assert!(text.contains("no problems left"), "{text}");
    let again = volume(&["volume", "scrub", s(&dir), "--copies-above", "2", "--json"])
        .ok()
        .json();
    assert_eq!(again["damaged_chunks"], 0, "{again}");
    assert_eq!(again["copies_made"], 0, "{again}");
    assert_eq!(again["copies_kept"], first["copies_kept"], "{again}");

    // Every file reads back byte-identically through the mount.
    assert_reads_through_mount(&dir, &tmp.path().join("mnt2"), &tree);
}

#[test]
fn scrub_names_every_file_a_lost_chunk_affects() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("vol");
    optimized_volume(&dir);
    // The default threshold (100 references): no copies here.
    damage_first_chunk(&dir);
    let out = volume(&["volume", "scrub", s(&dir)]).code(1);
    let stderr = out.stderr.clone();
    let damage: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("cairn: damage: "))
        .collect();
    assert_eq!(damage.len(), FILES, "{stderr}");
    for i in 0..FILES {
        assert!(
            damage
                .iter()
                .any(|l| l.starts_with(&format!("cairn: damage: f{i}: bytes 0-"))),
            "f{i} named: {stderr}"
        );
    }
    // Then the one error line.
    let errors: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("cairn: error: "))
        .collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    assert!(errors[0].contains("1 chunk(s) lost"), "{stderr}");
    assert_eq!(stderr.lines().count(), FILES + 1, "{stderr}");
    // `--json` reports the same files, with their ranges.
    let out = volume(&["volume", "scrub", s(&dir), "--json"]).code(1);
    let report = out.json();
    let files = report["affected_files"].as_array().unwrap();
    assert_eq!(files.len(), FILES, "{report}");
    for f in files {
        assert_eq!(f["ranges"][0][0], 0, "{f}");
    }
}
