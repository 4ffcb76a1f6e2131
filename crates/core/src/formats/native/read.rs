//! A Native column's bytes: walked over to find where it ends, or read into values.
//!
//! Every column starts with its prefix, the state of the types that keep one
//! (`LowCardinality`'s key version), for the whole nested type, and then its data.

use std::net::{Ipv4Addr, Ipv6Addr};

use super::types::{NativeType, Scalar};
use crate::formats::builder::Unfit;
use crate::formats::value::Value;
use crate::formats::wire::{Input, decimal_integer, ticks_to_micros, uuid_from_bytes};
use crate::schema::ColumnType;

/// `LowCardinality`'s only key layout: each granule carries the keys it adds.
const SHARED_DICTIONARIES_WITH_ADDITIONAL_KEYS: u64 = 1;
/// The index type's flags, above its width code in the low byte.
const NEEDS_GLOBAL_DICTIONARY: u64 = 1 << 8;
const HAS_ADDITIONAL_KEYS: u64 = 1 << 9;
const KNOWN_INDEX_FLAGS: u64 = 0xff | NEEDS_GLOBAL_DICTIONARY | HAS_ADDITIONAL_KEYS | 1 << 10;

/// One value, borrowed or, when it had to be written out as text (an address, an Enum's name,
/// a wide integer) or kept (a dictionary's key), owned.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Cell<'a> {
    Value(Value<'a>),
    Text(String),
}

impl Cell<'_> {
    pub(crate) fn value(&self) -> Value<'_> {
        match self {
            Self::Value(value) => *value,
            Self::Text(text) => Value::Text(text),
        }
    }
}

/// Reads the prefix of a column of `ty`, checking the state it announces.
pub(crate) fn read_prefix(ty: &NativeType, input: &mut Input<'_>) -> Result<(), String> {
    match ty {
        NativeType::Nullable(inner) | NativeType::Array(inner) => read_prefix(inner, input),
        NativeType::LowCardinality(inner) => {
            let version = u64::from_le_bytes(input.array()?);
            if version != SHARED_DICTIONARIES_WITH_ADDITIONAL_KEYS {
                return Err(format!(
                    "LowCardinality key version {version} is not one sluice reads (1)"
                ));
            }
            read_prefix(inner, input)
        }
        NativeType::Map(key, value) => {
            read_prefix(key, input)?;
            read_prefix(value, input)
        }
        NativeType::Tuple(elements) => elements.iter().try_for_each(|e| read_prefix(e, input)),
        NativeType::Scalar(_)
        | NativeType::String
        | NativeType::FixedString(_)
        | NativeType::Nothing => Ok(()),
    }
}

/// Moves past `rows` values of `ty` (after its prefix), checking only the layout.
pub(crate) fn skip(ty: &NativeType, input: &mut Input<'_>, rows: u64) -> Result<(), String> {
    match ty {
        NativeType::Scalar(scalar) => take_rows(input, rows, scalar.width()).map(drop),
        NativeType::FixedString(size) => take_rows(input, rows, *size).map(drop),
        NativeType::Nothing => take_rows(input, rows, 1).map(drop),
        NativeType::String => (0..rows).try_for_each(|_| {
            let len = input.leb128()?;
            input.take(len).map(drop)
        }),
        NativeType::Nullable(inner) => {
            take_rows(input, rows, 1)?;
            skip(inner, input, rows)
        }
        NativeType::LowCardinality(inner) => {
            let keys_type = dictionary_type(inner);
            skip_granules(input, rows, |input, keys| skip(keys_type, input, keys))
        }
        NativeType::Array(inner) => {
            let elements = offsets(input, rows)?.last().copied().unwrap_or(0);
            skip(inner, input, elements)
        }
        NativeType::Map(key, value) => {
            let elements = offsets(input, rows)?.last().copied().unwrap_or(0);
            skip(key, input, elements)?;
            skip(value, input, elements)
        }
        NativeType::Tuple(elements) => elements.iter().try_for_each(|e| skip(e, input, rows)),
    }
}

/// Where a column's values go, a row at a time: `(row, value)`, the row counted from 0 in the
/// block. Its error is a value that does not fit the table's column.
pub(crate) type Put<'p> = dyn FnMut(usize, Value<'_>) -> Result<(), Unfit> + 'p;

/// An error reading a column: the row it is at, counted from 0 in what was read, when it is
/// one value's.
pub(crate) type Failed = (Option<usize>, Unfit);

