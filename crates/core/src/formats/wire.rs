//! ClickHouse types as a binary body declares them (`RowBinaryWithNamesAndTypes`), and how each
//! is laid out in `RowBinary`.
//!
//! An `Array` is its length as a LEB128 number, then its elements; a `Map` the same with a key
//! and a value per entry; a `Tuple` its elements one after the other; a `Nullable` a byte, 1 for
//! null with nothing after it, 0 before the value (ClickHouse's `SerializationArray`,
//! `SerializationMap`, `SerializationTuple` and `SerializationNullable`).
//!
//! The layouts `Native` shares are here too: a decimal is a little-endian signed integer of 4,
//! 8, 16 or 32 bytes by its precision, and a UUID is two little-endian `UInt64` halves, the high
//! half first (ClickHouse's `SerializationUUID` writes the `UInt128` that way).

use super::fit::{Layout, Shape};
use super::typename::{MAX_NAME_DEPTH, split_args, tuple_element, wrapped};
use super::value::{Kind, Value};
use crate::schema::{ColumnType, MAX_TYPE_DEPTH, StructField, check_column_name};

/// A ClickHouse type sluice reads from a binary body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum WireType {
    Bool,
    Int8,
    Int16,
    Int32,
    Int64,
    UInt8,
    UInt16,
    UInt32,
    UInt64,
    Float32,
    Float64,
    String,
    FixedString(usize),
    /// Days since 1970 in a `UInt16`.
    Date,
    /// Days since 1970 in an `Int32`.
    Date32,
    /// Unix seconds in a `UInt32`; a time zone only changes how ClickHouse shows it.
    DateTime,
    /// Ticks of 10^-precision seconds since 1970 in an `Int64`.
    DateTime64(u32),
    /// A signed integer of [`decimal_width`] bytes, scaled by 10^-scale.
    Decimal {
        precision: u8,
        scale: u8,
    },
    /// Sixteen bytes: see [`uuid_from_bytes`].
    Uuid,
    /// ClickHouse's `JSON` and `Object('json')`, which make a `json` column; sluice reads their
    /// values as text only, from the text formats.
    Json,
    Nullable(Box<WireType>),
    Array(Box<WireType>),
    /// The elements' names, when the tuple names them, and types.
    Tuple(Vec<(Option<String>, WireType)>),
    Map(Box<WireType>, Box<WireType>),
}

impl WireType {
    /// Parses a type name as ClickHouse writes it. `LowCardinality(T)` is laid out as `T` in
    /// `RowBinary`, so it reads as `T`.
    pub(crate) fn parse(name: &str) -> Result<Self, String> {
        Self::parse_at(name, 0)
    }

    fn parse_at(name: &str, depth: usize) -> Result<Self, String> {
        if depth > MAX_NAME_DEPTH {
            return Err(format!("types nest deeper than {MAX_NAME_DEPTH} levels"));
        }
        let name = name.trim();
        let inner = |name: &str| Self::parse_at(name, depth + 1);
        if let Some(args) = wrapped(name, "Nullable") {
            return Ok(Self::Nullable(Box::new(inner(args)?)));
        }
        if let Some(args) = wrapped(name, "LowCardinality") {
            return inner(args);
        }
        if let Some(args) = wrapped(name, "Array") {
            return Ok(Self::Array(Box::new(inner(args)?)));
        }
        if let Some(args) = wrapped(name, "Map") {
            return match split_args(args)?[..] {
                [key, value] => Ok(Self::Map(Box::new(inner(key)?), Box::new(inner(value)?))),
                _ => Err(format!("Map takes a key and a value type, not '{args}'")),
            };
        }
        if let Some(args) = wrapped(name, "Tuple") {
            let elements = split_args(args)?
                .into_iter()
                .map(|element| {
                    let (name, ty) = tuple_element(element)?;
                    Ok((name, inner(ty)?))
                })
                .collect::<Result<_, String>>()?;
            return Ok(Self::Tuple(elements));
        }
        Self::single(name)
    }

