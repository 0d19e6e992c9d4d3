//! The one place where metric families are written: the samples of one cluster, one chunk
//! per family, and (once per process) the catalog of every family's descriptor.
//!
//! Every family function calls [`FamilyWriter::gauge`] or [`FamilyWriter::counter`]
//! unconditionally and in a fixed order, so the n-th call is always the same family: a
//! cluster's encoding is a list of chunks indexed like the catalog (checked in debug builds).
//! The sample lines are written here by hand, byte for byte as prometheus-client's text
//! encoder writes them (the tests compare the two), and are the same in OpenMetrics and in
//! the 0.0.4 text format; only the descriptors differ ([`Descriptor`]).

use std::fmt;

use super::labels::EncodeLabels;

/// Appended to every help text: values come from the last poll, not from this scrape.
pub(super) const CACHED: &str =
    " Cached: value as of the last poll (see patroni_exporter_last_poll_timestamp_seconds).";

/// The metric types the exporter writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Gauge,
    Counter,
}

/// One family's descriptor, in both exposition formats.
#[derive(Debug, Clone)]
pub struct Descriptor {
    pub name: &'static str,
    /// `# HELP` and `# TYPE` as OpenMetrics has them: a counter named without `_total`.
    pub openmetrics: String,
    /// The same for the 0.0.4 text format: a counter named with its `_total` suffix.
    pub text: String,
}

impl Descriptor {
    pub fn new(name: &'static str, help: &str, kind: Kind) -> Descriptor {
        match kind {
            Kind::Gauge => {
                let header = format!("# HELP {name} {help}\n# TYPE {name} gauge\n");
                Descriptor {
                    name,
                    openmetrics: header.clone(),
                    text: header,
                }
            }
            Kind::Counter => Descriptor {
                name,
                openmetrics: format!("# HELP {name} {help}\n# TYPE {name} counter\n"),
                text: format!("# HELP {name}_total {help}\n# TYPE {name}_total counter\n"),
            },
        }
    }
}

/// Writes the samples of each family into one buffer, recording where each family ends.
pub struct FamilyWriter {
    out: String,
    /// End offset in `out` of each family written so far.
    ends: Vec<u32>,
    /// When building the catalog: every family's descriptor, in call order.
    catalog: Option<Vec<Descriptor>>,
    /// When encoding a cluster: the catalog's names, to check the call order.
    expected: Option<&'static [Descriptor]>,
}

impl FamilyWriter {
    /// A writer for one cluster's samples, appended to `out` (an empty buffer to reuse);
    /// `expected` is the catalog its calls must follow.
    pub fn new(out: String, expected: &'static [Descriptor]) -> FamilyWriter {
        FamilyWriter {
            out,
            ends: Vec::with_capacity(expected.len()),
            catalog: None,
            expected: Some(expected),
        }
    }

    /// A writer that records every family's descriptor (run over no snapshot at all).
    pub fn catalog() -> FamilyWriter {
        FamilyWriter {
            out: String::new(),
            ends: Vec::new(),
            catalog: Some(Vec::new()),
            expected: None,
        }
    }

    /// The samples written and the end offset of each family.
    pub fn finish(self) -> (String, Vec<u32>) {
        (self.out, self.ends)
    }

    /// The descriptors recorded by a [`FamilyWriter::catalog`] writer.
    pub fn into_catalog(self) -> Vec<Descriptor> {
        self.catalog.unwrap_or_default()
    }

    /// The samples and the descriptors recorded by a [`FamilyWriter::catalog`] writer.
    #[cfg(test)]
    pub fn into_samples_and_catalog(self) -> (String, Vec<Descriptor>) {
        (self.out, self.catalog.unwrap_or_default())
    }

    fn begin(&mut self, name: &'static str, help: &str, cached: bool, kind: Kind) {
        if let Some(catalog) = &mut self.catalog {
            let help = if cached {
                format!("{help}{CACHED}")
            } else {
                help.to_owned()
            };
            catalog.push(Descriptor::new(name, &help, kind));
        }
        if let Some(expected) = self.expected {
            debug_assert_eq!(
                expected.get(self.ends.len()).map(|d| d.name),
                Some(name),
                "family written out of catalog order"
            );
        }
    }

