//! What the poller counts and logs of its requests' outcomes, across polls.
//!
//! Why an owner of its own: every part of a poll (discovery, the members' records, the
//! reader's documents, the Raft nodes) settles answers, and each failure must be counted
//! every time but logged only when a target starts failing, changes its error or recovers;
//! one place keeps both the counters and the last error of each target. The counters carry
//! over a reload, so that `*_total` series do not reset.

use std::collections::BTreeMap;

use crate::error_kind::ErrorKind;
use crate::patroni::PatroniError;
use crate::snapshot::{Counters, Failure, Source};

/// The counters of the snapshot, and the last error kind per target.
#[derive(Debug, Default)]
pub(super) struct Tally {
    pub(super) counters: Counters,
    /// The last error kind per target, to log changes rather than every failure.
    failing: BTreeMap<String, ErrorKind>,
}

impl Tally {
    /// Counts and logs (under the `scope` label) the outcome of a request that may not have
    /// been made (`None`); returns the document when it was read.
    pub(super) fn settle<T>(
        &mut self,
        scope: &str,
        source: Source,
        target: &str,
        answer: Option<Result<T, PatroniError>>,
    ) -> Option<T> {
        match answer? {
            Ok(document) => {
                self.note(scope, source, target, None);
                Some(document)
            }
            Err(error) => {
                self.note(scope, source, target, Some(&Failure::from(&error)));
                None
            }
        }
    }

    /// Counts a failure and logs when a target starts failing, changes its error or recovers.
    pub(super) fn note(
        &mut self,
        scope: &str,
        source: Source,
        target: &str,
        failure: Option<&Failure>,
    ) {
        match failure {
            Some(failure) => {
                *self
                    .counters
                    .poll_errors
                    .entry((source, failure.kind))
                    .or_default() += 1;
                let previous = self.failing.insert(target.to_owned(), failure.kind);
                if previous != Some(failure.kind) {
                    tracing::warn!(%scope, source = source.as_str(), %target, kind = failure.kind.as_label(), error = %failure.message, "poll failed");
                }
            }
            None => {
                if self.failing.remove(target).is_some() {
                    tracing::info!(%scope, source = source.as_str(), %target, "recovered");
                }
            }
        }
    }
}
