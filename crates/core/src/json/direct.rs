//! Rows of plain columns read once by serde_json, straight into Arrow builders.
//!
//! The long way reads each row twice: the strict check with serde_json, then arrow-json's tape.
//! For a table whose columns are all booleans, integers, floats, strings, dates or timestamps,
//! this pass reads each row once and builds each value as arrow-json does: with arrow's own
//! parsers for a date, a timestamp or a number in quotes, with serde_json's exact integers, and
//! with Rust's parser for a float literal, correctly rounded as arrow-json's lexical-core is.
//!
//! It takes only what the check and arrow-json both take unchanged: each key once and a column of
//! the table, a value of the kind its column holds, a null only where the column is nullable.
//! For anything else it gives `None`, and the body goes the long way, which refuses it with an
//! error that names the line and the column, or takes it. So this pass never decides what is
//! refused: it only builds sooner what would be taken.

use std::cell::RefCell;
use std::fmt;
use std::rc::Rc;
use std::str::FromStr;
use std::sync::Arc;

use arrow::array::timezone::Tz;
use arrow::array::{
    ArrayBuilder, ArrayRef, ArrowPrimitiveType, BooleanBuilder, PrimitiveBuilder, RecordBatch,
    StringArray, StringBuilder,
};
use arrow::buffer::Buffer;
use arrow::compute::kernels::cast_utils::{Parser, string_to_datetime};
use arrow::datatypes::{
    DataType, Date32Type, Field, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type,
    Int64Type, SchemaRef, TimeUnit, TimestampMicrosecondType, UInt8Type, UInt16Type, UInt32Type,
    UInt64Type,
};
use serde::Deserialize;
use serde::de::{self, DeserializeSeed, MapAccess, Visitor};
use serde_json::value::RawValue;

use super::JsonDialect;
use super::check::{Key, Skip};
use crate::schema::ColumnType;

/// String bytes first reserved per row for each text column; the builder grows past it.
const TEXT_BYTES_PER_ROW: usize = 24;

/// How the columns of a table of plain columns are built under one dialect.
pub(crate) struct Plan {
    schema: SchemaRef,
    columns: Vec<Plain>,
    /// Whether a number column takes a number in quotes, read by arrow's parser as arrow-json
    /// reads it.
    quoted_numbers: bool,
    /// Whether a number for a timestamp is in the column's unit. On the ClickHouse door it is
    /// Unix seconds, which the long way rewrites.
    numeric_timestamps: bool,
    /// Whether a key that is no column is skipped (ClickHouse's
    /// `input_format_skip_unknown_fields=1`), as arrow-json skips it, rather than refused.
    skip_unknown: bool,
}

/// A plain column: its kind and whether it takes a null.
struct Plain {
    kind: Kind,
    nullable: bool,
}

#[derive(Clone)]
enum Kind {
    Boolean,
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
    Utf8,
    Date32,
    /// Its time zone, and its Arrow type, which names that zone.
    Timestamp(Tz, DataType),
}

impl Plan {
    /// The plan for `schema` under `dialect`: `None` when a column is not plain, or the dialect
    /// is one that only a replay reads.
    pub(crate) fn new(
        schema: &SchemaRef,
        dialect: JsonDialect,
        skip_unknown: bool,
    ) -> Option<Self> {
        let (quoted_numbers, numeric_timestamps) = match dialect {
            JsonDialect::Ndjson => (false, true),
            JsonDialect::ClickHouse => (true, false),
            _ => return None,
        };
        let columns = schema
            .fields()
            .iter()
            .map(|field| plain(field))
            .collect::<Option<Vec<_>>>()?;
        Some(Self {
            schema: schema.clone(),
            columns,
            quoted_numbers,
            numeric_timestamps,
            skip_unknown,
        })
    }

    fn builders(&self, rows: usize) -> Vec<Box<dyn Build>> {
        self.columns
            .iter()
            .map(|column| self.builder(&column.kind, rows))
            .collect()
    }

    fn builder(&self, kind: &Kind, rows: usize) -> Box<dyn Build> {
        let quoted = self.quoted_numbers;
        match kind {
            Kind::Boolean => Box::new(BooleanBuilder::with_capacity(rows)),
            Kind::Int8 => integers::<Int8Type>(rows, quoted),
            Kind::Int16 => integers::<Int16Type>(rows, quoted),
            Kind::Int32 => integers::<Int32Type>(rows, quoted),
            Kind::Int64 => integers::<Int64Type>(rows, quoted),
            Kind::UInt8 => integers::<UInt8Type>(rows, quoted),
            Kind::UInt16 => integers::<UInt16Type>(rows, quoted),
            Kind::UInt32 => integers::<UInt32Type>(rows, quoted),
            Kind::UInt64 => integers::<UInt64Type>(rows, quoted),
            Kind::Float32 => floats::<Float32Type>(rows, quoted),
            Kind::Float64 => floats::<Float64Type>(rows, quoted),
            Kind::Utf8 => Box::new(StringBuilder::with_capacity(
                rows,
                rows * TEXT_BYTES_PER_ROW,
            )),
            // arrow-json reads a date in a string with arrow's parser, on every door.
            Kind::Date32 => integers::<Date32Type>(rows, true),
            Kind::Timestamp(tz, data_type) => Box::new(Primitives {
                builder: PrimitiveBuilder::<TimestampMicrosecondType>::with_capacity(rows)
                    .with_data_type(data_type.clone()),
                read: TimestampValue {
                    tz: *tz,
                    numbers: self.numeric_timestamps,
                },
            }),
        }
    }
}

