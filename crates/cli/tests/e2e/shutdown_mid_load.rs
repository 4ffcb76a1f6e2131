//! SIGTERM in the middle of a load: sluice stops taking inserts, lands everything it accepted,
//! and exits 0. Every acknowledged row is in the lake exactly once.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::common::{
    Server, assert_exactly_once, id_counts, load_config, load_table_flushing_every_5000_rows,
    part_rows, parts,
};
use sluice_lab::load::{Endpoint, Progress};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_mid_load_lands_every_acknowledged_row_once() {
    let mut server = Server::start(&load_table_flushing_every_5000_rows());
    let progress = Arc::new(Progress::default());
    let mut tasks = Vec::new();
    for (endpoint, id_offset) in [(Endpoint::Native, 0), (Endpoint::ClickHouse, 1_000_000)] {
        let config = load_config(&server, endpoint, 16, 500_000, id_offset, "async");
        let progress = progress.clone();
        tasks.push(tokio::spawn(sluice_lab::load::run(config, progress, true)));
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while progress.rows_acked.load(Ordering::Relaxed) < 12_000 {
        assert!(Instant::now() < deadline, "the load did not get going");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    server.sigterm();
    let status = server.wait(Duration::from_secs(30));
    assert!(status.success(), "{status:?}");
    progress.stop.store(true, Ordering::Relaxed);

    let mut acked = Vec::new();
    for task in tasks {
        let report = task.await.unwrap().unwrap();
        assert!(
            report.rows_acked < 500_000,
            "the load finished before the signal"
        );
        acked.extend(report.acked_ids.unwrap());
    }
    let acked_rows: u64 = acked.iter().map(|(a, b)| b - a).sum();
    assert!(acked_rows >= 12_000);

    let counts = id_counts(&server.data_dir, "load");
    assert_exactly_once(&counts, &acked);

    // Full parts of 5,000 rows, then the remainder flushed at shutdown. Inserts that arrive
    // together are handed over together, at most one per producer, so a full part can pass
    // 5,000 rows by fewer than the 32 producers.
    let landed = counts.len();
    let mut sizes: Vec<usize> = parts(&server.data_dir, "load")
        .iter()
        .map(|p| part_rows(p))
        .collect();
    sizes.sort_unstable();
    assert_eq!(sizes.iter().sum::<usize>(), landed);
    assert!(sizes[0] < 5032, "{sizes:?}");
    assert!(
        sizes[1..].iter().all(|n| (5000..5032).contains(n)),
        "{sizes:?}"
    );
}

/// A client that stops sending its body is answered 408 once `body_timeout` passes without a
/// byte; one that trickles its body (never idle that long), and one that sent half its
/// headers, hold the shutdown up for `ack_timeout` and a margin at most, not for good; what was
/// acknowledged lands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_clients_are_cut_off_and_hold_up_no_shutdown() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    let mut server = Server::start(
        "ack_timeout = \"2s\"\nbody_timeout = \"1s\"\n\n[flush]\nmax_age = \"200ms\"\n",
    );
    let (status, message) = sluice_lab::load::http_post(
        server.addr,
        "/v1/tables/t/rows?ack=committed",
        "{\"id\":1}\n",
    )
    .await
    .unwrap();
    assert_eq!(status, 200, "{message}");
    let head = |length: usize| {
        format!(
            "POST /v1/tables/t/rows HTTP/1.1\r\nHost: sluice\r\nContent-Length: {length}\r\n\r\n"
        )
    };

    // Stops mid-body: answered, and its connection closed.
    let mut stalled = TcpStream::connect(server.addr).await.unwrap();
    stalled
        .write_all(format!("{}{{\"id\":", head(100)).as_bytes())
        .await
        .unwrap();
    let mut answer = String::new();
    tokio::time::timeout(Duration::from_secs(30), stalled.read_to_string(&mut answer))
        .await
        .expect("no answer to a stalled body")
        .unwrap();
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("x-sluice-error: body_timeout"), "{answer}");
    assert!(answer.contains("nothing for 1s after 6 bytes"), "{answer}");

    // Trickles a byte every 300 ms: never idle for a second, never done.
    let mut trickling = TcpStream::connect(server.addr).await.unwrap();
    trickling.write_all(head(1_000).as_bytes()).await.unwrap();
    let trickle = tokio::spawn(async move {
        for _ in 0..1_000 {
            if trickling.write_all(b" ").await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    });
    // Sent half its headers.
    let mut half = TcpStream::connect(server.addr).await.unwrap();
    half.write_all(b"POST /v1/tables/t/rows HTTP/1.1\r\nHost:")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;

    server.sigterm();
    let status = server.wait(Duration::from_secs(60));
    assert!(status.success(), "{status:?}");
    trickle.abort();
    assert_eq!(
        id_counts(&server.data_dir, "t")
            .into_iter()
            .collect::<Vec<_>>(),
        [(1, 1)]
    );
}
