//! ClickHouse's HTTP interface: a query, or an insert with a (gzipped) body, and its errors.

use std::io::Write;
use std::time::Duration;

use flate2::Compression;
use flate2::write::GzEncoder;
use sluice_core::SinkError;

use super::SINK;
use super::config::ClickHouseConfig;

/// ClickHouse error codes that say nothing about the batch: the server is busy, short of memory,
/// has too many parts, lost a connection, or refuses the credentials (fix and restart; the rows
/// wait). Every other code (unknown column, cannot parse, type mismatch) is the batch's fault.
const RETRIABLE_CODES: &[u32] = &[
    3,   // UNEXPECTED_END_OF_FILE: the connection was cut
    159, // TIMEOUT_EXCEEDED
    164, // READONLY
    192, // UNKNOWN_USER
    193, // WRONG_PASSWORD
    194, // REQUIRED_PASSWORD
    195, // IP_ADDRESS_NOT_ALLOWED
    202, // TOO_MANY_SIMULTANEOUS_QUERIES
    203, // NO_FREE_CONNECTION
    209, // SOCKET_TIMEOUT
    210, // NETWORK_ERROR
    236, // ABORTED
    241, // MEMORY_LIMIT_EXCEEDED
    242, // TABLE_IS_READ_ONLY
    252, // TOO_MANY_PARTS
    319, // UNKNOWN_STATUS_OF_INSERT
    425, // SYSTEM_ERROR
    516, // AUTHENTICATION_FAILED
];

/// `UNKNOWN_TABLE`: the table was dropped behind sluice's back; it is created again.
pub(crate) const UNKNOWN_TABLE: u32 = 60;

/// `TOO_MANY_PARTS`.
pub(crate) const TOO_MANY_PARTS: u32 = 252;

/// A failed request.
#[derive(Debug)]
pub(crate) struct ChError {
    /// ClickHouse's exception code, when it answered with one.
    pub(crate) code: Option<u32>,
    /// What went wrong: the exception's words, or why no answer came.
    pub(crate) message: String,
    /// Whether trying again may help: no answer at all (refused, reset, timed out), a code from
    /// [`RETRIABLE_CODES`], or a server error without a code.
    retriable: bool,
}

impl ChError {
    /// No answer: refused, reset, or none within `timeout`.
    fn transport(error: reqwest::Error, timeout: Duration) -> Self {
        let message = if error.is_timeout() {
            format!("no answer within {timeout:?} (the server or the network to it is stuck)")
        } else {
            // reqwest's own words name only the URL; what happened is in its causes.
            let mut message = error.to_string();
            let mut cause = std::error::Error::source(&error);
            while let Some(e) = cause {
                message.push_str(": ");
                message.push_str(&e.to_string());
                cause = e.source();
            }
            message
        };
        Self {
            code: None,
            message,
            retriable: true,
        }
    }

    fn answered(status: reqwest::StatusCode, header: Option<u32>, body: &str) -> Self {
        let code = header.or_else(|| parse_code(body));
        let retriable = match code {
            Some(code) => RETRIABLE_CODES.contains(&code) || code == UNKNOWN_TABLE,
            // A proxy's or an overloaded server's answer without ClickHouse's words.
            None => status.is_server_error() || status == reqwest::StatusCode::TOO_MANY_REQUESTS,
        };
        Self {
            code,
            message: exception_text(body),
            retriable,
        }
    }

    /// The error as a sink error, with `context` in front.
    pub(crate) fn into_sink_error(self, context: &str) -> SinkError {
        let message = match self.code {
            Some(code) => format!("{context}: ClickHouse code {code}: {}", self.message),
            None => format!("{context}: {}", self.message),
        };
        if self.retriable {
            SinkError::retriable(SINK, message)
        } else {
            SinkError::permanent(SINK, message)
        }
    }
}

