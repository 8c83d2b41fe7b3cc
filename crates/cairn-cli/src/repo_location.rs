//! Where `--repo` points: a local directory or an S3 bucket prefix.
//!
//! * `s3:http(s)://HOST[:PORT]/BUCKET[/PREFIX]`: a self-hosted S3 server,
//!   addressed path-style.
//! * `s3://BUCKET[/PREFIX]`: AWS S3 (or the server of `--s3-endpoint` /
//!   `AWS_ENDPOINT_URL`; `--s3-path-style` for servers without virtual
//!   hosts).
//!
//! Credentials and region come from the usual AWS variables
//! (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`,
//! `AWS_REGION` or `AWS_DEFAULT_REGION`). Anything else is a local path.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Result};
use clap::Args;

use cairn_backend::{S3Backend, S3Config};
use cairn_core::Backend;

/// Options of S3 repositories (`--repo s3://...`) and of the local
/// metadata cache: part of the repository options (`globals::RepoArgs`).
#[derive(Args, Debug, Clone)]
pub struct S3Args {
    /// Endpoint of the S3 server of an `s3://BUCKET/PREFIX` repository
    /// (default: AWS).
    #[arg(
        help_heading = "S3 repositories",
        long,
        env = "AWS_ENDPOINT_URL",
        value_name = "URL"
    )]
    pub s3_endpoint: Option<String>,
    /// Address buckets path-style (`ENDPOINT/BUCKET/KEY`) rather than as
    /// virtual hosts, as most self-hosted servers need.
    #[arg(help_heading = "S3 repositories", long)]
    pub s3_path_style: bool,
    /// Containers a backup uploads to S3 at once (requests in flight;
    /// each holds a container, about 4 MiB, in memory).
    #[arg(
        help_heading = "S3 repositories",
        long,
        env = "CAIRN_S3_UPLOADS",
        value_name = "N",
        default_value_t = cairn_backend::s3::DEFAULT_UPLOADS_IN_FLIGHT,
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=256)
    )]
    pub s3_uploads: usize,
    /// Containers a restore (or any reader of file contents) fetches from
    /// S3 at once (requests in flight; each holds a container's wanted
    /// chunks in memory).
    #[arg(
        help_heading = "S3 repositories",
        long,
        env = "CAIRN_S3_DOWNLOADS",
        value_name = "N",
        default_value_t = cairn_backend::s3::DEFAULT_DOWNLOADS_IN_FLIGHT,
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=256)
    )]
    pub s3_downloads: usize,
    /// Seconds a lock lease on S3 stays live after its holder stops
    /// refreshing it (a killed process): how long a crashed writer can
    /// keep the next one waiting. Holders refresh every quarter of it, so
    /// a process stalled longer than that may lose its lock.
    #[arg(
        help_heading = "S3 repositories",
        long,
        env = "CAIRN_S3_LEASE_SECS",
        value_name = "SECONDS",
        default_value_t = cairn_backend::s3::DEFAULT_LEASE.as_secs(),
        value_parser = clap::builder::RangedU64ValueParser::<u64>::new().range(10..=86_400)
    )]
    pub s3_lease_secs: u64,
    /// Seconds one attempt of a request to S3 may take, its data included,
    /// before it is abandoned and retried (a store that stopped answering).
    #[arg(
        help_heading = "S3 repositories",
        long,
        env = "CAIRN_S3_TIMEOUT",
        value_name = "SECONDS",
        default_value_t = cairn_backend::s3::DEFAULT_REQUEST_TIMEOUT.as_secs(),
        value_parser = clap::builder::RangedU64ValueParser::<u64>::new().range(1..=86_400)
    )]
    pub s3_timeout: u64,
    /// Where the metadata of remote repositories is cached (index files,
    /// container metadata sections; safe to delete). Default:
    /// `$XDG_CACHE_HOME/cairn`, else `~/.cache/cairn`.
    #[arg(
        help_heading = "Metadata cache",
        long,
        env = "CAIRN_CACHE_DIR",
        value_name = "DIR"
    )]
    pub cache_dir: Option<PathBuf>,
    /// Read every object of a remote repository from the store: no local
    /// metadata cache.
    #[arg(help_heading = "Metadata cache", long)]
    pub no_cache: bool,
}

impl Default for S3Args {
    fn default() -> Self {
        S3Args {
            s3_endpoint: None,
            s3_path_style: false,
            s3_uploads: cairn_backend::s3::DEFAULT_UPLOADS_IN_FLIGHT,
            s3_downloads: cairn_backend::s3::DEFAULT_DOWNLOADS_IN_FLIGHT,
            s3_lease_secs: cairn_backend::s3::DEFAULT_LEASE.as_secs(),
            s3_timeout: cairn_backend::s3::DEFAULT_REQUEST_TIMEOUT.as_secs(),
            cache_dir: None,
            no_cache: false,
        }
    }
}

