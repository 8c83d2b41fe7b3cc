//! A fault-injecting HTTP proxy in front of a real S3 server, for tests
//! (feature `test-support`): the server stays real, only the network
//! between it and cairn misbehaves on command.
//!
//! The proxy listens on 127.0.0.1 and takes one request per client
//! connection: it reads the request's head, asks the test's [`Rule`] what
//! to do with it, reads its `Content-Length` body (how object_store sends
//! every request) unless the rule resets the connection first, and then
//! forwards it to the server with `Connection: close`, relaying the answer
//! until the server closes; or answers a 5xx itself; or drops the
//! connection; or holds it open unanswered (a kill point: the test kills
//! the client while the request is in flight). The
//! client sees every answer with `Connection: close`, so it never reuses a
//! connection the proxy is about to drop. Signatures stay valid: the head
//! is forwarded unchanged apart from its `Connection` header, which SigV4
//! does not sign.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// One request as the proxy saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// 0 for the first request through the proxy, counting every request.
    pub seq: u64,
    pub method: String,
    /// The request target: `/BUCKET/PREFIX/KEY?QUERY` (path-style).
    pub target: String,
}

impl Request {
    /// Whether this is a `method` request for a key of the repository
    /// directory `dir` (`containers`, `index`, `snapshots`, ...).
    pub fn is(&self, method: &str, dir: &str) -> bool {
        self.method == method && self.target.contains(&format!("/{dir}/"))
    }
}

/// What the proxy does with a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Forward it and relay the answer.
    Forward,
    /// Answer this status (a 5xx, or 409 as a lost directory race) without
    /// forwarding: the store never saw it.
    Fail(u16),
    /// Forward it, discard the server's answer and answer this status: the
    /// store applied a request whose client is told it failed.
    FailAfterApply(u16),
    /// Read the whole request, then close the connection without an
    /// answer.
    Drop,
    /// Forward it, let the server's answer go, and reset the connection
    /// (a TCP RST, not an orderly close): the store applied a request whose
    /// client sees its connection reset before the answer, as when a
    /// server drops a kept-alive connection the request went out on.
    ForwardThenReset,
    /// Close the connection as soon as the request's head is read, its body
    /// unread: the client, still sending, has its writes fail (EPIPE) and
    /// its connection reset.
    Reset,
    /// Keep the connection open and never forward or answer it.
    Hold,
    /// Forward it, then keep the connection open without the answer.
    ForwardThenHold,
}

/// Decides each request's fate; called in arrival order, one at a time.
pub type Rule = Box<dyn FnMut(&Request) -> Action + Send>;

struct Shared {
    upstream: SocketAddr,
    rule: Mutex<Rule>,
    seq: AtomicU64,
    log: Mutex<Vec<(Request, Action)>>,
    /// Connections kept open by `Hold` and `ForwardThenHold`.
    held: Mutex<Vec<TcpStream>>,
    held_changed: Condvar,
    stop: AtomicBool,
}

/// A running proxy; stops (and drops held connections) when dropped.
pub struct FaultProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    acceptor: Option<thread::JoinHandle<()>>,
}

impl FaultProxy {
    /// Starts a proxy to the server at `endpoint` (`http://HOST:PORT`) that
    /// forwards everything until [`FaultProxy::set_rule`] says otherwise.
    pub fn start(endpoint: &str) -> FaultProxy {
        let hostport = endpoint
            .strip_prefix("http://")
            .unwrap_or_else(|| panic!("the fault proxy speaks plain http, not {endpoint}"))
            .trim_end_matches('/');
        let upstream = std::net::ToSocketAddrs::to_socket_addrs(hostport)
            .ok()
            .and_then(|mut a| a.next())
            .unwrap_or_else(|| panic!("cannot resolve {hostport}"));
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding the fault proxy");
        let addr = listener.local_addr().expect("the fault proxy's address");
        let shared = Arc::new(Shared {
            upstream,
            rule: Mutex::new(Box::new(|_: &Request| Action::Forward)),
            seq: AtomicU64::new(0),
            log: Mutex::new(Vec::new()),
            held: Mutex::new(Vec::new()),
            held_changed: Condvar::new(),
            stop: AtomicBool::new(false),
        });
        let accepting = Arc::clone(&shared);
        let acceptor = thread::spawn(move || {
            for client in listener.incoming() {
                if accepting.stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(client) = client else { continue };
                let shared = Arc::clone(&accepting);
                thread::spawn(move || {
                    // A client that hung up mid-request is no test failure.
                    let _ = serve(&shared, client);
                });
            }
        });
        FaultProxy {
            addr,
            shared,
            acceptor: Some(acceptor),
        }
    }

    /// `http://127.0.0.1:PORT`, to use in place of the server's endpoint.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Replaces the rule; requests from now on follow it.
    pub fn set_rule(&self, rule: impl FnMut(&Request) -> Action + Send + 'static) {
        *self.shared.rule.lock().unwrap() = Box::new(rule);
    }

    /// Forwards everything again.
    pub fn heal(&self) {
        self.set_rule(|_| Action::Forward);
    }

    /// Every request so far with what was done to it, in arrival order.
    pub fn log(&self) -> Vec<(Request, Action)> {
        self.shared.log.lock().unwrap().clone()
    }

    /// How many requests got something other than `Forward`.
    pub fn faults(&self) -> usize {
        self.log()
            .iter()
            .filter(|(_, a)| *a != Action::Forward)
            .count()
    }

