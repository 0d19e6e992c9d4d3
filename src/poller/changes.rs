//! The counters of changes across polls: leader changes (Patroni's and the DCS's) and losses
//! of a confirmed DCS quorum.
//!
//! Why the poller counts them and not Prometheus: a change that comes and goes between two
//! scrapes is invisible to `changes()` over a gauge; a counter kept at every poll is not.

use crate::patroni::ClusterView;
use crate::snapshot::{Counters, DcsSnapshot, QuorumVerdict};

/// What the counting remembers from one poll to the next.
#[derive(Debug, Default)]
pub(super) struct ChangeMemory {
    leader: Option<String>,
    dcs_leader: Option<String>,
    /// The last verdict that was not `not visible`, to count losses of a confirmed quorum.
    last_decisive_verdict: Option<QuorumVerdict>,
}

impl ChangeMemory {
    /// Counts into `counters` what changed since the last poll. A `dcs` that is not watched
    /// has no verdict and no leader to judge.
    pub(super) fn count(
        &mut self,
        counters: &mut Counters,
        cluster: Option<&ClusterView>,
        dcs: &DcsSnapshot,
    ) {
        if let Some(view) = cluster {
            let leaders: Vec<&str> = view.leaders().map(|m| m.name.as_str()).collect();
            if let [leader] = leaders[..] {
                if remember_leader(&mut self.leader, leader) {
                    counters.leader_changes += 1;
                }
            }
        }
        let Some(verdict) = dcs.verdict() else {
            return;
        };
        if let Some(leader) = dcs.leader() {
            if remember_leader(&mut self.dcs_leader, leader) {
                counters.dcs_leader_changes += 1;
            }
        }
        if verdict != QuorumVerdict::NotVisible {
            if verdict == QuorumVerdict::Lost
                && self.last_decisive_verdict == Some(QuorumVerdict::Confirmed)
            {
                counters.dcs_quorum_losses += 1;
            }
            self.last_decisive_verdict = Some(verdict);
        }
    }
}

/// Remembers `leader` as the last leader seen; true when it replaces a different one (the
/// first leader seen, or the same one again, is no change).
fn remember_leader(last: &mut Option<String>, leader: &str) -> bool {
    let changed = last.as_deref().is_some_and(|previous| previous != leader);
    *last = Some(leader.to_owned());
    changed
}
