//! Five-field cron schedules (minute hour day-of-month month day-of-week) of scheduled
//! backups, in a time zone, and retention ages. The cron language and the calendar
//! arithmetic are `croner`'s (numbers, ranges, steps, lists, names such as `MON` and
//! `JAN`, day-of-month OR day-of-week when both are set, as in Vixie cron), the zones
//! `chrono-tz`'s (the IANA database). One parser serves both validation (its errors name
//! the offending field of the expression, for the user) and scheduling (which slot is
//! due), so an expression that validates is exactly one that schedules.

use std::time::Duration as StdDuration;

use chrono::{DateTime, Duration, Timelike, Utc};
use chrono_tz::Tz;
use croner::Cron;
use croner::errors::CronError;
use croner::parser::{CronParser, Seconds, Year};

/// How late a slot may still be taken: a backup missed while the operator was down for
/// longer is skipped (the next slot takes it) rather than run at a surprising time.
pub const CATCH_UP: Duration = Duration::minutes(60);

/// The five fields, in order, as errors name them, with what each takes.
const FIELDS: [(&str, &str); 5] = [
    ("minute", "0-59"),
    ("hour", "0-23"),
    ("day-of-month", "1-31"),
    ("month", "1-12 or JAN-DEC"),
    ("day-of-week", "0-7 (0 and 7 are Sunday) or SUN-SAT"),
];

/// Why a schedule is refused; the message is meant for the user.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    /// Not five whitespace-separated fields.
    #[error("{0:?} must have five fields: minute hour day-of-month month day-of-week")]
    FieldCount(String),
    /// One field is malformed or out of range.
    #[error("{name} field {field:?}: {message}")]
    Field { name: &'static str, field: String, message: String },
    /// The fields are each valid but not together (no day ever matches).
    #[error("{expr:?}: {message}")]
    Expression { expr: String, message: String },
    /// Not a time zone of the IANA database.
    #[error("{0:?} is not an IANA time zone such as UTC or Europe/Berlin")]
    TimeZone(String),
}

/// A parsed schedule: the cron expression and the zone its wall-clock times are in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule {
    cron: Cron,
    zone: Tz,
}

/// Five fields, no seconds or years; `5/20` (a start with a step) as cron has always read it.
fn parser() -> CronParser {
    CronParser::builder().seconds(Seconds::Disallowed).year(Year::Disallowed).sloppy_ranges(true).build()
}

impl Schedule {
    /// Parses `expr` in UTC, or says which field is wrong and why.
    pub fn parse(expr: &str) -> Result<Schedule, ScheduleError> {
        Schedule::in_zone(expr, None)
    }

    /// Parses `expr` with its times in `zone` (an IANA name; `None` is UTC).
    pub fn in_zone(expr: &str, zone: Option<&str>) -> Result<Schedule, ScheduleError> {
        let fields: Vec<&str> = expr.split_whitespace().collect();
        if fields.len() != FIELDS.len() {
            return Err(ScheduleError::FieldCount(expr.to_owned()));
        }
        // croner's messages do not say which field is wrong: each field alone, the others
        // `*`, finds it.
        for (i, ((name, takes), field)) in FIELDS.iter().zip(&fields).enumerate() {
            let alone: Vec<&str> = (0..FIELDS.len()).map(|j| if i == j { *field } else { "*" }).collect();
            if let Err(e) = parser().parse(&alone.join(" ")) {
                let message = format!("{}; the {name} field takes {takes}, ranges, steps and lists", message(&e));
                return Err(ScheduleError::Field { name, field: (*field).to_owned(), message });
            }
        }
        let cron = parser()
            .parse(expr)
            .map_err(|e| ScheduleError::Expression { expr: expr.to_owned(), message: message(&e) })?;
        let zone = match zone {
            None => Tz::UTC,
            Some(name) => name.parse().map_err(|_| ScheduleError::TimeZone(name.to_owned()))?,
        };
        // A schedule that validates must schedule: `0 0 31 2 *` (February 31st) never does.
        let start = Utc::now().with_timezone(&zone);
        cron.find_next_occurrence(&start, false)
            .map_err(|e| ScheduleError::Expression { expr: expr.to_owned(), message: message(&e) })?;
        Ok(Schedule { cron, zone })
    }

