//! The statement lexer, and parsing the statement the ClickHouse endpoint lands rows from:
//!
//! ```text
//! INSERT INTO [TABLE] [db.]table [(c1, c2, ...)] [SETTINGS k = v, ...] FORMAT <format>
//! INSERT INTO [TABLE] [db.]table [(c1, c2, ...)] [SETTINGS k = v, ...] VALUES (...), ...
//! ```
//!
//! Keywords are case-insensitive; identifiers are bare (`[A-Za-z_][A-Za-z0-9_]*`), or quoted with
//! backquotes or double quotes; `--` and `/* */` comments are skipped. The parser reads bytes,
//! because when the query comes as the body's first line the rows follow it directly, and it
//! never reads past the format name, so a large body is not scanned.

use std::fmt;

use sluice_core::InputFormat;

/// The longest query text read from the start of a body before giving up.
pub const MAX_QUERY_LEN: usize = 64 * 1024;

/// A parsed INSERT.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InsertQuery {
    /// The database, when the table was written `db.table`.
    pub database: Option<String>,
    /// The table.
    pub table: String,
    /// The column list, when there is one.
    pub columns: Option<Vec<String>>,
    /// `SETTINGS` given in the query, in order.
    pub settings: Vec<(String, String)>,
    /// The format name as written.
    pub format: String,
    /// Byte offset just past the format name: where inline rows start.
    pub data_offset: usize,
}

/// Why a query was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueryError {
    /// Not parseable, or not the shape above.
    Syntax(String),
    /// A statement other than INSERT.
    NotInsert(String),
    /// An INSERT with a format sluice does not read.
    Format(String),
    /// A read sluice does not answer: what it answers, and what was asked.
    Unanswered(String),
}

impl fmt::Display for QueryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Syntax(m) => write!(f, "Syntax error: {m}"),
            Self::NotInsert(keyword) => write!(
                f,
                "sluice lands rows from INSERT INTO ... FORMAT or VALUES, not {keyword} statements"
            ),
            Self::Format(format) => write!(
                f,
                "format {format} is not supported: sluice reads {}",
                InputFormat::NAMES.join(", ")
            ),
            Self::Unanswered(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for QueryError {}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Token {
    Word(String),
    Quoted(String),
    Literal(String),
    Punct(u8),
}

pub(super) struct Lexer<'a> {
    text: &'a [u8],
    pos: usize,
}

impl<'a> Lexer<'a> {
    pub(super) fn new(text: &'a [u8]) -> Self {
        Self { text, pos: 0 }
    }

    /// Where the next token starts, or the end.
    pub(super) fn pos(&self) -> usize {
        self.pos
    }

    /// Goes back to `pos`, from [`Lexer::pos`], to read again from there.
    pub(super) fn rewind(&mut self, pos: usize) {
        self.pos = pos;
    }

    pub(super) fn expect_punct(&mut self, punct: u8) -> Result<(), QueryError> {
        match self.next()? {
            Some(Token::Punct(p)) if p == punct => Ok(()),
            other => Err(QueryError::Syntax(format!(
                "expected '{}', found {}",
                char::from(punct),
                describe(other.as_ref())
            ))),
        }
    }

    fn skip_space(&mut self) -> Result<(), QueryError> {
        loop {
            let rest = &self.text[self.pos..];
            if rest.first().is_some_and(u8::is_ascii_whitespace) {
                self.pos += 1;
            } else if rest.starts_with(b"--") {
                let end = rest.iter().position(|b| *b == b'\n').unwrap_or(rest.len());
                self.pos += end;
            } else if rest.starts_with(b"/*") {
                let end = rest
                    .windows(2)
                    .position(|w| w == b"*/")
                    .ok_or_else(|| QueryError::Syntax("unterminated comment".into()))?;
                self.pos += end + 2;
            } else {
                return Ok(());
            }
        }
    }

