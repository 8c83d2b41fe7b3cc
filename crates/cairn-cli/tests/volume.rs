//! `cairn volume create|optimize|status` through the binary: a volume is
//! created (encrypted, with the test password), files put into DIR/files,
//! optimized once they are a second old, and `status --json` shows them
//! optimized and the space saved.

mod common;

use std::path::Path;
use std::time::{Duration, SystemTime};

use common::volume::{age, volume};
use common::{s, Rng};

#[test]
fn optimized_files_show_in_status_with_their_savings() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("vol");
    // Windows' minimum size, so the small file below stays plain.
    let out = volume(&["volume", "create", s(&dir), "--min-size", "32KiB"]).ok();
    assert!(
        out.stdout_str().contains("created cairn volume"),
        "{}",
        out.stdout_str()
    );
    let files = dir.join("files");
    let mut rng = Rng::new(32);
    let base = rng.text(2 << 20);
    let mut logical = 0u64;
    for i in 0..4 {
        let mut bytes = base.clone();
        bytes.extend_from_slice(&rng.text(50_000 + i * 100));
        logical += bytes.len() as u64;
        std::fs::write(files.join(format!("copy{i}.txt")), &bytes).unwrap();
    }
    std::fs::write(files.join("small.txt"), b"below the minimum size").unwrap();
    logical += 22;

    // Too young at first: nothing is optimized.
    let out = volume(&["volume", "optimize", s(&dir), "--min-age", "1h"]).ok();
    assert!(
        out.stdout_str().contains("optimized 0 of 5 files"),
        "{}",
        out.stdout_str()
    );

    age(&files);
    let out = volume(&["volume", "optimize", s(&dir), "--min-age", "1s"]).ok();
    let text = out.stdout_str();
    assert!(text.contains("optimized 4 of 5 files"), "{text}");
    assert!(text.contains("1 smaller than the minimum size"), "{text}");

    let st = volume(&["volume", "status", s(&dir), "--json"]).ok().json();
    assert_eq!(st["optimized_files"], 4, "{st}");
    assert_eq!(st["unoptimized_files"], 1, "{st}");
    assert_eq!(st["logical_bytes"], logical, "{st}");
    let physical = st["physical_bytes"].as_u64().unwrap();
    assert!(physical < logical / 2, "{st}");
    assert!(st["savings_rate"].as_f64().unwrap() > 0.5, "{st}");

    // The files keep their content and their times in the backing tree's
    // metadata; the human status names the savings rate.
    let out = volume(&["volume", "status", s(&dir)]).ok();
    assert!(
        out.stdout_str().contains("savings rate"),
        "{}",
        out.stdout_str()
    );
    let meta = std::fs::metadata(files.join("copy0.txt")).unwrap();
    assert!(meta.modified().unwrap() < SystemTime::now() - Duration::from_secs(3000));
    // The backing file keeps no block at all, its partial last one included.
    use std::os::unix::fs::MetadataExt;
    assert!(!meta.len().is_multiple_of(4096));
    assert_eq!(meta.blocks(), 0, "blocks left in an optimized backing file");
}

#[test]
fn bad_volume_commands_fail_with_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("vol");
    let err = volume(&["volume", "status", s(&dir)])
        .code(1)
        .one_line_error();
    assert!(err.contains("is not a cairn volume"), "{err}");
    volume(&["volume", "create", s(&dir), "--encryption", "none"]).ok();
    let err = volume(&["volume", "optimize", s(&dir), "--min-age", "500ms"])
        .code(2)
        .one_line_error();
    assert!(err.contains("at least 1s"), "{err}");
    let err = volume(&["volume", "optimize", s(&dir), "--min-size", "lots"])
        .code(2)
        .one_line_error();
    assert!(err.contains("--min-size"), "{err}");
    let err = volume(&["volume", "optimize", s(&dir), "--partition-by", "size"])
        .code(2)
        .one_line_error();
    assert!(err.contains("expected `type` or `path`"), "{err}");
    let err = volume(&["volume", "create", s(&dir)])
        .code(1)
        .one_line_error();
    assert!(err.contains("not empty"), "{err}");
}