/// Reads `rows` values of `ty` (after its prefix) for a column of the table of type `target`,
/// handing each to `put`. `nulls`, when the column is nullable, marks the rows that are null:
/// their bytes are placeholders, never read as values. The error says which row, counted from
/// 0, is wrong when one value is.
pub(crate) fn visit(
    ty: &NativeType,
    input: &mut Input<'_>,
    rows: usize,
    target: &ColumnType,
    nulls: Option<&[u8]>,
    put: &mut Put<'_>,
) -> Result<(), Failed> {
    let whole = |message: String| (None, Unfit::new(message));
    let is_null = |row: usize| nulls.is_some_and(|nulls| nulls[row] == 1);
    let mut each = |row: usize, value: Result<Value<'_>, String>| {
        let value = if is_null(row) { Ok(Value::Null) } else { value };
        value
            .map_err(Unfit::new)
            .and_then(|value| put(row, value))
            .map_err(|e| (Some(row), e))
    };
    match ty {
        NativeType::Scalar(scalar) => {
            let width = scalar.width();
            let bytes = take_rows(input, rows as u64, width).map_err(whole)?;
            for (row, bytes) in bytes.chunks_exact(width).enumerate() {
                if is_null(row) {
                    each(row, Ok(Value::Null))?;
                    continue;
                }
                match scalar_cell(scalar, bytes, target) {
                    Ok(Cell::Value(value)) => each(row, Ok(value))?,
                    Ok(Cell::Text(text)) => each(row, Ok(Value::Text(&text)))?,
                    Err(e) => each(row, Err(e))?,
                }
            }
            Ok(())
        }
        NativeType::String => (0..rows).try_for_each(|row| {
            let len = input.leb128().map_err(whole)?;
            let bytes = input.take(len).map_err(whole)?;
            each(row, utf8(bytes))
        }),
        NativeType::FixedString(size) => {
            let bytes = take_rows(input, rows as u64, *size).map_err(whole)?;
            bytes
                .chunks_exact(*size)
                .enumerate()
                .try_for_each(|(row, bytes)| {
                    let end = bytes.iter().rposition(|b| *b != 0).map_or(0, |i| i + 1);
                    each(row, utf8(&bytes[..end]))
                })
        }
        NativeType::Nothing => {
            take_rows(input, rows as u64, 1).map_err(whole)?;
            (0..rows).try_for_each(|row| each(row, Ok(Value::Null)))
        }
        NativeType::Nullable(inner) => {
            let flags = take_rows(input, rows as u64, 1).map_err(whole)?;
            if let Some(row) = flags.iter().position(|flag| *flag > 1) {
                let message = format!("a null flag must be 0 or 1, not {}", flags[row]);
                return Err((Some(row), Unfit::new(message)));
            }
            visit(inner, input, rows, target, Some(flags), put)
        }
        NativeType::LowCardinality(inner) => visit_low_cardinality(inner, input, rows, target, put),
        NativeType::Array(_) | NativeType::Map(..) | NativeType::Tuple(_) => Err(whole(format!(
            "{} values go into a list, struct or map column only, not the table's {} column",
            kind(ty),
            target.name()
        ))),
    }
}

fn utf8(bytes: &[u8]) -> Result<Value<'_>, String> {
    std::str::from_utf8(bytes)
        .map(Value::Text)
        .map_err(|e| format!("a string is not valid UTF-8: {e}"))
}

fn kind(ty: &NativeType) -> &'static str {
    match ty {
        NativeType::Array(_) => "Array",
        NativeType::Map(..) => "Map",
        _ => "Tuple",
    }
}

/// The type of a `LowCardinality` column's keys: its own type, without `Nullable`; a nullable
/// one stands for null with the key at index 0.
fn dictionary_type(inner: &NativeType) -> &NativeType {
    match inner {
        NativeType::Nullable(inner) => inner,
        other => other,
    }
}

fn visit_low_cardinality(
    inner: &NativeType,
    input: &mut Input<'_>,
    rows: usize,
    target: &ColumnType,
    put: &mut Put<'_>,
) -> Result<(), Failed> {
    let whole = |message: String| (None, Unfit::new(message));
    let nullable = matches!(inner, NativeType::Nullable(_));
    let mut done = 0;
    while done < rows {
        let (width, key_count) = granule_header(input).map_err(whole)?;
        let key_count =
            usize::try_from(key_count).map_err(|_| whole("too many keys".to_owned()))?;
        let mut keys = Vec::with_capacity(key_count.min(input.remaining()));
        visit(
            dictionary_type(inner),
            input,
            key_count,
            target,
            None,
            &mut |_, key| {
                keys.push(owned(key));
                Ok(())
            },
        )
        .map_err(|(_, e)| whole(format!("a LowCardinality key: {}", e.message)))?;
        let indexes = granule_indexes(input, width, (rows - done) as u64).map_err(whole)?;
        for bytes in indexes.chunks_exact(width) {
            let mut index = [0; 8];
            index[..width].copy_from_slice(bytes);
            let index = u64::from_le_bytes(index);
            let value = match keys.get(index as usize) {
                _ if nullable && index == 0 => Value::Null,
                Some(key) => key.value(),
                None => {
                    let message =
                        format!("index {index} is past the {key_count} LowCardinality keys");
                    return Err((Some(done), Unfit::new(message)));
                }
            };
            put(done, value).map_err(|e| (Some(done), e))?;
            done += 1;
        }
    }
    Ok(())
}

