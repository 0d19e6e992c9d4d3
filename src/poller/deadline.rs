//! The poll's deadline: every request of a poll ends by it, whatever its own timeout says.
//!
//! Why: a poll asks in two rounds (`/cluster` and the known Raft nodes, then the members), so
//! with requests bounded only by `--poll.timeout` a member that hangs in both rounds made a
//! poll last two timeouts, and `/cluster` candidates asked in turn one timeout more each: at
//! `--poll.interval 2s` alone (a 2 s timeout) one hung member made every other interval empty
//! (4 s polls), and at the defaults two hung URLs of three made 6 s polls every 5 s. With one
//! deadline per poll, round two gets what round one left, a request still running at the
//! deadline fails as a `timeout`, and the next poll starts on time.
//!
//! The deadline is [`SHARE`] of the budget after the poll's start: the budget is the poll
//! interval (`status`: what is left of its `--timeout`), and the rest of it is for judging
//! the answers and publishing the snapshot before the next tick.

use std::future::Future;
use std::time::Duration;

use futures::FutureExt;
use tokio::time::Instant;

use crate::patroni::PatroniError;

/// The part of the budget the requests of a poll may take. The rest is for what follows the
/// deadline: the requests' timers firing, the judging and the publication. 5 % was not enough
/// on a loaded machine: at `--poll.interval 2s` with a member hung, a poll of the debug build
/// ended 2.0019 s after its start while another test run shared the two cores.
pub const SHARE: f64 = 0.9;

/// When the requests of one poll must have ended.
#[derive(Debug, Clone, Copy)]
pub(super) struct Deadline {
    started: Instant,
    at: Instant,
}

impl Deadline {
    /// The deadline of a poll starting now with `budget`.
    pub(super) fn of_poll(budget: Duration) -> Deadline {
        let started = Instant::now();
        Deadline {
            started,
            at: started + budget.mul_f64(SHARE),
        }
    }

    /// Half-way between the poll's start and its deadline: how long round one waits for a
    /// Raft answer once `/cluster` answered.
    pub(super) fn halfway(self) -> Instant {
        self.started + (self.at - self.started) / 2
    }

    /// `request`, failing as a timeout when it is still running at the deadline.
    ///
    /// A plain function over tokio's `Timeout`, not an `async fn`: an `async fn` keeps the
    /// future it is given as an argument beside the copy it awaits, so each such wrapper
    /// doubled the size of a request's future (a member's requests were 15 KB, allocated
    /// and copied every poll).
    pub(super) fn rest<T>(
        self,
        request: impl Future<Output = Result<T, PatroniError>>,
    ) -> impl Future<Output = Result<T, PatroniError>> {
        let length = self.length();
        tokio::time::timeout_at(self.at, request)
            .map(move |answer| answer.unwrap_or(Err(PatroniError::Timeout(length))))
    }

    /// `query` (a Raft node's status), or `None` when it is still running at the deadline
    /// (a plain function, as [`Deadline::rest`]).
    pub(super) fn raft<T>(self, query: impl Future<Output = T>) -> impl Future<Output = Option<T>> {
        tokio::time::timeout_at(self.at, query).map(Result::ok)
    }

    /// The instant itself, for a source that takes its deadline as one (etcd).
    pub(super) fn at(self) -> Instant {
        self.at
    }

    /// How long the poll had for its requests: the timeout a request cut at the deadline had.
    pub(super) fn length(self) -> Duration {
        self.at - self.started
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_request_running_at_the_deadline_fails_as_a_timeout() {
        let deadline = Deadline::of_poll(Duration::from_secs(2));
        assert_eq!(deadline.length(), Duration::from_millis(1800));
        assert_eq!(
            deadline.halfway() - Instant::now(),
            Duration::from_millis(900)
        );
        let hung = deadline.rest(std::future::pending::<Result<(), PatroniError>>());
        let started = Instant::now();
        assert!(matches!(hung.await, Err(PatroniError::Timeout(_))));
        assert_eq!(started.elapsed(), Duration::from_millis(1800));
        // An answer ready at the deadline is kept.
        let ready = deadline.rest(async { Ok::<_, PatroniError>(7) });
        assert!(matches!(ready.await, Ok(7)));
        let late = Deadline::of_poll(Duration::from_secs(1));
        assert_eq!(late.raft(async { 3 }).await, Some(3));
        assert_eq!(late.raft(std::future::pending::<u8>()).await, None);
    }

    /// A request whose future holds 4 KiB across its await, as a stand-in for a real one.
    pub(in crate::poller) async fn heavy_request() -> Result<u8, PatroniError> {
        let buffer = std::hint::black_box([7u8; 4096]);
        tokio::task::yield_now().await;
        Ok(buffer[4095])
    }

    #[tokio::test]
    async fn the_deadline_holds_a_request_once() {
        let alone = std::mem::size_of_val(&heavy_request());
        let deadline = Deadline::of_poll(Duration::from_secs(2));
        let bounded = deadline.rest(heavy_request());
        // The timer and the result's room beside the request, not a second request.
        assert!(
            std::mem::size_of_val(&bounded) < alone + 1024,
            "{} bytes for a request of {alone}",
            std::mem::size_of_val(&bounded)
        );
        assert!(matches!(bounded.await, Ok(7)));
        let raft = deadline.raft(heavy_request());
        assert!(std::mem::size_of_val(&raft) < alone + 1024);
        assert!(matches!(raft.await, Some(Ok(7))));
    }
}
