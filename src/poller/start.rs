//! The start gate: how many clusters' first polls may be in flight at once.
//!
//! Why: every poller polls at once when it starts (at start-up, and after a reload), and
//! later polls are spread over the interval ([`phase`]). For a large fleet that is
//! thousands of requests in flight together: their connections, read buffers and futures
//! made the heap's peak at start several times the heap while polling, the RSS held that
//! peak for a while, and swamped members timed many of the requests out. With the
//! gate, at most
//! [`FIRST_POLLS_AT_ONCE`] first polls run together, so a fleet that size or smaller (the
//! usual one to three clusters) still polls everything at once.
//!
//! A first poll holds its permit until it ends or for [`HOLD`], whichever comes first: a
//! poll still running after that is waiting on slow or dead members (their timeouts), which
//! costs little memory, and must not keep the rest of the fleet from starting. The wait for
//! a permit is not part of the poll: its duration (`patroni_exporter_poll_duration_seconds`)
//! and the polls counted as skipped only count from when it starts.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

/// First polls in flight at once: enough that a fleet of a few dozen clusters starts at
/// once and a thousand within seconds, few enough that the start's peak stays near the
/// memory of steady polling (docs/performance.md, "Memory at N clusters").
pub const FIRST_POLLS_AT_ONCE: usize = 64;

/// How long a first poll keeps its permit at most.
pub const HOLD: Duration = Duration::from_secs(1);

/// Shared by the pollers of a fleet: lets a bounded number of first polls through at once
/// ([`StartGate::enter`], then [`Entry::during`]).
#[derive(Debug, Clone)]
pub struct StartGate {
    permits: Arc<Semaphore>,
    hold: Duration,
}

impl Default for StartGate {
    fn default() -> StartGate {
        StartGate::new(FIRST_POLLS_AT_ONCE, HOLD)
    }
}

impl StartGate {
    /// A gate letting `at_once` polls through together, each for `hold` at most.
    pub fn new(at_once: usize, hold: Duration) -> StartGate {
        StartGate {
            permits: Arc::new(Semaphore::new(at_once.max(1))),
            hold,
        }
    }

    /// Waits for a permit: the poll may start once this returns.
    pub async fn enter(&self) -> Entry {
        Entry {
            // The semaphore is never closed: the permit is always granted, eventually.
            permit: self.permits.clone().acquire_owned().await.ok(),
            hold: self.hold,
        }
    }
}

/// A permit of the [`StartGate`], for one poll.
#[derive(Debug)]
pub struct Entry {
    permit: Option<OwnedSemaphorePermit>,
    hold: Duration,
}

impl Entry {
    /// The entry of a poller that has no gate (`status`, a single cluster): no permit.
    pub fn ungated() -> Entry {
        Entry {
            permit: None,
            hold: Duration::ZERO,
        }
    }

    /// Runs `poll`, giving the permit back when it ends or after the hold time, whichever
    /// comes first.
    pub async fn during<F: Future>(self, poll: F) -> F::Output {
        let Entry { permit, hold } = self;
        if permit.is_none() {
            return poll.await;
        }
        tokio::pin!(poll);
        tokio::select! {
            output = &mut poll => output,
            _ = tokio::time::sleep(hold) => {
                drop(permit);
                poll.await
            }
        }
    }
}

/// The poll intervals that had no poll of their own between two ticks of the poll ticker (an
/// interval with [`tokio::time::MissedTickBehavior::Skip`]), from the deadlines the two ticks
/// fired for. After a poll that overran, the first deadline it missed still fires, late (the
/// next poll starts at once), and the ticker skips the deadlines after it: so the skipped
/// intervals are the deadlines between two ticks. Counting the deadlines a poll lasted instead
/// counts one interval too many per overrun.
pub(super) fn intervals_skipped(last: Instant, tick: Instant, interval: Duration) -> u64 {
    let periods = tick.saturating_duration_since(last).as_secs_f64() / interval.as_secs_f64();
    (periods.round() as u64).saturating_sub(1)
}

/// The fraction of the interval at which the cluster in `slot` polls after its first poll:
/// the golden-ratio sequence, which spreads any number of consecutive slots evenly over [0, 1).
pub(super) fn phase(slot: usize) -> f64 {
    const GOLDEN: f64 = 0.618_033_988_749_895;
    (slot as f64 * GOLDEN).fract()
}

