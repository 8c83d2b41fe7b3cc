//! The mount daemon's jobs and control socket: optimize asked through the
//! socket while the mount serves reads and writes (every byte read checked),
//! the runner's queue, a status that never waits for a job, a client that
//! disconnects without cancelling its run, the schedule, the socket's
//! permissions and removal, and bad requests answered with one error line.

mod fuse_support;
mod support;

use std::collections::BTreeMap;
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{FileExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use serde_json::{json, Value};

use cairn_core::Result;
use cairn_volume::daemon::client::{reach, Client, Reach};
use cairn_volume::daemon::protocol::{ProgressLine, Request};
use cairn_volume::daemon::registry::{JobSpec, JOBS};
use cairn_volume::daemon::{Daemon, DaemonOptions};
use cairn_volume::fuse::{mount, MountOptions};
use cairn_volume::job_state::{JobState, Progress, ProgressSink};
use cairn_volume::{Volume, VolumeContent};
use fuse_support::{fuse_missing, skip_or_fail};

fn options(optimize_every: Option<Duration>) -> DaemonOptions {
    DaemonOptions {
        optimize_every,
        jobs: JOBS,
    }
}

/// Sends `{"request": name, ...args}` and returns the result (or the
/// error's line) and the progress lines seen before it.
fn ask(
    dir: &Path,
    name: &str,
    args: Value,
) -> (std::result::Result<Value, String>, Vec<ProgressLine>) {
    let Value::Object(args) = args else {
        panic!("args are an object")
    };
    let mut seen = Vec::new();
    let out = Client::connect(dir)
        .unwrap()
        .request(&Request::new(name, args), &mut |p| seen.push(p.clone()))
        .map_err(|e| e.to_string());
    (out, seen)
}

/// The file at `path` read through the mount after dropping its cached
/// pages, so the read reaches the daemon and its content state.
fn read_uncached(path: &Path) -> Vec<u8> {
    use std::io::Read;
    let mut f = fs::File::open(path).unwrap();
    rustix::fs::fadvise(&f, 0, None, rustix::fs::Advice::DontNeed).unwrap();
    let mut out = Vec::new();
    f.read_to_end(&mut out).unwrap();
    out
}

fn status(dir: &Path) -> Value {
    ask(dir, "status", json!({})).0.unwrap()
}

/// Files of 1 to 3 MiB sharing most of their content, by name.
fn cold_files(files: &Path, n: usize) -> BTreeMap<PathBuf, Vec<u8>> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(12);
    let base = support::text(&mut rng, 3 << 20);
    fs::create_dir_all(files.join("cold")).unwrap();
    (0..n)
        .map(|i| {
            let len = rng.gen_range(1 << 20..3 << 20);
            let mut bytes = base[..len].to_vec();
            let at = rng.gen_range(0..len - 5000);
            bytes[at..at + 5000].copy_from_slice(&support::text(&mut rng, 5000));
            let rel = PathBuf::from(format!("cold/f{i}"));
            fs::write(files.join(&rel), &bytes).unwrap();
            (rel, bytes)
        })
        .collect()
}

