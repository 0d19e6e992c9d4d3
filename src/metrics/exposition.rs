//! Renders the registry as OpenMetrics or as the classic Prometheus text format (0.0.4),
//! whichever the scraper asks for in `Accept`.
//!
//! prometheus-client only writes OpenMetrics. The classic format differs in three ways that
//! matter, converted here by hand: a counter family is named with its `_total` suffix in
//! `# HELP`/`# TYPE` (OpenMetrics names the family without it), there is no `# UNIT` line,
//! and there is no `# EOF` terminator. Everything else (escaping, sample lines) is identical.

use prometheus_client::encoding::text::encode;
use prometheus_client::registry::Registry;

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

/// Encodes the registry in `format`.
pub fn render(registry: &Registry, format: Format) -> String {
    let mut openmetrics = String::with_capacity(64 * 1024);
    // Writing into a String cannot fail, and the collectors only fail on writer errors.
    encode(&mut openmetrics, registry).expect("encoding into a String cannot fail");
    match format {
        Format::OpenMetrics => openmetrics,
        Format::PrometheusText => openmetrics_to_prometheus_text(&openmetrics),
    }
}

/// Converts OpenMetrics text as written by prometheus-client into the 0.0.4 text format.
pub fn openmetrics_to_prometheus_text(openmetrics: &str) -> String {
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
                .is_some_and(|t| t.strip_prefix(name).is_some_and(|kind| kind == " counter"));
            if is_counter {
                out.push_str("# HELP ");
                out.push_str(name);
                out.push_str("_total");
                out.push_str(&rest[name.len()..]);
                out.push('\n');
                lines.next();
                out.push_str("# TYPE ");
                out.push_str(name);
                out.push_str("_total counter\n");
                continue;
            }
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_get_total_in_descriptors_and_eof_goes() {
        let om = "# HELP a_changes Changes.\n# TYPE a_changes counter\na_changes_total{scope=\"x\"} 3\n# HELP b Gauge.\n# TYPE b gauge\nb 1\n# EOF\n";
        assert_eq!(
            openmetrics_to_prometheus_text(om),
            "# HELP a_changes_total Changes.\n# TYPE a_changes_total counter\na_changes_total{scope=\"x\"} 3\n# HELP b Gauge.\n# TYPE b gauge\nb 1\n"
        );
    }

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