/// A field's plain kind, or `None` when it is not plain: nested, a decimal, or text with rules of
/// its own (`uuid`, `json`).
fn plain(field: &Field) -> Option<Plain> {
    let kind = match ColumnType::from_field(field)? {
        ColumnType::Bool => Kind::Boolean,
        ColumnType::Int8 => Kind::Int8,
        ColumnType::Int16 => Kind::Int16,
        ColumnType::Int32 => Kind::Int32,
        ColumnType::Int64 => Kind::Int64,
        ColumnType::UInt8 => Kind::UInt8,
        ColumnType::UInt16 => Kind::UInt16,
        ColumnType::UInt32 => Kind::UInt32,
        ColumnType::UInt64 => Kind::UInt64,
        ColumnType::Float32 => Kind::Float32,
        ColumnType::Float64 => Kind::Float64,
        ColumnType::String => Kind::Utf8,
        ColumnType::Date => Kind::Date32,
        // Built in microseconds, the unit sluice's timestamps have.
        ColumnType::Timestamp => match field.data_type() {
            data_type @ DataType::Timestamp(TimeUnit::Microsecond, Some(tz)) => {
                Kind::Timestamp(tz.parse().ok()?, data_type.clone())
            }
            _ => return None,
        },
        _ => return None,
    };
    Some(Plain {
        kind,
        nullable: field.is_nullable(),
    })
}

/// The `rows` row texts built into one batch of `schema` under `dialect`, skipping keys that are
/// no column when `skip_unknown` says so: `None` when a column is not plain or any row must go
/// the long way.
pub(crate) fn decode_rows<'a>(
    schema: &SchemaRef,
    dialect: JsonDialect,
    skip_unknown: bool,
    texts: impl IntoIterator<Item = &'a [u8]>,
    rows: usize,
) -> Option<RecordBatch> {
    let plan = kept_plan(schema, dialect, skip_unknown)?;
    decode(&plan, texts, rows).filter(|batch| batch.num_rows() == rows)
}

/// Plans kept per thread: about one per table and door that bodies arrive for, the least recently
/// used dropped first.
const KEPT_PLANS: usize = 16;

/// A plan kept for a schema, or `None` kept for a schema that has none.
struct KeptPlan {
    schema: SchemaRef,
    dialect: JsonDialect,
    skip_unknown: bool,
    plan: Option<Rc<Plan>>,
}

thread_local! {
    static KEPT: RefCell<Vec<KeptPlan>> = const { RefCell::new(Vec::new()) };
}

/// The plan for `schema`, this thread's kept one when it has one: working one out looks up each
/// column's type and time zone, which for a one-row body costs a good part of reading it. A
/// schema is matched by pointer first, as the kept arrow-json decoders are: a table's schema is
/// one `Arc` for as long as the table keeps its layout. Then by its fields, since the schema of
/// an insert's column list is made for that insert.
fn kept_plan(schema: &SchemaRef, dialect: JsonDialect, skip_unknown: bool) -> Option<Rc<Plan>> {
    KEPT.with(|kept| {
        let mut kept = kept.borrow_mut();
        let reads_alike = |k: &KeptPlan| k.dialect == dialect && k.skip_unknown == skip_unknown;
        let found = kept
            .iter()
            .position(|k| reads_alike(k) && Arc::ptr_eq(&k.schema, schema))
            .or_else(|| {
                kept.iter()
                    .position(|k| reads_alike(k) && k.schema == *schema)
            });
        let entry = match found {
            Some(i) => kept.remove(i),
            None => KeptPlan {
                schema: schema.clone(),
                dialect,
                skip_unknown,
                plan: Plan::new(schema, dialect, skip_unknown).map(Rc::new),
            },
        };
        let plan = entry.plan.clone();
        if kept.len() >= KEPT_PLANS {
            kept.remove(0);
        }
        kept.push(entry);
        plan
    })
}

