//! The strict pass: every row through serde_json before arrow-json sees the body.
//!
//! It refuses what is not JSON (RFC 8259): a missing or doubled comma, a raw control character in
//! a string, text after the object, anything serde_json refuses. And what arrow-json would take
//! but store differently from what was sent: a number with a fraction or an exponent in an
//! integer column (arrow-json truncates `1.5` to `1`), a float literal beyond `f64` (it becomes
//! infinity), a key given twice in one row (the last one wins), and a number in quotes where the
//! dialect does not take one. And values nested deeper than arrow-json can safely describe.
//!
//! Keys are matched to columns without allocating, and values of other columns are skipped
//! (`Skip`, which, unlike `IgnoredAny`, descends through serde_json's nesting limit and checks
//! strings' UTF-8).

use std::fmt;
use std::ops::Range;

use arrow::datatypes::{DataType, Field, SchemaRef};
use serde::de::{self, DeserializeSeed, MapAccess, Visitor};
use serde_json::error::Category;
use serde_json::value::RawValue;

use super::JsonDialect;
use super::frame::{Row as Framed, describe_start};
use super::leaf::kind_of;
use super::nested::{self, NestedValues};
use crate::error::DecodeError;
use crate::name::printable;
use crate::schema::ColumnType;
use crate::values;

/// serde_json's nesting limit, which this pass enforces before arrow-json sees a body: arrow-json
/// recurses once per level when it describes a bad value, and a few thousand `[` overflow the
/// stack and abort the process.
const MAX_DEPTH: usize = 128;

/// What a column's JSON values must look like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Integer,
    Float,
    /// A timestamp on the ClickHouse door, where a number is Unix seconds: noted, so the row is
    /// rewritten before arrow-json, which reads a number as microseconds.
    Seconds,
    /// A number, or a number in quotes, that fits exactly: arrow-json drops extra fraction
    /// digits.
    Decimal {
        precision: u8,
        scale: u8,
    },
    /// A UUID in a string.
    Uuid,
    /// Any value: noted, so the row is rewritten with the value's text as a string, which is
    /// what arrow-json puts in the column.
    Json,
    /// A `list`, `struct` or `map` value: noted, so it is built from its text
    /// ([`super::nested`]) and left out of what arrow-json reads.
    Nested,
    Other,
}

fn kind(field: &Field, dialect: JsonDialect) -> Kind {
    let data_type = field.data_type();
    if nested::is_nested(data_type) {
        return Kind::Nested;
    }
    match ColumnType::from_field(field) {
        Some(ColumnType::Decimal { precision, scale }) => {
            return Kind::Decimal { precision, scale };
        }
        Some(ColumnType::Uuid) => return Kind::Uuid,
        Some(ColumnType::Json) => return Kind::Json,
        _ => {}
    }
    if data_type.is_integer() {
        Kind::Integer
    } else if data_type.is_floating() {
        Kind::Float
    } else if dialect == JsonDialect::ClickHouse && matches!(data_type, DataType::Timestamp(..)) {
        Kind::Seconds
    } else {
        Kind::Other
    }
}

/// The rows, by index, that must be rewritten before arrow-json reads them.
#[derive(Debug, Default)]
pub(crate) struct ToRewrite {
    /// Rows that give a timestamp as a number of seconds (on the ClickHouse door only).
    pub(crate) in_seconds: Vec<usize>,
    /// Rows with a value other than null in a `json` column, each with where those values lie
    /// in the row's text.
    pub(crate) with_json: Vec<(usize, Vec<Range<usize>>)>,
    /// Rows with a `list`, `struct` or `map` value other than null, each with those values'
    /// columns and where the values lie in the row's text.
    pub(crate) with_nested: Vec<(usize, NestedValues)>,
}

impl ToRewrite {
    /// Whether no row needs rewriting or building apart: arrow-json takes the rows as sent.
    pub(crate) fn is_empty(&self) -> bool {
        self.in_seconds.is_empty() && self.with_json.is_empty() && self.with_nested.is_empty()
    }
}

