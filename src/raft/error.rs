//! The single error type of the Raft status client.
//!
//! Each variant maps to a coarse, stable [`RaftError::kind`] meant for a metric
//! label (`patroni_exporter_poll_errors_total{source="raft",kind="auth"}`). Messages never contain the
//! password: no variant stores it, and the command mode scrubs it from child output.

use std::time::Duration;

use crate::error_kind::ErrorKind;

/// Errors of [`super::query_status`], [`super::parse_admin_text`] and
/// [`super::run_status_command`].
#[derive(Debug, thiserror::Error)]
pub enum RaftError {
    /// The TCP connection could not be made, or was lost outside a frame.
    #[error("raft connect to {addr}: {source}")]
    Connect {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    /// The whole query (or command) did not finish in time.
    #[error("raft query to {addr} timed out after {timeout:?}")]
    Timeout { addr: String, timeout: Duration },
    /// The node closed the connection right after our first frame, before replying: this
    /// is what pysyncobj does on a wrong or missing password (or a password sent to a
    /// node that has none).
    #[error(
        "raft node {addr} closed the connection after the first frame: wrong or missing password"
    )]
    Auth { addr: String },
    /// Framing or handshake violation, oversized frame, or a peer that is not pysyncobj.
    #[error("raft protocol error: {0}")]
    Protocol(String),
    /// zlib, pickle, Fernet (HMAC, padding, base64) or status-shape error.
    #[error("raft decode error: {0}")]
    Decode(String),
    /// `--raft.command` mode failure: spawn error, exit status, output too large, or an
    /// error message printed by `syncobj_admin` (e.g. `connection lost`).
    #[error("raft status command: {0}")]
    Command(String),
}

impl RaftError {
    /// One of [`ErrorKind::Refused`], `Connect`, `Timeout`, `Auth`, `Protocol`, `Decode`,
    /// `Command`.
    ///
    /// `refused` (the node's host answered that nothing listens on the port) is told apart
    /// from the other connect errors because it is evidence about the voter, not about the
    /// path to it: the quorum verdict counts it (see `snapshot::quorum`).
    pub fn kind(&self) -> ErrorKind {
        match self {
            RaftError::Connect { source, .. }
                if source.kind() == std::io::ErrorKind::ConnectionRefused =>
            {
                ErrorKind::Refused
            }
            RaftError::Connect { .. } => ErrorKind::Connect,
            RaftError::Timeout { .. } => ErrorKind::Timeout,
            RaftError::Auth { .. } => ErrorKind::Auth,
            RaftError::Protocol(_) => ErrorKind::Protocol,
            RaftError::Decode(_) => ErrorKind::Decode,
            RaftError::Command(_) => ErrorKind::Command,
        }
    }

    pub(crate) fn decode(msg: impl Into<String>) -> RaftError {
        RaftError::Decode(msg.into())
    }

    pub(crate) fn protocol(msg: impl Into<String>) -> RaftError {
        RaftError::Protocol(msg.into())
    }
}