/// `texts` built into one batch of the plan's schema, or `None` when any of them must go the long
/// way. `rows` is a hint of how many there are, for the builders' first capacity.
fn decode<'a>(
    plan: &Plan,
    texts: impl IntoIterator<Item = &'a [u8]>,
    rows: usize,
) -> Option<RecordBatch> {
    let mut builders = plan.builders(rows);
    for (row, text) in texts.into_iter().enumerate() {
        // The row checked as UTF-8 in one go rather than string by string; a row that is not
        // UTF-8 goes the long way, which names where it breaks.
        let mut de = serde_json::Deserializer::from_str(std::str::from_utf8(text).ok()?);
        let seed = RowSeed {
            plan,
            builders: &mut builders,
            row,
        };
        seed.deserialize(&mut de).and_then(|()| de.end()).ok()?;
        for (builder, column) in builders.iter_mut().zip(&plan.columns) {
            if builder.len() == row {
                // A key the row leaves out: arrow-json reads it as null.
                column.nullable.then_some(())?;
                builder.push_null();
            }
        }
    }
    let columns: Vec<ArrayRef> = builders.iter_mut().map(|b| b.finish()).collect();
    RecordBatch::try_new(plan.schema.clone(), columns).ok()
}

/// What this pass refuses, which sends the body the long way; never shown to anyone.
const LONG_WAY: &str = "not a plain row";

/// One row: an object whose values are pushed to their columns' builders.
struct RowSeed<'p> {
    plan: &'p Plan,
    builders: &'p mut [Box<dyn Build>],
    /// The row's index: each builder holds this many values before the row.
    row: usize,
}

impl<'de> DeserializeSeed<'de> for RowSeed<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for RowSeed<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let schema = &self.plan.schema;
        let mut likely = 0;
        while let Some(column) = map.next_key_seed(Key { schema, likely })? {
            let Some(i) = column else {
                if !self.plan.skip_unknown {
                    // arrow-json refuses a key that is no column.
                    return Err(de::Error::custom(LONG_WAY));
                }
                // Skipped as the check skips it, so what the check refuses inside it goes the
                // long way to be refused there.
                map.next_value_seed(Skip)?;
                continue;
            };
            likely = i + 1;
            let builder = &mut *self.builders[i];
            // A key given twice: the check refuses it.
            let taken = builder.len() == self.row
                && map.next_value_seed(Cell {
                    builder,
                    nullable: self.plan.columns[i].nullable,
                })?;
            if !taken {
                return Err(de::Error::custom(LONG_WAY));
            }
        }
        Ok(())
    }
}

/// A scalar JSON value, as serde_json read it.
enum Token<'t> {
    Null,
    Bool(bool),
    Unsigned(u64),
    Signed(i64),
    /// A number serde_json read as a float: one with a fraction or an exponent, `-0`, or one
    /// beyond 64 bits. Its value is not exact (serde_json rounds as it reads), so only a column
    /// that reads number literals itself takes a number.
    Float,
    /// A number literal as sent, for a column that reads literals.
    Literal(&'t str),
    /// A string, unescaped.
    Text(&'t str),
}

/// One value, pushed to its column's builder: `Ok(false)` when the column does not take it.
struct Cell<'b> {
    builder: &'b mut dyn Build,
    nullable: bool,
}

impl Cell<'_> {
    fn take(self, value: Token<'_>) -> bool {
        match value {
            Token::Null if self.nullable => {
                self.builder.push_null();
                true
            }
            Token::Null => false,
            value => self.builder.push(value).is_some(),
        }
    }
}

impl<'de> DeserializeSeed<'de> for Cell<'_> {
    type Value = bool;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<bool, D::Error> {
        if !self.builder.reads_literals() {
            return deserializer.deserialize_any(self);
        }
        let raw = <&RawValue>::deserialize(deserializer)?;
        Ok(literal_token(raw.get()).is_some_and(|value| self.take(value)))
    }
}

impl<'de> Visitor<'de> for Cell<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a value")
    }

    fn visit_unit<E: de::Error>(self) -> Result<bool, E> {
        Ok(self.take(Token::Null))
    }

    fn visit_bool<E: de::Error>(self, value: bool) -> Result<bool, E> {
        Ok(self.take(Token::Bool(value)))
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<bool, E> {
        Ok(self.take(Token::Unsigned(value)))
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<bool, E> {
        Ok(self.take(Token::Signed(value)))
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<bool, E> {
        Ok(self.take(Token::Float))
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<bool, E> {
        Ok(self.take(Token::Text(value)))
    }

    // An array or an object: no plain column takes one. Refused before it is read further.
    fn visit_seq<A: de::SeqAccess<'de>>(self, _: A) -> Result<bool, A::Error> {
        Err(de::Error::custom(LONG_WAY))
    }

    fn visit_map<A: MapAccess<'de>>(self, _: A) -> Result<bool, A::Error> {
        Err(de::Error::custom(LONG_WAY))
    }
}

/// The value `raw` holds, for a column that reads number literals itself: `None` for an array,
/// an object, or a string with an escape, which goes the long way.
fn literal_token(raw: &str) -> Option<Token<'_>> {
    match raw.as_bytes().first()? {
        b'n' => Some(Token::Null),
        b't' => Some(Token::Bool(true)),
        b'f' => Some(Token::Bool(false)),
        b'-' | b'0'..=b'9' => Some(Token::Literal(raw)),
        // An escaped string is rare in a float column: a number in quotes has no escape.
        b'"' if memchr::memchr(b'\\', raw.as_bytes()).is_none() => {
            raw.get(1..raw.len() - 1).map(Token::Text)
        }
        _ => None,
    }
}

