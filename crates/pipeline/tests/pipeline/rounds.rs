//! Small inserts that arrive together are taken in rounds: decoded together and, when they may,
//! handed over and logged together. Each still gets its own answer, its own error, and its rows
//! once, across a crash too.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use sluice_core::{
    Column, ColumnType, DecodeOptions, FlushPolicyConfig, Header, InputFormat, JsonDialect,
    TableDef, TableLayout, TableName,
};
use sluice_pipeline::{AckMode, Admission, Insert, InsertError, Inserted, Pipeline};
use sluice_wal::FsStorage;

use crate::common;

/// Inserts each round of the test sends at once.
const INSERTS: i64 = 300;

fn table(max_inserts: i64) -> TableDef {
    let layout = TableLayout {
        columns: vec![
            Column::new("id", ColumnType::Int64).required(),
            Column::new("name", ColumnType::String),
        ],
        partition_by: String::new(),
        sort_by: vec![],
    };
    let policy = FlushPolicyConfig {
        max_inserts: Some(max_inserts),
        max_age: Some(std::time::Duration::from_secs(20)),
        ..Default::default()
    }
    .validate()
    .unwrap();
    TableDef::new(TableName::new("t").unwrap(), layout, policy).unwrap()
}

async fn start(dir: &Path, def: TableDef) -> Pipeline {
    common::start_logged(dir, def, Arc::new(FsStorage)).await
}

/// Sends insert `i` of `body` into table `t` on a task of its own, refused (not waited for)
/// when the buffer is full.
fn spawn_insert(
    p: &Pipeline,
    i: i64,
    body: String,
    ack: AckMode,
    max_partitions: Option<usize>,
) -> tokio::task::JoinHandle<(i64, Result<Inserted, InsertError>)> {
    spawn_insert_read(p, i, (body, DecodeOptions::default()), ack, max_partitions)
}

/// [`spawn_insert`] of a body read with `options`.
fn spawn_insert_read(
    p: &Pipeline,
    i: i64,
    (body, options): (String, DecodeOptions),
    ack: AckMode,
    max_partitions: Option<usize>,
) -> tokio::task::JoinHandle<(i64, Result<Inserted, InsertError>)> {
    let p = p.clone();
    tokio::spawn(async move {
        let answer = p
            .insert_body(Insert {
                table: "t",
                body: body.as_bytes(),
                options,
                ack,
                admission: Admission::Refuse,
                max_partitions,
                max_rows: None,
                key: None,
            })
            .await;
        (i, answer)
    })
}

/// Insert `i`'s body: two good rows (ids `i` and `i + 10_000`), or for every tenth one a missing
/// comma on line 2, and for every tenth from 7 a string for the integer id.
fn body(i: i64) -> String {
    match i % 10 {
        3 => format!("{{\"id\": {i}, \"name\": \"a\"}}\n{{\"id\": 1 \"name\": \"b\"}}\n"),
        7 => format!("{{\"id\": \"{i}\"}}\n"),
        _ => format!(
            "{{\"id\": {i}, \"name\": \"n\"}}\n{{\"id\": {}}}",
            i + 10_000
        ),
    }
}

/// Every third insert asks for `async`, the others for `durable`.
fn ack(i: i64) -> AckMode {
    match i % 3 {
        0 => AckMode::Async,
        _ => AckMode::Durable,
    }
}

/// Sends [`INSERTS`] inserts at once, each on a task of its own, and checks each answer.
async fn send_at_once(p: &Pipeline) {
    let tasks: Vec<_> = (0..INSERTS)
        .map(|i| spawn_insert(p, i, body(i), ack(i), None))
        .collect();
    for task in tasks {
        let (i, answer) = task.await.unwrap();
        check_answer(i, answer);
    }
}

fn check_answer(i: i64, answer: Result<Inserted, InsertError>) {
    match i % 10 {
        3 => {
            let error = answer.unwrap_err().to_string();
            assert!(error.contains("line 2"), "insert {i}: {error}");
        }
        7 => assert!(
            matches!(answer, Err(InsertError::Decode(_))),
            "insert {i}: a string for an integer was taken: {answer:?}"
        ),
        _ => {
            let inserted = answer.unwrap();
            assert_eq!((inserted.rows, inserted.ack), (2, ack(i)), "insert {i}");
        }
    }
}

fn good(i: &i64) -> bool {
    !matches!(i % 10, 3 | 7)
}

