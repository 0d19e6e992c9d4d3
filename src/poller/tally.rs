//! What the poller counts and logs of its requests' outcomes, across polls.
//!
//! Why an owner of its own: every part of a poll (discovery, the members' records, the
//! reader's documents, the Raft nodes) settles answers, and each failure must be counted
//! every time but logged only when a target starts failing, changes its error or recovers;
//! one place keeps both the counters and the last error of each target. The counters carry
//! over a reload, so that `*_total` series do not reset.
//!
//! The last errors are of the targets of this poll only ([`Tally::end_poll`]): a member or
//! Raft node that left while failing is forgotten, so the map does not grow with churn, and
//! one that comes back failing is logged again. A request asked in rotation (a member's
//! `/config` or probes, the reader's `/history`) that was not asked in this poll keeps its
//! last outcome while its member is still polled ([`Tally::keep`]): else each of its
//! failures would be logged anew, once per rotation.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::{Display, Write};

use crate::error_kind::ErrorKind;
use crate::patroni::PatroniError;
use crate::snapshot::{Counters, Failure, Source};

/// The counters of the snapshot, and the last error kind per target.
#[derive(Debug, Default)]
pub(super) struct Tally {
    pub(super) counters: Counters,
    /// The last error kind per target, to log changes rather than every failure.
    failing: BTreeMap<String, ErrorKind>,
    /// The targets of `failing` noted or kept in this poll: what [`Tally::end_poll`] keeps.
    current: BTreeSet<String>,
    /// A target's name written out to be looked up in `failing`.
    ///
    /// Why targets are `Display` and written here only when looked up: a poll settles about
    /// a dozen requests per member (each one's outcome, or its last one kept), and `failing`
    /// is empty while every target answers. Each name was a `format!` made and dropped
    /// (about 38 allocations per poll of a 3-member cluster).
    scratch: String,
}

impl Tally {
    /// Counts and logs (under the `scope` label) the outcome of a request that may not have
    /// been made (`None`: not asked in this poll, its last outcome stands, [`Tally::keep`]);
    /// returns the document when it was read.
    pub(super) fn settle<T>(
        &mut self,
        scope: &str,
        source: Source,
        target: impl Display,
        answer: Option<Result<T, PatroniError>>,
    ) -> Option<T> {
        let Some(answer) = answer else {
            self.keep(target);
            return None;
        };
        match answer {
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
        target: impl Display,
        failure: Option<&Failure>,
    ) {
        match failure {
            Some(failure) => {
                *self
                    .counters
                    .poll_errors
                    .entry((source, failure.kind))
                    .or_default() += 1;
                let target = target.to_string();
                let previous = self.failing.insert(target.clone(), failure.kind);
                if previous != Some(failure.kind) {
                    tracing::warn!(%scope, source = source.as_str(), %target, kind = failure.kind.as_label(), error = %failure.message, "poll failed");
                }
                self.current.insert(target);
            }
            None => {
                if self.failing.is_empty() {
                    return;
                }
                write_into(&mut self.scratch, target);
                if self.failing.remove(&self.scratch).is_some() {
                    let target = &self.scratch;
                    tracing::info!(%scope, source = source.as_str(), %target, "recovered");
                }
            }
        }
    }

    /// Keeps `target`'s last outcome through this poll without a new one: a request asked in
    /// rotation, not asked in this poll, of a member still polled.
    pub(super) fn keep(&mut self, target: impl Display) {
        if self.failing.is_empty() {
            return;
        }
        write_into(&mut self.scratch, target);
        if self.failing.contains_key(&self.scratch) {
            self.current.insert(self.scratch.clone());
        }
    }

    /// Ends a poll: forgets the last errors of the targets neither noted nor kept in it.
    pub(super) fn end_poll(&mut self) {
        let current = std::mem::take(&mut self.current);
        self.failing.retain(|target, _| current.contains(target));
    }
}

/// `buffer` emptied and `target` written into it.
fn write_into(buffer: &mut String, target: impl Display) {
    buffer.clear();
    // Writing into a String cannot fail.
    let _ = write!(buffer, "{target}");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::patroni::PatroniError;

    fn refused() -> Option<Result<(), PatroniError>> {
        Some(Err(PatroniError::HttpStatus(503)))
    }

    #[test]
    fn a_target_not_asked_in_a_poll_is_forgotten_unless_kept() {
        let mut tally = Tally::default();
        for target in ["member m1", "raft 10.0.0.2:2222", "liveness of m1"] {
            tally.settle("s", Source::Member, target, refused());
        }
        tally.end_poll();
        assert_eq!(tally.failing.len(), 3);
        // m1 and its node left while failing; m2 fails; m0's liveness was not asked in this
        // poll (rotation) and is kept
        tally.settle("s", Source::Member, "member m2", refused());
        tally.settle::<()>("s", Source::History, "history", None);
        tally.keep("liveness of m1");
        tally.keep("liveness of m0");
        tally.end_poll();
        let left: Vec<&str> = tally.failing.keys().map(String::as_str).collect();
        assert_eq!(left, ["liveness of m1", "member m2"]);
        // nothing noted or kept: nothing left, however long the poller runs
        tally.end_poll();
        assert!(tally.failing.is_empty() && tally.current.is_empty());
        // every failure still counted
        assert_eq!(tally.counters.poll_errors.values().sum::<u64>(), 4);
    }

    #[test]
    fn a_target_named_in_parts_is_the_target_of_its_written_name() {
        let mut tally = Tally::default();
        let name = "m1";
        tally.settle(
            "s",
            Source::Member,
            format_args!("member {name}"),
            refused(),
        );
        tally.settle("s", Source::Probe, "liveness of m1", refused());
        tally.end_poll();
        // kept by its name written in parts, and recovered by it
        tally.keep(format_args!("liveness of {name}"));
        tally.note("s", Source::Member, format_args!("member {name}"), None);
        tally.end_poll();
        let left: Vec<&str> = tally.failing.keys().map(String::as_str).collect();
        assert_eq!(left, ["liveness of m1"]);
        // nothing failing: nothing to look up, nothing kept
        tally.note("s", Source::Probe, format_args!("liveness of {name}"), None);
        tally.keep(format_args!("liveness of {name}"));
        assert!(tally.failing.is_empty() && tally.current.is_empty());
    }
}
