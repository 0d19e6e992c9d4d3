//! The Patroni REST source: `GET /cluster`, `GET /patroni`, `GET /history` and `GET /config`.
//!
//! This module knows HTTP and Patroni's JSON, nothing about Raft or Prometheus. The poller
//! asks it for documents and gets typed values or a [`PatroniError`] whose [`kind`] becomes
//! the `kind` label of `patroni_exporter_poll_errors_total`.
//!
//! [`kind`]: PatroniError::kind

mod client;
mod dynamic_config;
#[cfg(feature = "testkit")]
pub mod fake;
mod model;

pub use client::{
    base_of, parse_failsafe, BasicAuth, ClientPool, ClientSettings, ClockOffset, OwnAnswer,
    PatroniClient,
};
pub use dynamic_config::{parse_dynamic_config, DynamicConfig, SynchronousMode};
pub use model::{
    parse_cluster, parse_history, parse_member_status, parse_timestamp, ApiUrl, ClusterView,
    HistoryEntry, Lag, Member, MemberRole, MemberState, MemberStatus, MemberTags, ReplicationPeer,
};

/// Why a Patroni REST request gave no usable document.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PatroniError {
    /// The TCP connection could not be made (refused, unreachable, DNS).
    #[error("connect: {0}")]
    Connect(String),
    /// No complete answer within the per-request timeout.
    #[error("timeout after {0:?}")]
    Timeout(std::time::Duration),
    /// The TLS handshake failed (unknown CA, wrong name, client certificate refused).
    #[error("tls: {0}")]
    Tls(String),
    /// The member answered with a status other than 200.
    #[error("http status {0}")]
    HttpStatus(u16),
    /// The body exceeded the configured cap.
    #[error("body larger than {0} bytes")]
    BodyTooLarge(usize),
    /// The body is not the JSON Patroni sends.
    #[error("decode: {0}")]
    Decode(String),
    /// `/cluster` names another cluster than the one configured.
    #[error("scope mismatch: expected {expected:?}, got {got:?}")]
    ScopeMismatch { expected: String, got: String },
    /// Any other transport failure (reset mid-body, malformed HTTP).
    #[error("transport: {0}")]
    Transport(String),
    /// A member's `api_url` points off the hosts the exporter may talk to
    /// (`--patroni.allow-api-url-hosts`), or downgrades https to http.
    #[error("api_url {0} not allowed")]
    ApiUrlNotAllowed(String),
}

impl PatroniError {
    /// The short, stable name used as the `kind` label of error counters.
    pub fn kind(&self) -> &'static str {
        match self {
            PatroniError::Connect(_) => "connect",
            PatroniError::Timeout(_) => "timeout",
            PatroniError::Tls(_) => "tls",
            PatroniError::HttpStatus(_) => "http_status",
            PatroniError::BodyTooLarge(_) => "body_too_large",
            PatroniError::Decode(_) => "decode",
            PatroniError::ScopeMismatch { .. } => "scope_mismatch",
            PatroniError::Transport(_) => "transport",
            PatroniError::ApiUrlNotAllowed(_) => PatroniError::API_URL_NOT_ALLOWED,
        }
    }

    /// The kind of [`PatroniError::ApiUrlNotAllowed`]: the one failure for which no request
    /// was sent (the exporter's own host policy refused it), so it says nothing of the member.
    pub const API_URL_NOT_ALLOWED: &'static str = "api_url_not_allowed";
}
