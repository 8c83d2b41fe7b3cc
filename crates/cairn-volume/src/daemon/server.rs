//! The control socket's server: binds `DIR/control.sock` (mode 0600,
//! replacing a stale one a killed daemon left), accepts connections on its
//! own thread, and answers each on a thread of its own: `status` at once,
//! a job request by queueing a run and reporting on it until it ends.

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::{Condvar, Mutex};
use std::time::{Duration, Instant};

use cairn_core::{Error, Result};

use super::protocol::{with_socket_path, ProgressLine, Reply, Request, MAX_REQUEST_BYTES, STATUS};
use super::registry;
use super::runner::Runner;
use crate::job_state::Trigger;
use crate::volume::Volume;

/// How long a connection may take to send its request, and a client to
/// take a line the daemon writes (then it is taken for gone).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// A waiting client hears of its run at least this often (a heartbeat:
/// the same progress line again when nothing changed).
const HEARTBEAT: Duration = Duration::from_secs(5);

/// Binds the socket at `path`: a socket there that accepts connections
/// belongs to a live daemon (refused); one that does not is stale and
/// replaced. The new socket is bound under a temporary name, made 0600,
/// then renamed into place, so no other user can connect in between.
pub fn bind(path: &Path) -> Result<UnixListener> {
    let io = |what: &str, e| Error::io(format!("{what} {}", path.display()), e);
    if fs::symlink_metadata(path).is_ok() {
        if with_socket_path(path, |p| UnixStream::connect(p)).is_ok() {
            return Err(Error::invalid(format!(
                "{} already answers: another daemon serves this volume",
                path.display()
            )));
        }
        fs::remove_file(path).map_err(|e| io("removing the stale socket", e))?;
    }
    let tmp = temporary_name(path);
    let _ = fs::remove_file(&tmp);
    let listener =
        with_socket_path(&tmp, |p| UnixListener::bind(p)).map_err(|e| io("binding", e))?;
    let placed = fs::set_permissions(&tmp, fs::Permissions::from_mode(0o600))
        .and_then(|()| fs::rename(&tmp, path));
    if let Err(e) = placed {
        let _ = fs::remove_file(&tmp);
        return Err(io("placing", e));
    }
    Ok(listener)
}

fn temporary_name(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".{}.tmp", std::process::id()));
    path.with_file_name(name)
}

/// The connections being answered, so the stop can wait for them (each
/// holds the volume).
#[derive(Default)]
pub struct Connections {
    open: Mutex<usize>,
    closed: Condvar,
}

impl Connections {
    /// Waits until no connection is being answered.
    pub fn wait_all_closed(&self) {
        let mut open = self.open.lock();
        while *open > 0 {
            self.closed.wait(&mut open);
        }
    }
}

/// Counts one connection until dropped.
struct Open(Arc<Connections>);

impl Drop for Open {
    fn drop(&mut self) {
        *self.0.open.lock() -= 1;
        self.0.closed.notify_all();
    }
}

/// Accepts connections until `stop` is set (the stopper then connects
/// once to wake the accept).
pub fn accept_loop(
    listener: UnixListener,
    vol: Arc<Volume>,
    runner: Arc<Runner>,
    stop: Arc<AtomicBool>,
    connections: Arc<Connections>,
) {
    for conn in listener.incoming() {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let Ok(conn) = conn else { continue };
        let (vol, runner) = (vol.clone(), runner.clone());
        *connections.open.lock() += 1;
        let open = Open(connections.clone());
        // Not spawned: the closure and `open` are dropped, and the client
        // sees the connection close.
        let _ = std::thread::Builder::new()
            .name("volume-control".into())
            .spawn(move || {
                let _open = open;
                // Moved in after `_open`, so dropped before it: the stop
                // sees the volume released once the count is 0.
                let (vol, runner) = (vol, runner);
                answer(conn, &vol, &runner)
            });
    }
}

/// Answers one connection. Write errors end it: the client went away
/// (its run, if it asked for one, goes on).
fn answer(conn: UnixStream, vol: &Volume, runner: &Runner) {
    let _ = conn.set_read_timeout(Some(REQUEST_TIMEOUT));
    let _ = conn.set_write_timeout(Some(REQUEST_TIMEOUT));
    let mut line = String::new();
    let read = BufReader::new((&conn).take(MAX_REQUEST_BYTES)).read_line(&mut line);
    let mut out = &conn;
    let reply = match read {
        Err(e) => Reply::error(format!("reading the request: {e}")),
        Ok(_) if !line.ends_with('\n') => Reply::error(format!(
            "the request must be one line of at most {MAX_REQUEST_BYTES} bytes, ending in a newline"
        )),
        Ok(_) => match Request::parse(line.trim_end()) {
            Err(e) => Reply::error(e),
            Ok(req) => respond(&req, vol, runner, &mut out),
        },
    };
    let _ = out.write_all(reply.to_line().as_bytes());
}

/// The final reply to `req`; progress lines are written to `out` first.
fn respond(req: &Request, vol: &Volume, runner: &Runner, out: &mut &UnixStream) -> Reply {
    if req.name == STATUS {
        if req.args.as_object().is_some_and(|m| !m.is_empty()) {
            return Reply::error("status request: it takes no options");
        }
        return match crate::status::status(vol) {
            Ok(mut s) => {
                s.jobs = runner.jobs_status();
                Reply::Ok(serde_json::to_value(s).expect("a status serializes"))
            }
            Err(e) => Reply::error(e),
        };
    }
    let Some(job) = registry::find(runner.jobs(), &req.name) else {
        let known: Vec<&str> = std::iter::once(STATUS)
            .chain(runner.jobs().iter().map(|j| j.name))
            .collect();
        return Reply::error(format!(
            "unknown request {:?} (known: {})",
            req.name,
            known.join(", ")
        ));
    };
    let (ticket, queued_at) = match runner.submit(*job, req.args.clone(), Trigger::Request) {
        Ok(t) => t,
        Err(e) => return Reply::error(e),
    };
    // Where it stood when it was queued is always told first, even if it
    // has run and ended before this thread looks again.
    let line = Reply::Progress(queued_at.clone()).to_line();
    if out.write_all(line.as_bytes()).is_err() {
        return Reply::error("the client went away");
    }
    let mut sent: Option<(ProgressLine, Instant)> = Some((queued_at, Instant::now()));
    loop {
        if let Some(outcome) = ticket.outcome() {
            return match outcome {
                Ok(report) => Reply::Ok(report),
                Err(e) => Reply::Error(e),
            };
        }
        if let Some(now) = runner.where_is(&ticket) {
            let due = sent
                .as_ref()
                .is_none_or(|(last, at)| *last != now || at.elapsed() >= HEARTBEAT);
            if due {
                // A client gone does not stop the run: only the lines stop.
                let line = Reply::Progress(now.clone()).to_line();
                if out.write_all(line.as_bytes()).is_err() {
                    return Reply::error("the client went away");
                }
                sent = Some((now, Instant::now()));
            }
        }
        runner.wait_change(&ticket, HEARTBEAT);
    }
}
