//! Issue 31, friction 4 (output): `ls -l` shows FIFOs, sockets and devices
//! by type (`p`, `s`, `c`, `b`; a device's major and minor where the size
//! goes), and human times are in the local time zone with the zone shown
//! (`--utc` for UTC), while JSON keeps UTC RFC 3339. `TZ` is set to a POSIX
//! zone string (`XYZ-3`: three hours east of UTC, named XYZ) so the output
//! does not depend on the machine's zone or its zone database.

mod common;

use std::path::Path;

use common::*;

/// `cairn --repo repo args...` with `TZ` set.
fn in_zone(repo: &Path, tz: &str, args: &[&str]) -> Run {
    let mut all = vec!["--repo", s(repo)];
    all.extend_from_slice(args);
    cairn_env(&all, &[("TZ", Path::new(tz))])
}

#[test]
fn ls_long_shows_special_files_by_type() {
    let dir = tempfile::tempdir().unwrap();
    let (repo, src) = (dir.path().join("repo"), dir.path().join("src"));
    let (_sock, dev) = special_files(&src, "the device line of this test");
    cairn(&repo, &["init", "-q"]).ok();
    cairn(&repo, &["backup", "-q", s(&src)]).ok();
    let ls = cairn(&repo, &["ls", "-l", "latest", "src"])
        .ok()
        .stdout_str();
    let line = |name: &str| {
        ls.lines()
            .find(|l| l.ends_with(&format!("src/{name}")))
            .unwrap_or_else(|| panic!("no {name} in:\n{ls}"))
            .to_string()
    };
    assert!(line("fifo").starts_with("prw-r----- "), "{ls}");
    assert!(line("sock").starts_with('s'), "{ls}");
    if dev {
        let null = line("null");
        assert!(null.starts_with('c'), "{ls}");
        assert!(null.contains(" 1, 3 "), "{ls}");
    }
}

#[test]
fn human_times_are_local_with_the_zone_and_json_stays_utc() {
    let dir = tempfile::tempdir().unwrap();
    let (repo, src) = (dir.path().join("repo"), dir.path().join("src"));
    let file = src.join("leap.txt");
    write_file(&file, b"29 February", 0o644);
    set_mtime(&file, (951_782_400, 0)); // 2000-02-29T00:00:00Z
    cairn(&repo, &["init", "-q"]).ok();
    cairn(&repo, &["backup", "-q", s(&src)]).ok();

    let ls = in_zone(&repo, "XYZ-3", &["ls", "latest", "src/leap.txt"]).ok();
    assert!(
        ls.stdout_str().contains(" 2000-02-29 03:00:00 XYZ "),
        "{}",
        ls.stdout_str()
    );
    let utc = in_zone(&repo, "XYZ-3", &["--utc", "ls", "latest", "src/leap.txt"]).ok();
    assert!(
        utc.stdout_str().contains(" 2000-02-29 00:00:00 UTC "),
        "{}",
        utc.stdout_str()
    );
    let json = in_zone(&repo, "XYZ-3", &["--json", "ls", "latest", "src/leap.txt"]).ok();
    assert_eq!(json.json()[0]["mtime"], "2000-02-29T00:00:00Z");

    let find = in_zone(&repo, "XYZ-3", &["find", "leap.txt"]).ok();
    assert!(
        find.stdout_str().contains("2000-02-29 03:00:00 XYZ"),
        "{}",
        find.stdout_str()
    );
    // The snapshot's own time is shown in the zone too (its header fits it).
    let snaps = in_zone(&repo, "XYZ-3", &["snapshots"]).ok().stdout_str();
    let row = snaps.lines().nth(1).unwrap_or_default();
    assert!(row.contains(" XYZ "), "{snaps}");
    let snaps = in_zone(&repo, "XYZ-3", &["snapshots", "--utc"])
        .ok()
        .stdout_str();
    assert!(
        snaps.lines().nth(1).unwrap_or_default().contains(" UTC "),
        "{snaps}"
    );
    let json = in_zone(&repo, "XYZ-3", &["--json", "snapshots"])
        .ok()
        .json();
    assert!(json[0]["time"].as_str().unwrap().ends_with('Z'), "{json}");
}
