//! Nested values written as ClickHouse's text formats write them (`TabSeparated`, `CSV`,
//! `Values`): a list `[1,2,NULL]`, a struct as a tuple `(1,'a')`, a map `{'k':1}`, and inside
//! them every value quoted as in SQL: text in single quotes with backslash escapes, numbers bare,
//! `NULL` for null.
//!
//! The text is read by the column's type, straight into its builder. A value inside is read as
//! its column's type reads text, so `'5'` and `5` are the same number; a string, a UUID and a
//! JSON text must be quoted. The reading recurses once per level of the type, never by the text alone, so a
//! hostile text cannot make it recurse deeper than the table's types nest.

use super::builder::{Builder, Step, Unfit};
use super::value::Value;
use crate::name::printable;
use crate::schema::ColumnType;

/// Appends `value` to `builder`, of type `ty`: a nested type takes its text form, or null.
pub(crate) fn push(builder: &mut Builder, ty: &ColumnType, value: Value<'_>) -> Result<(), Unfit> {
    match value {
        Value::Text(text) if ty.is_nested() => parse_into(builder, ty, text),
        _ => builder.push(ty, value).map_err(Unfit::new),
    }
}

/// Reads `text`, the whole of one value of the nested type `ty`, into `builder`.
pub(crate) fn parse_into(builder: &mut Builder, ty: &ColumnType, text: &str) -> Result<(), Unfit> {
    let mut reader = Reader {
        text: text.as_bytes(),
        pos: 0,
    };
    reader.skip_space();
    reader.nested(builder, ty)?;
    reader.skip_space();
    if reader.pos < reader.text.len() {
        return Err(Unfit::new(reader.unexpected("after the value")));
    }
    Ok(())
}

/// Where the nested value that starts at `start` of `text`, on its `[`, `(` or `{`, ends: the
/// byte after its closing bracket. Brackets are only counted and quotes skipped; what is inside
/// is judged when it is read.
pub(crate) fn value_end(text: &[u8], start: usize) -> Result<usize, String> {
    let mut depth = 0_usize;
    let mut pos = start;
    while let Some(&byte) = text.get(pos) {
        pos += 1;
        match byte {
            b'[' | b'(' | b'{' => depth += 1,
            b']' | b')' | b'}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return Ok(pos);
                }
            }
            b'\'' => pos = quoted_end(text, pos).ok_or_else(|| unclosed(start))?,
            _ => {}
        }
    }
    Err(unclosed(start))
}

fn unclosed(start: usize) -> String {
    format!("the value at byte {} has no closing bracket", start + 1)
}

/// The byte after the closing quote of a string whose opening quote ends before `pos`.
fn quoted_end(text: &[u8], mut pos: usize) -> Option<usize> {
    loop {
        match text.get(pos)? {
            b'\\' => pos += 2,
            b'\'' if text.get(pos + 1) == Some(&b'\'') => pos += 2,
            b'\'' => return Some(pos + 1),
            _ => pos += 1,
        }
    }
}

