//! Values written as text, read as ClickHouse's text formats write them (`TabSeparated`, `CSV`,
//! `Values`, and strings in `JSONCompactEachRow`).
//!
//! A timestamp is `YYYY-MM-DD hh:mm:ss` with an optional fraction, RFC 3339 text, or Unix
//! seconds (`1795953600`, `1795953600.25`), as ClickHouse reads a `DateTime`. A date is
//! `YYYY-MM-DD`. A boolean is any of ClickHouse's spellings (`true`, `1`, `yes`, `on`, ...).
//! A decimal is its digits (`-12.50`, `1.5e2`), which must fit the column exactly.

use arrow::compute::kernels::cast_utils::string_to_timestamp_nanos;
use chrono::NaiveDate;

/// A whole number as written: signed only when it has a minus sign, so `u64::MAX` fits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Int {
    Signed(i64),
    Unsigned(u64),
}

pub(crate) fn parse_int(text: &str) -> Option<Int> {
    if text.starts_with('-') {
        return text.parse().ok().map(Int::Signed);
    }
    let digits = text.strip_prefix('+').unwrap_or(text);
    if digits.starts_with('+') {
        return None;
    }
    digits.parse().ok().map(Int::Unsigned)
}

pub(crate) fn parse_float(text: &str) -> Option<f64> {
    if text.is_empty() || text.trim() != text {
        return None;
    }
    text.parse().ok()
}

pub(crate) fn parse_bool(text: &str) -> Option<bool> {
    const TRUE: [&str; 8] = ["true", "1", "yes", "on", "enable", "enabled", "t", "y"];
    const FALSE: [&str; 8] = ["false", "0", "no", "off", "disable", "disabled", "f", "n"];
    let spelled = |words: [&str; 8]| words.iter().any(|w| w.eq_ignore_ascii_case(text));
    if spelled(TRUE) {
        Some(true)
    } else if spelled(FALSE) {
        Some(false)
    } else {
        None
    }
}

/// Days since 1970-01-01 of a `YYYY-MM-DD` date.
pub(crate) fn parse_date(text: &str) -> Option<i32> {
    if text.len() != 10 {
        return None;
    }
    let date = NaiveDate::parse_from_str(text, "%Y-%m-%d").ok()?;
    let epoch = NaiveDate::from_ymd_opt(1970, 1, 1)?;
    i32::try_from(date.signed_duration_since(epoch).num_days()).ok()
}

/// Microseconds since 1970-01-01 00:00:00 UTC of a timestamp written as text.
pub(crate) fn parse_timestamp(text: &str) -> Option<i64> {
    if is_unix_seconds(text) {
        return exact_seconds(text);
    }
    if text.trim() != text || text.is_empty() {
        return None;
    }
    string_to_timestamp_nanos(text)
        .ok()
        .map(|nanos| nanos.div_euclid(1000))
}

fn is_unix_seconds(text: &str) -> bool {
    let digits = text.strip_prefix('-').unwrap_or(text);
    let mut parts = digits.splitn(2, '.');
    let whole = parts.next().unwrap_or_default();
    let fraction = parts.next().unwrap_or("0");
    !whole.is_empty()
        && whole.bytes().all(|b| b.is_ascii_digit())
        && !fraction.is_empty()
        && fraction.bytes().all(|b| b.is_ascii_digit())
}

/// `1795953600.25` to microseconds, digit by digit, so no float rounding creeps in.
fn exact_seconds(text: &str) -> Option<i64> {
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
    let whole: i64 = whole.parse().ok()?;
    let mut micros: i64 = 0;
    for (i, digit) in fraction.bytes().take(6).enumerate() {
        micros += i64::from(digit - b'0') * 10_i64.pow(5 - i as u32);
    }
    let total = whole.checked_mul(1_000_000)?.checked_add(micros)?;
    Some(if negative { -total } else { total })
}

