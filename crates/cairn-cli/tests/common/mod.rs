//! Shared helpers of the end-to-end tests: run the real `cairn` binary,
//! build file trees from a seeded RNG, record a tree's state (content, mode,
//! mtime, symlink targets, structure) and compare a restored tree against it,
//! damage repository files, and skip or run unprivileged where the machine
//! requires (`environment`).
#![allow(dead_code)]

pub mod damage;
mod environment;
pub mod fuse;
pub mod volume;

// Not every test file skips or needs root.
#[allow(unused_imports)]
pub use environment::*;

use std::collections::BTreeMap;
use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_cairn");

// ---------------------------------------------------------------------------
// Running the binary
// ---------------------------------------------------------------------------

/// The outcome of one `cairn` invocation.
pub struct Run {
    pub args: Vec<String>,
    /// `None` if the process was killed by a signal.
    pub code: Option<i32>,
    pub stdout: Vec<u8>,
    pub stderr: String,
}

impl Run {
    pub fn from_output(args: Vec<String>, out: std::process::Output) -> Run {
        let run = Run {
            args,
            code: out.status.code(),
            stdout: out.stdout,
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        };
        // Whatever happens, the binary must never panic.
        assert!(
            !run.stderr.contains("panicked"),
            "cairn {:?} panicked:\n{}",
            run.args,
            run.stderr
        );
        run
    }

    pub fn stdout_str(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    pub fn describe(&self) -> String {
        format!(
            "cairn {:?} exited with {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.args,
            self.code,
            String::from_utf8_lossy(&self.stdout[..self.stdout.len().min(4000)]),
            self.stderr
        )
    }

    /// Asserts exit code 0.
    #[track_caller]
    pub fn ok(self) -> Run {
        assert_eq!(self.code, Some(0), "{}", self.describe());
        self
    }

    /// Asserts the given exit code.
    #[track_caller]
    pub fn code(self, code: i32) -> Run {
        assert_eq!(self.code, Some(code), "{}", self.describe());
        self
    }

    /// The ids a successful `snapshots --json` listed, oldest first.
    #[track_caller]
    pub fn snapshot_ids(self) -> Vec<String> {
        self.ok()
            .json()
            .as_array()
            .expect("snapshots --json is an array")
            .iter()
            .map(|s| s["id"].as_str().expect("id is a string").to_string())
            .collect()
    }

    /// Parses standard output as JSON.
    #[track_caller]
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.stdout).unwrap_or_else(|e| {
            panic!("stdout is not JSON ({e}):\n{}", self.describe());
        })
    }

    /// The `path` of every row of `ls --json` output, in order.
    #[track_caller]
    pub fn json_paths(&self) -> Vec<String> {
        self.json()
            .as_array()
            .expect("a JSON array")
            .iter()
            .map(|r| r["path"].as_str().expect("a path").to_string())
            .collect()
    }

    /// Asserts a failure reported the way every cairn error must be: a
    /// non-zero exit (not a signal), and exactly one stderr line starting with
    /// `cairn: error:` besides optional `cairn: warning:`/`cairn: note:` lines.
    /// Returns the error line.
    #[track_caller]
    pub fn one_line_error(&self) -> String {
        assert!(
            matches!(self.code, Some(c) if c != 0),
            "expected a failure: {}",
            self.describe()
        );
        let lines: Vec<&str> = self
            .stderr
            .lines()
            .filter(|l| !l.starts_with("cairn: warning:") && !l.starts_with("cairn: note:"))
            .collect();
        assert_eq!(
            lines.len(),
            1,
            "expected exactly one error line: {}",
            self.describe()
        );
        assert!(
            lines[0].starts_with("cairn: error: "),
            "error line must start with `cairn: error: `: {}",
            self.describe()
        );
        lines[0].to_string()
    }

    /// Standard output and standard error together (for "is it mentioned" checks).
    pub fn all_output(&self) -> String {
        format!("{}\n{}", self.stdout_str(), self.stderr)
    }
}

/// The password of the repositories the tests create (all encrypted, as
/// every new repository is unless `--encryption none`).
pub const TEST_PASSWORD: &str = "cairn-test-password";

