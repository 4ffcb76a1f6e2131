//! The values of `decimal`, `uuid` and `json` columns, judged the same way at every door.
//!
//! - A decimal's text must fit its column exactly: no more digits after the point than the scale
//!   (trailing zeros aside), no more before it than precision minus scale. Arrow's own parser
//!   drops extra fraction digits silently; a payment of 1.239 must not land as 1.23.
//! - A UUID is taken in any of the usual spellings and kept hyphenated in lower case, so equal
//!   UUIDs are equal text in every store.
//! - A `json` value is kept as the text that was sent; text that arrives as a string (in CSV,
//!   say) must be JSON.
//!
//! [`conform`] applies the last two to a decoded batch; the doors check decimals as they read
//! them, before Arrow parses them.

use std::sync::Arc;

use arrow::array::{ArrayRef, AsArray, RecordBatch, StringArray};

use crate::error::DecodeError;
use crate::name::printable;
use crate::schema::{ColumnType, TableSchema};

/// The largest exponent a decimal's text may carry: more could never fit 38 digits.
const MAX_EXPONENT: i64 = 100;

/// How deep a `json` value may nest: serde_json's own limit, which the stores' readers and
/// PostgreSQL's `jsonb` parser take without trouble.
pub const MAX_JSON_DEPTH: usize = 128;

