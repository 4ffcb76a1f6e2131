//! A body cut into its rows.
//!
//! Framing only finds where each row starts and ends; it judges no JSON. A row it cuts wrongly
//! from malformed input is malformed itself, and the check that follows refuses it. For
//! ClickHouse's framing that cut needs to know strings and nesting, which no JSON crate exposes
//! without parsing each row a second time, so it is a short scan here.

use super::JsonDialect;
use crate::error::DecodeError;
use crate::name::printable;

/// One row of a body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Row<'a> {
    /// The 1-based line of the body the row starts on.
    pub line: usize,
    /// The 1-based byte of that line the row starts at.
    pub column: usize,
    /// The row's text, without the separators around it.
    pub text: &'a [u8],
}

impl Row<'_> {
    /// A position inside the row (1-based line and byte column, relative to the row's text) as
    /// a position in the body.
    pub(crate) fn position_in_body(&self, line: usize, column: usize) -> (usize, usize) {
        if line <= 1 {
            (self.line, self.column + column.saturating_sub(1))
        } else {
            (self.line + line - 1, column)
        }
    }
}

/// The rows of `body` as `dialect` frames them. A body that cannot be cut into rows (ClickHouse's
/// framing only: something other than a comma between rows) is refused here.
pub fn rows(body: &[u8], dialect: JsonDialect) -> Result<Vec<Row<'_>>, DecodeError> {
    match dialect {
        JsonDialect::Ndjson => Ok(lines(body, is_json_space).collect()),
        // What the line filter always was: any ASCII whitespace makes a line blank.
        JsonDialect::Lenient => Ok(lines(body, |b| b.is_ascii_whitespace()).collect()),
        JsonDialect::ClickHouse | JsonDialect::ClickHouseMicros => {
            ClickHouseRows::new(body).collect()
        }
    }
}

/// How many rows `body` holds as `dialect` frames them, counting up to the first place it cannot
/// be cut; for limits checked before decoding. Line-framed bodies count their lines, blank ones
/// too.
pub fn count_rows(body: &[u8], dialect: JsonDialect) -> usize {
    if dialect.is_line_framed() {
        let newlines = memchr::memchr_iter(b'\n', body).count();
        newlines + usize::from(body.last().is_some_and(|&b| b != b'\n'))
    } else {
        ClickHouseRows::new(body).map_while(Result::ok).count()
    }
}

/// A word for the JSON value that starts with `byte`, for error messages.
pub(crate) fn describe_start(byte: u8) -> String {
    match byte {
        b'{' => "an object".to_owned(),
        b'[' => "an array".to_owned(),
        b'"' => "a string".to_owned(),
        b'-' | b'0'..=b'9' => "a number".to_owned(),
        b't' | b'f' => "a boolean".to_owned(),
        b'n' => "null".to_owned(),
        other => format!("'{}'", printable(&String::from_utf8_lossy(&[other]))),
    }
}

/// JSON's whitespace (RFC 8259, section 2).
pub(crate) fn is_json_space(byte: &u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\n' | b'\r')
}

/// The lines of `body` that are not blank, without their line ends.
fn lines(body: &[u8], blank: fn(&u8) -> bool) -> impl Iterator<Item = Row<'_>> {
    split_lines(body)
        .enumerate()
        .map(|(i, line)| Row {
            line: i + 1,
            column: 1,
            text: line.strip_suffix(b"\r").unwrap_or(line),
        })
        .filter(move |row| !row.text.iter().all(blank))
}

/// `body` cut at each `\n`, as `body.split(|b| *b == b'\n')` cuts it: an empty piece after a
/// final newline, one empty piece for an empty body. memchr finds the newlines many bytes at a
/// time, where `split` looks at each byte.
fn split_lines(body: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut newlines = memchr::memchr_iter(b'\n', body);
    let mut start = Some(0);
    std::iter::from_fn(move || {
        let from = start?;
        match newlines.next() {
            Some(end) => {
                start = Some(end + 1);
                Some(&body[from..end])
            }
            None => {
                start = None;
                Some(&body[from..])
            }
        }
    })
}

