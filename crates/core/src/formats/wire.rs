//! ClickHouse types as a binary body declares them (`RowBinaryWithNamesAndTypes`), and how each
//! is laid out in `RowBinary`.

use super::columns::Value;
use crate::schema::ColumnType;

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
    Nullable(Box<WireType>),
}

impl WireType {
    /// Parses a type name as ClickHouse writes it. `LowCardinality(T)` is laid out as `T` in
    /// `RowBinary`, so it reads as `T`.
    pub(crate) fn parse(name: &str) -> Result<Self, String> {
        let name = name.trim();
        if let Some(inner) = wrapped(name, "Nullable") {
            return Ok(Self::Nullable(Box::new(Self::parse(inner)?)));
        }
        if let Some(inner) = wrapped(name, "LowCardinality") {
            return Self::parse(inner);
        }
        if let Some(args) = wrapped(name, "FixedString") {
            let size = args
                .trim()
                .parse()
                .map_err(|_| format!("FixedString needs a size, not '{args}'"))?;
            return Ok(Self::FixedString(size));
        }
        if name == "DateTime" || wrapped(name, "DateTime").is_some() {
            return Ok(Self::DateTime);
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
        Self::simple(name).ok_or_else(|| {
            format!(
                "sluice does not read ClickHouse type {name}; it reads Bool, Int8 to Int64, \
                 UInt8 to UInt64, Float32, Float64, String, FixedString, Date, Date32, DateTime, \
                 DateTime64, and Nullable or LowCardinality of those"
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
            _ => return None,
        })
    }

    /// What a column of `ty` is sent as: the type `DESCRIBE TABLE` announces for it.
    pub(crate) fn of(ty: ColumnType, nullable: bool) -> Self {
        let inner = Self::parse(&ty.clickhouse_name()).unwrap_or(Self::String);
        if nullable {
            Self::Nullable(Box::new(inner))
        } else {
            inner
        }
    }

    /// The column a new table gets for this type, and whether it is nullable.
    pub(crate) fn column_type(&self) -> (ColumnType, bool) {
        let ty = match self {
            Self::Nullable(inner) => return (inner.column_type().0, true),
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
        };
        (ty, false)
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
        })
    }
}

/// `Name(args)` to `args`.
fn wrapped<'a>(name: &'a str, wrapper: &str) -> Option<&'a str> {
    name.strip_prefix(wrapper)?
        .trim_start()
        .strip_prefix('(')?
        .strip_suffix(')')
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
        assert!(
            WireType::parse("Decimal(10, 2)")
                .unwrap_err()
                .contains("Decimal")
        );
        assert!(WireType::parse("DateTime64(12)").is_err());
        for ty in ColumnType::ALL {
            assert_eq!(WireType::of(ty, true).column_type(), (ty, true), "{ty}");
        }
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
