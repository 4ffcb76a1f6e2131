//! The ClickHouse endpoint's handler.

use axum::body::Body;
use axum::extract::{RawQuery, State};
use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use sluice_core::name::printable;
use sluice_core::{DecodeOptions, InputFormat, JsonDialect};
use sluice_pipeline::{AckMode, Admission, Insert};

use super::compressed::{BlockError, decompress_blocks};
use super::handshake::{DATABASE, Read, answer, parse_read};
use super::output::OutputFormat;
use super::query::{InsertQuery, QueryError, first_keyword, parse_insert};
use crate::AppState;
use crate::body::{check_rows, read_body};
use crate::error::{ApiError, Kind};

/// The request's URL parameters, percent-decoded, in their order.
type Params = Vec<(String, String)>;

/// Reads the URL parameters from the query text. It is already part of a valid request line,
/// so it is decoded straight from it, which costs an insert less than a deserializer does.
fn url_params(query: Option<&str>) -> Params {
    form_urlencoded::parse(query.unwrap_or("").as_bytes())
        .into_owned()
        .collect()
}

/// The headers ClickHouse sets on its answers, made once.
const SUMMARY: HeaderName = HeaderName::from_static("x-clickhouse-summary");
const SERVER_DISPLAY_NAME: HeaderName = HeaderName::from_static("x-clickhouse-server-display-name");
const QUERY_ID: HeaderName = HeaderName::from_static("x-clickhouse-query-id");
const FORMAT: HeaderName = HeaderName::from_static("x-clickhouse-format");
const TIMEZONE: HeaderName = HeaderName::from_static("x-clickhouse-timezone");

/// The name sluice gives in `X-ClickHouse-Server-Display-Name`.
const DISPLAY_NAME: &str = "sluice";

