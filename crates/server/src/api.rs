//! The native API: `POST /v1/tables/{table}/rows`, `GET /v1/tables/{table}/inserts/{key}`,
//! `GET /v1/tables`, `GET /health`.

use axum::Json;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, RawQuery, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use sluice_core::{DecodeOptions, JsonDialect};
use sluice_pipeline::{AckMode, Admission, Held, Insert, KeyStatus, TableInfo};

use crate::AppState;
use crate::body::{check_rows, read_body};
use crate::error::{ApiError, Kind};

/// `POST /v1/tables/{table}/rows?ack=async|durable|committed[&insert_id=KEY]` with an NDJSON
/// body; the key may come as the `Idempotency-Key` header instead.
pub(crate) async fn insert_rows(
    State(state): State<AppState>,
    table: Result<Path<String>, PathRejection>,
    RawQuery(query): RawQuery,
    request: Request,
) -> Result<Response, ApiError> {
    // The request whole rather than a `HeaderMap`, which axum would clone for every insert.
    let (parts, body) = request.into_parts();
    let headers = &parts.headers;
    let Path(table) =
        table.map_err(|e| ApiError::new(Kind::BadTableName, format!("bad table name: {e}")))?;
    state.access.check(&table, headers, &[])?;
    let params = insert_params(query.as_deref())?;
    let key = insert_key(headers, params.key.as_deref())?;
    let body = read_body(headers, body, &state.limits).await?;
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::new(
            Kind::BadRows,
            "the body holds no rows: send one JSON object per line",
        ));
    }
    check_rows(&body, state.limits.max_rows_per_insert, JsonDialect::Ndjson)?;
    let inserted = state
        .door(crate::console::Door::Api)
        .insert_body(Insert {
            table: &table,
            body: &body,
            options: DecodeOptions::default(),
            ack: params.ack,
            admission: Admission::Refuse,
            max_partitions: None,
            max_rows: None,
            key: key.as_deref(),
        })
        .await?;
    let answer = InsertAnswer {
        ack: inserted.ack.as_str(),
        duplicate: inserted.duplicate,
        rows: inserted.rows,
        table: inserted.table.as_str(),
    };
    Ok(duplicate_header(inserted.duplicate, Json(answer)))
}

/// The answer to an insert. Typed rather than a `json!` value: every 1-row insert builds one,
/// and a map of values costs allocations the fixed shape does not need.
/// The fields are in the order the answer has always had them in.
#[derive(serde::Serialize)]
struct InsertAnswer<'a> {
    ack: &'a str,
    /// Only on the answer to a resend, as `true`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    duplicate: bool,
    rows: u64,
    table: &'a str,
}

/// `X-Sluice-Duplicate: 1` on the answer to a resend that an earlier insert with its key
/// answered.
pub(crate) fn duplicate_header(duplicate: bool, answer: impl IntoResponse) -> Response {
    let mut response = answer.into_response();
    if duplicate {
        response.headers_mut().insert(
            "X-Sluice-Duplicate",
            axum::http::HeaderValue::from_static("1"),
        );
    }
    response
}

/// What an insert's URL asks for.
struct InsertParams {
    ack: AckMode,
    /// `insert_id=`: the insert's key.
    key: Option<String>,
}

/// Reads `ack=` and `insert_id=` and refuses any other parameter, so a typo never changes a
/// promise silently.
fn insert_params(query: Option<&str>) -> Result<InsertParams, ApiError> {
    let mut params = InsertParams {
        ack: AckMode::default(),
        key: None,
    };
    // Decoded straight from the query text: it is already part of a valid request line.
    for (key, value) in form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
        match key.as_ref() {
            "ack" => {
                params.ack = value
                    .parse()
                    .map_err(|e: String| ApiError::new(Kind::BadRequest, e))?
            }
            "insert_id" => params.key = Some(value.into_owned()),
            other => {
                return Err(ApiError::new(
                    Kind::BadRequest,
                    format!(
                        "unknown query parameter '{}': the parameters are ack and insert_id",
                        other.escape_debug()
                    ),
                ));
            }
        }
    }
    Ok(params)
}

/// The insert's key: the `Idempotency-Key` header, or `insert_id=`; both must agree.
fn insert_key(headers: &HeaderMap, param: Option<&str>) -> Result<Option<String>, ApiError> {
    let header = headers
        .get("Idempotency-Key")
        .map(|v| {
            v.to_str().map(str::to_owned).map_err(|_| {
                ApiError::new(Kind::BadRequest, "the Idempotency-Key header is not text")
            })
        })
        .transpose()?;
    match (header, param) {
        (Some(header), Some(param)) if header != param => Err(ApiError::new(
            Kind::BadRequest,
            "the Idempotency-Key header and insert_id= name different keys",
        )),
        (Some(header), _) => Ok(Some(header)),
        (None, param) => Ok(param.map(str::to_owned)),
    }
}