    /// Waits until a connection is held (`Hold`, `ForwardThenHold`);
    /// false when `timeout` passes first.
    pub fn wait_for_held(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut held = self.shared.held.lock().unwrap();
        while held.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            held = self.shared.held_changed.wait_timeout(held, left).unwrap().0;
        }
        true
    }

    /// Closes the held connections.
    pub fn release_held(&self) {
        for c in self.shared.held.lock().unwrap().drain(..) {
            let _ = c.shutdown(Shutdown::Both);
        }
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.release_held();
        let _ = TcpStream::connect(self.addr); // wakes the acceptor
        if let Some(t) = self.acceptor.take() {
            let _ = t.join();
        }
    }
}

/// Reads one request head: the request line and the header lines.
fn read_head(reader: &mut impl BufRead) -> io::Result<Option<(String, Vec<String>)>> {
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Ok(None);
    }
    let request_line = line.trim_end().to_owned();
    let mut headers = Vec::new();
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        let header = line.trim_end();
        if header.is_empty() {
            break;
        }
        headers.push(header.to_owned());
    }
    Ok(Some((request_line, headers)))
}

fn header_value<'h>(headers: &'h [String], name: &str) -> Option<&'h str> {
    headers.iter().find_map(|h| {
        let (n, v) = h.split_once(':')?;
        n.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

fn serve(shared: &Shared, client: TcpStream) -> io::Result<()> {
    let mut reader = BufReader::new(client.try_clone()?);
    let Some((request_line, headers)) = read_head(&mut reader)? else {
        return Ok(());
    };
    if header_value(&headers, "transfer-encoding").is_some() {
        // object_store sends bodies with a length; a chunked one would need
        // a decoder this proxy does not have.
        panic!("the fault proxy does not take chunked requests: {request_line}");
    }
    let length: usize = header_value(&headers, "content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);

    let mut parts = request_line.split_whitespace();
    let request = Request {
        seq: shared.seq.fetch_add(1, Ordering::SeqCst),
        method: parts.next().unwrap_or("").to_owned(),
        target: parts.next().unwrap_or("").to_owned(),
    };
    let action = {
        let mut rule = shared.rule.lock().unwrap();
        let action = (rule)(&request);
        shared.log.lock().unwrap().push((request, action));
        action
    };
    if action == Action::Reset {
        // Closed with the body unread: the kernel answers the client's
        // next segments with a reset.
        return Ok(());
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    let mut client = client;
    match action {
        Action::Reset => unreachable!("handled above"),
        Action::Forward => {
            let mut upstream = forward(shared, &request_line, &headers, &body)?;
            io::copy(&mut upstream, &mut client)?;
        }
        Action::Fail(status) => answer(&mut client, status)?,
        Action::FailAfterApply(status) => {
            apply(shared, &request_line, &headers, &body)?;
            answer(&mut client, status)?;
        }
        Action::Drop => {}
        Action::ForwardThenReset => {
            apply(shared, &request_line, &headers, &body)?;
            // Closing with a zero linger time sends a reset.
            rustix::net::sockopt::set_socket_linger(&client, Some(Duration::ZERO))?;
            return Ok(());
        }
        Action::Hold | Action::ForwardThenHold => {
            if action == Action::ForwardThenHold {
                apply(shared, &request_line, &headers, &body)?;
            }
            shared.held.lock().unwrap().push(client);
            shared.held_changed.notify_all();
            return Ok(());
        }
    }
    let _ = client.shutdown(Shutdown::Both);
    Ok(())
}

/// Sends the request to the server on a new connection, asking it to close
/// the connection after its answer.
fn forward(
    shared: &Shared,
    request_line: &str,
    headers: &[String],
    body: &[u8],
) -> io::Result<TcpStream> {
    let mut upstream = TcpStream::connect(shared.upstream)?;
    let mut head = format!("{request_line}\r\n");
    for h in headers {
        let name = h.split(':').next().unwrap_or("").trim();
        if !name.eq_ignore_ascii_case("connection") {
            head.push_str(h);
            head.push_str("\r\n");
        }
    }
    head.push_str("Connection: close\r\n\r\n");
    upstream.write_all(head.as_bytes())?;
    upstream.write_all(body)?;
    Ok(upstream)
}

/// Has the server carry out the request, and lets its answer go: the
/// client never learns that the request took effect.
fn apply(shared: &Shared, request_line: &str, headers: &[String], body: &[u8]) -> io::Result<()> {
    let mut upstream = forward(shared, request_line, headers, body)?;
    io::copy(&mut upstream, &mut io::sink())?;
    Ok(())
}

/// An S3-style error answer.
fn answer(client: &mut TcpStream, status: u16) -> io::Result<()> {
    let (reason, code) = match status {
        500 => ("Internal Server Error", "InternalError"),
        503 => ("Service Unavailable", "SlowDown"),
        // What a POSIX-backed server (VersityGW) answers when a delete
        // removes the object's parent directory during the write.
        409 => ("Conflict", "ExistingObjectIsDirectory"),
        _ => ("Error", "InternalError"),
    };
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{code}</Code>\
         <Message>injected by the test's fault proxy</Message></Error>"
    );
    write!(
        client,
        "HTTP/1.1 {status} {reason}\r\nContent-Type: application/xml\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    client.flush()
}