/// Optimize through the socket while readers read the files being switched
/// (through the daemon: passthrough off, so every read asks the content
/// state) and a writer writes one of them and creates and rewrites others:
/// every read returns the bytes last written, during the run and after it.
#[test]
fn optimize_through_the_socket_while_the_mount_serves_reads_and_writes() {
    if let Some(why) = fuse_missing() {
        return skip_or_fail(&format!("FUSE unavailable: {why}"));
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("vol");
    let mnt = tmp.path().join("mnt");
    fs::create_dir(&mnt).unwrap();
    let vol = support::create(&dir);
    let files = vol.dir().files();
    let cold = cold_files(&files, 6);
    let written = PathBuf::from("cold/f0");
    support::age(&files);

    let vol = Arc::new(vol);
    let content: Arc<VolumeContent> = vol.content().unwrap();
    let handle = mount(
        &files,
        &mnt,
        content,
        vol.locks().clone(),
        MountOptions {
            passthrough: false,
            ..MountOptions::default()
        },
    )
    .unwrap();
    let daemon = Daemon::start(vol.clone(), options(None)).unwrap();

    // What each file must read as: `cold` as written, with the writer's
    // patches to `written`; the writer holds the lock across write + update.
    let expected = Arc::new(Mutex::new(cold.clone()));
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    for r in 0..2 {
        let (expected, stop, mnt) = (expected.clone(), stop.clone(), mnt.clone());
        threads.push(std::thread::spawn(move || {
            let mut reads = 0u64;
            while !stop.load(Ordering::Relaxed) || reads < 12 {
                let names: Vec<PathBuf> = expected.lock().keys().cloned().collect();
                for rel in names.iter().skip(r) {
                    // Held across the read: the writer changes no file then.
                    let exp = expected.lock();
                    let got = read_uncached(&mnt.join(rel));
                    assert!(
                        got == exp[rel],
                        "{} read wrong during the run",
                        rel.display()
                    );
                    drop(exp);
                    reads += 1;
                }
            }
            reads
        }));
    }
    {
        let (expected, stop, mnt, written) =
            (expected.clone(), stop.clone(), mnt.clone(), written.clone());
        threads.push(std::thread::spawn(move || {
            let mut n = 0u64;
            fs::create_dir(mnt.join("hot")).unwrap();
            while !stop.load(Ordering::Relaxed) || n < 6 {
                // Another file, new and young, written and read back.
                let hot = mnt.join(format!("hot/h{}", n % 3));
                let bytes = fuse_support::pattern(n as u8, 100_000 + n as usize);
                fs::write(&hot, &bytes).unwrap();
                assert!(fs::read(&hot).unwrap() == bytes);
                // A 4 KiB patch into a cold file, maybe mid-switch.
                let mut exp = expected.lock();
                let patch = fuse_support::pattern(n as u8 ^ 0x5a, 4096);
                let at = (n * 300_000) % (exp[&written].len() as u64 - 4096);
                let f = fs::OpenOptions::new()
                    .write(true)
                    .open(mnt.join(&written))
                    .unwrap();
                f.write_all_at(&patch, at).unwrap();
                let e = exp.get_mut(&written).unwrap();
                e[at as usize..at as usize + 4096].copy_from_slice(&patch);
                drop(exp);
                n += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
            n
        }));
    }

    let (report, progress) = ask(&dir, "optimize", json!({"min_age_secs": 1}));
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        assert!(t.join().unwrap() > 0);
    }
    let report = report.unwrap();
    // Every cold file but the one written to is optimized; that one is
    // optimized or left for the next run ("changed since the scan", or too
    // young when the scan came after a write).
    let optimized = report["files_optimized"].as_u64().unwrap();
    assert!((5..=6).contains(&optimized), "{report}");
    assert!(progress.iter().all(|p| p.job == "optimize"), "{progress:?}");
    for (rel, want) in expected.lock().iter() {
        assert!(read_uncached(&mnt.join(rel)) == *want, "{}", rel.display());
    }
    for rel in cold.keys().filter(|r| **r != written) {
        assert!(
            vol.table().contains(support::ino(&files.join(rel))),
            "{}",
            rel.display()
        );
    }
    // Status shows the run's report as the job's last result.
    let st = status(&dir);
    let last = &st["jobs"]["optimize"]["last"];
    assert_eq!(last["trigger"], "request", "{st}");
    assert_eq!(last["report"]["files_optimized"], optimized, "{st}");
    assert_eq!(st["jobs"]["optimize"]["state"], "idle", "{st}");
    assert!(st["optimized_files"].as_u64().unwrap() >= 5, "{st}");

    // New chunks after the content state's readers have read the store:
    // the next run must make them findable (`VolumeContent::refresh`)
    // before it switches files to them.
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(13);
    fs::create_dir(mnt.join("new")).unwrap();
    let fresh: Vec<(PathBuf, Vec<u8>)> = (0..2)
        .map(|i| {
            let bytes: Vec<u8> = (0..300_000).map(|_| rng.gen()).collect();
            let path = mnt.join(format!("new/n{i}"));
            fs::write(&path, &bytes).unwrap();
            (path, bytes)
        })
        .collect();
    support::age(&files.join("new"));
    let report = ask(&dir, "optimize", json!({"min_age_secs": 1})).0.unwrap();
    assert!(report["files_optimized"].as_u64().unwrap() >= 2, "{report}");
    for (path, bytes) in &fresh {
        assert!(read_uncached(path) == *bytes, "{}", path.display());
    }

    daemon.stop();
    handle.unmount().unwrap();
    assert!(!dir.join("control.sock").exists());
}

/// A test job that reports progress, then waits until [`GATE`] opens.
static GATE: Mutex<bool> = Mutex::new(false);
static GATE_OPENED: Condvar = Condvar::new();

fn blocking_job(_: &Volume, args: &Value, progress: ProgressSink<'_>) -> Result<Value> {
    progress(Progress::files("waiting", 1, Some(2)));
    let mut open = GATE.lock();
    while !*open {
        GATE_OPENED.wait(&mut open);
    }
    Ok(json!({"done": true, "args": args}))
}

static WITH_BLOCKING: &[JobSpec] = &[
    JobSpec {
        name: "optimize",
        run: JOBS[0].run,
    },
    JobSpec {
        name: "block",
        run: blocking_job,
    },
];

fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// One job at a time: a second request waits in the queue (and says so),
/// status answers at once with the running job's progress, a client that
/// disconnects leaves its run going, and each run's result is kept.
#[test]
fn jobs_run_one_at_a_time_and_status_never_waits() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("vol");
    let vol = Arc::new(support::create(&dir));
    fs::write(vol.dir().files().join("a"), b"some bytes").unwrap();
    let daemon = Daemon::start(
        vol.clone(),
        DaemonOptions {
            optimize_every: None,
            jobs: WITH_BLOCKING,
        },
    )
    .unwrap();
    let sock = dir.join("control.sock");
    assert_eq!(
        fs::metadata(&sock).unwrap().permissions().mode() & 0o777,
        0o600
    );

    // The blocking job asked for, its first progress line read, and the
    // client gone.
    {
        let mut s = UnixStream::connect(&sock).unwrap();
        s.write_all(b"{\"request\":\"block\",\"note\":1}\n")
            .unwrap();
        let mut line = String::new();
        BufReader::new(&s).read_line(&mut line).unwrap();
        assert!(
            line.starts_with("{\"progress\":{\"job\":\"block\""),
            "{line}"
        );
    }
    eventually("the blocking job to report", || {
        status(&dir)["jobs"]["block"]["progress"]["phase"] == "waiting"
    });
    let st = status(&dir);
    assert_eq!(st["jobs"]["block"]["state"], "running", "{st}");
    assert_eq!(st["jobs"]["block"]["progress"]["total"], 2, "{st}");
    assert_eq!(st["jobs"]["optimize"]["state"], "idle", "{st}");
    assert_eq!(st["logical_bytes"], 10, "{st}");

    // Optimize asked for now waits its turn.
    let asker = {
        let dir = dir.clone();
        std::thread::spawn(move || ask(&dir, "optimize", json!({"min_age_secs": 3600})))
    };
    eventually("optimize to queue", || {
        status(&dir)["jobs"]["optimize"]["state"] == "queued"
    });
    assert!(!asker.is_finished());
    *GATE.lock() = true;
    GATE_OPENED.notify_all();
    let (report, progress) = asker.join().unwrap();
    let report = report.unwrap();
    assert_eq!(report["files_scanned"], 1, "{report}");
    assert_eq!(
        progress.first().map(|p| (p.state, p.ahead)),
        Some((JobState::Queued, Some(1))),
        "{progress:?}"
    );
    // The disconnected client's run ended all the same, with its result.
    let st = status(&dir);
    let block = &st["jobs"]["block"];
    assert_eq!(block["state"], "idle", "{st}");
    assert_eq!(
        block["last"]["report"],
        json!({"done": true, "args": {"note": 1}})
    );
    assert_eq!(st["jobs"]["optimize"]["last"]["report"]["files_scanned"], 1);

    daemon.stop();
    assert!(!sock.exists(), "the socket is removed at stop");
    assert!(matches!(reach(&dir).unwrap(), Reach::Busy(Some(pid)) if pid == std::process::id()));
    drop(vol);
    assert!(matches!(reach(&dir).unwrap(), Reach::Free));
}

