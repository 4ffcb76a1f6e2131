//! ClickHouse type names as a Native block declares them, parsed into how their column data is
//! laid out.

use crate::formats::fit::{Layout, Shape};
use crate::formats::typename::{MAX_NAME_DEPTH, split_args, tuple_element};
use crate::formats::value::Kind;
use crate::formats::wire::decimal_width;

/// The largest `FixedString` sluice reads: a bigger size is a corrupt header, not a value.
const MAX_FIXED_STRING: usize = 1 << 20;

/// A column's type in a Native block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NativeType {
    /// A fixed-width value.
    Scalar(Scalar),
    /// A LEB128 length, then the bytes.
    String,
    /// Exactly this many bytes, padded with zeros.
    FixedString(usize),
    /// A byte per row, 1 for null, then the values of every row.
    Nullable(Box<NativeType>),
    /// A dictionary of keys and a column of indexes into it.
    LowCardinality(Box<NativeType>),
    /// Cumulative `UInt64` offsets, then the elements of every row.
    Array(Box<NativeType>),
    /// An array of key and value pairs: offsets, then the keys, then the values.
    Map(Box<NativeType>, Box<NativeType>),
    /// One column per element, one after the other.
    Tuple(Vec<NativeType>),
    /// Only ever null: one placeholder byte per row.
    Nothing,
}

/// A fixed-width type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Scalar {
    Bool,
    Int8,
    Int16,
    Int32,
    Int64,
    Int128,
    Int256,
    UInt8,
    UInt16,
    UInt32,
    UInt64,
    UInt128,
    UInt256,
    Float32,
    Float64,
    /// Days since 1970 in a `UInt16`.
    Date,
    /// Days since 1970 in an `Int32`.
    Date32,
    /// Unix seconds in a `UInt32`; a time zone only changes how ClickHouse shows it.
    DateTime,
    /// Ticks of 10^-precision seconds since 1970 in an `Int64`.
    DateTime64(u32),
    /// Two `UInt64`, the high half first.
    Uuid,
    /// A `UInt32`, the first octet in its top byte.
    Ipv4,
    /// Sixteen bytes in network order.
    Ipv6,
    /// A signed integer of `width` bytes, scaled by 10^-scale.
    Decimal {
        width: usize,
        scale: u8,
    },
    /// An `Int8` or `Int16` (by `width`) standing for one of the names.
    Enum {
        width: usize,
        names: Vec<(i16, String)>,
    },
}

impl Scalar {
    /// Bytes per value.
    pub(crate) fn width(&self) -> usize {
        match self {
            Self::Bool | Self::Int8 | Self::UInt8 => 1,
            Self::Int16 | Self::UInt16 | Self::Date => 2,
            Self::Int32 | Self::UInt32 | Self::Float32 | Self::Date32 | Self::DateTime => 4,
            Self::Ipv4 => 4,
            Self::Int64 | Self::UInt64 | Self::Float64 | Self::DateTime64(_) => 8,
            Self::Int128 | Self::UInt128 | Self::Uuid | Self::Ipv6 => 16,
            Self::Int256 | Self::UInt256 => 32,
            Self::Decimal { width, .. } | Self::Enum { width, .. } => *width,
        }
    }
}

impl NativeType {
    /// Parses a type name as ClickHouse writes it.
    pub(crate) fn parse(name: &str) -> Result<Self, String> {
        parse_at(name, 0)
    }

    /// The kind of values a column of this type gives, for
    /// [`crate::formats::value::can_take`]; `None` for one judged only value by value.
    pub(crate) fn kind(&self) -> Option<Kind> {
        Some(match self {
            Self::Nullable(inner) | Self::LowCardinality(inner) => return inner.kind(),
            Self::String | Self::FixedString(_) => Kind::Text,
            Self::Array(_) | Self::Map(..) | Self::Tuple(_) | Self::Nothing => return None,
            Self::Scalar(scalar) => match scalar {
                Scalar::Bool => Kind::Bool,
                Scalar::Int8
                | Scalar::Int16
                | Scalar::Int32
                | Scalar::Int64
                | Scalar::Int128
                | Scalar::Int256
                | Scalar::UInt8
                | Scalar::UInt16
                | Scalar::UInt32
                | Scalar::UInt64
                | Scalar::UInt128
                | Scalar::UInt256 => Kind::Whole,
                Scalar::Float32 | Scalar::Float64 => Kind::Float,
                Scalar::Date | Scalar::Date32 => Kind::Date,
                Scalar::DateTime | Scalar::DateTime64(_) => Kind::Time,
                Scalar::Uuid => Kind::Uuid,
                Scalar::Decimal { .. } => Kind::Decimal,
                Scalar::Ipv4 | Scalar::Ipv6 | Scalar::Enum { .. } => Kind::Other,
            },
        })
    }
}

