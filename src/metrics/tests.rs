//! The hand-written exposition against prometheus-client's encoder, and the assembly of
//! per-cluster chunks against the rules of the text formats.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, LazyLock};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use super::exposition::Format;
use super::families::{Catalog, Chunks, Family, FamilyWriter, Kind};
use super::labels::{MemberInfoLabels, ScopeLabels};
use super::process::{ProcessFamilies, ProcessSample};
use super::*;
use crate::raft::parse_admin_text;
use crate::snapshot::{captured, DcsSnapshot, QuorumAssessment, RaftNodeSnapshot, RaftSnapshot};

/// Tricky label values: escapes, non-ASCII, empty.
const LABEL_VALUES: &[&str] = &[
    "plain",
    "",
    "quote\"d",
    "back\\slash",
    "new\nline",
    "all \\\"\n three\\n",
    "ünïcödé ✓",
];

/// Values around every branch of the gauge formatting (integer or not, large, special).
const VALUES: &[f64] = &[
    0.0,
    -0.0,
    1.0,
    -1.0,
    0.5,
    0.1,
    1.0 / 3.0,
    1e-7,
    123456.789,
    8.999_999_999_999_99e15,
    9.0e15,
    -9.0e15,
    1e20,
    1.7e308,
    f64::MIN_POSITIVE,
    f64::NAN,
    f64::INFINITY,
    f64::NEG_INFINITY,
];

/// prometheus-client writing one family, the way the exporter did before it wrote its own.
#[derive(Debug)]
struct Reference {
    name: &'static str,
    help: &'static str,
    kind: Kind,
    samples: Vec<([(&'static str, String); 4], f64)>,
}

impl Collector for Reference {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let kind = match self.kind {
            Kind::Gauge => MetricType::Gauge,
            Kind::Counter => MetricType::Counter,
        };
        let mut metric = encoder.encode_descriptor(self.name, self.help, None, kind)?;
        for (labels, value) in &self.samples {
            let labels: Vec<(&str, &str)> = labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
            let mut sample = metric.encode_family(&labels)?;
            match self.kind {
                Kind::Gauge if value.fract() == 0.0 && value.abs() < 9.0e15 => {
                    sample.encode_gauge(&(*value as i64))?
                }
                Kind::Gauge => sample.encode_gauge(value)?,
                Kind::Counter => sample
                    .encode_counter::<prometheus_client::encoding::NoLabelSet, u64, f64>(
                        &(*value as u64),
                        None,
                    )?,
            }
        }
        Ok(())
    }
}

fn reference_openmetrics(reference: Reference) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(reference));
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &registry).unwrap();
    out
}

