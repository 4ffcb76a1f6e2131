//! One value from a body, before it goes into its column, and how it is converted into each
//! column type.
//!
//! Every format decoder hands values to [`super::columns`]: text formats as text, which is parsed
//! by the column's type ([`crate::text`]), binary formats as typed values. Each value is converted
//! into the column's type with a range check, so nothing is wrapped around or truncated silently.
//!
//! A decimal is converted exactly or refused, never rounded: its text must fit the column
//! ([`crate::values::check_decimal`]), and a binary decimal of another scale must rescale
//! without losing a digit. A `uuid` column takes text or a binary UUID; a `json` column takes
//! text only.

use std::borrow::Cow;

use crate::name::printable;
use crate::schema::ColumnType;
use crate::text;

/// One value from the body, before it is converted into its column's type.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Value<'a> {
    Null,
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
    /// Text, parsed by the column's type as ClickHouse's text formats write it.
    Text(&'a str),
    /// Days since 1970-01-01.
    Days(i32),
    /// Microseconds since 1970-01-01 00:00:00 UTC.
    Micros(i64),
    /// A binary decimal: its unscaled integer and its scale, the value being
    /// `unscaled * 10^-scale`.
    Decimal(i128, u8),
    /// A binary UUID, as one 128-bit number (its text's 32 hex digits in order).
    Uuid(u128),
}

/// The kind of values a body's column of some binary type gives, for [`can_take`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Bool,
    Whole,
    Float,
    Text,
    Date,
    Time,
    Decimal,
    Uuid,
    /// Addresses, Enum names and the like: judged value by value.
    Other,
}

/// Whether a body's column whose type gives values of `kind` can go into a column of `ty`.
/// Only the pairs where no value ever could are refused here, before a value is read: decimals
/// and UUIDs into a column that takes neither, and into `decimal`, `uuid` and `json` columns
/// what they never take. A `list`, `struct` or `map` column takes text, its ClickHouse text
/// form, and no other single value. Every other pair is judged value by value.
pub(crate) fn can_take(ty: &ColumnType, kind: Kind) -> bool {
    use ColumnType as T;
    let number = matches!(
        ty,
        T::Int8
            | T::Int16
            | T::Int32
            | T::Int64
            | T::UInt8
            | T::UInt16
            | T::UInt32
            | T::UInt64
            | T::Float32
            | T::Float64
    );
    match (ty, kind) {
        (_, Kind::Decimal) => number || matches!(ty, T::Decimal { .. } | T::String),
        (_, Kind::Uuid) => matches!(ty, T::Uuid | T::String),
        (T::Decimal { .. }, kind) => matches!(kind, Kind::Whole | Kind::Text),
        (T::Uuid | T::Json, kind) => kind == Kind::Text,
        (T::List(_) | T::Struct(_) | T::Map(_), kind) => kind == Kind::Text,
        _ => true,
    }
}

pub(crate) fn mismatch(value: Value<'_>, what: &str) -> String {
    let given = match value {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => format!("the boolean {b}"),
        Value::Int(n) => format!("the number {n}"),
        Value::UInt(n) => format!("the number {n}"),
        Value::Float(n) => format!("the number {n}"),
        Value::Text(t) => format!("'{}'", printable(t)),
        Value::Days(_) => "a date".to_owned(),
        Value::Micros(_) => "a date and time".to_owned(),
        Value::Decimal(unscaled, scale) => format!("the decimal {}", decimal_text(unscaled, scale)),
        Value::Uuid(id) => format!("the UUID {}", uuid_text(id)),
    };
    format!("{given} is not {what}")
}

pub(crate) fn to_bool(value: Value<'_>) -> Result<bool, String> {
    match value {
        Value::Bool(b) => Ok(b),
        Value::Int(0) | Value::UInt(0) => Ok(false),
        Value::Int(1) | Value::UInt(1) => Ok(true),
        Value::Text(t) => text::parse_bool(t).ok_or_else(|| mismatch(value, "a boolean")),
        _ => Err(mismatch(value, "a boolean")),
    }
}