/// Test files whose repositories are clear (`CAIRN_ENCRYPTION=none`): they
/// read, damage or compare the repository's files byte by byte (offsets of
/// index pages and container sections, identical bytes from identical
/// input, the same chunks in two repositories, non-BLAKE3 fingerprints),
/// which sealed blocks, random nonces and per-repository chunking would
/// hide or refuse. Every other test file
/// runs on encrypted repositories, the default; `tests/encryption.rs` and
/// the engine's `tests/encrypted.rs` cover tampering with sealed ones.
const CLEAR_REPOSITORY_TESTS: &[&str] = &[
    "configs",
    "corruption",
    "determinism",
    // Clear by default; their tests also run on encrypted repositories
    // (`set_encryption`), with block-granular damage expectations there.
    // `corruption_encrypted` is the encrypted twin of `corruption`.
    "hostile",
    "lost_data",
    // The simulator models clear repositories (fixed chunker, plain
    // fingerprints): its runs are compared with real ones.
    "sim",
];

/// The name of the running test file (`corruption` for `tests/corruption.rs`).
fn test_file() -> String {
    let exe = std::env::current_exe().unwrap_or_default();
    let stem = exe.file_stem().unwrap_or_default().to_string_lossy();
    stem.rsplit_once('-')
        .map_or(stem.to_string(), |(name, _)| name.to_string())
}

/// A `cairn` binary with the test environment: no inherited `CAIRN_*`
/// variables, the test password, and tiny Argon2id parameters for new key
/// files (never for real keys: they only keep the suite fast).
pub fn base_command() -> Command {
    let mut c = Command::new(BIN);
    test_env(&mut c);
    c
}

/// The test environment of [`base_command`], for a command that runs
/// `cairn` through another program (`script`, a shell).
pub fn test_env(c: &mut Command) {
    for var in [
        "CAIRN_REPO",
        "CAIRN_ENCRYPTION",
        "CAIRN_PASSWORD_FILE",
        "CAIRN_PASSWORD_COMMAND",
        "CAIRN_TO_PASSWORD",
        "CAIRN_TO_PASSWORD_FILE",
        "CAIRN_TO_PASSWORD_COMMAND",
        "CAIRN_FROM_PASSWORD",
        "CAIRN_FROM_PASSWORD_FILE",
        "CAIRN_FROM_PASSWORD_COMMAND",
    ] {
        c.env_remove(var);
    }
    c.env("CAIRN_PASSWORD", TEST_PASSWORD)
        .env("CAIRN_KDF_MEMORY_KIB", "8")
        .env("CAIRN_KDF_PASSES", "1");
    // Keys a test unlocks stay in a scope of its process, never the user's.
    c.env_remove("CAIRN_KEY_CACHE")
        .env_remove("CAIRN_KEY_CACHE_DIR")
        .env(
            "CAIRN_KEY_CACHE_SCOPE",
            format!("test-{}", std::process::id()),
        );
    if let Some(algorithm) = encryption_override() {
        c.env("CAIRN_ENCRYPTION", algorithm);
    }
}

/// The `CAIRN_ENCRYPTION` this test thread's commands get: what
/// [`set_encryption`] chose, else `none` in a file of
/// [`CLEAR_REPOSITORY_TESTS`], else nothing (the default, encrypted).
fn encryption_override() -> Option<String> {
    ENCRYPTION.with(|e| e.borrow().clone()).or_else(|| {
        CLEAR_REPOSITORY_TESTS
            .contains(&test_file().as_str())
            .then(|| "none".to_string())
    })
}

