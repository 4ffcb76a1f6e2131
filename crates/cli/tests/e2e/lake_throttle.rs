//! Throttling like MergeTree: as a partition's active parts pass `parts_to_delay_insert`,
//! inserts into it are delayed; past `parts_to_throw_insert` they are refused with 503, a
//! `Retry-After` and ClickHouse's "too many parts"; other partitions are untouched; and once a
//! compaction (here `sluice compact`, another process) brings the count down, inserts are taken
//! again. Small thresholds, one part per insert.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::{self, Server};

const CONFIG: &str = r#"
[tables.t]
columns = [{ name = "id", type = "int64" }, { name = "service", type = "string" }]
partition_by = "service"

[tables.t.flush]
max_rows = 1

[tables.t.throttle]
parts_to_delay_insert = 3
parts_to_throw_insert = 6
max_delay = "300ms"

[lake.compaction]
enabled = false
interval = "100ms"
"#;

async fn insert(server: &Server, id: u64, service: &str) -> reqwest::Response {
    reqwest::Client::new()
        .post(server.url("/v1/tables/t/rows"))
        .body(format!("{{\"id\":{id},\"service\":\"{service}\"}}\n"))
        .send()
        .await
        .unwrap()
}

async fn active_parts(server: &Server, partition: &str) -> u64 {
    let tables: serde_json::Value = reqwest::get(server.url("/v1/tables"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    tables["tables"][0]["active_parts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["partition"] == partition)
        .map_or(0, |p| p["parts"].as_u64().unwrap())
}

async fn metric(server: &Server, line_start: &str) -> f64 {
    let text = reqwest::get(server.url("/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find_map(|line| line.strip_prefix(line_start))
        .map_or(0.0, |v| v.trim().parse().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inserts_are_delayed_then_refused_and_taken_again_after_compaction() {
    let config_dir = tempfile::tempdir().unwrap();
    let config_path = config_dir.path().join("sluice.toml");
    std::fs::write(&config_path, CONFIG).unwrap();
    let mut server = Server::start(CONFIG);

    // Up to 3 parts: no delay. Parts 4 to 6 are written by delayed inserts (committed acks: each
    // insert is one part before the next is sent).
    for id in 0..3 {
        assert_eq!(insert(&server, id, "api").await.status(), 200);
    }
    assert_eq!(active_parts(&server, "api").await, 3);
    assert_eq!(
        metric(&server, "sluice_delayed_inserts_total{table=\"t\"}").await,
        0.0
    );
    for id in 3..6 {
        let sent = Instant::now();
        let response = insert(&server, id, "api").await;
        assert_eq!(response.status(), 200);
        if id > 3 {
            // A delayed insert waits at least its delay: (parts - 3) / 3 of 300 ms.
            let delay = Duration::from_millis(100 * (id - 3));
            assert!(sent.elapsed() >= delay, "insert {id} was not delayed");
        }
    }
    assert_eq!(active_parts(&server, "api").await, 6);
    assert_eq!(
        metric(&server, "sluice_delayed_inserts_total{table=\"t\"}").await,
        2.0
    );
    // The 7th part would be one too many... the partition holds 6: one more delayed insert.
    assert_eq!(insert(&server, 6, "api").await.status(), 200);
    assert_eq!(active_parts(&server, "api").await, 7);

    // Now over parts_to_throw_insert: refused, in ClickHouse's words, on both endpoints.
    let refused = insert(&server, 7, "api").await;
    assert_eq!(refused.status(), 503);
    assert_eq!(refused.headers()["x-sluice-error"], "too_many_parts");
    assert!(refused.headers().contains_key("retry-after"));
    let message = refused.text().await.unwrap();
    assert!(
        message.contains("Too many parts (7)") && message.contains("partition api"),
        "{message}"
    );
    let clickhouse = reqwest::Client::new()
        .post(server.url("/?query=INSERT%20INTO%20t%20FORMAT%20JSONEachRow"))
        .body("{\"id\":8,\"service\":\"api\"}\n")
        .send()
        .await
        .unwrap();
    assert_eq!(clickhouse.status(), 503);
    assert!(
        clickhouse
            .text()
            .await
            .unwrap()
            .starts_with("Code: 252. DB::Exception: Too many parts"),
    );
    // Another partition is not throttled.
    assert_eq!(insert(&server, 100, "web").await.status(), 200);
    assert!(
        metric(
            &server,
            "sluice_active_parts{table=\"t\",partition=\"api\"}"
        )
        .await
            >= 7.0,
        "the gauge reports the partition"
    );

    // `sluice parts` reads the same count from the log, and says compaction would pay.
    let output = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["parts", "--json", "--config"])
        .arg(&config_path)
        .arg("--data-dir")
        .arg(&server.data_dir)
        .output()
        .unwrap();
    assert!(output.status.success());
    let parts: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let api = parts
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["partition"] == "service=api")
        .unwrap();
    assert_eq!(
        (api["parts"].as_u64(), api["rows"].as_u64()),
        (Some(7), Some(7))
    );
    assert_eq!(api["mergeable"], 7, "{api}");
    assert!(api["footer_share"].as_f64().unwrap() > 0.0);

    // A compaction by another process brings the count down; the server rereads the log and
    // takes inserts again.
    let status = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["compact", "--eager", "--config"])
        .arg(&config_path)
        .arg("--data-dir")
        .arg(&server.data_dir)
        .status()
        .unwrap();
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(30);
    while active_parts(&server, "api").await > 1 {
        assert!(
            Instant::now() < deadline,
            "the server never saw the compaction"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(insert(&server, 9, "api").await.status(), 200);

    server.sigterm();
    assert!(server.wait(Duration::from_secs(30)).success());
    let counts = common::id_counts(&server.data_dir, "t");
    let mut ids: Vec<i64> = counts.keys().copied().collect();
    ids.sort_unstable();
    assert_eq!(
        ids,
        [0, 1, 2, 3, 4, 5, 6, 9, 100],
        "refused rows never land"
    );
    assert!(counts.values().all(|&n| n == 1));
}
