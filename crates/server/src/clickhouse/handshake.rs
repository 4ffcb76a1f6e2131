//! The reads ClickHouse clients send before they insert, and sluice's answers to them.
//!
//! Clients check the server before inserting: `SELECT 1`, `SELECT version(), timezone()`,
//! `SELECT currentDatabase()`, a count of `system.databases`, the writable settings in
//! `system.settings`, `EXISTS TABLE t`, and `DESCRIBE TABLE t` to learn the columns they must
//! send. sluice answers exactly these, from what it knows; any other read is refused, saying
//! that sluice takes inserts. Parsing and answering are pure: the handler looks the table up.

use sluice_core::TableLayout;

use super::output::{Cell, CellType, ResultSet};
use super::query::{Lexer, QueryError, Token, describe, is_word, settings_clause};
use super::types::{Known, announced};

/// The ClickHouse version sluice reports. A recent long-term-support release, so clients pick
/// their current code paths; sluice implements only the insert side of what it promises.
pub(crate) const VERSION: &str = "25.8.1.1";

/// The one database sluice reports: every table lives in one namespace, and the database part
/// of `db.table` is ignored.
pub(crate) const DATABASE: &str = "default";

/// A read sluice answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Read {
    /// `SELECT` of constants and server functions, each with its column name.
    Constants(Vec<(String, Constant)>),
    /// `SELECT count() FROM system.databases [WHERE ...]`.
    CountDatabases,
    /// `SELECT columns FROM system.settings ...`: sluice has no settings to list.
    Settings(Vec<String>),
    /// `EXISTS [TABLE] t`.
    Exists(String),
    /// `DESCRIBE [TABLE] t`.
    Describe(String),
}

/// A value a handshake `SELECT` asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Constant {
    /// `version()`.
    Version,
    /// `timezone()`.
    Timezone,
    /// `currentDatabase()`.
    CurrentDatabase,
    /// A number literal.
    Number(u64),
    /// A string literal.
    Text(String),
}

/// A read and the output format it names, if it names one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadQuery {
    /// What is read.
    pub read: Read,
    /// The `FORMAT` it names.
    pub format: Option<String>,
}

/// What sluice answers, for the error that refuses every other read.
const ANSWERED: &str = "sluice takes INSERT statements; the only reads it answers are the ones \
     clients send when they connect: SELECT 1, version(), timezone(), currentDatabase(), \
     system.databases and system.settings, EXISTS TABLE and DESCRIBE TABLE";

fn not_answered(what: impl std::fmt::Display) -> QueryError {
    QueryError::Unanswered(format!("{ANSWERED}, not {what}"))
}

/// Parses one of the reads sluice answers.
pub fn parse_read(text: &[u8]) -> Result<ReadQuery, QueryError> {
    let mut lx = Lexer::new(text);
    let first = lx.next()?;
    let read = if is_word(&first, "SELECT") {
        select(&mut lx)?
    } else if is_word(&first, "EXISTS") {
        Read::Exists(table_after(&mut lx, &["TEMPORARY", "TABLE"])?)
    } else if is_word(&first, "DESCRIBE") || is_word(&first, "DESC") {
        Read::Describe(table_after(&mut lx, &["TABLE"])?)
    } else {
        return Err(not_answered(format!(
            "a statement starting with {}",
            describe(first.as_ref())
        )));
    };
    let format = tail(&mut lx)?;
    Ok(ReadQuery { read, format })
}

/// The rest of a SELECT after the keyword.
fn select(lx: &mut Lexer<'_>) -> Result<Read, QueryError> {
    let save = lx.pos();
    if matches!(lx.next()?, Some(Token::Word(w)) if w.eq_ignore_ascii_case("count")) {
        lx.expect_punct(b'(')?;
        lx.expect_punct(b')')?;
        from_system(lx, "databases")?;
        skip_to_tail(lx)?;
        return Ok(Read::CountDatabases);
    }
    lx.rewind(save);
    let mut items = Vec::new();
    loop {
        items.push(select_item(lx)?);
        let save = lx.pos();
        match lx.next()? {
            Some(Token::Punct(b',')) => continue,
            token if is_word(&token, "FROM") => {
                lx.rewind(save);
                return settings_columns(lx, items);
            }
            _ => {
                lx.rewind(save);
                break;
            }
        }
    }
    let constants = items
        .into_iter()
        .map(|item| match item {
            SelectItem::Constant(name, constant) => Ok((name, constant)),
            SelectItem::Column(name) => Err(not_answered(format!("a read of column {name}"))),
        })
        .collect::<Result<_, _>>()?;
    Ok(Read::Constants(constants))
}

