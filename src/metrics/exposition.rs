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
    render_sized(registry, format, 64 * 1024)
}

/// Encodes the registry in `format` into a buffer of `capacity` bytes to start with (e.g. the
/// size of the previous rendering: a fleet's output is megabytes, and growing the buffer by
/// doubling copies it several times).
///
/// The text format is converted while encoding ([`TextWriter`]), without an intermediate
/// OpenMetrics copy of the whole output.
pub fn render_sized(registry: &Registry, format: Format, capacity: usize) -> String {
    let mut out = String::with_capacity(capacity);
    // Writing into a String cannot fail, and the collectors only fail on writer errors.
    match format {
        Format::OpenMetrics => {
            encode(&mut out, registry).expect("encoding into a String cannot fail");
        }
        Format::PrometheusText => {
            let mut writer = TextWriter::new(&mut out);
            encode(&mut writer, registry).expect("encoding into a String cannot fail");
            writer.finish();
        }
    }
    out
}

/// A [`fmt::Write`] that turns OpenMetrics as written by prometheus-client into the 0.0.4 text
/// format on the fly, with the rules of the whole-text conversion its tests compare it with
/// (`openmetrics_to_prometheus_text`). Sample lines
/// (almost all the bytes) pass straight through; only `#` lines are held, one at a time,
/// and a `# HELP` line until the `# TYPE` line after it says whether it is a counter.
pub struct TextWriter<'a> {
    out: &'a mut String,
    /// The `#` line being received, without its newline.
    comment: String,
    in_comment: bool,
    at_line_start: bool,
    /// A complete `# HELP` line waiting for its `# TYPE`.
    pending_help: Option<String>,
}

impl<'a> TextWriter<'a> {
    pub fn new(out: &'a mut String) -> TextWriter<'a> {
        TextWriter {
            out,
            comment: String::with_capacity(256),
            in_comment: false,
            at_line_start: true,
            pending_help: None,
        }
    }

    /// Writes what is still held (an unterminated line, a HELP without TYPE).
    pub fn finish(mut self) {
        if self.in_comment {
            let line = std::mem::take(&mut self.comment);
            self.comment_line(&line);
        }
        self.flush_help();
    }

    fn flush_help(&mut self) {
        if let Some(help) = self.pending_help.take() {
            self.out.push_str(&help);
            self.out.push('\n');
        }
    }

    fn comment_line(&mut self, line: &str) {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            return;
        }
        if line.starts_with("# HELP ") {
            self.flush_help();
            self.pending_help = Some(line.to_owned());
            return;
        }
        if let (Some(kind), Some(help)) = (line.strip_prefix("# TYPE "), &self.pending_help) {
            let name = help["# HELP ".len()..]
                .split(' ')
                .next()
                .unwrap_or_default();
            if kind.strip_prefix(name) == Some(" counter") {
                let rest = &help["# HELP ".len() + name.len()..];
                self.out.push_str("# HELP ");
                self.out.push_str(name);
                self.out.push_str("_total");
                self.out.push_str(rest);
                self.out.push_str("\n# TYPE ");
                self.out.push_str(name);
                self.out.push_str("_total counter\n");
                self.pending_help = None;
                return;
            }
        }
        self.flush_help();
        self.out.push_str(line);
        self.out.push('\n');
    }
}

impl std::fmt::Write for TextWriter<'_> {
    fn write_str(&mut self, mut text: &str) -> std::fmt::Result {
        while !text.is_empty() {
            if self.at_line_start {
                self.at_line_start = false;
                self.in_comment = text.starts_with('#');
                if !self.in_comment {
                    self.flush_help();
                }
            }
            let (chunk, rest, line_ends) = match text.find('\n') {
                Some(end) => (&text[..end], &text[end + 1..], true),
                None => (text, "", false),
            };
            if self.in_comment {
                self.comment.push_str(chunk);
                if line_ends {
                    let line = std::mem::take(&mut self.comment);
                    self.comment_line(&line);
                    self.comment = line;
                    self.comment.clear();
                }
            } else {
                self.out.push_str(chunk);
                if line_ends {
                    self.out.push('\n');
                }
            }
            if line_ends {
                self.at_line_start = true;
                self.in_comment = false;
            }
            text = rest;
        }
        Ok(())
    }
}

/// Converts OpenMetrics text as written by prometheus-client into the 0.0.4 text format: the
/// straightforward whole-text version, the oracle the streaming [`TextWriter`] is tested
/// against.
#[cfg(test)]
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
    fn streaming_conversion_matches_the_whole_text_one() {
        use std::fmt::Write;
        let om = "# HELP a_changes Changes.\n# TYPE a_changes counter\n# UNIT a_changes changes\na_changes_total{scope=\"x\"} 3\n# HELP b Gauge.\n# TYPE b gauge\nb 1\nb{x=\"#\"} 2\n# HELP c_total Odd.\n# TYPE c_total gauge\nc_total 1\n# EOF\n";
        let expected = openmetrics_to_prometheus_text(om);
        // Whole, then cut at every position, then one byte at a time.
        for cut in 0..=om.len() {
            let mut out = String::new();
            let mut writer = TextWriter::new(&mut out);
            writer.write_str(&om[..cut]).unwrap();
            writer.write_str(&om[cut..]).unwrap();
            writer.finish();
            assert_eq!(out, expected, "cut at {cut}");
        }
        let mut out = String::new();
        let mut writer = TextWriter::new(&mut out);
        for (i, _) in om.char_indices() {
            writer.write_str(&om[i..i + 1]).unwrap();
        }
        writer.finish();
        assert_eq!(out, expected);
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