impl Layout for NativeType {
    fn shape(&self) -> Shape<'_, Self> {
        match self {
            Self::Array(element) => Shape::Array(element),
            Self::Tuple(elements) => Shape::Tuple(elements.iter().collect()),
            Self::Map(key, value) => Shape::Map(key, value),
            Self::Nullable(inner) | Self::LowCardinality(inner) => match inner.shape() {
                Shape::Single(kind) => Shape::Single(kind),
                _ => Shape::NullableNested,
            },
            other => Shape::Single(other.kind()),
        }
    }
}

fn parse_at(name: &str, depth: usize) -> Result<NativeType, String> {
    if depth > MAX_NAME_DEPTH {
        return Err(format!("types nest deeper than {MAX_NAME_DEPTH} levels"));
    }
    let name = name.trim();
    let (base, args) = match name.find('(') {
        Some(open) if name.ends_with(')') => {
            (name[..open].trim(), Some(&name[open + 1..name.len() - 1]))
        }
        Some(_) => return Err(format!("the type '{name}' has an unclosed parenthesis")),
        None => (name, None),
    };
    let inner = |args: &str| parse_at(args, depth + 1).map(Box::new);
    Ok(match (base, args) {
        ("Nullable", Some(args)) => NativeType::Nullable(inner(args)?),
        ("LowCardinality", Some(args)) => NativeType::LowCardinality(inner(args)?),
        ("Array", Some(args)) => NativeType::Array(inner(args)?),
        ("Map", Some(args)) => match split_args(args)?.as_slice() {
            [key, value] => NativeType::Map(inner(key)?, inner(value)?),
            _ => return Err(format!("Map takes a key and a value type, not '{args}'")),
        },
        ("Tuple", Some(args)) => NativeType::Tuple(
            split_args(args)?
                .into_iter()
                .map(|element| parse_at(tuple_element(element)?.1, depth + 1))
                .collect::<Result<_, _>>()?,
        ),
        ("FixedString", Some(args)) => match args.trim().parse() {
            Ok(size) if (1..=MAX_FIXED_STRING).contains(&size) => NativeType::FixedString(size),
            _ => {
                return Err(format!(
                    "FixedString needs a size from 1 to {MAX_FIXED_STRING}, not '{args}'"
                ));
            }
        },
        ("Nothing", None) => NativeType::Nothing,
        ("String", None) => NativeType::String,
        _ => NativeType::Scalar(scalar(name, base, args)?),
    })
}

fn scalar(name: &str, base: &str, args: Option<&str>) -> Result<Scalar, String> {
    Ok(match (base, args) {
        ("DateTime", _) => Scalar::DateTime,
        ("DateTime64", Some(args)) => {
            let precision = split_args(args)?
                .first()
                .copied()
                .unwrap_or_default()
                .trim();
            match precision.parse() {
                Ok(p) if p <= 9 => Scalar::DateTime64(p),
                _ => {
                    return Err(format!(
                        "DateTime64 needs a precision from 0 to 9, not '{precision}'"
                    ));
                }
            }
        }
        ("Decimal", Some(args)) => match split_args(args)?.as_slice() {
            [precision, scale] => decimal(parse_number(precision)?, parse_number(scale)?)?,
            _ => {
                return Err(format!(
                    "Decimal takes a precision and a scale, not '{args}'"
                ));
            }
        },
        ("Decimal32", Some(scale)) => decimal(9, parse_number(scale)?)?,
        ("Decimal64", Some(scale)) => decimal(18, parse_number(scale)?)?,
        ("Decimal128", Some(scale)) => decimal(38, parse_number(scale)?)?,
        ("Decimal256", Some(scale)) => decimal(76, parse_number(scale)?)?,
        ("Enum8", Some(args)) => Scalar::Enum {
            width: 1,
            names: enum_names(args)?,
        },
        ("Enum16" | "Enum", Some(args)) => Scalar::Enum {
            width: 2,
            names: enum_names(args)?,
        },
        (_, None) => simple(name).ok_or_else(|| unknown(name))?,
        _ => return Err(unknown(name)),
    })
}

fn simple(name: &str) -> Option<Scalar> {
    Some(match name {
        "Bool" | "Boolean" => Scalar::Bool,
        "Int8" => Scalar::Int8,
        "Int16" => Scalar::Int16,
        "Int32" => Scalar::Int32,
        "Int64" => Scalar::Int64,
        "Int128" => Scalar::Int128,
        "Int256" => Scalar::Int256,
        "UInt8" => Scalar::UInt8,
        "UInt16" => Scalar::UInt16,
        "UInt32" => Scalar::UInt32,
        "UInt64" => Scalar::UInt64,
        "UInt128" => Scalar::UInt128,
        "UInt256" => Scalar::UInt256,
        "Float32" => Scalar::Float32,
        "Float64" => Scalar::Float64,
        "Date" => Scalar::Date,
        "Date32" => Scalar::Date32,
        "UUID" => Scalar::Uuid,
        "IPv4" => Scalar::Ipv4,
        "IPv6" => Scalar::Ipv6,
        _ => return None,
    })
}

