//! The lake sink on real files: each flush one Delta commit that a replay recognises, compaction
//! swapping files with every row kept (sorted by the table's key), replaced files deleted after
//! the retention and orphans after the grace period, and part counts kept current; decimals,
//! UUIDs and JSON read back exactly by the Python `deltalake` package, through a merge sorted by
//! a decimal and a UUID.

use std::collections::HashMap;
use std::fs::File;
use std::time::{Duration, SystemTime};

use arrow::array::{Array, AsArray};
use arrow::datatypes::Int64Type;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use sluice_core::compaction::CompactionPolicy;
use sluice_core::{
    Column, ColumnType, DecodeOptions, FlushBatch, FlushId, FlushPolicy, PartitionKey,
    PartitionParts, Sink, TableDef, TableLayout, TableName, decode_ndjson,
};
use sluice_sinks::lake::{DEFAULT_LZ4_BELOW, LakeTable, ORPHAN_GRACE, live_files, part_sizes};
use sluice_sinks::{LakeConfig, LakeSink};

use crate::new_types;

fn table() -> TableDef {
    let layout = TableLayout {
        columns: vec![
            Column::new("id", ColumnType::Int64).required(),
            Column::new("service", ColumnType::String),
        ],
        partition_by: "service".into(),
        sort_by: vec!["id".into()],
    };
    TableDef::new(TableName::new("t").unwrap(), layout, FlushPolicy::default()).unwrap()
}

fn flush<'a>(table: &'a TableDef, seq: u64, ids: &[i64]) -> FlushBatch<'a> {
    let rows: String = ids
        .iter()
        .map(|id| format!("{{\"id\":{id},\"service\":\"api\"}}\n"))
        .collect();
    let mut flush = flush_rows(table, PartitionKey::Value("api".into()), seq, &rows);
    // Two batches, as a flush of several inserts arrives.
    let batch = flush.batches.remove(0);
    flush.batches = vec![batch.slice(0, 1), batch.slice(1, batch.num_rows() - 1)];
    flush
}

/// Flush `seq` of partition `partition` of `table`: the NDJSON `rows`, as one batch.
fn flush_rows<'a>(
    table: &'a TableDef,
    partition: PartitionKey,
    seq: u64,
    rows: &str,
) -> FlushBatch<'a> {
    let batch = decode_ndjson(table.schema(), rows.as_bytes(), &DecodeOptions::default()).unwrap();
    FlushBatch {
        table,
        id: FlushId {
            table: table.name().clone(),
            partition,
            first_seq: seq,
            last_seq: seq,
        },
        batches: vec![batch],
        keys: Default::default(),
    }
}

/// The name a flush of sequence number `seq` would give its file: what an orphan is called.
fn orphan_name(seq: u64) -> String {
    format!("part-{seq:020}-{seq:020}-{}.parquet", uuid::Uuid::now_v7())
}

/// A lake with `config` holding table `t`, after `flushes` flushes of `rows` ids each (flush
/// `seq` holds `seq * 10` onwards).
async fn landed(config: LakeConfig, flushes: u64, rows: i64) -> (LakeSink, TableDef) {
    let lake = LakeSink::new(config).unwrap();
    let t = table();
    lake.create_table(&t).await.unwrap();
    for seq in 1..=flushes {
        let base = seq as i64 * 10;
        let ids: Vec<i64> = (base..base + rows).collect();
        lake.write(flush(&t, seq, &ids)).await.unwrap();
    }
    (lake, t)
}

/// Every id in the table's live files, in file order, with how often it appears.
async fn ids(dir: &std::path::Path) -> (Vec<i64>, HashMap<i64, usize>) {
    let mut order = Vec::new();
    let mut counts = HashMap::new();
    for file in live_files(dir).await.unwrap() {
        for id in ids_in(&dir.join(&file.relative)) {
            order.push(id);
            *counts.entry(id).or_default() += 1;
        }
    }
    (order, counts)
}

