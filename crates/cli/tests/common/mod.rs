//! Shared by the end-to-end tests: a real `sluice serve` process on 127.0.0.1:0 with its own data
//! directory, and readers of what it wrote.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use arrow::array::{Array, AsArray};
use arrow::datatypes::Int64Type;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use sluice_lab::load::{Endpoint, LoadConfig, Stop};

/// The columns `sluice load` sends (seed 000's API events plus a unique `id`), as a config
/// `columns = [...]` value.
pub const LOAD_COLUMNS: &str = r#"[
  { name = "id", type = "int64", nullable = false },
  { name = "ts", type = "timestamp" },
  { name = "service", type = "string" },
  { name = "endpoint", type = "string" },
  { name = "status", type = "int32" },
  { name = "latency_ms", type = "float64" },
  { name = "bytes", type = "int64" },
  { name = "request_id", type = "string" },
  { name = "user_id", type = "int64" },
]"#;

/// A config declaring the `load` table, flushing every 5,000 rows with the age limit far away,
/// so the row limit alone decides the parts.
pub fn load_table_flushing_every_5000_rows() -> String {
    format!(
        "[tables.load]\ncolumns = {LOAD_COLUMNS}\n[tables.load.flush]\nmax_rows = 5000\nmax_age = \"25s\"\n"
    )
}

/// A load of single-row inserts into table `load`, stopping after `rows` rows.
pub fn load_config(
    server: &Server,
    endpoint: Endpoint,
    producers: usize,
    rows: u64,
    id_offset: u64,
    ack: &str,
) -> LoadConfig {
    LoadConfig {
        addr: server.addr,
        table: "load".into(),
        endpoint,
        producers,
        rows_per_insert: 1,
        rate: None,
        stop: Stop::Rows(rows),
        ack: ack.into(),
        seed: id_offset,
        id_offset,
    }
}

/// A running server. Killed when dropped.
pub struct Server {
    child: Child,
    pub addr: SocketAddr,
    pub data_dir: PathBuf,
    _dir: tempfile::TempDir,
}

impl Server {
    /// Starts `sluice serve` with `config` (TOML) in a fresh data directory.
    pub fn start(config: &str) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let data_dir = dir.path().join("data");
        let config_path = dir.path().join("sluice.toml");
        std::fs::write(&config_path, config).unwrap();
        Self::start_in(dir, data_dir, &config_path)
    }

    fn start_in(dir: tempfile::TempDir, data_dir: PathBuf, config: &Path) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["serve", "--listen", "127.0.0.1:0", "--config"])
            .arg(config)
            .arg("--data-dir")
            .arg(&data_dir)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).unwrap();
        let addr = line
            .split("http://")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap_or_else(|| panic!("no address in {line:?}"))
            .parse()
            .unwrap();
        Server {
            child,
            addr,
            data_dir,
            _dir: dir,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Sends SIGTERM.
    pub fn sigterm(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Waits for the process to exit, at most `limit`.
    pub fn wait(&mut self, limit: Duration) -> ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "sluice did not exit within {limit:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Polls `GET /v1/tables` until `table` has landed `rows` rows.
    pub async fn wait_rows_written(&self, table: &str, rows: u64, limit: Duration) {
        let deadline = Instant::now() + limit;
        loop {
            let tables: serde_json::Value = reqwest::get(self.url("/v1/tables"))
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            let written = tables["tables"]
                .as_array()
                .unwrap()
                .iter()
                .find(|t| t["name"] == table)
                .map_or(0, |t| t["rows_written"].as_u64().unwrap());
            if written >= rows {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{table}: {written} of {rows} rows landed"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Every part file of `table` (recursively), sorted.
pub fn parts(data_dir: &Path, table: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![data_dir.join(table)];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if path.is_dir() && !name.starts_with('_') {
                stack.push(path);
            } else if name.starts_with("part-") && name.ends_with(".parquet") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// Rows per part file.
pub fn part_rows(path: &Path) -> usize {
    let builder = ParquetRecordBatchReaderBuilder::try_new(File::open(path).unwrap()).unwrap();
    builder.metadata().file_metadata().num_rows() as usize
}

/// The `id` column of every part of `table`, with how often each id appears.
pub fn id_counts(data_dir: &Path, table: &str) -> HashMap<i64, usize> {
    let mut counts = HashMap::new();
    for path in parts(data_dir, table) {
        let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(&path).unwrap())
            .unwrap()
            .build()
            .unwrap();
        for batch in reader {
            let batch = batch.unwrap();
            let ids = batch
                .column_by_name("id")
                .unwrap()
                .as_primitive::<Int64Type>();
            assert_eq!(ids.null_count(), 0);
            for id in ids.values() {
                *counts.entry(*id).or_default() += 1;
            }
        }
    }
    counts
}

/// Checks every id in `acked` ranges appears exactly once and no id appears twice.
pub fn assert_exactly_once(counts: &HashMap<i64, usize>, acked: &[(u64, u64)]) {
    let duplicated: Vec<_> = counts.iter().filter(|(_, n)| **n > 1).take(5).collect();
    assert!(duplicated.is_empty(), "duplicated ids: {duplicated:?}");
    let mut missing = Vec::new();
    for &(start, end) in acked {
        for id in start..end {
            if !counts.contains_key(&(id as i64)) {
                missing.push(id);
            }
        }
    }
    assert!(
        missing.is_empty(),
        "{} acknowledged ids missing, e.g. {:?}",
        missing.len(),
        &missing[..missing.len().min(5)]
    );
}
