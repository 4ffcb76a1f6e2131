//! Shared by the end-to-end tests: a real `sluice serve` process on 127.0.0.1:0 with its own data
//! directory (the lab's [`ServerProcess`]), and readers of what it wrote.

pub mod lossy_s3;

use std::collections::HashMap;
use std::fs::File;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use sluice_lab::events::COLUMNS_TOML;
use sluice_lab::load::{Endpoint, LoadConfig, Stop};
use sluice_lab::process::ServerProcess;

/// Object-store options as the lines of a config's `[lake.storage]` table.
pub fn storage_toml(options: &[(&str, String)]) -> String {
    options
        .iter()
        .map(|(k, v)| format!("{k} = {v:?}\n"))
        .collect()
}

/// A config declaring the `load` table, flushing every 5,000 rows with the age limit far away,
/// so the row limit alone decides the parts.
pub fn load_table_flushing_every_5000_rows() -> String {
    format!(
        "[tables.load]\ncolumns = {COLUMNS_TOML}\n[tables.load.flush]\nmax_rows = 5000\nmax_age = \"25s\"\n"
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
    load_config_for(server.addr, endpoint, producers, rows, id_offset, ack)
}

/// [`load_config`] for the server at `addr`.
pub fn load_config_for(
    addr: SocketAddr,
    endpoint: Endpoint,
    producers: usize,
    rows: u64,
    id_offset: u64,
    ack: &str,
) -> LoadConfig {
    LoadConfig {
        addr,
        table: "load".into(),
        endpoint,
        producers,
        rows_per_insert: 1,
        rate: None,
        stop: Stop::Rows(rows),
        ack: ack.into(),
        seed: id_offset,
        id_offset,
        format: sluice_lab::events::RowFormat::JsonEachRow,
        keyed: false,
    }
}

/// A running server with its own data directory. Killed when dropped.
pub struct Server {
    process: ServerProcess,
    pub addr: SocketAddr,
    /// The native protocol's address, when the config turns it on.
    pub native_addr: Option<SocketAddr>,
    pub data_dir: PathBuf,
    _dir: tempfile::TempDir,
}

impl Server {
    /// Starts `sluice serve` with `config` (TOML) in a fresh data directory.
    pub fn start(config: &str) -> Server {
        Self::start_with_env(config, &[])
    }

    /// [`Server::start`] with extra environment variables.
    pub fn start_with_env(config: &str, env: &[(&str, &str)]) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let data_dir = dir.path().join("data");
        let config_path = dir.path().join("sluice.toml");
        std::fs::write(&config_path, config).unwrap();
        let process = ServerProcess::spawn_with_env(
            Path::new(env!("CARGO_BIN_EXE_sluice")),
            &data_dir,
            Some(&config_path),
            env,
        )
        .unwrap();
        Server {
            addr: process.addr,
            native_addr: process.native_addr,
            process,
            data_dir,
            _dir: dir,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Sends SIGTERM.
    pub fn sigterm(&self) {
        self.process.terminate().unwrap();
    }

    /// Waits for the process to exit, at most `limit`.
    pub fn wait(&mut self, limit: Duration) -> ExitStatus {
        self.process.wait(limit).unwrap()
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

/// The Python interpreter that has the `deltalake` package: `SLUICE_PYTHON` (scripts/test.sh
/// sets it after scripts/services/install.sh made it), else the virtualenv install.sh makes.
pub fn python() -> PathBuf {
    let path = std::env::var_os("SLUICE_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/pyreader/bin/python")
        });
    assert!(
        path.exists(),
        "no Python Delta reader at {}: run scripts/services/install.sh (scripts/test.sh does)",
        path.display()
    );
    path
}

/// Reads the Delta table in `dir` with an independent reader, the Python `deltalake` package
/// (delta-rs): `{"rows": N, "version": V, "counts": {value of column: count}}` (null counts
/// under `"None"`).
pub fn delta_read(dir: &Path, column: &str) -> serde_json::Value {
    delta_read_at(&dir.to_string_lossy(), &[], &[], column)
}

/// How often each id appears in a [`delta_read`] of an integer id column.
pub fn read_id_counts(read: &serde_json::Value) -> HashMap<i64, usize> {
    read["counts"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(id, n)| (id.parse().unwrap(), n.as_u64().unwrap() as usize))
        .collect()
}

/// [`delta_read`] of the table at `location` (a folder or an object-store URL), opened with
/// `options` (object_store's option names, as `[lake.storage]` takes them) and with `env` added
/// to the reader's environment.
pub fn delta_read_at(
    location: &str,
    options: &[(&str, String)],
    env: &[(&str, String)],
    column: &str,
) -> serde_json::Value {
    const SCRIPT: &str = r#"
import collections, json, os, sys
from deltalake import DeltaTable
table = DeltaTable(sys.argv[1], storage_options=json.loads(sys.argv[3]))
rows = table.to_pyarrow_table()
counts = collections.Counter(str(v) for v in rows.column(sys.argv[2]).to_pylist())
print(json.dumps({"rows": rows.num_rows, "version": table.version(), "counts": counts}), flush=True)
# Skip interpreter teardown: deltalake's runtime can abort in it after the work is done.
os._exit(0)
"#;
    let options: serde_json::Map<String, serde_json::Value> = options
        .iter()
        .map(|(k, v)| ((*k).to_owned(), serde_json::Value::from(v.clone())))
        .collect();
    let options = serde_json::Value::Object(options).to_string();
    python_json(SCRIPT, &[location, column, &options], env, location)
}

/// Runs `script` in [`python`] with `args` (and `env` added to its environment) and parses the
/// JSON it prints. Fails the test, with the script's stderr, when it fails: "the Python reader
/// failed on `what`".
pub fn python_json(
    script: &str,
    args: &[&str],
    env: &[(&str, String)],
    what: &str,
) -> serde_json::Value {
    let output = std::process::Command::new(python())
        .args(["-c", script])
        .args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "the Python reader failed on {what}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

/// Every part file of `table`, sorted.
pub fn parts(data_dir: &Path, table: &str) -> Vec<PathBuf> {
    sluice_lab::verify::part_files(data_dir, table).unwrap()
}

/// Stops `server` and returns every row of `table` in its lake, each cell as Arrow displays it
/// (`None` for null), sorted by the first column, a whole number.
pub fn stop_and_read(mut server: Server, table: &str) -> Vec<Vec<Option<String>>> {
    server.sigterm();
    assert!(server.wait(Duration::from_secs(30)).success());
    read_landed(&server.data_dir, table)
}

/// Every row of `table` in the lake under `data_dir`, as [`stop_and_read`] gives them.
pub fn read_landed(data_dir: &Path, table: &str) -> Vec<Vec<Option<String>>> {
    use arrow::array::Array;
    let mut rows = Vec::new();
    for part in parts(data_dir, table) {
        let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(part).unwrap())
            .unwrap()
            .build()
            .unwrap();
        for batch in reader {
            let batch = batch.unwrap();
            for i in 0..batch.num_rows() {
                let cell = |column: &dyn Array| {
                    column
                        .is_valid(i)
                        .then(|| arrow::util::display::array_value_to_string(column, i).unwrap())
                };
                rows.push(batch.columns().iter().map(|c| cell(c.as_ref())).collect());
            }
        }
    }
    rows.sort_by_key(|row: &Vec<Option<String>>| {
        row[0]
            .as_deref()
            .unwrap_or_default()
            .parse::<i64>()
            .unwrap()
    });
    rows
}

/// Rows in one part file.
pub fn part_rows(path: &Path) -> usize {
    let builder = ParquetRecordBatchReaderBuilder::try_new(File::open(path).unwrap()).unwrap();
    builder.metadata().file_metadata().num_rows() as usize
}

/// How often each `id` appears in the parts of `table`.
pub fn id_counts(data_dir: &Path, table: &str) -> HashMap<i64, usize> {
    sluice_lab::verify::id_counts(data_dir, table).unwrap()
}

/// Checks every id in the `acked` ranges appears exactly once and no id appears twice.
pub fn assert_exactly_once(counts: &HashMap<i64, usize>, acked: &[(u64, u64)]) {
    let audit = sluice_lab::verify::audit(counts, acked);
    assert_eq!((audit.lost, audit.duplicated), (0, 0), "{audit:?}");
}

/// Runs the `sluice` binary with `args` to completion; its stdout. Fails the test, with its
/// stderr, when it fails.
pub fn sluice<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> String {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .output()
        .unwrap();
    let shown: Vec<_> = args.iter().map(|a| a.as_ref().to_string_lossy()).collect();
    assert!(
        output.status.success(),
        "sluice {shown:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// Runs `sluice serve` with `config` (TOML) until it exits: whether it succeeded, and its stderr.
/// For configs that must stop the start.
pub fn serve_with(config: &str) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sluice.toml");
    std::fs::write(&path, config).unwrap();
    serve_until_exit(&path, &dir.path().join("data"))
}

/// Runs `sluice serve --config CONFIG --data-dir DATA` until it exits: whether it succeeded,
/// and its stderr. For starts that must stop.
pub fn serve_until_exit(config: &Path, data: &Path) -> (bool, String) {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(config)
        .arg("--data-dir")
        .arg(data)
        .output()
        .unwrap();
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Waits until the load has `rows` acknowledged rows; fails the test after 60 s.
pub async fn wait_for_acks(progress: &sluice_lab::load::Progress, rows: u64) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while progress
        .rows_acked
        .load(std::sync::atomic::Ordering::Relaxed)
        < rows
    {
        assert!(Instant::now() < deadline, "the load stalled");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Starts `sluice serve` on `data` and stops it gracefully: the first start of a data
/// directory, with every store answering, which gives its write-ahead log the reservation that
/// later starts need to go on without a store that is down.
pub fn start_and_stop(config: &Path, data: &Path) {
    let binary = Path::new(env!("CARGO_BIN_EXE_sluice"));
    let mut server = ServerProcess::spawn(binary, data, Some(config)).unwrap();
    server.terminate().unwrap();
    assert!(server.wait(Duration::from_secs(30)).unwrap().success());
}

/// Sends ids 0..100 of table `load` to `path` (a `durable` insert) in ten inserts of ten rows
/// while the table's store is down, and checks each is taken and that `GET /v1/tables` says
/// why nothing lands.
pub async fn insert_while_the_store_is_down(addr: SocketAddr, path: &str) {
    for i in 0..10 {
        let body: String = (i * 10..(i + 1) * 10)
            .map(|id| format!("{{\"id\":{id},\"service\":\"api\"}}\n"))
            .collect();
        let (status, message) = sluice_lab::load::http_post(addr, path, body).await.unwrap();
        assert_eq!(status, 200, "{message}");
    }
    let tables = sluice_lab::load::http_get(addr, "/v1/tables")
        .await
        .unwrap();
    assert!(tables.contains("cannot open the table yet"), "{tables}");
}

/// The start of a test of a store that hangs: id 0 of table `load` lands through a `committed`
/// insert (the store has been reached), `freeze` makes the store hang (or holds the table up),
/// and ids 1 to 10 are taken as `durable` inserts of one row each, which the store cannot land
/// now.
pub async fn insert_around_a_hang(addr: SocketAddr, freeze: impl std::future::Future<Output = ()>) {
    let row = |id: u64| format!("{{\"id\":{id},\"service\":\"api\"}}");
    let path = "/v1/tables/load/rows?ack=committed";
    let (status, message) = sluice_lab::load::http_post(addr, path, row(0))
        .await
        .unwrap();
    assert_eq!(status, 200, "{message}");
    freeze.await;
    for id in 1..=10 {
        let path = "/v1/tables/load/rows?ack=durable";
        let (status, message) = sluice_lab::load::http_post(addr, path, row(id))
            .await
            .unwrap();
        assert_eq!(status, 200, "{message}");
    }
}

/// Waits until `GET /v1/tables` holds `text` (a table's error, say); fails the test after 60 s.
pub async fn wait_for_tables_to_say(addr: SocketAddr, text: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let tables = sluice_lab::load::http_get(addr, "/v1/tables")
            .await
            .unwrap();
        if tables.contains(text) {
            return;
        }
        assert!(Instant::now() < deadline, "never said {text:?}: {tables}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until `/health` reports `table` as degraded; fails the test after 30 s.
pub async fn wait_until_degraded(addr: SocketAddr, table: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let health = sluice_lab::load::http_get(addr, "/health").await.unwrap();
        if health.contains("\"degraded\"") && health.contains(&format!("\"{table}\"")) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "health never said degraded: {health}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Runs `load` (with a time stop far away) and takes the store down once 2,000 rows are
/// acknowledged with `down`; checks that sluice keeps acknowledging and reports table `load`
/// degraded; brings the store back with `up`; stops after 2,000 more rows; stops the server
/// cleanly. Returns the load's report (with its acknowledged ids).
pub async fn store_restart_under_load(
    server: &mut sluice_lab::process::ServerProcess,
    load: LoadConfig,
    down: impl FnOnce(),
    up: impl FnOnce(),
) -> sluice_lab::load::LoadReport {
    use std::sync::atomic::Ordering;

    let progress = std::sync::Arc::new(sluice_lab::load::Progress::default());
    let task = tokio::spawn(sluice_lab::load::run(load, progress.clone(), true));
    wait_for_acks(&progress, 2_000).await;

    down();
    let before = progress.rows_acked.load(Ordering::Relaxed);
    wait_until_degraded(server.addr, "load").await;
    wait_for_acks(&progress, before + 1_000).await;

    up();
    let back = progress.rows_acked.load(Ordering::Relaxed);
    wait_for_acks(&progress, back + 2_000).await;
    progress.stop.store(true, Ordering::Relaxed);
    let report = task.await.unwrap().unwrap();
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    server.terminate().unwrap();
    assert!(server.wait(Duration::from_secs(60)).unwrap().success());
    report
}

/// The one dead letter kept for `table` under `data_dir`: its rows (NDJSON) and its error note.
pub fn dead_letter(data_dir: &Path, table: &str) -> (String, String) {
    let dead = data_dir.join("_dead").join(table);
    let rows: Vec<PathBuf> = std::fs::read_dir(&dead)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".ndjson"))
        .collect();
    assert_eq!(rows.len(), 1, "{rows:?}");
    (
        std::fs::read_to_string(&rows[0]).unwrap(),
        std::fs::read_to_string(rows[0].with_extension("error.txt")).unwrap(),
    )
}

/// The value of the sample of `name` for table `load` carrying every label in `labels`, in a
/// `/metrics` page; 0 when there is none.
pub fn sample(page: &str, name: &str, labels: &[&str]) -> f64 {
    table_sample(page, "load", name, labels)
}

/// [`sample`] for table `table`.
pub fn table_sample(page: &str, table: &str, name: &str, labels: &[&str]) -> f64 {
    let table = format!("table=\"{table}\"");
    page.lines()
        .filter(|line| line.starts_with(&format!("{name}{{")))
        .filter(|line| line.contains(&table) && labels.iter().all(|l| line.contains(l)))
        .find_map(|line| line.rsplit_once(' ')?.1.parse().ok())
        .unwrap_or(0.0)
}

/// Checks what a `/metrics` page says of table `load`'s background compaction rounds: one
/// duration observed for each round that merged (each committed a merge or lost one to another
/// compactor, so there are no more rounds than those, and some when there were any), with time
/// spent in them. Returns the number of rounds.
pub fn compaction_rounds(page: &str) -> f64 {
    let rounds = sample(page, "sluice_compaction_duration_seconds_count", &[]);
    let merged = sample(page, "sluice_compaction_merges_total", &[])
        + sample(page, "sluice_compaction_lost_races_total", &[]);
    assert!(
        rounds <= merged,
        "{rounds} rounds, {merged} merges:\n{page}"
    );
    assert_eq!(
        rounds > 0.0,
        merged > 0.0,
        "{rounds} rounds, {merged} merges:\n{page}"
    );
    let seconds = sample(page, "sluice_compaction_duration_seconds_sum", &[]);
    assert_eq!(
        seconds > 0.0,
        rounds > 0.0,
        "{seconds} s in {rounds} rounds:\n{page}"
    );
    rounds
}

/// Runs `sluice ARGS --json FILE` with `RUST_LOG=error`: whether it succeeded, and the report
/// it wrote. Fails the test, with the output, when it wrote none.
pub fn run_json(args: &[&str]) -> (bool, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("report.json");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .arg("--json")
        .arg(&path)
        .env("RUST_LOG", "error")
        .output()
        .unwrap();
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{e}: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    });
    (
        output.status.success(),
        serde_json::from_str(&text).unwrap(),
    )
}