/// Checks every row against `schema` (the columns decoded): `Err` for what must be refused though
/// arrow-json might take it. Under [`JsonDialect::Lenient`], syntax is left to arrow-json, as it
/// was when the rows were taken. `Ok` says which rows must be rewritten.
pub(crate) fn check(
    schema: &SchemaRef,
    rows: &[Framed<'_>],
    dialect: JsonDialect,
) -> Result<ToRewrite, DecodeError> {
    check_as(&Kinds::new(schema, dialect), schema, rows, dialect)
}

/// What each column of a schema must hold under a dialect, worked out once for many bodies.
pub(crate) struct Kinds(Vec<Kind>);

impl Kinds {
    pub(crate) fn new(schema: &SchemaRef, dialect: JsonDialect) -> Self {
        Self(schema.fields().iter().map(|f| kind(f, dialect)).collect())
    }
}

/// [`check`] with the columns' kinds, which `kinds` worked out for `schema` and `dialect`.
pub(crate) fn check_as(
    kinds: &Kinds,
    schema: &SchemaRef,
    rows: &[Framed<'_>],
    dialect: JsonDialect,
) -> Result<ToRewrite, DecodeError> {
    let kinds = kinds.0.as_slice();
    let mut seen = vec![false; kinds.len()];
    let mut to_rewrite = ToRewrite::default();
    for (index, framed) in rows.iter().enumerate() {
        seen.iter_mut().for_each(|s| *s = false);
        let mut problem = None;
        let mut seconds = false;
        let mut json = Vec::new();
        let mut nested = Vec::new();
        let row = Row {
            schema,
            kinds,
            quoted_numbers: dialect.takes_quoted_numbers(),
            seen: &mut seen,
            problem: &mut problem,
            seconds: &mut seconds,
            text: framed.text,
            json: &mut json,
            nested: &mut nested,
        };
        let read = match std::str::from_utf8(framed.text) {
            // Checked as UTF-8 in one go rather than string by string; a row that is not UTF-8
            // is read byte by byte, for serde_json to say where it breaks.
            Ok(text) => read_row(row, &mut serde_json::Deserializer::from_str(text)),
            Err(_) => read_row(row, &mut serde_json::Deserializer::from_slice(framed.text)),
        };
        let Err(error) = read else {
            if seconds {
                to_rewrite.in_seconds.push(index);
            }
            if !json.is_empty() {
                to_rewrite.with_json.push((index, json));
            }
            if !nested.is_empty() {
                to_rewrite.with_nested.push((index, nested));
            }
            continue;
        };
        if let Some((field, message)) = problem {
            return Err(DecodeError::new(Some(framed.line), Some(field), message));
        }
        if error.to_string().starts_with("recursion limit exceeded") {
            return Err(DecodeError::new(
                Some(framed.line),
                None,
                format!("values nested more than {MAX_DEPTH} levels deep ({error})"),
            ));
        }
        if dialect != JsonDialect::Lenient {
            return Err(refusal(framed, &error));
        }
    }
    Ok(to_rewrite)
}

/// What serde_json refused in a row, said where it is in the body.
pub(crate) fn refusal(framed: &Framed<'_>, error: &serde_json::Error) -> DecodeError {
    if error.classify() == Category::Data {
        // A whole JSON value that is not an object.
        let first = framed.text.iter().find(|b| !b.is_ascii_whitespace());
        let found = first.map_or_else(|| "nothing".to_owned(), |&b| describe_start(b));
        return DecodeError::new(
            Some(framed.line),
            None,
            format!("expected a JSON object, found {found}"),
        );
    }
    let (line, column) = framed.position_in_body(error.line(), error.column());
    let text = error.to_string();
    let suffix = format!(" at line {} column {}", error.line(), error.column());
    let what = text.strip_suffix(&suffix).unwrap_or(&text);
    let mut refused = DecodeError::new(Some(line), None, format!("invalid JSON: {what}"));
    refused.position = Some(column);
    refused
}

/// One row: an object whose keys are checked against the columns.
struct Row<'a> {
    schema: &'a SchemaRef,
    kinds: &'a [Kind],
    /// Whether a number column takes a number in quotes.
    quoted_numbers: bool,
    seen: &'a mut [bool],
    /// The column and what is wrong with it, when the row is refused for its content.
    problem: &'a mut Option<(String, String)>,
    /// Set when a timestamp column holds a number of seconds.
    seconds: &'a mut bool,
    /// The row's text, which the values read raw point into.
    text: &'a [u8],
    /// Where the row's `json` values other than null lie in `text`.
    json: &'a mut Vec<Range<usize>>,
    /// The row's nested values other than null: their columns, and where they lie in `text`.
    nested: &'a mut NestedValues,
}

impl<'de> DeserializeSeed<'de> for Row<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Row<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut next = 0;
        while let Some(column) = map.next_key_seed(Key {
            schema: self.schema,
            likely: next,
        })? {
            let Some(i) = column else {
                map.next_value_seed(Skip)?;
                continue;
            };
            next = i + 1;
            let name = || self.schema.field(i).name().clone();
            if std::mem::replace(&mut self.seen[i], true) {
                *self.problem = Some((
                    name(),
                    "the key appears more than once in the row".to_owned(),
                ));
                return Err(de::Error::custom("duplicate key"));
            }
            match self.kinds[i] {
                Kind::Other => {
                    map.next_value_seed(Skip)?;
                }
                Kind::Nested => {
                    let raw: &RawValue = map.next_value()?;
                    if raw.get() != "null" {
                        self.nested.push((i, span(self.text, raw.get())));
                    }
                }
                kind @ (Kind::Decimal { .. } | Kind::Uuid | Kind::Json) => {
                    let raw: &RawValue = map.next_value()?;
                    match judge_text(kind, raw.get()) {
                        Ok(true) => self.json.push(span(self.text, raw.get())),
                        Ok(false) => {}
                        Err(message) => {
                            *self.problem = Some((name(), message));
                            return Err(de::Error::custom("bad value"));
                        }
                    }
                }
                Kind::Seconds => {
                    if map.next_value_seed(IsNumber)? {
                        *self.seconds = true;
                    }
                }
                kind => {
                    let number = Number {
                        kind,
                        quoted: self.quoted_numbers,
                    };
                    // serde_json's own refusals (`01`, a literal beyond f64) are syntax errors,
                    // said with their place in the body.
                    if let Err(message) = map.next_value_seed(number)? {
                        *self.problem = Some((name(), message));
                        return Err(de::Error::custom("bad number"));
                    }
                }
            }
        }
        Ok(())
    }
}

