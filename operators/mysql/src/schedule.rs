//! Five-field cron schedules (minute hour day-of-month month day-of-week, UTC) for
//! scheduled backups: which slot is due. Pure; `validate::check_cron` has already refused
//! malformed expressions with a message naming the field, so parsing here only fails on
//! input that never passed validation.

use chrono::{DateTime, Datelike, Duration, Timelike, Utc};

/// How late a slot may still be taken: a backup missed while the operator was down for
/// longer is skipped (the next slot takes it) rather than run at a surprising time.
pub const CATCH_UP: Duration = Duration::minutes(60);

/// A parsed schedule: the allowed values of each field as bit sets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule {
    minutes: u64,
    hours: u64,
    days: u64,
    months: u64,
    weekdays: u64,
    /// Both day fields restricted: a day matches if either does (cron's rule).
    days_or_weekdays: bool,
}

fn field(text: &str, lo: u32, hi: u32) -> Option<u64> {
    let mut bits = 0u64;
    for item in text.split(',') {
        let (range, step) = match item.split_once('/') {
            Some((r, s)) => (r, s.parse::<u32>().ok().filter(|s| *s > 0)?),
            None => (item, 1),
        };
        let (from, to) = if range == "*" {
            (lo, hi)
        } else if let Some((a, b)) = range.split_once('-') {
            (a.parse().ok()?, b.parse().ok()?)
        } else {
            let v: u32 = range.parse().ok()?;
            (v, if item.contains('/') { hi } else { v })
        };
        if from < lo || to > hi || from > to {
            return None;
        }
        for v in (from..=to).step_by(step as usize) {
            bits |= 1 << v;
        }
    }
    Some(bits)
}

impl Schedule {
    /// Parses `expr`; `None` if it is not a valid five-field expression.
    pub fn parse(expr: &str) -> Option<Schedule> {
        let f: Vec<&str> = expr.split_whitespace().collect();
        let [m, h, dom, mon, dow] = f.as_slice() else { return None };
        let mut weekdays = field(dow, 0, 7)?;
        if weekdays & (1 << 7) != 0 {
            weekdays |= 1; // 7 is Sunday too
        }
        Some(Schedule {
            minutes: field(m, 0, 59)?,
            hours: field(h, 0, 23)?,
            days: field(dom, 1, 31)?,
            months: field(mon, 1, 12)?,
            weekdays,
            days_or_weekdays: *dom != "*" && *dow != "*",
        })
    }

    /// Whether the minute starting at `t` is a slot.
    pub fn matches(&self, t: DateTime<Utc>) -> bool {
        let bit = |set: u64, v: u32| set & (1 << v) != 0;
        let day = bit(self.days, t.day());
        let weekday = bit(self.weekdays, t.weekday().num_days_from_sunday());
        let day_ok = if self.days_or_weekdays { day || weekday } else { day && weekday };
        bit(self.minutes, t.minute()) && bit(self.hours, t.hour()) && bit(self.months, t.month()) && day_ok
    }

    /// The latest slot at or before `now` and no older than [`CATCH_UP`], if any.
    pub fn due(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let minute = now.with_second(0)?.with_nanosecond(0)?;
        (0..=CATCH_UP.num_minutes()).map(|back| minute - Duration::minutes(back)).find(|t| self.matches(*t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, mo, d, h, mi, s).unwrap()
    }

    #[test]
    fn daily_slot_is_due_for_an_hour_then_skipped() {
        let s = Schedule::parse("0 3 * * *").unwrap();
        assert_eq!(s.due(at(2026, 11, 29, 3, 0, 42)), Some(at(2026, 11, 29, 3, 0, 0)));
        assert_eq!(s.due(at(2026, 11, 29, 3, 59, 0)), Some(at(2026, 11, 29, 3, 0, 0)));
        assert_eq!(s.due(at(2026, 11, 29, 4, 1, 0)), None, "missed by more than an hour: skipped");
        assert_eq!(s.due(at(2026, 11, 29, 2, 59, 0)), None);
    }

    #[test]
    fn steps_lists_ranges_and_both_day_fields() {
        let every15 = Schedule::parse("*/15 * * * *").unwrap();
        assert!(every15.matches(at(2026, 1, 1, 5, 45, 0)) && !every15.matches(at(2026, 1, 1, 5, 46, 0)));
        let office = Schedule::parse("30 9-17/4 * * 1-5").unwrap();
        assert!(office.matches(at(2026, 11, 30, 13, 30, 0)), "a Monday at 13:30");
        assert!(!office.matches(at(2026, 11, 29, 13, 30, 0)), "a Sunday");
        assert!(!office.matches(at(2026, 11, 30, 11, 30, 0)), "11 is not in 9,13,17");
        // Day-of-month OR day-of-week when both are set; 7 is Sunday.
        let s = Schedule::parse("0 0 1 * 7").unwrap();
        assert!(s.matches(at(2026, 12, 1, 0, 0, 0)) && s.matches(at(2026, 11, 29, 0, 0, 0)));
        assert!(!s.matches(at(2026, 11, 30, 0, 0, 0)));
        assert_eq!(Schedule::parse("5/20 * * * *").unwrap().minutes, (1 << 5) | (1 << 25) | (1 << 45));
    }

    #[test]
    fn invalid_expressions_do_not_parse() {
        for bad in ["", "* * * *", "60 * * * *", "* 24 * * *", "*/0 * * * *", "5-1 * * * *", "a * * * *"] {
            assert_eq!(Schedule::parse(bad), None, "{bad:?}");
        }
    }
}
