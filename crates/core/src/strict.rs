//! What arrow-json lets through and sluice refuses: a number with a fraction or an exponent in an
//! integer column (arrow-json truncates `1.5` to `1`), a float literal beyond `f64` (it becomes
//! infinity), and a key given twice in one row (the last one wins). Each would store something
//! the producer did not send. And values nested deeper than arrow-json can safely describe.
//!
//! One pass of serde_json over each line, before arrow-json sees the body: keys are matched to
//! columns without allocating, values of other columns are skipped (`Skip`, which, unlike
//! `IgnoredAny`, descends through serde_json's nesting limit). Lines that are not JSON objects at all are left to arrow-json and
//! the decoder's own explanation.

use std::fmt;

use arrow::datatypes::{DataType, SchemaRef};
use serde::de::{self, DeserializeSeed, MapAccess, Visitor};

use crate::decode::lines;
use crate::error::DecodeError;

/// serde_json's nesting limit, which this pass enforces before arrow-json sees a body: arrow-json
/// recurses once per level when it describes a bad value, and a few thousand `[` overflow the
/// stack and abort the process.
const MAX_DEPTH: usize = 128;

/// What a column's JSON numbers must look like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Integer,
    Float,
    Other,
}

fn kind(data_type: &DataType) -> Kind {
    if data_type.is_integer() {
        Kind::Integer
    } else if data_type.is_floating() {
        Kind::Float
    } else {
        Kind::Other
    }
}

/// Checks every line of a body against `schema` (the columns decoded): `Err` for what must be
/// refused though arrow-json would take it; `Ok` for everything else, bad syntax included.
pub(crate) fn check(schema: &SchemaRef, body: &[u8]) -> Result<(), DecodeError> {
    let kinds: Vec<Kind> = schema
        .fields()
        .iter()
        .map(|f| kind(f.data_type()))
        .collect();
    let mut seen = vec![false; kinds.len()];
    for (line_no, line) in lines(body) {
        seen.iter_mut().for_each(|s| *s = false);
        let mut problem = None;
        let mut de = serde_json::Deserializer::from_slice(line);
        let row = Row {
            schema,
            kinds: &kinds,
            seen: &mut seen,
            problem: &mut problem,
        };
        if let Err(error) = row.deserialize(&mut de) {
            if let Some((field, message)) = problem {
                return Err(DecodeError::new(Some(line_no), Some(field), message));
            }
            if error.to_string().starts_with("recursion limit exceeded") {
                return Err(DecodeError::new(
                    Some(line_no),
                    None,
                    format!("values nested more than {MAX_DEPTH} levels deep ({error})"),
                ));
            }
            // Anything else (bad syntax, not an object) is arrow-json's to explain.
        }
    }
    Ok(())
}

/// One row: an object whose keys are checked against the columns.
struct Row<'a> {
    schema: &'a SchemaRef,
    kinds: &'a [Kind],
    seen: &'a mut [bool],
    /// The column and what is wrong with it, when the row is refused for its content.
    problem: &'a mut Option<(String, String)>,
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
        while let Some(column) = map.next_key_seed(Key(self.schema))? {
            let Some(i) = column else {
                map.next_value_seed(Skip)?;
                continue;
            };
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
                kind => match map.next_value_seed(Number(kind)) {
                    Ok(Ok(())) => {}
                    Ok(Err(message)) => {
                        *self.problem = Some((name(), message));
                        return Err(de::Error::custom("bad number"));
                    }
                    // serde_json's own refusal, e.g. a literal beyond f64: still this column's.
                    Err(error) => {
                        *self.problem = Some((name(), error.to_string()));
                        return Err(error);
                    }
                },
            }
        }
        Ok(())
    }
}

/// A key: the index of the column it names, if any.
struct Key<'a>(&'a SchemaRef);

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
        Ok(self.0.index_of(key).ok())
    }
}

/// A value of a numeric column: `Ok(Err(message))` when it is a number the column must not take.
/// Everything else (null, quoted numbers, wrong types) is left to arrow-json's verdict.
struct Number(Kind);

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
        Ok(match self.0 {
            Kind::Integer => Err(format!(
                "{value:?} is not an integer: a number with a fraction or an exponent does not \
                 fit an integer column"
            )),
            _ if !value.is_finite() => Err(format!("{value} is out of range")),
            _ => Ok(()),
        })
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Ok(Ok(()))
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

/// Any value, skipped. It descends through `deserialize_any`, so serde_json counts the nesting
/// and stops at its limit (`IgnoredAny` skips without counting).
struct Skip;

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
    use crate::decode::{DecodeOptions, decode_ndjson};
    use crate::schema::{Column, ColumnType, TableSchema};

    fn decode(body: &str) -> Result<usize, crate::DecodeError> {
        let schema = TableSchema::new(vec![
            Column::new("id", ColumnType::Int64).required(),
            Column::new("n", ColumnType::UInt8),
            Column::new("x", ColumnType::Float64),
            Column::new("s", ColumnType::String),
        ])
        .unwrap();
        decode_ndjson(&schema, body.as_bytes(), &DecodeOptions::default()).map(|b| b.num_rows())
    }

    #[test]
    fn what_arrow_json_would_store_differently_is_refused() {
        let cases = [
            ("{\"id\":1}\n{\"id\":2.5}", 2, "id", "2.5 is not an integer"),
            ("{\"id\":1,\"n\":1e2}", 1, "n", "100.0 is not an integer"),
            ("{\"id\":1,\"x\":1e400}", 1, "x", "out of range"),
            ("{\"id\":1,\"id\":2}", 1, "id", "more than once"),
            (
                "{\"id\":1,\"s\":\"a\",\"s\":\"b\"}",
                1,
                "s",
                "more than once",
            ),
        ];
        for (body, line, field, says) in cases {
            let error = decode(body).unwrap_err();
            assert_eq!(error.line, Some(line), "{body}: {error}");
            assert_eq!(error.field.as_deref(), Some(field), "{body}: {error}");
            assert!(error.message.contains(says), "{body}: {error}");
        }
    }

    #[test]
    fn deep_nesting_is_refused_before_it_can_overflow_the_stack() {
        for (open, close) in [("[", "]"), ("{\"a\":", "}")] {
            let body = format!(
                "{{\"id\":1}}\n{{\"id\":2,\"s\":{}1{}}}",
                open.repeat(50_000),
                close.repeat(50_000)
            );
            let error = decode(&body).unwrap_err();
            assert_eq!(error.line, Some(2));
            assert!(error.message.contains("nested more than 128"), "{error}");
        }
    }

    #[test]
    fn ordinary_rows_pass() {
        let body = "{\"id\":-1,\"n\":255,\"x\":1.5e3,\"s\":\"id\"}\n\
                    {\"id\":\"7\",\"x\":2,\"s\":null}\n\
                    {\"s\":\"\\u0069d\",\"id\":9223372036854775807,\"x\":-0.0}";
        assert_eq!(decode(body).unwrap(), 3);
    }
}