/// Inserts sent at once on two threads each get their own rows and errors, count as the inserts
/// they are towards `max_inserts`, and land once.
#[test]
fn inserts_taken_in_together_keep_their_own_answers_and_count_as_inserts() {
    let dir = tempfile::tempdir().unwrap();
    let good_inserts = (0..INSERTS).filter(good).count() as u64;
    common::runtime().block_on(async {
        // A flush at every `good_inserts` inserts: exactly one, if each counts once.
        let p = start(dir.path(), table(good_inserts as i64)).await;
        send_at_once(&p).await;
        common::wait_for("the flush at max_inserts", || {
            p.tables()[0].rows_written == 2 * good_inserts
        })
        .await;
        let table = &p.tables()[0];
        assert_eq!(table.counters.inserts, good_inserts);
        let flushes = table.counters.flushes;
        assert_eq!((flushes.inserts, flushes.total()), (1, 1), "{flushes:?}");
        assert_eq!(table.buffered_rows, 0);
        p.shutdown().await;
        assert_eq!(p.memory().0, 0, "an insert's reservation outlived it");
    });
    let expected = (0..INSERTS).filter(good).flat_map(|i| [i, i + 10_000]);
    assert_ids(&common::ids_on_disk(dir.path()), expected);
}

/// `durable` inserts taken in together share log frames, and a crash before they land loses
/// none of them and replays each row once.
#[test]
fn durable_inserts_taken_in_together_survive_a_crash_once() {
    let dir = tempfile::tempdir().unwrap();
    let crashed = common::crashing_runtime();
    let alive = crashed.block_on(async {
        let p = start(dir.path(), table(1_000_000)).await;
        send_at_once(&p).await;
        p
    });
    crashed.shutdown_background();
    drop(alive);
    assert!(common::ids_on_disk(dir.path()).is_empty());
    let durable: Vec<i64> = (0..INSERTS)
        .filter(good)
        .filter(|i| ack(*i) == AckMode::Durable)
        .collect();
    common::runtime().block_on(async {
        let p = start(dir.path(), table(1_000_000)).await;
        let replayed = p.replayed();
        assert_eq!(replayed.rows, 2 * durable.len() as u64);
        assert!(
            replayed.frames < durable.len() as u64,
            "{} frames for {} durable inserts sent at once: none were logged together",
            replayed.frames,
            durable.len()
        );
        p.shutdown().await;
    });
    let expected = durable.iter().flat_map(|i| [*i, i + 10_000]);
    assert_ids(&common::ids_on_disk(dir.path()), expected);
}

/// Insert `i` as a ClickHouse client sends it: two rows with ids `i` and `i + 10_000`, as
/// `JSONEachRow` framed and read in one of five ways, or as `TSVWithNames` or `CSV`, so that
/// rounds hold bodies of several sets of options and formats, and bodies inside `[` `]`, which
/// are not logged with others. The CSV body ends in a quoted field with a newline in it: its
/// rows are not those of the bodies around it read as one.
fn clickhouse_insert(i: i64) -> (String, DecodeOptions) {
    let options = DecodeOptions {
        dialect: JsonDialect::ClickHouse,
        ..DecodeOptions::default()
    };
    let j = i + 10_000;
    match i % 7 {
        5 => (
            format!("id\tname\n{i}\ta\n{j}\t\\N\n"),
            DecodeOptions {
                format: InputFormat::TabSeparated(Header::Names),
                ..options
            },
        ),
        6 => (
            format!("{i},a\n{j},\"b\n\""),
            DecodeOptions {
                format: InputFormat::Csv(Header::None),
                ..options
            },
        ),
        0 => (
            format!("{{\"id\":{i},\"name\":\"a\"}},{{\"id\":\"{j}\"}}"),
            options,
        ),
        1 => (format!("[{{\"id\":{i}}},\n{{\"id\":{j}}}]"), options),
        2 => (
            format!("{{\"id\":{i},\"x\":1}}\n{{\"id\":{j},\"x\":[2]}}\n"),
            DecodeOptions {
                skip_unknown_fields: true,
                ..options
            },
        ),
        3 => (
            format!("{{\"id\":{i}}}{{\"id\":{j}}}"),
            DecodeOptions {
                columns: Some(vec!["id".to_owned()]),
                ..options
            },
        ),
        _ => (
            format!("\n  {{\"id\":{i},\n\"name\":null}}\n{{\"id\":{j}}},"),
            options,
        ),
    }
}