/// What one item of a SELECT list is.
enum SelectItem {
    Constant(String, Constant),
    Column(String),
}

/// One item of a SELECT list, with its `AS` alias.
fn select_item(lx: &mut Lexer<'_>) -> Result<SelectItem, QueryError> {
    let item = match lx.next()? {
        Some(Token::Word(w)) if w.bytes().all(|b| b.is_ascii_digit()) => {
            let n = w
                .parse()
                .map_err(|_| not_answered(format!("the number {w}")))?;
            SelectItem::Constant(w, Constant::Number(n))
        }
        Some(Token::Literal(text)) => SelectItem::Constant(
            format!("'{}'", text.replace('\\', "\\\\").replace('\'', "\\'")),
            Constant::Text(text),
        ),
        Some(Token::Punct(b'*')) => SelectItem::Column("*".into()),
        Some(Token::Word(name)) | Some(Token::Quoted(name)) => {
            let save = lx.pos();
            if lx.next()? == Some(Token::Punct(b'(')) {
                lx.expect_punct(b')')?;
                SelectItem::Constant(format!("{name}()"), function(&name)?)
            } else {
                lx.rewind(save);
                SelectItem::Column(name)
            }
        }
        other => {
            return Err(QueryError::Syntax(format!(
                "expected a SELECT item, found {}",
                describe(other.as_ref())
            )));
        }
    };
    let save = lx.pos();
    if is_word(&lx.next()?, "AS") {
        let alias = lx.identifier("an alias after AS")?;
        return Ok(match item {
            SelectItem::Constant(_, constant) => SelectItem::Constant(alias, constant),
            column => column,
        });
    }
    lx.rewind(save);
    Ok(item)
}

/// The server function `name()`, as ClickHouse spells it (function names are case-insensitive
/// for these).
fn function(name: &str) -> Result<Constant, QueryError> {
    match name.to_ascii_lowercase().as_str() {
        "version" => Ok(Constant::Version),
        "timezone" | "timezoneof" | "servertimezone" => Ok(Constant::Timezone),
        "currentdatabase" | "database" | "current_database" => Ok(Constant::CurrentDatabase),
        _ => Err(not_answered(format!("the function {name}()"))),
    }
}

/// `FROM system.settings ...` after a list of columns.
fn settings_columns(lx: &mut Lexer<'_>, items: Vec<SelectItem>) -> Result<Read, QueryError> {
    from_system(lx, "settings")?;
    skip_to_tail(lx)?;
    let mut columns = Vec::new();
    for item in items {
        match item {
            SelectItem::Column(name) if name == "*" => columns.extend(
                [
                    "name",
                    "value",
                    "changed",
                    "description",
                    "min",
                    "max",
                    "readonly",
                    "type",
                ]
                .map(String::from),
            ),
            SelectItem::Column(name) => columns.push(name),
            SelectItem::Constant(name, _) => {
                return Err(not_answered(format!("{name} from system.settings")));
            }
        }
    }
    Ok(Read::Settings(columns))
}

/// `FROM system.<table>`, refusing any other source.
fn from_system(lx: &mut Lexer<'_>, table: &str) -> Result<(), QueryError> {
    lx.expect_word("FROM")?;
    let database = lx.identifier("a table after FROM")?;
    let save = lx.pos();
    let name = if lx.next()? == Some(Token::Punct(b'.')) {
        lx.identifier("a table name")?
    } else {
        lx.rewind(save);
        return Err(not_answered(format!("a read from {database}")));
    };
    if database.eq_ignore_ascii_case("system") && name.eq_ignore_ascii_case(table) {
        Ok(())
    } else {
        Err(not_answered(format!("a read from {database}.{name}")))
    }
}

/// Skips a WHERE, ORDER BY or LIMIT clause up to SETTINGS, FORMAT or the end: the answer does
/// not depend on it.
fn skip_to_tail(lx: &mut Lexer<'_>) -> Result<(), QueryError> {
    loop {
        let save = lx.pos();
        let token = lx.next()?;
        if token.is_none()
            || token == Some(Token::Punct(b';'))
            || is_word(&token, "FORMAT")
            || is_word(&token, "SETTINGS")
        {
            lx.rewind(save);
            return Ok(());
        }
    }
}