#[cfg(test)]
mod tests {
    /// Every interval either starts a poll or is counted as skipped, against tokio's own
    /// ticker (paused time): polls within the interval, overrunning it by a fraction, by
    /// exactly one interval (the 2 s poll interval with a 2 s timeout and a member slow in both
    /// rounds: 4 s polls, tests/e2e/links.sh), and by several.
    #[tokio::test(start_paused = true)]
    async fn every_interval_starts_a_poll_or_is_counted_skipped() {
        use std::time::Duration;
        use tokio::time::{interval_at, sleep, Instant, MissedTickBehavior};
        for (poll_ms, interval_ms, skipped_per_poll) in [
            (900, 1000, 0.0),
            (1500, 1000, 0.5),
            (4000, 2000, 1.0),
            (2100, 1000, 1.1),
            (450, 100, 3.5),
        ] {
            let interval = Duration::from_millis(interval_ms);
            let start = Instant::now();
            let mut ticker = interval_at(start, interval);
            ticker.set_missed_tick_behavior(MissedTickBehavior::Skip);
            let (mut polls, mut skipped, mut last) = (0u64, 0u64, None);
            let mut newest = start;
            while start.elapsed() < Duration::from_secs(600) {
                let tick = ticker.tick().await;
                if let Some(last) = last.replace(tick) {
                    skipped += super::intervals_skipped(last, tick, interval);
                }
                newest = tick;
                polls += 1;
                sleep(Duration::from_millis(poll_ms)).await;
            }
            let intervals = ((newest - start).as_millis() / u128::from(interval_ms)) as u64;
            let case = format!(
                "poll {poll_ms} ms every {interval_ms} ms: {polls} polls, {skipped} skipped"
            );
            assert_eq!(polls - 1 + skipped, intervals, "{case}");
            let per_poll = skipped as f64 / (polls - 1) as f64;
            assert!((per_poll - skipped_per_poll).abs() < 0.05, "{case}");
        }
    }

    #[test]
    fn phases_spread_evenly() {
        let mut phases: Vec<f64> = (0..1000).map(super::phase).collect();
        phases.sort_by(f64::total_cmp);
        let widest_gap = phases
            .windows(2)
            .map(|pair| pair[1] - pair[0])
            .fold(phases[0], f64::max);
        assert!(phases.iter().all(|p| (0.0..1.0).contains(p)));
        assert!(widest_gap < 3.0 / 1000.0, "{widest_gap}");
    }

    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Instant;

    /// A poll that counts itself in flight for `length`, and records the most seen at once.
    async fn poll(in_flight: &AtomicUsize, most: &AtomicUsize, length: Duration) {
        let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        most.fetch_max(now, Ordering::SeqCst);
        tokio::time::sleep(length).await;
        in_flight.fetch_sub(1, Ordering::SeqCst);
    }

    #[tokio::test]
    async fn at_most_so_many_first_polls_run_together() {
        let gate = StartGate::new(3, Duration::from_secs(60));
        let (in_flight, most) = (AtomicUsize::new(0), AtomicUsize::new(0));
        let started = Instant::now();
        futures::future::join_all((0..9).map(|_| async {
            gate.enter()
                .await
                .during(poll(&in_flight, &most, Duration::from_millis(50)))
                .await
        }))
        .await;
        assert_eq!(most.load(Ordering::SeqCst), 3);
        // Three rounds of three.
        assert!(started.elapsed() >= Duration::from_millis(150));
    }

    #[tokio::test]
    async fn a_fleet_within_the_limit_starts_at_once() {
        let gate = StartGate::default();
        let (in_flight, most) = (AtomicUsize::new(0), AtomicUsize::new(0));
        futures::future::join_all((0..FIRST_POLLS_AT_ONCE).map(|_| async {
            gate.enter()
                .await
                .during(poll(&in_flight, &most, Duration::from_millis(50)))
                .await
        }))
        .await;
        assert_eq!(most.load(Ordering::SeqCst), FIRST_POLLS_AT_ONCE);
    }

    #[tokio::test]
    async fn a_hanging_poll_gives_its_permit_back_after_the_hold_time() {
        let gate = StartGate::new(1, Duration::from_millis(20));
        let (in_flight, most) = (AtomicUsize::new(0), AtomicUsize::new(0));
        let started = Instant::now();
        let hanging = async {
            let entry = gate.enter().await;
            entry
                .during(poll(&in_flight, &most, Duration::from_millis(500)))
                .await
        };
        let next = async {
            // Asks after the hanging poll took the only permit.
            tokio::time::sleep(Duration::from_millis(5)).await;
            gate.enter().await.during(async { started.elapsed() }).await
        };
        let (_, next_started_after) = tokio::join!(hanging, next);
        assert!(next_started_after >= Duration::from_millis(20));
        assert!(
            next_started_after < Duration::from_millis(400),
            "{next_started_after:?}"
        );
    }
}
