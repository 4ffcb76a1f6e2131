//! A proxy in front of an S3 server that loses the answers to Delta log commits: every PUT of
//! a log entry reaches the server and is kept there, and the client is told `500
//! InternalError`, as when a response is lost on the way back. The client's retry then finds
//! the entry taken. Everything else passes through unchanged.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// The S3 error a lost answer is replaced with.
const INTERNAL_ERROR: &str = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>InternalError\
                              </Code><Message>answer lost by the test's proxy</Message></Error>";

/// The proxy, serving until dropped.
pub struct LossyS3 {
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
    forward: Arc<Forward>,
    task: tokio::task::JoinHandle<()>,
}

struct Forward {
    upstream: String,
    client: reqwest::Client,
    lost: AtomicU64,
}

impl LossyS3 {
    /// Starts a proxy to the S3 server at `upstream` (`http://host:port`).
    pub async fn start(upstream: &str) -> LossyS3 {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let forward = Arc::new(Forward {
            upstream: upstream.trim_end_matches('/').to_owned(),
            client: reqwest::Client::new(),
            lost: AtomicU64::new(0),
        });
        let app = axum::Router::new()
            .fallback(pass)
            .with_state(forward.clone());
        let task = tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        LossyS3 {
            endpoint,
            forward,
            task,
        }
    }

    /// Log entries the server kept whose answers were lost so far.
    pub fn lost(&self) -> u64 {
        self.forward.lost.load(Ordering::Relaxed)
    }
}

impl Drop for LossyS3 {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Passes one request to the server and its answer back, unless it committed a log entry.
async fn pass(State(forward): State<Arc<Forward>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, usize::MAX).await.unwrap();
    let target = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    // The Host header is passed as the client signed it.
    let answer = forward
        .client
        .request(
            parts.method.clone(),
            format!("{}{target}", forward.upstream),
        )
        .headers(parts.headers.clone())
        .body(body)
        .send()
        .await
        .unwrap();
    let status = answer.status();
    let commits_log_entry = parts.method == Method::PUT
        && parts.uri.path().contains("/_delta_log/")
        && parts.uri.path().ends_with(".json");
    if commits_log_entry && status.is_success() {
        forward.lost.fetch_add(1, Ordering::Relaxed);
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            [(header::CONTENT_TYPE, "application/xml")],
            INTERNAL_ERROR,
        )
            .into_response();
    }
    let mut response = Response::builder().status(status);
    for (name, value) in answer.headers() {
        if name != header::TRANSFER_ENCODING && name != header::CONNECTION {
            response = response.header(name, value);
        }
    }
    let body = answer.bytes().await.unwrap();
    response.body(Body::from(body)).unwrap()
}
