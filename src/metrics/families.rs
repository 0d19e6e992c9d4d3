//! The one place where metric families are declared and written: the catalog of every
//! family (name, help, type), and the samples of one cluster, one chunk per family of it.
//!
//! A family is declared once, as a [`Family`] constant ([`declare_families!`]), and written
//! by that constant: [`FamilyWriter::write`] files the samples under the family's own entry
//! of the [`Catalog`], whatever was written before it. So a family written conditionally, out
//! of order, or not at all leaves every other family's samples under their own `# HELP` and
//! `# TYPE` (the chunks come out in catalog order, one per family, empty when nothing was
//! written), in a release build as in a debug one: the position of a write says nothing.
//! Writes in catalog order (what the encoders do) find their family without a lookup and
//! need no reordering, so they cost what the positional writer of before cost.
//!
//! The sample lines are written here by hand, byte for byte as prometheus-client's text
//! encoder writes them (the tests compare the two), and are the same in OpenMetrics and in
//! the 0.0.4 text format; only the descriptors differ ([`Descriptor`]).

use std::collections::HashMap;
use std::fmt;

use super::exposition::Format;
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

/// A metric family as declared: its name, help text and type. Declared once per family
/// (with [`declare_families!`]) and written by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Family {
    pub name: &'static str,
    help: &'static str,
    kind: Kind,
    /// Whether the help text gets the [`CACHED`] note.
    cached: bool,
}

impl Family {
    /// A gauge whose value is read when it is written.
    pub const fn gauge(name: &'static str, help: &'static str) -> Family {
        Family {
            name,
            help,
            kind: Kind::Gauge,
            cached: false,
        }
    }

    /// A gauge whose value is that of the last poll: [`CACHED`] is appended to its help text.
    pub const fn cached_gauge(name: &'static str, help: &'static str) -> Family {
        Family {
            cached: true,
            ..Family::gauge(name, help)
        }
    }

    /// A counter of the poller's, `name` without `_total` (the samples get it); its help text
    /// gets the [`CACHED`] note.
    pub const fn counter(name: &'static str, help: &'static str) -> Family {
        Family {
            name,
            help,
            kind: Kind::Counter,
            cached: true,
        }
    }

    /// A counter read when it is written (the exporter's own), `name` without `_total`.
    pub const fn live_counter(name: &'static str, help: &'static str) -> Family {
        Family {
            cached: false,
            ..Family::counter(name, help)
        }
    }
}

/// Declares a module's families, once each, in the order they are exposed:
/// `declare_families! { IDENT: constructor("name", "help"); ... }` defines a [`Family`]
/// constant per row (`constructor` is one of [`Family`]'s: `gauge`, `cached_gauge`,
/// `counter`, `live_counter`) and `FAMILIES`, the module's part of the catalog. The braces keep
/// rustfmt from spreading a row over lines.
macro_rules! declare_families {
    ($($id:ident: $constructor:ident($name:literal, $help:literal);)+) => {
        $(const $id: $crate::metrics::families::Family =
            $crate::metrics::families::Family::$constructor($name, $help);)+
        /// This module's families, in the order they are exposed.
        pub(super) const FAMILIES: &[$crate::metrics::families::Family] = &[$($id),+];
    };
}
pub(super) use declare_families;

/// One family's descriptor, in both exposition formats.
#[derive(Debug, Clone)]
pub struct Descriptor {
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
                    openmetrics: header.clone(),
                    text: header,
                }
            }
            Kind::Counter => Descriptor {
                openmetrics: format!("# HELP {name} {help}\n# TYPE {name} counter\n"),
                text: format!("# HELP {name}_total {help}\n# TYPE {name}_total counter\n"),
            },
        }
    }

    /// The descriptor in `format`.
    pub fn text(&self, format: Format) -> &str {
        match format {
            Format::OpenMetrics => &self.openmetrics,
            Format::PrometheusText => &self.text,
        }
    }

    /// The descriptor of a declared family.
    pub fn of(family: &Family) -> Descriptor {
        if family.cached {
            Descriptor::new(
                family.name,
                &format!("{}{CACHED}", family.help),
                family.kind,
            )
        } else {
            Descriptor::new(family.name, family.help, family.kind)
        }
    }
}

/// Every family a [`FamilyWriter`] may write, in the order they are exposed, with their
/// descriptors and an index by name.
#[derive(Debug)]
pub struct Catalog {
    families: Vec<Family>,
    descriptors: Vec<Descriptor>,
    by_name: HashMap<&'static str, usize>,
}

impl Catalog {
    /// The catalog of `families`, in that order.
    ///
    /// # Panics
    /// When two families have the same name: the output would hold two `# TYPE` for it.
    pub fn new(families: impl IntoIterator<Item = Family>) -> Catalog {
        let families: Vec<Family> = families.into_iter().collect();
        let mut by_name = HashMap::with_capacity(families.len());
        for (index, family) in families.iter().enumerate() {
            let previous = by_name.insert(family.name, index);
            assert!(previous.is_none(), "family {} declared twice", family.name);
        }
        Catalog {
            descriptors: families.iter().map(Descriptor::of).collect(),
            families,
            by_name,
        }
    }

    pub fn len(&self) -> usize {
        self.families.len()
    }

    /// The descriptor of family `index`.
    pub fn descriptor(&self, index: usize) -> &Descriptor {
        &self.descriptors[index]
    }

