//! The store `/metrics` reads from: the latest snapshot of every cluster, with its encoding.
//!
//! Why the encoding is a type parameter ([`Encoding`]): the samples are encoded once, at
//! publication, and kept with the snapshot, but the encoding is the metrics layer's, which
//! depends on this one. The store names only what it needs of it, so that data and imports
//! flow one way (snapshot → metrics) and `metrics::Store` fixes the parameter.

use std::sync::{Arc, RwLock};

use super::cluster::ClusterSnapshot;

/// What is made of a snapshot once, when it is published (the metrics layer's samples), so
/// that readers only assemble.
pub trait Encoding: Send + Sync + 'static {
    fn encode(snapshot: &Arc<ClusterSnapshot>) -> Self;
}

/// A published snapshot with its samples, encoded once at publication.
#[derive(Debug)]
struct Published<E> {
    snapshot: Arc<ClusterSnapshot>,
    encoded: Arc<E>,
}

// By hand: a derived Clone would ask `E: Clone`, and only the `Arc`s are cloned.
impl<E> Clone for Published<E> {
    fn clone(&self) -> Self {
        Published {
            snapshot: self.snapshot.clone(),
            encoded: self.encoded.clone(),
        }
    }
}

/// The latest snapshot of every configured cluster, one slot per cluster, in configuration
/// order.
///
/// A slot is replaced whole (an `Arc` swap under a short write lock); readers clone the
/// `Arc`s and encode without holding any lock. A poller publishes to its slot's id, not to a
/// position: a reload that adds or removes clusters rearranges the slots ([`Self::arrange`])
/// and the clusters that stay keep their snapshots, and their pollers their ids.
///
/// Each snapshot is encoded when it is published, on the publisher's thread, and kept with
/// it (`E`, the metrics layer's encoding): a scrape only assembles.
#[derive(Debug)]
pub struct SnapshotStore<E> {
    slots: RwLock<Vec<Slot<E>>>,
}

/// One cluster's place in the store: the id its poller publishes to, and what it published.
#[derive(Debug)]
struct Slot<E> {
    id: usize,
    published: Option<Published<E>>,
}

impl<E> Slot<E> {
    fn empty(id: usize) -> Slot<E> {
        Slot {
            id,
            published: None,
        }
    }
}

impl<E: Encoding> SnapshotStore<E> {
    /// A store of `clusters` empty slots, with the ids `0..clusters`.
    pub fn new(clusters: usize) -> SnapshotStore<E> {
        SnapshotStore {
            slots: RwLock::new((0..clusters).map(Slot::empty).collect()),
        }
    }

    fn slots(&self) -> std::sync::RwLockReadGuard<'_, Vec<Slot<E>>> {
        // A poisoned lock only means a reader panicked; the data (Arcs) is still whole.
        self.slots
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The published snapshot of the cluster whose `scope` label is `scope`, if polled.
    fn published_by_scope(&self, scope: &str) -> Option<Published<E>> {
        self.slots()
            .iter()
            .filter_map(|slot| slot.published.as_ref())
            .find(|published| published.snapshot.scope == scope)
            .cloned()
    }

    /// The current snapshot of the cluster whose `scope` label is `scope`, if polled.
    pub fn by_scope(&self, scope: &str) -> Option<Arc<ClusterSnapshot>> {
        self.published_by_scope(scope)
            .map(|published| published.snapshot)
    }

    /// The encoded samples of the cluster whose `scope` label is `scope`, if polled.
    pub fn encoded_by_scope(&self, scope: &str) -> Option<Arc<E>> {
        self.published_by_scope(scope)
            .map(|published| published.encoded)
    }

    /// Publishes the newest snapshot of the cluster whose slot has the id `slot`; ignored for
    /// a slot that a reload removed.
    pub fn publish(&self, slot: usize, snapshot: ClusterSnapshot) {
        let snapshot = Arc::new(snapshot);
        let encoded = Arc::new(E::encode(&snapshot));
        let published = Published { snapshot, encoded };
        let mut slots = self
            .slots
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let Some(entry) = slots.iter_mut().find(|entry| entry.id == slot) else {
            return;
        };
        // The previous snapshot is dropped after the lock is released.
        let previous = entry.published.replace(published);
        drop(slots);
        drop(previous);
    }

    /// Empties the store into `clusters` slots with the ids `0..clusters`.
    pub fn reset(&self, clusters: usize) {
        let fresh = (0..clusters).map(Slot::empty).collect();
        let old = std::mem::replace(
            &mut *self
                .slots
                .write()
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
            fresh,
        );
        drop(old);
    }

    /// The slots after a reload, by id in configuration order: an id the store had keeps its
    /// snapshot (that cluster's series stay, and its poller goes on publishing to it), a new
    /// id starts empty, and the slots of ids not listed go with their series.
    pub fn arrange(&self, ids: &[usize]) {
        let mut slots = self
            .slots
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut old: Vec<Slot<E>> = std::mem::take(&mut *slots);
        *slots = ids
            .iter()
            .map(|&id| match old.iter().position(|slot| slot.id == id) {
                Some(at) => old.swap_remove(at),
                None => Slot::empty(id),
            })
            .collect();
        drop(slots);
        drop(old);
    }

    /// The current snapshots, in configuration order; clusters not yet polled are skipped.
    pub fn current(&self) -> Vec<Arc<ClusterSnapshot>> {
        self.slots()
            .iter()
            .filter_map(|slot| slot.published.as_ref())
            .map(|published| published.snapshot.clone())
            .collect()
    }

    /// The encoded samples of the current snapshots, in configuration order; clusters not
    /// yet polled are skipped.
    pub fn current_encoded(&self) -> Vec<Arc<E>> {
        self.slots()
            .iter()
            .filter_map(|slot| slot.published.as_ref())
            .map(|published| published.encoded.clone())
            .collect()
    }

    /// True once every cluster has been polled at least once.
    pub fn all_polled(&self) -> bool {
        self.slots().iter().all(|slot| slot.published.is_some())
    }
}