/// A value kept beyond the bytes it was read from.
fn owned(value: Value<'_>) -> Cell<'static> {
    match value {
        Value::Text(text) => Cell::Text(text.to_owned()),
        Value::Null => Cell::Value(Value::Null),
        Value::Bool(b) => Cell::Value(Value::Bool(b)),
        Value::Int(n) => Cell::Value(Value::Int(n)),
        Value::UInt(n) => Cell::Value(Value::UInt(n)),
        Value::Float(f) => Cell::Value(Value::Float(f)),
        Value::Days(d) => Cell::Value(Value::Days(d)),
        Value::Micros(m) => Cell::Value(Value::Micros(m)),
        Value::Decimal(unscaled, scale) => Cell::Value(Value::Decimal(unscaled, scale)),
        Value::Uuid(id) => Cell::Value(Value::Uuid(id)),
    }
}

/// Walks the granules of a `LowCardinality` column holding `rows` rows, each with its keys
/// (handed to `keys`) and its indexes.
fn skip_granules<'a>(
    input: &mut Input<'a>,
    rows: u64,
    mut keys: impl FnMut(&mut Input<'a>, u64) -> Result<(), String>,
) -> Result<(), String> {
    let mut done = 0;
    while done < rows {
        let (width, key_count) = granule_header(input)?;
        keys(input, key_count)?;
        done += (granule_indexes(input, width, rows - done)?.len() / width) as u64;
    }
    Ok(())
}

/// A granule's index width in bytes, and how many keys follow.
fn granule_header(input: &mut Input<'_>) -> Result<(usize, u64), String> {
    let index_type = u64::from_le_bytes(input.array()?);
    if index_type & !KNOWN_INDEX_FLAGS != 0 {
        return Err(format!(
            "unknown LowCardinality index flags {index_type:#x}"
        ));
    }
    if index_type & NEEDS_GLOBAL_DICTIONARY != 0 || index_type & HAS_ADDITIONAL_KEYS == 0 {
        return Err(
            "a LowCardinality granule without its own keys, which Native never sends".to_owned(),
        );
    }
    let width = match index_type & 0xff {
        0 => 1,
        1 => 2,
        2 => 4,
        3 => 8,
        other => return Err(format!("unknown LowCardinality index width code {other}")),
    };
    Ok((width, u64::from_le_bytes(input.array()?)))
}

/// A granule's indexes: their count, at most `left`, then that many of `width` bytes.
fn granule_indexes<'a>(input: &mut Input<'a>, width: usize, left: u64) -> Result<&'a [u8], String> {
    let count = u64::from_le_bytes(input.array()?);
    if count == 0 || count > left {
        return Err(format!(
            "a LowCardinality granule of {count} rows where {left} are left"
        ));
    }
    take_rows(input, count, width)
}

/// Cumulative offsets of `rows` arrays; each must not fall below the one before.
pub(crate) fn offsets(input: &mut Input<'_>, rows: u64) -> Result<Vec<u64>, String> {
    let bytes = take_rows(input, rows, 8)?;
    let mut previous = 0;
    bytes
        .chunks_exact(8)
        .map(|b| {
            let offset = u64::from_le_bytes(b.try_into().expect("chunks of 8"));
            if offset < previous {
                return Err(format!("array offset {offset} falls below {previous}"));
            }
            previous = offset;
            Ok(offset)
        })
        .collect()
}

/// The bytes of `rows` values of `width` bytes each.
fn take_rows<'a>(input: &mut Input<'a>, rows: u64, width: usize) -> Result<&'a [u8], String> {
    let len = rows
        .checked_mul(width as u64)
        .ok_or_else(|| format!("{rows} rows of {width} bytes overflow"))?;
    input.take(len)
}