/// The table after EXISTS or DESCRIBE, skipping the optional keywords given.
fn table_after(lx: &mut Lexer<'_>, optional: &[&str]) -> Result<String, QueryError> {
    let mut name = lx.identifier("a table name")?;
    for keyword in optional {
        if name.eq_ignore_ascii_case(keyword) {
            let save = lx.pos();
            match lx.next()? {
                Some(Token::Word(_) | Token::Quoted(_)) => {
                    lx.rewind(save);
                    name = lx.identifier("a table name")?;
                }
                _ => lx.rewind(save),
            }
        }
    }
    let save = lx.pos();
    if lx.next()? == Some(Token::Punct(b'.')) {
        return lx.identifier("a table name after the database");
    }
    lx.rewind(save);
    Ok(name)
}

/// `[SETTINGS ...] [FORMAT name] [;]` and the end: the format, if named.
fn tail(lx: &mut Lexer<'_>) -> Result<Option<String>, QueryError> {
    let mut format = None;
    let mut token = lx.next()?;
    if is_word(&token, "SETTINGS") {
        settings_clause(lx)?;
        token = lx.next()?;
    }
    if is_word(&token, "FORMAT") {
        format = Some(lx.identifier("a format name")?);
        token = lx.next()?;
    }
    if token == Some(Token::Punct(b';')) {
        token = lx.next()?;
    }
    match token {
        None => Ok(format),
        other => Err(QueryError::Syntax(format!(
            "unexpected {} after the statement",
            describe(other.as_ref())
        ))),
    }
}

/// The answer to `read`. `layout` is the table's, for EXISTS and DESCRIBE, when sluice knows
/// the table.
pub(crate) fn answer(read: &Read, layout: Option<&TableLayout>) -> ResultSet {
    match read {
        Read::Constants(items) => {
            let (columns, row) = items
                .iter()
                .map(|(name, constant)| {
                    let (ty, cell) = constant_cell(constant);
                    ((name.clone(), ty), cell)
                })
                .unzip();
            ResultSet::row(columns, row)
        }
        Read::CountDatabases => ResultSet::row(
            vec![("count()".into(), CellType::UInt64)],
            vec![Cell::Number(1)],
        ),
        Read::Settings(columns) => ResultSet {
            columns: columns
                .iter()
                .map(|name| (name.clone(), settings_column_type(name)))
                .collect(),
            rows: Vec::new(),
        },
        Read::Exists(_) => ResultSet::row(
            vec![("result".into(), CellType::UInt8)],
            vec![Cell::Number(u64::from(layout.is_some()))],
        ),
        Read::Describe(_) => describe_table(layout),
    }
}

fn constant_cell(constant: &Constant) -> (CellType, Cell) {
    let text = |s: &str| (CellType::String, Cell::Text(s.to_string()));
    match constant {
        Constant::Version => text(VERSION),
        Constant::Timezone => text("UTC"),
        Constant::CurrentDatabase => text(DATABASE),
        Constant::Number(n) if *n <= u64::from(u8::MAX) => (CellType::UInt8, Cell::Number(*n)),
        Constant::Number(n) => (CellType::UInt64, Cell::Number(*n)),
        Constant::Text(s) => text(s),
    }
}

fn settings_column_type(name: &str) -> CellType {
    match name {
        "readonly" | "changed" | "is_obsolete" => CellType::UInt8,
        _ => CellType::String,
    }
}

/// ClickHouse's seven DESCRIBE columns, a row per column of the table. A nullable column is
/// `Nullable(T) DEFAULT NULL`: rows may leave it out, as sluice's own API allows. A `list`,
/// `struct` or `map` column is its bare type, with no default: ClickHouse has no `Nullable` of
/// one, nor a null for it.
fn describe_table(layout: Option<&TableLayout>) -> ResultSet {
    let columns = [
        "name",
        "type",
        "default_type",
        "default_expression",
        "comment",
        "codec_expression",
        "ttl_expression",
    ]
    .map(|name| (name.to_string(), CellType::String))
    .to_vec();
    let rows = layout
        .map(|layout| layout.columns.as_slice())
        .unwrap_or_default()
        .iter()
        .map(|column| {
            let ty = announced(&column.ty, column.nullable, Known::ALL);
            let (default_type, default) = if column.nullable && !column.ty.is_nested() {
                ("DEFAULT", "NULL")
            } else {
                ("", "")
            };
            [column.name.as_str(), &ty, default_type, default, "", "", ""]
                .map(|s| Cell::Text(s.to_string()))
                .to_vec()
        })
        .collect();
    ResultSet { columns, rows }
}

