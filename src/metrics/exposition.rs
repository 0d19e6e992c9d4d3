//! The exposition formats: OpenMetrics or the classic Prometheus text format (0.0.4),
//! whichever the scraper asks for in `Accept`.
//!
//! They differ in two ways that matter here: a counter family is named with its `_total`
//! suffix in `# HELP`/`# TYPE` in the classic format (OpenMetrics names the family without
//! it), and only OpenMetrics ends with `# EOF`. Sample lines and escaping are identical, so
//! a cluster's samples are encoded once for both (`metrics::EncodedCluster`) and only the
//! descriptors are kept per format (`metrics::families::Descriptor`).

/// The exposition formats served on `/metrics`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    OpenMetrics,
    PrometheusText,
}

impl Format {
    /// Picks the format from an `Accept` header: OpenMetrics when asked for, else classic text.
    pub fn negotiate(accept: Option<&str>) -> Format {
        match accept {
            Some(accept) if accept.contains("application/openmetrics-text") => Format::OpenMetrics,
            _ => Format::PrometheusText,
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Format::PrometheusText => "text/plain; version=0.0.4; charset=utf-8",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation() {
        assert_eq!(Format::negotiate(None), Format::PrometheusText);
        assert_eq!(
            Format::negotiate(Some(
                "application/openmetrics-text;version=1.0.0,text/plain;q=0.5"
            )),
            Format::OpenMetrics
        );
        assert_eq!(
            Format::negotiate(Some("text/plain")),
            Format::PrometheusText
        );
    }
}
