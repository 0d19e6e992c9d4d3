//! The one place where metric families are written: descriptor once, then its samples.

use std::fmt;

use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, NoLabelSet};
use prometheus_client::metrics::MetricType;

/// Appended to every help text: values come from the last poll, not from this scrape.
const CACHED: &str =
    " Cached: value as of the last poll (see patroni_exporter_last_poll_timestamp_seconds).";

/// Writes families through a prometheus-client [`DescriptorEncoder`].
pub struct FamilyWriter<'e> {
    encoder: DescriptorEncoder<'e>,
}

impl<'e> FamilyWriter<'e> {
    pub fn new(encoder: DescriptorEncoder<'e>) -> FamilyWriter<'e> {
        FamilyWriter { encoder }
    }

    /// A gauge family; nothing is written when there are no samples, so an absent value
    /// (e.g. no timeline reported) is absent from the output rather than a fake zero.
    pub fn gauge<L: EncodeLabelSet>(
        &mut self,
        name: &str,
        help: &str,
        samples: impl IntoIterator<Item = (L, f64)>,
    ) -> fmt::Result {
        let mut samples = samples.into_iter().peekable();
        if samples.peek().is_none() {
            return Ok(());
        }
        let mut metric = self
            .encoder
            .encode_descriptor(name, help, None, MetricType::Gauge)?;
        for (labels, value) in samples {
            let mut sample = metric.encode_family(&labels)?;
            if value.fract() == 0.0 && value.abs() < 9.0e15 {
                // Integers print without a trailing `.0`, as every other exporter does.
                sample.encode_gauge(&(value as i64))?;
            } else {
                sample.encode_gauge(&value)?;
            }
        }
        Ok(())
    }

    /// Like [`FamilyWriter::gauge`], with the "cached" note appended to the help text.
    pub fn cached_gauge<L: EncodeLabelSet>(
        &mut self,
        name: &str,
        help: &str,
        samples: impl IntoIterator<Item = (L, f64)>,
    ) -> fmt::Result {
        self.gauge(name, &cached_help(help), samples)
    }

    /// A counter family. `name` is given without `_total`; the encoder appends it.
    pub fn counter<L: EncodeLabelSet>(
        &mut self,
        name: &str,
        help: &str,
        samples: impl IntoIterator<Item = (L, u64)>,
    ) -> fmt::Result {
        let mut samples = samples.into_iter().peekable();
        if samples.peek().is_none() {
            return Ok(());
        }
        let help = cached_help(help);
        let mut metric = self
            .encoder
            .encode_descriptor(name, &help, None, MetricType::Counter)?;
        for (labels, value) in samples {
            metric
                .encode_family(&labels)?
                .encode_counter::<NoLabelSet, u64, f64>(&value, None)?;
        }
        Ok(())
    }
}

fn cached_help(help: &str) -> String {
    format!("{help}{CACHED}")
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