thread_local! {
    static ENCRYPTION: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// Makes the commands this test thread runs from now on create repositories
/// with `algorithm` (`none`: clear), whatever the test file's default: a
/// file of [`CLEAR_REPOSITORY_TESTS`] can run some tests encrypted too.
pub fn set_encryption(algorithm: &str) {
    ENCRYPTION.with(|e| *e.borrow_mut() = Some(algorithm.to_string()));
}

/// Whether new repositories of this test thread are encrypted.
pub fn encrypting() -> bool {
    encryption_override().is_none_or(|algorithm| algorithm != "none")
}

/// The commands that open no repository, and refuse `--repo`.
const NO_REPOSITORY: [&str; 7] = [
    "volume",
    "trace",
    "sim",
    "analyze",
    "experiment",
    "completions",
    "man",
];

/// A `cairn` command with `--repo repo` in the test environment; a first
/// `backup` gets `--init` ([`init_if_missing`]). A command that opens no
/// repository (`sim`, `trace`, ...) gets no `--repo`: it refuses one.
pub fn command(repo: &Path, args: &[&str]) -> Command {
    let mut c = base_command();
    let name = args.iter().find(|a| !a.starts_with('-'));
    if name.is_some_and(|a| NO_REPOSITORY.contains(a)) {
        c.args(args);
    } else {
        c.arg("--repo").arg(repo).args(init_if_missing(repo, args));
    }
    c
}

/// Runs `cairn --repo repo args...` exactly as typed (no `--init` added,
/// unlike the shorthand helpers), with an empty standard input and `env`
/// set: for tests of what a person's command line does to a location that
/// holds no repository.
pub fn cairn_as_typed(repo: &Path, args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut c = base_command();
    c.arg("--repo").arg(repo).args(args).stdin(Stdio::null());
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().expect("running cairn");
    Run::from_output(arg_list(Some(repo), args), out)
}

/// `args`, with `--init` right after a leading `backup` when the local
/// `repo` holds no repository yet: the shorthand helpers ([`command`],
/// [`cairn`], [`cairn_stdin`], [`cairn_env`] with `CAIRN_REPO`) make a
/// test's first backup create the repository, as `backup` did before it
/// needed `--init`. Tests of the refusal run `base_command` themselves.
pub fn init_if_missing<'a>(repo: &Path, args: &[&'a str]) -> Vec<&'a str> {
    // The command name comes after any global flags (`--json backup`).
    let at = args.iter().position(|a| !a.starts_with('-'));
    match at {
        Some(at)
            if args[at] == "backup"
                && !args.contains(&"--init")
                && !repo.join("config").exists()
                && !repo.to_string_lossy().starts_with("s3:") =>
        {
            let mut v = args[..=at].to_vec();
            v.push("--init");
            v.extend_from_slice(&args[at + 1..]);
            v
        }
        _ => args.to_vec(),
    }
}

fn arg_list(repo: Option<&Path>, args: &[&str]) -> Vec<String> {
    let mut v = Vec::new();
    if let Some(r) = repo {
        v.push("--repo".to_string());
        v.push(r.display().to_string());
    }
    v.extend(args.iter().map(|s| s.to_string()));
    v
}

/// Runs `cairn --repo repo args...` with an empty standard input.
pub fn cairn(repo: &Path, args: &[&str]) -> Run {
    let out = command(repo, args)
        .stdin(Stdio::null())
        .output()
        .expect("running cairn");
    Run::from_output(arg_list(Some(repo), args), out)
}