#[test]
fn samples_and_descriptors_are_written_as_prometheus_client_writes_them() {
    const HELP: &str = "A help text, with \"quotes\" and a backslash \\.";
    let mut samples = Vec::new();
    for (i, value) in VALUES.iter().enumerate() {
        let v = |k: usize| LABEL_VALUES[(i + k) % LABEL_VALUES.len()].to_owned();
        samples.push((
            [
                ("scope", v(0)),
                ("member", v(1)),
                ("host", v(2)),
                ("api_url", v(3)),
            ],
            *value,
        ));
    }
    for kind in [Kind::Gauge, Kind::Counter] {
        let samples: Vec<_> = match kind {
            Kind::Gauge => samples.clone(),
            Kind::Counter => [0u64, 1, 42, u64::MAX]
                .into_iter()
                .zip(samples.iter().cycle())
                .map(|(value, (labels, _))| (labels.clone(), value as f64))
                .collect(),
        };
        let family = match kind {
            Kind::Gauge => Family::gauge("some_family", HELP),
            Kind::Counter => Family::counter("some_family", HELP),
        };
        let catalog = Catalog::new([family]);
        let mut writer = FamilyWriter::new(&catalog, String::new());
        let labels = |labels: &[(&'static str, String); 4]| {
            let [scope, member, host, api_url] = labels.each_ref().map(|(_, v)| v.clone());
            (scope, member, host, api_url)
        };
        let owned: Vec<_> = samples.iter().map(|(l, v)| (labels(l), *v)).collect();
        let borrowed = owned.iter().map(|((scope, member, host, api_url), value)| {
            (
                MemberInfoLabels {
                    scope,
                    member,
                    host,
                    api_url,
                },
                *value,
            )
        });
        match kind {
            Kind::Gauge => writer.write(&family, borrowed).unwrap(),
            Kind::Counter => writer
                .write(
                    &family,
                    borrowed.map(|(labels, value)| (labels, value as u64)),
                )
                .unwrap(),
        }
        let (Chunks { text, .. }, _) = writer.finish();
        let descriptor = catalog.descriptor(0);
        let expected = reference_openmetrics(Reference {
            name: "some_family",
            help: match kind {
                Kind::Gauge => HELP,
                // Counters carry the "cached" note.
                Kind::Counter => {
                    Box::leak(format!("{HELP}{}", super::families::CACHED).into_boxed_str())
                }
            },
            kind,
            samples: samples.clone(),
        });
        assert_eq!(
            format!("{}{text}# EOF\n", descriptor.openmetrics),
            expected,
            "{kind:?}"
        );
        assert_eq!(
            format!("{}{text}", descriptor.text),
            openmetrics_to_prometheus_text(&expected),
            "{kind:?}"
        );
    }
}

/// Converts OpenMetrics text into the 0.0.4 text format, line by line: the conversion the
/// exporter made before it kept descriptors per format.
fn openmetrics_to_prometheus_text(openmetrics: &str) -> String {
    let mut out = String::with_capacity(openmetrics.len());
    let mut lines = openmetrics.lines().peekable();
    while let Some(line) = lines.next() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let name = rest.split(' ').next().unwrap_or_default();
            let type_line = lines.peek().copied().unwrap_or_default();
            let is_counter = type_line
                .strip_prefix("# TYPE ")
                .is_some_and(|t| t.strip_prefix(name) == Some(" counter"));
            if is_counter {
                out.push_str(&format!("# HELP {name}_total{}\n", &rest[name.len()..]));
                lines.next();
                out.push_str(&format!("# TYPE {name}_total counter\n"));
                continue;
            }
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

fn fixture(path: &str) -> String {
    std::fs::read_to_string(format!(
        "{}/tests/fixtures/{path}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

/// A healthy captured cluster named `scope`, with its 3 Raft nodes, keeping only the first
/// `members` members.
fn cluster(scope: &str, members: usize) -> Arc<ClusterSnapshot> {
    let dir = "patroni-4.1.5/states/healthy";
    let (mut view, mut listed) = captured(
        &format!("{dir}/cluster.json"),
        &format!("{dir}/patroni-m{{i}}.json"),
    );
    view.members.truncate(members);
    listed.truncate(members);
    let raft_nodes: Vec<RaftNodeSnapshot> = (0..3)
        .map(|i| RaftNodeSnapshot {
            node: format!("127.0.0.1{}:2222", i + 1),
            round_trip: None,
            status: Ok(parse_admin_text(&fixture(&format!(
                "patroni-3.3.8/syncobj_admin-status-m{i}.txt"
            )))
            .unwrap()),
        })
        .collect();
    let quorum = QuorumAssessment::assess(&raft_nodes, &BTreeSet::new());
    let mut snapshot = ClusterSnapshot {
        scope: scope.to_owned(),
        polled_at_seconds: 1_700_000_000.25,
        cluster: Some(view),
        members: listed,
        dcs: DcsSnapshot::Raft(RaftSnapshot {
            nodes: raft_nodes,
            quorum,
            ..RaftSnapshot::default()
        }),
        ..ClusterSnapshot::default()
    };
    snapshot.counters.poll_errors.insert(
        (
            crate::snapshot::Source::Raft,
            crate::error_kind::ErrorKind::Timeout,
        ),
        2,
    );
    Arc::new(snapshot)
}

fn store_with(clusters: &[Arc<ClusterSnapshot>]) -> Store {
    let store = Store::new(clusters.len());
    for (slot, snapshot) in clusters.iter().enumerate() {
        store.publish(slot, (**snapshot).clone());
    }
    store
}

/// The metric name of a sample line.
fn sample_name(line: &str) -> &str {
    line.split(['{', ' ']).next().unwrap()
}

#[test]
fn every_family_is_one_block_under_one_descriptor_with_the_clusters_in_order() {
    let clusters = [cluster("alpha", 3), cluster("beta", 2), cluster("gamma", 3)];
    let store = store_with(&clusters);
    for format in [Format::OpenMetrics, Format::PrometheusText] {
        let text = render_store(&store, format);
        let mut seen_types = HashMap::new();
        let mut current: Option<String> = None;
        let mut last_scope_index = 0;
        for (number, line) in text.lines().enumerate() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let name = rest.split(' ').next().unwrap().to_owned();
                assert!(
                    seen_types.insert(name.clone(), number).is_none(),
                    "{format:?}: TYPE {name} repeated"
                );
                current = Some(name);
                last_scope_index = 0;
                continue;
            }
            if line.starts_with('#') {
                continue;
            }
            let family = current.as_deref().expect("a sample before any TYPE");
            let name = sample_name(line);
            assert!(
                name == family || name == format!("{family}_total"),
                "{format:?}: sample {line} under TYPE {family}"
            );
            // Clusters in configuration order within the family.
            if let Some(scope) = line.split("scope=\"").nth(1) {
                let scope = scope.split('"').next().unwrap();
                let index = ["alpha", "beta", "gamma"]
                    .iter()
                    .position(|s| *s == scope)
                    .unwrap();
                assert!(index >= last_scope_index, "{format:?}: {line} out of order");
                last_scope_index = index;
            }
        }
        assert!(
            seen_types.len() > 60,
            "{format:?}: {} families",
            seen_types.len()
        );
        assert_eq!(text.ends_with("# EOF\n"), format == Format::OpenMetrics);
    }
}

#[test]
fn the_text_format_is_the_openmetrics_one_converted() {
    let store = store_with(&[cluster("alpha", 3), cluster("beta", 1)]);
    let clusters = store.current_encoded();
    let openmetrics = render_with(&clusters, Some(reading(1)), Format::OpenMetrics);
    assert!(openmetrics.contains("# TYPE patroni_exporter_poll_errors counter\n"));
    assert!(openmetrics.contains(
        "patroni_exporter_poll_errors_total{scope=\"alpha\",source=\"raft\",kind=\"timeout\"} 2\n"
    ));
    assert_eq!(
        render_with(&clusters, Some(reading(1)), Format::PrometheusText),
        openmetrics_to_prometheus_text(&openmetrics)
    );
}

#[test]
fn a_family_without_samples_is_left_out_and_clusters_without_them_add_nothing() {
    let mut without_history = (*cluster("alpha", 3)).clone();
    without_history.history = None;
    let mut with_history = (*cluster("beta", 3)).clone();
    with_history.history = Some(Vec::new().into());
    let alone = store_with(&[Arc::new(without_history.clone())]);
    let text = render_store(&alone, Format::PrometheusText);
    assert!(!text.contains("patroni_cluster_history_entries{"));
    assert!(!text.contains("# TYPE patroni_cluster_history_entries "));
    let both = store_with(&[Arc::new(without_history), Arc::new(with_history)]);
    let text = render_store(&both, Format::PrometheusText);
    let lines: Vec<&str> = text
        .lines()
        .filter(|line| {
            line.starts_with("patroni_cluster_history_entries")
                || line.starts_with("# TYPE patroni_cluster_history_entries")
                || line.starts_with("# HELP patroni_cluster_history_entries")
        })
        .collect();
    assert_eq!(
        lines,
        [
            "# HELP patroni_cluster_history_entries Entries in GET /history (timeline switches, trimmed by Patroni to max_timelines_history), as last read (patroni_exporter_fact_read_timestamp_seconds{fact=\"history\"}). Cached: value as of the last poll (see patroni_exporter_last_poll_timestamp_seconds).",
            "# TYPE patroni_cluster_history_entries gauge",
            "patroni_cluster_history_entries{scope=\"beta\"} 0",
        ]
    );
}

/// A value served from an earlier poll's read is exported beside the time of that read; a
/// fact with nothing served has no time.
#[test]
fn remembered_facts_are_exported_with_the_time_of_their_read() {
    let mut snapshot = (*cluster("alpha", 2)).clone();
    snapshot.read_at = crate::snapshot::ClusterReadTimes {
        config: Some(1_699_999_990.0),
        raft_voters: Some(snapshot.polled_at_seconds),
        ..Default::default()
    };
    snapshot.members[1].read_at = crate::snapshot::MemberReadTimes {
        liveness: Some(1_699_999_995.5),
        ..Default::default()
    };
    let text = render_store(&store_with(&[Arc::new(snapshot)]), Format::PrometheusText);
    let lines: Vec<&str> = text
        .lines()
        .filter(|line| line.starts_with("patroni_exporter_") && line.contains("fact_read_"))
        .collect();
    assert_eq!(
        lines,
        [
            "patroni_exporter_fact_read_timestamp_seconds{scope=\"alpha\",fact=\"config\"} 1699999990",
            "patroni_exporter_fact_read_timestamp_seconds{scope=\"alpha\",fact=\"raft_voters\"} 1700000000.25",
            "patroni_exporter_member_fact_read_timestamp_seconds{scope=\"alpha\",member=\"postgresql-1\",fact=\"liveness\"} 1699999995.5",
        ],
        "{text}"
    );
}

#[test]
fn the_standby_lag_says_when_the_source_position_was_read() {
    // The source "alpha" (its primary at 5 242 880 bytes in the captured healthy 4.1.5) and a
    // standby cluster paired with it at publication: the lag's source position is as of the
    // source's poll, which the timestamp names.
    let dir = "patroni-4.1.5/states/standby";
    let (view, members) = captured(
        &format!("{dir}/cluster.json"),
        &format!("{dir}/patroni-m{{i}}.json"),
    );
    let standby = ClusterSnapshot {
        scope: "dr".to_owned(),
        polled_at_seconds: 1_700_000_003.5,
        cluster: Some(view),
        members,
        ..ClusterSnapshot::default()
    };
    let store = Store::new(2);
    store.publish(0, (*cluster("alpha", 3)).clone());
    store.publish_paired(1, standby.clone(), Some("alpha"));
    let text = render_store(&store, Format::PrometheusText);
    let value = |series: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
            .map(str::to_owned)
    };
    let pair = "{scope=\"dr\",source_scope=\"alpha\"}";
    assert!(
        value(&format!("patroni_standby_lag_bytes{pair}")).is_some(),
        "{text}"
    );
    assert_eq!(
        value(&format!(
            "patroni_standby_source_position_timestamp_seconds{pair}"
        ))
        .as_deref(),
        Some("1700000000.25"),
        "the source's poll, not the standby's"
    );
    // Without the source polled there is no lag, and no time for it.
    let unpaired = Store::new(1);
    unpaired.publish_paired(0, standby, Some("alpha"));
    let text = render_store(&unpaired, Format::PrometheusText);
    assert!(!text.contains("patroni_standby_lag_bytes{"), "{text}");
    assert!(
        !text.contains("patroni_standby_source_position_timestamp_seconds{"),
        "{text}"
    );
}

#[test]
fn members_and_clusters_that_go_also_go_from_the_output() {
    let store = store_with(&[cluster("alpha", 3), cluster("beta", 3)]);
    let member = "member=\"postgresql-2\"";
    let before = render_store(&store, Format::PrometheusText);
    assert_eq!(
        before.matches(member).count() % 2,
        0,
        "both clusters list the member"
    );
    assert!(before.contains(&format!("patroni_member_info{{scope=\"alpha\",{member}")));
    // alpha publishes without its third member: its series go, beta's stay.
    store.publish(0, (*cluster("alpha", 2)).clone());
    let after = render_store(&store, Format::PrometheusText);
    assert!(!after.contains(&format!("scope=\"alpha\",{member}")));
    assert!(after.contains(&format!("patroni_member_info{{scope=\"beta\",{member}")));
    // A reload to one cluster: every series of the old slots goes until they publish.
    store.reset(1);
    let reloaded = render_store(&store, Format::PrometheusText);
    assert!(!reloaded.contains("scope="), "{reloaded}");
    assert!(reloaded.starts_with("# HELP patroni_exporter_build_info "));
    store.publish(0, (*cluster("beta", 1)).clone());
    let republished = render_store(&store, Format::PrometheusText);
    assert!(!republished.contains("scope=\"alpha\""));
    assert!(republished.contains("patroni_member_info{scope=\"beta\""));
}

#[test]
fn a_reload_that_adds_and_removes_clusters_keeps_the_series_of_those_that_stay() {
    use crate::snapshot::ClusterId;
    let [alpha, beta, gamma] = ["alpha", "beta", "gamma"].map(ClusterId::new);
    let store = Store::default();
    store.arrange(&[alpha.clone(), beta.clone()]);
    let alpha_publisher = store.publisher(&alpha, None).unwrap();
    alpha_publisher.publish((*cluster("alpha", 3)).clone());
    let beta_publisher = store.publisher(&beta, None).unwrap();
    beta_publisher.publish((*cluster("beta", 3)).clone());
    // alpha removed, beta kept, gamma added
    store.arrange(&[beta.clone(), gamma.clone()]);
    assert!(store.publisher(&alpha, None).is_none());
    let reloaded = render_store(&store, Format::PrometheusText);
    assert!(!reloaded.contains("scope=\"alpha\""), "{reloaded}");
    assert!(
        reloaded.contains("patroni_member_info{scope=\"beta\""),
        "{reloaded}"
    );
    assert!(!store.all_polled());
    // a stopping poller of the removed cluster publishes into a slot no scrape reads, and
    // the poller that stays still publishes into its own
    alpha_publisher.publish((*cluster("alpha", 3)).clone());
    beta_publisher.publish((*cluster("beta", 2)).clone());
    store
        .publisher(&gamma, None)
        .unwrap()
        .publish((*cluster("gamma", 1)).clone());
    let after = render_store(&store, Format::PrometheusText);
    assert!(!after.contains("scope=\"alpha\""), "{after}");
    assert!(store.all_polled());
    assert_eq!(
        store.current_scopes(),
        ["beta", "gamma"],
        "in configuration order"
    );
    let beta_members = after
        .lines()
        .filter(|line| line.starts_with("patroni_member_info{scope=\"beta\""))
        .count();
    assert_eq!(beta_members, 2, "beta's latest");
}

#[test]
fn probe_finds_a_cluster_by_its_id_or_its_published_scope() {
    use crate::snapshot::ClusterId;
    let named = ClusterId::new("alpha");
    let unnamed = ClusterId::new("http://127.0.0.21:8008/");
    let store = Store::default();
    store.arrange(&[named.clone(), unnamed.clone()]);
    assert!(store.encoded_by_scope("alpha").is_none(), "not polled yet");
    store
        .publisher(&named, None)
        .unwrap()
        .publish((*cluster("alpha", 1)).clone());
    store
        .publisher(&unnamed, None)
        .unwrap()
        .publish((*cluster("beta", 2)).clone());
    let alpha = store.encoded_by_scope("alpha").unwrap();
    let beta = store.encoded_by_scope("beta").unwrap();
    assert_eq!(*alpha, EncodedCluster::encode(&cluster("alpha", 1)));
    assert_eq!(*beta, EncodedCluster::encode(&cluster("beta", 2)));
    assert!(store.encoded_by_scope("gamma").is_none());
}

#[test]
fn encoding_once_per_snapshot_is_encoding_at_scrape_time() {
    // A cluster's chunks do not depend on the other clusters: the assembly of clusters
    // encoded one by one is what encoding them all at once in one pass writes.
    let clusters = [cluster("alpha", 3), cluster("beta", 2)];
    let mut writer = FamilyWriter::new(&CATALOG, String::new());
    encode_families(&mut writer, &clusters).unwrap();
    let (
        Chunks {
            text: all_at_once,
            ends,
        },
        _,
    ) = writer.finish();
    assert_eq!(ends.len(), CATALOG.len());
    let encoded: Vec<_> = clusters
        .iter()
        .map(|c| Arc::new(EncodedCluster::encode(c)))
        .collect();
    let assembled = render_with(&encoded, None, Format::OpenMetrics);
    let samples: String = assembled
        .lines()
        .filter(|line| !line.starts_with('#') && !line.starts_with("patroni_exporter_build_info"))
        .map(|line| format!("{line}\n"))
        .collect();
    assert_eq!(samples, all_at_once);
}

#[test]
fn the_catalog_names_each_family_once() {
    let names: BTreeSet<&str> = CATALOG.entries().map(|(name, _)| name).collect();
    assert_eq!(names.len(), CATALOG.len());
    assert!(CATALOG
        .entries()
        .all(|(name, d)| d.openmetrics.starts_with(&format!("# HELP {name} "))));
}

/// A catalog of three families of its own, for what the writer does with the order of writes.
static THREE: LazyLock<Catalog> = LazyLock::new(|| Catalog::new([FIRST, SECOND, THIRD]));
const FIRST: Family = Family::gauge("first", "The first.");
const SECOND: Family = Family::counter("second", "The second.");
const THIRD: Family = Family::cached_gauge("third", "The third.");

/// Writes `FIRST` and `THIRD` for the scopes, `SECOND` only when `with_second` (as an encoder
/// that writes a family only when a snapshot has some part would), in catalog order or
/// reversed, and renders it through the stream `/metrics` sends.
fn three_families(with_second: bool, reversed: bool) -> String {
    let encode = |scope: &'static str| {
        let mut writer = FamilyWriter::new(&THREE, String::new());
        let mut order = [FIRST, SECOND, THIRD];
        if reversed {
            order.reverse();
        }
        for family in order {
            let labels = ScopeLabels { scope };
            match family.name {
                "first" => writer.write(&FIRST, [(labels, 1.0)]).unwrap(),
                "second" if with_second => writer.write(&SECOND, [(labels, 2u64)]).unwrap(),
                "second" => {}
                _ => writer.write(&THIRD, [(labels, 3.5)]).unwrap(),
            }
        }
        let (Chunks { text, ends }, _) = writer.finish();
        Arc::new(EncodedCluster { text, ends })
    };
    let clusters = vec![encode("a"), encode("b")];
    let bytes: Vec<u8> = stream::Exposition::of_catalog(clusters, Format::PrometheusText, &THREE)
        .flat_map(|frame| frame.to_vec())
        .collect();
    String::from_utf8(bytes).unwrap()
}

#[test]
fn a_family_written_conditionally_or_out_of_order_moves_no_other_family() {
    // No check of the order of writes is involved (debug builds have none either): each
    // write is filed under its family's entry of the catalog, so this is what a release
    // build serves.
    let first = "# HELP first The first.\n# TYPE first gauge\n\
        first{scope=\"a\"} 1\nfirst{scope=\"b\"} 1\n";
    let second = "# HELP second_total The second. Cached: value as of the last poll (see patroni_exporter_last_poll_timestamp_seconds).\n\
        # TYPE second_total counter\n\
        second_total{scope=\"a\"} 2\nsecond_total{scope=\"b\"} 2\n";
    let third = "# HELP third The third. Cached: value as of the last poll (see patroni_exporter_last_poll_timestamp_seconds).\n\
        # TYPE third gauge\n\
        third{scope=\"a\"} 3.5\nthird{scope=\"b\"} 3.5\n";
    for reversed in [false, true] {
        let all = three_families(true, reversed);
        assert_eq!(all, format!("{}{first}{second}{third}", *BUILD_INFO));
        let without_second = three_families(false, reversed);
        assert_eq!(
            without_second,
            format!("{}{first}{third}", *BUILD_INFO),
            "reversed: {reversed}"
        );
    }
}

#[test]
fn a_family_written_twice_keeps_its_samples_together_in_the_order_written() {
    let mut writer = FamilyWriter::new(&THREE, String::new());
    writer
        .write(&THIRD, [(ScopeLabels { scope: "x" }, 1.0)])
        .unwrap();
    writer
        .write(&FIRST, [(ScopeLabels { scope: "x" }, 2.0)])
        .unwrap();
    writer
        .write(&THIRD, [(ScopeLabels { scope: "y" }, 3.0)])
        .unwrap();
    let (Chunks { text, ends }, buffer) = writer.finish();
    assert_eq!(
        text,
        "first{scope=\"x\"} 2\nthird{scope=\"x\"} 1\nthird{scope=\"y\"} 3\n"
    );
    assert_eq!(ends, [19, 19, text.len() as u32], "second is empty");
    assert!(buffer.is_empty(), "the buffer comes back empty, for reuse");
}

#[test]
fn a_catalog_refuses_a_name_declared_twice() {
    let twice =
        std::panic::catch_unwind(|| Catalog::new([FIRST, Family::gauge("first", "Again.")]));
    assert!(twice.is_err());
}

/// The exposition as it was assembled before it was streamed: in one `String`, family by
/// family (the render cache's `render_into`); the reference the streamed frames must equal.
fn concatenated(
    clusters: &[Arc<EncodedCluster>],
    process: &ProcessFamilies,
    format: Format,
) -> String {
    let mut out = BUILD_INFO.clone();
    out.push_str(process.text(format));
    for (index, (_, descriptor)) in CATALOG.entries().enumerate() {
        if clusters.iter().all(|c| c.family(index).is_empty()) {
            continue;
        }
        out.push_str(descriptor.text(format));
        for cluster in clusters {
            out.push_str(std::str::from_utf8(cluster.family(index)).unwrap());
        }
    }
    if format == Format::OpenMetrics {
        out.push_str("# EOF\n");
    }
    out
}

/// A reading of the process families with fixed figures, `n` CPU seconds: the same text in
/// every render that has it.
fn reading(n: u32) -> Arc<ProcessFamilies> {
    Arc::new(ProcessFamilies::of(&ProcessSample {
        cpu_seconds: Some(f64::from(n)),
        max_fds: Some(1024),
        open_fds: Some(9),
        resident_memory_bytes: Some(8 << 20),
        start_time_seconds: Some(1_700_000_000.0),
        virtual_memory_bytes: Some(64 << 20),
    }))
}

/// Clusters of 1 to 3 members, enough for many frames, frames ending amid a family.
fn fleet(clusters: usize) -> Vec<Arc<EncodedCluster>> {
    (0..clusters)
        .map(|i| {
            let snapshot = cluster(&format!("cluster-{i}"), 1 + i % 3);
            Arc::new(EncodedCluster::encode(&snapshot))
        })
        .collect()
}

#[test]
fn the_streamed_frames_are_the_whole_exposition_concatenated() {
    let encoded = fleet(40);
    // A family's descriptor goes before its first chunk that is not empty: the fleet has a
    // family the first cluster (one member) has no samples in and a later one has.
    assert!(
        (0..CATALOG.entries().count()).any(|index| encoded[0].family(index).is_empty()
            && encoded
                .iter()
                .any(|cluster| !cluster.family(index).is_empty()))
    );
    for format in [Format::OpenMetrics, Format::PrometheusText] {
        let frames: Vec<_> =
            stream::Exposition::new(encoded.clone(), Some(reading(1)), format).collect();
        assert!(frames.len() > 10, "{} frames", frames.len());
        // Every frame but the last is filled to the frame size, and no larger than the
        // chunk that crossed it.
        for frame in &frames[..frames.len() - 1] {
            assert!(
                (stream::FRAME..stream::FRAME + 4096).contains(&frame.len()),
                "{}",
                frame.len()
            );
        }
        assert_eq!(
            frames.concat(),
            concatenated(&encoded, &reading(1), format).into_bytes(),
            "{format:?}"
        );
        // Without any cluster: the build info (and `# EOF`) alone.
        let empty: Vec<u8> = stream::Exposition::new(Vec::new(), Some(reading(1)), format)
            .flat_map(|frame| frame.to_vec())
            .collect();
        assert_eq!(empty, concatenated(&[], &reading(1), format).into_bytes());
    }
}

#[test]
fn the_gzipped_stream_is_one_gzip_member_of_the_same_text() {
    use std::io::Read;
    let encoded = fleet(40);
    for format in [Format::OpenMetrics, Format::PrometheusText] {
        let frames: Vec<_> =
            stream::Frames::new(encoded.clone(), Some(reading(1)), format, true).collect();
        assert!(frames.len() > 1, "compressed as it goes, not at the end");
        assert!(frames.iter().all(|frame| !frame.is_empty()));
        let compressed = frames.concat();
        let text = concatenated(&encoded, &reading(1), format);
        assert!(compressed.len() < text.len() / 10, "{}", compressed.len());
        // One member: the single-member decoder reads it all, as every client does.
        let mut decoded = String::new();
        flate2::read::GzDecoder::new(&compressed[..])
            .read_to_string(&mut decoded)
            .unwrap();
        assert_eq!(decoded, text, "{format:?}");
        let plain: Vec<_> =
            stream::Frames::new(encoded.clone(), Some(reading(1)), format, false).collect();
        assert_eq!(plain.concat(), text.into_bytes());
    }
}

#[test]
fn a_small_gzip_body_is_kept_until_a_cluster_publishes_or_the_process_is_read_anew() {
    use std::io::Read;
    let reuse = stream::GzipReuse::default();
    let mut encoded = fleet(3);
    let process = reading(1);
    let gunzip = |body: &[u8]| {
        let mut text = String::new();
        flate2::read::GzDecoder::new(body)
            .read_to_string(&mut text)
            .unwrap();
        text
    };
    let first = reuse
        .small(&encoded, &process, Format::OpenMetrics)
        .unwrap();
    assert_eq!(
        gunzip(&first),
        concatenated(&encoded, &process, Format::OpenMetrics)
    );
    // The same chunks: the same body, not compressed again.
    let again = reuse
        .small(&encoded, &process, Format::OpenMetrics)
        .unwrap();
    assert_eq!(again.as_ptr(), first.as_ptr());
    // The other format, or one cluster published anew (a new chunk): made anew.
    let text = reuse
        .small(&encoded, &process, Format::PrometheusText)
        .unwrap();
    assert_eq!(
        gunzip(&text),
        concatenated(&encoded, &process, Format::PrometheusText)
    );
    encoded[1] = Arc::new(EncodedCluster::encode(&cluster("cluster-1", 1)));
    let republished = reuse
        .small(&encoded, &process, Format::PrometheusText)
        .unwrap();
    assert_ne!(republished.as_ptr(), text.as_ptr());
    assert_eq!(
        gunzip(&republished),
        concatenated(&encoded, &process, Format::PrometheusText)
    );
    // A new reading of the process families: made anew, with them.
    let process = reading(2);
    let read_anew = reuse
        .small(&encoded, &process, Format::PrometheusText)
        .unwrap();
    assert_ne!(read_anew.as_ptr(), republished.as_ptr());
    assert!(gunzip(&read_anew).contains("\nprocess_cpu_seconds_total 2\n"));
    // A cluster gone: gone from the body too.
    encoded.pop();
    let fewer = reuse
        .small(&encoded, &process, Format::PrometheusText)
        .unwrap();
    assert!(!gunzip(&fewer).contains("cluster-2"));
    // A large exposition is streamed, never kept.
    let large = fleet(60);
    assert!(large.iter().map(|c| c.len()).sum::<usize>() > stream::REUSE_UP_TO);
    assert!(reuse.small(&large, &process, Format::OpenMetrics).is_none());
}

#[test]
fn accept_encoding() {
    use stream::accepts_gzip;
    assert!(accepts_gzip(Some("gzip")));
    assert!(accepts_gzip(Some("deflate, GZIP;q=0.5")));
    assert!(accepts_gzip(Some("*")));
    assert!(!accepts_gzip(Some("gzip;q=0")));
    assert!(!accepts_gzip(Some("identity")));
    assert!(!accepts_gzip(Some("x-gzip-ish")));
    assert!(!accepts_gzip(None));
}

#[cfg(target_os = "linux")]
#[test]
fn metrics_has_the_process_families_with_sane_values_and_probe_has_none() {
    let store = store_with(&[cluster("alpha", 3)]);
    let text = render_store(&store, Format::PrometheusText);
    let value = |name: &str| -> f64 {
        let prefix = format!("{name} ");
        let line = text.lines().find(|line| line.starts_with(&prefix));
        line.unwrap_or_else(|| panic!("no {name} in\n{text}"))[prefix.len()..]
            .parse()
            .unwrap()
    };
    assert!(text.contains("# TYPE process_cpu_seconds_total counter\n"));
    assert!(value("process_resident_memory_bytes") > 0.0);
    assert!(value("process_virtual_memory_bytes") >= value("process_resident_memory_bytes"));
    let (open, max) = (value("process_open_fds"), value("process_max_fds"));
    assert!(open > 0.0 && open <= max, "open {open}, max {max}");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let started = value("process_start_time_seconds");
    assert!((now - 3600.0..=now + 1.0).contains(&started), "{started}");
    assert!(value("process_cpu_seconds_total") >= 0.0);
    // /probe serves a cluster per target: the process families are /metrics' only.
    let probe = render_with(&store.current_encoded(), None, Format::PrometheusText);
    assert!(!probe.contains("process_"), "{probe}");
    assert!(probe.contains("patroni_up{scope=\"alpha\"} 1"));
}
