//! The store `/metrics` reads from: the latest snapshot of every cluster, with its encoding.
//!
//! Why a slot per cluster, handed to its poller ([`Publisher`]): a poll's result goes into
//! that cluster's slot and nowhere else, so publishing takes no lock that a scrape or another
//! poller waits on and looks nothing up. The slots are made when the fleet is built or
//! reloaded ([`SnapshotStore::arrange`]), keyed by the cluster's one identity
//! ([`ClusterId`]): a cluster that stays across a reload keeps its slot, its series and (in
//! its poller) its counters.
//!
//! Why the encoding is a type parameter ([`Encoding`]): the samples are encoded once, at
//! publication, and kept with the snapshot, but the encoding is the metrics layer's, which
//! depends on this one. The store names only what it needs of it, so that data and imports
//! flow one way (snapshot → metrics) and `metrics::Store` fixes the parameter.
//!
//! Why the snapshot itself is not kept, only its encoding and what the store reads of it
//! ([`Kept`]: its scope, and its leader's position for a standby cluster paired with it):
//! nothing reads a published snapshot but those two, and a snapshot keeps every answer of the
//! poll parsed: about 11 KB for a 3-member cluster, a fifth of the exporter's heap at 1000
//! clusters (docs/bench/profile-n1000.md).

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, RwLock, RwLockReadGuard};

use super::cluster::ClusterSnapshot;
use super::model::{SourcePosition, StandbySource};

/// What is made of a snapshot once, when it is published (the metrics layer's samples), so
/// that readers only assemble.
pub trait Encoding: Send + Sync + 'static {
    fn encode(snapshot: &Arc<ClusterSnapshot>) -> Self;
}

/// The one identity of a watched cluster across the fleet, the store and `/probe`: its
/// configured name (the scope, else the first REST URL). Loading refuses two clusters with
/// the same name, so an id names one cluster.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClusterId(Arc<str>);

