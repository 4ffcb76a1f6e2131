//! The lake in an object store: a table under `s3://` on a real S3-compatible server (s3s-fs,
//! started by scripts/services/s3.sh). sluice lands acknowledged rows there, recovers from a
//! kill -9 without losing or duplicating any (the Delta log's application transactions, read
//! back over S3, say which flushes landed), compacts the table in place, and an independent
//! reader (the Python `deltalake` package, over S3) sees exactly the acknowledged rows. A store
//! that is down when sluice starts does not stop the start: the rows land once it answers. One
//! that hangs holds up no flush and no shutdown. Commits whose answers are lost land once.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::common::lossy_s3::LossyS3;
use crate::common::{self, assert_exactly_once, delta_read_at};
use sluice_lab::events::COLUMNS_TOML;
use sluice_lab::load::{Endpoint, Progress};
use sluice_lab::process::ServerProcess;
use sluice_lab::services::{Moto, S3};

fn config(s3: &S3) -> String {
    config_in(&s3.bucket, &common::storage_toml(&s3.storage_options()))
}

/// The config of a lake in `bucket`, reached with the `[lake.storage]` lines `storage`.
fn config_in(bucket: &str, storage: &str) -> String {
    format!(
        "[lake]\nroot = \"s3://{bucket}/lake\"\n[lake.storage]\n{storage}\
         [lake.compaction]\nenabled = false\n\
         [tables.load]\ncolumns = {COLUMNS_TOML}\npartition_by = \"service\"\n\
         [tables.load.flush]\nmax_rows = 500\nmax_age = \"100ms\"\n"
    )
}

/// A folder holding a data directory and the config of a lake in `s3`: (folder, data
/// directory, config).
fn setup(s3: &S3) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    let config_path = dir.path().join("sluice.toml");
    std::fs::write(&config_path, config(s3)).unwrap();
    (dir, data_dir, config_path)
}

/// How often each id appears, as the Python reader reads the table over S3.
fn read_ids(s3: &S3) -> (u64, HashMap<i64, usize>) {
    let location = format!("s3://{}/lake/load", s3.bucket);
    let read = delta_read_at(&location, &s3.storage_options(), &[], "id");
    (
        read["rows"].as_u64().unwrap(),
        common::read_id_counts(&read),
    )
}

/// `sluice <args> --config <config> --data-dir <data_dir> --json`, parsed.
fn sluice_json(args: &[&str], config: &Path, data_dir: &Path) -> serde_json::Value {
    let mut all: Vec<&std::ffi::OsStr> = args.iter().map(std::ffi::OsStr::new).collect();
    all.extend([
        "--json".as_ref(),
        "--config".as_ref(),
        config.as_os_str(),
        "--data-dir".as_ref(),
        data_dir.as_os_str(),
    ]);
    serde_json::from_str(&common::sluice(&all)).unwrap()
}