/// `Code: 252, e.displayText() = DB::Exception: ...` -> 252.
fn parse_code(body: &str) -> Option<u32> {
    let rest = body.trim_start().strip_prefix("Code: ")?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// The exception's words, without the `Code: N, e.displayText() = DB::Exception:` preamble and
/// the trailing `e.what()`.
fn exception_text(body: &str) -> String {
    let text = body.trim();
    let text = text
        .split_once("DB::Exception: ")
        .map_or(text, |(_, rest)| rest);
    let text = text.split(", e.what() =").next().unwrap_or(text);
    text.trim().chars().take(2_000).collect()
}

/// One ClickHouse server's HTTP interface.
#[derive(Debug, Clone)]
pub(crate) struct Client {
    http: reqwest::Client,
    url: String,
    user: Option<String>,
    password: Option<String>,
    gzip: bool,
    /// How long one request may take.
    timeout: Duration,
    /// The settings sent with every insert, as URL parameters.
    settings: Vec<(String, String)>,
}

impl Client {
    /// A client of the server at `url` with `config`'s credentials and settings.
    pub(crate) fn new(config: &ClickHouseConfig, url: &str) -> Result<Self, String> {
        let http = reqwest::Client::builder()
            .timeout(config.timeout())
            .pool_idle_timeout(std::time::Duration::from_secs(5))
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        Ok(Self {
            http,
            url: url.trim_end_matches('/').to_owned() + "/",
            user: config.user.clone(),
            password: config.password.clone(),
            gzip: config.gzip,
            timeout: config.timeout(),
            settings: config
                .settings
                .iter()
                .map(|(name, value)| (name.clone(), value.to_string()))
                .collect(),
        })
    }

    fn request(&self) -> reqwest::RequestBuilder {
        let request = self.http.post(&self.url);
        match &self.user {
            Some(user) => request.basic_auth(user, self.password.as_deref()),
            None => request,
        }
    }

    async fn send(&self, request: reqwest::RequestBuilder) -> Result<String, ChError> {
        let transport = |e| ChError::transport(e, self.timeout);
        let response = request.send().await.map_err(transport)?;
        let status = response.status();
        let header = response
            .headers()
            .get("X-ClickHouse-Exception-Code")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok());
        let body = response.text().await.map_err(transport)?;
        if status.is_success() {
            Ok(body)
        } else {
            Err(ChError::answered(status, header, &body))
        }
    }

    /// Runs `sql` (DDL, or a `SELECT` with its `FORMAT`) and returns the answer's text.
    pub(crate) async fn query(&self, sql: &str) -> Result<String, ChError> {
        self.send(self.request().body(sql.to_owned())).await
    }

    /// Runs `INSERT ... FORMAT ...` with `rows` as the data, gzipped by [`gzip`] when
    /// `gzipped`.
    pub(crate) async fn insert(
        &self,
        sql: &str,
        rows: Vec<u8>,
        gzipped: bool,
    ) -> Result<(), ChError> {
        let request = self
            .request()
            .query(&[("query", sql)])
            .query(&self.settings);
        let request = if gzipped {
            request.header("Content-Encoding", "gzip")
        } else {
            request
        };
        self.send(request.body(rows)).await.map(|_| ())
    }

    /// The server's URL, for messages.
    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    /// Whether large request bodies should be gzipped.
    pub(crate) fn gzip(&self) -> bool {
        self.gzip
    }
}

/// `data` gzipped, at the fast level: the network saves most of what a slower level would, and
/// the CPU goes to taking inserts.
pub(crate) fn gzip(data: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut encoder = GzEncoder::new(Vec::with_capacity(data.len() / 4), Compression::fast());
    encoder.write_all(data)?;
    encoder.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_words_come_out_of_the_answer() {
        let body = "Code: 252, e.displayText() = DB::Exception: Too many parts (10). Merges are \
                    processing significantly slower than inserts., e.what() = DB::Exception\n";
        let error = ChError::answered(reqwest::StatusCode::INTERNAL_SERVER_ERROR, None, body);
        assert_eq!(error.code, Some(TOO_MANY_PARTS));
        assert!(error.retriable);
        assert_eq!(
            error.message,
            "Too many parts (10). Merges are processing significantly slower than inserts."
        );
        let body = "Code: 117, e.displayText() = DB::Exception: Unknown field found while parsing \
                    JSONEachRow format: zz: (at row 1)\n, e.what() = DB::Exception";
        let error = ChError::answered(reqwest::StatusCode::INTERNAL_SERVER_ERROR, None, body);
        assert_eq!(error.code, Some(117));
        assert!(!error.retriable);
        assert!(
            error.message.starts_with("Unknown field found"),
            "{}",
            error.message
        );
    }

    #[test]
    fn answers_without_a_code_are_judged_by_status() {
        let busy = ChError::answered(reqwest::StatusCode::BAD_GATEWAY, None, "<html>");
        assert!(busy.retriable && busy.code.is_none());
        let odd = ChError::answered(reqwest::StatusCode::BAD_REQUEST, None, "nope");
        assert!(!odd.retriable);
        let header = ChError::answered(reqwest::StatusCode::BAD_REQUEST, Some(241), "");
        assert!(header.retriable);
    }

    #[test]
    fn gzip_round_trips() {
        use std::io::Read;
        let data = b"{\"a\":1}\n".repeat(1000);
        let packed = gzip(&data).unwrap();
        assert!(packed.len() < data.len() / 10);
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(packed.as_slice())
            .read_to_end(&mut out)
            .unwrap();
        assert_eq!(out, data);
    }
}
