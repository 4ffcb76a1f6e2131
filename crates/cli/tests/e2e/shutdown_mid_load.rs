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

    // Full parts of 5,000 rows, then the remainder flushed at shutdown.
    let landed = counts.len();
    let mut sizes: Vec<usize> = parts(&server.data_dir, "load")
        .iter()
        .map(|p| part_rows(p))
        .collect();
    sizes.sort_unstable();
    assert_eq!(sizes.len(), landed.div_ceil(5000), "{sizes:?}");
    assert!(sizes[1..].iter().all(|&n| n == 5000), "{sizes:?}");
}
