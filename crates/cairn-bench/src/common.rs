//! Helpers shared by the file-system benchmarks (`backup`, `restore`,
//! `memory`): option values, the work directory, a directory walk in cairn's
//! order, page-cache warm-up and formatting.

use std::fs::{self, File};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use anyhow::{Context, Result};

/// The value following option `name`, parsed.
pub fn value<T: FromStr>(it: &mut std::slice::Iter<'_, String>, name: &str) -> Result<T>
where
    T::Err: std::fmt::Display,
{
    let v = it.next().with_context(|| format!("{name} needs a value"))?;
    v.parse()
        .map_err(|e| anyhow::anyhow!("{name}: {v:?} is not valid: {e}"))
}

/// Megabytes (10^6 bytes) per second.
pub fn mbps(bytes: u64, t: Duration) -> f64 {
    bytes as f64 / t.as_secs_f64().max(1e-9) / 1e6
}

/// The directory a benchmark works in. Without `--dir` it is a fresh
/// directory under `$TMPDIR` that is removed at the end (unless `--keep`);
/// with `--dir` it is kept, so its generated dataset can be reused by later
/// runs, and only the scratch entries a benchmark registers are removed.
pub struct WorkDir {
    pub path: PathBuf,
    remove_all: bool,
    scratch: Vec<PathBuf>,
}

impl WorkDir {
    pub fn new(dir: Option<&Path>, name: &str, keep: bool) -> Result<Self> {
        let (path, remove_all) = match dir {
            Some(d) => (d.to_path_buf(), false),
            None => (
                std::env::temp_dir().join(format!("cairn-bench-{name}-{}", std::process::id())),
                !keep,
            ),
        };
        fs::create_dir_all(&path).with_context(|| format!("creating {}", path.display()))?;
        Ok(WorkDir {
            path: path
                .canonicalize()
                .with_context(|| format!("resolving {}", path.display()))?,
            remove_all,
            scratch: Vec::new(),
        })
    }

    /// `name` inside the work directory, removed first if it exists, and
    /// removed again at the end unless `keep`.
    pub fn scratch(&mut self, name: &str, keep: bool) -> Result<PathBuf> {
        let p = self.path.join(name);
        remove(&p)?;
        if !keep {
            self.scratch.push(p.clone());
        }
        Ok(p)
    }

    /// Removes `p` at the end (unless the whole directory goes anyway).
    pub fn remove_later(&mut self, p: &Path) {
        self.scratch.push(p.to_path_buf());
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        if self.remove_all {
            let _ = fs::remove_dir_all(&self.path);
        } else {
            for p in &self.scratch {
                let _ = remove(p);
            }
        }
    }
}

/// Removes a file or directory tree if it exists.
pub fn remove(p: &Path) -> Result<()> {
    match fs::symlink_metadata(p) {
        Ok(m) if m.is_dir() => {
            fs::remove_dir_all(p).with_context(|| format!("removing {}", p.display()))
        }
        Ok(_) => fs::remove_file(p).with_context(|| format!("removing {}", p.display())),
        Err(_) => Ok(()),
    }
}

/// Flushes dirty pages (`sync`), so write-back left by one step does not
/// land in the timing of the next. Best effort.
pub fn sync() {
    let _ = std::process::Command::new("sync").status();
}

/// Visits every regular file under `root` depth-first with entries sorted by
/// name bytes (cairn's walk order); `dir` is called for each directory
/// (relative path, `""` for the root) before its entries.
pub fn walk(
    root: &Path,
    dir: &mut dyn FnMut(&Path) -> Result<()>,
    file: &mut dyn FnMut(&Path, &Path) -> Result<()>,
) -> Result<()> {
    fn go(
        root: &Path,
        rel: &Path,
        dir: &mut dyn FnMut(&Path) -> Result<()>,
        file: &mut dyn FnMut(&Path, &Path) -> Result<()>,
    ) -> Result<()> {
        dir(rel)?;
        let here = root.join(rel);
        let mut entries: Vec<_> = fs::read_dir(&here)
            .with_context(|| format!("reading {}", here.display()))?
            .collect::<std::io::Result<_>>()
            .with_context(|| format!("reading {}", here.display()))?;
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let ft = e.file_type()?;
            let r = rel.join(e.file_name());
            if ft.is_dir() {
                go(root, &r, dir, file)?;
            } else if ft.is_file() {
                file(&e.path(), &r)?;
            }
        }
        Ok(())
    }
    go(root, Path::new(""), dir, file)
}

/// Regular files under `root` and the sum of their lengths (apparent size,
/// not allocated blocks).
pub fn tree_bytes(root: &Path) -> Result<(u64, u64)> {
    let (mut files, mut bytes) = (0, 0);
    walk(root, &mut |_| Ok(()), &mut |p, _| {
        files += 1;
        bytes += fs::metadata(p)
            .with_context(|| format!("reading {}", p.display()))?
            .len();
        Ok(())
    })?;
    Ok((files, bytes))
}