struct Reader<'a> {
    text: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn peek(&self) -> Option<u8> {
        self.text.get(self.pos).copied()
    }

    fn skip_space(&mut self) {
        while self.peek().is_some_and(|b| b.is_ascii_whitespace()) {
            self.pos += 1;
        }
    }

    fn unexpected(&self, context: &str) -> String {
        match self.peek() {
            None => format!("the text ends {context}"),
            Some(b) => format!(
                "unexpected '{}' at byte {} {context}",
                char::from(b).escape_default(),
                self.pos + 1
            ),
        }
    }

    fn expect(&mut self, byte: u8, context: &str) -> Result<(), Unfit> {
        if self.peek() == Some(byte) {
            self.pos += 1;
            return Ok(());
        }
        Err(Unfit::new(self.unexpected(&format!(
            "where '{}' {context}",
            char::from(byte)
        ))))
    }

    /// Whether `NULL`, in any case, comes next; it is taken when it does.
    fn null(&mut self) -> bool {
        let word = self.text.get(self.pos..self.pos + 4);
        let ends = !self
            .text
            .get(self.pos + 4)
            .is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_');
        if word.is_some_and(|w| w.eq_ignore_ascii_case(b"null")) && ends {
            self.pos += 4;
            return true;
        }
        false
    }

    /// A value of the nested type `ty`, not null.
    fn nested(&mut self, builder: &mut Builder, ty: &ColumnType) -> Result<(), Unfit> {
        match (ty, builder) {
            (ColumnType::List(element), Builder::List(list)) => {
                self.expect(b'[', "opens a list")?;
                let mut index = 0;
                self.items(b']', |reader| {
                    let read = reader.value(list.element(), element);
                    index += 1;
                    read.map_err(|e| e.at(Step::Element(index - 1)))
                })?;
                list.close().map_err(Unfit::new)
            }
            (ColumnType::Struct(fields), Builder::Struct(record)) => {
                self.expect(b'(', "opens a tuple")?;
                for (index, field) in fields.iter().enumerate() {
                    self.skip_space();
                    if index > 0 {
                        self.expect(b',', "separates a tuple's values")?;
                        self.skip_space();
                    }
                    let at = |e: Unfit| e.at(Step::Field(field.name.clone()));
                    self.value(record.child(index), &field.ty).map_err(at)?;
                }
                self.skip_space();
                // ClickHouse writes a tuple of one value `(1,)` and reads it with or without
                // the comma.
                if fields.len() == 1 && self.peek() == Some(b',') {
                    self.pos += 1;
                    self.skip_space();
                }
                self.expect(b')', &format!("ends a tuple of {} values", fields.len()))?;
                record.close(1);
                Ok(())
            }
            (ColumnType::Map(value), Builder::Map(map)) => {
                self.expect(b'{', "opens a map")?;
                self.items(b'}', |reader| reader.entry(map, value))?;
                map.close().map_err(Unfit::new)
            }
            (ty, builder) => self.leaf(builder, ty),
        }
    }

    /// The values of a list or map up to `close`, each read by `item`, separated by commas; a
    /// comma before `close` is taken, as ClickHouse takes it.
    fn items(
        &mut self,
        close: u8,
        mut item: impl FnMut(&mut Self) -> Result<(), Unfit>,
    ) -> Result<(), Unfit> {
        self.skip_space();
        let mut first = true;
        loop {
            if self.peek() == Some(close) {
                self.pos += 1;
                return Ok(());
            }
            if !first {
                self.expect(b',', &format!("or '{}' comes next", char::from(close)))?;
                self.skip_space();
                if self.peek() == Some(close) {
                    continue;
                }
            }
            first = false;
            item(self)?;
            self.skip_space();
        }
    }

    /// One entry of a map: a quoted key, `:`, a value.
    fn entry(
        &mut self,
        map: &mut super::builder::MapBuilder,
        ty: &ColumnType,
    ) -> Result<(), Unfit> {
        if self.null() {
            return Err(Unfit::new("a map's key is NULL; keys are strings"));
        }
        if self.peek() != Some(b'\'') {
            return Err(Unfit::new(
                self.unexpected("where a map's quoted key belongs"),
            ));
        }
        let key = self.quoted().map_err(Unfit::new)?;
        self.skip_space();
        self.expect(b':', "follows a map's key")?;
        self.skip_space();
        map.keys().append_value(&key);
        self.value(map.values(), ty)
            .map_err(|e| e.at(Step::Key(key)))
    }

    /// A value inside a nested one: `NULL`, or a value of `ty`.
    fn value(&mut self, builder: &mut Builder, ty: &ColumnType) -> Result<(), Unfit> {
        if self.null() {
            builder.push_null();
            return Ok(());
        }
        self.nested(builder, ty)
    }

    /// A value that holds no other: quoted text, or a bare word such as a number.
    fn leaf(&mut self, builder: &mut Builder, ty: &ColumnType) -> Result<(), Unfit> {
        let text = if self.peek() == Some(b'\'') {
            self.quoted()?
        } else {
            let start = self.pos;
            while self.peek().is_some_and(|b| {
                !b.is_ascii_whitespace() && !matches!(b, b',' | b']' | b')' | b'}' | b':')
            }) {
                self.pos += 1;
            }
            if start == self.pos {
                return Err(Unfit::new(self.unexpected("where a value belongs")));
            }
            let word = String::from_utf8_lossy(&self.text[start..self.pos]).into_owned();
            if matches!(ty, ColumnType::String | ColumnType::Uuid | ColumnType::Json) {
                return Err(Unfit::new(format!(
                    "{} is not a quoted string",
                    printable(&word)
                )));
            }
            word
        };
        builder.push(ty, Value::Text(&text)).map_err(Unfit::new)
    }

    /// A single-quoted string, its opening quote next: backslash escapes as ClickHouse reads
    /// them, and `''` for a quote.
    fn quoted(&mut self) -> Result<String, String> {
        let start = self.pos;
        let Some(end) = quoted_end(self.text, start + 1) else {
            return Err(format!("the string at byte {} is not closed", start + 1));
        };
        self.pos = end;
        unescape(&self.text[start + 1..end - 1])
            .ok_or_else(|| format!("the string at byte {} is not UTF-8", start + 1))
    }
}

/// A quoted string's content, its escapes resolved: `\n`, `\t` and the like, `\xHH` for a byte,
/// `''` for a quote, and a backslash before any other character for that character.
fn unescape(bytes: &[u8]) -> Option<String> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut pos = 0;
    while let Some(&byte) = bytes.get(pos) {
        pos += 1;
        let escaped = match byte {
            b'\'' => {
                // `quoted_end` only lets a quote through doubled.
                pos += 1;
                b'\''
            }
            b'\\' => {
                let Some(&next) = bytes.get(pos) else {
                    out.push(b'\\');
                    break;
                };
                pos += 1;
                match next {
                    b'b' => 8,
                    b'f' => 12,
                    b'n' => b'\n',
                    b'r' => b'\r',
                    b't' => b'\t',
                    b'0' => 0,
                    b'a' => 7,
                    b'v' => 11,
                    b'e' => 27,
                    b'x' => match bytes.get(pos..pos + 2).and_then(hex_byte) {
                        Some(value) => {
                            pos += 2;
                            value
                        }
                        None => b'x',
                    },
                    other => other,
                }
            }
            other => other,
        };
        out.push(escaped);
    }
    String::from_utf8(out).ok()
}

