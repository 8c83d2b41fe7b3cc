//! The control socket's protocol (docs/FORMAT.md, "Volume", "Control
//! socket"): a client sends one JSON object on one line, `{"request":
//! NAME, ...options}`; the daemon answers with JSON lines: any number of
//! `{"progress":{...}}`, then one final `{"ok":RESULT}` or
//! `{"error":"one line"}`, and closes the connection.

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::job_state::{JobState, Progress};

/// The socket's name in the volume directory.
pub const SOCKET_NAME: &str = "control.sock";

/// The longest request line the daemon reads.
pub const MAX_REQUEST_BYTES: u64 = 64 << 10;

/// The request that measures the volume and shows the jobs.
pub const STATUS: &str = "status";

/// Runs `f` with a path to `path` that fits a Unix socket's address (108
/// bytes with its NUL): `path` itself when short enough, else
/// `/proc/self/fd/N/NAME` through a descriptor of its directory, so a
/// volume deep in the tree still has its socket.
pub fn with_socket_path<T>(
    path: &Path,
    f: impl FnOnce(&Path) -> std::io::Result<T>,
) -> std::io::Result<T> {
    const SUN_PATH_ROOM: usize = 100;
    if path.as_os_str().len() < SUN_PATH_ROOM {
        return f(path);
    }
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return f(path);
    };
    let dir = std::fs::File::open(dir)?;
    f(&PathBuf::from(format!("/proc/self/fd/{}", dir.as_raw_fd())).join(name))
}

/// One request: its name and its options.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    pub name: String,
    /// The request object without `request`.
    pub args: Value,
}

impl Request {
    pub fn new(name: &str, args: Map<String, Value>) -> Request {
        Request {
            name: name.to_string(),
            args: Value::Object(args),
        }
    }

    /// Reads a request line.
    pub fn parse(line: &str) -> Result<Request, String> {
        let value: Value =
            serde_json::from_str(line).map_err(|e| format!("request is not JSON: {e}"))?;
        let Value::Object(mut args) = value else {
            return Err("request is not a JSON object".into());
        };
        match args.remove("request") {
            Some(Value::String(name)) => Ok(Request {
                name,
                args: Value::Object(args),
            }),
            _ => Err("request has no \"request\" name".into()),
        }
    }

    /// The request as one line (no newline).
    pub fn to_line(&self) -> String {
        let mut object = match &self.args {
            Value::Object(m) => m.clone(),
            _ => Map::new(),
        };
        object.insert("request".into(), Value::String(self.name.clone()));
        Value::Object(object).to_string()
    }
}

/// A job request's state while the client waits for it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProgressLine {
    pub job: String,
    pub state: JobState,
    /// Runs before this one in the queue (while queued).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ahead: Option<u64>,
    #[serde(default, flatten, skip_serializing_if = "Option::is_none")]
    pub progress: Option<Progress>,
}

/// One response line.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Reply {
    Progress(ProgressLine),
    Ok(Value),
    Error(String),
}

impl Reply {
    /// The reply as one line, newline included.
    pub fn to_line(&self) -> String {
        let mut s = serde_json::to_string(self).expect("a reply serializes");
        s.push('\n');
        s
    }

    pub fn error(e: impl std::fmt::Display) -> Reply {
        // One line, whatever the error's text holds.
        Reply::Error(e.to_string().replace('\n', " "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_replies_are_one_line_each() {
        let r = Request::parse(r#"{"request":"optimize","min_age_secs":5}"#).unwrap();
        assert_eq!(r.name, "optimize");
        assert_eq!(r.args["min_age_secs"], 5);
        assert_eq!(Request::parse(&r.to_line()).unwrap(), r);
        assert!(Request::parse("[1]").is_err());
        assert!(Request::parse(r#"{"x":1}"#).is_err());
        let line = Reply::Progress(ProgressLine {
            job: "optimize".into(),
            state: JobState::Running,
            ahead: None,
            progress: Some(Progress::files("switch", 2, Some(5))),
        })
        .to_line();
        assert_eq!(
            line,
            "{\"progress\":{\"job\":\"optimize\",\"state\":\"running\",\"phase\":\"switch\",\
             \"done\":2,\"total\":5,\"unit\":\"files\"}}\n"
        );
        let back: Reply = serde_json::from_str(&line).unwrap();
        assert!(matches!(back, Reply::Progress(p) if p.progress.as_ref().unwrap().done == 2));
        assert_eq!(Reply::error("a\nb").to_line(), "{\"error\":\"a b\"}\n");
        assert_eq!(Reply::Ok(Value::Null).to_line(), "{\"ok\":null}\n");
    }
}