/// `GET /`: `Ok.`, or with `?query=` one of the reads clients send when they connect.
/// ClickHouse runs only reads over GET, and so does sluice.
pub(crate) async fn query_get(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Response {
    let params = url_params(query.as_deref());
    let Some(text) = param(&params, "query") else {
        return ok_text();
    };
    let answer = if first_keyword(text.as_bytes()).as_deref() == Some("INSERT") {
        Err(ApiError::new(
            Kind::BadRequest,
            "an INSERT must be sent with POST; GET runs only reads, as in ClickHouse",
        ))
    } else {
        answer_read(&state, &params, &headers, text.as_bytes())
    };
    respond(answer, &params, &headers)
}

/// `POST /`: an INSERT, with the query in the URL or at the start of the body, or one of the
/// reads clients send when they connect.
pub(crate) async fn post(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let params = url_params(query.as_deref());
    let answer = match read_statement(&state, &params, &headers, body).await {
        Ok(Statement::Insert(query, rows)) => run_insert(&state, &params, &headers, &query, &rows)
            .await
            .map(|(rows_written, duplicate)| Answer::Inserted {
                rows: rows_written,
                bytes: rows.len() as u64,
                duplicate,
            }),
        Ok(Statement::Read(text)) => answer_read(&state, &params, &headers, &text),
        Err(error) => Err(error),
    };
    respond(answer, &params, &headers)
}

/// What a request did.
enum Answer {
    /// An insert: its rows, the bytes they came in, uncompressed, and whether an earlier
    /// insert with its key answered it.
    Inserted {
        rows: u64,
        bytes: u64,
        duplicate: bool,
    },
    /// A read: its result, written in its format.
    Read {
        body: Vec<u8>,
        format: OutputFormat,
        format_name: String,
        rows: usize,
    },
}

/// The answer as ClickHouse writes it, with the headers every ClickHouse answer carries.
fn respond(
    answer: Result<Answer, ApiError>,
    params: &[(String, String)],
    headers: &HeaderMap,
) -> Response {
    let (mut response, summary) = match answer {
        Ok(Answer::Inserted {
            rows,
            bytes,
            duplicate,
        }) => {
            let response = crate::api::duplicate_header(duplicate, StatusCode::OK);
            (response, summary(rows, bytes, 0))
        }
        Ok(Answer::Read {
            body,
            format,
            format_name,
            rows,
        }) => {
            let mut response = (StatusCode::OK, body).into_response();
            let headers = response.headers_mut();
            headers.insert(
                CONTENT_TYPE,
                HeaderValue::from_static(format.content_type()),
            );
            if let Ok(value) = HeaderValue::from_str(&format_name) {
                headers.insert(FORMAT, value);
            }
            headers.insert(TIMEZONE, HeaderValue::from_static("UTC"));
            (response, summary(0, 0, rows))
        }
        Err(error) => (clickhouse_error(error), None),
    };
    let out = response.headers_mut();
    if let Some(summary) = summary {
        out.insert(SUMMARY, summary);
    }
    out.insert(SERVER_DISPLAY_NAME, HeaderValue::from_static(DISPLAY_NAME));
    out.insert(QUERY_ID, query_id(params, headers));
    response
}

/// `X-ClickHouse-Summary`, its numbers written as strings, as ClickHouse does (clients parse
/// them that way).
fn summary(written_rows: u64, written_bytes: u64, result_rows: usize) -> Option<HeaderValue> {
    let text = format!(
        "{{\"read_rows\":\"0\",\"read_bytes\":\"0\",\"written_rows\":\"{written_rows}\",\
         \"written_bytes\":\"{written_bytes}\",\"total_rows_to_read\":\"0\",\
         \"result_rows\":\"{result_rows}\",\"result_bytes\":\"0\"}}"
    );
    HeaderValue::from_str(&text).ok()
}

/// The request's `query_id` (URL parameter, else `X-ClickHouse-Query-Id` header), or a new one.
fn query_id(params: &[(String, String)], headers: &HeaderMap) -> HeaderValue {
    param(params, "query_id")
        .filter(|id| !id.is_empty())
        .or_else(|| headers.get(QUERY_ID).and_then(|v| v.to_str().ok()))
        .and_then(|id| HeaderValue::from_str(id).ok())
        .unwrap_or_else(|| {
            let mut text = [0; uuid::fmt::Hyphenated::LENGTH];
            let id = uuid::Uuid::now_v7().hyphenated().encode_lower(&mut text);
            HeaderValue::from_str(id).unwrap_or(HeaderValue::from_static("sluice"))
        })
}

/// Answers one of the reads clients send when they connect, in the format it asks for.
fn answer_read(
    state: &AppState,
    params: &[(String, String)],
    headers: &HeaderMap,
    text: &[u8],
) -> Result<Answer, ApiError> {
    refuse_compressed_answer(params)?;
    let query = parse_read(text).map_err(query_error)?;
    let format_name = query
        .format
        .as_deref()
        .or_else(|| param(params, "default_format"))
        .or_else(|| headers.get(FORMAT).and_then(|v| v.to_str().ok()))
        .unwrap_or("TabSeparated")
        .to_string();
    let format = OutputFormat::parse(&format_name).ok_or_else(|| {
        ApiError::new(
            Kind::UnknownFormat,
            format!("Unknown output format {}", printable(&format_name)),
        )
    })?;
    let layout = match &query.read {
        Read::Exists(table) | Read::Describe(table) => {
            state.access.check(table, headers, params)?;
            state.pipeline.layout(table)
        }
        _ => None,
    };
    if let (Read::Describe(table), None) = (&query.read, &layout) {
        return Err(ApiError::new(
            Kind::UnknownTable,
            format!(
                "Table {DATABASE}.{} does not exist: sluice makes a table at its first insert, \
                 or from the config",
                printable(table)
            ),
        ));
    }
    let result = answer(&query.read, layout.as_ref());
    Ok(Answer::Read {
        body: format.write(&result),
        format,
        format_name,
        rows: result.rows.len(),
    })
}

/// Checks and lands an insert's rows: the number landed, and whether an earlier insert with
/// its key answered it.
async fn run_insert(
    state: &AppState,
    params: &[(String, String)],
    headers: &HeaderMap,
    query: &InsertQuery,
    rows: &Bytes,
) -> Result<(u64, bool), ApiError> {
    state.access.check(&query.table, headers, params)?;
    let settings = insert_settings(query, params)?;
    if settings.options.format == InputFormat::JsonEachRow {
        // Counted before decoding; other formats are counted as they decode.
        check_rows(
            rows,
            state.limits.max_rows_per_insert,
            JsonDialect::ClickHouse,
        )?;
    }
    let inserted = state
        .door(crate::console::Door::ClickHouseHttp)
        .insert_body(Insert {
            table: &query.table,
            body: rows,
            options: settings.options,
            ack: settings.ack,
            admission: Admission::Refuse,
            max_partitions: settings.max_partitions,
            max_rows: Some(state.limits.max_rows_per_insert),
            key: settings.key.as_deref(),
        })
        .await?;
    Ok((inserted.rows, inserted.duplicate))
}

/// The value of the URL parameter `name`; the last one wins when it is given more than once.
fn param<'a>(params: &'a [(String, String)], name: &str) -> Option<&'a str> {
    params
        .iter()
        .rev()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// The body with ClickHouse's compressed blocks undone, when the request says `decompress=1`
