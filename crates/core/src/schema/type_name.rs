//! Type names as users write them: sluice's own (`int64`, `list<string>`,
//! `struct<code: int32, tags: list<string>>`, `map<string, float64>`) and ClickHouse's
//! (`Int64`, `Array(String)`, `Tuple(code Int32, tags Array(String))`, `Map(String, Float64)`,
//! `Nullable(T)`, `LowCardinality(T)`).
//!
//! A struct field's name is written as it is when it is a plain identifier, and in backquotes
//! otherwise, with `\` before a backquote or a backslash inside: `` struct<`http.status`: int32> ``.

use super::column_type::{ColumnType, StructField};
use super::{MAX_DECIMAL_PRECISION, check_column_name};
use crate::name::printable;

/// The most levels of `list`, `struct` and `map` a type may have.
pub const MAX_TYPE_DEPTH: usize = 16;

impl ColumnType {
    /// Parses a type name; the second value is true when it was written `Nullable(T)`.
    pub fn parse(text: &str) -> Result<(ColumnType, bool), String> {
        parse_at(text, 0)
    }
}

fn parse_at(text: &str, depth: usize) -> Result<(ColumnType, bool), String> {
    let text = text.trim();
    if let Some(inner) = call(text, "Nullable") {
        return parse_at(inner, depth).map(|(ty, _)| (ty, true));
    }
    // Dictionary encoding is the store's business: the values are T's.
    if let Some(inner) = call(text, "LowCardinality") {
        return parse_at(inner, depth);
    }
    if let Some(ty) = parse_decimal(text)? {
        return Ok((ty, false));
    }
    if let Some(ty) = parse_nested(text, depth)? {
        return Ok((ty, false));
    }
    scalar(text).map(|ty| (ty, false))
}

/// A type inside a list, struct or map, one level down. Everything there may be null, so
/// `Nullable` changes nothing.
fn inner(text: &str, depth: usize) -> Result<ColumnType, String> {
    if depth + 1 > MAX_TYPE_DEPTH {
        return Err(format!(
            "types nest at most {MAX_TYPE_DEPTH} levels of list, struct and map"
        ));
    }
    parse_at(text, depth + 1).map(|(ty, _)| ty)
}

fn scalar(text: &str) -> Result<ColumnType, String> {
    Ok(match text {
        "bool" | "boolean" | "Bool" => ColumnType::Bool,
        "int8" | "Int8" => ColumnType::Int8,
        "int16" | "Int16" => ColumnType::Int16,
        "int32" | "Int32" => ColumnType::Int32,
        "int64" | "Int64" => ColumnType::Int64,
        "uint8" | "UInt8" => ColumnType::UInt8,
        "uint16" | "UInt16" => ColumnType::UInt16,
        "uint32" | "UInt32" => ColumnType::UInt32,
        "uint64" | "UInt64" => ColumnType::UInt64,
        "float32" | "Float32" => ColumnType::Float32,
        "float64" | "Float64" => ColumnType::Float64,
        "string" | "String" => ColumnType::String,
        "date" | "Date" => ColumnType::Date,
        "timestamp" | "DateTime" | "DateTime64" => ColumnType::Timestamp,
        "uuid" | "UUID" => ColumnType::Uuid,
        "json" | "JSON" | "Object('json')" => ColumnType::Json,
        other => {
            return Err(format!(
                "unknown column type '{}'; known types: bool, int8 .. int64, uint8 .. uint64, \
                 float32, float64, string, date, timestamp, decimal(p, s), uuid, json, list<T>, \
                 struct<name: T, ...>, map<string, T>",
                printable(other),
            ));
        }
    })
}

/// `list<T>`, `map<string, T>`, `struct<...>` and their ClickHouse spellings; `None` for any
/// other type.
fn parse_nested(text: &str, depth: usize) -> Result<Option<ColumnType>, String> {
    if let Some(element) = angle(text, "list").or_else(|| call(text, "Array")) {
        return Ok(Some(ColumnType::list(inner(element, depth)?)));
    }
    if let Some(args) = angle(text, "map").or_else(|| call(text, "Map")) {
        let parts = split_top_level(args, ',');
        let [key, value] = parts[..] else {
            return Err(format!(
                "'{}': a map has a key type and a value type: map<string, T>",
                printable(text)
            ));
        };
        if inner(key, depth)? != ColumnType::String {
            return Err(format!(
                "'{}': a map's keys are strings: map<string, T>",
                printable(text)
            ));
        }
        return Ok(Some(ColumnType::map(inner(value, depth)?)));
    }
    let fields = if let Some(args) = angle(text, "struct") {
        split_top_level(args, ',')
            .into_iter()
            .map(|field| struct_field(field, depth))
            .collect::<Result<Vec<_>, _>>()?
    } else if let Some(args) = call(text, "Tuple") {
        split_top_level(args, ',')
            .into_iter()
            .enumerate()
            .map(|(i, field)| tuple_field(i, field, depth))
            .collect::<Result<Vec<_>, _>>()?
    } else {
        return Ok(None);
    };
    check_fields(text, &fields)?;
    Ok(Some(ColumnType::Struct(fields)))
}

