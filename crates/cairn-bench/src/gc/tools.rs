//! The two tools of `cairn-bench gc` as child processes: cairn's CLI
//! (`backup`, `forget` + `gc` with the collectors of paper
//! `003_ea5fccc485a97c5d.txt`, `check`, `restore`) and restic's (`init`,
//! `backup`, `forget --prune`, `check`, `restore`), each measured with
//! `memory`'s [`run_child`] (the child's own CPU time and peak RSS from
//! `wait4`); locating or installing restic; repository sizes; and the
//! restore check that both tools' collections must pass.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{ensure, Context, Result};
use serde_json::{json, Value};

use crate::common::{remove, tree_bytes, WorkDir};
use crate::dataset::Evolving;
use crate::memory::{run_child, ChildRun};
use crate::restore::verify;

/// restic needs a password; the benchmark's repositories are throwaway.
const RESTIC_PASSWORD: &str = "cairn-bench";
const HOST: &str = "cairn-bench";

/// What one measured step cost: one child, or several run one after the
/// other (times and foreign CPU add up, the peak is the largest).
#[derive(Clone, Copy, Debug, Default)]
pub struct Cost {
    pub wall: Duration,
    pub cpu: Duration,
    pub peak: u64,
    pub others: Duration,
}

impl Cost {
    pub fn of(r: &ChildRun) -> Cost {
        Cost {
            wall: r.wall,
            cpu: r.reaped.cpu,
            peak: r.reaped.max_rss_bytes,
            others: r.others,
        }
    }

    pub fn then(self, o: Cost) -> Cost {
        Cost {
            wall: self.wall + o.wall,
            cpu: self.cpu + o.cpu,
            peak: self.peak.max(o.peak),
            others: self.others + o.others,
        }
    }

    pub fn json(&self) -> Value {
        json!({
            "seconds": self.wall.as_secs_f64(),
            "cpu_seconds": self.cpu.as_secs_f64(),
            "peak_rss_bytes": self.peak,
            "other_processes_cpu_seconds": self.others.as_secs_f64(),
        })
    }
}

/// `out` parsed as JSON, or an error quoting it.
fn parse_json(what: &str, out: &[u8]) -> Result<Value> {
    serde_json::from_slice(out).with_context(|| {
        format!(
            "{what} printed no JSON: {}",
            String::from_utf8_lossy(out).trim()
        )
    })
}

pub struct Cairn {
    pub bin: PathBuf,
}

impl Cairn {
    fn cmd(&self, repo: &Path) -> Command {
        let mut c = Command::new(&self.bin);
        // Measured on clear repositories, as the numbers in bench/README.md
        // were (the cost of encryption: `cairn-bench encryption`).
        c.env("CAIRN_ENCRYPTION", "none").arg("--repo").arg(repo);
        c
    }

    pub fn backup(&self, repo: &Path, tree: &Evolving) -> Result<Cost> {
        let mut c = self.cmd(repo);
        // The first backup creates the repository.
        c.args(["--json", "--quiet", "backup", "--init", "--host", HOST])
            .arg(&tree.root);
        let r = run_child(c, None, true)?;
        let out = parse_json("cairn backup", &r.stdout)?;
        let logical = out["stats"]["logical_bytes"].as_u64().unwrap_or(0);
        ensure!(
            logical == tree.bytes(),
            "cairn backed up {logical} bytes of a {}-byte tree",
            tree.bytes()
        );
        Ok(Cost::of(&r))
    }

    /// `forget --keep-last 1` then `gc --collector`; the gc report.
    pub fn collect(&self, repo: &Path, collector: &str, forgotten: u64) -> Result<(Cost, Value)> {
        let mut c = self.cmd(repo);
        c.args(["--json", "--quiet", "forget", "--keep-last", "1"]);
        let f = run_child(c, None, true)?;
        let out = parse_json("cairn forget", &f.stdout)?;
        let removed = out["removed"].as_array().map_or(0, Vec::len) as u64;
        ensure!(
            removed == forgotten,
            "cairn forget removed {removed} snapshots, expected {forgotten}"
        );
        let mut c = self.cmd(repo);
        c.args(["--json", "--quiet", "gc", "--collector", collector]);
        let g = run_child(c, None, true)?;
        let report = parse_json("cairn gc", &g.stdout)?;
        Ok((Cost::of(&f).then(Cost::of(&g)), report))
    }