/// (after its `Content-Encoding`, as ClickHouse reads it). The blocks' checksums are verified,
/// and what they decompress to is held to the body limit.
fn decompressed(params: &[(String, String)], body: Bytes, limit: usize) -> Result<Bytes, ApiError> {
    if param(params, "decompress").is_none_or(|v| v != "1") {
        return Ok(body);
    }
    match decompress_blocks(&body, limit) {
        Ok(raw) => Ok(raw.into()),
        Err(error @ BlockError::TooLarge { .. }) => Err(ApiError::new(
            Kind::TooLarge,
            format!("decompress=1: {error}"),
        )),
        Err(error) => Err(ApiError::new(
            Kind::BadRequest,
            format!("decompress=1: {error}"),
        )),
    }
}

/// Refuses `compress=1` on a read: answers in ClickHouse's compressed blocks are not written.
/// An insert's answer has no body, so there it changes nothing.
fn refuse_compressed_answer(params: &[(String, String)]) -> Result<(), ApiError> {
    if param(params, "compress").is_some_and(|v| v == "1") {
        return Err(ApiError::new(
            Kind::BadRequest,
            "compress=1 (answers in ClickHouse's compressed blocks) is not supported on reads; \
             leave it out",
        ));
    }
    Ok(())
}

/// What a POST asks for.
enum Statement {
    /// An INSERT and its rows.
    Insert(InsertQuery, Bytes),
    /// Any other statement, whole: the URL's query followed by the body, as ClickHouse reads it.
    Read(Vec<u8>),
}

/// Reads the body and tells an INSERT from a read. An INSERT's query comes from the URL or from
/// the start of the body; any rows written inline after its format name come first, then the
/// body.
async fn read_statement(
    state: &AppState,
    params: &[(String, String)],
    headers: &HeaderMap,
    body: Body,
) -> Result<Statement, ApiError> {
    // An empty `query` is no query: the statement is then the body, as ClickHouse reads it.
    let in_url = param(params, "query").filter(|text| !text.trim().is_empty());
    let insert_in_url =
        in_url.is_some_and(|text| first_keyword(text.as_bytes()).as_deref() == Some("INSERT"));
    // With the insert in the URL, credentials are checked before the body is read.
    if insert_in_url
        && let Some(text) = in_url
        && let Ok(query) = parse_insert(text.as_bytes())
    {
        state.access.check(&query.table, headers, params)?;
    }
    let body = read_body(headers, body, &state.limits).await?;
    let body = decompressed(params, body, state.limits.max_body_bytes)?;
    match in_url {
        Some(text) if insert_in_url => {
            let query = parse_insert(text.as_bytes()).map_err(query_error)?;
            let inline = &text.as_bytes()[data_start(text.as_bytes(), query.data_offset)..];
            let rows = if inline.iter().all(u8::is_ascii_whitespace) {
                body
            } else {
                // ClickHouse reads the query's data and the body as one stream; JSON rows
                // also get a newline between them, which JSON ignores.
                let json = InputFormat::parse(&query.format) == Some(InputFormat::JsonEachRow);
                let mut joined = Vec::with_capacity(inline.len() + 1 + body.len());
                joined.extend_from_slice(inline);
                if json {
                    joined.push(b'\n');
                }
                joined.extend_from_slice(&body);
                joined.into()
            };
            Ok(Statement::Insert(query, rows))
        }
        Some(text) => {
            let mut whole = text.as_bytes().to_vec();
            whole.extend_from_slice(&body);
            Ok(Statement::Read(whole))
        }
        None if first_keyword(&body).as_deref() == Some("INSERT") => {
            let query = parse_insert(&body).map_err(query_error)?;
            let rows = body.slice(data_start(&body, query.data_offset)..);
            Ok(Statement::Insert(query, rows))
        }
        None => Ok(Statement::Read(body.to_vec())),
    }
}

/// Where an insert's data starts after its format name (at `offset`): past spaces and tabs,
/// then one `\r` and one `\n`, as ClickHouse reads it, so a binary body's first byte is data.
pub(super) fn data_start(text: &[u8], offset: usize) -> usize {
    let mut at = offset;
    while matches!(text.get(at), Some(b' ' | b'\t' | 0x0c)) {
        at += 1;
    }
    if text.get(at) == Some(&b'\r') {
        at += 1;
    }
    if text.get(at) == Some(&b'\n') {
        at += 1;
    }
    at.min(text.len())
}

