//! The metrics encoder: snapshots in, Prometheus exposition out.
//!
//! Each cluster's samples are encoded once, when its poller publishes a snapshot
//! ([`EncodedCluster`], kept with the snapshot in the store), one chunk per family. A scrape
//! only assembles: family by family, the family's descriptor once, then every cluster's
//! chunk of that family in configuration order ([`stream::Exposition`]). So all samples of a family stay
//! contiguous under one `# HELP`/`# TYPE` (OpenMetrics requires it, and Prometheus rejects a
//! repeated `# TYPE`), a family no cluster has samples for is left out, and the cost of a
//! scrape is a copy of the bytes rather than an encoding of every cluster.
//!
//! Nothing here is stateful beyond that: a member or a node that is not in the latest
//! snapshot produces no series, so series of members that left vanish at the next poll (no
//! stale gauges, no `remove()` bookkeeping), and a cluster removed by a reload goes with its
//! slot; a member the poller still remembers after it left `/cluster` is in the snapshot,
//! marked.
//!
//! Layout: `families` declares families and is the small writer every family goes through
//! (each module declares its families once, and writes them by name: the catalog is the
//! modules' declarations in order, so no write can shift another family); `patroni_families`
//! and `raft_families` map the two sources' parts of a snapshot to metric names (the names
//! are an interface: dashboards and alerts depend on them, see `docs/metrics.md`),
//! `failover_families` failover readiness, `split_families` what comparing every member
//! and node shows (primaries by their own word, diverging views and voter sets), and
//! `margin_families` how close the next outage is, `standby_families` standby clusters
//! and their lag to the source;
//! [`process`] reads the exporter's own process figures (client_golang's `process_*`
//! families, on `/metrics` only);
//! [`exposition`] names the formats; [`stream`] assembles a response frame by frame from
//! the clusters' chunks (and gzips it as it goes), so that no scrape builds or keeps the
//! whole exposition (tens of megabytes for a large fleet) in memory.

mod dcs_families;
mod etcd_families;
pub mod exposition;
mod failover_families;
mod families;
pub mod labels;
mod margin_families;
mod patroni_families;
pub mod process;
mod raft_families;
mod reload_families;
mod split_families;
mod standby_families;
pub mod stream;

use std::cell::RefCell;
use std::fmt;
use std::sync::{Arc, LazyLock};

use crate::snapshot::{ClusterSnapshot, Encoding, SnapshotStore};
use families::{Catalog, Chunks, Descriptor, FamilyWriter, Kind};
use labels::{BuildLabels, EncodeLabels};
pub use reload_families::ReloadStatus;

/// The exporter's version and the git revision it was built from.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
pub const REVISION: &str = env!("PATRONI_RAFT_EXPORTER_REVISION");

/// Writes every per-cluster family for the given snapshots (each module its own, by name).
fn encode_families(writer: &mut FamilyWriter, snapshots: &[Arc<ClusterSnapshot>]) -> fmt::Result {
    patroni_families::encode(writer, snapshots)?;
    failover_families::encode(writer, snapshots)?;
    dcs_families::encode(writer, snapshots)?;
    raft_families::encode(writer, snapshots)?;
    etcd_families::encode(writer, snapshots)?;
    split_families::encode(writer, snapshots)?;
    margin_families::encode(writer, snapshots)?;
    standby_families::encode(writer, snapshots)?;
    Ok(())
}

/// Every family of the clusters' chunks, declared once in its module, in the order they are
/// exposed: first the exporter's reload families (its own entry of the store,
/// [`ReloadStatus`]), then the per-cluster families.
static CATALOG: LazyLock<Catalog> = LazyLock::new(|| {
    Catalog::new(
        [
            reload_families::FAMILIES,
            patroni_families::FAMILIES,
            failover_families::FAMILIES,
            dcs_families::FAMILIES,
            raft_families::FAMILIES,
            etcd_families::FAMILIES,
            split_families::FAMILIES,
            margin_families::FAMILIES,
            standby_families::FAMILIES,
        ]
        .concat(),
    )
});

/// The exporter's own family, written first: `patroni_exporter_build_info`, descriptor and
/// sample (the same in both formats).
static BUILD_INFO: LazyLock<String> = LazyLock::new(|| {
    let name = "patroni_exporter_build_info";
    let descriptor = Descriptor::new(
        name,
        "A metric with a constant '1' labelled by the exporter's version and git revision.",
        Kind::Gauge,
    );
    let mut out = descriptor.text;
    out.push_str(name);
    BuildLabels {
        version: VERSION,
        revision: REVISION,
    }
    .encode(&mut out);
    out.push_str(" 1\n");
    out
});