    /// A type that holds no other.
    fn single(name: &str) -> Result<Self, String> {
        if let Some(args) = wrapped(name, "FixedString") {
            // A value of no bytes would let an array claim any number of them.
            return match args.trim().parse() {
                Ok(size) if size > 0 => Ok(Self::FixedString(size)),
                _ => Err(format!(
                    "FixedString needs a size of 1 or more, not '{args}'"
                )),
            };
        }
        if name == "DateTime" || wrapped(name, "DateTime").is_some() {
            return Ok(Self::DateTime);
        }
        if let Some((precision, scale)) = decimal_args(name)? {
            return Ok(Self::Decimal { precision, scale });
        }
        if let Some(args) = wrapped(name, "DateTime64") {
            let precision = args.split(',').next().unwrap_or_default().trim();
            return match precision.parse() {
                Ok(p) if p <= 9 => Ok(Self::DateTime64(p)),
                _ => Err(format!(
                    "DateTime64 needs a precision from 0 to 9, not '{precision}'"
                )),
            };
        }
        if name == "JSON" || wrapped(name, "JSON").is_some() || wrapped(name, "Object").is_some() {
            return Ok(Self::Json);
        }
        Self::simple(name).ok_or_else(|| {
            format!(
                "sluice does not read ClickHouse type {name}; it reads Bool, Int8 to Int64, \
                 UInt8 to UInt64, Float32, Float64, Decimal, String, FixedString, Date, Date32, \
                 DateTime, DateTime64, UUID, JSON, and Nullable, LowCardinality, Array, Tuple \
                 and Map of those"
            )
        })
    }

    fn simple(name: &str) -> Option<Self> {
        Some(match name {
            "Bool" | "Boolean" => Self::Bool,
            "Int8" => Self::Int8,
            "Int16" => Self::Int16,
            "Int32" => Self::Int32,
            "Int64" => Self::Int64,
            "UInt8" => Self::UInt8,
            "UInt16" => Self::UInt16,
            "UInt32" => Self::UInt32,
            "UInt64" => Self::UInt64,
            "Float32" => Self::Float32,
            "Float64" => Self::Float64,
            "String" => Self::String,
            "Date" => Self::Date,
            "Date32" => Self::Date32,
            "UUID" => Self::Uuid,
            _ => return None,
        })
    }

    /// What a column of `ty` is sent as: the type `DESCRIBE TABLE` announces for it, which is
    /// never `Nullable` of an array, tuple or map.
    pub(crate) fn of(ty: &ColumnType, nullable: bool) -> Self {
        let inner = Self::parse(&ty.clickhouse_name()).unwrap_or(Self::String);
        if nullable && !ty.is_nested() {
            Self::Nullable(Box::new(inner))
        } else {
            inner
        }
    }

    /// The column a new table gets for this type, and whether it is nullable.
    pub(crate) fn column_type(&self) -> Result<(ColumnType, bool), String> {
        let ty = match self {
            Self::Nullable(inner) => return Ok((inner.column_type()?.0, true)),
            Self::Bool => ColumnType::Bool,
            Self::Int8 => ColumnType::Int8,
            Self::Int16 => ColumnType::Int16,
            Self::Int32 => ColumnType::Int32,
            Self::Int64 => ColumnType::Int64,
            Self::UInt8 => ColumnType::UInt8,
            Self::UInt16 => ColumnType::UInt16,
            Self::UInt32 => ColumnType::UInt32,
            Self::UInt64 => ColumnType::UInt64,
            Self::Float32 => ColumnType::Float32,
            Self::Float64 => ColumnType::Float64,
            Self::String | Self::FixedString(_) => ColumnType::String,
            Self::Date | Self::Date32 => ColumnType::Date,
            Self::DateTime | Self::DateTime64(_) => ColumnType::Timestamp,
            // At most 76 digits and a scale at most the precision, so the scale fits an i8.
            Self::Decimal { precision, scale } => ColumnType::decimal(*precision, *scale as i8)?,
            Self::Uuid => ColumnType::Uuid,
            Self::Json => ColumnType::Json,
            Self::Array(_) | Self::Tuple(_) | Self::Map(..) => self.nested_type()?,
        };
        Ok((ty, false))
    }

