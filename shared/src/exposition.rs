//! A parser of the Prometheus text exposition format (version 0.0.4), as etcd and Kafka's
//! JMX exporter serve it on `/metrics`. Only sample lines matter here: comments (`# HELP`, `# TYPE`) are skipped,
//! since a histogram's `_bucket`, `_sum` and `_count` series are recognisable by name.

/// One sample line: `name{label="value",...} value [timestamp]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// Metric name, e.g. `etcd_disk_wal_fsync_duration_seconds_bucket`.
    pub name: String,
    /// Label pairs in the order written.
    pub labels: Vec<(String, String)>,
    /// The sample value (`+Inf`, `-Inf` and `NaN` included).
    pub value: f64,
}

impl Series {
    /// The value of label `name`, if the series has it.
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
}

/// The value of the first of `series` named `name` with every label of `labels`, if any.
pub fn value(series: &[Series], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    series.iter().find(|s| s.name == name && labels.iter().all(|(k, v)| s.label(k) == Some(*v))).map(|s| s.value)
}

/// Why a text could not be read as the exposition format.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("line {line}: {reason}")]
pub struct ParseError {
    /// 1-based line number.
    pub line: usize,
    /// What was wrong with it.
    pub reason: String,
}

/// Every sample line of `text`, in order.
pub fn parse(text: &str) -> Result<Vec<Series>, ParseError> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        out.push(parse_line(line).map_err(|reason| ParseError { line: i + 1, reason })?);
    }
    Ok(out)
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

fn parse_line(line: &str) -> Result<Series, String> {
    let name_end = line.find(|c: char| !is_name_char(c)).unwrap_or(line.len());
    let name = &line[..name_end];
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return Err(format!("no metric name at the start of {line:?}"));
    }
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(body) = rest.strip_prefix('{') {
        rest = parse_labels(body, &mut labels)?;
    }
    let mut fields = rest.split_whitespace();
    let value = fields.next().ok_or_else(|| format!("{name}: no value"))?;
    let value: f64 = value.parse().map_err(|_| format!("{name}: value {value:?} is not a number"))?;
    // An optional timestamp (integer milliseconds) may follow; nothing else may.
    match (fields.next(), fields.next()) {
        (None, _) => {}
        (Some(ts), None) if ts.parse::<i64>().is_ok() => {}
        _ => return Err(format!("{name}: unexpected text after the value")),
    }
    Ok(Series { name: name.to_string(), labels, value })
}

/// Reads `label="value",...}` into `labels`; returns what follows the closing brace.
fn parse_labels<'a>(mut rest: &'a str, labels: &mut Vec<(String, String)>) -> Result<&'a str, String> {
    loop {
        rest = rest.trim_start();
        if let Some(after) = rest.strip_prefix('}') {
            return Ok(after);
        }
        let key_end = rest.find(|c: char| !is_name_char(c)).unwrap_or(rest.len());
        let key = &rest[..key_end];
        if key.is_empty() {
            return Err(format!("expected a label name at {rest:?}"));
        }
        rest = rest[key_end..].trim_start();
        rest = rest.strip_prefix('=').ok_or_else(|| format!("label {key}: expected '='"))?.trim_start();
        rest = rest.strip_prefix('"').ok_or_else(|| format!("label {key}: value is not quoted"))?;
        let mut value = String::new();
        let mut chars = rest.char_indices();
        let end = loop {
            match chars.next() {
                Some((i, '"')) => break i,
                Some((_, '\\')) => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, c @ ('\\' | '"'))) => value.push(c),
                    Some((_, c)) => return Err(format!("label {key}: unknown escape \\{c}")),
                    None => return Err(format!("label {key}: unterminated value")),
                },
                Some((_, c)) => value.push(c),
                None => return Err(format!("label {key}: unterminated value")),
            }
        };
        labels.push((key.to_string(), value));
        rest = rest[end + 1..].trim_start();
        if let Some(after) = rest.strip_prefix(',') {
            rest = after;
        } else if !rest.starts_with('}') {
            return Err(format!("label {key}: expected ',' or '}}' after the value"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_is_found_by_name_and_labels() {
        let series = parse("a{x=\"1\",y=\"2\"} 3\na{x=\"4\"} 5\nb 6\n").expect("valid");
        assert_eq!(value(&series, "a", &[]), Some(3.0));
        assert_eq!(value(&series, "a", &[("x", "4")]), Some(5.0));
        assert_eq!(value(&series, "a", &[("x", "1"), ("y", "2")]), Some(3.0));
        assert_eq!(value(&series, "a", &[("x", "1"), ("y", "9")]), None);
        assert_eq!(value(&series, "b", &[]), Some(6.0));
        assert_eq!(value(&series, "c", &[]), None);
    }

    #[test]
    fn sample_lines_are_read_and_comments_skipped() {
        let text = "# HELP etcd_server_has_leader Whether or not a leader exists.\n\
                    # TYPE etcd_server_has_leader gauge\n\
                    etcd_server_has_leader 1\n\
                    \n\
                    etcd_disk_wal_fsync_duration_seconds_bucket{le=\"+Inf\"} 7\n\
                    etcd_server_quota_backend_bytes 2.147483648e+09\n\
                    odd{a=\"x\\\"y\\\\z\\n\", b = \"\",} NaN 1700000000000\n";
        let series = parse(text).expect("valid exposition");
        assert_eq!(series.len(), 4);
        assert_eq!(series[0], Series { name: "etcd_server_has_leader".into(), labels: vec![], value: 1.0 });
        assert_eq!(series[1].label("le"), Some("+Inf"));
        assert_eq!(series[1].value, 7.0);
        assert_eq!(series[2].value, 2_147_483_648.0);
        assert_eq!(series[3].label("a"), Some("x\"y\\z\n"));
        assert_eq!(series[3].label("b"), Some(""));
        assert!(series[3].value.is_nan());
    }

    #[test]
    fn malformed_lines_name_their_number() {
        for (text, needle) in [
            ("ok 1\n{le=\"1\"} 2", "line 2: no metric name"),
            ("m{le=\"1} 2", "unterminated"),
            ("m{le=1} 2", "not quoted"),
            ("m{le=\"1\" x=\"2\"} 2", "expected ','"),
            ("m", "no value"),
            ("m one", "not a number"),
            ("m 1 2 3", "unexpected text"),
            ("m{a=\"\\x\"} 1", "unknown escape"),
        ] {
            let err = parse(text).expect_err(text).to_string();
            assert!(err.contains(needle), "{text:?}: {err}");
        }
    }
}