/// ClickHouse's `JSONEachRow` framing: objects separated by whitespace or one comma, optionally
/// all inside `[` `]`, after an optional UTF-8 byte order mark.
struct ClickHouseRows<'a> {
    body: &'a [u8],
    pos: usize,
    /// The line `pos` is on, and where that line starts.
    line: usize,
    line_start: usize,
    bracketed: bool,
    done: bool,
}

impl<'a> ClickHouseRows<'a> {
    fn new(body: &'a [u8]) -> Self {
        let mut rows = Self {
            body,
            pos: 0,
            line: 1,
            line_start: 0,
            bracketed: false,
            done: false,
        };
        if body.starts_with(b"\xEF\xBB\xBF") {
            rows.pos = 3;
        }
        rows.skip_space();
        if rows.peek() == Some(b'[') {
            rows.pos += 1;
            rows.bracketed = true;
        }
        rows
    }

    fn peek(&self) -> Option<u8> {
        self.body.get(self.pos).copied()
    }

    fn skip_space(&mut self) {
        while let Some(byte) = self.peek().filter(is_json_space) {
            self.pos += 1;
            if byte == b'\n' {
                self.line += 1;
                self.line_start = self.pos;
            }
        }
    }

    fn error(&self, message: String) -> DecodeError {
        let mut error = DecodeError::new(Some(self.line), None, message);
        error.position = Some(self.pos - self.line_start + 1);
        error
    }

    /// The end of the object starting at `pos`: just past its closing brace, or the body's end
    /// when it never closes. Counts the lines it passes.
    fn object_end(&mut self) -> usize {
        let mut depth = 0usize;
        let mut in_string = false;
        let mut i = self.pos;
        while let Some(&byte) = self.body.get(i) {
            i += 1;
            match byte {
                b'\n' => {
                    self.line += 1;
                    self.line_start = i;
                }
                b'\\' if in_string => i += 1,
                b'"' => in_string = !in_string,
                b'{' | b'[' if !in_string => depth += 1,
                b'}' | b']' if !in_string => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        return i;
                    }
                }
                _ => {}
            }
        }
        self.body.len()
    }

    /// After a row: whitespace, then at most one comma.
    fn skip_separator(&mut self) {
        self.skip_space();
        if self.peek() == Some(b',') {
            self.pos += 1;
        }
    }
}

