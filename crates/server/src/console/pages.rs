//! The console's pages, scripts and style, embedded in the binary: the server serves them and
//! the browser fetches nothing from anywhere else, which the pages' Content-Security-Policy
//! also holds it to.
//!
//! They are plain HTML, CSS and JavaScript with charts drawn as inline SVG, written for this
//! console: no chart library, nothing to build, nothing copied in.

use axum::extract::Path;
use axum::http::StatusCode;
use axum::http::header::{CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE};
use axum::response::{IntoResponse, Response};

/// Only this origin, for scripts, styles, requests and frames; images also from `data:` URLs
/// (the favicon is one).
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
                      img-src 'self' data:; connect-src 'self'; base-uri 'none'; \
                      form-action 'self'; frame-ancestors 'none'";

const HTML: &str = "text/html; charset=utf-8";

/// The scripts and the style sheet, by the name the pages ask for them.
const ASSETS: [(&str, &str, &str); 4] = [
    (
        "console.css",
        "text/css; charset=utf-8",
        include_str!("assets/console.css"),
    ),
    (
        "console.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/console.js"),
    ),
    (
        "dashboard.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/dashboard.js"),
    ),
    (
        "estimate.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/estimate.js"),
    ),
];

const DASHBOARD: &str = include_str!("assets/dashboard.html");
const ESTIMATE: &str = include_str!("assets/estimate.html");

/// An embedded file, revalidated on every load so that a new sluice's page is never mixed with
/// an old one's script.
fn serve(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (CONTENT_TYPE, content_type),
            (CACHE_CONTROL, "no-cache"),
            (CONTENT_SECURITY_POLICY, POLICY),
            (
                axum::http::HeaderName::from_static("x-content-type-options"),
                "nosniff",
            ),
        ],
        body,
    )
        .into_response()
}

/// `GET /dashboard`.
pub(crate) async fn dashboard_page() -> Response {
    serve(HTML, DASHBOARD)
}

/// `GET /dashboard/estimate`.
pub(crate) async fn estimate_page() -> Response {
    serve(HTML, ESTIMATE)
}

/// `GET /dashboard/assets/{name}`.
pub(crate) async fn asset(Path(name): Path<String>) -> Response {
    match ASSETS.iter().find(|(n, _, _)| *n == name) {
        Some((_, content_type, body)) => serve(content_type, body),
        None => (StatusCode::NOT_FOUND, "no such file\n").into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_console_is_small_and_names_nothing_outside_the_server() {
        let files = ASSETS.iter().map(|(_, _, body)| *body);
        let all: Vec<&str> = files.chain([DASHBOARD, ESTIMATE]).collect();
        let bytes: usize = all.iter().map(|f| f.len()).sum();
        assert!(bytes < 300 * 1024, "{bytes} bytes");
        for file in &all {
            for outside in ["http://", "https://", "//cdn", "@import"] {
                // The SVG namespace is a name, not a fetch.
                let cleaned = file.replace("http://www.w3.org/2000/svg", "");
                assert!(!cleaned.contains(outside), "{outside} in an asset");
            }
        }
        for (page, script) in [(DASHBOARD, "dashboard.js"), (ESTIMATE, "estimate.js")] {
            assert!(page.contains(&format!("/dashboard/assets/{script}")));
            assert!(page.contains("/dashboard/assets/console.css"));
            let (_, _, body) = ASSETS.iter().find(|(n, _, _)| *n == script).unwrap();
            assert!(body.contains("from \"./console.js\""), "{script}");
        }
    }
}