/// A socket left by a killed daemon (nobody accepts on it) is replaced;
/// bad requests get one error line each and the daemon goes on.
#[test]
fn a_stale_socket_is_replaced_and_bad_requests_get_one_error_line() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("vol");
    let vol = Arc::new(support::create(&dir));
    drop(UnixListener::bind(dir.join("control.sock")).unwrap());
    assert!(dir.join("control.sock").exists());
    let daemon = Daemon::start(vol.clone(), options(None)).unwrap();

    let raw = |line: &str| {
        let mut s = UnixStream::connect(dir.join("control.sock")).unwrap();
        s.write_all(line.as_bytes()).unwrap();
        let mut lines = Vec::new();
        for l in BufReader::new(&s).lines() {
            lines.push(l.unwrap());
        }
        lines
    };
    for (line, want) in [
        ("not json\n", "not JSON"),
        (
            "{\"request\":\"defrag\"}\n",
            "unknown request \\\"defrag\\\"",
        ),
        (
            "{\"request\":\"optimize\",\"min_age\":5}\n",
            "unknown field `min_age`",
        ),
        (
            "{\"request\":\"optimize\",\"min_age_secs\":0}\n",
            "below the floor",
        ),
        ("{\"request\":\"status\",\"x\":1}\n", "takes no options"),
    ] {
        let lines = raw(line);
        let last = lines.last().unwrap();
        assert!(
            last.starts_with("{\"error\":") && last.contains(want),
            "{line}: {lines:?}"
        );
        let v: Value = serde_json::from_str(last).unwrap();
        assert!(!v["error"].as_str().unwrap().contains('\n'));
    }
    assert_eq!(raw("{\"request\":\"status\"}\n").len(), 1);
    // A failed run is the job's last result.
    let st = status(&dir);
    assert!(st["jobs"]["optimize"]["last"]["error"]
        .as_str()
        .unwrap()
        .contains("below the floor"));
    daemon.stop();
}

