//! SIGKILL of the volume's mount daemon (issue 32, "Correctness under
//! load"): a writer fsyncs writes into optimized and plain files through
//! `cairn volume mount`, and an optimization runs inside the daemon (asked
//! for through its control socket) on files left cold for it, while the
//! daemon is killed at a random moment;
//! then the volume is mounted again. No byte a returned fsync covered is
//! lost; the write in flight at the kill holds, byte by byte, its old or
//! its new content; the files are optimized again between rounds (so the
//! next round's writes recall granules), and the chunk store passes
//! `check --read-data` at the end.
//!
//! CI runs a few rounds; `CAIRN_VOLUME_KILL_ROUNDS=200` runs the long one.

mod common;

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use common::volume::{age, volume};
use common::{cairn_env, s, Rng};

/// A write started and not known to be durable: after the kill its range
/// may hold the old bytes or the new ones.
struct InFlight {
    file: usize,
    offset: usize,
    data: Vec<u8>,
}

/// What the writer knows: each file's bytes as its last returned fsync
/// left them, and the write in flight.
struct Model {
    files: Vec<Vec<u8>>,
    in_flight: Option<InFlight>,
}

const FILES: usize = 4;

/// Writes and fsyncs at random until the mount stops answering.
fn write_until_killed(mnt: &Path, model: &Mutex<Model>, seed: u64) -> usize {
    let mut rng = Rng::new(seed);
    let mut done = 0;
    loop {
        let file = rng.range(0, FILES as u64) as usize;
        let len = model.lock().unwrap().files[file].len();
        let n = rng.range(1, 64 << 10) as usize;
        let offset = rng.range(0, len as u64 + 4096) as usize;
        let data = rng.bytes(n);
        model.lock().unwrap().in_flight = Some(InFlight {
            file,
            offset,
            data: data.clone(),
        });
        let path = mnt.join(format!("f{file}"));
        let written = std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .and_then(|f| {
                f.write_all_at(&data, offset as u64)?;
                f.sync_all()
            });
        if written.is_err() {
            return done;
        }
        let mut m = model.lock().unwrap();
        let bytes = &mut m.files[file];
        if bytes.len() < offset + n {
            bytes.resize(offset + n, 0);
        }
        bytes[offset..offset + n].copy_from_slice(&data);
        m.in_flight = None;
        done += 1;
    }
}

/// Reads every file through the mount and checks it against the model
/// (the write in flight: old or new bytes, each, and a length anywhere up
/// to its end); the model then takes
/// what was read, so the next round starts from it.
fn check_and_settle(mnt: &Path, model: &mut Model) {
    let in_flight = model.in_flight.take();
    for (i, want) in model.files.iter_mut().enumerate() {
        let got = std::fs::read(mnt.join(format!("f{i}"))).unwrap();
        let flight = in_flight.as_ref().filter(|f| f.file == i);
        let new_len = flight.map_or(0, |f| f.offset + f.data.len());
        // A write in flight may have landed in part: the kernel hands a
        // write to the daemon a page run at a time, so a file it extends
        // may end at any length up to the write's end.
        let len_ok = got.len() == want.len()
            || (flight.is_some() && got.len() > want.len() && got.len() <= new_len);
        assert!(
            len_ok,
            "f{i}: length {} after the kill, {} fsynced",
            got.len(),
            want.len()
        );
        for (at, b) in got.iter().enumerate() {
            let old = want.get(at).copied().unwrap_or(0);
            let new = flight
                .filter(|f| (f.offset..f.offset + f.data.len()).contains(&at))
                .map(|f| f.data[at - f.offset]);
            assert!(
                *b == old || Some(*b) == new,
                "f{i} byte {at}: {b}, fsynced {old}, in flight {new:?}"
            );
        }
        *want = got;
    }
}

#[test]
fn fsynced_bytes_survive_a_killed_volume_daemon() {
    if let Some(why) = common::fuse::fuse_missing() {
        common::skip_or_fail(&format!("FUSE unavailable: {why}"));
        return;
    }
    let rounds: usize = std::env::var("CAIRN_VOLUME_KILL_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4);
    let (_tmp, dir, mnt) = common::volume::created(&["--encryption", "none"]);
    let files: PathBuf = dir.join("files");
    let mut rng = Rng::new(77);
    let shared = rng.bytes(1 << 20);
    let mut contents = Vec::new();
    for i in 0..FILES {
        let mut bytes = shared.clone();
        bytes.extend_from_slice(&rng.bytes((i + 1) << 19));
        std::fs::write(files.join(format!("f{i}")), &bytes).unwrap();
        contents.push(bytes);
    }
    let optimize = |dir: &Path| {
        age(&dir.join("files"));
        volume(&["volume", "optimize", s(dir), "--min-age", "1s", "--json"])
            .ok()
            .json()
    };
    let report = optimize(&dir);
    assert_eq!(report["files_optimized"], FILES as u64, "{report}");

    // Files nobody writes, added cold before each round for the daemon's
    // optimization to switch while the daemon is killed.
    let mut cold: Vec<(String, Vec<u8>)> = Vec::new();
    let model = Mutex::new(Model {
        files: contents,
        in_flight: None,
    });
    let mut writes = 0;
    let check_cold = |cold: &[(String, Vec<u8>)]| {
        for (name, bytes) in cold {
            let got = std::fs::read(mnt.join(name)).unwrap();
            assert!(&got == bytes, "{name} differs after the kill");
        }
    };
    for round in 0..rounds {
        let name = format!("cold{round}");
        let len = rng.range(1 << 20, 3 << 20) as usize;
        let bytes = rng.bytes(len);
        std::fs::write(files.join(&name), &bytes).unwrap();
        cold.push((name, bytes));
        age(&files);
        let Some(m) = common::fuse::volume_mount(&dir, &mnt) else {
            return;
        };
        check_and_settle(&mnt, &mut model.lock().unwrap());
        check_cold(&cold);
        let pid = m.pid().to_string();
        let delay = Duration::from_millis(rng.range(100, 700));
        writes += std::thread::scope(|sc| {
            let writer = sc.spawn(|| write_until_killed(&mnt, &model, round as u64));
            // Through the daemon; killed with it, or done before.
            sc.spawn(|| {
                let mut c = common::base_command();
                c.args(["volume", "optimize", s(&dir), "--min-age", "1s", "-q"]);
                c.stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null())
                    .status()
                    .unwrap()
            });
            std::thread::sleep(delay);
            std::process::Command::new("kill")
                .args(["-KILL", &pid])
                .status()
                .unwrap();
            writer.join().unwrap()
        });
        // Reaps the killed daemon and detaches its dead mount.
        drop(m);
        assert!(
            !common::fuse::is_mounted(&mnt),
            "round {round}: still mounted"
        );
        if round % 2 == 1 {
            optimize(&dir);
        }
    }
    let Some(m) = common::fuse::volume_mount(&dir, &mnt) else {
        return;
    };
    check_and_settle(&mnt, &mut model.lock().unwrap());
    check_cold(&cold);
    drop(m);
    println!("{writes} fsynced writes in {rounds} rounds");
    assert!(
        writes > rounds,
        "only {writes} fsynced writes in {rounds} rounds"
    );
    cairn_env(
        &["check", "--repo", s(&dir.join("store")), "--read-data"],
        &[],
    )
    .ok();
}
