//! The replication position a dump was taken at, read from the dump's comments while it
//! streams past, in constant memory.
//!
//! What MariaDB 10.11's `mariadb-dump --single-transaction --master-data=2 --gtid` writes:
//!
//! ```text
//! -- CHANGE MASTER TO MASTER_USE_GTID=slave_pos;            (header)
//! -- CHANGE MASTER TO MASTER_LOG_FILE='mysql-bin.000001', MASTER_LOG_POS=910;
//! -- Current Database: `app`                                 (first schema: user content begins)
//! ...
//! -- The deferred gtid setting for slave corresponding to the master-data CHANGE-MASTER follows
//! -- SET GLOBAL gtid_slave_pos='0-100-3';                    (after all data)
//! ...
//! -- Dump completed on 2026-11-29 23:05:05
//! ```
//!
//! The GTID line is *deferred* to the end (so that, uncommented, it would run after a
//! restored `mysql.gtid_slave_pos` table), so it cannot be taken from the first kilobytes.
//! Older releases print it in the header instead; both places are accepted.
//!
//! User content can contain lines that look like these comments: a stored procedure's body
//! keeps its newlines, so a procedure could carry `-- SET GLOBAL gtid_slave_pos='…';`. So a
//! GTID line counts only in the header (before the first `-- Current Database:`, where
//! nothing comes from users) or as the first one after the *last* "deferred" marker (nothing
//! from users follows the real marker). Data rows cannot fake anything: the dump escapes
//! newlines in string values.

use std::io::BufRead;

/// Lines starting with this are comments, the only lines the scanner looks into.
const COMMENT: &[u8] = b"--";
/// Comment lines longer than this are not any of the lines looked for; only this many bytes
/// of a line are kept, so memory stays constant whatever the dump contains.
const MAX_LINE: usize = 1024;

const CURRENT_DATABASE: &str = "-- Current Database:";
const DEFERRED_MARKER: &str = "-- The deferred gtid setting";
const GTID_PREFIX: &str = "-- SET GLOBAL gtid_slave_pos='";
const GTID_SUFFIX: &str = "';";
const BINLOG_PREFIX: &str = "-- CHANGE MASTER TO MASTER_LOG_FILE='";
const COMPLETED: &str = "-- Dump completed";

/// Where a dump's snapshot is in the source's history.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DumpPosition {
    /// The GTID position (MariaDB `gtid_binlog_pos` form, `domain-server-seq[,…]`; empty for
    /// a server that never logged a transaction). Replication or point-in-time recovery from
    /// the backup continues after it.
    pub gtid: Option<String>,
    /// The source's binary log file at the snapshot.
    pub binlog_file: Option<String>,
    /// The offset in that file.
    pub binlog_position: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// At the first byte of a line.
    LineStart,
    /// In a comment line: its bytes are collected (up to [`MAX_LINE`]).
    Comment,
    /// In any other line: skipped up to its newline.
    Skip,
}

/// Reads a dump's position comments from its bytes, fed in chunks of any size.
#[derive(Debug, Clone)]
pub struct DumpScanner {
    mode: Mode,
    line: Vec<u8>,
    truncated: bool,
    in_header: bool,
    after_marker: bool,
    header_gtid: Option<String>,
    trailer_gtid: Option<String>,
    binlog: Option<(String, u64)>,
    completed: bool,
}

impl Default for DumpScanner {
    fn default() -> Self {
        DumpScanner {
            mode: Mode::LineStart,
            line: Vec::with_capacity(MAX_LINE),
            truncated: false,
            in_header: true,
            after_marker: false,
            header_gtid: None,
            trailer_gtid: None,
            binlog: None,
            completed: false,
        }
    }
}