/// Judges the text of a value in a `decimal`, `uuid` or `json` column: `Ok(true)` when it is
/// a `json` value other than null, which the row's rewrite turns into a string.
fn judge_text(kind: Kind, text: &str) -> Result<bool, String> {
    if text == "null" {
        return Ok(false);
    }
    let quoted = || serde_json::from_str::<std::borrow::Cow<'_, str>>(text).ok();
    match kind {
        Kind::Decimal { precision, scale } => {
            let number = match text.as_bytes().first() {
                Some(b'"') => quoted().ok_or_else(|| "not a string".to_owned())?,
                Some(b'-' | b'0'..=b'9') => text.into(),
                _ => {
                    return Err(format!(
                        "expected a decimal number, found {}",
                        kind_of(text)
                    ));
                }
            };
            values::check_decimal(&number, precision, scale).map(|()| false)
        }
        Kind::Uuid => match quoted() {
            Some(id) => values::canonical_uuid(&id).map(|_| false),
            None => Err(format!(
                "expected a UUID in a string, found {}",
                kind_of(text)
            )),
        },
        Kind::Json => values::check_json_depth(text).map(|()| true),
        _ => Ok(false),
    }
}

/// Where `value`, a slice of `text`, lies in it.
fn span(text: &[u8], value: &str) -> Range<usize> {
    // serde_json borrows a raw value read from a slice from that slice.
    let start = (value.as_ptr() as usize).saturating_sub(text.as_ptr() as usize);
    start..start + value.len()
}