/// The unscaled integer of `text` in a `decimal(precision, scale)` column, exactly: text that
/// does not fit, by a digit after the point or before it, is refused
/// ([`crate::values::check_decimal`]), never rounded. Arrow's own parser is not used: it drops
/// extra fraction digits and has rules of its own for exponents.
pub(crate) fn parse_decimal(text: &str, precision: u8, scale: u8) -> Result<i128, String> {
    crate::values::check_decimal(text, precision, scale)?;
    let out_of_range = || format!("'{text}' is out of range for decimal({precision}, {scale})");
    let (negative, unsigned) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let (mantissa, exponent) = match unsigned.split_once(['e', 'E']) {
        Some((mantissa, exponent)) => (
            mantissa,
            exponent.parse::<i64>().map_err(|_| out_of_range())?,
        ),
        None => (unsigned, 0),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    // The digits, read as one integer, times 10^shift is the unscaled value. The check above
    // made sure that the digits a negative shift drops are zeros.
    let shift = exponent - fraction.len() as i64 + i64::from(scale);
    let count = whole.len() + fraction.len();
    let dropped = usize::try_from(-shift).unwrap_or(0).min(count);
    let mut unscaled: i128 = 0;
    for digit in whole.bytes().chain(fraction.bytes()).take(count - dropped) {
        unscaled = unscaled
            .checked_mul(10)
            .and_then(|n| n.checked_add(i128::from(digit - b'0')))
            .ok_or_else(out_of_range)?;
    }
    if shift > 0 && unscaled != 0 {
        unscaled = u32::try_from(shift)
            .ok()
            .and_then(|shift| 10_i128.checked_pow(shift))
            .and_then(|factor| unscaled.checked_mul(factor))
            .ok_or_else(out_of_range)?;
    }
    Ok(if negative { -unscaled } else { unscaled })
}

/// Seconds, possibly with a fraction, to whole microseconds.
pub(crate) fn seconds_to_micros(seconds: f64) -> Option<i64> {
    let micros = (seconds * 1_000_000.0).round();
    // i64::MAX as f64 rounds up, so the comparison is strict.
    (micros.is_finite() && micros.abs() < i64::MAX as f64).then_some(micros as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_as_written() {
        assert_eq!(
            parse_int("18446744073709551615"),
            Some(Int::Unsigned(u64::MAX))
        );
        assert_eq!(parse_int("-5"), Some(Int::Signed(-5)));
        assert_eq!(parse_int("+5"), Some(Int::Unsigned(5)));
        for bad in ["", "1.5", " 1", "1 ", "0x10", "++1", "-"] {
            assert_eq!(parse_int(bad), None, "{bad:?}");
        }
        assert_eq!(parse_float("-1.5e3"), Some(-1500.0));
        assert!(parse_float("nan").is_some_and(f64::is_nan));
        assert_eq!(parse_float("inf"), Some(f64::INFINITY));
        assert_eq!(parse_float(" 1"), None);
        assert_eq!(parse_bool("TRUE"), Some(true));
        assert_eq!(parse_bool("0"), Some(false));
        assert_eq!(parse_bool("maybe"), None);
    }

    #[test]
    fn decimals_are_read_exactly_or_refused() {
        let cases = [
            ("-12.34", 10, 2, -1234),
            ("12.340000", 10, 2, 1234),
            ("+7", 10, 2, 700),
            (".5", 10, 2, 50),
            ("5.", 10, 2, 500),
            ("1.5e2", 10, 2, 15_000),
            ("1234e-2", 10, 2, 1234),
            ("-0.00", 10, 2, 0),
            ("0e99", 10, 2, 0),
            ("000000000000000000000000000000000000000000012.5", 5, 1, 125),
        ];
        for (text, precision, scale, unscaled) in cases {
            assert_eq!(
                parse_decimal(text, precision, scale),
                Ok(unscaled),
                "{text}"
            );
        }
        let widest = "9".repeat(38);
        let max = 10_i128.pow(38) - 1;
        assert_eq!(parse_decimal(&widest, 38, 0), Ok(max));
        assert_eq!(parse_decimal(&format!("-{widest}"), 38, 0), Ok(-max));
        let tiny = format!("0.{}1", "0".repeat(37));
        assert_eq!(parse_decimal(&tiny, 38, 38), Ok(1));
        assert_eq!(parse_decimal(&format!("-0.{widest}"), 38, 38), Ok(-max));
        for (text, says) in [
            ("1.239", "3 digits after the point"),
            ("123456789", "9 digits before the point"),
            (&format!("1{widest}"), "39 digits before the point"),
            ("1e5000", "out of range"),
            ("12a", "not a decimal number"),
            ("", "not a decimal number"),
        ] {
            let error = parse_decimal(text, 10, 2).unwrap_err();
            assert!(error.contains(says), "{text}: {error}");
        }
    }

    #[test]
    fn dates_and_timestamps_as_clickhouse_writes_them() {
        assert_eq!(parse_date("1970-01-02"), Some(1));
        assert_eq!(parse_date("2026-02-30"), None);
        assert_eq!(parse_date("2026-1-2"), None);
        let noon = 1_795_953_600_000_000;
        assert_eq!(parse_timestamp("2026-11-29 12:00:00"), Some(noon));
        assert_eq!(parse_timestamp("2026-11-29T12:00:00Z"), Some(noon));
        assert_eq!(
            parse_timestamp("2026-11-29 12:00:00.25"),
            Some(noon + 250_000)
        );
        assert_eq!(parse_timestamp("1795953600"), Some(noon));
        assert_eq!(parse_timestamp("1795953600.25"), Some(noon + 250_000));
        assert_eq!(parse_timestamp("-1.5"), Some(-1_500_000));
        for bad in ["", "noon", "2026-11-29 25:00:00", " 1795953600", "1e9"] {
            assert_eq!(parse_timestamp(bad), None, "{bad:?}");
        }
    }
}
