//! The HTML report rendered by a real browser: headless Chromium takes a screenshot of the
//! page and the test reads its pixels. It checks what the page is for — the staircase shows
//! confirmed (green), partial (amber) and failed (red) levels — which no text assertion on
//! the HTML can: a broken style sheet or SVG still produces the right strings.
//!
//! Chromium comes from Debian (`scripts/deps.sh` installs it, so CI has it); without it the
//! test says so and passes. The page and its screenshot are kept in Cargo's test temp
//! directory (`target/tmp/capability-report.{html,png}`) for a human to look at.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use statecraft_capability::evidence::{self, Outcome, Record};
use statecraft_capability::render::{Format, render};
use statecraft_capability::report::{WorkspaceOptions, workspace};

fn chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("STATECRAFT_CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|dir| ["chromium", "chromium-browser", "google-chrome"].map(|b| dir.join(b)))
        .find(|p| p.is_file())
}

fn record(test: &str, criteria: &[&str], result: Outcome, fingerprint: &str) -> Record {
    Record {
        figures: serde_json::json!({"first_write_seconds": 1.5}),
        ..support::record("mysql", test, criteria, result, fingerprint)
    }
}

/// Counts pixels of exactly `rgb` (the inside of the staircase's filled steps is flat
/// colour) in the rows `rows` of an image `width` pixels wide, left of column `max_x`.
fn count(
    pixels: &[u8],
    channels: usize,
    width: usize,
    rows: std::ops::Range<usize>,
    max_x: usize,
    rgb: [u8; 3],
) -> usize {
    pixels
        .chunks_exact(channels)
        .enumerate()
        .filter(|(i, p)| rows.contains(&(i / width)) && i % width < max_x && p[..3] == rgb)
        .count()
}

#[test]
fn the_html_report_renders_its_staircase_in_chromium() {
    let Some(browser) = chromium() else {
        eprintln!("skipping the screenshot test: no chromium on PATH (scripts/deps.sh installs it)");
        return;
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let evidence_dir = tempfile::tempdir().unwrap();
    let fp = evidence::fingerprint(&root, "mysql").unwrap().hash;
    for r in [
        record(
            "mysql_cluster_becomes_ready",
            &["L1.install", "L1.validation", "L1.config", "L4.metrics", "L4.events"],
            Outcome::Passed,
            &fp,
        ),
        record(
            "mysql_failover",
            &["L3.failover", "L3.switchover", "L3.scaling", "L3.reconfiguration"],
            Outcome::Passed,
            &fp,
        ),
        record("mysql_backup_and_restore", &["L3.backup", "L3.restore"], Outcome::Failed, &fp),
        record("mysql_rolling_restart", &["L2.rolling-restart"], Outcome::Passed, &fp),
    ] {
        evidence::append(evidence_dir.path(), &r).unwrap();
    }
    let report = workspace(&WorkspaceOptions {
        root: root.clone(),
        evidence: Some(evidence_dir.path().to_path_buf()),
        only: vec!["mysql".into()],
    })
    .unwrap();
    let op = &report.operators[0];
    assert_eq!(op.level, 1, "L1 confirmed, L2 partial (adoption not claimed), L3 failed (backup), L4 confirmed");

    let keep = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let html_path = keep.join("capability-report.html");
    let png_path = keep.join("capability-report.png");
    std::fs::write(&html_path, render(&report, Format::Html, false).unwrap()).unwrap();
    let _ = std::fs::remove_file(&png_path);
    let profile = tempfile::tempdir().unwrap();
    let out = Command::new(&browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--force-device-scale-factor=1",
            &format!("--user-data-dir={}", profile.path().display()),
            &format!("--screenshot={}", png_path.display()),
            "--window-size=1280,1400",
            &format!("file://{}", html_path.display()),
        ])
        .output()
        .expect("chromium runs");
    assert!(png_path.is_file(), "no screenshot; chromium said: {}", String::from_utf8_lossy(&out.stderr));
    eprintln!("screenshot: {}", png_path.display());

    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&png_path).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut pixels = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut pixels).unwrap();
    assert_eq!((info.width, info.height), (1280, 1400));
    let channels = info.color_type.samples();
    let pixels = &pixels[..info.buffer_size()];

    // The staircase sits top left, above the criteria table (y < 340 at this width); its
    // steps are 88 px wide, so a confirmed step is at least 88 x 34 px of green. The badge
    // (green too) is right of x = 600.
    let (w, h) = (info.width as usize, info.height as usize);
    let stairs = |rgb| count(pixels, channels, w, 80..340, 600, rgb);
    let green = stairs([0x1a, 0x7f, 0x37]);
    let amber = stairs([0xbf, 0x87, 0x00]);
    let red = stairs([0xcf, 0x22, 0x2e]);
    let track = stairs([0xea, 0xee, 0xf2]);
    assert!(green > 2 * 88 * 30, "levels 1 and 4 are confirmed, in green: {green} px");
    assert!(amber > 88 * 3 && amber < 88 * 40, "level 2 is partial (1/5), amber: {amber} px");
    assert!(red > 88 * 60, "level 3 failed (8/10), red: {red} px");
    assert!(track > 88 * 120, "level 5 is an empty step: {track} px");
    // The rest of the page is the table on white, not coloured rows: outside the chips, no
    // large areas of status colour.
    let table_green = count(pixels, channels, w, 340..h, w, [0x1a, 0x7f, 0x37]);
    assert!(table_green < 40_000, "only the chips are green in the table: {table_green} px");
    let text = count(pixels, channels, w, 340..h, w, [0x1f, 0x23, 0x28]);
    assert!(text > 2_000, "the table has text: {text} px");
}