/// What an insert's settings ask for.
pub(super) struct InsertSettings {
    /// When the insert is acknowledged.
    pub(super) ack: AckMode,
    /// How its rows are decoded.
    pub(super) options: DecodeOptions,
    /// The insert's own limit on partitions, if it sets one.
    pub(super) max_partitions: Option<usize>,
    /// `insert_deduplication_token`: the insert's key.
    pub(super) key: Option<String>,
}

/// Reads the ack mode, the decode options and the partition limit from the query's SETTINGS
/// clause and the URL parameters.
pub(super) fn insert_settings(
    query: &InsertQuery,
    params: &[(String, String)],
) -> Result<InsertSettings, ApiError> {
    // URL parameters are settings too; the query's SETTINGS clause overrides them.
    let setting = |name: &str| {
        query
            .settings
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .or_else(|| param(params, name))
    };
    let truthy = |v: &str| matches!(v, "1" | "true" | "True" | "TRUE");
    let ack = match setting("sluice_ack") {
        Some(mode) => mode
            .parse::<AckMode>()
            .map_err(|e| ApiError::new(Kind::BadRequest, format!("sluice_ack: {e}")))?,
        None if setting("wait_for_async_insert").is_some_and(|v| !truthy(v)) => AckMode::Async,
        None => AckMode::Committed,
    };
    let options = DecodeOptions {
        dialect: JsonDialect::ClickHouse,
        skip_unknown_fields: setting("input_format_skip_unknown_fields").is_some_and(truthy),
        columns: query.columns.clone(),
        // The parser took only a format sluice reads.
        format: InputFormat::parse(&query.format).unwrap_or_default(),
        csv_delimiter: csv_delimiter(setting("format_csv_delimiter"))?,
        // ClickHouse's default is 1; sluice refuses unless asked, since a column declared not
        // nullable says its rows must carry a value.
        null_as_default: setting("input_format_null_as_default").is_some_and(truthy),
    };
    // Lowers the server's max_partitions_per_insert for this insert; cannot raise it.
    let max_partitions = setting("max_partitions_per_insert_block")
        .map(|v| {
            v.trim().parse::<usize>().map_err(|_| {
                ApiError::new(
                    Kind::BadRequest,
                    format!(
                        "max_partitions_per_insert_block: '{}' is not a whole number",
                        printable(v)
                    ),
                )
            })
        })
        .transpose()?;
    Ok(InsertSettings {
        ack,
        options,
        max_partitions,
        key: setting("insert_deduplication_token")
            .filter(|token| !token.is_empty())
            .map(str::to_owned),
    })
}

/// ClickHouse's `format_csv_delimiter`: one character.
fn csv_delimiter(setting: Option<&str>) -> Result<Option<u8>, ApiError> {
    match setting.map(str::as_bytes) {
        None => Ok(None),
        Some([byte]) if byte.is_ascii() && *byte != b'"' && *byte != b'\n' => Ok(Some(*byte)),
        Some(_) => Err(ApiError::new(
            Kind::BadRequest,
            format!(
                "format_csv_delimiter: '{}' is not one ASCII character other than a quote or a \
                 newline",
                printable(setting.unwrap_or_default())
            ),
        )),
    }
}

pub(super) fn query_error(error: QueryError) -> ApiError {
    let kind = match error {
        QueryError::Format(_) => Kind::UnknownFormat,
        QueryError::Syntax(_) | QueryError::NotInsert(_) | QueryError::Unanswered(_) => {
            Kind::Syntax
        }
    };
    ApiError::new(kind, error.to_string())
}

/// `Ok.\n`, as ClickHouse answers `/` and `/ping`.
pub(crate) fn ok_text() -> Response {
    (StatusCode::OK, "Ok.\n").into_response()
}

fn clickhouse_error(error: ApiError) -> Response {
    let spec = error.kind.spec();
    let text = format!(
        "Code: {}. DB::Exception: {}. ({}) (version sluice {})\n",
        spec.ch_code,
        error.message,
        spec.ch_name,
        env!("CARGO_PKG_VERSION")
    );
    let mut response = (spec.status, text).into_response();
    let headers = response.headers_mut();
    headers.insert(
        "X-ClickHouse-Exception-Code",
        HeaderValue::from(spec.ch_code),
    );
    crate::error::finish_error(error.kind, headers);
    response
}
