//! Who may write, against a real server: without credentials a write is 401 (in ClickHouse's
//! words on its endpoint), every accepted form of credential works, a table's own rule replaces
//! the global one, the token from `SLUICE_TOKEN` counts, and reading endpoints stay open.

use std::path::Path;
use std::time::Duration;

use reqwest::StatusCode;
use sluice_lab::process::ServerProcess;

use crate::common;

const CONFIG: &str = r#"
[wal]
enabled = false

[flush]
max_age = "50ms"

[auth]
tokens = ["global-token"]

[auth.users]
writer = "pw"

[tables.billing]
columns = [{ name = "id", type = "int64" }]

[tables.billing.auth]
tokens = ["billing-token"]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_need_credentials_and_each_form_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("sluice.toml");
    std::fs::write(&config, CONFIG).unwrap();
    let mut server = ServerProcess::spawn_with_env(
        Path::new(env!("CARGO_BIN_EXE_sluice")),
        &dir.path().join("data"),
        Some(&config),
        &[("SLUICE_TOKEN", "env-token")],
    )
    .unwrap();
    let base = format!("http://{}", server.addr);
    let client = reqwest::Client::new();
    let native = |table: &str| {
        client
            .post(format!("{base}/v1/tables/{table}/rows"))
            .body("{\"id\":1}")
    };
    let ch = |query: &str| {
        client
            .post(format!("{base}/?query={}", query.replace(' ', "%20")))
            .body("{\"id\":2}")
    };

    // Nothing presented.
    let response = native("events").send().await.unwrap();
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    assert!(
        response.headers()["www-authenticate"]
            .to_str()
            .unwrap()
            .contains("Bearer")
    );
    assert_eq!(response.headers()["x-sluice-error"], "unauthorized");
    assert!(response.text().await.unwrap().contains("needs credentials"));
    let response = ch("INSERT INTO events FORMAT JSONEachRow")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    assert!(response.text().await.unwrap().starts_with("Code: 516."));

    // Every accepted form.
    let ok = [
        native("events").bearer_auth("global-token"),
        native("events").bearer_auth("env-token"),
        native("events").basic_auth("writer", Some("pw")),
        ch("INSERT INTO events FORMAT JSONEachRow")
            .header("X-ClickHouse-User", "writer")
            .header("X-ClickHouse-Key", "pw"),
        ch("INSERT INTO events FORMAT JSONEachRow&user=writer&password=pw"),
        native("billing").bearer_auth("billing-token"),
    ];
    for (i, request) in ok.into_iter().enumerate() {
        let response = request.send().await.unwrap();
        assert_eq!(
            response.status(),
            StatusCode::OK,
            "form {i}: {:?}",
            response.text().await
        );
    }

    // Wrong secrets, and the global token on a table with its own rule.
    let refused = [
        native("events").bearer_auth("nope"),
        native("events").basic_auth("writer", Some("wrong")),
        ch("INSERT INTO events FORMAT JSONEachRow&user=writer&password=wrong"),
        native("billing").bearer_auth("global-token"),
    ];
    for (i, request) in refused.into_iter().enumerate() {
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED, "form {i}");
    }

    // Reading stays open.
    for path in ["/ping", "/health", "/metrics", "/v1/tables"] {
        let response = client.get(format!("{base}{path}")).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{path}");
    }
    let metrics = client
        .get(format!("{base}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    // Every reason's series is there from the start; this one has counted the refusals.
    let unauthorized = metrics
        .lines()
        .find_map(|line| {
            line.strip_prefix("sluice_rejected_inserts_total{reason=\"unauthorized\"} ")
        })
        .and_then(|value| value.parse::<f64>().ok());
    assert!(unauthorized.is_some_and(|n| n >= 1.0), "{metrics}");
    assert!(
        metrics.contains("sluice_rejected_inserts_total{reason=\"bad_rows\"} 0"),
        "{metrics}"
    );
    server.terminate().unwrap();
    assert!(server.wait(Duration::from_secs(30)).unwrap().success());
}

#[test]
fn a_rule_that_lets_nobody_in_is_a_config_error() {
    let (started, stderr) = common::serve_with("[auth]\ntokens = []\n");
    assert!(!started);
    assert!(stderr.contains("auth: no tokens and no users"), "{stderr}");
}