    /// The `list`, `struct` or `map` a new table gets for an `Array`, `Tuple` or `Map`.
    fn nested_type(&self) -> Result<ColumnType, String> {
        let ty = match self {
            Self::Array(element) => ColumnType::list(element.column_type()?.0),
            Self::Map(key, value) => {
                if key.kind() != Kind::Text {
                    return Err("sluice's maps have string keys: Map(String, T)".to_owned());
                }
                ColumnType::map(value.column_type()?.0)
            }
            Self::Tuple(elements) => {
                let mut fields: Vec<StructField> = Vec::with_capacity(elements.len());
                for (index, (name, ty)) in elements.iter().enumerate() {
                    // ClickHouse names an unnamed tuple's elements 1, 2, ...
                    let name = name.clone().unwrap_or_else(|| (index + 1).to_string());
                    check_column_name(&name).map_err(|e| e.replace("column name", "field name"))?;
                    if fields.iter().any(|f| f.name == name) {
                        return Err(format!("the tuple names '{name}' twice"));
                    }
                    fields.push(StructField::new(name, ty.column_type()?.0));
                }
                ColumnType::Struct(fields)
            }
            other => return other.column_type().map(|(ty, _)| ty),
        };
        if ty.depth() > MAX_TYPE_DEPTH {
            return Err(format!(
                "types nest at most {MAX_TYPE_DEPTH} levels of list, struct and map"
            ));
        }
        Ok(ty)
    }

    /// The kind of values this type gives, for [`super::value::can_take`]: `Other` for an
    /// array, tuple or map, which [`super::fit`] judges by their structure.
    pub(crate) fn kind(&self) -> Kind {
        match self {
            Self::Nullable(inner) => inner.kind(),
            Self::Json => Kind::Text,
            Self::Array(_) | Self::Tuple(_) | Self::Map(..) => Kind::Other,
            Self::Bool => Kind::Bool,
            Self::Int8
            | Self::Int16
            | Self::Int32
            | Self::Int64
            | Self::UInt8
            | Self::UInt16
            | Self::UInt32
            | Self::UInt64 => Kind::Whole,
            Self::Float32 | Self::Float64 => Kind::Float,
            Self::String | Self::FixedString(_) => Kind::Text,
            Self::Date | Self::Date32 => Kind::Date,
            Self::DateTime | Self::DateTime64(_) => Kind::Time,
            Self::Decimal { .. } => Kind::Decimal,
            Self::Uuid => Kind::Uuid,
        }
    }

    /// Reads one value of this type from `input`, moving it past the value.
    pub(crate) fn read<'a>(&self, input: &mut Input<'a>) -> Result<Value<'a>, String> {
        Ok(match self {
            Self::Nullable(inner) => match input.byte()? {
                0 => inner.read(input)?,
                1 => Value::Null,
                other => return Err(format!("a Nullable flag must be 0 or 1, not {other}")),
            },
            Self::Bool => match input.byte()? {
                0 => Value::Bool(false),
                1 => Value::Bool(true),
                other => return Err(format!("a Bool must be 0 or 1, not {other}")),
            },
            Self::Int8 => Value::Int(i64::from(i8::from_le_bytes(input.array()?))),
            Self::Int16 => Value::Int(i64::from(i16::from_le_bytes(input.array()?))),
            Self::Int32 => Value::Int(i64::from(i32::from_le_bytes(input.array()?))),
            Self::Int64 => Value::Int(i64::from_le_bytes(input.array()?)),
            Self::UInt8 => Value::UInt(u64::from(input.byte()?)),
            Self::UInt16 => Value::UInt(u64::from(u16::from_le_bytes(input.array()?))),
            Self::UInt32 => Value::UInt(u64::from(u32::from_le_bytes(input.array()?))),
            Self::UInt64 => Value::UInt(u64::from_le_bytes(input.array()?)),
            Self::Float32 => Value::Float(f64::from(f32::from_le_bytes(input.array()?))),
            Self::Float64 => Value::Float(f64::from_le_bytes(input.array()?)),
            Self::String => {
                let len = input.leb128()?;
                Value::Text(utf8(input.take(len)?)?)
            }
            Self::FixedString(size) => {
                let bytes = input.take(*size as u64)?;
                let end = bytes.iter().rposition(|b| *b != 0).map_or(0, |i| i + 1);
                Value::Text(utf8(&bytes[..end])?)
            }
            Self::Date => Value::Days(i32::from(u16::from_le_bytes(input.array()?))),
            Self::Date32 => Value::Days(i32::from_le_bytes(input.array()?)),
            Self::DateTime => {
                Value::Micros(i64::from(u32::from_le_bytes(input.array()?)) * 1_000_000)
            }
            Self::DateTime64(precision) => {
                ticks_to_micros(i64::from_le_bytes(input.array()?), *precision)?
            }
            Self::Decimal { precision, scale } => {
                let width = decimal_width(u32::from(*precision)).unwrap_or(32);
                Value::Decimal(decimal_integer(input.take(width as u64)?)?, *scale)
            }
            Self::Uuid => Value::Uuid(uuid_from_bytes(input.array()?)),
            Self::Json => {
                return Err(
                    "a JSON value in ClickHouse's binary layout, which sluice does not \
                     read: send the column as String, as sluice announces json columns"
                        .to_owned(),
                );
            }
            Self::Array(_) | Self::Tuple(_) | Self::Map(..) => {
                return Err(
                    "an Array, Tuple or Map goes into a list, struct or map column only".to_owned(),
                );
            }
        })
    }
}