/// A volume deep enough that its socket's path does not fit a socket
/// address (108 bytes) still has one.
#[test]
fn a_deep_volume_has_its_socket() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("a-rather-long-directory-name".repeat(5));
    assert!(dir.join("control.sock").as_os_str().len() > 110);
    let vol = Arc::new(support::create(&dir));
    let daemon = Daemon::start(vol.clone(), options(None)).unwrap();
    assert!(dir.join("control.sock").exists());
    assert_eq!(status(&dir)["jobs"]["optimize"]["state"], "idle");
    daemon.stop();
    assert!(!dir.join("control.sock").exists());
}

/// With `optimize_every`, the daemon optimizes on its own with the
/// volume's policy.
#[test]
fn the_schedule_optimizes_with_the_volume_policy() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("vol");
    let vol = support::create(&dir);
    let files = vol.dir().files();
    let cold = cold_files(&files, 2);
    support::age(&files);
    let vol = Arc::new(vol);
    let daemon = Daemon::start(vol.clone(), options(Some(Duration::from_secs(1)))).unwrap();
    eventually("a scheduled run", || {
        status(&dir)["jobs"]["optimize"]["last"]["report"]["files_optimized"] == 2
    });
    let st = status(&dir);
    assert_eq!(
        st["jobs"]["optimize"]["last"]["trigger"], "schedule",
        "{st}"
    );
    let content = vol.content().unwrap();
    for (rel, want) in &cold {
        assert!(vol.table().contains(support::ino(&files.join(rel))));
        assert!(support::read_all(&content, &files.join(rel)) == *want);
    }
    daemon.stop();
}
