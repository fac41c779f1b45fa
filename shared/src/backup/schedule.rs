//! Five-field cron schedules (minute hour day-of-month month day-of-week, UTC) of
//! scheduled backups, and retention ages. One parser serves both validation (its errors
//! name the offending field of the expression, for the user) and scheduling (which slot is
//! due), so an expression that validates is exactly one that schedules.

use std::time::Duration as StdDuration;

use chrono::{DateTime, Datelike, Duration, Timelike, Utc};

/// How late a slot may still be taken: a backup missed while the operator was down for
/// longer is skipped (the next slot takes it) rather than run at a surprising time.
pub const CATCH_UP: Duration = Duration::minutes(60);

/// Why a cron expression is refused; the message is meant for the user.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    /// Not five whitespace-separated fields.
    #[error("{0:?} must have five fields: minute hour day-of-month month day-of-week")]
    FieldCount(String),
    /// One field is malformed or out of range.
    #[error("{name} field {field:?}: {message}")]
    Field { name: &'static str, field: String, message: String },
}

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

/// Parses one field: `*`, numbers, ranges `a-b`, steps `x/n` (a number with a step runs to
/// the field's maximum), and comma-separated lists of these.
fn field(name: &'static str, text: &str, lo: u32, hi: u32) -> Result<u64, ScheduleError> {
    let fail = |message: String| ScheduleError::Field { name, field: text.to_owned(), message };
    let number = |s: &str| match s.parse::<u32>() {
        Ok(n) if (lo..=hi).contains(&n) => Ok(n),
        _ => Err(fail(format!("{s:?} is not a number from {lo} to {hi}"))),
    };
    let mut bits = 0u64;
    for item in text.split(',') {
        let (range, step) = match item.split_once('/') {
            Some((r, s)) => match s.parse::<u32>() {
                Ok(s) if s >= 1 => (r, s),
                _ => return Err(fail(format!("step {s:?} must be a positive number"))),
            },
            None => (item, 1),
        };
        let (from, to) = if range == "*" {
            (lo, hi)
        } else if let Some((a, b)) = range.split_once('-') {
            let (a, b) = (number(a)?, number(b)?);
            if a > b {
                return Err(fail(format!("range {range:?} runs backwards")));
            }
            (a, b)
        } else {
            let v = number(range)?;
            (v, if item.contains('/') { hi } else { v })
        };
        for v in (from..=to).step_by(step as usize) {
            bits |= 1 << v;
        }
    }
    Ok(bits)
}

impl Schedule {
    /// Parses `expr`, or says which field is wrong and why.
    pub fn parse(expr: &str) -> Result<Schedule, ScheduleError> {
        let f: Vec<&str> = expr.split_whitespace().collect();
        let [m, h, dom, mon, dow] = f.as_slice() else { return Err(ScheduleError::FieldCount(expr.to_owned())) };
        let mut weekdays = field("day-of-week", dow, 0, 7)?;
        if weekdays & (1 << 7) != 0 {
            weekdays |= 1; // 7 is Sunday too
        }
        Ok(Schedule {
            minutes: field("minute", m, 0, 59)?,
            hours: field("hour", h, 0, 23)?,
            days: field("day-of-month", dom, 1, 31)?,
            months: field("month", mon, 1, 12)?,
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

    #[test]
    fn daily_slot_is_due_for_an_hour_then_skipped() {
        let s = parse("0 3 * * *");
        assert_eq!(s.due(at(2026, 11, 29, 3, 0, 42)), Some(at(2026, 11, 29, 3, 0, 0)));
        assert_eq!(s.due(at(2026, 11, 29, 3, 59, 0)), Some(at(2026, 11, 29, 3, 0, 0)));
        assert_eq!(s.due(at(2026, 11, 29, 4, 1, 0)), None, "missed by more than an hour: skipped");
        assert_eq!(s.due(at(2026, 11, 29, 2, 59, 0)), None);
    }

    #[test]
    fn steps_lists_ranges_and_both_day_fields() {
        let every15 = parse("*/15 * * * *");
        assert!(every15.matches(at(2026, 1, 1, 5, 45, 0)) && !every15.matches(at(2026, 1, 1, 5, 46, 0)));
        let office = parse("30 9-17/4 * * 1-5");
        assert!(office.matches(at(2026, 11, 30, 13, 30, 0)), "a Monday at 13:30");
        assert!(!office.matches(at(2026, 11, 29, 13, 30, 0)), "a Sunday");
        assert!(!office.matches(at(2026, 11, 30, 11, 30, 0)), "11 is not in 9,13,17");
        // Day-of-month OR day-of-week when both are set; 7 is Sunday.
        let s = parse("0 0 1 * 7");
        assert!(s.matches(at(2026, 12, 1, 0, 0, 0)) && s.matches(at(2026, 11, 29, 0, 0, 0)));
        assert!(!s.matches(at(2026, 11, 30, 0, 0, 0)));
        assert_eq!(parse("5/20 * * * *").minutes, (1 << 5) | (1 << 25) | (1 << 45));
        parse("*/15 1-5,22 1 */2 0-6");
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
        assert_eq!(e.to_string(), "hour field \"24\": \"24\" is not a number from 0 to 23");
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
