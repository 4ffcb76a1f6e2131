//! Compaction under a reader: while producers append and two compactors (the server's own and
//! `sluice compact` runs beside it) swap small files for large ones, an independent reader (the
//! Python `deltalake` package) reading the table in a loop never sees a row twice or a row
//! vanish, and at the end sees exactly the rows acknowledged.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::{self, Server, assert_exactly_once, id_counts};
use sluice_lab::events::COLUMNS_TOML;
use sluice_lab::load::{Endpoint, Progress, http_get};

/// Reads the table at argv[1] until the file argv[2] exists; one JSON line per read.
const READER: &str = r#"
import json, os, sys, time
from deltalake import DeltaTable
path, stop = sys.argv[1], sys.argv[2]
while True:
    last = os.path.exists(stop)
    table = DeltaTable(path)
    ids = table.to_pyarrow_table(columns=["id"]).column("id").to_pylist()
    print(json.dumps({"version": table.version(), "rows": len(ids), "distinct": len(set(ids))}), flush=True)
    if last:
        break
    time.sleep(0.05)
# Skip interpreter teardown: deltalake's runtime can abort in it after the work is done.
os._exit(0)
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_sees_every_row_once_while_compactors_swap_files() {
    // Many small flushes (one Delta commit each, per partition), and room at shutdown for the
    // last of them on a loaded machine. Inputs above `lz4_below` are merged as they are read
    // (a streamed merge): with 1 KiB, every merge here is.
    let config = format!(
        "shutdown_timeout = \"120s\"\n\
         [tables.load]\ncolumns = {COLUMNS_TOML}\npartition_by = \"service\"\n\
         [tables.load.flush]\nmax_rows = 100\nmax_age = \"200ms\"\n\
         [lake]\nlz4_below = \"1KiB\"\n\
         [lake.compaction]\ninterval = \"200ms\"\n"
    );
    let mut server = Server::start(&config);
    let config_path = server.data_dir.with_file_name("compact.toml");
    std::fs::write(&config_path, &config).unwrap();
    let table = server.data_dir.join("load");

    // A first insert creates the table, so the reader has something to open.
    let first = common::load_config(&server, Endpoint::Native, 1, 10, 0, "committed");
    let first = sluice_lab::load::run(first, Arc::new(Progress::default()), true)
        .await
        .unwrap();
    let stop = server.data_dir.with_file_name("stop-reading");
    let mut reader = Command::new(common::python())
        .args(["-c", READER])
        .arg(&table)
        .arg(&stop)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();

    // Producers append while `sluice compact` races the server's own compactor.
    let mut load = common::load_config(&server, Endpoint::Native, 8, 30_000, 1_000, "durable");
    load.rows_per_insert = 10;
    let load = tokio::spawn(sluice_lab::load::run(
        load,
        Arc::new(Progress::default()),
        true,
    ));
    let mut foreground_passes = 0;
    while !load.is_finished() {
        let status = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .arg("compact")
            .arg("--config")
            .arg(&config_path)
            .arg("--data-dir")
            .arg(&server.data_dir)
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success());
        foreground_passes += 1;
    }
    let report = load.await.unwrap().unwrap();
    assert_eq!(report.rows_acked, 30_000, "{:?}", report.errors);

    // Let the background compactor settle: the file count stops falling.
    let settle = Instant::now() + Duration::from_secs(60);
    let mut files = usize::MAX;
    loop {
        tokio::time::sleep(Duration::from_millis(700)).await;
        let now = sluice_sinks::lake::live_files_blocking(&table)
            .unwrap()
            .len();
        if now >= files || Instant::now() > settle {
            files = now;
            break;
        }
        files = now;
    }
    let page = http_get(server.addr, "/metrics").await.unwrap();
    let rounds = common::compaction_rounds(&page);
    server.sigterm();
    assert!(server.wait(Duration::from_secs(60)).success());

    std::fs::write(&stop, "").unwrap();
    let reads: Vec<serde_json::Value> = BufReader::new(reader.stdout.take().unwrap())
        .lines()
        .map(|line| serde_json::from_str(&line.unwrap()).unwrap())
        .collect();
    assert!(reader.wait().unwrap().success());

    let total = 30_000 + first.rows_acked;
    let mut acked = first.acked_ids.unwrap();
    acked.extend(report.acked_ids.unwrap());
    assert_exactly_once(&id_counts(&server.data_dir, "load"), &acked);
    assert!(reads.len() >= 3, "only {} reads", reads.len());
    let mut previous = 0;
    for read in &reads {
        let rows = read["rows"].as_u64().unwrap();
        assert_eq!(read["distinct"], rows, "a row read twice: {read}");
        assert!(rows >= previous, "rows vanished: {previous} then {read}");
        previous = rows;
    }
    assert_eq!(previous, total, "the last read");

    // Compaction did its work: the ~300 flushes' files are down to a few per partition.
    let flushes = 30_000 / 100;
    assert!(files * 4 < flushes, "{files} files left");
    assert!(foreground_passes >= 1);
    println!(
        "{} reads, {foreground_passes} foreground passes, {rounds} background rounds that \
         merged, {files} files left",
        reads.len()
    );
}