    /// The latest slot at or before `now` and no older than [`CATCH_UP`], if any. Slots
    /// are wall-clock minutes in the schedule's zone: on a day whose clock springs forward
    /// a slot in the skipped hour is taken when the clock resumes; on a day whose clock
    /// falls back a slot in the repeated hour is taken once, at its first occurrence.
    ///
    /// The slots are found walking forward from the start of the window, as
    /// [`next_after`](Self::next_after) does, so that both agree on the repeated hour.
    pub fn due(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let minute = now.with_second(0)?.with_nanosecond(0)?;
        let mut slot = None;
        let mut from = (minute - CATCH_UP).with_timezone(&self.zone);
        let mut inclusive = true;
        while let Ok(next) = self.cron.find_next_occurrence(&from, inclusive) {
            if next.with_timezone(&Utc) > minute {
                break;
            }
            slot = Some(next.with_timezone(&Utc));
            (from, inclusive) = (next, false);
        }
        slot
    }

    /// The first slot after `t`.
    pub fn next_after(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.cron.find_next_occurrence(&t.with_timezone(&self.zone), false).ok().map(|s| s.with_timezone(&Utc))
    }
}

/// croner's message, for the user.
fn message(e: &CronError) -> String {
    match e {
        CronError::IllegalCharacters(_) => "not a number, range, step, list or name".into(),
        CronError::TimeSearchLimitExceeded => "no date ever matches".into(),
        CronError::ComponentError(m) | CronError::InvalidPattern(m) => {
            let m = m.trim_end_matches('.');
            let mut chars = m.chars();
            chars.next().map(|c| c.to_lowercase().chain(chars).collect()).unwrap_or_default()
        }
        other => other.to_string(),
    }
}

