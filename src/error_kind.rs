//! The kinds of failed requests: the `kind` label of `patroni_exporter_poll_errors_total`, the
//! `down (...)` and `unreachable (...)` cells of `status`, and what the quorum verdict reads of
//! an unanswered voter.
//!
//! Why one enum below the sources: the REST, Raft and etcd sources fail in ways that share names
//! (`connect`, `timeout`, `decode`), the counters key them beside each other, and the
//! judgements (`snapshot::quorum`, `status`) must match on a kind, never on its spelling. The
//! label strings are the public interface (docs/metrics.md), so each is written once, in
//! [`ErrorKind::as_label`].

use std::cmp::Ordering;
use std::fmt;

/// Why a request gave no usable answer, as exported and shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The connection could not be made (unreachable, DNS; for REST also refused).
    Connect,
    /// A Raft node's host answered that nothing listens on the port.
    Refused,
    /// No complete answer in time.
    Timeout,
    /// The TLS handshake failed, or the peer refused the session with a TLS alert.
    Tls,
    /// A member answered with an unexpected HTTP status.
    HttpStatus,
    /// A body larger than the cap.
    BodyTooLarge,
    /// An answer that is not the document expected (JSON, zlib, pickle, Fernet, text).
    Decode,
    /// `/cluster` names another cluster than the one configured.
    ScopeMismatch,
    /// Any other transport failure (reset mid-body, malformed HTTP).
    Transport,
    /// No request sent: the `api_url` is not on a host the exporter may contact.
    ApiUrlNotAllowed,
    /// A Raft node closed the connection on the first frame: wrong or missing password.
    Auth,
    /// A Raft peer that broke the framing or the handshake.
    Protocol,
    /// `--raft.command` failed.
    Command,
    /// etcd refused the request for the user the exporter authenticates as (gRPC
    /// `PERMISSION_DENIED`): a range outside its roles, or `Status` for anyone but root on
    /// etcd 3.6.0–3.6.9.
    Forbidden,
}

impl ErrorKind {
    /// Every kind, in label order.
    pub const ALL: [ErrorKind; 14] = [
        ErrorKind::ApiUrlNotAllowed,
        ErrorKind::Auth,
        ErrorKind::BodyTooLarge,
        ErrorKind::Command,
        ErrorKind::Connect,
        ErrorKind::Decode,
        ErrorKind::Forbidden,
        ErrorKind::HttpStatus,
        ErrorKind::Protocol,
        ErrorKind::Refused,
        ErrorKind::ScopeMismatch,
        ErrorKind::Timeout,
        ErrorKind::Tls,
        ErrorKind::Transport,
    ];

    /// The short, stable name: the `kind` label value.
    pub const fn as_label(self) -> &'static str {
        match self {
            ErrorKind::Connect => "connect",
            ErrorKind::Refused => "refused",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Tls => "tls",
            ErrorKind::HttpStatus => "http_status",
            ErrorKind::BodyTooLarge => "body_too_large",
            ErrorKind::Decode => "decode",
            ErrorKind::ScopeMismatch => "scope_mismatch",
            ErrorKind::Transport => "transport",
            ErrorKind::ApiUrlNotAllowed => "api_url_not_allowed",
            ErrorKind::Auth => "auth",
            ErrorKind::Protocol => "protocol",
            ErrorKind::Command => "command",
            ErrorKind::Forbidden => "forbidden",
        }
    }

    /// The kind whose label is `label`.
    pub fn from_label(label: &str) -> Option<ErrorKind> {
        ErrorKind::ALL
            .into_iter()
            .find(|kind| kind.as_label() == label)
    }

    /// Whether a request was sent at all: false when the exporter's own policy refused to
    /// contact the host, which says nothing of the peer itself.
    pub fn request_sent(self) -> bool {
        self != ErrorKind::ApiUrlNotAllowed
    }
}

/// By label: maps keyed by kind list their samples in the label order the exposition has
/// always had.
impl Ord for ErrorKind {
    fn cmp(&self, other: &Self) -> Ordering {
        self.as_label().cmp(other.as_label())
    }
}

impl PartialOrd for ErrorKind {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_label())
    }
}

/// As its label, in `status --output json`.
impl serde::Serialize for ErrorKind {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_label())
    }
}

impl<'de> serde::Deserialize<'de> for ErrorKind {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let label = String::deserialize(deserializer)?;
        ErrorKind::from_label(&label)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown error kind {label:?}")))
    }
}

/// An error and its causes, `: `-separated, outermost first: the message logged and shown by
/// `status`. Transport errors say little at the top ("error sending request"); the cause is
/// in the chain.
pub fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_unique_sorted_and_read_back() {
        let labels: Vec<&str> = ErrorKind::ALL.iter().map(|k| k.as_label()).collect();
        let mut sorted = labels.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(labels, sorted, "ALL is in label order, each label once");
        for kind in ErrorKind::ALL {
            assert_eq!(ErrorKind::from_label(kind.as_label()), Some(kind));
            assert_eq!(kind.to_string(), kind.as_label());
            let json = serde_json::to_string(&kind).unwrap();
            assert_eq!(json, format!("\"{kind}\""));
            assert_eq!(serde_json::from_str::<ErrorKind>(&json).unwrap(), kind);
        }
        assert_eq!(ErrorKind::from_label("Connect"), None);
        assert!(serde_json::from_str::<ErrorKind>("\"nope\"").is_err());
        let mut kinds = ErrorKind::ALL;
        kinds.reverse();
        kinds.sort();
        assert_eq!(kinds, ErrorKind::ALL);
    }

    #[test]
    fn only_a_refused_api_url_sends_nothing() {
        for kind in ErrorKind::ALL {
            assert_eq!(kind.request_sent(), kind != ErrorKind::ApiUrlNotAllowed);
        }
    }

    #[test]
    fn causes_follow_the_message() {
        let io = std::io::Error::other("inner");
        let outer = anyhow::Error::new(io).context("outer");
        assert_eq!(with_causes(outer.as_ref()), "outer: inner");
    }
}