/// A column's builder: `push` gives `None` for a value the column does not take as arrow-json
/// would.
trait Build {
    fn len(&self) -> usize;
    /// Whether a number is given to `push` as its literal, which the column parses itself.
    fn reads_literals(&self) -> bool {
        false
    }
    fn push(&mut self, value: Token<'_>) -> Option<()>;
    fn push_null(&mut self);
    fn finish(&mut self) -> ArrayRef;
}

impl Build for BooleanBuilder {
    fn len(&self) -> usize {
        ArrayBuilder::len(self)
    }

    fn push(&mut self, value: Token<'_>) -> Option<()> {
        let Token::Bool(value) = value else {
            return None;
        };
        self.append_value(value);
        Some(())
    }

    fn push_null(&mut self) {
        self.append_null();
    }

    fn finish(&mut self) -> ArrayRef {
        Arc::new(BooleanBuilder::finish(self))
    }
}

impl Build for StringBuilder {
    fn len(&self) -> usize {
        ArrayBuilder::len(self)
    }

    fn push(&mut self, value: Token<'_>) -> Option<()> {
        let Token::Text(text) = value else {
            return None;
        };
        self.append_value(text);
        Some(())
    }

    fn push_null(&mut self) {
        self.append_null();
    }

    fn finish(&mut self) -> ArrayRef {
        Arc::new(fitted(StringBuilder::finish(self)))
    }
}

/// Room in a column's text buffer that is always left: copying a small array's text costs more
/// than the room it would free.
const ROOM_LEFT: usize = 1024;

/// `array` with its text in a buffer of the text's length, when the builder grew it with much
/// room to spare: that room would be charged to the memory budget and held until the flush.
fn fitted(array: StringArray) -> StringArray {
    let text = array.values();
    let room = text.capacity() - text.len();
    if room <= ROOM_LEFT || room <= text.len() / 8 {
        return array;
    }
    let (offsets, text, nulls) = array.clone().into_parts();
    StringArray::try_new(offsets, Buffer::from_slice_ref(text.as_slice()), nulls).unwrap_or(array)
}

/// A column of Arrow primitives, each value read from its token by `R`.
struct Primitives<T: ArrowPrimitiveType, R> {
    builder: PrimitiveBuilder<T>,
    read: R,
}

/// How a primitive column reads a value: `None` for one it does not take as arrow-json would.
trait ReadValue<T: ArrowPrimitiveType> {
    /// Whether a number comes as its literal, which the column parses itself.
    const LITERALS: bool = false;
    fn read(&self, value: Token<'_>) -> Option<T::Native>;
}

impl<T: ArrowPrimitiveType, R: ReadValue<T>> Build for Primitives<T, R> {
    fn len(&self) -> usize {
        ArrayBuilder::len(&self.builder)
    }

    fn reads_literals(&self) -> bool {
        R::LITERALS
    }

    fn push(&mut self, value: Token<'_>) -> Option<()> {
        self.builder.append_value(self.read.read(value)?);
        Some(())
    }

    fn push_null(&mut self) {
        self.builder.append_null();
    }