/// Checks that `text`, a decimal number (`-12.50`, `1.5e2`), fits `decimal(precision, scale)`
/// exactly.
pub fn check_decimal(text: &str, precision: u8, scale: u8) -> Result<(), String> {
    let shown = || printable(text);
    let bad = || format!("'{}' is not a decimal number", shown());
    let unsigned = text.strip_prefix(['-', '+']).unwrap_or(text);
    let (mantissa, exponent) = match unsigned.split_once(['e', 'E']) {
        Some((mantissa, exponent)) => {
            let exponent: i64 = exponent.parse().map_err(|_| bad())?;
            if exponent.abs() > MAX_EXPONENT {
                return Err(format!(
                    "{} is out of range for decimal({precision}, {scale})",
                    shown()
                ));
            }
            (mantissa, exponent)
        }
        None => (unsigned, 0),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let all_digits = |part: &str| part.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() && fraction.is_empty() || !all_digits(whole) || !all_digits(fraction) {
        return Err(bad());
    }
    // The digits as one run, with the point `point` digits from its start.
    let digits: Vec<u8> = whole.bytes().chain(fraction.bytes()).collect();
    let point = whole.len() as i64 + exponent;
    let first = digits.iter().position(|&d| d != b'0');
    let Some(first) = first else {
        return Ok(()); // Zero fits every decimal.
    };
    let last = digits.iter().rposition(|&d| d != b'0').unwrap_or(first);
    let before_point = (point - first as i64).max(0);
    let after_point = (last as i64 + 1 - point).max(0);
    if after_point > i64::from(scale) {
        return Err(format!(
            "{} has {after_point} digits after the point; decimal({precision}, {scale}) keeps \
             {scale}, and sluice does not round",
            shown()
        ));
    }
    let room = i64::from(precision - scale);
    if before_point > room {
        return Err(format!(
            "{} has {before_point} digits before the point; decimal({precision}, {scale}) holds \
             {room}",
            shown()
        ));
    }
    Ok(())
}

/// The UUID in `text` (hyphenated, 32 hex digits, braced or `urn:uuid:`, any case), hyphenated
/// in lower case.
pub fn canonical_uuid(text: &str) -> Result<String, String> {
    uuid::Uuid::try_parse(text)
        .map(|id| id.hyphenated().to_string())
        .map_err(|e| format!("'{}' is not a UUID: {e}", printable(text)))
}

/// Checks that `text` is one JSON value, nested at most [`MAX_JSON_DEPTH`] deep.
pub fn check_json(text: &str) -> Result<(), String> {
    serde_json::from_str::<&serde_json::value::RawValue>(text)
        .map_err(|e| format!("not JSON: {e}"))?;
    check_json_depth(text)
}

/// Checks that the JSON `text` nests at most [`MAX_JSON_DEPTH`] arrays and objects deep.
pub fn check_json_depth(text: &str) -> Result<(), String> {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for byte in text.bytes() {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > MAX_JSON_DEPTH {
                    return Err(format!(
                        "the value nests more than {MAX_JSON_DEPTH} arrays and objects deep"
                    ));
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

/// `batch`, decoded into `table`'s columns, with its `uuid` columns in canonical form and its
/// `json` columns checked. The error names the row (counted from 1) and the column. A table
/// without such columns, most of them, costs a look at its column types.
pub fn conform(batch: RecordBatch, table: &TableSchema) -> Result<RecordBatch, DecodeError> {
    let types = || table.columns().iter().map(|c| &c.ty);
    if !types().any(|t| matches!(t, ColumnType::Uuid | ColumnType::Json)) {
        return Ok(batch);
    }
    let schema = batch.schema();
    let mut columns = batch.columns().to_vec();
    for (index, ty) in types().enumerate() {
        let name = || schema.field(index).name().clone();
        let at = |row: usize, message: String| {
            let mut error = DecodeError::new(Some(row + 1), Some(name()), message);
            error.counts_rows = true;
            error
        };
        let Some(text) = columns[index].as_string_opt::<i32>() else {
            continue;
        };
        match ty {
            ColumnType::Uuid => {
                let canonical = text
                    .iter()
                    .enumerate()
                    .map(|(row, value)| {
                        value
                            .map(canonical_uuid)
                            .transpose()
                            .map_err(|e| at(row, e))
                    })
                    .collect::<Result<StringArray, DecodeError>>()?;
                columns[index] = Arc::new(canonical) as ArrayRef;
            }
            ColumnType::Json => {
                for (row, value) in text.iter().enumerate() {
                    if let Some(value) = value {
                        check_json(value).map_err(|e| at(row, e))?;
                    }
                }
            }
            _ => {}
        }
    }
    RecordBatch::try_new(schema, columns).map_err(|e| DecodeError::new(None, None, e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_fit_exactly_or_are_refused() {
        for fits in [
            "0",
            "-0.00",
            "12.34",
            "12.340000",
            "+99999999.99",
            "1.5e2",
            "1234e-2",
            "0.01",
            ".5",
            "5.",
        ] {
            assert_eq!(check_decimal(fits, 10, 2), Ok(()), "{fits}");
        }
        let too_fine = check_decimal("1.239", 10, 2).unwrap_err();
        assert!(too_fine.contains("3 digits after the point"), "{too_fine}");
        let too_big = check_decimal("123456789", 10, 2).unwrap_err();
        assert!(too_big.contains("9 digits before the point"), "{too_big}");
        for bad in [
            "", "-", ".", "1.2.3", "1e", "1e5000", "12a", "0x10", "1 2", "NaN", "inf",
        ] {
            assert!(check_decimal(bad, 10, 2).is_err(), "{bad}");
        }
        assert!(check_decimal("1.5e-3", 10, 2).is_err());
        let widest = "9".repeat(38);
        assert_eq!(check_decimal(&widest, 38, 0), Ok(()));
        assert!(check_decimal(&format!("{widest}9"), 38, 0).is_err());
    }

    #[test]
    fn json_is_checked_and_held_to_a_depth() {
        assert_eq!(check_json("{\"a\": [1, \"]]]\\\"\", null]}"), Ok(()));
        assert!(check_json("{\"a\": }").is_err());
        assert!(check_json("1 2").is_err());
        let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert_eq!(check_json(&deep(MAX_JSON_DEPTH)), Ok(()));
        let too_deep = check_json(&deep(MAX_JSON_DEPTH + 1)).unwrap_err();
        assert!(too_deep.contains("nests more than"), "{too_deep}");
        assert!(
            check_json(&deep(100_000)).is_err(),
            "no stack is spent on depth"
        );
    }

    #[test]
    fn uuids_come_out_hyphenated_in_lower_case() {
        let id = "67e55044-10b1-426f-9247-bb680e5fe0c8";
        for spelling in [
            id.to_owned(),
            id.to_uppercase(),
            id.replace('-', ""),
            format!("{{{id}}}"),
            format!("urn:uuid:{id}"),
        ] {
            assert_eq!(canonical_uuid(&spelling).as_deref(), Ok(id), "{spelling}");
        }
        assert!(canonical_uuid("67e55044-10b1-426f-9247").is_err());
        assert!(canonical_uuid("not a uuid").is_err());
    }

    #[test]
    fn a_batch_gets_canonical_uuids_and_its_json_checked() {
        use crate::schema::{Column, TableSchema};
        use arrow::array::Array;
        let schema = TableSchema::new(vec![
            Column::new("id", ColumnType::Uuid),
            Column::new("doc", ColumnType::Json),
        ])
        .unwrap();
        let batch = |ids: Vec<Option<&str>>, docs: Vec<Option<&str>>| {
            RecordBatch::try_new(
                schema.arrow().clone(),
                vec![
                    Arc::new(StringArray::from(ids)),
                    Arc::new(StringArray::from(docs)),
                ],
            )
            .unwrap()
        };
        let upper = "67E55044-10B1-426F-9247-BB680E5FE0C8";
        let good = conform(
            batch(vec![Some(upper), None], vec![Some("{\"a\":[1,2]}"), None]),
            &schema,
        )
        .unwrap();
        assert_eq!(
            good.column(0).as_string::<i32>().value(0),
            upper.to_lowercase()
        );
        assert!(good.column(0).is_null(1));
        assert_eq!(good.schema(), schema.arrow().clone(), "the metadata stays");
        let bad = conform(batch(vec![None, Some("x")], vec![None, None]), &schema).unwrap_err();
        assert_eq!((bad.line, bad.field.as_deref()), (Some(2), Some("id")));
        let bad = conform(batch(vec![None], vec![Some("{\"a\":")]), &schema).unwrap_err();
        assert_eq!(bad.field.as_deref(), Some("doc"));
    }
}