impl Layout for WireType {
    fn shape(&self) -> Shape<'_, Self> {
        match self {
            Self::Array(element) => Shape::Array(element),
            Self::Tuple(elements) => Shape::Tuple(elements.iter().map(|(_, ty)| ty).collect()),
            Self::Map(key, value) => Shape::Map(key, value),
            Self::Nullable(inner) => match inner.shape() {
                Shape::Single(kind) => Shape::Single(kind),
                _ => Shape::NullableNested,
            },
            other => Shape::Single(Some(other.kind())),
        }
    }
}

/// The precision and scale of `Decimal(P, S)`, `Decimal32(S)`, `Decimal64(S)`, `Decimal128(S)`
/// or `Decimal256(S)`; `None` for another type.
fn decimal_args(name: &str) -> Result<Option<(u8, u8)>, String> {
    let number = |text: &str| {
        text.trim()
            .parse::<u8>()
            .map_err(|_| format!("'{name}': '{}' is not a number", text.trim()))
    };
    let (precision, scale) = if let Some(args) = wrapped(name, "Decimal") {
        match args.split_once(',') {
            Some((precision, scale)) => (number(precision)?, number(scale)?),
            None => return Err(format!("'{name}': Decimal takes a precision and a scale")),
        }
    } else if let Some((precision, scale)) = [
        ("Decimal32", 9),
        ("Decimal64", 18),
        ("Decimal128", 38),
        ("Decimal256", 76),
    ]
    .into_iter()
    .find_map(|(wrapper, precision)| Some((precision, wrapped(name, wrapper)?)))
    {
        (precision, number(scale)?)
    } else {
        return Ok(None);
    };
    if decimal_width(u32::from(precision)).is_none() || scale > precision {
        return Err(format!(
            "'{name}': a Decimal has 1 to 76 digits and a scale of at most its precision"
        ));
    }
    Ok(Some((precision, scale)))
}

/// The bytes of a Decimal of `precision` digits: ClickHouse's `Decimal32`, `Decimal64`,
/// `Decimal128` or `Decimal256`.
pub(crate) fn decimal_width(precision: u32) -> Option<usize> {
    Some(match precision {
        1..=9 => 4,
        10..=18 => 8,
        19..=38 => 16,
        39..=76 => 32,
        _ => return None,
    })
}