/// One fixed-width value for a column of type `target`.
fn scalar_cell<'a>(scalar: &Scalar, bytes: &[u8], target: &ColumnType) -> Result<Cell<'a>, String> {
    let value = match scalar {
        Scalar::Bool => match bytes[0] {
            0 => Value::Bool(false),
            1 => Value::Bool(true),
            other => return Err(format!("a Bool must be 0 or 1, not {other}")),
        },
        Scalar::Int8 => Value::Int(i64::from(bytes[0] as i8)),
        Scalar::Int16 => Value::Int(i64::from(i16::from_le_bytes(fixed(bytes)))),
        Scalar::Int32 => Value::Int(i64::from(i32::from_le_bytes(fixed(bytes)))),
        Scalar::Int64 => Value::Int(i64::from_le_bytes(fixed(bytes))),
        Scalar::UInt8 => Value::UInt(u64::from(bytes[0])),
        Scalar::UInt16 => Value::UInt(u64::from(u16::from_le_bytes(fixed(bytes)))),
        Scalar::UInt32 => Value::UInt(u64::from(u32::from_le_bytes(fixed(bytes)))),
        Scalar::UInt64 => Value::UInt(u64::from_le_bytes(fixed(bytes))),
        Scalar::Int128 => return Ok(wide_int(i128::from_le_bytes(fixed(bytes)))),
        Scalar::UInt128 => return Ok(wide_uint(u128::from_le_bytes(fixed(bytes)))),
        Scalar::Int256 | Scalar::UInt256 => return int256(scalar, bytes),
        Scalar::Float32 => Value::Float(f64::from(f32::from_le_bytes(fixed(bytes)))),
        Scalar::Float64 => Value::Float(f64::from_le_bytes(fixed(bytes))),
        Scalar::Date => Value::Days(i32::from(u16::from_le_bytes(fixed(bytes)))),
        Scalar::Date32 => Value::Days(i32::from_le_bytes(fixed(bytes))),
        Scalar::DateTime => Value::Micros(i64::from(u32::from_le_bytes(fixed(bytes))) * 1_000_000),
        Scalar::DateTime64(precision) => {
            ticks_to_micros(i64::from_le_bytes(fixed(bytes)), *precision)?
        }
        Scalar::Uuid => Value::Uuid(uuid_from_bytes(fixed(bytes))),
        Scalar::Ipv4 => {
            return Ok(Cell::Text(
                Ipv4Addr::from(u32::from_le_bytes(fixed(bytes))).to_string(),
            ));
        }
        Scalar::Ipv6 => return Ok(Cell::Text(Ipv6Addr::from(fixed::<16>(bytes)).to_string())),
        Scalar::Decimal { scale, .. } => Value::Decimal(decimal_integer(bytes)?, *scale),
        Scalar::Enum { width, names } => {
            let value = if *width == 1 {
                i16::from(bytes[0] as i8)
            } else {
                i16::from_le_bytes(fixed(bytes))
            };
            let name = names
                .iter()
                .find(|(v, _)| *v == value)
                .ok_or_else(|| format!("{value} is not one of the Enum's values"))?;
            if *target == ColumnType::String {
                return Ok(Cell::Text(name.1.clone()));
            }
            Value::Int(i64::from(value))
        }
    };
    Ok(Cell::Value(value))
}

fn fixed<const N: usize>(bytes: &[u8]) -> [u8; N] {
    let mut out = [0; N];
    out.copy_from_slice(&bytes[..N]);
    out
}

/// A 128-bit integer as a whole number when one fits, else as its text, which no
/// whole-number column takes.
fn wide_int<'a>(n: i128) -> Cell<'a> {
    if let Ok(n) = i64::try_from(n) {
        Cell::Value(Value::Int(n))
    } else if let Ok(n) = u64::try_from(n) {
        Cell::Value(Value::UInt(n))
    } else {
        Cell::Text(n.to_string())
    }
}

fn wide_uint<'a>(n: u128) -> Cell<'a> {
    match u64::try_from(n) {
        Ok(n) => Cell::Value(Value::UInt(n)),
        Err(_) => Cell::Text(n.to_string()),
    }
}

/// A 256-bit integer, read when it fits 128 bits.
fn int256<'a>(scalar: &Scalar, bytes: &[u8]) -> Result<Cell<'a>, String> {
    let (low, high) = bytes.split_at(16);
    let negative = *scalar == Scalar::Int256 && high[15] & 0x80 != 0;
    let extension = if negative { 0xff } else { 0 };
    if high.iter().any(|b| *b != extension) || (negative && low[15] & 0x80 == 0) {
        return Err("a 256-bit value past 128 bits does not fit any sluice column".to_owned());
    }
    Ok(if *scalar == Scalar::Int256 {
        wide_int(i128::from_le_bytes(fixed(low)))
    } else {
        wide_uint(u128::from_le_bytes(fixed(low)))
    })
}