/// `name: T` in a `struct<...>`.
fn struct_field(text: &str, depth: usize) -> Result<StructField, String> {
    let (name, rest) = field_name(text.trim())?;
    let Some(ty) = rest.trim_start().strip_prefix(':') else {
        return Err(format!(
            "'{}': write a struct's fields as name: type",
            printable(text.trim())
        ));
    };
    Ok(StructField::new(name, inner(ty, depth)?))
}

/// `name T` or `T` in a `Tuple(...)`; ClickHouse names an unnamed tuple's elements 1, 2, ...
fn tuple_field(index: usize, text: &str, depth: usize) -> Result<StructField, String> {
    if let Ok(ty) = inner(text, depth) {
        return Ok(StructField::new((index + 1).to_string(), ty));
    }
    let (name, rest) = field_name(text.trim())?;
    if !rest.starts_with(char::is_whitespace) {
        return Err(format!(
            "'{}': write a tuple's elements as name Type",
            printable(text.trim())
        ));
    }
    Ok(StructField::new(name, inner(rest, depth)?))
}

/// At least one field, no name twice, each name one a column could have.
fn check_fields(text: &str, fields: &[StructField]) -> Result<(), String> {
    if fields.is_empty() {
        return Err(format!(
            "'{}': a struct has at least one field",
            printable(text)
        ));
    }
    for (i, field) in fields.iter().enumerate() {
        check_column_name(&field.name).map_err(|e| e.replace("column name", "field name"))?;
        if fields[..i].iter().any(|f| f.name == field.name) {
            return Err(format!(
                "'{}': field '{}' is named twice",
                printable(text),
                printable(&field.name)
            ));
        }
    }
    Ok(())
}

/// A field's name at the start of `text`, plain or in backquotes, and the text after it.
fn field_name(text: &str) -> Result<(String, &str), String> {
    let Some(quoted) = text.strip_prefix('`') else {
        let end = text
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(text.len());
        return Ok((text[..end].to_owned(), &text[end..]));
    };
    let mut name = String::new();
    let mut chars = quoted.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some((_, escaped)) => name.push(escaped),
                None => break,
            },
            '`' => return Ok((name, &quoted[i + 1..])),
            c => name.push(c),
        }
    }
    Err(format!(
        "'{}': a backquoted name has no closing backquote",
        printable(text)
    ))
}

/// Splits `text` at each `separator` outside brackets, quotes and backquotes.
fn split_top_level(text: &str, separator: char) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0usize, 0);
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        if let Some(q) = quote {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == q {
                quote = None;
            }
            continue;
        }
        match c {
            '\'' | '`' => quote = Some(c),
            '(' | '<' => depth += 1,
            ')' | '>' => depth = depth.saturating_sub(1),
            c if c == separator && depth == 0 => {
                parts.push(&text[start..i]);
                start = i + c.len_utf8();
            }
            _ => {}
        }
    }
    if !text[start..].trim().is_empty() || !parts.is_empty() {
        parts.push(&text[start..]);
    }
    parts
}

/// `Name(inner)` -> `inner`.
fn call<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    text.strip_prefix(name)?
        .strip_prefix('(')?
        .strip_suffix(')')
        .map(str::trim)
}

/// `name<inner>` -> `inner`.
fn angle<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    text.strip_prefix(name)?
        .trim_start()
        .strip_prefix('<')?
        .strip_suffix('>')
        .map(str::trim)
}

