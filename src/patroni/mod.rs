//! The Patroni REST source: `GET /cluster`, `GET /patroni`, `GET /history` and `GET /config`.
//!
//! This module knows HTTP and Patroni's JSON, nothing about Raft or Prometheus. The poller
//! asks it for documents and gets typed values or a [`PatroniError`] whose [`kind`] becomes
//! the `kind` label of `patroni_exporter_poll_errors_total`.
//!
//! [`kind`]: PatroniError::kind

use std::sync::Arc;

use crate::error_kind::{with_causes, ErrorKind};

mod client;
mod dynamic_config;
#[cfg(feature = "testkit")]
pub mod fake;
mod model;
mod release;

pub use client::{
    base_of, base_text, parse_failsafe, BasicAuth, ClientPool, ClientSettings, ClockOffset,
    OwnAnswer, PatroniClient,
};
pub use dynamic_config::{parse_dynamic_config, DynamicConfig, SynchronousMode};
pub use model::{
    parse_cluster, parse_compared_view, parse_history, parse_member_status, parse_timestamp,
    ApiUrl, ClusterView, ComparedMember, ComparedView, HistoryEntry, Lag, Member, MemberRole,
    MemberState, MemberStatus, MemberTags, ReplicationPeer,
};
pub use release::{Feature, PatroniRelease};

/// Why a Patroni REST request gave no usable document.
///
/// Transport failures keep the client's error as their source (its causes name the refused
/// port, the rustls alert, ...): [`PatroniError::describe`] says them all. Shared (`Arc`), so
/// that one failure can stand for the requests it made pointless.
#[derive(Debug, Clone, thiserror::Error)]
pub enum PatroniError {
    /// The TCP connection could not be made (refused, unreachable, DNS).
    #[error("{}", ErrorKind::Connect)]
    Connect(#[source] Arc<reqwest::Error>),
    /// No complete answer within the per-request timeout.
    #[error("timeout after {0:?}")]
    Timeout(std::time::Duration),
    /// The TLS handshake failed (unknown CA, wrong name, client certificate refused).
    #[error("{}", ErrorKind::Tls)]
    Tls(#[source] Arc<reqwest::Error>),
    /// The member answered with a status other than 200.
    #[error("http status {0}")]
    HttpStatus(u16),
    /// The body exceeded the configured cap.
    #[error("body larger than {0} bytes")]
    BodyTooLarge(usize),
    /// The body is not JSON of the shape Patroni sends.
    #[error("{}", ErrorKind::Decode)]
    Json(#[source] Arc<serde_json::Error>),
    /// The body is JSON, but not what Patroni sends (a bad `/history` row, too many members).
    #[error("{kind}: {0}", kind = ErrorKind::Decode)]
    Decode(String),
    /// `/cluster` names another cluster than the one configured.
    #[error("scope mismatch: expected {expected:?}, got {got:?}")]
    ScopeMismatch { expected: String, got: String },
    /// Any other transport failure (reset mid-body, malformed HTTP).
    #[error("{}", ErrorKind::Transport)]
    Transport(#[source] Arc<reqwest::Error>),
    /// A member's `api_url` points off the hosts the exporter may talk to
    /// (`--patroni.allow-api-url-hosts`), or downgrades https to http.
    #[error("api_url {0} not allowed")]
    ApiUrlNotAllowed(String),
}

impl From<serde_json::Error> for PatroniError {
    fn from(error: serde_json::Error) -> PatroniError {
        PatroniError::Json(Arc::new(error))
    }
}

impl PatroniError {
    /// The kind: the `kind` label of error counters.
    pub fn kind(&self) -> ErrorKind {
        match self {
            PatroniError::Connect(_) => ErrorKind::Connect,
            PatroniError::Timeout(_) => ErrorKind::Timeout,
            PatroniError::Tls(_) => ErrorKind::Tls,
            PatroniError::HttpStatus(_) => ErrorKind::HttpStatus,
            PatroniError::BodyTooLarge(_) => ErrorKind::BodyTooLarge,
            PatroniError::Json(_) | PatroniError::Decode(_) => ErrorKind::Decode,
            PatroniError::ScopeMismatch { .. } => ErrorKind::ScopeMismatch,
            PatroniError::Transport(_) => ErrorKind::Transport,
            PatroniError::ApiUrlNotAllowed(_) => ErrorKind::ApiUrlNotAllowed,
        }
    }

    /// The error with all its causes (`connect: error sending request for url (...): client
    /// error (Connect): tcp connect error: Connection refused (os error 111)`): what is logged
    /// and shown by `status`.
    pub fn describe(&self) -> String {
        with_causes(self)
    }
}
