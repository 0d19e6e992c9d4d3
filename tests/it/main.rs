//! The integration tests, one binary: the exporter in-process against fake peers built
//! from real captures (`exporter`: golden `/metrics` and endpoints; `security`: TLS, auth and
//! hostile peers; `status`: the `status` subcommand; `fleet_sim`: the benchmark's simulator).
//! One binary, so the shared helpers in `support` are compiled once and no helper is
//! "unused" in any of them. The real-cluster tests are in `tests/e2e`.
//!
//! `UPDATE_GOLDEN=1 cargo test --test it golden` rewrites the golden files.

mod deadline;
mod etcd;
mod exporter;
mod fleet_sim;
mod reload;
mod security;
mod status;
mod support;