/// A whole number in the range of `T`, the column's type `ty`.
pub(crate) fn to_int<T: TryFrom<i64> + TryFrom<u64>>(
    value: Value<'_>,
    ty: &ColumnType,
) -> Result<T, String> {
    let out_of_range = || format!("{} is out of range for {}", shown(value), ty.name());
    match value {
        Value::Int(n) => T::try_from(n).map_err(|_| out_of_range()),
        Value::UInt(n) => T::try_from(n).map_err(|_| out_of_range()),
        Value::Bool(b) => T::try_from(u64::from(b)).map_err(|_| out_of_range()),
        Value::Decimal(unscaled, scale) => {
            let whole =
                rescale(unscaled, scale, 0).map_err(|_| mismatch(value, "a whole number"))?;
            match (i64::try_from(whole), u64::try_from(whole)) {
                (Ok(n), _) => T::try_from(n).map_err(|_| out_of_range()),
                (_, Ok(n)) => T::try_from(n).map_err(|_| out_of_range()),
                _ => Err(out_of_range()),
            }
        }
        Value::Text(t) => match text::parse_int(t) {
            Some(text::Int::Signed(n)) => T::try_from(n).map_err(|_| out_of_range()),
            Some(text::Int::Unsigned(n)) => T::try_from(n).map_err(|_| out_of_range()),
            None => Err(mismatch(value, "a whole number")),
        },
        _ => Err(mismatch(value, "a whole number")),
    }
}

fn shown(value: Value<'_>) -> String {
    match value {
        Value::Int(n) => n.to_string(),
        Value::UInt(n) => n.to_string(),
        Value::Text(t) => printable(t),
        Value::Decimal(unscaled, scale) => decimal_text(unscaled, scale),
        other => format!("{other:?}"),
    }
}

pub(crate) fn to_float(value: Value<'_>) -> Result<f64, String> {
    match value {
        Value::Float(f) => Ok(f),
        Value::Int(n) => Ok(n as f64),
        Value::UInt(n) => Ok(n as f64),
        Value::Text(t) => text::parse_float(t).ok_or_else(|| mismatch(value, "a number")),
        Value::Decimal(unscaled, scale) => decimal_text(unscaled, scale)
            .parse()
            .map_err(|_| mismatch(value, "a number")),
        _ => Err(mismatch(value, "a number")),
    }
}