/// `GET /v1/tables/{table}/inserts/{key}`: what became of the insert with that key.
pub(crate) async fn insert_status(
    State(state): State<AppState>,
    path: Result<Path<(String, String)>, PathRejection>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    let Path((table, key)) =
        path.map_err(|e| ApiError::new(Kind::BadRequest, format!("bad path: {e}")))?;
    state.access.check(&table, &headers, &[])?;
    let mut answer = json!({ "table": table, "key": key });
    let (status, rows, reason) = match state.pipeline.key_status(&table, &key) {
        KeyStatus::Unknown => ("unknown", None, None),
        KeyStatus::InFlight => ("in_flight", None, None),
        KeyStatus::Accepted { rows, held } => {
            let status = match held {
                Held::Buffered => "buffered",
                Held::Durable => "durable",
                Held::Committed { flush } => {
                    if let Some(flush) = flush {
                        answer["flush"] = Value::from(&*flush);
                    }
                    "committed"
                }
            };
            (status, Some(rows), None)
        }
        KeyStatus::Refused(reason) => ("refused", None, Some(reason)),
    };
    answer["status"] = Value::from(status);
    if let Some(rows) = rows {
        answer["rows"] = Value::from(rows);
    }
    if let Some(reason) = reason {
        answer["reason"] = Value::from(reason);
    }
    Ok(Json(answer))
}

/// `GET /v1/tables`: every table with its schema, buffer and what it has landed.
pub(crate) async fn list_tables(State(state): State<AppState>) -> Json<Value> {
    let (used, limit) = state.pipeline.memory();
    let tables: Vec<Value> = state.pipeline.tables().iter().map(table_json).collect();
    Json(json!({
        "tables": tables,
        "memory": { "used_bytes": used, "limit_bytes": limit },
    }))
}

fn table_json(t: &TableInfo) -> Value {
    let columns: Vec<Value> = t
        .layout
        .columns
        .iter()
        .map(|c| json!({ "name": c.name, "type": c.ty.name(), "nullable": c.nullable }))
        .collect();
    json!({
        "name": t.name,
        "sink": t.sink,
        "columns": columns,
        "partition_by": t.layout.partition_by,
        "sort_by": t.layout.sort_by,
        "buffered_rows": t.buffered_rows,
        "buffered_bytes": t.buffered_bytes,
        "rows_written": t.rows_written,
        "parts_written": t.parts_written,
        "bytes_written": t.bytes_written,
        "active_parts": active_parts_json(t),
        "failing": failing_json(t),
    })
}

/// Active parts per partition (`null` when the store does not count them).
fn active_parts_json(t: &TableInfo) -> Value {
    match &t.active_parts {
        None => Value::Null,
        Some(partitions) => partitions
            .iter()
            .map(crate::console::partition_json)
            .collect(),
    }
}

fn failing_json(t: &TableInfo) -> Value {
    match &t.failing {
        None => Value::Null,
        Some((since, error)) => {
            let since = since
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or_default();
            json!({ "since_unix": since, "error": error })
        }
    }
}

/// `GET /health`: `ok`, `degraded` (a store is failing, so rows are buffered and retried; or the
/// write-ahead log is poisoned, so `durable` and `committed` inserts are refused) or `stopping`. Answers 503 only when stopping, so a load balancer keeps sending while sluice
/// buffers through a store outage.
pub(crate) async fn health(State(state): State<AppState>) -> Response {
    let tables = state.pipeline.tables();
    let failing: Vec<Value> = tables
        .iter()
        .filter(|t| t.failing.is_some())
        .map(|t| json!({ "table": t.name, "failing": failing_json(t) }))
        .collect();
    let wal = state.pipeline.wal();
    let wal_poisoned = wal.as_ref().and_then(|w| w.poisoned.clone());
    let (status, code) = if state.is_stopping() {
        ("stopping", StatusCode::SERVICE_UNAVAILABLE)
    } else if failing.is_empty() && wal_poisoned.is_none() {
        ("ok", StatusCode::OK)
    } else {
        ("degraded", StatusCode::OK)
    };
    let (used, limit) = state.pipeline.memory();
    let wal = match wal {
        None => json!({ "enabled": false }),
        Some(w) => json!({
            "enabled": true,
            "outstanding_frames": w.outstanding,
            "poisoned": w.poisoned,
        }),
    };
    let body = json!({
        "status": status,
        "failing_tables": failing,
        "wal": wal,
        "memory": { "used_bytes": used, "limit_bytes": limit },
    });
    (code, Json(body)).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_params_are_percent_decoded_and_unknown_ones_refused() {
        let params = insert_params(Some("ack=committed&insert_id=order%2042%2Fa+b")).unwrap();
        assert_eq!(params.ack, AckMode::Committed);
        assert_eq!(params.key.as_deref(), Some("order 42/a b"));
        let defaults = insert_params(None).unwrap();
        assert_eq!((defaults.ack, defaults.key), (AckMode::default(), None));
        let Err(err) = insert_params(Some("ack=durable&akc=1")) else {
            panic!("an unknown parameter was taken");
        };
        assert!(
            err.message.contains("unknown query parameter 'akc'"),
            "{err:?}"
        );
        assert!(insert_params(Some("ack=eventually")).is_err());
    }
}
