//! Every error the HTTP edge answers with, and the one table that maps each kind to an HTTP
//! status, a ClickHouse exception code and a metric label.

use std::sync::atomic::{AtomicU64, Ordering};

use axum::http::StatusCode;
use sluice_pipeline::InsertError;

/// What kind of failure, as the client should see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Rows that do not decode or do not fit the table.
    BadRows,
    /// A request parameter or header is wrong.
    BadRequest,
    /// The table name is not allowed.
    BadTableName,
    /// The table does not exist and auto-create is off.
    UnknownTable,
    /// The table does not exist and auto-creation is at `max_tables`: to a ClickHouse client,
    /// an unknown table.
    TooManyTables,
    /// The body is larger than the limit (compressed or not).
    TooLarge,
    /// The body stopped arriving for longer than `body_timeout`.
    BodyTimeout,
    /// The Content-Encoding is not one sluice reads.
    UnsupportedEncoding,
    /// The ClickHouse query is not an INSERT sluice understands.
    Syntax,
    /// The ClickHouse format is not one sluice reads.
    UnknownFormat,
    /// The buffer is full.
    Overloaded,
    /// A partition holds more parts than `parts_to_throw_insert`.
    TooManyParts,
    /// One insert spans more partitions than `max_partitions_per_insert`.
    TooManyPartitions,
    /// The write-ahead log could not take the insert.
    WalFailed,
    /// sluice is shutting down.
    ShuttingDown,
    /// Accepted but not committed in time.
    NotCommittedInTime,
    /// Accepted but never committed (the pipeline stopped).
    NotCommitted,
    /// The store refused the batch for good, or refused to create the table.
    StoreRefused,
    /// The store did not answer when a new table had to be made in it.
    StoreUnavailable,
    /// No credentials, or ones not allowed to write to the table.
    Unauthorized,
    /// An insert key reused, within its window, for other rows.
    KeyConflict,
    /// A bug or an unexpected failure inside sluice.
    Internal,
}

impl Kind {
    /// Every kind, for tests and tables that must cover them all.
    pub(crate) const ALL: [Kind; 22] = [
        Kind::BadRows,
        Kind::BadRequest,
        Kind::BadTableName,
        Kind::UnknownTable,
        Kind::TooManyTables,
        Kind::TooLarge,
        Kind::BodyTimeout,
        Kind::UnsupportedEncoding,
        Kind::Syntax,
        Kind::UnknownFormat,
        Kind::Overloaded,
        Kind::TooManyParts,
        Kind::TooManyPartitions,
        Kind::WalFailed,
        Kind::ShuttingDown,
        Kind::NotCommittedInTime,
        Kind::NotCommitted,
        Kind::StoreRefused,
        Kind::StoreUnavailable,
        Kind::Unauthorized,
        Kind::KeyConflict,
        Kind::Internal,
    ];
}

/// The mapping: status, ClickHouse exception code and name, metric reason label.
pub(crate) struct Spec {
    pub(crate) status: StatusCode,
    pub(crate) ch_code: u32,
    pub(crate) ch_name: &'static str,
    pub(crate) reason: &'static str,
}

impl Kind {
    pub(crate) fn spec(self) -> Spec {
        use StatusCode as S;
        let (status, ch_code, ch_name, reason) = match self {
            Kind::BadRows => (S::BAD_REQUEST, 117, "INCORRECT_DATA", "bad_rows"),
            Kind::BadRequest => (S::BAD_REQUEST, 36, "BAD_ARGUMENTS", "bad_request"),
            Kind::BadTableName => (S::BAD_REQUEST, 36, "BAD_ARGUMENTS", "bad_table_name"),
            Kind::UnknownTable => (S::NOT_FOUND, 60, "UNKNOWN_TABLE", "unknown_table"),
            Kind::TooManyTables => (S::NOT_FOUND, 60, "UNKNOWN_TABLE", "too_many_tables"),
            Kind::TooLarge => (S::PAYLOAD_TOO_LARGE, 307, "TOO_MANY_BYTES", "too_large"),
            Kind::BodyTimeout => (S::REQUEST_TIMEOUT, 209, "SOCKET_TIMEOUT", "body_timeout"),
            Kind::UnsupportedEncoding => (
                S::UNSUPPORTED_MEDIA_TYPE,
                36,
                "BAD_ARGUMENTS",
                "unsupported_encoding",
            ),
            Kind::WalFailed => (S::SERVICE_UNAVAILABLE, 1001, "STD_EXCEPTION", "wal_failed"),
            Kind::Syntax => (S::BAD_REQUEST, 62, "SYNTAX_ERROR", "unsupported_query"),
            Kind::UnknownFormat => (S::BAD_REQUEST, 73, "UNKNOWN_FORMAT", "unknown_format"),
            Kind::Overloaded => (
                S::SERVICE_UNAVAILABLE,
                241,
                "MEMORY_LIMIT_EXCEEDED",
                "overloaded",
            ),
            Kind::TooManyParts => (
                S::SERVICE_UNAVAILABLE,
                252,
                "TOO_MANY_PARTS",
                "too_many_parts",
            ),
            // Retrying the same insert cannot help: a client error, with ClickHouse's code.
            Kind::TooManyPartitions => {
                (S::BAD_REQUEST, 252, "TOO_MANY_PARTS", "too_many_partitions")
            }
            Kind::ShuttingDown => (
                S::SERVICE_UNAVAILABLE,
                394,
                "QUERY_WAS_CANCELLED",
                "shutting_down",
            ),
            Kind::NotCommittedInTime => (
                S::SERVICE_UNAVAILABLE,
                159,
                "TIMEOUT_EXCEEDED",
                "commit_timeout",
            ),
            Kind::NotCommitted => (
                S::SERVICE_UNAVAILABLE,
                394,
                "QUERY_WAS_CANCELLED",
                "not_committed",
            ),
            Kind::StoreRefused => (S::BAD_GATEWAY, 1002, "UNKNOWN_EXCEPTION", "store_refused"),
            Kind::StoreUnavailable => (
                S::SERVICE_UNAVAILABLE,
                210,
                "NETWORK_ERROR",
                "store_unavailable",
            ),
            Kind::Unauthorized => (
                S::UNAUTHORIZED,
                516,
                "AUTHENTICATION_FAILED",
                "unauthorized",
            ),
            // The client reused a key for other rows: ClickHouse has no code of its own for it.
            Kind::KeyConflict => (S::UNPROCESSABLE_ENTITY, 36, "BAD_ARGUMENTS", "key_conflict"),
            Kind::Internal => (S::INTERNAL_SERVER_ERROR, 1001, "STD_EXCEPTION", "internal"),
        };
        Spec {
            status,
            ch_code,
            ch_name,
            reason,
        }
    }