/// Runs `cairn --repo repo args...` feeding `input` on standard input.
pub fn cairn_stdin(repo: &Path, args: &[&str], input: &[u8]) -> Run {
    let mut child = command(repo, args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawning cairn");
    let mut stdin = child.stdin.take().unwrap();
    let data = input.to_vec();
    let feeder = std::thread::spawn(move || {
        let _ = stdin.write_all(&data);
    });
    let out = child.wait_with_output().expect("waiting for cairn");
    feeder.join().unwrap();
    Run::from_output(arg_list(Some(repo), args), out)
}

/// Runs `cairn args...` without `--repo`, with extra environment variables.
pub fn cairn_env(args: &[&str], env: &[(&str, &Path)]) -> Run {
    let mut c = base_command();
    match env.iter().find(|(k, _)| *k == "CAIRN_REPO") {
        Some((_, repo)) => c.args(init_if_missing(repo, args)),
        None => c.args(args),
    };
    c.stdin(Stdio::null());
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().expect("running cairn");
    Run::from_output(arg_list(None, args), out)
}

/// Collects a spawned child's output (after it exited or was killed).
pub fn finish(child: Child, args: &[&str]) -> Run {
    let out = child.wait_with_output().expect("waiting for cairn");
    Run::from_output(arg_list(None, args), out)
}

/// A spawned `cairn` whose stderr is read line by line as it comes, so that
/// a test can wait for what the command reports (`cairn: waiting for ...`)
/// instead of sleeping and guessing from elapsed time. Killed if dropped
/// while it runs (a test failed).
pub struct Watched {
    /// `None` once finished.
    child: Option<Child>,
    args: Vec<String>,
    lines: std::sync::mpsc::Receiver<String>,
    /// Every stderr line received so far.
    seen: Vec<String>,
    /// The thread reading stderr; `None` once joined.
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Watched {
    /// Spawns `cmd` (its stderr is piped here; stdout too, for `finish`).
    pub fn spawn(cmd: &mut Command, args: &[&str]) -> Watched {
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawning cairn");
        let stderr = child.stderr.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Watched {
            child: Some(child),
            args: arg_list(None, args),
            lines,
            seen: Vec::new(),
            reader: Some(reader),
        }
    }

    /// Waits until a stderr line contains `needle`; false if the command
    /// closed its stderr (exited) first or `hang` passed (a guard against a
    /// hang, not a measurement).
    pub fn wait_for_stderr(&mut self, needle: &str, hang: std::time::Duration) -> bool {
        if self.seen.iter().any(|l| l.contains(needle)) {
            return true;
        }
        let deadline = std::time::Instant::now() + hang;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let found = line.contains(needle);
                    self.seen.push(line);
                    if found {
                        return true;
                    }
                }
                Err(_) => return false,
            }
        }
    }

    /// The command's process id (to send it a signal).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// Whether the command has not exited yet.
    pub fn still_running(&mut self) -> bool {
        let child = self.child.as_mut().expect("running");
        child.try_wait().expect("polling cairn").is_none()
    }

    /// The stderr lines received so far.
    pub fn stderr_so_far(&self) -> String {
        self.seen.join("\n")
    }

    /// Waits for the command to exit (failing after `hang`, a guard against
    /// hangs; the drop then kills it) and collects its output. Stdout is
    /// read after the exit: for commands that print less than a pipe holds.
    pub fn finish(mut self, hang: std::time::Duration) -> Run {
        let deadline = std::time::Instant::now() + hang;
        while self.still_running() {
            assert!(
                std::time::Instant::now() < deadline,
                "cairn {:?} did not exit within {hang:?}",
                self.args
            );
            // Keep the pipe drained while polling.
            self.seen.extend(self.lines.try_iter());
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let child = self.child.take().expect("running");
        let out = child.wait_with_output().expect("waiting for cairn");
        if let Some(reader) = self.reader.take() {
            reader.join().expect("the stderr reader");
        }
        self.seen.extend(self.lines.try_iter());
        let mut stderr = self.seen.join("\n");
        if !stderr.is_empty() {
            stderr.push('\n');
        }
        let out = std::process::Output {
            stderr: stderr.into_bytes(),
            ..out
        };
        Run::from_output(std::mem::take(&mut self.args), out)
    }
}