#[cfg(test)]
mod tests {
    use sluice_core::{Column, ColumnType};

    use super::*;

    fn read(text: &str) -> ReadQuery {
        parse_read(text.as_bytes()).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn parses_what_clients_send_on_connect() {
        let both = read("SELECT version(), timezone()");
        assert_eq!(
            both.read,
            Read::Constants(vec![
                ("version()".into(), Constant::Version),
                ("timezone()".into(), Constant::Timezone)
            ])
        );
        assert_eq!(both.format, None);
        let check = read("SELECT 1 AS check\n FORMAT Native");
        assert_eq!(
            check.read,
            Read::Constants(vec![("check".into(), Constant::Number(1))])
        );
        assert_eq!(check.format.as_deref(), Some("Native"));
        assert_eq!(read("select currentDatabase();").format, None);
        assert_eq!(
            read("SELECT 'ping'").read,
            Read::Constants(vec![("'ping'".into(), Constant::Text("ping".into()))])
        );
        assert_eq!(
            read("SELECT count() FROM system.databases WHERE name = 'analytics' FORMAT JSON").read,
            Read::CountDatabases
        );
        assert_eq!(
            read("SELECT name, value, readonly FROM system.settings LIMIT 10000\n FORMAT Native")
                .read,
            Read::Settings(vec!["name".into(), "value".into(), "readonly".into()])
        );
        assert_eq!(
            read("EXISTS TABLE db.events").read,
            Read::Exists("events".into())
        );
        assert_eq!(read("exists `t`").read, Read::Exists("t".into()));
        assert_eq!(
            read("DESCRIBE TABLE `events` SETTINGS describe_compact_output = 0").read,
            Read::Describe("events".into())
        );
        assert_eq!(
            read("DESC events FORMAT TSV").read,
            Read::Describe("events".into())
        );
    }

    #[test]
    fn refuses_every_other_read_saying_what_it_answers() {
        for text in [
            "SELECT * FROM events",
            "SELECT id FROM events",
            "SELECT now()",
            "SELECT count() FROM events",
            "SELECT name FROM system.tables",
            "SHOW TABLES",
            "DROP TABLE t",
            "SELECT 1 FORMAT JSON garbage",
        ] {
            let error = parse_read(text.as_bytes()).unwrap_err().to_string();
            assert!(
                error.contains("sluice takes INSERT") || error.contains("unexpected"),
                "{text}: {error}"
            );
        }
    }

    #[test]
    fn describes_a_table_with_clickhouse_types() {
        let layout = TableLayout {
            columns: vec![
                Column::new("id", ColumnType::UInt64).required(),
                Column::new("at", ColumnType::Timestamp),
            ],
            partition_by: String::new(),
            sort_by: vec![],
        };
        let result = answer(&Read::Describe("t".into()), Some(&layout));
        assert_eq!(result.columns.len(), 7);
        let text = |row: usize, col: usize| match &result.rows[row][col] {
            Cell::Text(t) => t.clone(),
            Cell::Number(n) => n.to_string(),
        };
        assert_eq!(
            (text(0, 0), text(0, 1), text(0, 2)),
            ("id".into(), "UInt64".into(), String::new())
        );
        assert_eq!(text(1, 1), "Nullable(DateTime64(6, 'UTC'))");
        assert_eq!((text(1, 2), text(1, 3)), ("DEFAULT".into(), "NULL".into()));
        let exists = answer(&Read::Exists("t".into()), None);
        assert_eq!(exists.rows, vec![vec![Cell::Number(0)]]);
    }

    #[test]
    fn describes_decimals_uuids_and_json_as_clickhouse_types() {
        let layout = TableLayout {
            columns: vec![
                Column::new(
                    "price",
                    ColumnType::Decimal {
                        precision: 38,
                        scale: 10,
                    },
                )
                .required(),
                Column::new("id", ColumnType::Uuid).required(),
                Column::new("doc", ColumnType::Json),
            ],
            partition_by: String::new(),
            sort_by: vec![],
        };
        let result = answer(&Read::Describe("t".into()), Some(&layout));
        let types: Vec<&Cell> = result.rows.iter().map(|row| &row[1]).collect();
        // A `json` column's values are sent as text: every client can send a `String`.
        assert_eq!(
            types,
            [
                &Cell::Text("Decimal(38, 10)".into()),
                &Cell::Text("UUID".into()),
                &Cell::Text("Nullable(String)".into()),
            ]
        );
    }
}
