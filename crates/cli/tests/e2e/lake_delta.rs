//! The lake as a Delta table shared by several writers: two sluice processes, each with its own
//! data directory and write-ahead log, append to one table at once, and neither loses nor
//! duplicates a row (each commit names its writer and flush; conflicting commits are retried).
//! A column added to the config is added to the table, even while another writer still runs
//! the old config; a table whose log disagrees with the configured layout in a way no commit
//! can change is refused at start.

use std::sync::Arc;
use std::time::Duration;

use crate::common::{self, Server, assert_exactly_once, delta_read, id_counts};
use sluice_lab::events::COLUMNS_TOML;
use sluice_lab::load::{Endpoint, Progress, http_post};

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

/// Inserts `ids` into table `t` of `server`, acknowledged once committed, each row with note
/// `n<id>` when `note`.
async fn insert_committed(server: &Server, ids: std::ops::Range<i64>, note: bool) {
    let body: String = ids
        .map(|id| match note {
            true => format!("{{\"id\":{id},\"note\":\"n{id}\"}}\n"),
            false => format!("{{\"id\":{id}}}\n"),
        })
        .collect();
    let (status, text) = http_post(server.addr, "/v1/tables/t/rows?ack=committed", body)
        .await
        .unwrap();
    assert_eq!(status, 200, "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_column_added_to_the_config_is_added_to_the_table_while_another_writer_runs() {
    let shared = tempfile::tempdir().unwrap();
    let root = shared.path();
    let config = |columns: &str| {
        format!(
            "[lake]\nroot = {root:?}\n[tables.t]\ncolumns = [{columns}]\n[tables.t.flush]\nmax_age = \"50ms\"\n"
        )
    };
    let id = r#"{ name = "id", type = "int64", nullable = false }"#;
    let mut old = Server::start(&config(id));
    insert_committed(&old, 0..100, false).await;

    // A second writer starts with the column added; one that may not be null is refused.
    let (started, stderr) = common::serve_with(&config(&format!(
        r#"{id}, {{ name = "note", type = "string", nullable = false }}"#
    )));
    assert!(
        !started,
        "started adding a column the table's rows have no value for"
    );
    assert!(
        stderr.contains("it has no column 'note'")
            && stderr.contains("declare the column nullable"),
        "{stderr}"
    );
    let mut new = Server::start(&config(&format!(
        r#"{id}, {{ name = "note", type = "string" }}"#
    )));
    insert_committed(&new, 100..200, true).await;
    // The first writer's log is a version behind the schema change, which conflicts with its
    // next commit: it reads the log again and lands.
    insert_committed(&old, 200..300, false).await;
    old.sigterm();
    new.sigterm();
    assert!(old.wait(Duration::from_secs(60)).success());
    assert!(new.wait(Duration::from_secs(60)).success());

    // The independent reader sees the column: null in the rows landed without it.
    let read = delta_read(&root.join("t"), "note");
    assert_eq!(read["rows"], 300, "{read}");
    let counts = read["counts"].as_object().unwrap();
    assert_eq!(counts["None"], 200, "{read}");
    assert_eq!(counts.len(), 101, "{read}");
    assert!(
        (100..200).all(|id| counts[&format!("n{id}")] == 1),
        "{read}"
    );
}