/// Waits until the kernel lists a waiter blocked on a flock of `lock_file`
/// (a `->` line of `/proc/locks` naming its inode), in this process or
/// another: the proof that a command that reported waiting for a lock is
/// inside its wait, not about to start it. `hang` guards against a waiter
/// that never blocks.
pub fn wait_until_flock_blocked(lock_file: &Path, hang: std::time::Duration) {
    let inode = format!(":{} ", fs::metadata(lock_file).unwrap().ino());
    let deadline = std::time::Instant::now() + hang;
    loop {
        let locks = fs::read_to_string("/proc/locks").unwrap();
        if locks
            .lines()
            .any(|l| l.contains("->") && l.contains(&inode))
        {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "nothing blocked on {}",
            lock_file.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A path as `&str` (test paths are UTF-8).
pub fn s(p: &Path) -> &str {
    p.to_str().expect("UTF-8 test path")
}

/// `snapshots --json`, asserted successful.
pub fn snapshots(repo: &Path) -> Vec<serde_json::Value> {
    cairn(repo, &["snapshots", "--json"])
        .ok()
        .json()
        .as_array()
        .expect("snapshots --json is an array")
        .clone()
}

/// Ids of all snapshots, oldest first.
pub fn snapshot_ids(repo: &Path) -> Vec<String> {
    cairn(repo, &["snapshots", "--json"]).snapshot_ids()
}

// ---------------------------------------------------------------------------
// Deterministic data
// ---------------------------------------------------------------------------

/// SplitMix64: tiny, seeded, and fast even in a debug build.
pub struct Rng(u64);

const WORDS: &[&str] = &[
    "cairn",
    "backup",
    "chunk",
    "container",
    "index",
    "bloom",
    "summary",
    "vector",
    "locality",
    "segment",
    "fingerprint",
    "restore",
    "snapshot",
    "merkle",
    "tree",
    "listing",
    "stream",
    "dedup",
    "compress",
    "the",
    "a",
    "of",
    "and",
    "to",
    "in",
    "is",
    "that",
    "for",
    "on",
    "with",
];

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x5eed_cafe_f00d_d00d)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        assert!(lo < hi);
        lo + self.next_u64() % (hi - lo)
    }

    /// Uniform in `[0, 1)`.
    pub fn f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Incompressible bytes.
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut v = vec![0u8; n];
        let mut chunks = v.chunks_exact_mut(8);
        for c in &mut chunks {
            c.copy_from_slice(&self.next_u64().to_le_bytes());
        }
        let rest = chunks.into_remainder();
        let last = self.next_u64().to_le_bytes();
        let k = rest.len();
        rest.copy_from_slice(&last[..k]);
        v
    }

    /// Compressible text of exactly `n` bytes.
    pub fn text(&mut self, n: usize) -> Vec<u8> {
        let mut v = Vec::with_capacity(n + 16);
        let mut line = 0;
        while v.len() < n {
            let w = WORDS[(self.next_u64() % WORDS.len() as u64) as usize];
            v.extend_from_slice(w.as_bytes());
            line += w.len() + 1;
            if line > 60 {
                v.push(b'\n');
                line = 0;
            } else {
                v.push(b' ');
            }
        }
        v.truncate(n);
        v
    }

    /// A plausible mtime: seconds in 2001..2020 and a random nanosecond part.
    pub fn mtime(&mut self) -> (i64, u32) {
        (
            self.range(1_000_000_000, 1_600_000_000) as i64,
            self.range(0, 1_000_000_000) as u32,
        )
    }
}

// ---------------------------------------------------------------------------
// Building trees
// ---------------------------------------------------------------------------

