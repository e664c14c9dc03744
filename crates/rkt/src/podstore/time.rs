//! Timestamps as pods record them: RFC 3339 in UTC with millisecond precision.

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

    /// Seconds since the Unix epoch, with nanoseconds, as JSON output carries it.
    pub fn unix_nanos(&self) -> u128 {
        self.0
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
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

    #[test]
    fn rejects_garbage() {
        assert!(serde_json::from_str::<Timestamp>("\"yesterday\"").is_err());
    }
}