    /// Whether the client should retry later (answered with `Retry-After`).
    pub(crate) fn retry_after(self) -> Option<u32> {
        match self {
            Kind::Overloaded
            | Kind::ShuttingDown
            | Kind::NotCommittedInTime
            | Kind::NotCommitted => Some(1),
            // A full disk or a poisoned log (until a restart) does not clear within a second,
            // nor does a partition's backlog of merges.
            Kind::WalFailed | Kind::TooManyParts | Kind::StoreUnavailable => Some(5),
            _ => None,
        }
    }
}

/// An error answer: its kind and the message the client reads.
#[derive(Debug)]
pub(crate) struct ApiError {
    pub(crate) kind: Kind,
    pub(crate) message: String,
}

impl ApiError {
    pub(crate) fn new(kind: Kind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }
}

impl From<InsertError> for ApiError {
    fn from(error: InsertError) -> Self {
        let kind = match &error {
            InsertError::BadTableName(_) => Kind::BadTableName,
            InsertError::UnknownTable(_) => Kind::UnknownTable,
            InsertError::TooManyTables { .. } => Kind::TooManyTables,
            InsertError::Decode(_)
            | InsertError::SchemaMismatch { .. }
            | InsertError::TooManyColumns { .. } => Kind::BadRows,
            InsertError::DurableNeedsWal => Kind::BadRequest,
            InsertError::WalFailed(_) => Kind::WalFailed,
            InsertError::Overloaded { .. } => Kind::Overloaded,
            InsertError::TooManyParts { .. } => Kind::TooManyParts,
            InsertError::TooManyPartitions { .. } => Kind::TooManyPartitions,
            InsertError::TooManyRows { .. } => Kind::TooLarge,
            InsertError::ShuttingDown => Kind::ShuttingDown,
            InsertError::NotCommittedInTime(_) => Kind::NotCommittedInTime,
            InsertError::StoreRefused(_) | InsertError::TableRefused { .. } => Kind::StoreRefused,
            InsertError::StoreUnavailable { .. } => Kind::StoreUnavailable,
            InsertError::NotCommitted(_) => Kind::NotCommitted,
            InsertError::BadKey(_) => Kind::BadRequest,
            InsertError::KeyConflict { .. } => Kind::KeyConflict,
            InsertError::CreateFailed { .. } => Kind::Internal,
            _ => Kind::Internal,
        };
        Self::new(kind, error.to_string())
    }
}

/// Registers `sluice_rejected_inserts_total` for every reason at zero, so a dashboard or an alert
/// sees each series before the first refusal of its kind.
pub(crate) fn register_rejection_reasons() {
    for kind in Kind::ALL {
        let reason = kind.spec().reason;
        metrics::counter!(sluice_pipeline::names::REJECTED, "reason" => reason).increment(0);
    }
}

/// Refusals since start by kind, in [`Kind::ALL`]'s order, counted with the metric: what the
/// console reads. One set per process, as the metrics recorder is.
static REFUSALS: [AtomicU64; Kind::ALL.len()] = [const { AtomicU64::new(0) }; Kind::ALL.len()];