/// A key: the index of the column it names, if any.
pub(super) struct Key<'a> {
    pub(super) schema: &'a SchemaRef,
    /// The column the key likely names: the one after the row's last key. Producers send a
    /// table's keys in one order, mostly the table's own, and a hit spares comparing the key
    /// with every column's name before it.
    pub(super) likely: usize,
}

impl<'de> DeserializeSeed<'de> for Key<'_> {
    type Value = Option<usize>;

    fn deserialize<D: de::Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key<'_> {
    type Value = Option<usize>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a key")
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<Self::Value, E> {
        let fields = self.schema.fields();
        if fields.get(self.likely).is_some_and(|f| f.name() == key) {
            return Ok(Some(self.likely));
        }
        Ok(self.schema.index_of(key).ok())
    }
}

/// Reads one row's text, all of it.
fn read_row<'de, R: serde_json::de::Read<'de>>(
    row: Row<'_>,
    de: &mut serde_json::Deserializer<R>,
) -> Result<(), serde_json::Error> {
    row.deserialize(&mut *de).and_then(|()| de.end())
}

/// A value of a numeric column: `Ok(Err(message))` when it is a number the column must not take,
/// or a string where quoted numbers are not taken. Everything else (null, wrong types) is left to
/// arrow-json's verdict.
struct Number {
    kind: Kind,
    /// Whether a number in quotes is taken (and left to arrow-json to parse).
    quoted: bool,
}

impl<'de> DeserializeSeed<'de> for Number {
    type Value = Result<(), String>;