/// Several sessions split the files by type by default (004's partitioned
/// dedup): each type is a partition with a chunk log of its own, named in
/// `partitions.json`, and the run says so; every file reads back after
/// the collection that reconciles the partitions.
#[test]
fn sessions_partition_the_files_by_type() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("vol");
    volume(&["volume", "create", s(&dir), "--encryption", "none"]).ok();
    let files = dir.join("files");
    let mut rng = Rng::new(35);
    let shared = rng.text(300_000);
    for (name, extra) in [
        ("a.txt", 1000),
        ("b.TXT", 2000),
        ("c.log", 3000),
        ("d.log", 4000),
    ] {
        let mut bytes = shared.clone();
        bytes.extend_from_slice(&rng.text(extra));
        std::fs::write(files.join(name), bytes).unwrap();
    }
    age(&files);
    let optimize = |extra: &[&str]| {
        let base = [
            "volume",
            "optimize",
            s(&dir),
            "--min-age",
            "1s",
            "--sessions",
            "2",
        ];
        volume(&[&base[..], extra].concat()).ok().stdout_str()
    };
    // Below the minimum partition size, the types share one partition:
    // one session, the whole store's dedup.
    let text = optimize(&[]);
    assert!(text.contains("optimized 4 of 4 files"), "{text}");
    assert!(!text.contains("partitions"), "{text}");
    assert!(!dir.join("partitions.json").exists());
    // Four more, and with the minimum lowered: a partition per type.
    for name in ["e.txt", "f.TXT", "g.log", "h.log"] {
        let mut bytes = shared.clone();
        bytes.extend_from_slice(name.as_bytes());
        std::fs::write(files.join(name), bytes).unwrap();
    }
    age(&files);
    let text = optimize(&["--min-partition-size", "100KiB"]);
    assert!(text.contains("optimized 4 of 8 files"), "{text}");
    assert!(text.contains("2 sessions over 2 partitions"), "{text}");
    let map = std::fs::read_to_string(dir.join("partitions.json")).unwrap();
    assert!(
        map.contains("\"type:txt\"") && map.contains("\"type:log\""),
        "{map}"
    );
    volume(&["volume", "gc", s(&dir)]).ok();
    volume(&["check", "--repo", s(&dir.join("store")), "--read-data"]).ok();
    let st = volume(&["volume", "status", s(&dir), "--json"]).ok().json();
    assert_eq!(st["optimized_files"], 8, "{st}");
}

/// Runs `cairn volume mount` while `check` uses the mount and `status`
/// asks its daemon, then ends it with SIGTERM, as a person's Ctrl-C would.
fn while_mounted(dir: &Path, mnt: &Path, check: impl FnOnce(&Path)) -> bool {
    common::volume::while_mounted(dir, mnt, |mnt| {
        check(mnt);
        // Another command on the volume while it is mounted asks the daemon.
        let st = volume(&["volume", "status", s(dir), "--json"]).ok().json();
        assert_eq!(st["jobs"]["optimize"]["state"], "idle", "{st}");
    })
}

