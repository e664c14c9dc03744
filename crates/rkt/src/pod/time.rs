//! Timestamps as pods record them (RFC 3339 in UTC with millisecond precision) and as rkt
//! 1.30 showed them: Go's `2006-01-02 15:04:05.999 -0700 MST` layout in local time for
//! `status` and `list --full`, relative phrases ("3 minutes ago") for `list`, Unix seconds
//! and nanoseconds for JSON.

use std::fmt;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A point in time, stored and shown as RFC 3339 (UTC).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Timestamp(pub SystemTime);

impl Timestamp {
    /// The current time.
    pub fn now() -> Self {
        Timestamp(SystemTime::now())
    }

    /// How long ago this was (zero if it is in the future).
    pub fn age(&self) -> Duration {
        SystemTime::now()
            .duration_since(self.0)
            .unwrap_or(Duration::ZERO)
    }

    /// Nanoseconds since the Unix epoch (0 before it).
    pub fn unix_nanos(&self) -> u128 {
        self.0
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    }

    /// Whole seconds since the Unix epoch (0 before it), as rkt's JSON `created_at` of a pod.
    pub fn unix_secs(&self) -> i64 {
        i64::try_from(self.unix_nanos() / 1_000_000_000).unwrap_or(i64::MAX)
    }

    /// This time as Go's layout `2006-01-02 15:04:05.999 -0700 MST` in the local time zone
    /// (`TZ`, else /etc/localtime, else UTC), as rkt prints `created=` and `started=`:
    /// milliseconds without trailing zeros (and without the dot when there are none).
    pub fn go_layout(&self) -> String {
        let millis = (self.unix_nanos() / 1_000_000 % 1000) as u32;
        LocalTime::of(self.unix_secs()).go_layout(millis)
    }

    /// How long ago this was, in the words rkt 1.30's `list` used (go-humanize's):
    /// `now`, `1 second ago`, `N seconds ago`, `1 minute ago`, … `N years ago`,
    /// `a long while ago`; a time in the future says `from now` instead of `ago`.
    pub fn relative(&self) -> String {
        let now = SystemTime::now();
        let (diff, label) = match now.duration_since(self.0) {
            Ok(d) => (d.as_secs(), "ago"),
            Err(e) => (e.duration().as_secs(), "from now"),
        };
        relative_words(diff, label)
    }
}

/// The phrase for a difference of `diff` whole seconds: each unit is used from twice its
/// length on (`1 <unit>` below that), as go-humanize does.
fn relative_words(diff: u64, label: &str) -> String {
    const MIN: u64 = 60;
    const HOUR: u64 = 60 * MIN;
    const DAY: u64 = 24 * HOUR;
    const WEEK: u64 = 7 * DAY;
    const MONTH: u64 = 30 * DAY;
    const YEAR: u64 = 12 * MONTH;
    if diff < 1 {
        return "now".to_string();
    }
    let (count, unit) = match diff {
        d if d < 2 => (1, "second"),
        d if d < MIN => (d, "seconds"),
        d if d < 2 * MIN => (1, "minute"),
        d if d < HOUR => (d / MIN, "minutes"),
        d if d < 2 * HOUR => (1, "hour"),
        d if d < DAY => (d / HOUR, "hours"),
        d if d < 2 * DAY => (1, "day"),
        d if d < WEEK => (d / DAY, "days"),
        d if d < 2 * WEEK => (1, "week"),
        d if d < MONTH => (d / WEEK, "weeks"),
        d if d < 2 * MONTH => (1, "month"),
        d if d < YEAR => (d / MONTH, "months"),
        d if d < 18 * MONTH => (1, "year"),
        d if d < 2 * YEAR => (2, "years"),
        d if d < 37 * YEAR => (d / YEAR, "years"),
        _ => return format!("a long while {label}"),
    };
    format!("{count} {unit} {label}")
}

/// A broken-down local time, from the C library (which reads `TZ` and the zone database).
struct LocalTime {
    year: i32,
    month: u32,
    day: u32,
    hour: u32,
    minute: u32,
    second: u32,
    utc_offset_secs: i64,
    zone: String,
}

extern "C" {
    /// POSIX `tzset` (not in the libc crate): re-reads `TZ`, which glibc's `localtime_r`
    /// reads only once per process.
    fn tzset();
}

impl LocalTime {
    /// Go's layout `2006-01-02 15:04:05.999 -0700 MST`, with `millis` milliseconds.
    fn go_layout(&self, millis: u32) -> String {
        let mut frac = String::new();
        if millis != 0 {
            frac = format!(".{millis:03}");
            while frac.ends_with('0') {
                frac.pop();
            }
        }
        let offset_min = self.utc_offset_secs / 60;
        let sign = if offset_min < 0 { '-' } else { '+' };
        let offset_min = offset_min.abs();
        format!(
            "{:04}-{:02}-{:02} {:02}:{:02}:{:02}{frac} {sign}{:02}{:02} {}",
            self.year,
            self.month,
            self.day,
            self.hour,
            self.minute,
            self.second,
            offset_min / 60,
            offset_min % 60,
            self.zone,
        )
    }

