//! Backups from several hosts and garbage collections running together
//! through the binary, with SIGKILL at random moments of any of them
//! (issue 33's fault test; docs/concurrency.md). Round after round three
//! backups (trees sharing a file, so they store it side by side) and a
//! collection start together, and each process is killed with probability
//! one half at a random moment of the round; older snapshots are forgotten
//! between rounds, so every collection has garbage. Afterwards: every
//! snapshot a backup reported committed (and not forgotten) restores byte
//! for byte, `check --read-data` is clean, and after two collections
//! nothing is left that no collection reclaims (no staged record, pending
//! list or reservation; no container referenced by no snapshot).
//!
//! The same on S3 (a VersityGW server; leases of 10 s, so a killed
//! writer keeps a collection waiting that long), and locally with the
//! frugal index (004's chunk log: each backup beside others appends to a
//! log of its own, docs/concurrency.md "Frugal logs per writer").
//!
//! CI runs `CAIRN_FAULT_ROUNDS` rounds locally (default 6) and a third of
//! them on S3; `bench/many-writers-kill.sh` runs hundreds.
//! Every process compacts the index once two deltas are listed
//! (`CAIRN_COMPACT_DELTAS=2`), so merges beside writers are killed too.
//! `CAIRN_FAULT_SEED` varies the random choices, and `CAIRN_FAULT_KEEP=DIR`
//! runs in a new directory inside DIR and leaves it (the repository, and
//! `rounds.log` with what every process printed) for a failure's
//! post-mortem.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use cairn_backend::s3::test_server::S3TestServer;
use common::*;

/// Where the repository lives.
enum Store {
    Local(PathBuf),
    S3 {
        server: S3TestServer,
        url: String,
        cache: PathBuf,
    },
}

impl Store {
    /// Every process compacts the index once two deltas are listed, so
    /// merges run beside writers and collections all the time, and are
    /// killed too (docs/concurrency.md, "Compaction beside writers").
    fn command(&self, args: &[&str]) -> Command {
        let mut c = self.command_as_is(args);
        c.env("CAIRN_COMPACT_DELTAS", "2");
        c
    }

    fn command_as_is(&self, args: &[&str]) -> Command {
        match self {
            Store::Local(repo) => command(repo, args),
            Store::S3 { server, url, cache } => {
                let mut c = command(Path::new(url), &["--s3-lease-secs", "10"]);
                c.args(args)
                    .env("CAIRN_CACHE_DIR", cache)
                    .env("AWS_ACCESS_KEY_ID", server.access_key())
                    .env("AWS_SECRET_ACCESS_KEY", server.secret_key())
                    .env_remove("AWS_SESSION_TOKEN")
                    .env_remove("AWS_ENDPOINT_URL");
                c
            }
        }
    }

    fn run(&self, args: &[&str]) -> Run {
        let out = self
            .command(args)
            .stdin(Stdio::null())
            .output()
            .expect("running cairn");
        Run::from_output(args.iter().map(|a| a.to_string()).collect(), out)
    }

    /// Starts `args` with a thread that waits for the process and notes
    /// when it ended.
    fn start(&self, args: &[&str]) -> Running {
        let child = self.spawn(args);
        let pid = nix::unistd::Pid::from_raw(child.id() as i32);
        let ended = std::sync::Arc::new(std::sync::OnceLock::new());
        let ended_by_waiter = ended.clone();
        let waiter = std::thread::spawn(move || {
            let out = child.wait_with_output().unwrap();
            let _ = ended_by_waiter.set(Instant::now());
            out
        });
        Running { pid, ended, waiter }
    }

