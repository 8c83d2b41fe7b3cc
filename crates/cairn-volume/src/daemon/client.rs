//! The control socket's client, for `cairn volume` commands and scripts'
//! tests: whether a daemon answers for a volume (else whether another
//! process holds the volume), and one request answered.

use std::fs::OpenOptions;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;

use serde_json::Value;

use cairn_core::{Error, Result};

use super::protocol::{with_socket_path, ProgressLine, Reply, Request, SOCKET_NAME};
use crate::layout::VolumeDir;

/// Who has a volume.
pub enum Reach {
    /// Its mount daemon answers on the control socket.
    Daemon(Client),
    /// Another process holds `volume.lock` (its pid, when it wrote one)
    /// and no daemon answers: an offline command, or a daemon from before
    /// the control socket.
    Busy(Option<u32>),
    /// Nobody: the caller may open the volume itself.
    Free,
}

/// A connection to the daemon, for one request.
pub struct Client {
    stream: UnixStream,
}

/// Finds out who has the volume at `dir`.
pub fn reach(dir: &Path) -> Result<Reach> {
    let vdir = VolumeDir::new(dir);
    if let Ok(stream) = with_socket_path(&dir.join(SOCKET_NAME), |p| UnixStream::connect(p)) {
        return Ok(Reach::Daemon(Client { stream }));
    }
    let path = vdir.lock();
    let mut file = match OpenOptions::new().read(true).open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Reach::Free),
        Err(e) => return Err(Error::io(format!("opening {}", path.display()), e)),
    };
    // A probe: taken, it is released at once when `file` closes.
    match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockShared) {
        Ok(()) => Ok(Reach::Free),
        Err(rustix::io::Errno::WOULDBLOCK) => {
            let mut text = String::new();
            let _ = file.read_to_string(&mut text);
            Ok(Reach::Busy(text.trim().parse().ok()))
        }
        Err(e) => Err(Error::io(format!("locking {}", path.display()), e.into())),
    }
}

impl Client {
    /// Connects to the daemon of the volume at `dir`.
    pub fn connect(dir: &Path) -> Result<Client> {
        let path = dir.join(SOCKET_NAME);
        with_socket_path(&path, |p| UnixStream::connect(p))
            .map(|stream| Client { stream })
            .map_err(|e| Error::io(format!("connecting to {}", path.display()), e))
    }

    /// Sends `req` and reads the answer: each progress line is handed to
    /// `on_progress`; the final `ok` is returned, an `error` is this
    /// call's error (its line as the daemon wrote it).
    pub fn request(
        self,
        req: &Request,
        on_progress: &mut dyn FnMut(&ProgressLine),
    ) -> Result<Value> {
        let io = |e| Error::io("talking to the volume's mount daemon", e);
        let mut line = req.to_line();
        line.push('\n');
        (&self.stream).write_all(line.as_bytes()).map_err(io)?;
        let mut reader = BufReader::new(&self.stream);
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).map_err(io)? == 0 {
                return Err(Error::invalid(
                    "the volume's mount daemon closed the connection without an answer \
                     (was the volume unmounted?)",
                ));
            }
            let reply: Reply = serde_json::from_str(&line)
                .map_err(|e| Error::corrupt("the volume's mount daemon's answer", e.to_string()))?;
            match reply {
                Reply::Progress(p) => on_progress(&p),
                Reply::Ok(v) => return Ok(v),
                Reply::Error(e) => return Err(Error::invalid(e)),
            }
        }
    }
}