    fn deserialize<D: de::Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Number {
    type Value = Result<(), String>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a value")
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(Ok(()))
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(Ok(()))
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<Self::Value, E> {
        Ok(match self.kind {
            Kind::Integer => Err(format!(
                "{value:?} is not an integer: a number with a fraction or an exponent does not \
                 fit an integer column"
            )),
            _ if !value.is_finite() => Err(format!("{value} is out of range")),
            _ => Ok(()),
        })
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<Self::Value, E> {
        if self.quoted {
            return Ok(Ok(()));
        }
        Ok(Err(format!(
            "expected a number, found a string (\"{}\"): numbers are sent without quotes",
            printable(value)
        )))
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(Ok(()))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Ok(()))
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element_seed(Skip)?.is_some() {}
        Ok(Ok(()))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry_seed(Skip, Skip)?.is_some() {}
        Ok(Ok(()))
    }
}

/// Whether a value is a number; any other value is skipped, as [`Skip`] does.
struct IsNumber;

impl<'de> DeserializeSeed<'de> for IsNumber {
    type Value = bool;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<bool, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for IsNumber {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any value")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<bool, E> {
        Ok(true)
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<bool, E> {
        Ok(true)
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<bool, E> {
        Ok(true)
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_unit<E: de::Error>(self) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, seq: A) -> Result<bool, A::Error> {
        Skip.visit_seq(seq).map(|()| false)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<bool, A::Error> {
        Skip.visit_map(map).map(|()| false)
    }
}

/// Any value, skipped. It descends through `deserialize_any`, so serde_json counts the nesting
/// and stops at its limit (`IgnoredAny` skips without counting).
pub(super) struct Skip;

impl<'de> DeserializeSeed<'de> for Skip {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Skip {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any value")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(Skip)?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while map.next_entry_seed(Skip, Skip)?.is_some() {}
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::json::{DecodeOptions, JsonDialect, decode_ndjson};
    use crate::schema::{Column, ColumnType, TableSchema};

    fn decode_as(dialect: JsonDialect, body: &str) -> Result<usize, crate::DecodeError> {
        let schema = TableSchema::new(vec![
            Column::new("id", ColumnType::Int64).required(),
            Column::new("n", ColumnType::UInt8),
            Column::new("x", ColumnType::Float64),
            Column::new("s", ColumnType::String),
            Column::new("b", ColumnType::Bool),
        ])
        .unwrap();
        let options = DecodeOptions {
            dialect,
            ..Default::default()
        };
        decode_ndjson(&schema, body.as_bytes(), &options).map(|b| b.num_rows())
    }

    fn decode(body: &str) -> Result<usize, crate::DecodeError> {
        decode_as(JsonDialect::Ndjson, body)
    }

    #[test]
    fn what_arrow_json_would_store_differently_is_refused() {
        let cases = [
            ("{\"id\":1}\n{\"id\":2.5}", 2, "id", "2.5 is not an integer"),
            ("{\"id\":1,\"n\":1e2}", 1, "n", "100.0 is not an integer"),
            ("{\"id\":1,\"id\":2}", 1, "id", "more than once"),
            (
                "{\"id\":1,\"s\":\"a\",\"s\":\"b\"}",
                1,
                "s",
                "more than once",
            ),
            ("{\"id\":\"7\"}", 1, "id", "found a string (\"7\")"),
        ];
        for (body, line, field, says) in cases {
            let error = decode(body).unwrap_err();
            assert_eq!(error.line, Some(line), "{body}: {error}");
            assert_eq!(error.field.as_deref(), Some(field), "{body}: {error}");
            assert!(error.message.contains(says), "{body}: {error}");
        }
    }

    #[test]
    fn keys_are_matched_in_any_order() {
        // In the table's order, reversed, with unknown keys between: the key after the last
        // one is tried first, and a miss falls back to every column.
        let body = "{\"id\":1,\"n\":2,\"x\":0.5,\"s\":\"a\",\"b\":true}\n\
                    {\"b\":false,\"s\":\"b\",\"x\":1.5,\"n\":3,\"id\":2}\n\
                    {\"s\":\"c\",\"b\":true,\"id\":3,\"n\":4}\n";
        assert_eq!(decode(body).unwrap(), 3);
        let unknown = decode("{\"id\":1,\"zz\":0,\"n\":2}").unwrap_err();
        assert_eq!(unknown.field.as_deref(), Some("zz"), "{unknown}");
        // A key that names the column after the last one, given twice.
        let twice = decode("{\"id\":1,\"n\":2,\"n\":3}").unwrap_err();
        assert_eq!(twice.field.as_deref(), Some("n"), "{twice}");
        assert!(twice.message.contains("more than once"), "{twice}");
    }

    #[test]
    fn text_that_is_not_json_is_refused_with_line_and_column() {
        // Each was taken and landed as a row when arrow-json judged syntax.
        let cases = [
            (
                "{\"id\": 12 \"s\": \"abc\", \"b\": false}",
                1,
                11,
                "expected `,` or `}`",
            ),
            (
                "{\"id\": 12, \"s\": \"abc\",, \"b\": false}",
                1,
                23,
                "key must be a string",
            ),
            (
                "{\"id\": 12, \"s\": \"abc\", ,\"b\": false}",
                1,
                24,
                "key must be a string",
            ),
            (
                "{\"id\":1}\n{\"id\": 13, \"s\": \"a\tb\"}",
                2,
                19,
                "control character",
            ),
            ("{\"id\":1,,}", 1, 9, "key must be a string"),
            ("{\"id\":1} x", 1, 10, "trailing characters"),
            ("{\"id\":1,\"s\":\"\\ud800\"}", 1, 20, "hex escape"),
            ("{\"id\":1,\"x\":1e400}", 1, 17, "number out of range"),
            ("{\"id\":1", 1, 7, "EOF"),
            ("{\"id\":01}", 1, 8, "invalid number"),
            ("\u{c}", 1, 1, "expected value"),
        ];
        for (body, line, column, says) in cases {
            let error = decode(body).unwrap_err();
            assert_eq!(error.line, Some(line), "{body:?}: {error}");
            assert_eq!(error.position, Some(column), "{body:?}: {error}");
            assert!(
                error.message.starts_with("invalid JSON: "),
                "{body:?}: {error}"
            );
            assert!(error.message.contains(says), "{body:?}: {error}");
            let clickhouse = decode_as(JsonDialect::ClickHouse, body);
            assert!(clickhouse.is_err(), "{body:?}: ClickHouse's door took it");
        }
        // Two objects on a line: not NDJSON, but ClickHouse's framing takes them as two rows.
        let two = "{\"id\":1}{\"id\":2}";
        let error = decode(two).unwrap_err();
        assert_eq!(
            (error.position, error.message.as_str()),
            (Some(9), "invalid JSON: trailing characters")
        );
        assert_eq!(decode_as(JsonDialect::ClickHouse, two).unwrap(), 2);
        let error = decode("{\"id\": 12 \"s\": \"abc\"}").unwrap_err();
        assert_eq!(
            error.to_string(),
            "line 1, column 11: invalid JSON: expected `,` or `}`"
        );
    }

    #[test]
    fn a_value_that_is_not_an_object_says_what_it_is() {
        for (body, found) in [("[1,2]", "an array"), (" 5", "a number"), ("null", "null")] {
            let error = decode(body).unwrap_err();
            assert_eq!(error.line, Some(1), "{body}");
            assert!(
                error
                    .message
                    .contains(&format!("expected a JSON object, found {found}")),
                "{body}: {error}"
            );
        }
    }

    #[test]
    fn clickhouse_positions_count_from_the_body() {
        let error =
            decode_as(JsonDialect::ClickHouse, "[{\"id\":1},\n  {\"id\":2,,}]").unwrap_err();
        assert_eq!((error.line, error.position), (Some(2), Some(11)), "{error}");
        let error =
            decode_as(JsonDialect::ClickHouse, "{\"id\":1,\n\"s\":\"a\" \"b\"}").unwrap_err();
        assert_eq!((error.line, error.position), (Some(2), Some(9)), "{error}");
    }

    #[test]
    fn quoted_numbers_are_clickhouses_and_the_logs_looseness_only() {
        let body = "{\"id\":\"7\",\"x\":\"2.5\",\"n\":\"255\"}";
        assert!(decode(body).is_err());
        assert_eq!(decode_as(JsonDialect::ClickHouse, body).unwrap(), 1);
        assert_eq!(decode_as(JsonDialect::Lenient, body).unwrap(), 1);
        // A quoted number still has to fit its column.
        let error = decode_as(JsonDialect::ClickHouse, "{\"id\":\"7.5\"}").unwrap_err();
        assert_eq!(error.field.as_deref(), Some("id"), "{error}");
    }

    #[test]
    fn the_log_replays_what_was_taken_before_syntax_was_checked() {
        // A missing comma: taken then, so replayed now.
        let body = "{\"id\": 12 \"s\": \"abc\"}";
        assert_eq!(decode_as(JsonDialect::Lenient, body).unwrap(), 1);
    }

    #[test]
    fn deep_nesting_is_refused_before_it_can_overflow_the_stack() {
        for (open, close) in [("[", "]"), ("{\"a\":", "}")] {
            let body = format!(
                "{{\"id\":1}}\n{{\"id\":2,\"s\":{}1{}}}",
                open.repeat(50_000),
                close.repeat(50_000)
            );
            for dialect in [
                JsonDialect::Ndjson,
                JsonDialect::ClickHouse,
                JsonDialect::Lenient,
            ] {
                let error = decode_as(dialect, &body).unwrap_err();
                assert_eq!(error.line, Some(2));
                assert!(error.message.contains("nested more than 128"), "{error}");
            }
        }
    }

    #[test]
    fn ordinary_rows_pass() {
        let body = "{\"id\":-1,\"n\":255,\"x\":1.5e3,\"s\":\"id\",\"b\":true}\n\
                    {\"id\":7,\"x\":2,\"s\":null}\n\
                    {\"s\":\"\\u0069d\\ud83d\\ude00\",\"id\":9223372036854775807,\"x\":-0.0} \t\r\n";
        assert_eq!(decode(body).unwrap(), 3);
        let clickhouse = format!("[{}]", body.trim().replace('\n', ",\n"));
        assert_eq!(decode_as(JsonDialect::ClickHouse, &clickhouse).unwrap(), 3);
    }
}
