//! patroni-raft-exporter: a Prometheus exporter for PostgreSQL clusters run by Patroni on
//! its Raft DCS (pysyncobj), as Canonical's Charmed PostgreSQL deploys them.
//!
//! Why it exists: when Raft loses quorum, Patroni's `GET /cluster` keeps answering 200 with
//! a frozen, healthy-looking topology, and Patroni's own `/metrics` says nothing about Raft.
//! Only the Raft status of each node and each member's own `GET /patroni` tell the truth,
//! so the exporter asks both and puts them side by side.
//!
//! # Layout
//! Data flows one way:
//!
//! ```text
//! sources (patroni, raft) → poller → snapshot → metrics → server
//! ```
//!
//! * [`patroni`]: the REST source (`/cluster`, `/patroni`, `/history`, `/config`, `/failsafe`,
//!   `/liveness`, `/readiness`): HTTP client and pure parsers.
//! * [`raft`]: the Raft source: native pysyncobj status client, `syncobj_admin` text parser.
//! * [`etcd`]: the etcd v3 source: the JSON gateway's status, members, alarms, Patroni's keys
//!   and the leader lease, with etcd auth. The sources know nothing of each other, of
//!   Prometheus or of HTTP serving; [`http`] is the HTTP plumbing the REST and etcd sources
//!   share (TLS client, bounded bodies, transport errors).
//! * [`poller`]: one task per cluster; asks the sources and publishes a snapshot.
//! * [`snapshot`]: the immutable result of a poll, the judgements made from it (quorum, role
//!   mismatch, split views, failover readiness, standby pairing), and the store the encoder
//!   reads.
//! * [`metrics`]: writes each snapshot's samples once, when it is published (by hand, in the
//!   Prometheus text and OpenMetrics formats; metric names are the public interface), and
//!   streams a scrape's body from them.
//! * [`server`]: axum: `/metrics`, `/probe?scope=NAME` (one cluster), `/`, `/-/healthy`,
//!   `/-/ready`.
//! * [`web`]: `--web.config.file` (TLS and basic auth of the endpoint) and the bounded
//!   listener; [`tls`]: PEM certificates and (encrypted) keys for both TLS sides.
//! * [`config`], [`cli`], [`secret`]: what to watch, from flags and files; secrets stay in files;
//!   [`capped_file`]: the one bounded reader of the files an operator names.
//! * [`app`]: wires it together for the binary.
//! * [`status`]: the `status` subcommand: one poll, judged and printed, with Nagios exit codes.
//! * [`address`]: hosts and Raft node addresses in one normal form, below the configuration
//!   and the snapshot that compare them.
//! * [`allocator`]: mimalloc's settings, for the binary and the benchmark's floor.
//! * [`error_kind`]: why a request failed, as both sources, the judgements and the labels
//!   name it.

// The developers' documentation is built with `--document-private-items` (the "why" is in
// private items' docs too; `scripts/test.sh` checks it with `-D warnings`): a public item's
// doc may link to a private one, which resolves there.
#![allow(rustdoc::private_intra_doc_links)]

pub mod address;
pub mod allocator;
pub mod app;
pub mod capped_file;
pub mod cli;
pub mod config;
pub mod error_kind;
pub mod etcd;
pub mod http;
pub mod metrics;
pub mod patroni;
pub mod poller;
pub mod raft;
pub mod secret;
pub mod server;
pub mod snapshot;
pub mod status;
pub mod tls;
pub mod web;

/// The captured documents under `tests/fixtures/`, for the unit tests of every module.
#[cfg(test)]
pub(crate) fn fixture(path: &str) -> Vec<u8> {
    let path = format!("{}/tests/fixtures/{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|error| panic!("{path}: {error}"))
}

/// For the unit tests of the file loaders: `contents` written to `name` in a new temporary
/// directory, which lives (with the file) as long as the returned guard.
#[cfg(test)]
pub(crate) fn temp_file(
    name: &str,
    contents: impl AsRef<[u8]>,
) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, contents).unwrap();
    (dir, path)
}