/// ClickHouse's bodies sent at once, under several formats and sets of options, are taken in
/// rounds of their own options: `durable` ones share log frames, and a crash before they land
/// replays each row once, read as it was taken.
#[test]
fn clickhouse_inserts_taken_in_together_survive_a_crash_once() {
    let dir = tempfile::tempdir().unwrap();
    let crashed = common::crashing_runtime();
    let alive = crashed.block_on(async {
        let p = start(dir.path(), table(1_000_000)).await;
        let tasks: Vec<_> = (0..INSERTS)
            .map(|i| spawn_insert_read(&p, i, clickhouse_insert(i), AckMode::Durable, None))
            .collect();
        for task in tasks {
            let (i, answer) = task.await.unwrap();
            assert_eq!(answer.unwrap().rows, 2, "insert {i}");
        }
        p
    });
    crashed.shutdown_background();
    drop(alive);
    assert!(common::ids_on_disk(dir.path()).is_empty());
    common::runtime().block_on(async {
        let p = start(dir.path(), table(1_000_000)).await;
        let replayed = p.replayed();
        assert_eq!(replayed.rows, 2 * INSERTS as u64);
        // Logged alone, the bodies inside `[` `]` take 43 frames and the TSV and CSV ones 85.
        assert!(
            replayed.frames < INSERTS as u64 / 3,
            "{} frames for {INSERTS} durable inserts sent at once: too few were logged together",
            replayed.frames,
        );
        p.shutdown().await;
    });
    let expected = (0..INSERTS).flat_map(|i| [i, i + 10_000]);
    assert_ids(&common::ids_on_disk(dir.path()), expected);
}

/// Table `t` partitioned by `p`, flushing each partition at `max_inserts` inserts.
fn partitioned(max_inserts: i64) -> TableDef {
    let layout = TableLayout {
        columns: vec![
            Column::new("id", ColumnType::Int64).required(),
            Column::new("p", ColumnType::String).required(),
        ],
        partition_by: "p".into(),
        sort_by: vec![],
    };
    let mut def = table(max_inserts);
    def = TableDef::new(def.name().clone(), layout, *def.policy()).unwrap();
    def
}

/// Inserts sent at once into a partitioned table, each with a row in two of its three
/// partitions, are handed over together: each partition counts the inserts with rows in it
/// towards `max_inserts`, and an insert allowed fewer partitions than it spans is refused alone.
#[test]
fn inserts_taken_in_together_count_in_each_partition_they_reach() {
    const SPANNING: i64 = 150;
    let dir = tempfile::tempdir().unwrap();
    common::runtime().block_on(async {
        // Each partition gets rows from 100 inserts: a flush at max_inserts in each.
        let p = start(dir.path(), partitioned(100)).await;
        let tasks: Vec<_> = (0..=SPANNING)
            .map(|i| {
                let body = format!(
                    "{{\"id\": {i}, \"p\": \"p{}\"}}\n{{\"id\": {}, \"p\": \"p{}\"}}\n",
                    i % 3,
                    i + 10_000,
                    (i + 1) % 3
                );
                // The last insert allows one partition and spans two.
                let max_partitions = (i == SPANNING).then_some(1);
                spawn_insert(&p, i, body, AckMode::Durable, max_partitions)
            })
            .collect();
        for task in tasks {
            match task.await.unwrap() {
                (SPANNING, answer) => assert!(
                    matches!(answer, Err(InsertError::TooManyPartitions { .. })),
                    "{answer:?}"
                ),
                (i, answer) => assert_eq!(answer.unwrap().rows, 2, "insert {i}"),
            }
        }
        common::wait_for("a flush at max_inserts in each partition", || {
            p.tables()[0].rows_written == 2 * SPANNING as u64
        })
        .await;
        let table = &p.tables()[0];
        assert_eq!(table.counters.inserts, SPANNING as u64);
        let flushes = table.counters.flushes;
        assert_eq!((flushes.inserts, flushes.total()), (3, 3), "{flushes:?}");
        let frames = p.wal().unwrap().frames;
        assert!(
            frames < SPANNING as u64,
            "{frames} log frames for {SPANNING} inserts sent at once: none were handed over together"
        );
        p.shutdown().await;
        assert_eq!(p.memory().0, 0, "an insert's reservation outlived it");
    });
    let expected = (0..SPANNING).flat_map(|i| [i, i + 10_000]);
    assert_ids(&common::ids_on_disk(dir.path()), expected);
}

fn assert_ids(counts: &HashMap<i64, usize>, expected: impl Iterator<Item = i64>) {
    let expected: Vec<i64> = expected.collect();
    for id in &expected {
        assert_eq!(counts.get(id), Some(&1), "id {id}");
    }
    assert_eq!(counts.len(), expected.len(), "unexpected rows on disk");
}