/// The ids in one data file, in its order.
fn ids_in(path: &std::path::Path) -> Vec<i64> {
    let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(path).unwrap())
        .unwrap()
        .build()
        .unwrap();
    let mut ids = Vec::new();
    for batch in reader {
        let batch = batch.unwrap();
        ids.extend(batch.column(0).as_primitive::<Int64Type>().values());
    }
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flushes_commit_once_and_compaction_swaps_files_keeping_every_row() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = LakeConfig::new(dir.path());
    config.file_retention = Duration::ZERO;
    let lake = LakeSink::new(config).unwrap();
    let t = table();
    lake.create_table(&t).await.unwrap();
    let key = PartitionKey::Value("api".into());

    // Eight flushes, ids descending across flushes so a merged file must be re-sorted.
    for seq in 1..=8u64 {
        let base = (100 - seq * 10) as i64;
        let landed = lake
            .write(flush(&t, seq, &[base, base + 1, base + 2]))
            .await
            .unwrap();
        assert_eq!(landed.parts, 1);
    }
    assert_eq!(lake.partition_parts(t.name(), &key), Some(8));
    assert_eq!(
        lake.committed(&t).await.unwrap(),
        vec![(key.clone(), 8)],
        "the log holds the watermark"
    );
    // A flush the log already holds (a replay) lands nothing.
    let replay = lake.write(flush(&t, 8, &[20, 21, 22])).await.unwrap();
    assert_eq!(replay.parts, 0);
    let table_dir = dir.path().join("t");
    let before: Vec<_> = live_files(&table_dir).await.unwrap();
    assert_eq!(before.len(), 8);

    // An orphan (a flush's file whose commit never happened) is deleted only once old; another
    // writer's file that no commit references is never deleted, however old.
    let partition_dir = table_dir.join("service=api");
    let old_orphan = partition_dir.join(orphan_name(900));
    let new_orphan = partition_dir.join(orphan_name(901));
    let foreign = partition_dir.join(format!(
        "part-00000-{}-c000.zstd.parquet",
        uuid::Uuid::now_v7()
    ));
    for path in [&old_orphan, &new_orphan, &foreign] {
        std::fs::copy(table_dir.join(&before[0].relative), path).unwrap();
    }
    for path in [&old_orphan, &foreign] {
        File::options()
            .write(true)
            .open(path)
            .unwrap()
            .set_modified(SystemTime::now() - ORPHAN_GRACE - Duration::from_secs(60))
            .unwrap();
    }

    let report = lake
        .compact(&t, CompactionPolicy::default(), &|_, _| {})
        .await
        .unwrap();
    assert_eq!(
        (report.merges, report.files_in, report.files_out),
        (1, 8, 1)
    );
    assert_eq!(report.rows, 24);
    assert_eq!(lake.partition_parts(t.name(), &key), Some(1));
    let (order, counts) = ids(&table_dir).await;
    assert_eq!(counts.len(), 24);
    assert!(counts.values().all(|&n| n == 1), "{counts:?}");
    assert!(
        order.windows(2).all(|w| w[0] <= w[1]),
        "not sorted: {order:?}"
    );

    // Retention zero: the eight replaced files and the old orphan are gone, the new orphan
    // stays.
    assert_eq!(report.files_deleted, 9, "{report:?}");
    for file in &before {
        let path = table_dir.join(&file.relative);
        assert!(!path.exists(), "{} kept", path.display());
    }
    assert!(!old_orphan.exists());
    assert!(new_orphan.exists());
    assert!(foreign.exists(), "another writer's file was deleted");

    // The watermark survives compaction: a reopened sink still skips what landed.
    let reopened = LakeSink::new(LakeConfig::new(dir.path())).unwrap();
    assert_eq!(reopened.committed(&t).await.unwrap(), vec![(key, 8)]);
}

/// Flush `seq` of partition `service`: ids `first..first + rows`.
fn flush_in<'a>(table: &'a TableDef, service: &str, seq: u64, first: i64) -> FlushBatch<'a> {
    let rows: String = (first..first + 3)
        .map(|id| format!("{{\"id\":{id},\"service\":\"{service}\"}}\n"))
        .collect();
    flush_rows(table, PartitionKey::Value(service.into()), seq, &rows)
}

/// The part counts a fresh read of the log gives, per partition.
async fn parts_in_log(root: &std::path::Path, table: &TableDef) -> Vec<PartitionParts> {
    let fresh = LakeSink::new(LakeConfig::new(root)).unwrap();
    fresh.committed(table).await.unwrap();
    counted(&fresh, table)
}

fn counted(lake: &LakeSink, table: &TableDef) -> Vec<PartitionParts> {
    lake.active_parts(table.name()).unwrap()
}