impl DumpScanner {
    /// A scanner at the start of a dump.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes the next bytes of the dump.
    pub fn feed(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            match self.mode {
                Mode::LineStart => {
                    match bytes[0] {
                        b'\n' => bytes = &bytes[1..],
                        b'-' => self.mode = Mode::Comment,
                        _ => {
                            // Content after the completion line means the dump did not end there.
                            self.completed = false;
                            self.mode = Mode::Skip;
                        }
                    }
                }
                Mode::Skip => match newline(bytes) {
                    Some(i) => {
                        bytes = &bytes[i + 1..];
                        self.mode = Mode::LineStart;
                    }
                    None => return,
                },
                Mode::Comment => {
                    let (part, rest, ended) = match newline(bytes) {
                        Some(i) => (&bytes[..i], &bytes[i + 1..], true),
                        None => (bytes, &bytes[bytes.len()..], false),
                    };
                    let room = MAX_LINE - self.line.len();
                    if part.len() > room {
                        self.truncated = true;
                    }
                    self.line.extend_from_slice(&part[..part.len().min(room)]);
                    bytes = rest;
                    if ended {
                        self.end_comment();
                        self.mode = Mode::LineStart;
                    }
                }
            }
        }
    }

    /// The position found so far (complete once the whole dump was fed).
    pub fn position(&self) -> DumpPosition {
        let (binlog_file, binlog_position) = match &self.binlog {
            Some((file, pos)) => (Some(file.clone()), Some(*pos)),
            None => (None, None),
        };
        DumpPosition {
            gtid: self.trailer_gtid.clone().or_else(|| self.header_gtid.clone()),
            binlog_file,
            binlog_position,
        }
    }

    /// Whether the last line was the dump's `-- Dump completed` line: mariadb-dump writes it
    /// only after everything else, so a dump cut short lacks it even if the process exited 0.
    pub fn completed(&self) -> bool {
        self.completed
    }

    /// Handles a whole comment line (the bytes before its newline).
    fn end_comment(&mut self) {
        let truncated = std::mem::take(&mut self.truncated);
        let line = std::mem::take(&mut self.line);
        let text = if truncated || !line.starts_with(COMMENT) { None } else { std::str::from_utf8(&line).ok() };
        self.completed = text.is_some_and(|t| t.starts_with(COMPLETED));
        if let Some(text) = text {
            self.comment(text.trim_end_matches('\r'));
        }
        self.line = line;
        self.line.clear();
    }

    fn comment(&mut self, text: &str) {
        if text.starts_with(CURRENT_DATABASE) {
            self.in_header = false;
        } else if text.starts_with(DEFERRED_MARKER) {
            // The last marker is the real one: forget GTID lines after an earlier one.
            self.after_marker = true;
            self.trailer_gtid = None;
        } else if let Some(gtid) = parse_gtid_line(text) {
            if self.after_marker {
                if self.trailer_gtid.is_none() {
                    self.trailer_gtid = Some(gtid);
                }
            } else if self.in_header {
                self.header_gtid = Some(gtid);
            }
        } else if self.in_header
            && let Some(binlog) = parse_binlog_line(text)
        {
            self.binlog = Some(binlog);
        }
    }
}

/// The index of the first newline: the scanner's only per-byte work, since the dump's
/// lines are long INSERTs. `BufRead::skip_until` runs the standard library's optimised
/// `memchr`; a plain `iter().position` is about 25 times slower in a debug build (about
/// 165 MiB/s, slower than the dump itself) where this runs in tests.
fn newline(bytes: &[u8]) -> Option<usize> {
    let mut reader = bytes;
    // Reading from a slice cannot fail.
    let read = reader.skip_until(b'\n').unwrap_or(0);
    (read > 0 && bytes[read - 1] == b'\n').then(|| read - 1)
}

/// `-- SET GLOBAL gtid_slave_pos='0-100-3';` → `0-100-3`, if the value is a GTID list.
fn parse_gtid_line(text: &str) -> Option<String> {
    let value = text.strip_prefix(GTID_PREFIX)?.strip_suffix(GTID_SUFFIX)?;
    is_gtid_list(value).then(|| value.to_string())
}

/// `-- CHANGE MASTER TO MASTER_LOG_FILE='mysql-bin.000001', MASTER_LOG_POS=910;`
fn parse_binlog_line(text: &str) -> Option<(String, u64)> {
    let rest = text.strip_prefix(BINLOG_PREFIX)?;
    let (file, rest) = rest.split_once('\'')?;
    let pos = rest.strip_prefix(", MASTER_LOG_POS=")?.strip_suffix(';')?;
    if file.is_empty() || file.contains(['/', '\\']) {
        return None;
    }
    Some((file.to_string(), pos.parse().ok()?))
}