/// The unscaled integer of a Decimal laid out in `bytes` (4, 8, 16 or 32 of them), signed and
/// little-endian. A `Decimal256` is read when it fits 128 bits.
pub(crate) fn decimal_integer(bytes: &[u8]) -> Result<i128, String> {
    Ok(match bytes.len() {
        4 => i128::from(i32::from_le_bytes(array(bytes))),
        8 => i128::from(i64::from_le_bytes(array(bytes))),
        16 => i128::from_le_bytes(array(bytes)),
        32 => {
            let (low, high) = bytes.split_at(16);
            let low = i128::from_le_bytes(array(low));
            let sign = if low < 0 { 0xff } else { 0 };
            if high.iter().any(|b| *b != sign) {
                return Err("a Decimal256 past 128 bits does not fit any sluice column".to_owned());
            }
            low
        }
        other => {
            return Err(format!(
                "a Decimal of {other} bytes is not one ClickHouse lays out"
            ));
        }
    })
}

/// A UUID from its sixteen bytes: ClickHouse's `UInt128` of two little-endian `UInt64`, the
/// high half (the text's first 16 hex digits) first.
pub(crate) fn uuid_from_bytes(bytes: [u8; 16]) -> u128 {
    let (high, low) = bytes.split_at(8);
    (u128::from(u64::from_le_bytes(array(high))) << 64) | u128::from(u64::from_le_bytes(array(low)))
}

/// The first `N` bytes of `bytes`, which the caller has made sure holds them.
fn array<const N: usize>(bytes: &[u8]) -> [u8; N] {
    let mut out = [0; N];
    out.copy_from_slice(&bytes[..N]);
    out
}

fn utf8(bytes: &[u8]) -> Result<&str, String> {
    std::str::from_utf8(bytes).map_err(|e| format!("a string is not valid UTF-8: {e}"))
}

/// Ticks of 10^-`precision` seconds as microseconds, rounded down below a microsecond.
pub(crate) fn ticks_to_micros(ticks: i64, precision: u32) -> Result<Value<'static>, String> {
    let micros = if precision <= 6 {
        ticks.checked_mul(10_i64.pow(6 - precision))
    } else {
        Some(ticks.div_euclid(10_i64.pow(precision - 6)))
    };
    micros
        .map(Value::Micros)
        .ok_or_else(|| format!("{ticks} is too far from 1970 for a timestamp"))
}

/// A binary body being read front to back.
#[derive(Clone)]
pub(crate) struct Input<'a> {
    bytes: &'a [u8],
    pos: usize,
    /// Whether a read asked for more bytes than were left.
    ran_out: bool,
}