#[test]
fn a_mounted_volume_serves_optimized_files_and_recalls_what_is_written() {
    let (_tmp, dir, mnt) = common::volume::created(&[]);
    let files = dir.join("files");
    let mut rng = Rng::new(33);
    let shared = rng.bytes(1 << 20);
    let mut big = shared.clone();
    big.extend_from_slice(&rng.bytes(3 << 20));
    std::fs::write(files.join("big"), &big).unwrap();
    std::fs::write(files.join("twin"), &shared).unwrap();
    age(&files);
    volume(&["volume", "optimize", s(&dir), "--min-age", "1s"]).ok();

    let mut expected = big.clone();
    let write_at = 2 << 20;
    let patch = rng.bytes(4096);
    expected[write_at..write_at + 4096].copy_from_slice(&patch);
    let mounted = while_mounted(&dir, &mnt, |mnt| {
        // As root, the mount reads ahead 1 MiB (the kernel's default is
        // 128 KiB; docs/volume.md "Data path").
        if nix::unistd::geteuid().is_root() {
            let st = std::fs::metadata(mnt).unwrap();
            let dev = std::os::unix::fs::MetadataExt::dev(&st);
            let (major, minor) = (libc::major(dev), libc::minor(dev));
            let kb =
                std::fs::read_to_string(format!("/sys/class/bdi/{major}:{minor}/read_ahead_kb"))
                    .unwrap();
            assert_eq!(kb.trim(), "1024");
        }
        assert!(std::fs::read(mnt.join("big")).unwrap() == big);
        assert!(std::fs::read(mnt.join("twin")).unwrap() == shared);
        // A 4 KiB write into the middle of the optimized file.
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(mnt.join("big"))
            .unwrap();
        f.write_all_at(&patch, write_at as u64).unwrap();
        f.sync_all().unwrap();
        drop(f);
        assert!(std::fs::read(mnt.join("big")).unwrap() == expected);
        // New files, renames and appends work as on any file system.
        std::fs::write(mnt.join("new.txt"), b"written through the mount").unwrap();
        std::fs::rename(mnt.join("twin"), mnt.join("twin2")).unwrap();
        assert!(std::fs::read(mnt.join("twin2")).unwrap() == shared);
    });
    if !mounted {
        return;
    }
    // Only the granule around the write was recalled: the backing file
    // holds far less than the file's length.
    let allocated = {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(files.join("big")).unwrap().blocks() * 512
    };
    assert!(allocated <= 256 << 10, "{allocated} bytes allocated");
    let st = volume(&["volume", "status", s(&dir), "--json"]).ok().json();
    assert_eq!(st["optimized_files"], 2, "{st}");
    assert_eq!(st["unoptimized_files"], 1, "{st}");
    // Mounted again, the volume reads what was written.
    while_mounted(&dir, &mnt, |mnt| {
        assert!(std::fs::read(mnt.join("big")).unwrap() == expected);
        assert!(std::fs::read(mnt.join("twin2")).unwrap() == shared);
        assert_eq!(
            std::fs::read(mnt.join("new.txt")).unwrap(),
            b"written through the mount"
        );
    });
}

/// `status` and `optimize` on a mounted volume go to its daemon, which
/// needs no password; the files read back right through the mount, and
/// `status` shows the run as the optimize job's last result.
#[test]
fn a_mounted_volume_optimizes_and_reports_through_its_daemon() {
    let (_tmp, dir, mnt) = common::volume::created(&[]);
    let files = dir.join("files");
    let mut rng = Rng::new(34);
    let base = rng.text(1 << 20);
    let mut expected = Vec::new();
    for i in 0..3 {
        let mut bytes = base.clone();
        bytes.extend_from_slice(&rng.text(40_000 + i * 1000));
        // One directory each: three partitions by path, one by type.
        std::fs::create_dir(files.join(format!("d{i}"))).unwrap();
        std::fs::write(files.join(format!("d{i}/f{i}")), &bytes).unwrap();
        expected.push((format!("d{i}/f{i}"), bytes));
    }
    age(&files);
    let Some(m) = common::fuse::volume_mount(&dir, &mnt) else {
        return;
    };
    let no_password = |args: &[&str]| {
        let mut c = common::base_command();
        use std::process::Stdio;
        c.env_remove("CAIRN_PASSWORD").args(args);
        let child = c
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        common::finish(child, args)
    };
    let st = no_password(&["volume", "status", s(&dir), "--json"])
        .ok()
        .json();
    assert_eq!(st["optimized_files"], 0, "{st}");
    assert_eq!(st["unoptimized_files"], 3, "{st}");
    assert_eq!(st["jobs"]["optimize"]["state"], "idle", "{st}");
    assert!(st["jobs"]["optimize"].get("last").is_none(), "{st}");

    // The partitioning asked for reaches the daemon's run.
    let report = no_password(&[
        "volume",
        "optimize",
        s(&dir),
        "--min-age",
        "1s",
        "--sessions",
        "2",
        "--partition-by",
        "path",
        "--min-partition-size",
        "1",
        "--json",
    ])
    .ok()
    .json();
    assert_eq!(report["files_optimized"], 3, "{report}");
    assert_eq!(report["sessions"], 2, "{report}");
    assert_eq!(report["partitions"], 3, "{report}");
    assert!(report["snapshot"].is_string(), "{report}");
    for (name, bytes) in &expected {
        assert!(std::fs::read(mnt.join(name)).unwrap() == *bytes, "{name}");
    }
    let st = volume(&["volume", "status", s(&dir), "--json"]).ok().json();
    assert_eq!(st["optimized_files"], 3, "{st}");
    let last = &st["jobs"]["optimize"]["last"];
    assert_eq!(last["trigger"], "request", "{st}");
    assert_eq!(last["report"], report, "{st}");
    let text = volume(&["volume", "status", s(&dir)]).ok().stdout_str();
    assert!(
        text.contains("optimize job: idle; last run (on request) ended"),
        "{text}"
    );
    // The human report of a run through the daemon is the offline one.
    let text = volume(&["volume", "optimize", s(&dir), "--min-age", "1s"])
        .ok()
        .stdout_str();
    assert!(text.contains("optimized 0 of 3 files"), "{text}");
    assert!(text.contains("3 already optimized"), "{text}");

    let pid = m.pid().to_string();
    std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    m.wait_exit().ok();
    assert!(!dir.join("control.sock").exists());
    // Offline again: status opens the volume itself, every job idle.
    let st = volume(&["volume", "status", s(&dir), "--json"]).ok().json();
    assert_eq!(st["optimized_files"], 3, "{st}");
    assert_eq!(st["jobs"]["optimize"]["state"], "idle", "{st}");
}