/// Writes `data` to `path` (creating parents) and sets its permission bits.
pub fn write_file(path: &Path, data: &[u8], mode: u32) {
    if let Some(p) = path.parent() {
        fs::create_dir_all(p).unwrap();
    }
    fs::write(path, data).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

/// Creates (or replaces) a symlink.
pub fn symlink(target: &str, link: &Path) {
    if fs::symlink_metadata(link).is_ok() {
        fs::remove_file(link).unwrap();
    }
    if let Some(p) = link.parent() {
        fs::create_dir_all(p).unwrap();
    }
    std::os::unix::fs::symlink(target, link).unwrap();
}

/// Makes `src` holding a FIFO `fifo` (mode 0640), a socket `sock` (kept
/// while the returned listener lives) and, where `mknod` is permitted, the
/// character device `null` (1, 3); returns the listener and whether the
/// device was made (if not, [`skip_or_fail`] with `device_part`).
pub fn special_files(src: &Path, device_part: &str) -> (std::os::unix::net::UnixListener, bool) {
    fs::create_dir(src).unwrap();
    assert!(Command::new("mkfifo")
        .args(["-m", "0640", s(&src.join("fifo"))])
        .status()
        .unwrap()
        .success());
    let sock = std::os::unix::net::UnixListener::bind(src.join("sock")).unwrap();
    let dev = Command::new("mknod")
        .args([s(&src.join("null")), "c", "1", "3"])
        .status()
        .is_ok_and(|st| st.success());
    if !dev {
        skip_or_fail(&format!(
            "mknod not permitted here (not root): {device_part}"
        ));
    }
    (sock, dev)
}

/// Sets the mtime (and atime) of any entry without following symlinks.
pub fn set_mtime(path: &Path, (secs, nanos): (i64, u32)) {
    let t = filetime::FileTime::from_unix_time(secs, nanos);
    filetime::set_symlink_file_times(path, t, t)
        .unwrap_or_else(|e| panic!("setting times of {}: {e}", path.display()));
}

/// The bytes of every container file of repository `repo`.
pub fn container_bytes(repo: &Path) -> u64 {
    walk(&repo.join("containers"))
        .iter()
        .filter(|p| p.is_file())
        .map(|p| p.metadata().unwrap().len())
        .sum()
}

/// Every path under `root` (including `root`), parents before children.
pub fn walk(root: &Path) -> Vec<PathBuf> {
    let mut out = vec![root.to_path_buf()];
    let mut i = 0;
    while i < out.len() {
        let p = out[i].clone();
        if fs::symlink_metadata(&p).unwrap().is_dir() {
            let mut children: Vec<PathBuf> = fs::read_dir(&p)
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            children.sort();
            out.extend(children);
        }
        i += 1;
    }
    out
}

/// Gives every entry under `root` (and `root`) a random custom mtime;
/// children first, so directory mtimes stick.
pub fn randomize_mtimes(root: &Path, rng: &mut Rng) {
    let mut all = walk(root);
    all.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    for p in all {
        set_mtime(&p, rng.mtime());
    }
}

/// Files in the sample tree that `build_sample_tree` creates (for tests
/// that want to address them).
pub const BIG1: &str = "data/big1.bin";
pub const BIG2: &str = "data/big2.bin";
pub const LOG: &str = "data/log.txt";
pub const TOOL: &str = "bin/tool.sh";
pub const KEY: &str = "secret/key.pem";
pub const LINK: &str = "link";

/// The sample tree: nested directories, ~29 files from 0 bytes to 2 MiB
/// (compressible text and random data), a relative and a dangling absolute
/// symlink, an empty directory, a 0755 executable, a 0600 file in a 0700
/// directory, and random mtimes with nanoseconds everywhere. About 8 MiB.
pub fn build_sample_tree(root: &Path, rng: &mut Rng) {
    fs::create_dir_all(root).unwrap();
    write_file(&root.join("docs/readme.txt"), &rng.text(40_000), 0o644);
    write_file(&root.join("docs/manual.txt"), &rng.text(300_000), 0o644);
    for i in 0..5 {
        let n = rng.range(1_000, 20_000) as usize;
        write_file(
            &root.join(format!("docs/notes/n{i}.txt")),
            &rng.text(n),
            0o644,
        );
    }
    write_file(&root.join("data/empty.bin"), b"", 0o644);
    write_file(&root.join("data/one.bin"), b"x", 0o644);
    const SIZES: [usize; 10] = [
        100, 4_096, 10_000, 65_536, 100_000, 200_000, 333_333, 700_000, 1_000_000, 1_500_000,
    ];
    for (i, size) in SIZES.iter().enumerate() {
        // Sizes jitter a little per seed.
        let n = size + rng.range(0, 1_000) as usize;
        write_file(&root.join(format!("data/r{i}.bin")), &rng.bytes(n), 0o644);
    }
    write_file(&root.join(BIG1), &rng.bytes(2 << 20), 0o644);
    write_file(&root.join(BIG2), &rng.bytes(1_500_000), 0o644);
    write_file(&root.join(LOG), &rng.text(500_000), 0o644);
    write_file(
        &root.join(TOOL),
        b"#!/bin/sh\necho hello from cairn\n",
        0o755,
    );
    write_file(&root.join(KEY), &rng.bytes(3_000), 0o600);
    fs::set_permissions(root.join("secret"), fs::Permissions::from_mode(0o700)).unwrap();
    for i in 0..3 {
        write_file(
            &root.join(format!("sub/dir/leaf{i}.txt")),
            &rng.text(2_000 + i * 1_000),
            0o644,
        );
    }
    write_file(&root.join("sub/other.txt"), &rng.text(5_000), 0o644);
    write_file(&root.join("deep/a/b/c/d/e.txt"), &rng.text(1_234), 0o644);
    fs::create_dir_all(root.join("empty")).unwrap();
    symlink(BIG1, &root.join(LINK));
    symlink("/nonexistent/cairn/target", &root.join("dangling"));
    randomize_mtimes(root, rng);
}

/// A tree of `files` random files of `size` bytes each under `root`.
pub fn build_random_files(root: &Path, rng: &mut Rng, files: usize, size: usize) {
    for i in 0..files {
        write_file(&root.join(format!("f{i:02}.bin")), &rng.bytes(size), 0o644);
    }
    randomize_mtimes(root, rng);
}

// ---------------------------------------------------------------------------
// Recording and comparing trees
// ---------------------------------------------------------------------------

#[derive(Clone, PartialEq, Eq)]
pub enum Kind {
    File(Vec<u8>),
    Dir,
    Symlink(PathBuf),
}

/// One entry's recorded state, as `lstat` sees it.
#[derive(Clone, PartialEq, Eq)]
pub struct Entry {
    pub kind: Kind,
    /// Permission bits (`st_mode & 0o7777`).
    pub mode: u32,
    /// `(st_mtime, st_mtime_nsec)`.
    pub mtime: (i64, i64),
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match &self.kind {
            Kind::File(d) => format!("file ({} bytes)", d.len()),
            Kind::Dir => "dir".into(),
            Kind::Symlink(t) => format!("symlink -> {}", t.display()),
        };
        write!(
            f,
            "{kind}, mode {:o}, mtime {}.{:09}",
            self.mode, self.mtime.0, self.mtime.1
        )
    }
}

