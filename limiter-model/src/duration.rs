//! Durations as `#[rate_limit]` writes them (`60s`, `500ms`, `1d`), read
//! from text: by the attribute when it compiles and by anything that takes
//! rules at run time (a live override), so both refuse the same text with
//! the same message.

use std::time::Duration;

use crate::error::ConfigError;

/// The units a duration may have, as errors list them.
pub const DURATION_UNITS: &str = "ms, s, m, h or d";

/// One `unit` (`ms`, `s`, `m`, `h` or `d`) as a duration; `None` for any
/// other text.
pub fn duration_unit(unit: &str) -> Option<Duration> {
    let ms = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return None,
    };
    Some(Duration::from_millis(ms))
}

/// `text`, an integer with a unit (`60s`, `500ms`, `1d`), as a duration;
/// `what` names it in errors (`"the window of a rule"`). Whether the
/// duration suits its use (a zero window, a window over 366 days) is for
/// the constructor it goes to ([`Rule::new`](crate::Rule::new), ...).
///
/// ```
/// use std::time::Duration;
/// use limiter_model::parse_duration;
///
/// assert_eq!(parse_duration("90s", "the window")?, Duration::from_secs(90));
/// let error = parse_duration("60sec", "the window").unwrap_err();
/// assert_eq!(error.to_string(), "unknown unit `sec` in `60sec`: expected ms, s, m, h or d");
/// # Ok::<(), limiter_model::ConfigError>(())
/// ```
pub fn parse_duration(text: &str, what: &str) -> Result<Duration, ConfigError> {
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let (number, unit) = text.split_at(digits);
    if number.is_empty() {
        return Err(ConfigError::NotADuration {
            what: what.into(),
            written: text.into(),
        });
    }
    if unit.is_empty() {
        return Err(ConfigError::MissingUnit {
            what: what.into(),
            written: text.into(),
        });
    }
    let Some(one) = duration_unit(unit) else {
        return Err(ConfigError::UnknownUnit {
            unit: unit.into(),
            written: text.into(),
        });
    };
    let too_long = || ConfigError::DurationTooLong {
        written: text.into(),
    };
    let count: u64 = number.parse().map_err(|_| too_long())?;
    let ms = count
        .checked_mul(u64::try_from(one.as_millis()).expect("a unit is short"))
        .ok_or_else(too_long)?;
    Ok(Duration::from_millis(ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_every_unit() {
        let read = |text| parse_duration(text, "the window").unwrap();
        assert_eq!(read("250ms"), Duration::from_millis(250));
        assert_eq!(read("60s"), Duration::from_secs(60));
        assert_eq!(read("2m"), Duration::from_secs(120));
        assert_eq!(read("3h"), Duration::from_secs(3 * 3600));
        assert_eq!(read("1d"), Duration::from_secs(86_400));
        assert_eq!(read("0s"), Duration::ZERO);
    }

    #[test]
    fn refuses_what_the_attribute_refuses() {
        let error = |text| {
            parse_duration(text, "the window of a rule")
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            error("60"),
            "the window of a rule needs a unit (ms, s, m, h or d), like `60s`"
        );
        assert_eq!(
            error("60x"),
            "unknown unit `x` in `60x`: expected ms, s, m, h or d"
        );
        assert_eq!(
            error("99999999999999999d"),
            "`99999999999999999d` is too long for a duration"
        );
        assert_eq!(
            error("999999999999999999999s"),
            "`999999999999999999999s` is too long for a duration"
        );
        for text in ["", "s", "-1s", " 60s"] {
            assert_eq!(
                error(text),
                format!(
                    "the window of a rule must be an integer with a unit (ms, s, m, h or d), \
                     like `60s`, got {text:?}"
                )
            );
        }
        assert_eq!(
            error("60s "),
            "unknown unit `s ` in `60s `: expected ms, s, m, h or d"
        );
    }
}