    pub(super) fn next(&mut self) -> Result<Option<Token>, QueryError> {
        self.skip_space()?;
        if self.pos >= MAX_QUERY_LEN {
            return Err(QueryError::Syntax(format!(
                "the query is longer than {MAX_QUERY_LEN} bytes"
            )));
        }
        let Some(&first) = self.text.get(self.pos) else {
            return Ok(None);
        };
        match first {
            b'a'..=b'z' | b'A'..=b'Z' | b'_' | b'0'..=b'9' => {
                let start = self.pos;
                while self
                    .text
                    .get(self.pos)
                    .is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_')
                {
                    self.pos += 1;
                }
                Ok(Some(Token::Word(self.text_of(start, self.pos))))
            }
            b'`' | b'"' | b'\'' => {
                let quote = first;
                let mut out = Vec::new();
                self.pos += 1;
                loop {
                    match self.text.get(self.pos) {
                        None => return Err(QueryError::Syntax("unterminated quoted name".into())),
                        Some(b'\\') => {
                            let escaped =
                                self.text.get(self.pos + 1).copied().ok_or_else(|| {
                                    QueryError::Syntax("unterminated quoted name".into())
                                })?;
                            out.push(escaped);
                            self.pos += 2;
                        }
                        Some(&b) if b == quote => {
                            // A doubled quote stands for itself.
                            if self.text.get(self.pos + 1) == Some(&quote) {
                                out.push(quote);
                                self.pos += 2;
                            } else {
                                self.pos += 1;
                                break;
                            }
                        }
                        Some(&b) => {
                            out.push(b);
                            self.pos += 1;
                        }
                    }
                }
                let text = String::from_utf8(out)
                    .map_err(|_| QueryError::Syntax("a quoted name is not valid UTF-8".into()))?;
                Ok(Some(if quote == b'\'' {
                    Token::Literal(text)
                } else {
                    Token::Quoted(text)
                }))
            }
            b'(' | b')' | b',' | b'.' | b'=' | b';' | b'-' | b'+' | b'*' | b'<' | b'>' | b'!' => {
                self.pos += 1;
                Ok(Some(Token::Punct(first)))
            }
            other => Err(QueryError::Syntax(format!(
                "unexpected character {:?} at position {}",
                char::from(other),
                self.pos
            ))),
        }
    }

    fn text_of(&self, start: usize, end: usize) -> String {
        String::from_utf8_lossy(&self.text[start..end]).into_owned()
    }

    pub(super) fn expect_word(&mut self, keyword: &str) -> Result<(), QueryError> {
        match self.next()? {
            Some(Token::Word(w)) if w.eq_ignore_ascii_case(keyword) => Ok(()),
            other => Err(QueryError::Syntax(format!(
                "expected {keyword}, found {}",
                describe(other.as_ref())
            ))),
        }
    }

    pub(super) fn identifier(&mut self, what: &str) -> Result<String, QueryError> {
        match self.next()? {
            Some(Token::Word(w)) if !w.starts_with(|c: char| c.is_ascii_digit()) => Ok(w),
            Some(Token::Quoted(q)) => Ok(q),
            other => Err(QueryError::Syntax(format!(
                "expected {what}, found {}",
                describe(other.as_ref())
            ))),
        }
    }

    fn value(&mut self) -> Result<String, QueryError> {
        match self.next()? {
            Some(Token::Word(w)) => Ok(w),
            Some(Token::Literal(l)) => Ok(l),
            Some(Token::Punct(sign @ (b'-' | b'+'))) => match self.next()? {
                Some(Token::Word(w)) => Ok(format!("{}{w}", char::from(sign))),
                other => Err(QueryError::Syntax(format!(
                    "expected a number, found {}",
                    describe(other.as_ref())
                ))),
            },
            other => Err(QueryError::Syntax(format!(
                "expected a setting value, found {}",
                describe(other.as_ref())
            ))),
        }
    }
}

pub(super) fn describe(token: Option<&Token>) -> String {
    match token {
        None => "the end of the query".into(),
        Some(Token::Word(w)) => format!("'{w}'"),
        Some(Token::Quoted(q)) => format!("the quoted name '{q}'"),
        Some(Token::Literal(l)) => format!("the string '{l}'"),
        Some(Token::Punct(p)) => format!("'{}'", char::from(*p)),
    }
}

fn is_clause_keyword(word: &str) -> bool {
    ["FORMAT", "SETTINGS", "VALUES", "SELECT", "WITH"]
        .iter()
        .any(|k| word.eq_ignore_ascii_case(k))
}

pub(super) fn is_word(token: &Option<Token>, keyword: &str) -> bool {
    matches!(token, Some(Token::Word(w)) if w.eq_ignore_ascii_case(keyword))
}