/// A pass of several merges commits them one after another, each on the one before (the last
/// leaves the log's state behind, to be read again when next needed): the part counts the
/// throttle reads are the log's right after the pass, and a flush and another pass land on top
/// with every row once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pass_of_several_merges_keeps_the_counts_and_later_commits_land_on_top() {
    let dir = tempfile::tempdir().unwrap();
    let lake = LakeSink::new(LakeConfig::new(dir.path())).unwrap();
    let t = table();
    lake.create_table(&t).await.unwrap();
    let services = ["api", "db", "web"];
    let mut next_id = 0;
    for (n, service) in services.iter().enumerate() {
        // A partition each with 3, 4 and 5 parts: merges of different sizes.
        for seq in 1..=(3 + n as u64) {
            lake.write(flush_in(&t, service, seq, next_id))
                .await
                .unwrap();
            next_id += 3;
        }
    }
    let report = lake
        .compact(&t, CompactionPolicy::default().eager(), &|_, _| {})
        .await
        .unwrap();
    assert_eq!((report.merges, report.files_in), (3, 12), "{report:?}");
    let after_pass = counted(&lake, &t);
    assert_eq!(
        after_pass.iter().map(|p| p.parts).collect::<Vec<_>>(),
        vec![1, 1, 1],
        "{after_pass:?}"
    );
    assert_eq!(after_pass, parts_in_log(dir.path(), &t).await);

    // Flushes after the pass commit on the newest version, and a second pass merges them.
    for seq in 5..=6 {
        let landed = lake.write(flush_in(&t, "db", seq, next_id)).await.unwrap();
        assert_eq!(landed.parts, 1);
        next_id += 3;
    }
    let db = PartitionKey::Value("db".into());
    assert_eq!(lake.partition_parts(t.name(), &db), Some(3));
    let report = lake
        .compact(&t, CompactionPolicy::default().eager(), &|_, _| {})
        .await
        .unwrap();
    assert_eq!(report.merges, 1, "{report:?}");
    assert_eq!(
        lake.partition_parts(t.name(), &db),
        Some(3 + 1 - report.files_in)
    );
    assert_eq!(counted(&lake, &t), parts_in_log(dir.path(), &t).await);

    let (_, counts) = ids(&dir.path().join("t")).await;
    assert_eq!(counts.len(), next_id as usize);
    assert!(counts.values().all(|&n| n == 1), "{counts:?}");
    // The flush identities survive both passes: a replay of any flush lands nothing.
    let replay = lake.write(flush_in(&t, "web", 5, 0)).await.unwrap();
    assert_eq!(replay.parts, 0);
    let replay = lake.write(flush_in(&t, "db", 6, 0)).await.unwrap();
    assert_eq!(replay.parts, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compacting_an_unsorted_table_keeps_every_row_once_across_coalesced_batches() {
    // Merged as read and encoded (the inputs are smaller than the default `lz4_below`), and as
    // streamed (every merge is, with `lz4_below` at 0).
    for lz4_below in [DEFAULT_LZ4_BELOW, 0] {
        compact_unsorted(lz4_below).await;
    }
}

/// Table `name` of [`table`]'s layout, with its sort key or without, created in `lake`.
async fn created(lake: &LakeSink, name: &str, sorted: bool) -> TableDef {
    let mut layout = table().layout();
    if !sorted {
        layout.sort_by.clear();
    }
    let t = TableDef::new(
        TableName::new(name).unwrap(),
        layout,
        FlushPolicy::default(),
    )
    .unwrap();
    lake.create_table(&t).await.unwrap();
    t
}

/// Flushes `parts` parts into `t`: part `seq` (from 1) holds `rows` consecutive ids from
/// `seq * spacing`.
async fn write_parts(lake: &LakeSink, t: &TableDef, parts: u64, rows: i64, spacing: i64) {
    for seq in 1..=parts {
        let first = seq as i64 * spacing;
        let ids: Vec<i64> = (first..first + rows).collect();
        lake.write(flush(t, seq, &ids)).await.unwrap();
    }
}

async fn compact_unsorted(lz4_below: u64) {
    let dir = tempfile::tempdir().unwrap();
    let config = LakeConfig {
        lz4_below,
        ..LakeConfig::new(dir.path())
    };
    let lake = LakeSink::new(config).unwrap();
    let t = created(&lake, "u", false).await;

    // 30 parts of 5,000 rows: each reading thread packs more than one 64k-row batch, and the
    // runs end in partial batches.
    let (parts, rows_per_part) = (30u64, 5_000i64);
    write_parts(&lake, &t, parts, rows_per_part, 100_000).await;
    let report = lake
        .compact(&t, CompactionPolicy::default().eager(), &|_, _| {})
        .await
        .unwrap();
    assert_eq!(
        (report.files_in, report.files_out),
        (parts, 1),
        "{report:?}"
    );
    let total = parts * rows_per_part as u64;
    assert_eq!(report.rows, total);
    let (order, counts) = ids(&dir.path().join("u")).await;
    assert_eq!(counts.len() as u64, total);
    assert!(counts.values().all(|&n| n == 1), "a row was written twice");
    // Each input's rows stay together and in their order...
    let runs = order.windows(2).filter(|w| w[1] != w[0] + 1).count() + 1;
    assert_eq!(
        runs as u64, parts,
        "inputs were interleaved (lz4_below {lz4_below})"
    );
    // ...and the inputs come in the order they landed (part `seq` holds ids from `seq *
    // 100,000`), not in the order the policy picked them by size or the log lists them.
    let out_of_order = order.windows(2).filter(|w| w[1] < w[0]).count();
    assert_eq!(
        out_of_order, 0,
        "the merged file's parts are not in landing order (lz4_below {lz4_below})"
    );
}

/// A lake in `root` whose parts of up to 16 KiB count as small (LZ4, and sampled to estimate
/// a backlog's merged size), holding table `name` ([`created`]).
async fn small_parts_lake(
    root: &std::path::Path,
    name: &str,
    sorted: bool,
) -> (LakeConfig, LakeSink, TableDef) {
    let config = LakeConfig {
        lz4_below: 16 << 10,
        ..LakeConfig::new(root)
    };
    let lake = LakeSink::new(config.clone()).unwrap();
    let t = created(&lake, name, sorted).await;
    (config, lake, t)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backlog_of_small_parts_is_packed_by_the_size_of_the_merged_file() {
    // 100 LZ4 parts of 50 rows, each mostly footer, three times the target in all: packed by
    // their own bytes they make several merges, each file a fraction of the target; merged,
    // they shrink to a fraction of their bytes. An unsorted table's merges are packed by the
    // merged size the sample estimates; a sorted table's (which hold their rows) stay packed
    // by their inputs' bytes.
    for sorted in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let (config, lake, t) = small_parts_lake(dir.path(), "b", sorted).await;
        let (parts, rows_per_part) = (100u64, 50i64);
        write_parts(&lake, &t, parts, rows_per_part, 1_000).await;
        let table_dir = dir.path().join("b");
        let before = live_files(&table_dir).await.unwrap();
        let bytes_in: u64 = before.iter().map(|f| f.bytes).sum();
        let policy = CompactionPolicy {
            target_bytes: bytes_in / 3,
            fanin: 4,
        };
        let by_bytes = policy.plan(&part_sizes(&before));
        assert!(by_bytes.len() >= 3, "{by_bytes:?}");
        // What `sluice parts` says a pass would do.
        let opened = LakeTable::open(&config, "b").await.unwrap().unwrap();
        let planned = opened.plan(&t, &policy, opened.live_files());

        let report = lake.compact(&t, policy, &|_, _| {}).await.unwrap();
        assert_eq!(report.merges, planned.len() as u64, "{planned:?}");
        let after = live_files(&table_dir).await.unwrap();
        if sorted {
            assert_eq!(report.merges, by_bytes.len() as u64, "{report:?}");
        } else {
            assert_eq!((report.merges, report.files_in), (1, parts), "{report:?}");
            assert_eq!(after.len(), 1);
            assert!(
                after[0].bytes <= policy.target_bytes,
                "{} bytes merged, over the {}-byte target",
                after[0].bytes,
                policy.target_bytes
            );
        }
        let (_, counts) = ids(&table_dir).await;
        assert_eq!(counts.len() as u64, parts * rows_per_part as u64);
        assert!(counts.values().all(|&n| n == 1), "a row was written twice");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backlog_is_merged_into_files_of_parts_that_landed_one_after_another() {
    // 60 parts of 30-70 rows (so their sizes differ, in no relation to when they landed) with
    // ids ascending, several targets' worth: whether the merges hold the rows (sorted) or
    // stream them, each merged file takes parts that landed one after another, so the files'
    // id ranges do not overlap.
    for sorted in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let (_, lake, t) = small_parts_lake(dir.path(), "l", sorted).await;
        for seq in 1..=60u64 {
            let rows = 30 + (seq as i64 * 37) % 41;
            let first = seq as i64 * 1_000;
            let ids: Vec<i64> = (first..first + rows).collect();
            lake.write(flush(&t, seq, &ids)).await.unwrap();
        }
        let table_dir = dir.path().join("l");
        let bytes_in: u64 = live_files(&table_dir)
            .await
            .unwrap()
            .iter()
            .map(|f| f.bytes)
            .sum();
        let policy = CompactionPolicy {
            target_bytes: bytes_in / 12,
            fanin: 4,
        };
        let report = lake.compact(&t, policy, &|_, _| {}).await.unwrap();
        assert!(report.merges >= 2, "sorted {sorted}: {report:?}");
        let mut ranges: Vec<(i64, i64)> = live_files(&table_dir)
            .await
            .unwrap()
            .iter()
            .map(|f| {
                let ids = ids_in(&table_dir.join(&f.relative));
                (*ids.iter().min().unwrap(), *ids.iter().max().unwrap())
            })
            .collect();
        ranges.sort_unstable();
        let overlapping = ranges.windows(2).filter(|w| w[1].0 <= w[0].1).count();
        assert_eq!(
            overlapping, 0,
            "sorted {sorted}: files' id ranges overlap: {ranges:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merged_files_keep_their_place_in_landing_order_for_the_next_merge() {
    // The first 12 parts hold three times the rows of the 36 after them, so a pass packs fewer
    // of the early ones to a merge: the late merges save more parts, go first and commit
    // first. A second pass merges the merged files, and must still write the early rows first,
    // as they landed, not in the order the first pass committed them.
    let dir = tempfile::tempdir().unwrap();
    let lake = LakeSink::new(LakeConfig::new(dir.path())).unwrap();
    let t = created(&lake, "o", false).await;
    for seq in 1..=48u64 {
        let rows = if seq <= 12 { 300 } else { 100 };
        let first = seq as i64 * 1_000;
        let ids: Vec<i64> = (first..first + rows).collect();
        lake.write(flush(&t, seq, &ids)).await.unwrap();
    }
    let table_dir = dir.path().join("o");
    let largest = live_files(&table_dir)
        .await
        .unwrap()
        .iter()
        .map(|f| f.bytes)
        .max()
        .unwrap();
    let first = CompactionPolicy {
        target_bytes: largest * 4,
        fanin: 4,
    };
    let report = lake.compact(&t, first, &|_, _| {}).await.unwrap();
    assert!(report.merges >= 3, "{report:?}");
    assert_eq!(report.files_in, 48, "{report:?}");
    let report = lake
        .compact(&t, CompactionPolicy::default(), &|_, _| {})
        .await
        .unwrap();
    assert!(
        report.files_in >= 3,
        "the merged files were not merged: {report:?}"
    );

    let mut total = 0;
    for file in live_files(&table_dir).await.unwrap() {
        let ids = ids_in(&table_dir.join(&file.relative));
        total += ids.len();
        let back = ids.windows(2).filter(|w| w[1] <= w[0]).count();
        assert_eq!(
            back,
            0,
            "{} holds its rows out of landing order: {:?}",
            file.relative,
            ids.chunk_by(|a, b| b > a)
                .map(|run| (run[0], run[run.len() - 1]))
                .collect::<Vec<_>>()
        );
    }
    assert_eq!(total, 12 * 300 + 36 * 100);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replaced_file_is_kept_for_the_retention_however_old_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = LakeConfig::new(dir.path());
    config.file_retention = ORPHAN_GRACE * 2;
    let (lake, t) = landed(config, 3, 2).await;
    let table_dir = dir.path().join("t");
    let before = live_files(&table_dir).await.unwrap();
    assert_eq!(before.len(), 3);
    // Written long before the orphan grace, replaced just now by the compaction below; and a
    // file no commit references, as old.
    let long_ago = SystemTime::now() - ORPHAN_GRACE * 3;
    let orphan = table_dir.join("service=api").join(orphan_name(900));
    std::fs::copy(table_dir.join(&before[0].relative), &orphan).unwrap();
    let aged = before
        .iter()
        .map(|f| table_dir.join(&f.relative))
        .chain([orphan.clone()]);
    for path in aged {
        File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(long_ago)
            .unwrap();
    }

    let report = lake
        .compact(&t, CompactionPolicy::default().eager(), &|_, _| {})
        .await
        .unwrap();
    assert_eq!((report.merges, report.files_in), (1, 3), "{report:?}");
    assert_eq!(report.files_deleted, 1, "only the orphan: {report:?}");
    assert!(!orphan.exists());
    for file in &before {
        assert!(
            table_dir.join(&file.relative).exists(),
            "{} deleted within the retention",
            file.relative
        );
    }
    let (_, counts) = ids(&table_dir).await;
    assert_eq!(counts.len(), 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_input_shorter_than_its_log_entry_fails_the_merge_and_keeps_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let (lake, t) = landed(LakeConfig::new(dir.path()), 3, 2).await;
    let table_dir = dir.path().join("t");
    let before = live_files(&table_dir).await.unwrap();
    let cut = table_dir.join(&before[1].relative);
    let len = std::fs::metadata(&cut).unwrap().len();
    File::options()
        .write(true)
        .open(&cut)
        .unwrap()
        .set_len(len - 1)
        .unwrap();

    let err = lake
        .compact(&t, CompactionPolicy::default().eager(), &|_, _| {})
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(&before[1].relative) && err.contains(&format!("shorter than the {len} bytes")),
        "{err}"
    );
    // Nothing was swapped: the log still holds the three files.
    assert_eq!(live_files(&table_dir).await.unwrap(), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checkpoints_carry_parsed_statistics_that_a_reopened_log_reads() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = LakeConfig::new(dir.path());
    config.checkpoint_interval = 2;
    let (_lake, _t) = landed(config, 4, 3).await;
    let log_dir = dir.path().join("t").join("_delta_log");
    let checkpoint = std::fs::read_dir(&log_dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.to_string_lossy().ends_with(".checkpoint.parquet"))
        .max()
        .expect("a checkpoint");
    let reader =
        ParquetRecordBatchReaderBuilder::try_new(File::open(&checkpoint).unwrap()).unwrap();
    let columns: Vec<String> = reader
        .parquet_schema()
        .columns()
        .iter()
        .map(|c| c.path().string())
        .collect();
    assert!(
        columns.iter().any(|c| c == "add.stats_parsed.numRecords"),
        "{columns:?}"
    );
    assert!(columns.iter().any(|c| c == "add.stats"), "{columns:?}");
    // A log opened afresh (from the checkpoint) counts every row.
    let live = live_files(&dir.path().join("t")).await.unwrap();
    assert_eq!(live.len(), 4);
    assert!(live.iter().all(|f| f.rows == Some(3)), "{live:?}");
}

/// Table `w` with `id` and, when `note`, a nullable `note`; sorted by `id` when `sorted`.
fn layout(note: bool, sorted: bool) -> TableDef {
    let mut columns = vec![Column::new("id", ColumnType::Int64).required()];
    if note {
        columns.push(Column::new("note", ColumnType::String));
    }
    let layout = TableLayout {
        columns,
        partition_by: String::new(),
        sort_by: if sorted { vec!["id".into()] } else { vec![] },
    };
    table_w(layout)
}

/// Table `w` with `layout`.
fn table_w(layout: TableLayout) -> TableDef {
    TableDef::new(TableName::new("w").unwrap(), layout, FlushPolicy::default()).unwrap()
}

/// Flush `seq` of `ids` into `table`, each row with note `n<id>` when the table has the column.
fn flush_of<'a>(table: &'a TableDef, seq: u64, ids: &[i64]) -> FlushBatch<'a> {
    let with_note = table.schema().column("note").is_some();
    let rows: String = ids
        .iter()
        .map(|id| match with_note {
            true => format!("{{\"id\":{id},\"note\":\"n{id}\"}}\n"),
            false => format!("{{\"id\":{id}}}\n"),
        })
        .collect();
    flush_rows(table, PartitionKey::Whole, seq, &rows)
}

/// Every row of table `w` in `dir` (its live files): id and note (`None` when null, or in a file
/// without the column). Fails on an id seen twice.
async fn notes(dir: &std::path::Path) -> HashMap<i64, Option<String>> {
    let mut notes = HashMap::new();
    for file in live_files(dir).await.unwrap() {
        let file = File::open(dir.join(&file.relative)).unwrap();
        let reader = ParquetRecordBatchReaderBuilder::try_new(file)
            .unwrap()
            .build()
            .unwrap();
        for batch in reader {
            let batch = batch.unwrap();
            let ids = batch
                .column_by_name("id")
                .unwrap()
                .as_primitive::<Int64Type>();
            let note = batch.column_by_name("note").map(|c| c.as_string::<i32>());
            for row in 0..batch.num_rows() {
                let id = ids.value(row);
                let value = note
                    .filter(|note| !note.is_null(row))
                    .map(|note| note.value(row).to_owned());
                assert!(notes.insert(id, value).is_none(), "id {id} twice");
            }
        }
    }
    notes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_keeps_the_columns_of_parts_written_under_an_earlier_layout() {
    // Sorted, unsorted, and with every merge streamed (`lz4_below` at 0): unsorted, which meets
    // the second layout partway and starts again in one, and sorted, which brings the rows
    // into one layout before it sorts and streams them.
    let default = DEFAULT_LZ4_BELOW;
    for (sorted, lz4_below) in [(false, default), (true, default), (false, 0), (true, 0)] {
        let dir = tempfile::tempdir().unwrap();
        let config = || LakeConfig {
            lz4_below,
            ..LakeConfig::new(dir.path())
        };
        // Parts written while the config had `note` (flushes 1 to 35) and after it was dropped
        // (36 to 70).
        let (before, after) = (layout(true, sorted), layout(false, sorted));
        let ids = |seq: u64| -> Vec<i64> { (seq as i64 * 10..seq as i64 * 10 + 3).collect() };
        let old = LakeSink::new(config()).unwrap();
        old.create_table(&before).await.unwrap();
        for seq in 1..=35 {
            old.write(flush_of(&before, seq, &ids(seq))).await.unwrap();
        }
        // The same lake opened again, as after a restart with the new config.
        let new = LakeSink::new(config()).unwrap();
        new.create_table(&after).await.unwrap();
        for seq in 36..=70 {
            new.write(flush_of(&after, seq, &ids(seq))).await.unwrap();
        }
        // One merge of all 70 (one tier of fan-in 64), read in runs of two files on two cores:
        // some runs meet both layouts.
        let policy = CompactionPolicy {
            fanin: 64,
            ..CompactionPolicy::default()
        };
        let report = new.compact(&after, policy, &|_, _| {}).await.unwrap();
        assert_eq!((report.files_in, report.files_out), (70, 1), "{report:?}");

        // Every row once; the first 35 flushes' notes kept, the others' null.
        let table_dir = dir.path().join("w");
        assert_eq!(live_files(&table_dir).await.unwrap().len(), 1);
        let notes = notes(&table_dir).await;
        assert_eq!(notes.len(), 210, "sorted: {sorted}, lz4_below {lz4_below}");
        for (id, note) in notes {
            let expected = (id / 10 <= 35).then(|| format!("n{id}"));
            assert_eq!(
                note, expected,
                "id {id}, sorted: {sorted}, lz4_below {lz4_below}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sorted_merge_streams_its_rows_in_sort_order_piece_by_piece() {
    // 40 parts of 5,000 rows whose ids interleave (part `p` holds p, p + 40, p + 80, ...): the
    // merged file's 200,000 rows in id order take rows from every part in every piece of 64k
    // rows the merge gathers and encodes, with `lz4_below` at 0 so it streams.
    let dir = tempfile::tempdir().unwrap();
    let config = LakeConfig {
        lz4_below: 0,
        ..LakeConfig::new(dir.path())
    };
    let lake = LakeSink::new(config).unwrap();
    let table = layout(true, true);
    lake.create_table(&table).await.unwrap();
    let (parts, rows) = (40i64, 5_000i64);
    for part in 0..parts {
        let ids: Vec<i64> = (0..rows).map(|row| row * parts + part).collect();
        lake.write(flush_of(&table, part as u64 + 1, &ids))
            .await
            .unwrap();
    }
    let report = lake
        .compact(&table, CompactionPolicy::default(), &|_, _| {})
        .await
        .unwrap();
    assert_eq!((report.files_in, report.files_out), (40, 1), "{report:?}");
    assert_eq!(report.rows, 200_000);

    let table_dir = dir.path().join("w");
    let live = live_files(&table_dir).await.unwrap();
    assert_eq!(live.len(), 1);
    assert_eq!(live[0].rows, Some(200_000), "the log's row count");
    let ids = ids_in(&table_dir.join(&live[0].relative));
    assert!(
        ids.iter().copied().eq(0..parts * rows),
        "not every id once in order: {} rows, {} out of order",
        ids.len(),
        ids.windows(2).filter(|w| w[1] <= w[0]).count()
    );
    // Each row's other column came along with its id.
    let notes = notes(&table_dir).await;
    assert_eq!(notes.len(), 200_000);
    assert!(
        notes
            .iter()
            .all(|(id, note)| note.as_deref() == Some(format!("n{id}").as_str())),
        "a note parted from its id"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backlog_merge_that_meets_another_layout_holds_no_more_than_the_target() {
    // 200 small parts of an unsorted table, the second written while the config had `note`:
    // the sample (every fourth part) misses it, so the backlog is packed by its merged size
    // into one merge of more than the target's bytes. Streaming it meets the second layout and
    // starts again holding all the rows, which takes only the target's worth of inputs.
    let dir = tempfile::tempdir().unwrap();
    let config = || LakeConfig {
        lz4_below: 16 << 10,
        ..LakeConfig::new(dir.path())
    };
    let (plain, with_note) = (layout(false, false), layout(true, false).declared());
    let ids = |seq: u64| -> Vec<i64> { (seq as i64 * 10..seq as i64 * 10 + 3).collect() };
    let first = LakeSink::new(config()).unwrap();
    first.create_table(&plain).await.unwrap();
    first.write(flush_of(&plain, 1, &ids(1))).await.unwrap();
    let noted = LakeSink::new(config()).unwrap();
    noted.create_table(&with_note).await.unwrap();
    noted.write(flush_of(&with_note, 2, &ids(2))).await.unwrap();
    let lake = LakeSink::new(config()).unwrap();
    lake.create_table(&plain).await.unwrap();
    for seq in 3..=200 {
        lake.write(flush_of(&plain, seq, &ids(seq))).await.unwrap();
    }
    let table_dir = dir.path().join("w");
    let bytes_in: u64 = live_files(&table_dir)
        .await
        .unwrap()
        .iter()
        .map(|f| f.bytes)
        .sum();
    let policy = CompactionPolicy {
        target_bytes: bytes_in / 3,
        fanin: 4,
    };
    let opened = LakeTable::open(&config(), "w").await.unwrap().unwrap();
    let planned = opened.plan(&plain, &policy, opened.live_files());
    assert_eq!(planned.len(), 1, "{planned:?}");
    assert!(planned[0].bytes > policy.target_bytes, "{planned:?}");

    let report = lake.compact(&plain, policy, &|_, _| {}).await.unwrap();
    assert_eq!((report.merges, report.files_out), (1, 1), "{report:?}");
    assert!(
        report.bytes_in <= policy.target_bytes && report.files_in < 200,
        "held more than the target: {report:?}"
    );
    // Every row once, the note of flush 2 kept wherever it is now.
    let after = live_files(&table_dir).await.unwrap();
    assert_eq!(after.len() as u64, 200 - report.files_in + 1);
    let notes = notes(&table_dir).await;
    assert_eq!(notes.len(), 600);
    for (id, note) in notes {
        let expected = (id / 10 == 2).then(|| format!("n{id}"));
        assert_eq!(note, expected, "id {id}");
    }
}

/// The columns of the Delta table in `dir` as its log describes them: name and nullable.
async fn delta_columns(dir: &std::path::Path) -> Vec<(String, bool)> {
    let url = url::Url::from_directory_path(dir).unwrap();
    let table = deltalake_core::open_table(url).await.unwrap();
    let schema = table.snapshot().unwrap().schema();
    schema
        .fields()
        .map(|f| (f.name().clone(), f.is_nullable()))
        .collect()
}

/// A lake sink on `root` writing as the writer whose identity is kept in `root/<writer>`.
fn writer(root: &std::path::Path, writer: &str) -> LakeSink {
    let config = LakeConfig {
        state_dir: root.join(writer),
        ..LakeConfig::new(root)
    };
    LakeSink::new(config).unwrap()
}

/// Why `lake` refuses to make or open `table`.
async fn refusal(lake: &LakeSink, table: &TableDef) -> String {
    lake.create_table(table).await.unwrap_err().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_column_added_to_the_layout_is_added_to_the_table_and_older_writers_land_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let table_dir = dir.path().join("w");
    let ids = |seq: u64| -> Vec<i64> { (seq as i64 * 10..seq as i64 * 10 + 3).collect() };
    let (before, after) = (layout(false, false), layout(true, false).declared());
    let old = writer(dir.path(), "old");
    old.create_table(&before).await.unwrap();
    for seq in 1..=3 {
        old.write(flush_of(&before, seq, &ids(seq))).await.unwrap();
    }
    let id_only = vec![("id".to_owned(), false)];
    assert_eq!(delta_columns(&table_dir).await, id_only);

    // Compacting with the new layout merges the files and leaves the schema as it is.
    let policy = CompactionPolicy {
        fanin: 2,
        ..CompactionPolicy::default()
    };
    let compactor = writer(dir.path(), "compactor");
    let report = compactor.compact(&after, policy, &|_, _| {}).await.unwrap();
    assert!(report.merges > 0, "{report:?}");
    assert_eq!(delta_columns(&table_dir).await, id_only);

    // A layout that is not declared (inferred, or only remembered) changes no table.
    let refused = refusal(&writer(dir.path(), "inferred"), &layout(true, false)).await;
    assert!(
        refused.contains("it would have to add 'note'")
            && refused.contains("only a layout declared in the config"),
        "{refused}"
    );
    assert_eq!(delta_columns(&table_dir).await, id_only);

    // A writer with the new layout adds the column, nullable, and lands rows with it.
    let new = writer(dir.path(), "new");
    new.create_table(&after).await.unwrap();
    let with_note = vec![("id".to_owned(), false), ("note".to_owned(), true)];
    assert_eq!(delta_columns(&table_dir).await, with_note);
    for seq in 4..=6 {
        new.write(flush_of(&after, seq, &ids(seq))).await.unwrap();
    }
    // The old writer's log is behind the schema change, which conflicts with every commit
    // planned before it: it reads the log again and lands, at the first try.
    old.write(flush_of(&before, 7, &ids(7))).await.unwrap();

    let notes = notes(&table_dir).await;
    assert_eq!(notes.len(), 21);
    for (id, note) in notes {
        let expected = (4..=6).contains(&(id / 10)).then(|| format!("n{id}"));
        assert_eq!(note, expected, "id {id}");
    }

    // A column made nullable loses its NOT NULL; a new one that may not be null is refused,
    // changing nothing.
    let relaxed = TableLayout {
        columns: vec![
            Column::new("id", ColumnType::Int64),
            Column::new("note", ColumnType::String),
        ],
        partition_by: String::new(),
        sort_by: vec![],
    };
    writer(dir.path(), "new")
        .create_table(&table_w(relaxed).declared())
        .await
        .unwrap();
    let nullable = vec![("id".to_owned(), true), ("note".to_owned(), true)];
    assert_eq!(delta_columns(&table_dir).await, nullable);
    let mut required = after.layout();
    required
        .columns
        .push(Column::new("tag", ColumnType::String).required());
    let refused = refusal(&writer(dir.path(), "new"), &table_w(required).declared()).await;
    assert!(
        refused.contains("it has no column 'tag'")
            && refused.contains("declare the column nullable"),
        "{refused}"
    );
    assert_eq!(delta_columns(&table_dir).await, nullable);
}

/// Reads the Delta table in `dir` with the Python `deltalake` package: its columns' Delta
/// types, its rows (each cell's text; a decimal with every digit of its scale), how many files
/// it lists, each decimal column's bounds over the files as the log keeps them, and the ids of
/// the rows whose `amount` is at least `at_least` (the log's bounds skip files).
fn delta_read(dir: &std::path::Path, at_least: &str) -> serde_json::Value {
    const SCRIPT: &str = r#"
import decimal, json, os, sys
import pyarrow
from deltalake import DeltaTable
table = DeltaTable(sys.argv[1])
def text(v):
    if v is None:
        return None
    if isinstance(v, decimal.Decimal):
        return format(v, "f")
    return str(v)
def rows(t):
    columns = [t.column(i).to_pylist() for i in range(t.num_columns)]
    return [[text(v) for v in row] for row in zip(*columns)]
fields = json.loads(table.schema().to_json())["fields"]
adds = pyarrow.table(table.get_add_actions(flatten=True))
decimals = [f["name"] for f in fields if f["type"].startswith("decimal")]
def bound(kind, name):
    values = [v for v in adds.column(f"{kind}.{name}").to_pylist() if v is not None]
    return text((min if kind == "min" else max)(values)) if values else None
bounds = {name: [bound("min", name), bound("max", name)] for name in decimals}
found = table.to_pyarrow_table(filters=[("amount", ">=", decimal.Decimal(sys.argv[2]))])
print(json.dumps({
    "types": {f["name"]: f["type"] for f in fields},
    "rows": rows(table.to_pyarrow_table()),
    "files": len(table.file_uris()),
    "bounds": bounds,
    "found": sorted(int(r[0]) for r in rows(found)),
}), flush=True)
# Skip interpreter teardown: deltalake's runtime can abort in it after the work is done.
os._exit(0)
"#;
    let path = dir.to_string_lossy();
    let text = new_types::output(new_types::python(), &["-c", SCRIPT, &path, at_least]);
    serde_json::from_str(&text).unwrap()
}

/// The rows [`delta_read`] read, in the order of their ids.
fn by_id(read: &serde_json::Value) -> Vec<Vec<Option<String>>> {
    let mut rows: Vec<Vec<Option<String>>> = serde_json::from_value(read["rows"].clone()).unwrap();
    rows.sort_by_key(|row| row[0].as_deref().unwrap().parse::<i64>().unwrap());
    rows
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decimals_uuids_and_json_land_exactly_and_keep_through_a_sorted_merge() {
    let dir = tempfile::tempdir().unwrap();
    let lake = LakeSink::new(LakeConfig::new(dir.path())).unwrap();
    let t = new_types::table("typed", &["amount", "key"], false);
    lake.create_table(&t).await.unwrap();
    // Three files: rows 1-2, 3-4 and 5-6.
    for (seq, rows) in [(1, 0..2), (2, 2..4), (3, 4..6)] {
        let batch = new_types::batch(&t, rows);
        lake.write(new_types::flush(&t, seq, vec![batch]))
            .await
            .unwrap();
    }
    let table_dir = dir.path().join("typed");
    let widest = new_types::ROWS[0][0].unwrap();
    let read = delta_read(&table_dir, widest);
    let types = serde_json::json!({
        "id": "long",
        "amount": "decimal(38,2)",
        "whole": "decimal(38,0)",
        "fraction": "decimal(38,38)",
        "small": "decimal(1,0)",
        "key": "string",
        "doc": "string",
    });
    assert_eq!(read["types"], types);
    assert_eq!(read["files"], 3);
    assert_eq!(by_id(&read), new_types::expected(None));
    // The log's bounds hold every digit: a file whose largest amount is the widest value is
    // not skipped for a filter at exactly that value.
    assert_eq!(read["found"], serde_json::json!([1]));
    assert_eq!(
        delta_read(&table_dir, "12.50")["found"],
        serde_json::json!([1, 6])
    );

    let report = lake
        .compact(&t, CompactionPolicy::default().eager(), &|_, _| {})
        .await
        .unwrap();
    assert_eq!((report.merges, report.files_in), (1, 3), "{report:?}");
    let merged = delta_read(&table_dir, widest);
    assert_eq!(merged["files"], 1);
    // Sorted by amount as a number (null first), then key; every value kept.
    let ids: Vec<&str> = merged["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row[0].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["4", "2", "5", "3", "6", "1"]);
    assert_eq!(by_id(&merged), new_types::expected(None));
    let nines = "9".repeat(36);
    let bounds = serde_json::json!({
        "amount": [format!("-{nines}.99"), format!("{nines}.99")],
        "whole": [format!("-{nines}99"), format!("{nines}99")],
        "fraction": [format!("-0.5{}", "0".repeat(37)), format!("0.{nines}99")],
        "small": ["-9", "9"],
    });
    assert_eq!(merged["bounds"], bounds);
    assert_eq!(merged["found"], serde_json::json!([1]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_uuid_partition_reads_back_and_decimal_bounds_skip_files_each() {
    let dir = tempfile::tempdir().unwrap();
    let lake = LakeSink::new(LakeConfig::new(dir.path())).unwrap();
    let t = new_types::partitioned("by_key", "key", &[], false);
    lake.create_table(&t).await.unwrap();
    // A row per partition, the null one included: the UUIDs live in the log only.
    for row in 0..new_types::ROWS.len() {
        let partition = match new_types::ROWS[row][4] {
            Some(key) => PartitionKey::Value(key.to_owned()),
            None => PartitionKey::Null,
        };
        let batch = new_types::batch(&t, row..row + 1);
        let flush = new_types::flush_of(&t, partition, row as u64 + 1, vec![batch]);
        lake.write(flush).await.unwrap();
    }
    let read = delta_read(&dir.path().join("by_key"), "12.50");
    assert_eq!(read["files"], 6);
    assert_eq!(by_id(&read), new_types::expected(None));
    assert_eq!(read["found"], serde_json::json!([1, 6]));
}