    fn of(secs: i64) -> LocalTime {
        let t: libc::time_t = secs as libc::time_t;
        // SAFETY: `tm` is plain data that localtime_r fills in; both pointers are valid for
        // the call. tzset reads TZ once; localtime_r alone may not.
        let (tm, ok) = unsafe {
            tzset();
            let mut tm: libc::tm = std::mem::zeroed();
            let ok = !libc::localtime_r(&t, &mut tm).is_null();
            (tm, ok)
        };
        if !ok {
            return LocalTime::utc(secs);
        }
        let zone = if tm.tm_zone.is_null() {
            String::new()
        } else {
            // SAFETY: tm_zone points to a NUL-terminated abbreviation owned by the C
            // library's time zone state, valid until the next tzset.
            unsafe { std::ffi::CStr::from_ptr(tm.tm_zone) }
                .to_string_lossy()
                .into_owned()
        };
        let offset = tm.tm_gmtoff;
        LocalTime {
            year: tm.tm_year + 1900,
            month: (tm.tm_mon + 1) as u32,
            day: tm.tm_mday as u32,
            hour: tm.tm_hour as u32,
            minute: tm.tm_min as u32,
            second: tm.tm_sec as u32,
            utc_offset_secs: offset,
            // Go prints the numeric offset when a zone has no abbreviation.
            zone: if zone.is_empty() {
                numeric_zone(offset)
            } else {
                zone
            },
        }
    }

    /// UTC, computed without the C library (days-from-civil, proleptic Gregorian).
    fn utc(secs: i64) -> LocalTime {
        let days = secs.div_euclid(86_400);
        let rem = secs.rem_euclid(86_400);
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z.rem_euclid(146_097);
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
        let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
        let year = (yoe + era * 400 + i64::from(month <= 2)) as i32;
        LocalTime {
            year,
            month,
            day,
            hour: (rem / 3600) as u32,
            minute: (rem % 3600 / 60) as u32,
            second: (rem % 60) as u32,
            utc_offset_secs: 0,
            zone: "UTC".to_string(),
        }
    }
}

fn numeric_zone(offset: i64) -> String {
    let sign = if offset < 0 { '-' } else { '+' };
    let m = offset.abs() / 60;
    if m % 60 == 0 {
        format!("{sign}{:02}", m / 60)
    } else {
        format!("{sign}{:02}{:02}", m / 60, m % 60)
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", humantime::format_rfc3339_millis(self.0))
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        humantime::parse_rfc3339_weak(&text)
            .map(Timestamp)
            .map_err(|e| serde::de::Error::custom(format!("bad timestamp {text:?}: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_json_at_millisecond_precision() {
        let t = Timestamp(SystemTime::UNIX_EPOCH + Duration::from_millis(1_700_000_000_123));
        let json = serde_json::to_string(&t).unwrap();
        assert_eq!(json, "\"2023-11-14T22:13:20.123Z\"");
        let back: Timestamp = serde_json::from_str(&json).unwrap();
        assert_eq!(back, t);
    }

    /// rkt 1.30 printed `created=2016-01-26 14:23:34.631 +0100 CET`: Go's layout, trailing
    /// zeros of the milliseconds dropped (the dot too when none are left), the zone's
    /// abbreviation last. (The local zone itself is tested through the binary, with TZ.)
    #[test]
    fn status_times_use_gos_layout() {
        let cet = |second| LocalTime {
            year: 2016,
            month: 1,
            day: 26,
            hour: 14,
            minute: 23,
            second,
            utc_offset_secs: 3600,
            zone: "CET".into(),
        };
        assert_eq!(cet(34).go_layout(631), "2016-01-26 14:23:34.631 +0100 CET");
        assert_eq!(cet(15).go_layout(100), "2016-01-26 14:23:15.1 +0100 CET");
        assert_eq!(cet(5).go_layout(0), "2016-01-26 14:23:05 +0100 CET");
        let west = LocalTime {
            utc_offset_secs: -(3 * 3600 + 30 * 60),
            zone: "NST".into(),
            ..cet(0)
        };
        assert_eq!(west.go_layout(7), "2016-01-26 14:23:00.007 -0330 NST");
        let utc = LocalTime::utc(1_700_000_000);
        assert_eq!(utc.go_layout(123), "2023-11-14 22:13:20.123 +0000 UTC");
    }

    #[test]
    fn utc_fallback_matches_the_calendar() {
        let l = LocalTime::utc(1_700_000_000);
        assert_eq!((l.year, l.month, l.day), (2023, 11, 14));
        assert_eq!((l.hour, l.minute, l.second), (22, 13, 20));
        let l = LocalTime::utc(951_782_400); // 2000-02-29 00:00:00
        assert_eq!((l.year, l.month, l.day), (2000, 2, 29));
        assert_eq!(numeric_zone(19_800), "+0530");
        assert_eq!(numeric_zone(-10_800), "-03");
    }

    /// `rkt list` printed CREATED and STARTED as go-humanize phrases.
    #[test]
    fn list_times_are_relative_phrases_as_rkt_printed_them() {
        let cases = [
            (0, "now"),
            (1, "1 second ago"),
            (41, "41 seconds ago"),
            (60, "1 minute ago"),
            (119, "1 minute ago"),
            (120, "2 minutes ago"),
            (3_599, "59 minutes ago"),
            (3_600, "1 hour ago"),
            (7_200, "2 hours ago"),
            (86_400, "1 day ago"),
            (6 * 86_400, "6 days ago"),
            (7 * 86_400, "1 week ago"),
            (29 * 86_400, "4 weeks ago"),
            (30 * 86_400, "1 month ago"),
            (359 * 86_400, "11 months ago"),
            (360 * 86_400, "1 year ago"),
            (540 * 86_400, "2 years ago"),
            (3 * 360 * 86_400, "3 years ago"),
            (37 * 360 * 86_400, "a long while ago"),
        ];
        for (secs, words) in cases {
            assert_eq!(relative_words(secs, "ago"), words, "{secs}s");
        }
        let future = Timestamp(SystemTime::now() + Duration::from_secs(300));
        assert!(
            future.relative().ends_with("minutes from now"),
            "{}",
            future.relative()
        );
    }

    #[test]
    fn rejects_garbage() {
        assert!(serde_json::from_str::<Timestamp>("\"yesterday\"").is_err());
    }
}