/// `domain-server-seq` triples (decimal) separated by commas, or nothing.
pub fn is_gtid_list(s: &str) -> bool {
    s.is_empty()
        || s.split(',').all(|gtid| {
            let parts: Vec<&str> = gtid.split('-').collect();
            parts.len() == 3
                && parts.iter().all(|p| !p.is_empty() && p.len() <= 20 && p.bytes().all(|b| b.is_ascii_digit()))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shape of a real 10.11 dump (see the module documentation).
    const DUMP: &str = "/*M!999999\\- enable the sandbox mode */ \n\
        -- MariaDB dump 10.19  Distrib 10.11.19-MariaDB, for debian-linux-gnu (x86_64)\n\
        --\n\
        -- Host: 127.0.0.1    Database: \n\
        /*!40101 SET NAMES utf8mb4 */;\n\
        -- CHANGE MASTER TO MASTER_USE_GTID=slave_pos;\n\
        \n\
        -- CHANGE MASTER TO MASTER_LOG_FILE='mysql-bin.000001', MASTER_LOG_POS=910;\n\
        \n\
        --\n\
        -- Current Database: `app`\n\
        --\n\
        CREATE DATABASE `app`;\n\
        INSERT INTO `t` VALUES (1,'a\\n-- SET GLOBAL gtid_slave_pos=\\'9-9-9\\';');\n\
        \n\
        -- The deferred gtid setting for slave corresponding to the master-data CHANGE-MASTER follows\n\
        \n\
        -- Preferably use GTID to start replication from GTID position:\n\
        \n\
        -- SET GLOBAL gtid_slave_pos='0-100-3,1-101-7';\n\
        /*!40103 SET TIME_ZONE=@OLD_TIME_ZONE */;\n\
        \n\
        -- Dump completed on 2026-11-29 23:05:05\n";

    fn scan_in_chunks(dump: &[u8], chunk: usize) -> DumpScanner {
        let mut s = DumpScanner::new();
        for part in dump.chunks(chunk) {
            s.feed(part);
        }
        s
    }

    #[test]
    fn finds_the_deferred_gtid_and_the_binlog_coordinates_in_any_chunking() {
        for chunk in [1, 2, 3, 7, 64, 4096] {
            let s = scan_in_chunks(DUMP.as_bytes(), chunk);
            let p = s.position();
            assert_eq!(p.gtid.as_deref(), Some("0-100-3,1-101-7"), "chunk {chunk}");
            assert_eq!(p.binlog_file.as_deref(), Some("mysql-bin.000001"));
            assert_eq!(p.binlog_position, Some(910));
            assert!(s.completed(), "chunk {chunk}");
        }
    }

    #[test]
    fn an_empty_position_is_a_position() {
        let dump = DUMP.replace("0-100-3,1-101-7", "");
        assert_eq!(scan_in_chunks(dump.as_bytes(), 5).position().gtid.as_deref(), Some(""));
    }

    #[test]
    fn a_header_gtid_line_counts_as_older_releases_write_it_there() {
        let dump = "-- MariaDB dump\n-- SET GLOBAL gtid_slave_pos='0-1-2';\n-- Current Database: `a`\nUSE `a`;\n\
                    -- Dump completed on x\n";
        let s = scan_in_chunks(dump.as_bytes(), 3);
        assert_eq!(s.position().gtid.as_deref(), Some("0-1-2"));
        assert!(s.completed());
    }

    #[test]
    fn gtid_lines_from_user_content_are_ignored() {
        // A procedure body keeps its newlines: it can carry comment lines and even a fake
        // marker, but only before the real marker.
        let forged = "-- Current Database: `evil`\nCREATE PROCEDURE p() BEGIN\n\
                      -- The deferred gtid setting (fake)\n-- SET GLOBAL gtid_slave_pos='6-6-6';\nSELECT 1; END\n";
        let dump = DUMP.replace("-- Current Database: `app`\n", forged);
        assert_eq!(scan_in_chunks(dump.as_bytes(), 11).position().gtid.as_deref(), Some("0-100-3,1-101-7"));

        // Between the header and the marker, a GTID line counts for nothing.
        let dump = "-- Current Database: `a`\n-- SET GLOBAL gtid_slave_pos='6-6-6';\n-- Dump completed\n";
        assert_eq!(scan_in_chunks(dump.as_bytes(), 4).position().gtid, None);
        // And a binlog line outside the header neither.
        let dump = "-- Current Database: `a`\n-- CHANGE MASTER TO MASTER_LOG_FILE='x', MASTER_LOG_POS=1;\n";
        assert_eq!(scan_in_chunks(dump.as_bytes(), 4).position().binlog_file, None);
    }

    #[test]
    fn a_dump_cut_short_is_not_completed() {
        let cut = &DUMP[..DUMP.find("-- Dump completed").unwrap()];
        assert!(!scan_in_chunks(cut.as_bytes(), 9).completed());
        let more = format!("{DUMP}INSERT INTO t VALUES (1);\n");
        assert!(!scan_in_chunks(more.as_bytes(), 9).completed());
        // Without a final newline the completion line is not a whole line yet.
        assert!(!scan_in_chunks(DUMP.trim_end().as_bytes(), 9).completed());
    }

    #[test]
    fn long_lines_cost_no_memory_and_long_comments_are_ignored() {
        let mut s = DumpScanner::new();
        s.feed(b"INSERT INTO t VALUES ");
        for _ in 0..1000 {
            s.feed(&[b'x'; 4096]);
        }
        s.feed(b";\n-- ");
        s.feed(&[b'y'; 4 * MAX_LINE]);
        s.feed(b"\n-- SET GLOBAL gtid_slave_pos='0-1-1';\n");
        assert!(s.line.capacity() <= MAX_LINE);
        assert_eq!(s.position().gtid.as_deref(), Some("0-1-1"));
    }

    #[test]
    fn newlines_are_found_where_they_are() {
        assert_eq!(newline(b""), None);
        assert_eq!(newline(b"abc"), None);
        assert_eq!(newline(b"\n"), Some(0));
        assert_eq!(newline(b"ab\ncd\n"), Some(2));
        let long = [vec![b'x'; 100_000], b"\n".to_vec()].concat();
        assert_eq!(newline(&long), Some(100_000));
    }

    #[test]
    fn gtid_lists_are_validated() {
        for ok in ["", "0-100-3", "0-100-3,1-101-7", "4294967295-4294967295-18446744073709551615"] {
            assert!(is_gtid_list(ok), "{ok}");
        }
        for bad in ["0-100", "0-100-3,", "a-1-2", "0-1-2'; DROP", " 0-1-2", "0--2"] {
            assert!(!is_gtid_list(bad), "{bad}");
        }
        assert_eq!(parse_gtid_line("-- SET GLOBAL gtid_slave_pos='0-1-2; x';"), None);
    }
}