    /// Every family's name and descriptor, in catalog order.
    #[cfg(test)]
    pub fn entries(&self) -> impl Iterator<Item = (&'static str, &Descriptor)> {
        self.families
            .iter()
            .map(|family| family.name)
            .zip(&self.descriptors)
    }

    /// The index of the family named `name`, looking first at `hint` (where the next family
    /// in catalog order is): `None` for a family not in the catalog.
    fn index_of(&self, name: &str, hint: usize) -> Option<usize> {
        match self.families.get(hint) {
            // The same `&'static str` nearly always (the catalog copies the writers' statics):
            // its address and length before its bytes.
            Some(expected) if std::ptr::eq(expected.name, name) || expected.name == name => {
                Some(hint)
            }
            _ => self.by_name.get(name).copied(),
        }
    }
}

/// Where one write's samples are in the writer's buffer.
#[derive(Debug, Clone, Copy)]
struct Span {
    family: usize,
    start: u32,
    end: u32,
}

/// One cluster's samples in catalog order: `text`, and the end offset in it of each family's
/// chunk, one per catalog entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunks {
    pub text: String,
    pub ends: Vec<u32>,
}

/// Writes the samples of each family into one buffer, in the order they come, and files them
/// under their family: [`FamilyWriter::finish`] puts them in catalog order.
pub struct FamilyWriter<'c> {
    catalog: &'c Catalog,
    out: String,
    spans: Vec<Span>,
    /// The catalog index after the last family written: where a write in catalog order is.
    next: usize,
}

/// A sample value: a gauge's `f64` or a counter's `u64`.
pub trait SampleValue: Copy {
    fn write(self, out: &mut String);
}

impl SampleValue for f64 {
    fn write(self, out: &mut String) {
        if self.fract() == 0.0 && self.abs() < 9.0e15 {
            // Integers print without a trailing `.0`, as every other exporter does.
            out.push_str(itoa::Buffer::new().format(self as i64));
        } else {
            out.push_str(dtoa::Buffer::new().format(self));
        }
    }
}

impl SampleValue for u64 {
    fn write(self, out: &mut String) {
        out.push_str(itoa::Buffer::new().format(self));
    }
}

impl<'c> FamilyWriter<'c> {
    /// A writer for one cluster's samples of the families of `catalog`, appended to `out`
    /// (an empty buffer to reuse).
    pub fn new(catalog: &'c Catalog, out: String) -> FamilyWriter<'c> {
        FamilyWriter {
            catalog,
            out,
            spans: Vec::with_capacity(catalog.len()),
            next: 0,
        }
    }

    /// Writes the samples of `family` (a counter's get the `_total` suffix). A family without
    /// samples writes nothing, and a family no cluster has samples for is left out of the
    /// output, so an absent value (e.g. no timeline reported) is absent rather than a fake
    /// zero. A family not in the catalog is a bug: it panics in debug builds, and in release
    /// builds its samples are dropped (with no descriptor they would be invalid output).
    pub fn write<L: EncodeLabels, V: SampleValue>(
        &mut self,
        family: &Family,
        samples: impl IntoIterator<Item = (L, V)>,
    ) -> fmt::Result {
        let Some(index) = self.catalog.index_of(family.name, self.next) else {
            debug_assert!(false, "family {} is not in the catalog", family.name);
            return Ok(());
        };
        // The catalog's own entry: the type its descriptor says.
        let family = &self.catalog.families[index];
        let start = self.out.len();
        for (labels, value) in samples {
            self.out.push_str(family.name);
            if family.kind == Kind::Counter {
                self.out.push_str("_total");
            }
            labels.encode(&mut self.out);
            self.out.push(' ');
            value.write(&mut self.out);
            self.out.push('\n');
        }
        let offset = |at: usize| u32::try_from(at).expect("a cluster's samples fit in 4 GiB");
        self.spans.push(Span {
            family: index,
            start: offset(start),
            end: offset(self.out.len()),
        });
        self.next = index + 1;
        Ok(())
    }

    /// The samples in catalog order, in a `String` of their exact size, and the buffer
    /// written into, emptied, for the next writer.
    pub fn finish(self) -> (Chunks, String) {
        let FamilyWriter {
            catalog,
            mut out,
            mut spans,
            ..
        } = self;
        // What the encoders do: each family at most once, in catalog order. Otherwise the
        // spans are sorted by family (stably: a family written twice keeps its order).
        if !spans.windows(2).all(|pair| pair[0].family < pair[1].family) {
            spans.sort_by_key(|span| span.family);
        }
        let mut text = String::with_capacity(out.len());
        let mut ends = Vec::with_capacity(catalog.len());
        let mut spans = spans.into_iter().peekable();
        for family in 0..catalog.len() {
            while let Some(span) = spans.next_if(|span| span.family == family) {
                text.push_str(&out[span.start as usize..span.end as usize]);
            }
            ends.push(u32::try_from(text.len()).expect("a cluster's samples fit in 4 GiB"));
        }
        out.clear();
        (Chunks { text, ends }, out)
    }
}

/// Families that differ only in the value they read, one row each:
/// `families! { writer, samples; FAMILY, select; ... }` writes
/// `writer.write(&FAMILY, samples(select))?` for every row. A family that reads one more
/// field of the same source is then one row, not a four-line call; the braces keep rustfmt
/// from spreading a row over lines. Returns early on an error, as `?`.
macro_rules! families {
    ($writer:expr, $samples:expr; $($family:ident, $select:expr;)+) => {
        $($writer.write(&$family, $samples($select))?;)+
    };
}
pub(super) use families;

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