    fn end(&mut self) {
        let end = u32::try_from(self.out.len()).expect("a cluster's samples fit in 4 GiB");
        self.ends.push(end);
    }

    fn family(
        &mut self,
        name: &'static str,
        help: &str,
        cached: bool,
        samples: impl IntoIterator<Item = (impl EncodeLabels, f64)>,
    ) -> fmt::Result {
        self.begin(name, help, cached, Kind::Gauge);
        for (labels, value) in samples {
            self.out.push_str(name);
            labels.encode(&mut self.out);
            self.out.push(' ');
            if value.fract() == 0.0 && value.abs() < 9.0e15 {
                // Integers print without a trailing `.0`, as every other exporter does.
                self.out.push_str(itoa::Buffer::new().format(value as i64));
            } else {
                self.out.push_str(dtoa::Buffer::new().format(value));
            }
            self.out.push('\n');
        }
        self.end();
        Ok(())
    }

    /// A gauge family; a cluster without samples writes nothing, and a family no cluster
    /// has samples for is left out of the output, so an absent value (e.g. no timeline
    /// reported) is absent rather than a fake zero.
    pub fn gauge<L: EncodeLabels>(
        &mut self,
        name: &'static str,
        help: &str,
        samples: impl IntoIterator<Item = (L, f64)>,
    ) -> fmt::Result {
        self.family(name, help, false, samples)
    }

    /// Like [`FamilyWriter::gauge`], with the "cached" note appended to the help text.
    pub fn cached_gauge<L: EncodeLabels>(
        &mut self,
        name: &'static str,
        help: &str,
        samples: impl IntoIterator<Item = (L, f64)>,
    ) -> fmt::Result {
        self.family(name, help, true, samples)
    }

    /// A counter family. `name` is given without `_total`; the samples get it.
    pub fn counter<L: EncodeLabels>(
        &mut self,
        name: &'static str,
        help: &str,
        samples: impl IntoIterator<Item = (L, u64)>,
    ) -> fmt::Result {
        self.begin(name, help, true, Kind::Counter);
        for (labels, value) in samples {
            self.out.push_str(name);
            self.out.push_str("_total");
            labels.encode(&mut self.out);
            self.out.push(' ');
            self.out.push_str(itoa::Buffer::new().format(value));
            self.out.push('\n');
        }
        self.end();
        Ok(())
    }
}

/// Cached gauges that differ only in the value they read, one row each:
/// `cached_gauges! { writer, samples; "name", select, "help"; ... }` writes
/// `writer.cached_gauge(name, help, samples(select))?` for every row, in order. A family
/// that reads one more field of the same source is then one row, not a five-line call; the
/// braces keep rustfmt from spreading a row over lines. Returns early on an error, as `?`.
macro_rules! cached_gauges {
    ($writer:expr, $samples:expr; $($name:literal, $select:expr, $help:literal;)+) => {
        $($writer.cached_gauge($name, $help, $samples($select))?;)+
    };
}
pub(super) use cached_gauges;

/// The sample of an info-style family: what it says is in the labels, the value is 1.
pub fn info<L>(labels: L) -> (L, f64) {
    (labels, 1.0)
}

/// For every item and every value of `all` (the values of an enum: a one-hot state, a count
/// per reason), `sample(item, value)`: a family with a sample per item and value.
pub fn per_value<T: Copy, V, S>(
    items: impl Iterator<Item = T>,
    all: impl IntoIterator<Item = V> + Clone,
    sample: impl Fn(T, V) -> S + Copy,
) -> impl Iterator<Item = S> {
    items.flat_map(move |item| {
        all.clone()
            .into_iter()
            .map(move |value| sample(item, value))
    })
}

/// 1.0 for true, 0.0 for false.
pub fn flag(value: bool) -> f64 {
    if value {
        1.0
    } else {
        0.0
    }
}

/// `(value, 1)` for `actual` and `(known, 0)` for every other known value; an unknown
/// `actual` is added, so a value never seen before is exported rather than dropped.
pub fn one_hot<'a>(
    actual: &'a str,
    known: &'static [&'static str],
) -> impl Iterator<Item = (&'a str, f64)> {
    let extra = (!known.contains(&actual)).then_some((actual, 1.0));
    known
        .iter()
        .map(move |&value| (value, flag(value == actual)))
        .chain(extra)
}