/// `--optimize-every` runs optimize with the volume's policy on its own.
#[test]
fn a_mount_optimizes_on_its_schedule() {
    let (_tmp, dir, mnt) = common::volume::created(&["--min-age", "1s"]);
    let files = dir.join("files");
    let bytes = Rng::new(35).text(300_000);
    std::fs::write(files.join("doc"), &bytes).unwrap();
    age(&files);
    let Some(m) = common::fuse::volume_mount_with(&dir, &mnt, &["--optimize-every", "1s"]) else {
        return;
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let st = volume(&["volume", "status", s(&dir), "--json"]).ok().json();
        // Nothing but the schedule runs optimize here. The file counts as
        // optimized once switched, a moment before the run records its end.
        if st["optimized_files"] == 1 && st["jobs"]["optimize"]["state"] == "idle" {
            assert_eq!(
                st["jobs"]["optimize"]["last"]["trigger"], "schedule",
                "{st}"
            );
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no scheduled run: {st}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(std::fs::read(mnt.join("doc")).unwrap() == bytes);
    let err = volume(&[
        "volume",
        "mount",
        s(&dir),
        s(&mnt),
        "--optimize-every",
        "0s",
    ])
    .code(2)
    .one_line_error();
    assert!(err.contains("at least 1s"), "{err}");
    drop(m);
}

/// A volume held by a process that serves no control socket (an offline
/// command): one error line naming that process.
#[test]
fn a_volume_held_without_a_daemon_names_its_holder() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("vol");
    volume(&["volume", "create", s(&dir), "--encryption", "none"]).ok();
    use std::io::Write;
    let mut lock = std::fs::OpenOptions::new()
        .write(true)
        .open(dir.join("volume.lock"))
        .unwrap();
    writeln!(lock, "{}", std::process::id()).unwrap();
    let held = nix::fcntl::Flock::lock(lock, nix::fcntl::FlockArg::LockExclusiveNonblock).unwrap();
    for cmd in ["status", "optimize"] {
        let err = volume(&["volume", cmd, s(&dir)]).code(1).one_line_error();
        let want = format!("in use by process {}", std::process::id());
        assert!(err.contains(&want), "{err}");
    }
    drop(held);
    volume(&["volume", "status", s(&dir)]).ok();
}

/// A mount killed outright leaves its socket behind: the commands then
/// open the volume themselves, and the next mount replaces the socket.
#[test]
fn a_killed_mount_leaves_a_socket_the_next_mount_replaces() {
    let (_tmp, dir, mnt) = common::volume::created(&["--encryption", "none"]);
    std::fs::write(dir.join("files/a"), b"kept").unwrap();
    let Some(m) = common::fuse::volume_mount(&dir, &mnt) else {
        return;
    };
    std::process::Command::new("kill")
        .args(["-KILL", &m.pid().to_string()])
        .status()
        .unwrap();
    drop(m);
    assert!(dir.join("control.sock").exists());
    let st = volume(&["volume", "status", s(&dir), "--json"]).ok().json();
    assert_eq!(st["unoptimized_files"], 1, "{st}");
    let Some(m) = common::fuse::volume_mount(&dir, &mnt) else {
        return;
    };
    let st = volume(&["volume", "status", s(&dir), "--json"]).ok().json();
    assert_eq!(st["jobs"]["optimize"]["state"], "idle", "{st}");
    assert_eq!(std::fs::read(mnt.join("a")).unwrap(), b"kept");
    drop(m);
}