impl<'a> Iterator for ClickHouseRows<'a> {
    type Item = Result<Row<'a>, DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        self.skip_space();
        let refuse = |rows: &mut Self, message: String| {
            rows.done = true;
            Some(Err(rows.error(message)))
        };
        match self.peek() {
            None if self.bracketed => {
                refuse(self, "the rows open with '[' and never close it".to_owned())
            }
            None => {
                self.done = true;
                None
            }
            Some(b']') if self.bracketed => {
                self.pos += 1;
                self.skip_space();
                self.done = true;
                match self.peek() {
                    None => None,
                    Some(_) => refuse(self, "text after the ']' that closes the rows".to_owned()),
                }
            }
            Some(b'{') => {
                let (line, column) = (self.line, self.pos - self.line_start + 1);
                let start = self.pos;
                let end = self.object_end();
                self.pos = end;
                self.skip_separator();
                Some(Ok(Row {
                    line,
                    column,
                    text: &self.body[start..end],
                }))
            }
            Some(byte) => refuse(
                self,
                format!(
                    "expected a row (a JSON object), found {}",
                    describe_start(byte)
                ),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(body: &str, dialect: JsonDialect) -> Vec<(usize, usize, String)> {
        rows(body.as_bytes(), dialect)
            .unwrap()
            .into_iter()
            .map(|r| {
                let text = String::from_utf8(r.text.to_vec()).unwrap();
                (r.line, r.column, text)
            })
            .collect()
    }

    /// What [`split_lines`] and [`count_rows`] must agree with: a split and a count that look at
    /// each byte.
    fn cut_byte_by_byte(body: &[u8]) -> (Vec<&[u8]>, usize) {
        let newlines = body.iter().filter(|&&b| b == b'\n').count();
        let rows = newlines + usize::from(body.last().is_some_and(|&b| b != b'\n'));
        (body.split(|b| *b == b'\n').collect(), rows)
    }

    #[test]
    fn lines_are_cut_as_slice_split_cuts_them() {
        for body in ["", "\n", "\n\n", "a", "a\n", "\na", "a\n\nb\n", "{}\r\n{}"] {
            let body = body.as_bytes();
            let (split, rows) = cut_byte_by_byte(body);
            assert_eq!(split_lines(body).collect::<Vec<_>>(), split, "{body:?}");
            assert_eq!(count_rows(body, JsonDialect::Ndjson), rows, "{body:?}");
        }
    }

    proptest::proptest! {
        #[test]
        fn any_body_is_cut_as_slice_split_cuts_it(
            body in proptest::collection::vec(proptest::sample::select(b"\n\ra{".to_vec()), 0..300),
        ) {
            let (split, rows) = cut_byte_by_byte(&body);
            proptest::prop_assert_eq!(split_lines(&body).collect::<Vec<_>>(), split);
            proptest::prop_assert_eq!(count_rows(&body, JsonDialect::Ndjson), rows);
        }
    }

    #[test]
    fn ndjson_rows_are_lines_that_are_not_blank() {
        let rows = texts("{\"a\":1}\r\n \t\n\n{\"a\":2}", JsonDialect::Ndjson);
        assert_eq!(
            rows,
            [(1, 1, "{\"a\":1}".into()), (4, 1, "{\"a\":2}".into())]
        );
        // A form feed is not JSON whitespace: that line is a row, and a bad one.
        assert_eq!(texts("\x0c", JsonDialect::Ndjson).len(), 1);
        assert_eq!(texts("\x0c", JsonDialect::Lenient).len(), 0);
    }

    #[test]
    fn clickhouse_rows_take_commas_brackets_and_objects_over_lines() {
        let body = "\u{feff}[{\"a\":1}, {\"a\":\"}{\\\"\"},\n  {\n\"a\":3\n}\n,{\"b\":[{}]}]\n";
        let rows = texts(body, JsonDialect::ClickHouse);
        let expected = [
            (1, 5, "{\"a\":1}"),
            (1, 14, "{\"a\":\"}{\\\"\"}"),
            (2, 3, "{\n\"a\":3\n}"),
            (5, 2, "{\"b\":[{}]}"),
        ];
        let expected: Vec<_> = expected
            .iter()
            .map(|(l, c, t)| (*l, *c, t.to_string()))
            .collect();
        assert_eq!(rows, expected);
        // Whitespace alone separates rows too, and a comma may trail.
        assert_eq!(texts("{}{} {},", JsonDialect::ClickHouse).len(), 3);
        assert_eq!(texts("", JsonDialect::ClickHouse).len(), 0);
        assert_eq!(texts(" [ ] ", JsonDialect::ClickHouse).len(), 0);
    }

    #[test]
    fn clickhouse_framing_refuses_what_is_not_rows_and_says_where() {
        let cases = [
            ("{},,{}", 1, 4, "found ','"),
            ("{}\n x", 2, 2, "found 'x'"),
            ("[{}", 1, 4, "never close"),
            ("[{}] {}", 1, 6, "after the ']'"),
            ("{} [1]", 1, 4, "found an array"),
            ("1", 1, 1, "found a number"),
        ];
        for (body, line, position, says) in cases {
            let error = rows(body.as_bytes(), JsonDialect::ClickHouse).unwrap_err();
            assert_eq!(error.line, Some(line), "{body}: {error}");
            assert_eq!(error.position, Some(position), "{body}: {error}");
            assert!(error.message.contains(says), "{body}: {error}");
        }
    }

    #[test]
    fn an_unclosed_object_runs_to_the_end_for_the_check_to_refuse() {
        let rows = texts("{\"a\":\"}", JsonDialect::ClickHouse);
        assert_eq!(rows, [(1, 1, "{\"a\":\"}".into())]);
    }

    #[test]
    fn counts_rows_as_framed() {
        assert_eq!(count_rows(b"{}\n\n{}", JsonDialect::Ndjson), 3);
        assert_eq!(count_rows(b"[{},{},{}]", JsonDialect::ClickHouse), 3);
        assert_eq!(count_rows(b"{},{},x,{}", JsonDialect::ClickHouse), 2);
    }

    #[test]
    fn positions_inside_a_row_map_to_the_body() {
        let row = Row {
            line: 3,
            column: 5,
            text: b"{}",
        };
        assert_eq!(row.position_in_body(1, 2), (3, 6));
        assert_eq!(row.position_in_body(2, 7), (4, 7));
    }
}