/// The root of the local metadata cache (`--cache-dir`, the XDG cache
/// directory, `~/.cache`), or `None` with `--no-cache` or no home.
pub fn cache_root(opts: &S3Args) -> Option<PathBuf> {
    if opts.no_cache {
        return None;
    }
    if let Some(dir) = &opts.cache_dir {
        return Some(dir.clone());
    }
    env("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| env("HOME").map(|h| Path::new(&h).join(".cache")))
        .map(|d| d.join("cairn"))
}

/// Connects to an S3 repository location, with the local metadata cache
/// in front of it unless `opts` turn it off.
pub fn s3_backend_cached(config: S3Config, opts: &S3Args) -> Result<Arc<dyn Backend>> {
    let store = s3_backend(config)?;
    Ok(match cache_root(opts) {
        Some(root) => cairn_engine::local_cache::LocalCache::wrap(store, &root)?,
        None => store,
    })
}

/// A parsed `--repo`.
#[derive(Debug, Clone)]
pub enum RepoLocation<'a> {
    Local(&'a Path),
    S3(Box<S3Config>),
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// Splits `BUCKET[/PREFIX]`.
fn bucket_and_prefix<'s>(url: &str, rest: &'s str) -> Result<(&'s str, &'s str)> {
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.is_empty() {
        bail!("invalid repository {url:?}: no bucket name");
    }
    Ok((bucket, prefix.trim_matches('/')))
}

/// Parses `--repo`; `s3:` forms become an [`S3Config`] filled from the
/// options and the AWS environment variables.
pub fn parse<'a>(repo: &'a Path, opts: &S3Args) -> Result<RepoLocation<'a>> {
    let Some(url) = repo.to_str().filter(|s| s.starts_with("s3:")) else {
        return Ok(RepoLocation::Local(repo));
    };
    let mut config = if let Some(rest) = url.strip_prefix("s3://") {
        let (bucket, prefix) = bucket_and_prefix(url, rest)?;
        let mut config = S3Config::new(opts.s3_endpoint.clone(), bucket, prefix);
        config.path_style = opts.s3_path_style;
        config
    } else {
        let server = &url["s3:".len()..];
        let Some((scheme, rest)) = server.split_once("://") else {
            bail!(
                "invalid repository {url:?}: use s3:https://HOST[:PORT]/BUCKET/PREFIX \
                 or s3://BUCKET/PREFIX"
            );
        };
        if scheme != "http" && scheme != "https" {
            bail!("invalid repository {url:?}: the endpoint must be http:// or https://");
        }
        let Some((host, path)) = rest.split_once('/') else {
            bail!("invalid repository {url:?}: no bucket name after the host");
        };
        if host.is_empty() {
            bail!("invalid repository {url:?}: no host");
        }
        let (bucket, prefix) = bucket_and_prefix(url, path)?;
        let mut config = S3Config::new(Some(format!("{scheme}://{host}")), bucket, prefix);
        config.path_style = true;
        config
    };
    config.uploads_in_flight = opts.s3_uploads;
    config.downloads_in_flight = opts.s3_downloads;
    config.lease = std::time::Duration::from_secs(opts.s3_lease_secs);
    config.request_timeout = std::time::Duration::from_secs(opts.s3_timeout);
    config.region = env("AWS_REGION").or_else(|| env("AWS_DEFAULT_REGION"));
    config.access_key_id = env("AWS_ACCESS_KEY_ID");
    config.secret_access_key = env("AWS_SECRET_ACCESS_KEY");
    config.session_token = env("AWS_SESSION_TOKEN");
    if config.access_key_id.is_some() != config.secret_access_key.is_some() {
        bail!("AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set together");
    }
    Ok(RepoLocation::S3(Box::new(config)))
}

/// Connects to an S3 repository location, once per location and process:
/// a command that asks whether a repository is there and then opens it
/// uses one client and one probe of the bucket (one request fewer).
pub fn s3_backend(config: S3Config) -> Result<Arc<dyn Backend>> {
    static OPENED: std::sync::Mutex<Vec<(String, S3Backend)>> = std::sync::Mutex::new(Vec::new());
    let key = format!("{config:?}");
    let mut opened = OPENED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, backend)) = opened.iter().find(|(k, _)| *k == key) {
        return Ok(Arc::new(backend.clone()));
    }
    let backend = S3Backend::open(config)?;
    opened.push((key, backend.clone()));
    Ok(Arc::new(backend))
}