fn unknown(name: &str) -> String {
    format!(
        "sluice does not read ClickHouse type {name}; it reads Bool, Int8 to Int256, UInt8 to \
         UInt256, Float32, Float64, Decimal, String, FixedString, Date, Date32, DateTime, \
         DateTime64, UUID, IPv4, IPv6, Enum8, Enum16, and Nullable, LowCardinality, Array, Map \
         and Tuple of those"
    )
}

fn parse_number(text: &str) -> Result<u32, String> {
    text.trim()
        .parse()
        .map_err(|_| format!("'{}' is not a whole number", text.trim()))
}

fn decimal(precision: u32, scale: u32) -> Result<Scalar, String> {
    let width = decimal_width(precision)
        .ok_or_else(|| format!("a Decimal's precision must be from 1 to 76, not {precision}"))?;
    match u8::try_from(scale) {
        Ok(scale) if u32::from(scale) <= precision => Ok(Scalar::Decimal { width, scale }),
        _ => Err(format!(
            "a Decimal's scale {scale} exceeds its precision {precision}"
        )),
    }
}

/// `'a' = 1, 'b' = 2` (or `'a', 'b'`, numbered from 1) into values and names.
fn enum_names(args: &str) -> Result<Vec<(i16, String)>, String> {
    let mut names = Vec::new();
    for (position, element) in split_args(args)?.into_iter().enumerate() {
        let element = element.trim();
        let (quoted, value) = match element.rfind('=') {
            Some(eq) if !element[eq..].contains('\'') => {
                (element[..eq].trim(), Some(&element[eq + 1..]))
            }
            _ => (element, None),
        };
        let name = unquote(quoted)
            .ok_or_else(|| format!("an Enum name must be quoted, not '{quoted}'"))?;
        let value = match value {
            Some(value) => value
                .trim()
                .parse()
                .map_err(|_| format!("the Enum value of '{name}' is not a number"))?,
            None => {
                i16::try_from(position + 1).map_err(|_| "an Enum has too many names".to_owned())?
            }
        };
        names.push((value, name));
    }
    Ok(names)
}

/// A single-quoted SQL string, with its backslash escapes resolved.
fn unquote(quoted: &str) -> Option<String> {
    let body = quoted.strip_prefix('\'')?.strip_suffix('\'')?;
    let mut out = String::with_capacity(body.len());
    let mut chars = body.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        out.push(match chars.next()? {
            'n' => '\n',
            't' => '\t',
            'r' => '\r',
            '0' => '\0',
            other => other,
        });
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scalar(name: &str) -> Scalar {
        match NativeType::parse(name).unwrap() {
            NativeType::Scalar(s) => s,
            other => panic!("{name} parsed as {other:?}"),
        }
    }

    #[test]
    fn parses_nested_and_parameterised_types() {
        assert_eq!(
            NativeType::parse("LowCardinality(Nullable(String))"),
            Ok(NativeType::LowCardinality(Box::new(NativeType::Nullable(
                Box::new(NativeType::String)
            ))))
        );
        assert_eq!(
            NativeType::parse("Map(String, Array(Tuple(a UInt8, `b c` DateTime64(3, 'UTC'))))"),
            Ok(NativeType::Map(
                Box::new(NativeType::String),
                Box::new(NativeType::Array(Box::new(NativeType::Tuple(vec![
                    NativeType::Scalar(Scalar::UInt8),
                    NativeType::Scalar(Scalar::DateTime64(3)),
                ]))))
            ))
        );
        assert_eq!(scalar("DateTime('Europe/Paris')"), Scalar::DateTime);
        assert_eq!(
            scalar("Decimal(20, 4)"),
            Scalar::Decimal {
                width: 16,
                scale: 4
            }
        );
        assert_eq!(
            scalar("Decimal32(2)"),
            Scalar::Decimal { width: 4, scale: 2 }
        );
        assert_eq!(
            scalar("Enum8('a, b' = -1, 'it\\'s' = 2)"),
            Scalar::Enum {
                width: 1,
                names: vec![(-1, "a, b".to_owned()), (2, "it's".to_owned())]
            }
        );
        assert_eq!(
            scalar("Enum16('x', 'y')"),
            Scalar::Enum {
                width: 2,
                names: vec![(1, "x".to_owned()), (2, "y".to_owned())]
            }
        );
    }

    #[test]
    fn refuses_what_it_cannot_lay_out() {
        for (name, says) in [
            ("Decimal(80, 2)", "precision"),
            ("DateTime64(12)", "precision"),
            ("FixedString(0)", "size"),
            ("Map(String)", "key and a value"),
            ("Array(String", "unclosed"),
            ("Tuple(UInt8,)", "empty argument"),
            ("Enum8(a = 1)", "quoted"),
            ("JSON", "does not read"),
            ("Variant(String, UInt8)", "does not read"),
        ] {
            let error = NativeType::parse(name).unwrap_err();
            assert!(error.contains(says), "{name}: {error}");
        }
        let deep = format!("{}String{}", "Array(".repeat(60), ")".repeat(60));
        assert!(NativeType::parse(&deep).unwrap_err().contains("deeper"));
    }
}