    fn spawn(&self, args: &[&str]) -> Child {
        self.command(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }
}

const HOSTS: usize = 3;

/// A process of a round: its pid (so the round can kill it while its
/// waiter holds it; the pid stays its own until the waiter reaps it),
/// when it ended, and the waiter that collects its output.
struct Running {
    pid: nix::unistd::Pid,
    ended: std::sync::Arc<std::sync::OnceLock<Instant>>,
    waiter: std::thread::JoinHandle<std::process::Output>,
}

impl Running {
    /// SIGKILL, unless it has ended; whether it was still running.
    /// (Between the waiter's reap and its note the pid could in theory
    /// be reused; the pid space would have to wrap within microseconds.)
    fn kill(&self) -> bool {
        if self.ended.get().is_some() {
            return false;
        }
        let _ = nix::sys::signal::kill(self.pid, nix::sys::signal::Signal::SIGKILL);
        true
    }

    /// Its output, once it ended, and when it ended.
    fn finish(self, what: &str, log: &Path) -> (Result<String, String>, Instant) {
        let out = self.waiter.join().unwrap();
        let ended = *self.ended.get().expect("set before the output is read");
        (judge(out, what, log), ended)
    }
}

/// The kills' window: the median length of the last rounds, each measured
/// to the end of its last backup that nobody killed (a process that ran
/// its course), so the window follows the machine's load.
struct RoundLength(Vec<Duration>);

impl RoundLength {
    fn current(&self) -> Duration {
        let mut recent: Vec<Duration> = self.0.iter().rev().take(5).copied().collect();
        recent.sort();
        recent[recent.len() / 2]
    }
}

/// Scratch space: a temporary directory, deleted at the end, or with
/// `CAIRN_FAULT_KEEP=DIR` a new directory inside DIR that stays, so a
/// failed long run can be examined (named on stderr; nothing already in
/// DIR is touched).
fn scratch() -> (Option<tempfile::TempDir>, PathBuf) {
    match std::env::var_os("CAIRN_FAULT_KEEP") {
        Some(keep) => {
            std::fs::create_dir_all(&keep).unwrap();
            let dir = tempfile::Builder::new()
                .prefix("kill-")
                .tempdir_in(&keep)
                .unwrap()
                .keep();
            eprintln!("scratch space kept in {}", dir.display());
            (None, dir)
        }
        None => {
            let tmp = tempfile::tempdir().unwrap();
            let dir = tmp.path().to_path_buf();
            (Some(tmp), dir)
        }
    }
}

fn rounds() -> usize {
    std::env::var("CAIRN_FAULT_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(6)
}

/// A new generation of host `h`'s tree: two files replaced, and the file
/// every host shares this round rewritten the same way in each.
fn next_generation(tree: &Path, rng: &mut Rng, shared: &[u8], round: usize) {
    let mut files: Vec<PathBuf> = std::fs::read_dir(tree)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| !p.ends_with("shared"))
        .collect();
    files.sort();
    for i in 0..2 {
        let victim = files.remove(rng.range(0, files.len() as u64) as usize);
        std::fs::remove_file(victim).unwrap();
        write_file(
            &tree.join(format!("r{round}_{i}")),
            &rng.bytes(60_000),
            0o644,
        );
    }
    write_file(&tree.join("shared"), shared, 0o644);
}

/// What a process that ended with `out` gives: its stdout if it exited 0. A killed process, or one
/// that failed with one line (a backup that a collection reaped), gives
/// why (the line, for the caller's message); a panic or a death by another
/// signal fails the test.
fn judge(out: std::process::Output, what: &str, log: &Path) -> Result<String, String> {
    let stderr = String::from_utf8_lossy(&out.stderr);
    append(
        log,
        &format!(
            "{what}: {:?}\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            stderr
        ),
    );
    assert!(!stderr.contains("panicked"), "{what} panicked: {stderr}");
    if out.status.success() {
        return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    use std::os::unix::process::ExitStatusExt;
    match out.status.signal() {
        Some(9) => Err("killed".into()),
        Some(sig) => panic!("{what} died by signal {sig}: {stderr}"),
        None => {
            assert!(
                stderr.trim_end().lines().count() == 1 && stderr.contains("error"),
                "{what} failed without one clear line: {stderr}"
            );
            Err(stderr.trim_end().to_string())
        }
    }
}

#[test]
fn sigkill_of_backups_and_collections_running_together_loses_nothing() {
    let (_tmp, dir) = scratch();
    let repo = dir.join("repo");
    kill_rounds(&Store::Local(repo.clone()), &dir, rounds(), &[]);
    no_leftovers(&repo);
}

/// The local rounds with the frugal index: half as many in CI.
#[test]
fn sigkill_of_frugal_index_backups_and_collections_loses_nothing() {
    let (_tmp, dir) = scratch();
    let dir = dir.join("frugal");
    std::fs::create_dir_all(&dir).unwrap();
    let repo = dir.join("repo");
    kill_rounds(
        &Store::Local(repo.clone()),
        &dir,
        rounds().div_ceil(2),
        &["--index", "frugal"],
    );
    no_leftovers(&repo);
    // Writers beside each other appended to logs of their own.
    let partitions = std::fs::read_dir(repo.join("frugal"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with('p')
        })
        .count();
    eprintln!("{partitions} segments in partitions other than 0");
}

/// What two collections must leave of the rounds' writers and collectors.
fn no_leftovers(repo: &Path) {
    for leftover in ["staged", "gc-pending", "gc-ids"] {
        let p = repo.join(leftover);
        let empty = !p.exists() || (p.is_dir() && std::fs::read_dir(&p).unwrap().next().is_none());
        assert!(empty, "{leftover} left behind");
    }
    // Sessions: only the tombstones of reaped writers.
    if let Ok(rd) = std::fs::read_dir(repo.join("sessions")) {
        for e in rd {
            let name = e.unwrap().file_name().into_string().unwrap();
            assert!(name.ends_with(".end"), "session {name} left behind");
        }
    }
}

#[test]
fn sigkill_of_backups_and_collections_running_together_in_s3_loses_nothing() {
    let (_tmp, dir) = scratch();
    let dir = dir.join("s3");
    std::fs::create_dir_all(&dir).unwrap();
    let server = S3TestServer::start();
    let config = server.config();
    let url = server.url(&config);
    let cache = dir.join("cache");
    let store = Store::S3 { server, url, cache };
    store
        .run(&["init", "--container-size", "128KiB", "-q"])
        .ok();
    kill_rounds(&store, &dir, rounds().div_ceil(3), &[]);
}

/// Appends `line` to the run's log (what each process printed and how it
/// ended, for a failure's post-mortem).
fn append(log: &Path, line: &str) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .unwrap();
    writeln!(f, "{line}").unwrap();
}

/// The rounds of the module doc against `store`, with scratch space `dir`;
/// a local repository is created with `init_args` added.
fn kill_rounds(store: &Store, dir: &Path, rounds: usize, init_args: &[&str]) {
    let seed = std::env::var("CAIRN_FAULT_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2033);
    let mut rng = Rng::new(seed);
    let log = dir.join("rounds.log");
    let trees: Vec<PathBuf> = (0..HOSTS).map(|h| dir.join(format!("host{h}"))).collect();
    for t in &trees {
        build_random_files(t, &mut rng, 6, 60_000);
    }
    if let Store::Local(repo) = store {
        let mut args = vec!["init", "--container-size", "128KiB", "-q"];
        args.extend_from_slice(init_args);
        cairn(repo, &args).ok();
    }
    // The first backup runs alone (it writes the index file).
    store
        .run(&["backup", s(&trees[0]), "--host", "host0", "-q"])
        .ok();
    let mut committed: Vec<(String, Manifest)> = Vec::new();
    let mut lengths = RoundLength(Vec::new());
    let (mut kills, mut landed, mut not_committed) = (0, 0, 0);
    for round in 0..rounds {
        let shared = rng.bytes(80_000);
        let mut manifests = Vec::new();
        for t in &trees {
            next_generation(t, &mut rng, &shared, round);
            manifests.push(Manifest::capture(t));
        }
        let started = Instant::now();
        let backups: Vec<Running> = trees
            .iter()
            .enumerate()
            .map(|(h, t)| {
                let host = format!("host{h}");
                // S3: --wait, as a fleet's backups would. A writer killed
                // while it held the lock alone (a compaction, a
                // collection's index change) leaves its lease until it
                // expires, 10 s here; a backup without it gives up after
                // 5 s with "repository is locked". A local lock dies with
                // its holder: every other round runs without --wait, so a
                // backup that gives up needlessly fails the test.
                let mut args = vec!["--json", "backup", s(t), "--host", &host];
                if matches!(store, Store::S3 { .. }) || round % 2 == 1 {
                    args.push("--wait");
                }
                store.start(&args)
            })
            .collect();
        let collector = ["lgc", "pgc", "pgc+"][round % 3];
        let gc = store.start(&["gc", "--wait", "-q", "--collector", collector]);
        // Round 0 is timed unharmed: later kills spread over the recent
        // rounds' length.
        // Which processes were sent SIGKILL: every other one must succeed
        // (a running writer's lock is held, so no collection reaps it).
        let mut killed = [false; HOSTS + 1];
        if round > 0 {
            let window = lengths.current();
            for (i, process) in backups.iter().chain(std::iter::once(&gc)).enumerate() {
                if rng.range(0, 2) == 0 {
                    std::thread::sleep(Duration::from_micros(
                        rng.range(0, window.as_micros() as u64 / 2 + 1),
                    ));
                    kills += 1;
                    landed += usize::from(process.kill());
                    killed[i] = true;
                }
            }
        }
        let mut last_unharmed_end = None;
        for (h, process) in backups.into_iter().enumerate() {
            let what = format!("round {round} backup of host{h}");
            let (result, ended) = process.finish(&what, &log);
            match result {
                Ok(out) => {
                    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
                    let id = json["id"].as_str().unwrap().to_string();
                    committed.push((id, manifests[h].clone()));
                }
                Err(why) => {
                    assert!(killed[h], "{what} failed though nobody killed it: {why}");
                    not_committed += 1;
                }
            }
            if !killed[h] {
                last_unharmed_end = last_unharmed_end.max(Some(ended));
            }
        }
        let what = format!("round {round} gc");
        append(&log, &format!("round {round} killed {killed:?}"));
        if let (Err(why), _) = gc.finish(&what, &log) {
            assert!(
                killed[HOSTS],
                "{what} failed though nobody killed it: {why}"
            );
        }
        if let Some(end) = last_unharmed_end {
            lengths.0.push(end - started);
        }
        store
            .run(&["forget", "--keep-last", "2", "--wait", "-q"])
            .ok();
        let present = store.run(&["snapshots", "--json"]).snapshot_ids();
        committed.retain(|(id, _)| present.contains(id));
        let check = store.run(&["check"]);
        assert_eq!(check.code, Some(0), "round {round}: {}", check.describe());
    }
    eprintln!(
        "{kills} kills, {landed} while the process ran; {not_committed} killed backups did not commit; \
         a round takes {:?}",
        lengths.current()
    );
    // Too few kills to judge (the short S3 run) prove little either way.
    assert!(
        kills < 6 || landed * 3 >= kills,
        "only {landed} of {kills} kills landed"
    );
    // Two collections: the first may judge again what a killed one left.
    store.run(&["gc", "--wait", "-q"]).ok();
    store.run(&["gc", "--wait", "-q"]).ok();
    let check = store.run(&["check", "--read-data"]).ok();
    let report = String::from_utf8_lossy(&check.stdout);
    assert!(
        !report.contains("reclaimable"),
        "garbage that no collection reclaims: {report}"
    );
    for (i, (id, expected)) in committed.iter().enumerate() {
        let target = dir.join(format!("out{i}"));
        store
            .run(&["restore", id, "--target", s(&target), "-q"])
            .ok();
        let top = std::fs::read_dir(&target)
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        assert_tree_matches(expected, &top);
        std::fs::remove_dir_all(&target).unwrap();
    }
}
