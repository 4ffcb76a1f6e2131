//! The lake as a Delta table shared by several writers: two sluice processes, each with its own
//! data directory and write-ahead log, append to one table at once, and neither loses nor
//! duplicates a row (each commit names its writer and flush; conflicting commits are retried).
//! A table whose log disagrees with the configured layout is refused at start.

use std::sync::Arc;
use std::time::Duration;

use crate::common::{self, Server, assert_exactly_once, delta_read, id_counts};
use sluice_lab::events::COLUMNS_TOML;
use sluice_lab::load::{Endpoint, Progress};

/// Table `load` in a lake shared at `root`, flushing often so the two writers' commits race.
fn shared_config(root: &std::path::Path) -> String {
    format!(
        "[lake]\nroot = {root:?}\n[tables.load]\ncolumns = {COLUMNS_TOML}\n[tables.load.flush]\nmax_rows = 500\nmax_age = \"50ms\"\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_append_to_one_table_exactly_once() {
    let shared = tempfile::tempdir().unwrap();
    let config = shared_config(shared.path());
    let mut first = Server::start(&config);
    let mut second = Server::start(&config);

    let rows = 12_000;
    let a = common::load_config(&first, Endpoint::Native, 8, rows, 0, "durable");
    let b = common::load_config(&second, Endpoint::Native, 8, rows, 1_000_000, "durable");
    let (a, b) = tokio::join!(
        sluice_lab::load::run(a, Arc::new(Progress::default()), true),
        sluice_lab::load::run(b, Arc::new(Progress::default()), true),
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(a.rows_acked, rows, "{:?}", a.errors);
    assert_eq!(b.rows_acked, rows, "{:?}", b.errors);
    first.sigterm();
    second.sigterm();
    assert!(first.wait(Duration::from_secs(60)).success());
    assert!(second.wait(Duration::from_secs(60)).success());

    let mut acked = a.acked_ids.unwrap();
    acked.extend(b.acked_ids.unwrap());
    let counts = id_counts(shared.path(), "load");
    assert_eq!(counts.len() as u64, 2 * rows);
    assert_exactly_once(&counts, &acked);

    // The independent reader agrees, and the log holds many commits from both writers.
    let read = delta_read(&shared.path().join("load"), "id");
    assert_eq!(read["rows"], 2 * rows, "{}", read["version"]);
    let counts = read["counts"].as_object().unwrap();
    assert_eq!(counts.len() as u64, 2 * rows);
    assert!(counts.values().all(|n| n == 1), "a row was read twice");
    assert!(
        read["version"].as_u64().unwrap() >= 4,
        "too few commits to have raced: {}",
        read["version"]
    );
}

#[test]
fn a_table_whose_log_disagrees_with_the_layout_is_refused() {
    let shared = tempfile::tempdir().unwrap();
    let root = shared.path();
    let table = |id_type: &str| {
        format!(
            "[lake]\nroot = {root:?}\n[tables.t]\ncolumns = [{{ name = \"id\", type = \"{id_type}\" }}]\n"
        )
    };
    let mut first = Server::start(&table("int64"));
    first.sigterm();
    assert!(first.wait(Duration::from_secs(60)).success());
    let (started, stderr) = common::serve_with(&table("string"));
    assert!(!started, "started over a table of other columns");
    assert!(
        stderr.contains("does not match the table's layout")
            && stderr.contains("column 'id' is long there, string here"),
        "{stderr}"
    );
}