/// Text for a `string` column: text as it is, and a binary UUID or decimal written out.
pub(crate) fn to_text(value: Value<'_>) -> Result<Cow<'_, str>, String> {
    match value {
        Value::Text(t) => Ok(Cow::Borrowed(t)),
        Value::Uuid(id) => Ok(Cow::Owned(uuid_text(id))),
        Value::Decimal(unscaled, scale) => Ok(Cow::Owned(decimal_text(unscaled, scale))),
        _ => Err(mismatch(value, "a string")),
    }
}

/// Text for a `uuid` column: a binary UUID written out, or text, which `conform` canonicalizes.
pub(crate) fn to_uuid(value: Value<'_>) -> Result<Cow<'_, str>, String> {
    match value {
        Value::Text(t) => Ok(Cow::Borrowed(t)),
        Value::Uuid(id) => Ok(Cow::Owned(uuid_text(id))),
        _ => Err(mismatch(value, "a UUID")),
    }
}

/// Text for a `json` column, which `conform` checks is JSON.
pub(crate) fn to_json(value: Value<'_>) -> Result<&str, String> {
    match value {
        Value::Text(t) => Ok(t),
        _ => Err(mismatch(value, "JSON text")),
    }
}

/// The unscaled integer of a `decimal(precision, scale)` column, the column's type `ty`: text
/// that fits exactly, a whole number, or a binary decimal rescaled without losing a digit.
pub(crate) fn to_decimal(value: Value<'_>, ty: &ColumnType) -> Result<i128, String> {
    let &ColumnType::Decimal { precision, scale } = ty else {
        return Err(mismatch(value, "a decimal"));
    };
    let unscaled = match value {
        Value::Text(t) => return text::parse_decimal(t, precision, scale),
        Value::Int(n) => rescale(i128::from(n), 0, scale),
        Value::UInt(n) => rescale(i128::from(n), 0, scale),
        Value::Decimal(unscaled, from) => rescale(unscaled, from, scale),
        Value::Float(_) => {
            return Err(format!(
                "{} is a float, which is not exact; send a decimal as a Decimal or as its digits",
                shown(value)
            ));
        }
        _ => return Err(mismatch(value, "a decimal")),
    };
    let given = || match value {
        Value::Decimal(unscaled, from) => decimal_text(unscaled, from),
        other => shown(other),
    };
    let out_of_range = || format!("{} is out of range for {}", given(), ty.name());
    let unscaled = unscaled.map_err(|unfit| match unfit {
        Rescale::Fraction => format!(
            "{} has more digits after the point than {} keeps, and sluice does not round",
            given(),
            ty.name()
        ),
        Rescale::Range => out_of_range(),
    })?;
    let limit = 10_u128.checked_pow(u32::from(precision));
    if limit.is_some_and(|limit| unscaled.unsigned_abs() >= limit) {
        return Err(out_of_range());
    }
    Ok(unscaled)
}

/// Why a decimal does not rescale exactly.
enum Rescale {
    /// Digits after the point would be lost.
    Fraction,
    /// The value overflows.
    Range,
}

/// `unscaled * 10^-from` as an integer of scale `to`, exactly.
fn rescale(unscaled: i128, from: u8, to: u8) -> Result<i128, Rescale> {
    if unscaled == 0 {
        return Ok(0);
    }
    if from <= to {
        return 10_i128
            .checked_pow(u32::from(to - from))
            .and_then(|factor| unscaled.checked_mul(factor))
            .ok_or(Rescale::Range);
    }
    // A divisor past i128 leaves no non-zero value whole.
    let divisor = 10_i128
        .checked_pow(u32::from(from - to))
        .ok_or(Rescale::Fraction)?;
    if unscaled % divisor != 0 {
        return Err(Rescale::Fraction);
    }
    Ok(unscaled / divisor)
}

/// A decimal's text: `unscaled * 10^-scale`, with `scale` digits after the point.
pub(crate) fn decimal_text(unscaled: i128, scale: u8) -> String {
    let digits = unscaled.unsigned_abs().to_string();
    let sign = if unscaled < 0 { "-" } else { "" };
    if scale == 0 {
        return format!("{sign}{digits}");
    }
    let scale = usize::from(scale);
    let padded = format!("{digits:0>width$}", width = scale + 1);
    let (whole, fraction) = padded.split_at(padded.len() - scale);
    format!("{sign}{whole}.{fraction}")
}

/// A UUID's canonical text: hyphenated, in lower case.
pub(crate) fn uuid_text(id: u128) -> String {
    uuid::Uuid::from_u128(id).hyphenated().to_string()
}

pub(crate) fn to_days(value: Value<'_>) -> Result<i32, String> {
    match value {
        Value::Days(d) => Ok(d),
        Value::Text(t) => text::parse_date(t).ok_or_else(|| mismatch(value, "a date (YYYY-MM-DD)")),
        Value::Int(n) => i32::try_from(n).map_err(|_| mismatch(value, "a day number")),
        Value::UInt(n) => i32::try_from(n).map_err(|_| mismatch(value, "a day number")),
        _ => Err(mismatch(value, "a date")),
    }
}

/// A timestamp. A number is Unix seconds, as ClickHouse reads one for a `DateTime` column.
pub(crate) fn to_micros(value: Value<'_>) -> Result<i64, String> {
    let too_far = || format!("{} is too far from 1970 for a timestamp", shown(value));
    match value {
        Value::Micros(m) => Ok(m),
        Value::Days(d) => Ok(i64::from(d) * 86_400_000_000),
        Value::Int(s) => s.checked_mul(1_000_000).ok_or_else(too_far),
        Value::UInt(s) => i64::try_from(s)
            .ok()
            .and_then(|s| s.checked_mul(1_000_000))
            .ok_or_else(too_far),
        Value::Float(s) => text::seconds_to_micros(s).ok_or_else(too_far),
        Value::Text(t) => text::parse_timestamp(t).ok_or_else(|| {
            mismatch(
                value,
                "a date and time (YYYY-MM-DD hh:mm:ss) or Unix seconds",
            )
        }),
        Value::Bool(_) | Value::Null | Value::Decimal(..) | Value::Uuid(_) => {
            Err(mismatch(value, "a date and time"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decimal(precision: u8, scale: u8) -> ColumnType {
        ColumnType::Decimal { precision, scale }
    }

    #[test]
    fn the_pairs_no_value_could_fit_are_told_up_front() {
        for ty in ColumnType::ALL {
            let number_or_text = !matches!(
                ty,
                ColumnType::Bool
                    | ColumnType::Date
                    | ColumnType::Timestamp
                    | ColumnType::Uuid
                    | ColumnType::Json
            );
            assert_eq!(can_take(&ty, Kind::Decimal), number_or_text, "{ty}");
            let uuid = matches!(ty, ColumnType::Uuid | ColumnType::String);
            assert_eq!(can_take(&ty, Kind::Uuid), uuid, "{ty}");
            assert!(
                can_take(&ty, Kind::Text),
                "{ty}: text is judged value by value"
            );
        }
        for kind in [Kind::Bool, Kind::Float, Kind::Date, Kind::Time, Kind::Other] {
            for ty in [decimal(9, 2), ColumnType::Uuid, ColumnType::Json] {
                assert!(!can_take(&ty, kind), "{kind:?} into {ty}");
            }
        }
        assert!(can_take(&decimal(9, 2), Kind::Whole));
        assert!(!can_take(&ColumnType::Json, Kind::Whole));
        assert!(
            can_take(&ColumnType::Int64, Kind::Date),
            "judged value by value"
        );
    }
}