/// The statement's first word, upper-cased: what kind of statement it is. `None` when it does
/// not start with a word.
pub fn first_keyword(text: &[u8]) -> Option<String> {
    match Lexer::new(text).next() {
        Ok(Some(Token::Word(w))) => Some(w.to_ascii_uppercase()),
        _ => None,
    }
}

/// Parses an INSERT from the start of `text`.
pub fn parse_insert(text: &[u8]) -> Result<InsertQuery, QueryError> {
    let mut lx = Lexer::new(text);
    expect_insert(&mut lx)?;
    lx.expect_word("INTO")?;
    let mut name = table_name(&mut lx)?;
    let mut database = None;
    let mut token = lx.next()?;
    if token == Some(Token::Punct(b'.')) {
        database = Some(name);
        name = lx.identifier("a table name after the database")?;
        token = lx.next()?;
    }
    let mut columns = None;
    if token == Some(Token::Punct(b'(')) {
        columns = Some(column_list(&mut lx)?);
        token = lx.next()?;
    }
    let mut settings = Vec::new();
    if is_word(&token, "SETTINGS") {
        settings = settings_clause(&mut lx)?;
        token = lx.next()?;
    }
    let format = format_name(&mut lx, token)?;
    Ok(InsertQuery {
        database,
        table: name,
        columns,
        settings,
        format,
        data_offset: lx.pos,
    })
}

/// Reads the statement's first word, which must be INSERT.
fn expect_insert(lx: &mut Lexer<'_>) -> Result<(), QueryError> {
    match lx.next()? {
        Some(Token::Word(w)) if w.eq_ignore_ascii_case("INSERT") => Ok(()),
        Some(Token::Word(w)) => Err(QueryError::NotInsert(w.to_ascii_uppercase())),
        other => Err(QueryError::Syntax(format!(
            "expected INSERT, found {}",
            describe(other.as_ref())
        ))),
    }
}

/// Reads the name after INTO, skipping an optional TABLE keyword.
fn table_name(lx: &mut Lexer<'_>) -> Result<String, QueryError> {
    let mut name = lx.identifier("a table name")?;
    if name.eq_ignore_ascii_case("TABLE") {
        // `INSERT INTO TABLE t` or a table called `table`: a name follows only in the first case.
        let save = lx.pos;
        match lx.next()? {
            Some(Token::Word(w)) if !is_clause_keyword(&w) => {
                lx.pos = save;
                name = lx.identifier("a table name")?;
            }
            Some(Token::Quoted(_)) => {
                lx.pos = save;
                name = lx.identifier("a table name")?;
            }
            _ => lx.pos = save,
        }
    }
    Ok(name)
}

/// Reads a column list up to its closing parenthesis; the opening one was already read.
fn column_list(lx: &mut Lexer<'_>) -> Result<Vec<String>, QueryError> {
    let mut list = Vec::new();
    loop {
        list.push(lx.identifier("a column name")?);
        match lx.next()? {
            Some(Token::Punct(b',')) => continue,
            Some(Token::Punct(b')')) => break,
            other => {
                return Err(QueryError::Syntax(format!(
                    "expected ',' or ')' in the column list, found {}",
                    describe(other.as_ref())
                )));
            }
        }
    }
    Ok(list)
}

/// Reads the `k = v, ...` pairs after SETTINGS, in order, and stops before the first token
/// that does not continue the list.
pub(super) fn settings_clause(lx: &mut Lexer<'_>) -> Result<Vec<(String, String)>, QueryError> {
    let mut settings = Vec::new();
    loop {
        let key = lx.identifier("a setting name")?;
        match lx.next()? {
            Some(Token::Punct(b'=')) => {}
            other => {
                return Err(QueryError::Syntax(format!(
                    "expected '=' after setting {key}, found {}",
                    describe(other.as_ref())
                )));
            }
        }
        settings.push((key, lx.value()?));
        let save = lx.pos;
        if lx.next()? != Some(Token::Punct(b',')) {
            lx.pos = save;
            break;
        }
    }
    Ok(settings)
}