/// Whether the repository at `repo` has a config object (is initialised).
/// Local: the config file; S3: the config object (an error if the bucket
/// cannot be reached).
pub fn has_config(repo: &Path, opts: &S3Args) -> Result<bool> {
    Ok(match parse(repo, opts)? {
        RepoLocation::Local(path) => path.join(cairn_engine::object_names::CONFIG).is_file(),
        RepoLocation::S3(config) => {
            s3_backend(*config)?.exists(cairn_engine::object_names::CONFIG)?
        }
    })
}

/// Refuses a `--repo` (or `copy --to`) that names a remote store cairn
/// cannot open, rather than creating a local directory of that name: any
/// `scheme:` prefix other than `s3:` (`sftp:`, `rest:`, `b2:`, `azure:`,
/// `gs:`, `swift:`, `rclone:`, `https:`, ...) and ssh's `user@host:path`.
/// A path with a `/` before its first `:` (`./a:b`) is local.
pub fn refuse_url(path: &Path) -> Result<()> {
    let s = path.to_string_lossy();
    if s.starts_with("s3:") {
        return Ok(());
    }
    let Some((head, _)) = s.split_once(':') else {
        return Ok(());
    };
    let is_scheme = head.starts_with(|c: char| c.is_ascii_alphabetic())
        && head
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c));
    let is_ssh = head.contains('@') && !head.contains('/');
    if is_scheme || is_ssh {
        bail!(
            "unsupported repository {s}: {} repositories are not supported; cairn supports local \
             paths and s3: locations (s3:https://HOST[:PORT]/BUCKET/PREFIX, s3://BUCKET/PREFIX; \
             docs/object-storage.md)",
            if is_ssh {
                "ssh (user@host:path)".to_string()
            } else {
                format!("{head}:")
            }
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s3(url: &str, opts: &S3Args) -> S3Config {
        match parse(Path::new(url), opts).unwrap() {
            RepoLocation::S3(c) => *c,
            RepoLocation::Local(p) => panic!("{url} parsed as local {p:?}"),
        }
    }

    #[test]
    fn locations() {
        let none = S3Args::default();
        let c = s3("s3:http://127.0.0.1:9000/bucket/a/b/", &none);
        assert_eq!(c.endpoint.as_deref(), Some("http://127.0.0.1:9000"));
        assert_eq!((c.bucket.as_str(), c.prefix.as_str()), ("bucket", "a/b"));
        assert!(c.path_style);
        assert_eq!(c.describe(), "s3:http://127.0.0.1:9000/bucket/a/b");

        let c = s3("s3://bucket", &none);
        assert_eq!(
            (c.endpoint, c.bucket.as_str(), c.prefix.as_str()),
            (None, "bucket", "")
        );
        assert!(!c.path_style);
        let opts = S3Args {
            s3_endpoint: Some("https://minio.lan".into()),
            s3_path_style: true,
            s3_uploads: 3,
            s3_downloads: 5,
            s3_lease_secs: 30,
            s3_timeout: 7,
            ..S3Args::default()
        };
        let c = s3("s3://bucket/repo", &opts);
        assert_eq!(c.endpoint.as_deref(), Some("https://minio.lan"));
        assert!(c.path_style);
        assert_eq!(c.uploads_in_flight, 3);
        assert_eq!(c.downloads_in_flight, 5);
        assert_eq!(c.lease, std::time::Duration::from_secs(30));
        assert_eq!(c.request_timeout, std::time::Duration::from_secs(7));

        for local in ["/srv/repo", "repo", "s3x/y", "./s3:odd"] {
            assert!(matches!(
                parse(Path::new(local), &none).unwrap(),
                RepoLocation::Local(_)
            ));
        }
        for remote in [
            "sftp:user@host:/srv/repo",
            "rest:http://host:8000/",
            "b2:bucket:path",
            "azure:container:/",
            "gs:bucket:/",
            "swift:container:/",
            "rclone:remote:path",
            "https://host/repo",
            "user@host:/srv/repo",
            "backup@nas:repo",
            "anything:else",
        ] {
            assert!(refuse_url(Path::new(remote)).is_err(), "{remote}");
        }
        for local in ["/srv/repo", "repo", "./odd:name", "/mnt/a:b", "s3://bucket"] {
            assert!(refuse_url(Path::new(local)).is_ok(), "{local}");
        }
        for bad in [
            "s3:",
            "s3://",
            "s3:///prefix",
            "s3:ftp://host/bucket",
            "s3:https://host",
            "s3:https:///bucket",
            "s3:https://host/",
            "s3:bucket/prefix",
        ] {
            assert!(parse(Path::new(bad), &none).is_err(), "{bad}");
        }
    }
}
