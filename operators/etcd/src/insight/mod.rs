//! Deep insight into the members: their own `/metrics` (scraped by [`scrape()`]) judged
//! over time by the [`Detector`], which raises an [`Abnormality`] when a member's leader
//! changes or disk latency depart from the normal.
//!
//! The per-cluster task calls, for each member every ~10 s:
//!
//! ```ignore
//! let sample = insight::scrape(&insight::member_metrics_url(&names, ordinal)).await?;
//! let found = detector.observe(&names.member(ordinal), sample);
//! metrics.set_abnormalities(&names.cluster, &names.member(ordinal), &found);
//! ```

pub mod detector;
pub mod sample;
pub mod scrape;

pub use detector::{Abnormality, Detector, Kind, Thresholds};
pub use sample::Sample;
pub use scrape::{ScrapeError, fetch, member_metrics_url, scrape};