    /// `check --read-data` and one snapshot left; the restore is checked by
    /// the caller.
    pub fn check(&self, repo: &Path) -> Result<()> {
        let mut c = self.cmd(repo);
        c.args(["--quiet", "check", "--read-data"]);
        run_child(c, None, true).context("cairn check --read-data after gc")?;
        let mut c = self.cmd(repo);
        c.args(["--json", "snapshots"]);
        let s = parse_json("cairn snapshots", &run_child(c, None, true)?.stdout)?;
        let n = s.as_array().map_or(0, Vec::len);
        ensure!(n == 1, "cairn holds {n} snapshots after forget, expected 1");
        Ok(())
    }

    pub fn restore(&self, repo: &Path, target: &Path) -> Result<()> {
        let mut c = self.cmd(repo);
        c.args(["--quiet", "restore", "latest", "--target"])
            .arg(target);
        run_child(c, None, false).map(|_| ())
    }
}

pub struct Restic {
    pub bin: PathBuf,
    pub version: String,
}

impl Restic {
    fn cmd(&self, repo: &Path) -> Command {
        let mut c = Command::new(&self.bin);
        c.env("RESTIC_PASSWORD", RESTIC_PASSWORD)
            .env_remove("RESTIC_PASSWORD_FILE")
            .env_remove("RESTIC_PASSWORD_COMMAND")
            .env_remove("RESTIC_REPOSITORY")
            .arg("-r")
            .arg(repo)
            // Local repositories gain nothing from the cache, and copies of
            // one repository share its id, so a cache would mix them up.
            .arg("--no-cache");
        c
    }

    pub fn backup(&self, repo: &Path, tree: &Evolving) -> Result<Cost> {
        if !repo.join("config").is_file() {
            let mut c = self.cmd(repo);
            c.args(["init", "--repository-version", "2"]);
            run_child(c, None, false).context("restic init")?;
        }
        let mut c = self.cmd(repo);
        c.args(["--quiet", "backup", "--host", HOST])
            .arg(&tree.root);
        Ok(Cost::of(&run_child(c, None, false)?))
    }