fn hex_byte(digits: &[u8]) -> Option<u8> {
    u8::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::tests_support::rows_json;
    use crate::schema::{Column, StructField, TableSchema};

    /// `text` read as one value of `ty`, as JSON.
    fn read(ty: ColumnType, text: &str) -> Result<serde_json::Value, String> {
        let mut builder = Builder::new(&ty);
        parse_into(&mut builder, &ty, text).map_err(|e| e.path("c") + ": " + &e.message)?;
        let schema = TableSchema::new(vec![Column::new("c", ty)]).unwrap();
        let array = builder.finish().unwrap();
        let batch = arrow::array::RecordBatch::try_new(schema.arrow().clone(), vec![array]);
        Ok(rows_json(&batch.unwrap())[0]["c"].clone())
    }

    #[test]
    fn lists_tuples_and_maps_with_what_they_hold() {
        let ints = || ColumnType::list(ColumnType::Int64);
        assert_eq!(
            read(ints(), " [ 1 ,-2,NULL, '3' ] "),
            Ok(serde_json::json!([1, -2, null, 3]))
        );
        assert_eq!(read(ints(), "[1,]"), Ok(serde_json::json!([1])));
        assert_eq!(read(ints(), "[]"), Ok(serde_json::json!([])));
        let record = ColumnType::Struct(vec![
            StructField::new("n", ColumnType::Float64),
            StructField::new("s", ColumnType::String),
            StructField::new("m", ColumnType::map(ColumnType::list(ColumnType::Bool))),
        ]);
        assert_eq!(
            read(
                record,
                "(1.5e0, 'it''s \\'q\\' \\x41\\\\\\n', {'k': [true, NULL, 0]})"
            ),
            Ok(
                serde_json::json!({"n": 1.5, "s": "it's 'q' A\\\n", "m": {"k": [true, null, false]}})
            )
        );
        let one = ColumnType::Struct(vec![StructField::new("a", ColumnType::Date)]);
        assert_eq!(
            read(one.clone(), "('1970-01-02',)"),
            Ok(serde_json::json!({"a": "1970-01-02"}))
        );
        assert_eq!(read(one, "(null)"), Ok(serde_json::json!({"a": null})));
        let keyed = ColumnType::map(ColumnType::Json);
        assert_eq!(
            read(keyed.clone(), "{'a':'{\"x\": [1]}','a':'2'}"),
            Ok(serde_json::json!({"a": "2"})),
            "a key given twice is kept twice, as ClickHouse keeps it; JSON shows the last"
        );
        assert_eq!(
            read(keyed, "{'a':'{'}"),
            Err("c.a: not JSON: EOF while parsing an object at line 1 column 1".to_owned())
        );
    }

    #[test]
    fn what_does_not_fit_is_named_by_its_way() {
        let deep = ColumnType::list(ColumnType::Struct(vec![StructField::new(
            "m",
            ColumnType::map(ColumnType::UInt8),
        )]));
        for (text, says) in [
            (
                "[({'a': 1, 'b': 256})]",
                "c[0].m.b: 256 is out of range for uint8",
            ),
            (
                "[({'a': 1}), (NULL), ({1: 2})]",
                "c[2].m: unexpected '1' at byte 24 where a map's quoted key belongs",
            ),
            (
                "[({NULL: 2})]",
                "c[0].m: a map's key is NULL; keys are strings",
            ),
            (
                "[({'a' 2})]",
                "c[0].m: unexpected '2' at byte 8 where ':' follows a map's key",
            ),
            (
                "[(1)]",
                "c[0].m: unexpected '1' at byte 3 where '{' opens a map",
            ),
            ("[({})", "c: the text ends where ',' or ']' comes next"),
            ("[({})] [", "c: unexpected '[' at byte 8 after the value"),
            (
                "[(,)]",
                "c[0].m: unexpected ',' at byte 3 where '{' opens a map",
            ),
        ] {
            assert_eq!(read(deep.clone(), text), Err(says.to_owned()), "{text}");
        }
        let strings = ColumnType::list(ColumnType::String);
        assert_eq!(
            read(strings.clone(), "['a', b]"),
            Err("c[1]: b is not a quoted string".to_owned())
        );
        assert_eq!(
            read(strings, "['a\\']"),
            Err("c[0]: the string at byte 2 is not closed".to_owned())
        );
    }

    #[test]
    fn a_nested_values_end_is_found_past_quotes_and_brackets() {
        let text = b"x, [(')', '\\'', 'it''s'), {'k': [1]}], 'y'";
        assert_eq!(value_end(text, 3), Ok(37));
        assert_eq!(&text[3..37], b"[(')', '\\'', 'it''s'), {'k': [1]}]");
        assert_eq!(
            value_end(b"[1, ']", 0),
            Err("the value at byte 1 has no closing bracket".to_owned())
        );
        assert!(value_end(b"((", 0).is_err());
    }
}
