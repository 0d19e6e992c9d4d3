//! The single error type of the etcd source: one variant per way an etcd request can fail,
//! each with a coarse, stable [`EtcdError::kind`] for the `kind` label of error counters.
//! Its own file, as `src/raft/error.rs`, so that the client, the parsers and the reading
//! import it from below rather than from the module above them.

use std::sync::Arc;

use crate::error_kind::{with_causes, ErrorKind};

/// Why an etcd request gave no usable answer.
///
/// Transport failures keep the client's error as their source: [`EtcdError::describe`] says
/// all its causes. Never holds a password or a token: etcd's own messages name neither.
#[derive(Debug, Clone, thiserror::Error)]
pub enum EtcdError {
    /// The TCP connection could not be made (unreachable, DNS).
    #[error("{}", ErrorKind::Connect)]
    Connect(#[source] Arc<reqwest::Error>),
    /// Nothing listens on the endpoint's port: the member's process is down.
    #[error("{}", ErrorKind::Refused)]
    ConnectionRefused(#[source] Arc<reqwest::Error>),
    /// No complete answer in time: the request's timeout or the caller's deadline.
    #[error("timeout after {0:?}")]
    Timeout(std::time::Duration),
    /// The TLS handshake failed (unknown CA, wrong name, client certificate refused).
    #[error("{}", ErrorKind::Tls)]
    Tls(#[source] Arc<reqwest::Error>),
    /// Any other transport failure (reset mid-body, malformed HTTP).
    #[error("{}", ErrorKind::Transport)]
    Transport(#[source] Arc<reqwest::Error>),
    /// The body exceeded the configured cap.
    #[error("body larger than {0} bytes")]
    BodyTooLarge(usize),
    /// The body is not JSON of the expected shape.
    #[error("{}", ErrorKind::Decode)]
    Json(#[source] Arc<serde_json::Error>),
    /// The body is JSON, but not what etcd sends (a key that is not base64, ...).
    #[error("{kind}: {0}", kind = ErrorKind::Decode)]
    Decode(String),
    /// The token was refused as invalid or expired (gRPC code 16, `etcdserver: invalid auth
    /// token`): the client authenticates again once.
    #[error("auth: {0}")]
    InvalidToken(String),
    /// Authentication is needed or failed: no token sent while auth is on (`etcdserver: user
    /// name is empty`), wrong user or password.
    #[error("auth: {0}")]
    Unauthenticated(String),
    /// The user may not make this request (gRPC code 7, `etcdserver: permission denied`):
    /// a range outside its roles, or `Status` on etcd 3.6.0–3.6.9 for anyone but root.
    #[error("forbidden: {0}")]
    Forbidden(String),
    /// Another refusal by etcd, its message kept (`etcdserver: no leader`, `etcdserver:
    /// request timed out`, gRPC code 14), or an HTTP status without etcd's error document.
    #[error("http status {status}{}", describe_refusal(*code, message))]
    Refused {
        status: u16,
        /// The gRPC code of etcd's error document, when it sent one.
        code: Option<i64>,
        message: String,
    },
    /// An endpoint URL the client will not use (it carries credentials).
    #[error("endpoint not usable: {0}")]
    Endpoint(String),
}

fn describe_refusal(code: Option<i64>, message: &str) -> String {
    match code {
        Some(code) => format!(" (code {code}): {message}"),
        None if message.is_empty() => String::new(),
        None => format!(": {message}"),
    }
}

impl From<serde_json::Error> for EtcdError {
    fn from(error: serde_json::Error) -> EtcdError {
        EtcdError::Json(Arc::new(error))
    }
}

/// Two errors are equal when they say the same: kind and message with all causes (a
/// transport error's source cannot itself be compared). For the readings' `PartialEq`.
impl PartialEq for EtcdError {
    fn eq(&self, other: &EtcdError) -> bool {
        self.kind() == other.kind() && self.describe() == other.describe()
    }
}

impl EtcdError {
    /// The kind: the `kind` label of error counters.
    pub fn kind(&self) -> ErrorKind {
        match self {
            EtcdError::Connect(_) => ErrorKind::Connect,
            EtcdError::ConnectionRefused(_) => ErrorKind::Refused,
            EtcdError::Timeout(_) => ErrorKind::Timeout,
            EtcdError::Tls(_) => ErrorKind::Tls,
            EtcdError::Transport(_) => ErrorKind::Transport,
            EtcdError::BodyTooLarge(_) => ErrorKind::BodyTooLarge,
            EtcdError::Json(_) | EtcdError::Decode(_) => ErrorKind::Decode,
            EtcdError::InvalidToken(_) | EtcdError::Unauthenticated(_) => ErrorKind::Auth,
            EtcdError::Forbidden(_) => ErrorKind::Forbidden,
            EtcdError::Refused { .. } => ErrorKind::HttpStatus,
            EtcdError::Endpoint(_) => ErrorKind::ApiUrlNotAllowed,
        }
    }

    /// The error with all its causes: what is logged and shown by `status`.
    pub fn describe(&self) -> String {
        with_causes(self)
    }
}