/// Reads every file under each root once (into the page cache); returns the
/// bytes read.
pub fn warm(roots: &[&Path]) -> Result<u64> {
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0;
    for root in roots {
        walk(root, &mut |_| Ok(()), &mut |p, _| {
            let mut f = fs::File::open(p).with_context(|| format!("opening {}", p.display()))?;
            loop {
                let n = f.read(&mut buf)?;
                if n == 0 {
                    break;
                }
                total += n as u64;
            }
            Ok(())
        })?;
    }
    Ok(total)
}

/// `n` bytes as MiB with one decimal.
pub fn mib(n: u64) -> String {
    format!("{:.1} MiB", n as f64 / (1u64 << 20) as f64)
}

/// Copies every file under `src` to `dst` on this thread (read + write
/// through a 1 MiB buffer; no `copy_file_range`, no fsync); returns the bytes.
pub fn copy_tree(src: &Path, dst: &Path) -> Result<u64> {
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0;
    walk(
        src,
        &mut |rel| {
            let d = dst.join(rel);
            fs::create_dir_all(&d).with_context(|| format!("creating {}", d.display()))
        },
        &mut |p, rel| {
            let mut r = File::open(p).with_context(|| format!("opening {}", p.display()))?;
            let d = dst.join(rel);
            let mut w = File::create(&d).with_context(|| format!("creating {}", d.display()))?;
            loop {
                let n = r.read(&mut buf)?;
                if n == 0 {
                    break;
                }
                w.write_all(&buf[..n])
                    .with_context(|| format!("writing {}", d.display()))?;
                total += n as u64;
            }
            Ok(())
        },
    )?;
    Ok(total)
}

/// Copies every tree in `srcs` into the work directory and deletes the
/// copies (untimed): the page-cache memory later timed writes reuse is then
/// already faulted in (first touch of guest memory is slow on a VM).
pub fn prefault(work: &mut WorkDir, srcs: &[&Path]) -> Result<()> {
    let dst = work.scratch("prefault", false)?;
    for (i, s) in srcs.iter().enumerate() {
        copy_tree(s, &dst.join(i.to_string()))?;
    }
    sync();
    remove(&dst)
}

/// CPU time spent by the whole machine so far (every process: user, nice,
/// system, irq, softirq), from the first line of `/proc/stat`, in USER_HZ
/// ticks (100 per second on Linux). Zero if unreadable.
pub fn machine_busy() -> Duration {
    let Ok(stat) = fs::read_to_string("/proc/stat") else {
        return Duration::ZERO;
    };
    let ticks: Vec<u64> = stat
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .skip(1)
        .map(|t| t.parse().unwrap_or(0))
        .collect();
    // user nice system idle iowait irq softirq steal ...
    let busy: u64 = [0, 1, 2, 5, 6].iter().filter_map(|&i| ticks.get(i)).sum();
    Duration::from_millis(busy * 10)
}

/// Whether `others` seconds of foreign CPU time during a `wall`-second step
/// disturb it (more than 5% of one CPU and more than 50 ms).
pub fn disturbed(others: Duration, wall: Duration) -> bool {
    others.as_secs_f64() > 0.05 && others.as_secs_f64() > 0.05 * wall.as_secs_f64()
}

/// Command-line words from string literals (option parsers' tests).
#[cfg(test)]
pub fn args(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

/// The options of a benchmark over the two-generation dataset that takes
/// nothing else: `--mib N`, `--dup-pct P`, `--runs R`, `--dir D`, `--keep`,
/// `--json`.
pub struct DatasetOptions {
    pub mib: u64,
    pub dup_pct: u64,
    pub runs: usize,
    pub dir: Option<std::path::PathBuf>,
    pub keep: bool,
    pub json: bool,
}

impl DatasetOptions {
    /// Parses `args` for benchmark `name`, `--mib` defaulting to `mib`.
    pub fn parse(name: &str, args: &[String], mib: u64) -> anyhow::Result<Self> {
        Self::parse_with(name, args, mib, &mut |_, _| Ok(false))
    }

    /// [`DatasetOptions::parse`] for a benchmark with options of its own:
    /// `extra(option, rest)` takes an option it knows (reading its value
    /// from `rest`) and returns true, or returns false for an unknown one.
    pub fn parse_with(
        name: &str,
        args: &[String],
        mib: u64,
        extra: &mut dyn FnMut(&str, &mut std::slice::Iter<'_, String>) -> anyhow::Result<bool>,
    ) -> anyhow::Result<Self> {
        let mut o = DatasetOptions {
            mib,
            dup_pct: 90,
            runs: 3,
            dir: None,
            keep: false,
            json: false,
        };
        let mut it = args.iter();
        while let Some(a) = it.next() {
            match a.as_str() {
                "--mib" => o.mib = value(&mut it, a)?,
                "--dup-pct" => o.dup_pct = value(&mut it, a)?,
                "--runs" => o.runs = value(&mut it, a)?,
                "--dir" => o.dir = Some(value(&mut it, a)?),
                "--keep" => o.keep = true,
                "--json" => o.json = true,
                other => {
                    if !extra(other, &mut it)? {
                        anyhow::bail!("{name}: unknown option {other:?}")
                    }
                }
            }
        }
        anyhow::ensure!(o.mib > 0 && o.runs > 0, "--mib and --runs must be positive");
        anyhow::ensure!(o.dup_pct <= 99, "--dup-pct must be below 100");
        Ok(o)
    }
}