/// One cluster's samples, encoded once from one snapshot: a chunk per family of the catalog
/// (empty when the cluster has no sample in it), in one buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedCluster {
    text: String,
    /// End offset in `text` of each family's chunk, one per catalog entry.
    ends: Vec<u32>,
}

/// The store of snapshots with this layer's encoding: what the poller publishes into and
/// `/metrics` reads.
pub type Store = SnapshotStore<EncodedCluster>;

impl Encoding for EncodedCluster {
    fn encode(snapshot: &Arc<ClusterSnapshot>) -> EncodedCluster {
        EncodedCluster::encode(snapshot)
    }
}

thread_local! {
    /// Where a cluster is encoded before being copied into a buffer of its exact size: it
    /// grows once per thread, and the copies kept with the snapshots waste nothing.
    static SCRATCH: RefCell<String> = const { RefCell::new(String::new()) };
}

impl EncodedCluster {
    /// Encodes the samples of every family for one snapshot.
    pub fn encode(snapshot: &Arc<ClusterSnapshot>) -> EncodedCluster {
        SCRATCH.with(|scratch| {
            let mut scratch = scratch.borrow_mut();
            let buffer = std::mem::take(&mut *scratch);
            let mut writer = FamilyWriter::new(&CATALOG, buffer);
            encode_families(&mut writer, std::slice::from_ref(snapshot))
                .expect("writing into a String cannot fail");
            let (Chunks { text, ends }, buffer) = writer.finish();
            *scratch = buffer;
            EncodedCluster { text, ends }
        })
    }

    /// The samples of family `index` of the catalog, as bytes: slicing the `String` would
    /// check that both ends are character boundaries by reading the text there, a cache miss
    /// per cluster and family at a large fleet's scrape, empty chunks included (a profile at
    /// N = 1000 put 80 % of the assembly's own time on those two reads). The ends are those of
    /// whole lines, so the slice is UTF-8 all the same.
    fn family(&self, index: usize) -> &[u8] {
        let start = index
            .checked_sub(1)
            .map_or(0, |previous| self.ends[previous] as usize);
        &self.text.as_bytes()[start..self.ends[index] as usize]
    }

    /// Asks the CPU to fetch the first [`PREFETCHED_LINES`] cache lines of family `index`'s
    /// chunk, without waiting for them: see [`stream::PREFETCH_DISTANCE`] for why.
    fn prefetch_family(&self, index: usize) {
        let chunk = self.family(index);
        let lines = chunk.len().min(PREFETCHED_LINES * CACHE_LINE);
        for offset in (0..lines).step_by(CACHE_LINE) {
            prefetch(&chunk[offset]);
        }
    }

    /// Bytes of samples.
    pub fn len(&self) -> usize {
        self.text.len()
    }

    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
    }
}

/// The cache lines of a chunk prefetched ahead of its copy: 8 (512 bytes) covers most chunks
/// whole (a cluster's family is 200 bytes on average at N = 1000) and was faster than 4 or 2.
const PREFETCHED_LINES: usize = 8;
const CACHE_LINE: usize = 64;

/// A hint to the CPU to bring `byte`'s cache line closer; a no-op where it has no stable
/// instruction for it (on aarch64 Rust's `_prefetch` is unstable).
#[inline(always)]
fn prefetch(byte: &u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch reads nothing into the program and never faults; the address is
    // that of a live byte besides.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(std::ptr::from_ref(byte).cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = byte;
}

/// The exposition of the given clusters in `format`, in one `String`: the frames of
/// [`stream::Exposition`] (what `/metrics` sends, the process families read now) put
/// together, for the tests and the golden file.
#[cfg(any(test, feature = "testkit"))]
pub fn render(clusters: &[Arc<EncodedCluster>], format: exposition::Format) -> String {
    render_with(clusters, Some(process::current()), format)
}

/// Like [`render`], with the process families of `process` (none: `/probe`'s).
#[cfg(any(test, feature = "testkit"))]
pub fn render_with(
    clusters: &[Arc<EncodedCluster>],
    process: Option<Arc<process::ProcessFamilies>>,
    format: exposition::Format,
) -> String {
    let bytes: Vec<u8> = stream::Exposition::new(clusters.to_vec(), process, format)
        .flat_map(|frame| frame.to_vec())
        .collect();
    String::from_utf8(bytes).expect("the exposition is assembled from strings")
}

/// Renders every cluster of `store` in `format`: for the integration tests.
#[cfg(feature = "testkit")]
pub fn render_store(store: &Store, format: exposition::Format) -> String {
    render(&store.current_encoded(), format)
}

#[cfg(test)]
mod tests;
