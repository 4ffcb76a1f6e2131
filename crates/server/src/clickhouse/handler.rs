//! The ClickHouse endpoint's handler.

use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use sluice_core::name::printable;
use sluice_core::{DecodeOptions, JsonDialect};
use sluice_pipeline::{AckMode, Admission, Insert};

use super::query::{InsertQuery, QueryError, parse_insert};
use crate::AppState;
use crate::body::{check_rows, read_body};
use crate::error::{ApiError, Kind};

type Params = Query<Vec<(String, String)>>;

/// `GET /?query=...`: ClickHouse serves reads here; sluice only takes INSERTs over POST.
pub(crate) async fn query_get(Query(params): Params) -> Response {
    if params.iter().any(|(k, _)| k == "query") {
        let error = ApiError::new(
            Kind::BadRequest,
            "sluice takes INSERT ... FORMAT JSONEachRow over POST only; it serves no reads",
        );
        return clickhouse_error(error);
    }
    ok_text()
}

/// `POST /`: an INSERT, with the query in the URL or at the start of the body.
pub(crate) async fn insert(
    State(state): State<AppState>,
    Query(params): Params,
    headers: HeaderMap,
    body: Body,
) -> Response {
    match run_insert(&state, &params, &headers, body).await {
        Ok(rows) => {
            let mut response = StatusCode::OK.into_response();
            let summary = format!(
                "{{\"read_rows\":\"0\",\"read_bytes\":\"0\",\"written_rows\":\"{rows}\",\
                 \"written_bytes\":\"0\",\"total_rows_to_read\":\"0\",\"result_rows\":\"0\",\
                 \"result_bytes\":\"0\"}}"
            );
            if let Ok(value) = HeaderValue::from_str(&summary) {
                response.headers_mut().insert("X-ClickHouse-Summary", value);
            }
            response
        }
        Err(error) => clickhouse_error(error),
    }
}

async fn run_insert(
    state: &AppState,
    params: &[(String, String)],
    headers: &HeaderMap,
    body: Body,
) -> Result<u64, ApiError> {
    refuse_native_compression(params)?;
    let (query, rows) = read_query_and_rows(state, params, headers, body).await?;
    state.access.check(&query.table, headers, params)?;
    check_rows(
        &rows,
        state.limits.max_rows_per_insert,
        JsonDialect::ClickHouse,
    )?;
    let settings = insert_settings(&query, params)?;
    let inserted = state
        .pipeline
        .insert_ndjson(Insert {
            table: &query.table,
            body: &rows,
            options: settings.options,
            ack: settings.ack,
            admission: Admission::Refuse,
            max_partitions: settings.max_partitions,
        })
        .await?;
    Ok(inserted.rows)
}

/// The value of the URL parameter `name`; the last one wins when it is given more than once.
fn param<'a>(params: &'a [(String, String)], name: &str) -> Option<&'a str> {
    params
        .iter()
        .rev()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// Refuses `compress=1` and `decompress=1`: ClickHouse's native block compression.
fn refuse_native_compression(params: &[(String, String)]) -> Result<(), ApiError> {
    for native in ["compress", "decompress"] {
        if param(params, native).is_some_and(|v| v == "1") {
            return Err(ApiError::new(
                Kind::BadRequest,
                format!(
                    "{native}=1 (ClickHouse's native block compression) is not supported; \
                     send Content-Encoding: gzip or zstd instead"
                ),
            ));
        }
    }
    Ok(())
}

/// Reads the body and parses the query, from the URL or from the start of the body, and
/// returns it with the rows: any rows written inline after the query's format name come
/// first, then the body.
async fn read_query_and_rows(
    state: &AppState,
    params: &[(String, String)],
    headers: &HeaderMap,
    body: Body,
) -> Result<(InsertQuery, Bytes), ApiError> {
    // With the query in the URL, credentials are checked before the body is read.
    if let Some(text) = param(params, "query")
        && let Ok(query) = parse_insert(text.as_bytes())
    {
        state.access.check(&query.table, headers, params)?;
    }
    let body = read_body(headers, body, &state.limits).await?;
    let (query, rows) = match param(params, "query") {
        Some(text) => {
            let query = parse_insert(text.as_bytes()).map_err(query_error)?;
            let inline = text[query.data_offset..].trim();
            let rows = if inline.is_empty() {
                body
            } else {
                let mut joined = Vec::with_capacity(inline.len() + 1 + body.len());
                joined.extend_from_slice(inline.as_bytes());
                joined.push(b'\n');
                joined.extend_from_slice(&body);
                joined.into()
            };
            (query, rows)
        }
        None => {
            let query = parse_insert(&body).map_err(query_error)?;
            let rows = body.slice(query.data_offset..);
            (query, rows)
        }
    };
    Ok((query, rows))
}

/// What an insert's settings ask for.
struct InsertSettings {
    /// When the insert is acknowledged.
    ack: AckMode,
    /// How its rows are decoded.
    options: DecodeOptions,
    /// The insert's own limit on partitions, if it sets one.
    max_partitions: Option<usize>,
}

/// Reads the ack mode, the decode options and the partition limit from the query's SETTINGS
/// clause and the URL parameters.
fn insert_settings(
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
    })
}

fn query_error(error: QueryError) -> ApiError {
    let kind = match error {
        QueryError::Format(_) => Kind::UnknownFormat,
        QueryError::Syntax(_) | QueryError::NotInsert(_) => Kind::Syntax,
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
