//! The lake's parts: a Delta table an independent reader reads, hive-style partition folders,
//! the partition column left out of the files, rows sorted by the sort key, LZ4 (small parts),
//! column statistics, the flush identity in the footer, no temporary files left behind; a large
//! part's encodings, fitted to its rows, read back exactly by another reader. Plus the
//! operator's view: metrics, tables, health.

use std::fs::File;
use std::time::Duration;

use crate::common::{self, Server, parts};
use arrow::array::AsArray;
use arrow::datatypes::TimestampMicrosecondType;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::{Compression, Encoding};

const CONFIG: &str = r#"
[tables.events]
columns = [
  { name = "ts", type = "timestamp", nullable = false },
  { name = "service", type = "string" },
  { name = "latency_ms", type = "float64" },
]
partition_by = "service"
sort_by = ["ts"]

[tables.events.flush]
max_age = "200ms"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parts_are_partitioned_sorted_compressed_and_described() {
    let mut server = Server::start(CONFIG);
    let client = reqwest::Client::new();
    // Rows out of time order, across three partitions, one of them needing escaping.
    let mut body = String::new();
    for i in (0..300).rev() {
        let service = ["api", "web", "a/b c"][i % 3];
        body.push_str(&format!(
            "{{\"ts\":\"2026-11-29T12:{:02}:{:02}Z\",\"service\":\"{service}\",\"latency_ms\":{i}.5}}\n",
            i / 60,
            i % 60
        ));
    }
    let response = client
        .post(server.url("/v1/tables/events/rows"))
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "{:?}", response.text().await);

    let table = server.data_dir.join("events");
    let mut folders: Vec<String> = std::fs::read_dir(&table)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    folders.sort();
    assert_eq!(
        folders,
        [
            "_delta_log",
            "_sluice",
            "service=a%2Fb%20c",
            "service=api",
            "service=web"
        ]
    );
    // An independent Delta reader sees every row, with the partition values put back (the
    // escaped folder name included).
    let read = common::delta_read(&table, "service");
    assert_eq!(read["rows"], 300, "{read}");
    for service in ["api", "web", "a/b c"] {
        assert_eq!(read["counts"][service], 100, "{read}");
    }

    let files = parts(&server.data_dir, "events");
    assert_eq!(files.len(), 3, "one part per partition: {files:?}");
    for path in &files {
        let builder = ParquetRecordBatchReaderBuilder::try_new(File::open(path).unwrap()).unwrap();
        let metadata = builder.metadata().clone();
        let schema = builder.schema().clone();
        assert!(
            schema.field_with_name("service").is_err(),
            "partition column inside {path:?}"
        );
        let row_group = metadata.row_group(0);
        for column in row_group.columns() {
            assert!(
                // Small parts are LZ4 (zstd from `lz4_below` on).
                matches!(column.compression(), Compression::LZ4_RAW),
                "{:?}",
                column.compression()
            );
            let stats = column.statistics().expect("column statistics");
            assert!(stats.min_bytes_opt().is_some() && stats.max_bytes_opt().is_some());
        }
        let footer = metadata.file_metadata().key_value_metadata().unwrap();
        assert!(
            footer.iter().any(|kv| kv.key == "sluice.flush_id"),
            "{footer:?}"
        );
        let sorting = row_group
            .sorting_columns()
            .expect("sorting columns recorded");
        assert_eq!(sorting[0].column_idx, 0);
        let batch = builder.build().unwrap().next().unwrap().unwrap();
        assert_eq!(batch.num_rows(), 100);
        let ts = batch
            .column(0)
            .as_primitive::<TimestampMicrosecondType>()
            .values()
            .to_vec();
        assert!(
            ts.windows(2).all(|w| w[0] <= w[1]),
            "rows not sorted by ts in {path:?}"
        );
    }

    // Nothing temporary is left next to the parts.
    for entry in walk(&table) {
        let name = entry.file_name().unwrap().to_string_lossy().into_owned();
        assert!(!name.ends_with(".tmp"), "{entry:?}");
    }

    // The operator's view.
    let metrics = client
        .get(server.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for line in [
        "sluice_parts_written_total{table=\"events\"} 3",
        "sluice_rows_received_total{table=\"events\"} 300",
        "sluice_flushes_total{table=\"events\",reason=\"age\"} 3",
        "sluice_part_rows_bucket{table=\"events\",le=\"100\"} 3",
    ] {
        assert!(metrics.contains(line), "missing {line}");
    }
    assert!(metrics.contains("sluice_row_wait_seconds_count{table=\"events\"} 3"));
    let tables: serde_json::Value = client
        .get(server.url("/v1/tables"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let events = &tables["tables"][0];
    assert_eq!(events["name"], "events");
    assert_eq!(events["partition_by"], "service");
    assert_eq!(events["parts_written"], 3);
    assert_eq!(events["columns"][0]["type"], "timestamp");
    let health: serde_json::Value = client
        .get(server.url("/health"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(health["status"], "ok");

    server.sigterm();
    assert!(server.wait(Duration::from_secs(30)).success());
}

/// Reads the Delta table at argv[1] with the Python `deltalake` package: its `ts` column as
/// microseconds since the epoch, and its `status` column, in the file's order.
const READ_CLOCK: &str = r#"
import json, os, sys
import pyarrow as pa
from deltalake import DeltaTable
rows = DeltaTable(sys.argv[1]).to_pyarrow_table()
ts = rows.column("ts").cast(pa.int64()).to_pylist()
print(json.dumps({"ts": ts, "status": rows.column("status").to_pylist()}), flush=True)
# Skip interpreter teardown: deltalake's runtime can abort in it after the work is done.
os._exit(0)
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_part_stores_a_clock_as_deltas_and_other_readers_read_it_back() {
    // One flush of 5,000 rows, above `lz4_below`: zstd, its encodings fitted to its rows.
    let config = r#"
[tables.clock]
columns = [
  { name = "ts", type = "timestamp", nullable = false },
  { name = "status", type = "int32", nullable = false },
]

[tables.clock.flush]
max_rows = 5000
max_age = "10s"

[lake]
lz4_below = "1KiB"
"#;
    let mut server = Server::start(config);
    // A clock about a millisecond apart, and a status of three values, in no pattern.
    let rows = 5_000u64;
    let mix = |i: u64| (i ^ (i >> 3)).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
    let offsets: Vec<u64> = (0..rows).map(|i| i * 1_007 + mix(i) % 500).collect();
    let statuses: Vec<i64> = (0..rows)
        .map(|i| [200, 404, 500][(mix(i + rows) % 3) as usize])
        .collect();
    let mut body = String::new();
    for (offset, status) in offsets.iter().zip(&statuses) {
        let (seconds, micros) = (offset / 1_000_000, offset % 1_000_000);
        body.push_str(&format!(
            "{{\"ts\":\"2026-11-29T12:00:{seconds:02}.{micros:06}Z\",\"status\":{status}}}\n"
        ));
    }
    let response = reqwest::Client::new()
        .post(server.url("/v1/tables/clock/rows"))
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "{:?}", response.text().await);

    let files = parts(&server.data_dir, "clock");
    assert_eq!(files.len(), 1, "{files:?}");
    let builder = ParquetRecordBatchReaderBuilder::try_new(File::open(&files[0]).unwrap()).unwrap();
    let columns = builder.metadata().row_group(0).columns().to_vec();
    for column in &columns {
        assert!(matches!(column.compression(), Compression::ZSTD(_)));
    }
    let encodings = |index: usize| columns[index].encodings().collect::<Vec<_>>();
    // The clock rarely repeats a value: delta values, no dictionary. The status does.
    assert!(
        encodings(0).contains(&Encoding::DELTA_BINARY_PACKED)
            && !encodings(0).contains(&Encoding::RLE_DICTIONARY),
        "{:?}",
        encodings(0)
    );
    assert!(
        encodings(1).contains(&Encoding::RLE_DICTIONARY),
        "{:?}",
        encodings(1)
    );

    // Another reader (delta-rs through Python, pyarrow) reads every value back.
    let table = server.data_dir.join("clock").display().to_string();
    let read = common::python_json(READ_CLOCK, &[&table], &[], &table);
    // 2026-11-29T12:00:00Z in microseconds since the epoch.
    let start = 1_795_953_600_000_000u64;
    let expected: Vec<u64> = offsets.iter().map(|offset| start + offset).collect();
    assert_eq!(read["ts"], serde_json::json!(expected));
    assert_eq!(read["status"], serde_json::json!(statuses));

    server.sigterm();
    assert!(server.wait(Duration::from_secs(30)).success());
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}