/// A tree's state: relative path (`""` is the root itself) -> entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Manifest(pub BTreeMap<String, Entry>);

impl Manifest {
    /// Records the tree at `root` (content, mode, mtime, symlink targets).
    pub fn capture(root: &Path) -> Manifest {
        let mut map = BTreeMap::new();
        for p in walk(root) {
            let m = fs::symlink_metadata(&p).unwrap();
            let kind = if m.is_dir() {
                Kind::Dir
            } else if m.file_type().is_symlink() {
                Kind::Symlink(fs::read_link(&p).unwrap())
            } else {
                let mut data = Vec::new();
                fs::File::open(&p)
                    .unwrap_or_else(|e| panic!("reading {}: {e}", p.display()))
                    .read_to_end(&mut data)
                    .unwrap();
                Kind::File(data)
            };
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            map.insert(
                rel,
                Entry {
                    kind,
                    mode: m.mode() & 0o7777,
                    mtime: (m.mtime(), m.mtime_nsec()),
                },
            );
        }
        Manifest(map)
    }

    /// The entries under `sub` (relative), re-rooted at `sub`.
    pub fn subtree(&self, sub: &str) -> Manifest {
        let mut map = BTreeMap::new();
        for (k, v) in &self.0 {
            if k == sub {
                map.insert(String::new(), v.clone());
            } else if let Some(rest) = k.strip_prefix(&format!("{sub}/")) {
                map.insert(rest.to_string(), v.clone());
            }
        }
        Manifest(map)
    }

    pub fn file(&self, rel: &str) -> &[u8] {
        match &self.0[rel].kind {
            Kind::File(d) => d,
            _ => panic!("{rel} is not a file"),
        }
    }

    pub fn total_file_bytes(&self) -> u64 {
        self.0
            .values()
            .map(|e| match &e.kind {
                Kind::File(d) => d.len() as u64,
                _ => 0,
            })
            .sum()
    }
}

