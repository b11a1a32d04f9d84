//! Durations written as rules name them (`60s`, `2h`, `1500ms`), for rule
//! names, headers and messages.

use std::fmt;
use std::time::Duration;

/// A duration as rules are named, in the largest unit that divides it
/// (`367d`, `60s`, `1500ms`); one that is not whole microseconds (or zero)
/// as `Duration`'s `Debug` writes it. For messages.
#[derive(Debug, Clone, Copy)]
pub struct Span(pub Duration);

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let us = self.0.as_micros();
        if us == 0 || !self.0.subsec_nanos().is_multiple_of(1_000) || us > u128::from(u64::MAX) {
            return write!(f, "{:?}", self.0);
        }
        write_duration(f, us as u64)
    }
}

/// Writes a duration in the largest unit that divides it: `60s`, `2h`, `1500ms`.
pub(crate) fn write_duration(f: &mut fmt::Formatter<'_>, us: u64) -> fmt::Result {
    const UNITS: [(u64, &str); 5] = [
        (86_400_000_000, "d"),
        (3_600_000_000, "h"),
        (1_000_000, "s"),
        (1_000, "ms"),
        (1, "us"),
    ];
    // Seconds read best in headers (`60s`, not `1m`), so minutes are not a unit here.
    for (size, unit) in UNITS {
        if us.is_multiple_of(size) {
            return write!(f, "{}{unit}", us / size);
        }
    }
    unreachable!("every duration is a whole number of microseconds")
}