impl<'a> Input<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Self {
            bytes,
            pos: 0,
            ran_out: false,
        }
    }

    /// Whether a read failed because the body ended, rather than on a bad value: a reader of a
    /// stream then waits for more bytes.
    pub(crate) fn ran_out(&self) -> bool {
        self.ran_out
    }

    /// Bytes not read yet.
    pub(crate) fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.pos >= self.bytes.len()
    }

    /// Bytes read so far.
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    pub(crate) fn take(&mut self, len: u64) -> Result<&'a [u8], String> {
        let end = usize::try_from(len)
            .ok()
            .and_then(|len| self.pos.checked_add(len))
            .filter(|end| *end <= self.bytes.len())
            .ok_or_else(|| {
                self.ran_out = true;
                format!(
                    "the body ends {} bytes into a value of {len} bytes",
                    self.bytes.len() - self.pos
                )
            })?;
        let taken = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(taken)
    }

    pub(crate) fn byte(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }

    pub(crate) fn array<const N: usize>(&mut self) -> Result<[u8; N], String> {
        let bytes = self.take(N as u64)?;
        let mut out = [0; N];
        out.copy_from_slice(bytes);
        Ok(out)
    }

    /// An unsigned LEB128 number (ClickHouse's `VarUInt`).
    pub(crate) fn leb128(&mut self) -> Result<u64, String> {
        let mut value: u64 = 0;
        for shift in (0..64).step_by(7) {
            let byte = self.byte()?;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err("a length runs past ten bytes".to_owned())
    }

    /// The number of values an array or map holds, as a LEB128 number; never more than the
    /// bytes left, since each value takes one at least.
    pub(crate) fn count(&mut self) -> Result<usize, String> {
        let count = self.leb128()?;
        match usize::try_from(count) {
            Ok(count) if count <= self.remaining() => Ok(count),
            _ => {
                self.ran_out = true;
                Err(format!(
                    "{count} values, and the body ends {} bytes after",
                    self.remaining()
                ))
            }
        }
    }

    /// A length-prefixed UTF-8 string.
    pub(crate) fn string(&mut self) -> Result<&'a str, String> {
        let len = self.leb128()?;
        utf8(self.take(len)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_types_clients_send() {
        assert_eq!(
            WireType::parse("LowCardinality(Nullable(String))"),
            Ok(WireType::Nullable(Box::new(WireType::String)))
        );
        assert_eq!(WireType::parse("DateTime('UTC')"), Ok(WireType::DateTime));
        assert_eq!(
            WireType::parse("DateTime64(3, 'Europe/Paris')"),
            Ok(WireType::DateTime64(3))
        );
        assert_eq!(
            WireType::parse("FixedString(4)"),
            Ok(WireType::FixedString(4))
        );
        assert!(WireType::parse("DateTime64(12)").is_err());
        for ty in ColumnType::ALL {
            // `json` is announced, and so sent, as `String`.
            let sent = if ty == ColumnType::Json {
                ColumnType::String
            } else {
                ty.clone()
            };
            assert_eq!(
                WireType::of(&ty, true).column_type(),
                Ok((sent, true)),
                "{ty}"
            );
        }
    }

    #[test]
    fn parses_decimals_by_precision_and_uuids() {
        let decimal = |precision, scale| Ok(WireType::Decimal { precision, scale });
        assert_eq!(WireType::parse("Decimal(10, 2)"), decimal(10, 2));
        assert_eq!(WireType::parse("Decimal32(4)"), decimal(9, 4));
        assert_eq!(WireType::parse("Decimal64(2)"), decimal(18, 2));
        assert_eq!(WireType::parse("Decimal128(0)"), decimal(38, 0));
        assert_eq!(WireType::parse("Decimal256(3)"), decimal(76, 3));
        assert_eq!(
            WireType::parse("LowCardinality(Nullable(UUID))"),
            Ok(WireType::Nullable(Box::new(WireType::Uuid)))
        );
        for bad in [
            "Decimal(0, 0)",
            "Decimal(77, 2)",
            "Decimal(9, 10)",
            "Decimal(9)",
            "Decimal32(x)",
            "Decimal",
        ] {
            assert!(WireType::parse(bad).is_err(), "{bad}");
        }
        let wide = WireType::parse("Decimal256(2)").unwrap().column_type();
        assert!(wide.unwrap_err().contains("38"));
        assert_eq!(
            WireType::parse("Nullable(Decimal(20, 4))")
                .unwrap()
                .column_type(),
            Ok((
                ColumnType::Decimal {
                    precision: 20,
                    scale: 4
                },
                true
            ))
        );
    }

    /// The bytes ClickHouse 18.16.1 (Debian's `clickhouse-server`) answered for
    /// `SELECT toDecimal64('-12.34', 2) AS d, toUUID('67e55044-10b1-426f-9247-bb680e5fe0c8')
    /// AS u FORMAT RowBinary` (18.16 has no `RowBinaryWithNamesAndTypes`).
    const DECIMAL64_AND_UUID: [u8; 24] = [
        0x2e, 0xfb, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x6f, 0x42, 0xb1, 0x10, 0x44, 0x50, 0xe5,
        0x67, 0xc8, 0xe0, 0x5f, 0x0e, 0x68, 0xbb, 0x47, 0x92,
    ];

    /// ClickHouse 18.16.1's `RowBinary` of `SELECT toDecimal32('-1.5', 4) AS a,
    /// toDecimal128('-99999999999999999999999999999999999999', 0) AS b,
    /// toDecimal128('0.00000000000000000000000000000000000001', 38) AS c`: the widest values.
    const DECIMAL_BOUNDS: [u8; 36] = [
        0x68, 0xc5, 0xff, 0xff, 0x01, 0x00, 0x00, 0x00, 0xc0, 0xdd, 0x75, 0xf6, 0x85, 0x3b, 0x79,
        0xa5, 0x57, 0xb3, 0xc4, 0xb4, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    ];

    #[test]
    fn reads_decimals_and_uuids_as_clickhouse_lays_them_out() {
        fn read_all<'a>(types: &[&str], bytes: &'a [u8]) -> Vec<Value<'a>> {
            let mut input = Input::new(bytes);
            let values = types
                .iter()
                .map(|ty| WireType::parse(ty).unwrap().read(&mut input).unwrap())
                .collect();
            assert!(input.is_empty(), "{types:?} read every byte");
            values
        }
        let id = 0x67e5_5044_10b1_426f_9247_bb68_0e5f_e0c8;
        assert_eq!(
            read_all(&["Decimal(18, 2)", "UUID"], &DECIMAL64_AND_UUID),
            [Value::Decimal(-1234, 2), Value::Uuid(id)]
        );
        let widest = 10_i128.pow(38) - 1;
        assert_eq!(
            read_all(
                &["Decimal(9, 4)", "Decimal(38, 0)", "Decimal(38, 38)"],
                &DECIMAL_BOUNDS
            ),
            [
                Value::Decimal(-15_000, 4),
                Value::Decimal(-widest, 0),
                Value::Decimal(1, 38)
            ]
        );
        // ClickHouse 18.16.1's `RowBinary` of `CAST(NULL AS Nullable(Decimal(9, 2)))`,
        // `CAST(toDecimal32('3.25', 2) AS Nullable(Decimal(9, 2)))`, `CAST(NULL AS
        // Nullable(UUID))` and `CAST(toUUID('00000000-0000-0000-0000-000000000001') AS
        // Nullable(UUID))`.
        let nullable: [u8; 24] = [
            0x01, 0x00, 0x45, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
            0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        ];
        let (decimal, uuid) = ("Nullable(Decimal(9, 2))", "Nullable(UUID)");
        assert_eq!(
            read_all(&[decimal, decimal, uuid, uuid], &nullable),
            [
                Value::Null,
                Value::Decimal(325, 2),
                Value::Null,
                Value::Uuid(1)
            ]
        );
        let mut wide = (-5_i128).to_le_bytes().to_vec();
        wide.extend_from_slice(&[0xff; 16]);
        assert_eq!(decimal_integer(&wide), Ok(-5));
        wide[31] = 0x7f;
        assert!(decimal_integer(&wide).unwrap_err().contains("128 bits"));
        let short = WireType::parse("UUID")
            .unwrap()
            .read(&mut Input::new(&[0; 15]));
        assert!(short.unwrap_err().contains("body ends"));
    }

    #[test]
    fn reads_values_and_refuses_short_or_bad_ones() {
        let read = |ty: &str, bytes: &[u8]| {
            let mut input = Input::new(bytes);
            let value = WireType::parse(ty)
                .unwrap()
                .read(&mut input)
                .map(|v| format!("{v:?}"));
            (value, input.pos())
        };
        assert_eq!(read("Int16", &[0xfe, 0xff]), (Ok("Int(-2)".into()), 2));
        assert_eq!(read("Nullable(UInt8)", &[1]), (Ok("Null".into()), 1));
        assert_eq!(read("String", b"\x02hi"), (Ok("Text(\"hi\")".into()), 3));
        assert_eq!(
            read("FixedString(3)", b"ab\0"),
            (Ok("Text(\"ab\")".into()), 3)
        );
        assert_eq!(
            read("DateTime64(3)", &1_500_i64.to_le_bytes()),
            (Ok("Micros(1500000)".into()), 8)
        );
        assert_eq!(
            read("DateTime", &60_u32.to_le_bytes()),
            (Ok("Micros(60000000)".into()), 4)
        );
        assert!(
            read("String", b"\x05hi")
                .0
                .unwrap_err()
                .contains("body ends")
        );
        assert!(read("Bool", &[2]).0.unwrap_err().contains("0 or 1"));
        assert!(read("String", &[0xff; 11]).0.is_err());
        assert!(
            read("String", b"\x02\xff\xfe")
                .0
                .unwrap_err()
                .contains("UTF-8")
        );
    }
}