/// Parts over all partitions of a `sluice parts --json` answer.
fn total_parts(parts: &serde_json::Value) -> u64 {
    parts
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["parts"].as_u64().unwrap())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_in_s3_keeps_every_acknowledged_row_once_through_a_crash_and_compaction() {
    let s3 = S3::start("lake").unwrap();
    let (_dir, data_dir, config_path) = setup(&s3);
    let binary = Path::new(env!("CARGO_BIN_EXE_sluice"));

    // Durable acks (in the write-ahead log), then kill -9 before the last flushes land.
    let mut server = ServerProcess::spawn(binary, &data_dir, Some(&config_path)).unwrap();
    let rows = 6_000;
    let mut load = common::load_config_for(server.addr, Endpoint::Native, 8, rows, 0, "durable");
    load.rows_per_insert = 10;
    let report = sluice_lab::load::run(load, Arc::new(Progress::default()), true)
        .await
        .unwrap();
    assert_eq!(report.rows_acked, rows, "{:?}", report.errors);
    server.kill().unwrap();
    let (landed, _) = read_ids(&s3);
    eprintln!("{landed} of {rows} acknowledged rows in the table at the kill");

    // The restart replays the log (flushes the table already holds are skipped); a graceful
    // stop lands the rest.
    let mut server = ServerProcess::spawn(binary, &data_dir, Some(&config_path)).unwrap();
    server.terminate().unwrap();
    assert!(server.wait(Duration::from_secs(120)).unwrap().success());

    let acked = report.acked_ids.unwrap();
    let (read, counts) = read_ids(&s3);
    assert_eq!(read, rows);
    assert_exactly_once(&counts, &acked);

    // Compaction in place, in the object store: fewer parts, nothing left to merge, the same
    // rows.
    let before = sluice_json(&["parts"], &config_path, &data_dir);
    let parts_before = total_parts(&before);
    let partitions = before.as_array().unwrap().len() as u64;
    assert!(parts_before > partitions, "{before}");
    let compacted = sluice_json(&["compact", "--eager"], &config_path, &data_dir);
    assert!(
        compacted["load"]["merges"].as_u64().unwrap() >= 1,
        "{compacted}"
    );
    let after = sluice_json(&["parts"], &config_path, &data_dir);
    let parts_after = total_parts(&after);
    assert!(parts_after < parts_before, "{before}\n{after}");
    for partition in after.as_array().unwrap() {
        assert_eq!(partition["mergeable"], 0, "{after}");
        assert!(partition["footer_bytes"].as_u64().unwrap() > 0, "{after}");
    }
    let (read, counts) = read_ids(&s3);
    assert_eq!(read, rows);
    assert_exactly_once(&counts, &acked);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_store_down_at_start_does_not_stop_the_start_and_gets_its_rows_when_it_answers() {
    let s3 = S3::start("lake").unwrap();
    let (_dir, data_dir, config_path) = setup(&s3);
    let binary = Path::new(env!("CARGO_BIN_EXE_sluice"));
    // A first start with the store up gives the log its reservation; a later one goes on
    // without the store.
    common::start_and_stop(&config_path, &data_dir);
    s3.stop().unwrap();
    let mut server = ServerProcess::spawn(binary, &data_dir, Some(&config_path)).unwrap();

    // Taken and logged while the object store is down.
    common::insert_while_the_store_is_down(server.addr, "/v1/tables/load/rows?ack=durable").await;

    s3.restart().unwrap();
    server.terminate().unwrap();
    assert!(server.wait(Duration::from_secs(120)).unwrap().success());
    let (read, counts) = read_ids(&s3);
    assert_eq!(read, 100);
    assert_exactly_once(&counts, &[(0, 100)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_store_that_hangs_holds_up_no_flush_and_no_shutdown() {
    let s3 = S3::start("lake").unwrap();
    let (_dir, data_dir, config_path) = setup(&s3);
    let text = std::fs::read_to_string(&config_path)
        .unwrap()
        .replace("[lake.storage]\n", "[lake.storage]\ntimeout = \"2s\"\n");
    std::fs::write(&config_path, format!("shutdown_timeout = \"3s\"\n{text}")).unwrap();
    let binary = Path::new(env!("CARGO_BIN_EXE_sluice"));
    let log = data_dir.with_file_name("server.log");
    let mut server = ServerProcess::spawn_with(
        binary,
        &data_dir,
        Some(&config_path),
        &[],
        std::fs::File::create(&log).unwrap().into(),
    )
    .unwrap();
    common::insert_around_a_hang(server.addr, async { s3.freeze().unwrap() }).await;
    // Each request gives up after its timeout, retried a few times at most (object_store's
    // own default retries for three minutes): the flush fails and the table says so.
    common::wait_until_degraded(server.addr, "load").await;
    // Shutdown is not held up either: past shutdown_timeout the rows stay in the log.
    server.terminate().unwrap();
    let status = server.wait(Duration::from_secs(60)).unwrap();
    let log = std::fs::read_to_string(&log).unwrap();
    assert!(status.success(), "{status}: {log}");
    // The upload it gave up on is cut off with the process, not left to panic as the runtime
    // stops under it.
    assert!(!log.contains("panicked"), "{log}");

    // Once the store answers, the next start lands them, once each.
    s3.thaw().unwrap();
    common::start_and_stop(&config_path, &data_dir);
    let (read, counts) = read_ids(&s3);
    assert_eq!(read, 11);
    assert_exactly_once(&counts, &[(0, 11)]);
}

/// A commit whose answer is lost lands once. Behind [`LossyS3`], every log entry sluice PUTs
/// is kept by the server while sluice is told `500`; object_store tries the PUT again and is
/// refused, the entry being there. Every flush's rows are in the table once, and a merge's
/// swap keeps the file it made live: the reader, which reads every live file, sees each row
/// once after compaction too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commits_whose_answers_are_lost_land_once_and_merges_keep_their_files() {
    let moto = Moto::start("lake").unwrap();
    let lossy = LossyS3::start(&moto.endpoint).await;
    let through_proxy: Vec<(&str, String)> = moto
        .storage_options()
        .into_iter()
        .map(|(k, v)| match k {
            "aws_endpoint" => (k, lossy.endpoint.clone()),
            _ => (k, v),
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    let config_path = dir.path().join("sluice.toml");
    std::fs::write(
        &config_path,
        config_in(&moto.bucket, &common::storage_toml(&through_proxy)),
    )
    .unwrap();
    let binary = Path::new(env!("CARGO_BIN_EXE_sluice"));

    // Two rounds further apart than `max_age`: each partition gets two parts at least, for a
    // merge.
    let mut server = ServerProcess::spawn(binary, &data_dir, Some(&config_path)).unwrap();
    let rows = 1_500;
    let mut acked = Vec::new();
    for round in 0..2 {
        let mut load = common::load_config_for(
            server.addr,
            Endpoint::Native,
            8,
            rows,
            round * rows,
            "durable",
        );
        load.rows_per_insert = 10;
        let report = sluice_lab::load::run(load, Arc::new(Progress::default()), true)
            .await
            .unwrap();
        assert_eq!(report.rows_acked, rows, "{:?}", report.errors);
        acked.extend(report.acked_ids.unwrap());
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // Each flush that found its lost answer's commit counted it; the flushes are over.
    let page = sluice_lab::load::http_get(server.addr, "/metrics")
        .await
        .unwrap();
    let counted = common::sample(&page, "sluice_commit_answers_lost_total", &[]);
    let lost = lossy.lost() as f64;
    server.terminate().unwrap();
    assert!(server.wait(Duration::from_secs(120)).unwrap().success());
    let flushed = lossy.lost();
    assert!(flushed >= 4, "{flushed} answers lost to flush commits");
    assert!(
        counted >= 1.0 && counted <= lost,
        "{counted} lost answers counted, {lost} lost"
    );

    let (config, data) = (config_path.clone(), data_dir.clone());
    let compacted =
        tokio::task::spawn_blocking(move || sluice_json(&["compact", "--eager"], &config, &data))
            .await
            .unwrap();
    assert!(
        compacted["load"]["merges"].as_u64().unwrap() >= 1,
        "{compacted}"
    );
    assert!(lossy.lost() > flushed, "no merge's answer was lost");
    assert_eq!(
        compacted["load"]["answers_lost"].as_u64().unwrap(),
        lossy.lost() - flushed,
        "{compacted}"
    );

    let location = format!("s3://{}/lake/load", moto.bucket);
    let read = tokio::task::spawn_blocking(move || {
        delta_read_at(&location, &moto.storage_options(), &[], "id")
    })
    .await
    .unwrap();
    assert_eq!(read["rows"].as_u64().unwrap(), 2 * rows);
    assert_exactly_once(&common::read_id_counts(&read), &acked);
}