/// Checks that `token` is FORMAT and reads the format name, which must be one sluice reads; or
/// that it is VALUES, whose tuples are the `Values` format.
fn format_name(lx: &mut Lexer<'_>, token: Option<Token>) -> Result<String, QueryError> {
    if is_word(&token, "VALUES") {
        // The tuples follow the keyword: they are the rows, read as the `Values` format.
        return Ok("Values".into());
    }
    if is_word(&token, "SELECT") || is_word(&token, "WITH") {
        return Err(QueryError::Format("INSERT ... SELECT".into()));
    }
    if !is_word(&token, "FORMAT") {
        return Err(QueryError::Syntax(format!(
            "expected FORMAT or VALUES, found {}",
            describe(token.as_ref())
        )));
    }
    let format = lx.identifier("a format name")?;
    if InputFormat::parse(&format).is_none() {
        return Err(QueryError::Format(format));
    }
    Ok(format)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<InsertQuery, QueryError> {
        parse_insert(text.as_bytes())
    }

    #[test]
    fn plain_insert() {
        let q = parse("INSERT INTO events FORMAT JSONEachRow").unwrap();
        assert_eq!(
            (q.database, q.table.as_str(), q.columns),
            (None, "events", None)
        );
        assert_eq!(q.data_offset, "INSERT INTO events FORMAT JSONEachRow".len());
    }

    #[test]
    fn database_columns_settings_and_case() {
        let q = parse(
            "insert into `db`.\"my table\" (a, `b c`) settings async_insert=1, \
             input_format_skip_unknown_fields = 'true' format jsoneachrow\n{\"a\":1}",
        )
        .unwrap();
        assert_eq!(q.database.as_deref(), Some("db"));
        assert_eq!(q.table, "my table");
        assert_eq!(q.columns.unwrap(), ["a", "b c"]);
        assert_eq!(
            q.settings,
            [
                ("async_insert".to_owned(), "1".to_owned()),
                (
                    "input_format_skip_unknown_fields".to_owned(),
                    "true".to_owned()
                )
            ]
        );
        assert_eq!(q.format, "jsoneachrow");
    }

    #[test]
    fn data_follows_the_format_name() {
        let text = "INSERT INTO t FORMAT JSONEachRow {\"a\":1}\n{\"a\":2}";
        let q = parse(text).unwrap();
        assert_eq!(&text[q.data_offset..], " {\"a\":1}\n{\"a\":2}");
    }

    #[test]
    fn table_keyword_and_comments() {
        let q = parse("/* hi */ INSERT INTO TABLE t -- note\n FORMAT JSONLines").unwrap();
        assert_eq!(q.table, "t");
        let q = parse("INSERT INTO table FORMAT JSONEachRow").unwrap();
        assert_eq!(q.table, "table");
    }

    #[test]
    fn refuses_other_statements_and_formats() {
        assert_eq!(
            parse("SELECT 1").unwrap_err(),
            QueryError::NotInsert("SELECT".into())
        );
        let values = "INSERT INTO t VALUES (1)";
        let q = parse(values).unwrap();
        assert_eq!(
            (q.format.as_str(), &values[q.data_offset..]),
            ("Values", " (1)")
        );
        assert_eq!(parse("INSERT INTO t FORMAT CSV").unwrap().format, "CSV");
        assert_eq!(
            parse("INSERT INTO t FORMAT Parquet").unwrap_err(),
            QueryError::Format("Parquet".into())
        );
        assert!(matches!(parse("INSERT INTO t"), Err(QueryError::Syntax(_))));
        assert!(matches!(
            parse("INSERT INTO t (a"),
            Err(QueryError::Syntax(_))
        ));
        assert!(matches!(
            parse("INSERT t FORMAT JSONEachRow"),
            Err(QueryError::Syntax(_))
        ));
        assert!(matches!(
            parse("INSERT INTO `t"),
            Err(QueryError::Syntax(_))
        ));
        assert!(matches!(parse(""), Err(QueryError::Syntax(_))));
        assert!(matches!(
            parse_insert(b"\xff\xfe"),
            Err(QueryError::Syntax(_))
        ));
    }

    #[test]
    fn never_reads_a_huge_body() {
        let mut text = b"INSERT INTO t ".to_vec();
        text.extend(std::iter::repeat_n(b' ', MAX_QUERY_LEN + 10));
        text.extend(b"FORMAT JSONEachRow");
        assert!(matches!(parse_insert(&text), Err(QueryError::Syntax(_))));
    }
}
