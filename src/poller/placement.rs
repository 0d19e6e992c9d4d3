//! Small facts every part of a poll shares: where a member asked comes from, and the bound on
//! how many are asked.
//!
//! Why a module of their own: discovery, the requests and the recording all read them, and
//! none of those owns them; here they sit below all three, so no part imports back up from
//! the poller's `mod.rs`.

use crate::patroni;

/// More members than this in `/cluster` is not a Patroni cluster (real ones have a handful):
/// the document is refused rather than fanned out into thousands of requests.
pub const MAX_MEMBERS: usize = 128;

/// Where a member asked in this poll comes from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Placement {
    /// Listed in the `/cluster` the exporter read.
    Listed,
    /// Remembered after it left that view, at this Unix time ([`super::members`]).
    Departed(f64),
    /// A voter whose host no member has ([`super::voters::VoterMemory::unlisted_hosts`]).
    FoundVoter,
}

impl Placement {
    /// Where each member asked in a poll comes from, in the order they are asked: the
    /// `listed` first, then the departed (with the time they left), then the voters `found`.
    pub(super) fn of_poll(
        listed: usize,
        departed: &[(patroni::Member, f64)],
        found: usize,
    ) -> Vec<Placement> {
        std::iter::repeat(Placement::Listed)
            .take(listed)
            .chain(departed.iter().map(|(_, at)| Placement::Departed(*at)))
            .chain(std::iter::repeat(Placement::FoundVoter).take(found))
            .collect()
    }
}