    fn finish(&mut self) -> ArrayRef {
        Arc::new(self.builder.finish())
    }
}

/// An integer or date column, `texts` saying whether it takes a string.
fn integers<T>(rows: usize, texts: bool) -> Box<dyn Build>
where
    T: ArrowPrimitiveType + Parser,
    T::Native: TryFrom<u64> + TryFrom<i64>,
{
    Box::new(Primitives {
        builder: PrimitiveBuilder::<T>::with_capacity(rows),
        read: IntegerValue { texts },
    })
}

/// A float column, `quoted` saying whether it takes a number in quotes.
fn floats<T>(rows: usize, quoted: bool) -> Box<dyn Build>
where
    T: ArrowPrimitiveType + Parser,
    T::Native: FromStr + Into<f64>,
{
    Box::new(Primitives {
        builder: PrimitiveBuilder::<T>::with_capacity(rows),
        read: FloatValue { quoted },
    })
}

/// An integer as serde_json reads it, exactly, when it fits the type; a number serde_json reads
/// as a float goes the long way.
struct IntegerValue {
    /// Whether a string is taken, read by arrow's parser as arrow-json reads it: a number in
    /// quotes where the door takes one, a date.
    texts: bool,
}

impl<T> ReadValue<T> for IntegerValue
where
    T: ArrowPrimitiveType + Parser,
    T::Native: TryFrom<u64> + TryFrom<i64>,
{
    fn read(&self, value: Token<'_>) -> Option<T::Native> {
        match value {
            Token::Unsigned(value) => value.try_into().ok(),
            Token::Signed(value) => value.try_into().ok(),
            Token::Text(text) if self.texts => T::parse(text),
            _ => None,
        }
    }
}

/// A float: a number literal parsed here, correctly rounded as arrow-json's lexical-core parses
/// it; one beyond the type's range goes the long way.
struct FloatValue {
    /// Whether a number in quotes is taken.
    quoted: bool,
}

impl<T> ReadValue<T> for FloatValue
where
    T: ArrowPrimitiveType + Parser,
    T::Native: FromStr + Into<f64>,
{
    const LITERALS: bool = true;

    fn read(&self, value: Token<'_>) -> Option<T::Native> {
        let value: T::Native = match value {
            Token::Literal(text) => text.parse().ok()?,
            Token::Text(text) if self.quoted => T::parse(text)?,
            _ => return None,
        };
        value.into().is_finite().then_some(value)
    }
}

/// A timestamp in microseconds: a string read as arrow-json reads it, in the column's time zone;
/// a number taken as microseconds where the door reads it so.
struct TimestampValue {
    tz: Tz,
    numbers: bool,
}

impl ReadValue<TimestampMicrosecondType> for TimestampValue {
    fn read(&self, value: Token<'_>) -> Option<i64> {
        match value {
            Token::Text(text) => Some(string_to_datetime(&self.tz, text).ok()?.timestamp_micros()),
            Token::Signed(value) if self.numbers => Some(value),
            Token::Unsigned(value) if self.numbers => value.try_into().ok(),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use arrow::array::AsArray;
    use proptest::prelude::*;

    use super::*;
    use crate::json::decode::{decode_ndjson, decode_ndjson_ways};
    use crate::json::frame;
    use crate::options::DecodeOptions;
    use crate::schema::{Column, TableSchema};

    /// A column of each plain type, one of them required.
    fn schema() -> TableSchema {
        TableSchema::new(vec![
            Column::new("id", ColumnType::Int64).required(),
            Column::new("ok", ColumnType::Bool),
            Column::new("i8", ColumnType::Int8),
            Column::new("i16", ColumnType::Int16),
            Column::new("i32", ColumnType::Int32),
            Column::new("u8", ColumnType::UInt8),
            Column::new("u16", ColumnType::UInt16),
            Column::new("u32", ColumnType::UInt32),
            Column::new("u64", ColumnType::UInt64),
            Column::new("f32", ColumnType::Float32),
            Column::new("f64", ColumnType::Float64),
            Column::new("s", ColumnType::String),
            Column::new("day", ColumnType::Date),
            Column::new("ts", ColumnType::Timestamp),
        ])
        .unwrap()
    }

    fn options(dialect: JsonDialect) -> DecodeOptions {
        DecodeOptions {
            dialect,
            ..DecodeOptions::default()
        }
    }

    /// The body read once, or `None` when it goes the long way.
    fn read_once(schema: &TableSchema, body: &str, dialect: JsonDialect) -> Option<RecordBatch> {
        let rows = frame::rows(body.as_bytes(), dialect).ok()?;
        let texts = rows.iter().map(|r| r.text);
        decode_rows(schema.arrow(), dialect, false, texts, rows.len())
    }

    const TAKEN: &[&str] = &[
        r#"{"id": 1}"#,
        r#"{"id": -9223372036854775808, "i8": -128, "i16": 32767, "i32": -2147483648}"#,
        r#"{"u8": 255, "u16": 65535, "u32": 4294967295, "u64": 18446744073709551615, "id": 0}"#,
        r#"{"id": 0, "f32": 16777217, "f64": 0.1, "ts": 1795953600000000}"#,
        r#"{"id": 2, "f32": 3.4028235e38, "f64": -1.7976931348623157E+308}"#,
        r#"{"id": 3, "f64": 5e-324, "f32": 1e-46}"#,
        r#"{"id": 4, "s": "", "ok": true}"#,
        r#"{"id": 5, "s": "a \"quoted\" \\ \/ \b\f\n\r\t \u00e9 \ud83d\ude00 é", "ok": false}"#,
        r#"{"id": 6, "s": null, "ok": null, "i8": null, "ts": null, "day": null}"#,
        r#"{"id": 7, "day": "2026-12-07", "ts": "2026-12-07T14:00:00Z"}"#,
        r#"{"id": 8, "day": 20000, "ts": "2026-12-07 14:00:00.123456"}"#,
        r#"{"id": 9, "ts": "2026-12-07T14:00:00.5+02:00"}"#,
        r#"{"id": 10, "ts": "2026-12-07"}"#,
        r#"{"ts": "1970-01-01T00:00:00Z", "id": 11, "s": "k"}"#,
        r#"  {"id" : 12 , "s":"spaces"}  "#,
        r#"{"i\u0064": 13}"#,
    ];

    /// Every row the one pass takes, alone and all together, is built as the long way builds it.
    #[test]
    fn plain_rows_are_built_as_the_long_way_builds_them() {
        let schema = schema();
        let together = TAKEN.join("\n");
        for body in TAKEN.iter().copied().chain([together.as_str()]) {
            let options = options(JsonDialect::Ndjson);
            let once = read_once(&schema, body, JsonDialect::Ndjson)
                .unwrap_or_else(|| panic!("went the long way: {body}"));
            let long = decode_ndjson_ways(&schema, body.as_bytes(), &options, false);
            assert_eq!(long.as_ref(), Ok(&once), "{body}");
        }
    }

    /// Numbers in quotes on the ClickHouse door are read by arrow's parsers, as arrow-json reads
    /// them; a number for a timestamp there is seconds, which only the long way reads.
    #[test]
    fn the_clickhouse_door_takes_numbers_in_quotes() {
        let schema = schema();
        let body = r#"{"id": "12", "u64": "18446744073709551615", "f64": "1.25", "i8": "-5"}"#;
        let once = read_once(&schema, body, JsonDialect::ClickHouse).expect("read once");
        let options = options(JsonDialect::ClickHouse);
        let long = decode_ndjson_ways(&schema, body.as_bytes(), &options, false);
        assert_eq!(long, Ok(once));
        assert!(read_once(&schema, body, JsonDialect::Ndjson).is_none());
        let seconds = r#"{"id": 1, "ts": 1795953600}"#;
        assert!(read_once(&schema, seconds, JsonDialect::ClickHouse).is_none());
        assert!(read_once(&schema, seconds, JsonDialect::Ndjson).is_some());
    }

    const LONG_WAY: &[&str] = &[
        r#"{"id": 1 "s": "missing comma"}"#,
        r#"{"id": 1, "nope": 2}"#,
        r#"{"id": 1, "id": 2}"#,
        r#"{"s": "no id"}"#,
        r#"{"id": null}"#,
        r#"{"id": "1"}"#,
        r#"{"id": 1.5}"#,
        r#"{"id": 1e2}"#,
        r#"{"id": 9223372036854775808}"#,
        r#"{"id": 1, "i8": 128}"#,
        r#"{"id": 1, "u8": -1}"#,
        r#"{"id": 1, "f64": 1e400}"#,
        r#"{"id": 1, "f32": 1e39}"#,
        r#"{"id": 1, "s": 5}"#,
        r#"{"id": 1, "s": ["a"]}"#,
        r#"{"id": 1, "s": {"a": 1}}"#,
        "{\"id\": 1, \"s\": \"raw\ttab\"}",
        r#"{"id": 1, "s": "\ud800"}"#,
        r#"{"id": 1, "ok": 1}"#,
        r#"{"id": 1, "ok": "true"}"#,
        r#"{"id": 1, "ts": "yesterday"}"#,
        r#"{"id": 1, "day": "2026-13-45"}"#,
        r#"{"id": 1} trailing"#,
        r#"[{"id": 1}]"#,
        r#"{"id": 01}"#,
        r#"{"id": -0}"#,
    ];

    /// What the one pass is not sure of goes the long way, which takes it or says what is wrong.
    #[test]
    fn what_the_pass_is_not_sure_of_goes_the_long_way() {
        let schema = schema();
        for body in LONG_WAY {
            assert!(
                read_once(&schema, body, JsonDialect::Ndjson).is_none(),
                "read once: {body}"
            );
            let options = options(JsonDialect::Ndjson);
            assert_eq!(
                decode_ndjson(&schema, body.as_bytes(), &options),
                decode_ndjson_ways(&schema, body.as_bytes(), &options, false),
                "{body}"
            );
        }
    }

    /// An insert that lists its columns, or skips unknown keys, is read once too.
    #[test]
    fn listed_columns_and_skipped_keys_are_read_once() {
        let schema = schema();
        let body = r#"{"id": 1, "s": "a", "nope": {"deep": [1, 2]}, "also": "x"}"#;
        let options = DecodeOptions {
            skip_unknown_fields: true,
            columns: Some(vec!["id".to_owned(), "s".to_owned()]),
            ..options(JsonDialect::ClickHouse)
        };
        let rows = frame::rows(body.as_bytes(), options.dialect).unwrap();
        let target = Arc::new(arrow::datatypes::Schema::new(vec![
            schema.arrow().field(0).clone(),
            schema.arrow().field_with_name("s").unwrap().clone(),
        ]));
        let texts = rows.iter().map(|r| r.text);
        assert!(decode_rows(&target, options.dialect, true, texts, 1).is_some());
        let long = decode_ndjson_ways(&schema, body.as_bytes(), &options, false).unwrap();
        assert_eq!(decode_ndjson(&schema, body.as_bytes(), &options), Ok(long));
    }

    /// A key that names no column is refused, or skipped, as the strict pass does it; a skipped
    /// value that is not UTF-8 is refused either way.
    #[test]
    fn keys_that_name_no_column_are_judged_as_the_check_judges_them() {
        let schema = schema();
        let bodies: [&[u8]; 5] = [
            b"{\"id\": 1, \"n\xffpe\": 2}",
            b"{\"id\": 1, \"n\tope\": 2}",
            b"{\"id\": 1, \"n\\tope\": 2}",
            b"{\"id\": 1, \"n\\u00e9\": 2}",
            b"{\"id\": 1, \"nope\": \"\xff\"}",
        ];
        for skip_unknown_fields in [false, true] {
            let options = DecodeOptions {
                skip_unknown_fields,
                ..options(JsonDialect::Ndjson)
            };
            for body in bodies {
                assert_eq!(
                    decode_ndjson(&schema, body, &options),
                    decode_ndjson_ways(&schema, body, &options, false),
                    "{}",
                    String::from_utf8_lossy(body)
                );
            }
            let skipped_not_utf8 = decode_ndjson(&schema, bodies[4], &options);
            assert!(skipped_not_utf8.is_err(), "{skipped_not_utf8:?}");
        }
    }

    /// Text longer than the builders first reserve is kept in a buffer of its own length, not
    /// in the room a growing builder leaves.
    #[test]
    fn long_text_is_kept_without_room_to_spare() {
        let long = "x".repeat(100);
        let body: Vec<String> = (0..50)
            .map(|i| format!(r#"{{"id": {i}, "s": "{long}"}}"#))
            .collect();
        let batch = read_once(&schema(), &body.join("\n"), JsonDialect::Ndjson).unwrap();
        let text = batch
            .column_by_name("s")
            .unwrap()
            .as_string::<i32>()
            .values();
        assert_eq!(text.len(), 5000);
        assert!(text.capacity() <= 5000 + 64, "{}", text.capacity());
    }

    /// A thread keeps the plan it worked out for a schema's fields, a dialect and a skip option,
    /// and keeps that a schema has none.
    #[test]
    fn plans_are_kept_by_schema_dialect_and_skip_option() {
        let schema = schema();
        let first = kept_plan(schema.arrow(), JsonDialect::Ndjson, false).unwrap();
        let again = kept_plan(schema.arrow(), JsonDialect::Ndjson, false).unwrap();
        assert!(Rc::ptr_eq(&first, &again));
        let door = kept_plan(schema.arrow(), JsonDialect::ClickHouse, false).unwrap();
        let skipping = kept_plan(schema.arrow(), JsonDialect::Ndjson, true).unwrap();
        assert!(!Rc::ptr_eq(&first, &door) && !Rc::ptr_eq(&first, &skipping));
        assert!(door.quoted_numbers && skipping.skip_unknown);
        let same_columns = TableSchema::new(schema.columns().to_vec()).unwrap();
        let alike = kept_plan(same_columns.arrow(), JsonDialect::Ndjson, false).unwrap();
        assert!(
            Rc::ptr_eq(&first, &alike),
            "a schema with the same fields is a new plan"
        );
        let fewer = TableSchema::new(schema.columns()[1..].to_vec()).unwrap();
        let other = kept_plan(fewer.arrow(), JsonDialect::Ndjson, false).unwrap();
        assert!(!Rc::ptr_eq(&first, &other));
        let not_plain = TableSchema::new(vec![Column::new("u", ColumnType::Uuid)]).unwrap();
        assert!(kept_plan(not_plain.arrow(), JsonDialect::Ndjson, false).is_none());
        assert!(kept_plan(not_plain.arrow(), JsonDialect::Ndjson, false).is_none());
    }

    /// A table with a column that is not plain is read the long way only.
    #[test]
    fn a_table_with_other_columns_has_no_plan() {
        let schema = TableSchema::new(vec![
            Column::new("id", ColumnType::Int64),
            Column::new("u", ColumnType::Uuid),
        ])
        .unwrap();
        assert!(Plan::new(schema.arrow(), JsonDialect::Ndjson, false).is_none());
        assert!(Plan::new(self::schema().arrow(), JsonDialect::Lenient, false).is_none());
    }

    /// Each key with values its column takes, and one that is no column.
    const KEYS: &[(&str, &[&str])] = &[
        (
            "id",
            &[
                "0",
                "42",
                "-1",
                "9223372036854775807",
                "-9223372036854775808",
            ],
        ),
        ("ok", &["true", "false", "null"]),
        ("i8", &["-128", "127", "0", "null"]),
        ("u8", &["0", "255", "null"]),
        ("u64", &["0", "18446744073709551615", "null"]),
        (
            "f32",
            &[
                "0.1",
                "1e-46",
                "3.4028235e38",
                "16777217",
                "-2.5",
                "1",
                "null",
            ],
        ),
        (
            "f64",
            &[
                "0.1",
                "5e-324",
                "1.7976931348623157e308",
                "-0.0",
                "1E-7",
                "1e23",
            ],
        ),
        (
            "s",
            &[
                "\"\"",
                "\"abc\"",
                "\"a\\\"b\"",
                "\"\\u00e9\\ud83d\\ude00\"",
                "\"é\"",
                "null",
            ],
        ),
        ("day", &["\"2026-12-07\"", "20000", "-1", "null"]),
        (
            "ts",
            &[
                "\"2026-12-07T14:00:00Z\"",
                "\"2026-12-07 14:00:00.123\"",
                "1795953600000000",
            ],
        ),
        ("nope", &["1"]),
        ("\\u0069d", &["1", "-2"]),
        ("n\\tope", &["1"]),
        ("n\tope", &["1"]),
    ];

    /// Columns an insert may list; the table's others are left out of every row.
    const LISTABLE: &[&str] = &["id", "id", "id", "ok", "i8", "f64", "s", "ts"];

    /// Values of every kind, most of which some column does not take.
    const VALUES: &[&str] = &[
        "null",
        "true",
        "false",
        "0",
        "-0",
        "1",
        "-1",
        "127",
        "128",
        "-129",
        "255",
        "256",
        "65535",
        "4294967296",
        "9223372036854775807",
        "9223372036854775808",
        "18446744073709551615",
        "18446744073709551616",
        "1.5",
        "-0.0",
        "1e3",
        "1E-7",
        "3.5e38",
        "1e400",
        "0.1",
        "01",
        "1.",
        "\"\"",
        "\"abc\"",
        "\"a\\\"b\"",
        "\"\\u00e9\"",
        "\"\\ud800\"",
        "\"\\ud83d\\ude00\"",
        "\"é\"",
        "\"12\"",
        "\"-5\"",
        "\"1.25\"",
        "\"1e2\"",
        "\"2026-12-07\"",
        "\"2026-12-07T14:00:00Z\"",
        "\"2026-12-07 14:00:00.123\"",
        "\"2026-12-07T14:00:00+02:00\"",
        "\"later\"",
        "\"true\"",
        "[1]",
        "{\"a\": 1}",
        "\"tab\there\"",
        "nul",
    ];

    /// A row of keys mostly with values their columns take, now and then another value, a
    /// key twice, an unknown key, a missing `id` or a missing comma.
    fn row() -> impl Strategy<Value = String> {
        let value = (
            0..KEYS.len(),
            prop::bool::weighted(0.9),
            any::<prop::sample::Index>(),
        );
        let pairs = prop::collection::vec(value, 0..6);
        let with_id = prop::bool::weighted(0.9);
        let comma = prop::bool::weighted(0.95);
        (pairs, with_id, comma).prop_map(|(pairs, with_id, comma)| {
            let mut fields: Vec<String> = pairs
                .into_iter()
                .map(|(key, fits, pick)| {
                    let (name, fitting) = KEYS[key];
                    let values = if fits { fitting } else { VALUES };
                    format!("\"{name}\": {}", pick.get(values))
                })
                .collect();
            if with_id {
                fields.insert(0, "\"id\": 7".to_owned());
            }
            format!("{{{}}}", fields.join(if comma { ", " } else { " " }))
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]

        /// Any body decodes, or is refused, exactly as the long way decodes or refuses it.
        #[test]
        fn any_body_decodes_as_the_long_way_decodes_it(
            rows in prop::collection::vec(row(), 1..4),
            clickhouse in any::<bool>(),
            skip_unknown in any::<bool>(),
            listed in prop::option::of(prop::sample::subsequence(LISTABLE, 1..LISTABLE.len())),
        ) {
            let schema = schema();
            let dialect = if clickhouse { JsonDialect::ClickHouse } else { JsonDialect::Ndjson };
            let options = DecodeOptions {
                skip_unknown_fields: skip_unknown,
                columns: listed.map(|names| names.into_iter().map(str::to_owned).collect()),
                ..options(dialect)
            };
            let body = rows.join("\n");
            prop_assert_eq!(
                decode_ndjson(&schema, body.as_bytes(), &options),
                decode_ndjson_ways(&schema, body.as_bytes(), &options, false),
                "{}", body
            );
        }
    }
}