/// Counts a refusal in `sluice_rejected_inserts_total{reason}`, and gives the reason.
pub(crate) fn count_rejection(kind: Kind) -> &'static str {
    let reason = kind.spec().reason;
    metrics::counter!(sluice_pipeline::names::REJECTED, "reason" => reason).increment(1);
    if let Some(i) = Kind::ALL.iter().position(|k| *k == kind) {
        REFUSALS[i].fetch_add(1, Ordering::Relaxed);
    }
    reason
}

/// Refusals since start, by reason (the metric's label), every reason listed.
pub(crate) fn refusals() -> Vec<(&'static str, u64)> {
    (Kind::ALL.iter().zip(&REFUSALS))
        .map(|(kind, count)| (kind.spec().reason, count.load(Ordering::Relaxed)))
        .collect()
}

/// Counts a refused request in `sluice_rejected_inserts_total{reason}` and adds the headers every
/// error answer carries: `X-Sluice-Error` (the reason, so a client can tell "not accepted, safe to
/// resend" from "may have landed") and `Retry-After` where waiting helps.
pub(crate) fn finish_error(kind: Kind, headers: &mut axum::http::HeaderMap) {
    let reason = count_rejection(kind);
    headers.insert(
        "X-Sluice-Error",
        axum::http::HeaderValue::from_static(reason),
    );
    if let Some(seconds) = kind.retry_after() {
        headers.insert("Retry-After", axum::http::HeaderValue::from(seconds));
    }
    if kind == Kind::Unauthorized {
        headers.insert(
            axum::http::header::WWW_AUTHENTICATE,
            axum::http::HeaderValue::from_static("Bearer realm=\"sluice\", Basic realm=\"sluice\""),
        );
    }
}

impl axum::response::IntoResponse for ApiError {
    /// The JSON answer of the native API: `{"error": "..."}`.
    fn into_response(self) -> axum::response::Response {
        let status = self.kind.spec().status;
        let mut response = (
            status,
            axum::Json(serde_json::json!({ "error": self.message })),
        )
            .into_response();
        finish_error(self.kind, response.headers_mut());
        response
    }
}

#[cfg(test)]
mod tests {
    use axum::response::IntoResponse;

    use super::*;

    #[test]
    fn refusals_that_are_safe_to_resend_are_503_with_retry_after() {
        for (error, reason) in [
            (
                InsertError::WalFailed("No space left on device".into()),
                "wal_failed",
            ),
            (
                InsertError::Overloaded {
                    used: 2,
                    limit: 1,
                    table_share: false,
                },
                "overloaded",
            ),
            (
                InsertError::TooManyParts {
                    table: "t".into(),
                    partition: "api".into(),
                    parts: 31,
                    limit: 30,
                },
                "too_many_parts",
            ),
            (
                InsertError::StoreUnavailable {
                    table: "t".into(),
                    reason: "cannot connect".into(),
                },
                "store_unavailable",
            ),
        ] {
            let response = ApiError::from(error).into_response();
            assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
            let wait: u32 = response.headers()["retry-after"]
                .to_str()
                .unwrap()
                .parse()
                .unwrap();
            assert!(wait >= 1, "{reason}: {wait}");
            assert_eq!(response.headers()["x-sluice-error"], reason);
        }
    }

    /// A kind's place in [`Kind::ALL`]. The match has no wildcard, so a new kind does not
    /// compile until it has a place, and the test below fails until `ALL` holds it there.
    fn ordinal(kind: Kind) -> usize {
        match kind {
            Kind::BadRows => 0,
            Kind::BadRequest => 1,
            Kind::BadTableName => 2,
            Kind::UnknownTable => 3,
            Kind::TooManyTables => 4,
            Kind::TooLarge => 5,
            Kind::BodyTimeout => 6,
            Kind::UnsupportedEncoding => 7,
            Kind::Syntax => 8,
            Kind::UnknownFormat => 9,
            Kind::Overloaded => 10,
            Kind::TooManyParts => 11,
            Kind::TooManyPartitions => 12,
            Kind::WalFailed => 13,
            Kind::ShuttingDown => 14,
            Kind::NotCommittedInTime => 15,
            Kind::NotCommitted => 16,
            Kind::StoreRefused => 17,
            Kind::StoreUnavailable => 18,
            Kind::Unauthorized => 19,
            Kind::KeyConflict => 20,
            Kind::Internal => 21,
        }
    }

    #[test]
    fn all_holds_every_kind_once() {
        let places: Vec<usize> = Kind::ALL.iter().map(|k| ordinal(*k)).collect();
        assert_eq!(places, (0..Kind::ALL.len()).collect::<Vec<_>>());
    }

    #[test]
    fn every_kind_has_a_distinct_metric_reason_and_an_error_status() {
        let kinds = Kind::ALL;
        let mut reasons: Vec<&str> = kinds.iter().map(|k| k.spec().reason).collect();
        reasons.sort_unstable();
        reasons.dedup();
        assert_eq!(
            reasons.len(),
            kinds.len(),
            "two kinds share a metric reason"
        );
        for kind in kinds {
            let status = kind.spec().status;
            assert!(
                status.is_client_error() || status.is_server_error(),
                "{kind:?}"
            );
        }
    }
}