/// Asserts that the tree at `actual_root` is identical to `expected`:
/// same entries, kinds, bytes, permission bits, mtimes (seconds and
/// nanoseconds) and symlink targets.
#[track_caller]
pub fn assert_tree_matches(expected: &Manifest, actual_root: &Path) {
    let actual = Manifest::capture(actual_root);
    let mut problems = Vec::new();
    for k in expected.0.keys() {
        if !actual.0.contains_key(k) {
            problems.push(format!("missing: {k:?}"));
        }
    }
    for k in actual.0.keys() {
        if !expected.0.contains_key(k) {
            problems.push(format!("unexpected: {k:?}"));
        }
    }
    for (k, want) in &expected.0 {
        let Some(got) = actual.0.get(k) else { continue };
        if want == got {
            continue;
        }
        let content = match (&want.kind, &got.kind) {
            (Kind::File(a), Kind::File(b)) if a != b => {
                let first = a.iter().zip(b.iter()).position(|(x, y)| x != y);
                format!(
                    "; content differs ({} vs {} bytes, first difference at {:?})",
                    a.len(),
                    b.len(),
                    first.unwrap_or(a.len().min(b.len()))
                )
            }
            _ => String::new(),
        };
        problems.push(format!(
            "{k:?}: expected {want:?}, restored {got:?}{content}"
        ));
    }
    assert!(
        problems.is_empty(),
        "restored tree {} differs:\n  {}",
        actual_root.display(),
        problems.join("\n  ")
    );
}

// ---------------------------------------------------------------------------
// Repository files
// ---------------------------------------------------------------------------

/// Copies a directory tree (regular files and directories only).
pub fn copy_dir(src: &Path, dst: &Path) {
    fs::create_dir_all(dst).unwrap();
    for e in fs::read_dir(src).unwrap() {
        let e = e.unwrap();
        let to = dst.join(e.file_name());
        let ft = e.file_type().unwrap();
        if ft.is_dir() {
            copy_dir(&e.path(), &to);
        } else if ft.is_file() {
            fs::copy(e.path(), &to).unwrap();
        }
    }
}

/// Regular files under `dir`, sorted (empty if `dir` does not exist).
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    if !dir.exists() {
        return Vec::new();
    }
    let mut v: Vec<PathBuf> = walk(dir)
        .into_iter()
        .filter(|p| fs::symlink_metadata(p).unwrap().is_file())
        .collect();
    v.sort();
    v
}

/// XORs one byte of a file (negative offsets count from the end).
pub fn flip_byte(path: &Path, offset: i64) {
    let mut data = fs::read(path).unwrap();
    let i = if offset < 0 {
        data.len() as i64 + offset
    } else {
        offset
    } as usize;
    data[i] ^= 0x5a;
    fs::write(path, data).unwrap();
}

/// Truncates a file to `len` bytes.
pub fn truncate(path: &Path, len: u64) {
    fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(len)
        .unwrap();
}

// ---------------------------------------------------------------------------
// Encrypted repositories
// ---------------------------------------------------------------------------

/// The variables a repository password can come from.
pub const PASSWORD_VARS: [&str; 3] = [
    "CAIRN_PASSWORD",
    "CAIRN_PASSWORD_FILE",
    "CAIRN_PASSWORD_COMMAND",
];

/// Argon2id parameters small enough for tests (never for real keys).
pub const TINY_KDF: [&str; 4] = ["--kdf-memory-kib", "8", "--kdf-passes", "1"];

/// Runs `cairn --repo repo args...` with an empty standard input, none of
/// the caller's password variables, and `env` set.
pub fn cairn_with_env(repo: &Path, args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut c = command(repo, args);
    c.stdin(Stdio::null());
    for var in PASSWORD_VARS {
        c.env_remove(var);
    }
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().expect("running cairn");
    Run::from_output(arg_list(Some(repo), args), out)
}

/// Runs `cairn --repo repo args...` with `CAIRN_PASSWORD=password` only.
pub fn cairn_pw(repo: &Path, password: &str, args: &[&str]) -> Run {
    cairn_with_env(repo, args, &[("CAIRN_PASSWORD", password)])
}

/// Creates a repository encrypted with `algorithm` under `password`, with
/// tiny key derivation parameters.
pub fn init_encrypted(repo: &Path, algorithm: &str, password: &str) -> Run {
    let mut args = vec!["init", "--encryption", algorithm];
    args.extend(TINY_KDF);
    cairn_pw(repo, password, &args)
}