    pub fn forget_args(max_unused: &str) -> Vec<String> {
        [
            "forget",
            "--keep-last",
            "1",
            "--prune",
            "--max-unused",
            max_unused,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    }

    pub fn collect(&self, repo: &Path, max_unused: &str) -> Result<Cost> {
        let mut c = self.cmd(repo);
        c.arg("--quiet").args(Self::forget_args(max_unused));
        Ok(Cost::of(&run_child(c, None, true)?))
    }

    pub fn check(&self, repo: &Path) -> Result<()> {
        let mut c = self.cmd(repo);
        c.args(["--quiet", "check", "--read-data"]);
        run_child(c, None, true).context("restic check --read-data after prune")?;
        let mut c = self.cmd(repo);
        c.args(["snapshots", "--json"]);
        let s = parse_json("restic snapshots", &run_child(c, None, true)?.stdout)?;
        let n = s.as_array().map_or(0, Vec::len);
        ensure!(
            n == 1,
            "restic holds {n} snapshots after forget, expected 1"
        );
        Ok(())
    }

    pub fn restore(&self, repo: &Path, target: &Path) -> Result<()> {
        let mut c = self.cmd(repo);
        c.args(["--quiet", "restore", "latest", "--target"])
            .arg(target);
        run_child(c, None, false).map(|_| ())
    }
}

/// `name` on `PATH`.
fn on_path(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// The restic binary, installed from the system packages if absent and
/// `install`; `Err` holds why there is none.
pub fn find_restic(given: Option<&Path>, install: bool) -> std::result::Result<Restic, String> {
    let bin = match given {
        Some(p) if p.is_file() => p.to_path_buf(),
        Some(p) => return Err(format!("--restic {}: no such file", p.display())),
        None => match on_path("restic") {
            Some(p) => p,
            None if !install => return Err("restic is not on PATH (--no-install)".into()),
            None => {
                eprintln!("cairn-bench: restic is not on PATH; trying apt-get install -y restic");
                let st = Command::new("apt-get")
                    .args(["install", "-y", "restic"])
                    .env("DEBIAN_FRONTEND", "noninteractive")
                    .stdout(Stdio::null())
                    .output();
                match st {
                    Ok(o) if o.status.success() => {}
                    Ok(o) => {
                        return Err(format!(
                            "apt-get install -y restic failed: {}",
                            String::from_utf8_lossy(&o.stderr).trim()
                        ))
                    }
                    Err(e) => return Err(format!("cannot run apt-get: {e}")),
                }
                on_path("restic").ok_or("apt-get installed restic, but it is not on PATH")?
            }
        },
    };
    let out = Command::new(&bin)
        .arg("version")
        .output()
        .map_err(|e| format!("running {} version: {e}", bin.display()))?;
    if !out.status.success() {
        return Err(format!("{} version failed", bin.display()));
    }
    let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
    Ok(Restic { bin, version })
}

/// Where a restore of `tree` landed under `target`: tools differ in
/// whether they recreate the absolute path, the last component or neither.
fn restored_root(target: &Path, tree: &Path) -> PathBuf {
    let abs = target.join(tree.strip_prefix("/").unwrap_or(tree));
    let name = target.join(tree.file_name().unwrap_or_default());
    [abs, name]
        .into_iter()
        .find(|p| p.is_dir())
        .unwrap_or_else(|| target.to_path_buf())
}

/// Restores with `restore` into a scratch directory and compares every
/// file with the tree (count, bytes, content).
pub fn check_restore(
    work: &mut WorkDir,
    tree: &Evolving,
    what: &str,
    restore: impl FnOnce(&Path) -> Result<()>,
) -> Result<()> {
    let target = work.scratch("gc-restored", false)?;
    restore(&target).with_context(|| format!("{what}: restore after collection"))?;
    let root = restored_root(&target, &tree.root);
    let want = (tree.files() as u64, tree.bytes());
    let got = tree_bytes(&root)?;
    ensure!(
        got == want,
        "{what}: restored {} files / {} bytes, the tree has {} / {}",
        got.0,
        got.1,
        want.0,
        want.1
    );
    let same = verify(&tree.root, &root).with_context(|| format!("{what}: restored data"))?;
    ensure!(
        same == want.0,
        "{what}: compared {same} files of {}",
        want.0
    );
    remove(&target)
}

/// A repository's bytes: everything, and the chunk data alone (cairn's
/// `containers/`, restic's `data/`), without indexes, Bloom filter and
/// snapshot records (cairn's Summary Vector is a fixed 5 MiB file, which
/// dominates small repositories).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Size {
    pub total: u64,
    pub data: u64,
}

impl Size {
    pub fn of(repo: &Path, restic: bool) -> Result<Size> {
        let data = repo.join(if restic { "data" } else { "containers" });
        Ok(Size {
            total: tree_bytes(repo)?.1,
            data: if data.is_dir() {
                tree_bytes(&data)?.1
            } else {
                0
            },
        })
    }

    pub fn json(&self) -> Value {
        json!({ "bytes": self.total, "data_bytes": self.data })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restore_root_is_found() {
        let t = std::env::temp_dir().join(format!("cairn-bench-rr-{}", std::process::id()));
        let tree = Path::new("/some/where/gc-tree");
        std::fs::create_dir_all(t.join("some/where/gc-tree")).unwrap();
        assert_eq!(restored_root(&t, tree), t.join("some/where/gc-tree"));
        remove(&t.join("some")).unwrap();
        std::fs::create_dir_all(t.join("gc-tree")).unwrap();
        assert_eq!(restored_root(&t, tree), t.join("gc-tree"));
        remove(&t).unwrap();
    }

    #[test]
    fn sizes_and_costs_add_up() {
        let t = std::env::temp_dir().join(format!("cairn-bench-sz-{}", std::process::id()));
        for (dir, len) in [("containers/00", 100), ("data/ab", 10), ("index", 7)] {
            std::fs::create_dir_all(t.join(dir)).unwrap();
            std::fs::write(t.join(dir).join("f"), vec![0u8; len]).unwrap();
        }
        let cairn = Size::of(&t, false).unwrap();
        let restic = Size::of(&t, true).unwrap();
        assert_eq!((cairn.total, cairn.data), (117, 100));
        assert_eq!((restic.total, restic.data), (117, 10));
        remove(&t).unwrap();

        let s = |w: u64, p: u64| Cost {
            wall: Duration::from_secs(w),
            cpu: Duration::from_secs(w),
            peak: p,
            others: Duration::from_secs(1),
        };
        let c = s(2, 50).then(s(3, 40));
        assert_eq!((c.wall.as_secs(), c.cpu.as_secs(), c.peak), (5, 5, 50));
        assert_eq!(c.others.as_secs(), 2);
    }
}