/// `decimal(p, s)`, `decimal(p)`, and ClickHouse's `Decimal(p, s)`, `Decimal32(s)`,
/// `Decimal64(s)`, `Decimal128(s)`; `None` for any other type.
fn parse_decimal(text: &str) -> Result<Option<ColumnType>, String> {
    let number = |digits: &str, what: &str| -> Result<u8, String> {
        digits
            .trim()
            .parse()
            .map_err(|_| format!("'{}': the {what} is not a number", printable(text)))
    };
    let (precision, scale) = if let Some(args) = call(text, "decimal").or(call(text, "Decimal")) {
        match args.split_once(',') {
            Some((precision, scale)) => (number(precision, "precision")?, number(scale, "scale")?),
            None => (number(args, "precision")?, 0),
        }
    } else if let Some((precision, args)) = [
        ("Decimal32", 9),
        ("Decimal64", 18),
        ("Decimal128", MAX_DECIMAL_PRECISION),
    ]
    .into_iter()
    .find_map(|(name, precision)| Some((precision, call(text, name)?)))
    {
        (precision, number(args, "scale")?)
    } else if text == "decimal" || text == "Decimal" {
        return Err("write a decimal as decimal(precision, scale): decimal(18, 2)".to_owned());
    } else {
        return Ok(None);
    };
    let scale = i8::try_from(scale).unwrap_or(i8::MAX);
    ColumnType::decimal(precision, scale)
        .map(Some)
        .map_err(|e| format!("'{}': {e}", printable(text)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> ColumnType {
        match ColumnType::parse(text) {
            Ok((ty, _)) => ty,
            Err(e) => panic!("{text}: {e}"),
        }
    }

    #[test]
    fn nested_types_parse_in_both_spellings() {
        let record = ColumnType::Struct(vec![
            StructField::new("code", ColumnType::Int32),
            StructField::new("tags", ColumnType::list(ColumnType::String)),
            StructField::new("http.status", ColumnType::map(ColumnType::Float64)),
        ]);
        for text in [
            "struct<code: int32, tags: list<string>, `http.status`: map<string, float64>>",
            "Tuple(code Int32, tags Array(Nullable(String)), `http.status` Map(String, Float64))",
            "Tuple(code LowCardinality(Int32), tags Array(LowCardinality(String)), \
             `http.status` Map(LowCardinality(String), Nullable(Float64)))",
        ] {
            assert_eq!(parsed(text), record, "{text}");
        }
        assert_eq!(parsed(&record.name()), record);
        assert_eq!(parsed(&record.clickhouse_name()), record);
        assert_eq!(
            record.clickhouse_name(),
            "Tuple(code Nullable(Int32), tags Array(Nullable(String)), \
             `http.status` Map(String, Nullable(Float64)))"
        );
        let unnamed = ColumnType::Struct(vec![
            StructField::new("1", ColumnType::String),
            StructField::new("2", ColumnType::UInt8),
        ]);
        assert_eq!(parsed("Tuple(String, UInt8)"), unnamed);
        assert_eq!(
            unnamed.clickhouse_name(),
            "Tuple(Nullable(String), Nullable(UInt8))"
        );
        assert_eq!(parsed(&unnamed.clickhouse_name()), unnamed);
        assert_eq!(
            parsed("list<decimal(10, 2)>"),
            ColumnType::list(ColumnType::Decimal {
                precision: 10,
                scale: 2
            })
        );
    }

    #[test]
    fn odd_field_names_round_trip() {
        for name in ["a b", "`", "\\", "a`b\\c", "é", "1st", "@timestamp"] {
            let ty = ColumnType::Struct(vec![StructField::new(name, ColumnType::Int8)]);
            assert_eq!(parsed(&ty.name()), ty, "{}", ty.name());
            assert_eq!(
                parsed(&ty.clickhouse_name()),
                ty,
                "{}",
                ty.clickhouse_name()
            );
        }
    }

    #[test]
    fn bad_nested_types_say_why() {
        let cases = [
            ("map<int64, string>", "keys are strings"),
            ("map<string>", "a key type and a value type"),
            ("struct<>", "at least one field"),
            ("struct<a: int8, a: int16>", "named twice"),
            ("struct<a int8>", "name: type"),
            ("struct<`a: int8>", "no closing backquote"),
            ("list<nothing>", "unknown column type 'nothing'"),
            ("Tuple(a)", "name Type"),
        ];
        for (text, says) in cases {
            let error = ColumnType::parse(text).unwrap_err();
            assert!(error.contains(says), "{text}: {error}");
        }
        let deep = format!("{}int8{}", "list<".repeat(16), ">".repeat(16));
        assert_eq!(parsed(&deep).depth(), 16);
        let deeper = format!("list<{deep}>");
        assert!(
            ColumnType::parse(&deeper)
                .unwrap_err()
                .contains("at most 16 levels")
        );
    }
}
