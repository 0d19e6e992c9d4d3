//! Whether the last reload (SIGHUP) applied: `patroni_exporter_config_last_reload_successful`
//! and `patroni_exporter_config_last_reload_success_timestamp_seconds`, named and meant as
//! Prometheus' and Alertmanager's own `*_config_last_reload_*` families, so that the alerts
//! written for those read the same way here.
//!
//! Why they are needed: a reload that refuses the file (bad YAML, a cluster listed twice, an
//! unreadable secret) keeps every running cluster and logs the cause, so `/metrics` looks
//! the same as before; without these families a configuration that was never applied goes
//! unnoticed until the next restart refuses it.
//!
//! Why written like a cluster's samples ([`EncodedCluster`]), into the store's exporter entry
//! ([`crate::snapshot::SnapshotStore::set_exporter`]): they change only at a reload, so they
//! are encoded then, once, and a scrape assembles them with the clusters' chunks; `/probe`
//! (one cluster per target) leaves them out.

use std::time::{SystemTime, UNIX_EPOCH};

use super::families::{declare_families, FamilyWriter};
use super::labels::NoLabels;
use super::{EncodedCluster, Store, CATALOG};

declare_families! {
    SUCCESSFUL: gauge("patroni_exporter_config_last_reload_successful", "Whether the last configuration reload attempt was successful.");
    SUCCESS_TIMESTAMP_SECONDS: gauge("patroni_exporter_config_last_reload_success_timestamp_seconds", "Timestamp of the last successful configuration reload.");
}

/// The outcome of the configuration loads, kept by the one task that reloads.
#[derive(Debug)]
pub struct ReloadStatus {
    /// When the configuration in force was loaded (Unix time): at start, then at each
    /// reload that applied.
    last_success_seconds: f64,
}

impl ReloadStatus {
    /// The configuration loaded at start (a process whose configuration does not load does
    /// not start): successful, now. Written into `store`.
    pub fn loaded(store: &Store) -> ReloadStatus {
        let status = ReloadStatus {
            last_success_seconds: unix_now(),
        };
        status.write(store, true);
        status
    }

    /// Records a reload: `successful` when everything it read applied.
    pub fn record(&mut self, store: &Store, successful: bool) {
        if successful {
            self.last_success_seconds = unix_now();
        }
        self.write(store, successful);
    }

    fn write(&self, store: &Store, successful: bool) {
        let mut writer = FamilyWriter::new(&CATALOG, String::new());
        let written = writer
            .write(
                &SUCCESSFUL,
                [(NoLabels, if successful { 1.0 } else { 0.0 })],
            )
            .and_then(|()| {
                writer.write(
                    &SUCCESS_TIMESTAMP_SECONDS,
                    [(NoLabels, self.last_success_seconds)],
                )
            });
        written.expect("writing into a String cannot fail");
        let (chunks, _) = writer.finish();
        store.set_exporter(EncodedCluster {
            text: chunks.text,
            ends: chunks.ends,
        });
    }
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |since| since.as_secs_f64())
}