impl ClusterId {
    pub fn new(name: impl Into<Arc<str>>) -> ClusterId {
        ClusterId(name.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ClusterId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What the store reads of a published snapshot: its `scope` label (`/probe` finds a
/// cluster by it) and, for a standby cluster paired with it, its leader's position.
#[derive(Debug)]
struct Kept {
    scope: String,
    position: Option<SourcePosition>,
}

impl Kept {
    fn of(snapshot: &ClusterSnapshot) -> Kept {
        Kept {
            scope: snapshot.scope.clone(),
            position: SourcePosition::of(snapshot),
        }
    }
}

/// A published snapshot: its samples, encoded once at publication, and what the store reads
/// of it.
#[derive(Debug)]
struct Published<E> {
    kept: Arc<Kept>,
    encoded: Arc<E>,
}

// By hand: a derived Clone would ask `E: Clone`, and only the `Arc`s are cloned.
impl<E> Clone for Published<E> {
    fn clone(&self) -> Self {
        Published {
            kept: self.kept.clone(),
            encoded: self.encoded.clone(),
        }
    }
}

/// One cluster's place in the store: what its poller published last. Its lock is the
/// cluster's own, held only to swap or clone two `Arc`s.
#[derive(Debug)]
struct Slot<E> {
    published: RwLock<Option<Published<E>>>,
}

impl<E> Slot<E> {
    fn empty() -> Arc<Slot<E>> {
        Arc::new(Slot {
            published: RwLock::new(None),
        })
    }

    fn published(&self) -> Option<Published<E>> {
        // A poisoned lock only means a holder panicked; the data (Arcs) is still whole.
        self.published
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    fn replace(&self, published: Published<E>) {
        let previous = self
            .published
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .replace(published);
        // The previous snapshot is dropped after the lock is released.
        drop(previous);
    }
}

/// The slots in configuration order, and where each id's slot is.
#[derive(Debug)]
struct Roster<E> {
    slots: Vec<(ClusterId, Arc<Slot<E>>)>,
    by_id: HashMap<ClusterId, Arc<Slot<E>>>,
}

impl<E> Roster<E> {
    fn new(slots: Vec<(ClusterId, Arc<Slot<E>>)>) -> Roster<E> {
        let by_id = slots
            .iter()
            .map(|(id, slot)| (id.clone(), slot.clone()))
            .collect();
        Roster { slots, by_id }
    }
}

/// The latest snapshot of every configured cluster, one slot per cluster, in configuration
/// order.
///
/// The list of slots changes only on a reload ([`Self::arrange`]); a scrape clones it (an
/// `Arc`) and reads each slot without holding the list. Each snapshot is encoded when it is
/// published, on the publisher's thread, and kept with it (`E`, the metrics layer's
/// encoding): a scrape only assembles.
#[derive(Debug)]
pub struct SnapshotStore<E> {
    roster: RwLock<Arc<Roster<E>>>,
    /// The exporter's own samples (whether its last reload applied), served before the
    /// clusters' on `/metrics`; replaced whole, like a slot.
    exporter: RwLock<Option<Arc<E>>>,
}

impl<E> Default for SnapshotStore<E> {
    /// A store without slots: [`SnapshotStore::arrange`] makes them.
    fn default() -> Self {
        SnapshotStore {
            roster: RwLock::new(Arc::new(Roster::new(Vec::new()))),
            exporter: RwLock::new(None),
        }
    }
}

/// Where one cluster's poller publishes: its slot, and for a standby cluster the slot of its
/// source (the pairing of [`super::standby`]). Made once per run of the poller
/// ([`SnapshotStore::publisher`]), so publishing looks nothing up.
pub struct Publisher<E> {
    slot: Arc<Slot<E>>,
    /// The source's scope (`standby_of`) and its slot, when the store has one.
    source: Option<(String, Option<Arc<Slot<E>>>)>,
}

impl<E: Encoding> Publisher<E> {
    /// Publishes `snapshot` as the cluster's latest, encoded once; for a standby cluster,
    /// with the source's leader position from the source's latest published snapshot.
    pub fn publish(&self, mut snapshot: ClusterSnapshot) {
        if let Some((scope, slot)) = &self.source {
            let source = slot.as_ref().and_then(|slot| slot.published());
            snapshot.standby_source = Some(StandbySource::at(
                scope,
                source.and_then(|published| published.kept.position.clone()),
            ));
        }
        self.slot.replace(encode(snapshot));
    }
}

/// Encodes `snapshot` and keeps what the store reads of it; the snapshot goes.
fn encode<E: Encoding>(snapshot: ClusterSnapshot) -> Published<E> {
    let snapshot = Arc::new(snapshot);
    let encoded = Arc::new(E::encode(&snapshot));
    Published {
        kept: Arc::new(Kept::of(&snapshot)),
        encoded,
    }
}

impl<E: Encoding> SnapshotStore<E> {
    fn roster(&self) -> Arc<Roster<E>> {
        // A poisoned lock only means a holder panicked; the data (Arcs) is still whole.
        let roster: RwLockReadGuard<'_, Arc<Roster<E>>> = self
            .roster
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        roster.clone()
    }

    /// The slots after the fleet is built or reloaded, by id in configuration order: an id
    /// the store had keeps its slot (that cluster's series stay, and its poller goes on
    /// publishing into it), a new id gets an empty slot, and the slots of ids not listed go
    /// with their series.
    pub fn arrange(&self, ids: &[ClusterId]) {
        let current = self.roster();
        let slots = ids
            .iter()
            .map(|id| {
                let slot = current.by_id.get(id).cloned().unwrap_or_else(Slot::empty);
                (id.clone(), slot)
            })
            .collect();
        let old = std::mem::replace(
            &mut *self
                .roster
                .write()
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
            Arc::new(Roster::new(slots)),
        );
        drop(old);
    }

    /// Where the poller of cluster `id` publishes, paired with the slot of `standby_of` (the
    /// source's scope, which is its id); `None` when the store has no slot for `id` (a reload
    /// removed the cluster).
    pub fn publisher(&self, id: &ClusterId, standby_of: Option<&str>) -> Option<Publisher<E>> {
        let roster = self.roster();
        let slot = roster.by_id.get(id)?.clone();
        let source = standby_of.map(|scope| {
            let source = roster.by_id.get(&ClusterId::new(scope)).cloned();
            (scope.to_owned(), source)
        });
        Some(Publisher { slot, source })
    }

    /// The encoded samples of the cluster `/probe?scope=NAME` names: the cluster with that
    /// id (its configured scope), else the one whose published `scope` label is `scope` (a
    /// cluster configured without a scope is named by its first URL until Patroni names it).
    pub fn encoded_by_scope(&self, scope: &str) -> Option<Arc<E>> {
        let by_id = self
            .roster()
            .by_id
            .get(&ClusterId::new(scope))
            .and_then(|slot| slot.published());
        by_id
            .or_else(|| self.published_by_scope(scope))
            .map(|published| published.encoded)
    }

    /// The published snapshot whose `scope` label is `scope`, if any.
    fn published_by_scope(&self, scope: &str) -> Option<Published<E>> {
        self.all_published()
            .into_iter()
            .find(|published| published.kept.scope == scope)
    }

    /// What every slot published, in configuration order; slots not yet published are skipped.
    fn all_published(&self) -> Vec<Published<E>> {
        self.roster()
            .slots
            .iter()
            .filter_map(|(_, slot)| slot.published())
            .collect()
    }

    /// Replaces the exporter's own samples (encoded by the metrics layer, as a cluster's).
    pub fn set_exporter(&self, encoded: E) {
        let previous = self
            .exporter
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .replace(Arc::new(encoded));
        drop(previous);
    }

    /// What `/metrics` serves: the exporter's own samples, then those of the current
    /// snapshots in configuration order; clusters not yet polled are skipped.
    pub fn current_encoded(&self) -> Vec<Arc<E>> {
        let exporter = self
            .exporter
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone();
        exporter
            .into_iter()
            .chain(
                self.all_published()
                    .into_iter()
                    .map(|published| published.encoded),
            )
            .collect()
    }

    /// True once every cluster has been polled at least once.
    pub fn all_polled(&self) -> bool {
        self.roster()
            .slots
            .iter()
            .all(|(_, slot)| slot.published().is_some())
    }
}

/// The store as the tests drive it: slots named by their position (`0`, `1`, ...), filled
/// without a poller.
#[cfg(any(test, feature = "testkit"))]
impl<E: Encoding> SnapshotStore<E> {
    /// The id of the slot at position `index` of a store made by [`Self::new`].
    pub fn numbered(index: usize) -> ClusterId {
        ClusterId::new(index.to_string())
    }

    /// A store of `clusters` empty slots, with the ids [`Self::numbered`] `0..clusters`.
    pub fn new(clusters: usize) -> SnapshotStore<E> {
        let store = SnapshotStore::default();
        store.reset(clusters);
        store
    }

    /// Empties the store into `clusters` slots with the ids [`Self::numbered`] `0..clusters`.
    pub fn reset(&self, clusters: usize) {
        let slots = (0..clusters)
            .map(|index| (Self::numbered(index), Slot::empty()))
            .collect();
        *self
            .roster
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Arc::new(Roster::new(slots));
    }

    /// The publisher of the slot numbered `index`, for a poller that runs on its own (not a
    /// standby cluster: the tests pair those with [`Self::publish_paired`]).
    pub fn numbered_publisher(&self, index: usize) -> Publisher<E> {
        self.publisher(&Self::numbered(index), None)
            .expect("a slot of this store")
    }

    /// Publishes `snapshot` into the slot numbered `slot`; ignored for a slot not in the store.
    pub fn publish(&self, slot: usize, snapshot: ClusterSnapshot) {
        self.publish_paired(slot, snapshot, None);
    }

    /// [`Self::publish`], for a standby cluster (`standby_of`: the source's scope) with the
    /// source's leader position from the source's latest published snapshot, found by its
    /// published scope.
    pub fn publish_paired(
        &self,
        slot: usize,
        mut snapshot: ClusterSnapshot,
        standby_of: Option<&str>,
    ) {
        snapshot.standby_source = standby_of.map(|source| {
            let published = self.published_by_scope(source);
            StandbySource::at(
                source,
                published.and_then(|published| published.kept.position.clone()),
            )
        });
        if let Some(publisher) = self.publisher(&Self::numbered(slot), None) {
            publisher.publish(snapshot);
        }
    }

    /// The `scope` labels of the clusters published, in configuration order; clusters not
    /// yet polled are skipped.
    pub fn current_scopes(&self) -> Vec<String> {
        self.all_published()
            .into_iter()
            .map(|published| published.kept.scope.clone())
            .collect()
    }
}

/// An encoding that is the whole snapshot: for the tests that read what a poller published
/// (the store keeps no snapshot of its own).
#[cfg(any(test, feature = "testkit"))]
#[derive(Debug)]
pub struct WholeSnapshot(pub Arc<ClusterSnapshot>);

#[cfg(any(test, feature = "testkit"))]
impl Encoding for WholeSnapshot {
    fn encode(snapshot: &Arc<ClusterSnapshot>) -> WholeSnapshot {
        WholeSnapshot(snapshot.clone())
    }
}

#[cfg(any(test, feature = "testkit"))]
impl SnapshotStore<WholeSnapshot> {
    /// The snapshots published, in configuration order; clusters not yet polled are skipped.
    pub fn current(&self) -> Vec<Arc<ClusterSnapshot>> {
        self.all_published()
            .into_iter()
            .map(|published| published.encoded.0.clone())
            .collect()
    }
}