/// Parses a retention age such as `30s`, `15m`, `36h`, `7d` (what the CRD's pattern
/// admits); `None` for anything else, zero included.
pub fn parse_age(s: &str) -> Option<StdDuration> {
    let unit = s.chars().last()?;
    let n: u64 = s[..s.len() - unit.len_utf8()].parse().ok().filter(|n| *n > 0)?;
    let mult = match unit {
        's' => 1,
        'm' => 60,
        'h' => 3600,
        'd' => 86400,
        _ => return None,
    };
    n.checked_mul(mult).map(StdDuration::from_secs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, mo, d, h, mi, s).single().expect("valid time")
    }

    fn parse(expr: &str) -> Schedule {
        Schedule::parse(expr).expect(expr)
    }

    /// Whether the minute starting at `t` is a slot.
    fn is_slot(s: &Schedule, t: DateTime<Utc>) -> bool {
        s.due(t) == Some(t)
    }

    #[test]
    fn daily_slot_is_due_for_an_hour_then_skipped() {
        let s = parse("0 3 * * *");
        assert_eq!(s.due(at(2026, 11, 29, 3, 0, 42)), Some(at(2026, 11, 29, 3, 0, 0)));
        assert_eq!(s.due(at(2026, 11, 29, 3, 59, 0)), Some(at(2026, 11, 29, 3, 0, 0)));
        assert_eq!(s.due(at(2026, 11, 29, 4, 0, 59)), Some(at(2026, 11, 29, 3, 0, 0)), "an hour late, to the minute");
        assert_eq!(s.due(at(2026, 11, 29, 4, 1, 0)), None, "missed by more than an hour: skipped");
        assert_eq!(s.due(at(2026, 11, 29, 2, 59, 0)), None);
        assert_eq!(s.next_after(at(2026, 11, 29, 3, 0, 0)), Some(at(2026, 11, 30, 3, 0, 0)));
    }

    #[test]
    fn steps_lists_ranges_and_both_day_fields() {
        let every15 = parse("*/15 * * * *");
        assert!(is_slot(&every15, at(2026, 1, 1, 5, 45, 0)) && !is_slot(&every15, at(2026, 1, 1, 5, 46, 0)));
        let office = parse("30 9-17/4 * * 1-5");
        assert!(is_slot(&office, at(2026, 11, 30, 13, 30, 0)), "a Monday at 13:30");
        assert!(!is_slot(&office, at(2026, 11, 29, 13, 30, 0)), "a Sunday");
        assert!(!is_slot(&office, at(2026, 11, 30, 11, 30, 0)), "11 is not in 9,13,17");
        // Day-of-month OR day-of-week when both are set; 7 is Sunday.
        let s = parse("0 0 1 * 7");
        assert!(is_slot(&s, at(2026, 12, 1, 0, 0, 0)) && is_slot(&s, at(2026, 11, 29, 0, 0, 0)));
        assert!(!is_slot(&s, at(2026, 11, 30, 0, 0, 0)));
        let start_and_step = parse("5/20 * * * *");
        let slots: Vec<u32> = (0..60).filter(|m| is_slot(&start_and_step, at(2026, 1, 1, 0, *m, 0))).collect();
        assert_eq!(slots, [5, 25, 45]);
        parse("*/15 1-5,22 1 */2 0-6");
    }

    #[test]
    fn days_and_months_may_be_named() {
        let s = parse("0 4 * JAN,jul mon-fri");
        assert!(is_slot(&s, at(2026, 1, 5, 4, 0, 0)), "Monday 5 January");
        assert!(!is_slot(&s, at(2026, 1, 4, 4, 0, 0)), "Sunday 4 January");
        assert!(is_slot(&s, at(2026, 7, 10, 4, 0, 0)), "Friday 10 July");
        assert!(!is_slot(&s, at(2026, 2, 2, 4, 0, 0)), "a Monday in February");
        assert_eq!(parse("0 3 * * SUN"), parse("0 3 * * 0"));
        assert_eq!(parse("0 3 * * sun"), parse("0 3 * * 7"));
        assert!(matches!(Schedule::parse("0 3 * * MOON"), Err(ScheduleError::Field { name: "day-of-week", .. })));
    }

    #[test]
    fn slots_are_wall_clock_times_of_the_zone() {
        let berlin = Schedule::in_zone("30 2 * * *", Some("Europe/Berlin")).expect("valid");
        // Winter: UTC+1.
        assert_eq!(berlin.due(at(2026, 1, 15, 1, 45, 0)), Some(at(2026, 1, 15, 1, 30, 0)));
        // Summer: UTC+2.
        assert_eq!(berlin.due(at(2026, 7, 15, 0, 45, 0)), Some(at(2026, 7, 15, 0, 30, 0)));
        assert_eq!(berlin.due(at(2026, 7, 15, 1, 45, 0)), None, "02:30 in Berlin is 00:30 UTC in July");
    }

    #[test]
    fn a_change_of_clock_neither_loses_nor_doubles_a_slot() {
        let berlin = Schedule::in_zone("30 2 * * *", Some("Europe/Berlin")).expect("valid");
        // 29 March 2026: at 02:00 the clock springs to 03:00 (01:00 UTC); 02:30 never
        // happens, and the slot is taken when the clock resumes.
        let spring = berlin.next_after(at(2026, 3, 28, 12, 0, 0)).expect("a slot");
        assert_eq!(spring, at(2026, 3, 29, 1, 0, 0), "03:00 CEST");
        assert_eq!(berlin.due(at(2026, 3, 29, 1, 10, 0)), Some(spring));
        assert_eq!(berlin.next_after(spring), Some(at(2026, 3, 30, 0, 30, 0)), "then 02:30 CEST");
        // 25 October 2026: at 03:00 the clock falls back to 02:00 (01:00 UTC); 02:30 comes
        // twice, the slot once.
        let autumn = berlin.next_after(at(2026, 10, 24, 12, 0, 0)).expect("a slot");
        assert_eq!(autumn, at(2026, 10, 25, 0, 30, 0), "02:30 CEST, the first 02:30");
        assert_eq!(berlin.next_after(autumn), Some(at(2026, 10, 26, 1, 30, 0)), "not 02:30 CET the same night");
        // An hourly schedule keeps one slot an hour in UTC through the repeated hour.
        let hourly = Schedule::in_zone("15 * * * *", Some("Europe/Berlin")).expect("valid");
        let mut t = at(2026, 10, 24, 23, 0, 0);
        let mut slots = Vec::new();
        while let Some(next) = hourly.next_after(t).filter(|n| *n < at(2026, 10, 25, 3, 0, 0)) {
            slots.push(next);
            t = next;
        }
        let hours: Vec<u32> = slots.iter().map(|s| s.hour()).collect();
        assert_eq!(hours, [23, 0, 1, 2], "{slots:?}");
        // What the scheduler sees minute by minute through both nights: one slot each.
        for (from, slot) in
            [(at(2026, 3, 28, 23, 0, 0), at(2026, 3, 29, 1, 0, 0)), (at(2026, 10, 24, 23, 0, 0), autumn)]
        {
            let due: std::collections::BTreeSet<_> =
                (0..5 * 60).filter_map(|m| berlin.due(from + Duration::minutes(m))).collect();
            assert_eq!(due, [slot].into(), "the night after {from}");
        }
    }

    #[test]
    fn invalid_expressions_are_refused_naming_the_field() {
        for (bad, name) in [
            ("60 * * * *", "minute"),
            ("* 24 * * *", "hour"),
            ("0 3 0 * *", "day-of-month"),
            ("0 3 * 13 *", "month"),
            ("0 3 * * 8", "day-of-week"),
            ("*/0 * * * *", "minute"),
            ("5-1 * * * *", "minute"),
            ("a * * * *", "minute"),
            ("1-2-3 * * * *", "minute"),
        ] {
            match Schedule::parse(bad) {
                Err(ScheduleError::Field { name: n, .. }) => assert_eq!(n, name, "{bad:?}"),
                other => panic!("{bad:?}: {other:?}"),
            }
        }
        for bad in ["", "* * * *", "* * * * * *"] {
            assert!(matches!(Schedule::parse(bad), Err(ScheduleError::FieldCount(_))), "{bad:?}");
        }
        let e = Schedule::parse("0 24 * * *").expect_err("hour 24");
        assert_eq!(
            e.to_string(),
            "hour field \"24\": number out of bounds; the hour field takes 0-23, ranges, steps and lists"
        );
        let e = Schedule::parse("0 3 * * MOON").expect_err("no such day");
        assert_eq!(
            e.to_string(),
            "day-of-week field \"MOON\": not a number, range, step, list or name; the day-of-week field takes \
             0-7 (0 and 7 are Sunday) or SUN-SAT, ranges, steps and lists"
        );
        let e = Schedule::parse("0 0 31 2 *").expect_err("February 31st");
        assert_eq!(e.to_string(), "\"0 0 31 2 *\": no date ever matches");
        assert!(matches!(Schedule::parse("0 0 31 2 *"), Err(ScheduleError::Expression { .. })), "February 31st");
    }

    #[test]
    fn unknown_zones_are_refused() {
        for bad in ["Europe/Berlinn", "CEST+1", ""] {
            assert_eq!(Schedule::in_zone("0 3 * * *", Some(bad)), Err(ScheduleError::TimeZone(bad.into())), "{bad:?}");
        }
        assert_eq!(Schedule::in_zone("0 3 * * *", Some("UTC")), Ok(parse("0 3 * * *")));
    }

    #[test]
    fn ages_parse_to_durations() {
        let secs = |s: &str| parse_age(s).map(|d| d.as_secs());
        assert_eq!(secs("30s"), Some(30));
        assert_eq!(secs("15m"), Some(900));
        assert_eq!(secs("36h"), Some(129_600));
        assert_eq!(secs("7d"), Some(604_800));
        for bad in ["7", "7w", "d", "-1d", "0d", "", "99999999999999999999d"] {
            assert_eq!(parse_age(bad), None, "{bad:?}");
        }
    }
}
