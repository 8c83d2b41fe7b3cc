//! Turns object_store errors into cairn errors that read as one line.
//!
//! object_store's messages carry the whole request (method, URL, retry
//! counts, the response body); a user needs what failed and why: the
//! object is missing, the credential was refused, the bucket does not
//! exist, or the endpoint could not be reached.

use super::S3Config;
use cairn_core::Error;
use std::io;

/// The instance metadata service, asked for credentials when none are given.
const METADATA_ENDPOINT: &str = "169.254.169.254";

/// The deepest message in an error's source chain, on one line.
pub(super) fn innermost(e: &(dyn std::error::Error + 'static)) -> String {
    let mut last = e;
    while let Some(next) = last.source() {
        last = next;
    }
    one_line(&last.to_string())
}

fn one_line(s: &str) -> String {
    let joined = s.split_whitespace().collect::<Vec<_>>().join(" ");
    match joined.char_indices().nth(300) {
        Some((i, _)) => format!("{}…", &joined[..i]),
        None => joined,
    }
}

/// Every message of an error's source chain, joined.
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut next = e.source();
    while let Some(err) = next {
        out.push_str(": ");
        out.push_str(&err.to_string());
        next = err.source();
    }
    out
}

/// The HTTP status of a failed request and the text around it, if the
/// store answered (object_store keeps its retry error private, so the
/// status is read from the message it writes: "status code: 404 ...").
fn response(e: &object_store::Error) -> (Option<u16>, String) {
    let text = chain(e);
    let status = text.find("status code: ").and_then(|at| {
        let digits = text.get(at + 13..at + 16)?;
        digits.parse().ok()
    });
    (status, text)
}

/// `Code: Message` of an S3 error document in `text`.
fn s3_error(text: &str) -> Option<String> {
    let element = |name: &str| {
        let open = format!("<{name}>");
        let start = text.find(&open)? + open.len();
        let len = text[start..].find("</")?;
        Some(one_line(&text[start..start + len]))
    };
    let code = element("Code")?;
    Some(match element("Message") {
        Some(message) => format!("{code}: {message}"),
        None => code,
    })
}

/// Whether a write was refused by a conflict that a retry resolves,
/// rather than by an object already in place:
/// * `ExistingObjectIsDirectory`: a server that keeps objects as files
///   (VersityGW's POSIX backend) answers so when it creates the object's
///   parent directory while a delete of that directory's last object
///   removes it. cairn never stores an object under another object's key
///   followed by `/`, so for cairn's keys the answer is only that race.
/// * `ConditionalRequestConflict` and `OperationAborted`: AWS's answers
///   to a conditional write that raced another write to the same key
///   still in flight; AWS documents them as retryable.
///
/// object_store reports every 409 as `AlreadyExists`, so the body decides.
pub(super) fn is_transient_conflict(e: &object_store::Error) -> bool {
    let (status, body) = response(e);
    status == Some(409)
        && [
            "ExistingObjectIsDirectory",
            "ConditionalRequestConflict",
            "OperationAborted",
        ]
        .iter()
        .any(|code| body.contains(&format!("<Code>{code}</Code>")))
}

/// Whether a request failed in transit after it may have reached the
/// store: its connection was closed or reset before the answer came (a
/// server closing a kept-alive connection as the request went out, a
/// restart), or the attempt timed out. object_store retries these only
/// for requests it takes to be idempotent, which a conditional create is
/// not, so the create comes back with one (`S3Backend::put_create` retries
/// it; see there why that is safe).
pub(super) fn is_interrupted(e: &object_store::Error) -> bool {
    use object_store::client::{HttpError, HttpErrorKind};
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = next {
        if let Some(http) = err.downcast_ref::<HttpError>() {
            return matches!(
                http.kind(),
                HttpErrorKind::Interrupted | HttpErrorKind::Timeout
            );
        }
        next = err.source();
    }
    false
}

pub(super) fn map(config: &S3Config, doing: &str, key: &str, e: object_store::Error) -> Error {
    let repo = config.describe();
    let (status, body) = response(&e);
    if body.contains("NoSuchBucket") {
        return Error::invalid(format!("{repo}: bucket {:?} does not exist", config.bucket));
    }
    if body.contains(METADATA_ENDPOINT) {
        return Error::invalid(format!(
            "{repo}: no S3 credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY \
             (the instance metadata service gave none)"
        ));
    }
    let what = if key.is_empty() {
        repo.clone()
    } else {
        format!("{key} in {repo}")
    };
    match e {
        object_store::Error::NotFound { .. } => return Error::NotFound(what),
        object_store::Error::Unauthenticated { .. }
        | object_store::Error::PermissionDenied { .. } => {
            return Error::io(
                format!("{doing} {what}"),
                io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    format!(
                        "access denied (HTTP {}): check the access key and secret",
                        status.unwrap_or(403)
                    ),
                ),
            );
        }
        _ => {}
    }
    if status.is_some_and(|s| s == 400 || s == 403)
        && (body.contains("Signature") || body.contains("InvalidAccessKeyId"))
    {
        return Error::io(
            format!("{doing} {what}"),
            io::Error::new(
                io::ErrorKind::PermissionDenied,
                "request signature refused: check the secret key and region",
            ),
        );
    }
    let reason = match status {
        Some(code) => match s3_error(&body) {
            Some(said) => format!("the store answered HTTP {code}: {said}"),
            None => format!("the store answered HTTP {code}: {}", innermost(&e)),
        },
        None => format!("cannot reach the store: {}", innermost(&e)),
    };
    let kind = match status {
        None => io::ErrorKind::ConnectionRefused,
        Some(_) => io::ErrorKind::Other,
    };
    Error::io(format!("{doing} {what}"), io::Error::new(kind, reason))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s3_error_documents() {
        let body = "Server returned non-2xx status code: 400 Bad Request: <?xml version=\"1.0\"?>\
                    <Error><Code>InvalidBucketName</Code><Message>The specified bucket \
                    is not valid.</Message><RequestId>X</RequestId></Error>";
        assert_eq!(
            s3_error(body).as_deref(),
            Some("InvalidBucketName: The specified bucket is not valid.")
        );
        assert_eq!(
            s3_error("<Error><Code>SlowDown</Code></Error>").as_deref(),
            Some("SlowDown")
        );
        assert_eq!(s3_error("connection reset"), None);
    }

    #[test]
    fn transient_conflicts_are_told_from_existing_objects() {
        let status = |code: u16, body: &str| object_store::Error::Generic {
            store: "S3",
            source: format!("Server returned non-2xx status code: {code} Conflict: {body}").into(),
        };
        let directory = "<Error><Code>ExistingObjectIsDirectory</Code></Error>";
        assert!(is_transient_conflict(&status(409, directory)));
        let racing = "<Error><Code>ConditionalRequestConflict</Code></Error>";
        assert!(is_transient_conflict(&status(409, racing)));
        let exists = "<Error><Code>PreconditionFailed</Code></Error>";
        assert!(!is_transient_conflict(&status(412, exists)));
        assert!(!is_transient_conflict(&status(
            409,
            "<Error><Code>BucketNotEmpty</Code></Error>"
        )));
        assert!(!is_transient_conflict(&status(503, directory)));
    }
}
