//! `sluice lab knee`: seed 001. Where does insert throughput stop rising with batch size, and how
//! long does a row wait under trickle traffic?
//!
//! 1. Rows into SQLite on disk with one commit per batch, for batch sizes 1 to 10,000 (batch size
//!    1 inserts fewer rows, as in the seed), with SQLite's default journal and `synchronous`, as
//!    Python's `sqlite3` uses them. The median of `reps` runs.
//! 2. Trickle traffic at 20 rows/s through sluice's own [`Batcher`] under simulated time: a
//!    size-only batch of 1,000 against size-or-age 200 ms.
//! 3. What the seed could not show: single-row producers sending through sluice's pipeline into
//!    the same SQLite, in process, through the library API. They get batch-sized throughput.
//!
//! With a PostgreSQL URL, steps 1 and 3 run against PostgreSQL too: one prepared `INSERT` per row,
//! one transaction per batch, as a client library's `executemany` does; then sluice's
//! PostgreSQL sink (binary `COPY`) fed by the same single-row producers.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use arrow::array::{Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use rusqlite::{Connection, params};
use serde::Serialize;
use sluice_core::{Batcher, FlushPolicyConfig, FlushReason, Sink};
use sluice_pipeline::{AckMode, Admission, Pipeline, PipelineConfig};
use sluice_sinks::sqlite::{JournalMode, Synchronous};
use sluice_sinks::{
    FileCatalog, LEDGER_TABLE, PostgresConfig, PostgresSink, SqliteConfig, SqliteSink,
};

/// The tables the PostgreSQL run writes (dropped and created again): the sweep's, and the one
/// sluice's producers fill.
pub const POSTGRES_TABLES: [&str; 2] = ["sluice_knee", "sluice_knee_pipeline"];

/// The seed's batch sizes.
pub const SEED_SIZES: [usize; 5] = [1, 10, 100, 1_000, 10_000];

/// What to run.
#[derive(Debug, Clone)]
pub struct KneeConfig {
    /// Rows per batch size.
    pub rows: usize,
    /// Rows for batch size 1 (a commit per row is slow).
    pub rows_for_one: usize,
    /// Batch sizes.
    pub sizes: Vec<usize>,
    /// Runs per size (the median is kept).
    pub reps: usize,
    /// Rows per second of the trickle.
    pub trickle_rate: f64,
    /// The size-only batch of the trickle.
    pub trickle_size: usize,
    /// The age limit of the size-or-age policy.
    pub max_age: Duration,
    /// Single-row producers for the sluice row.
    pub producers: usize,
    /// Where the database files go.
    pub dir: PathBuf,
    /// Run the sweep and the sluice row against this PostgreSQL too.
    pub postgres: Option<String>,
}

/// One batch size.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct KneeRow {
    /// Rows per commit.
    pub batch: usize,
    /// Rows inserted.
    pub rows: usize,
    /// Rows per second (median of reps).
    pub rows_per_s: f64,
}

/// The trickle.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Trickle {
    /// Rows per second.
    pub rate: f64,
    /// The size-only batch.
    pub batch: usize,
    /// Age limit of the size-or-age policy, milliseconds.
    pub max_age_ms: f64,
    /// How long the first row of a size-only batch waits, seconds.
    pub size_only_worst_wait_s: f64,
    /// The longest any row waits under size-or-age, milliseconds.
    pub size_or_age_worst_wait_ms: f64,
}

/// Single-row producers through sluice.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SluiceRow {
    /// Producers.
    pub producers: usize,
    /// Rows, one per insert.
    pub rows: usize,
    /// Rows per second, from the first insert until every row is committed in SQLite.
    pub rows_per_s: f64,
    /// Transactions sluice committed.
    pub commits: u64,
    /// Rows per commit on average.
    pub rows_per_commit: f64,
}

/// Everything measured.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct KneeReport {
    /// The SQLite sweep.
    pub sqlite: Vec<KneeRow>,
    /// The largest batch over a commit per row.
    pub knee_ratio: f64,
    /// The trickle.
    pub trickle: Trickle,
    /// sluice's single-row producers, and how they compare with a commit per row.
    pub sluice: SluiceRow,
    /// sluice's rows/s over a commit per row.
    pub sluice_ratio: f64,
    /// The same against PostgreSQL, when asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub postgres: Option<PostgresKnee>,
}

/// The sweep and the sluice row against PostgreSQL.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PostgresKnee {
    /// Rows/s by batch size.
    pub sweep: Vec<KneeRow>,
    /// The largest batch over a commit per row.
    pub knee_ratio: f64,
    /// sluice's single-row producers into PostgreSQL.
    pub sluice: SluiceRow,
    /// sluice's rows/s over a commit per row.
    pub sluice_ratio: f64,
}

/// Runs all three parts (and the PostgreSQL ones when asked).
pub async fn run(config: &KneeConfig, mut on_row: impl FnMut(&str)) -> Result<KneeReport, String> {
    std::fs::create_dir_all(&config.dir).map_err(|e| e.to_string())?;
    let path = config.dir.join("knee.sqlite");
    let sqlite = sweep(config, "SQLite", &mut on_row, async |batch, rows| {
        let path = path.clone();
        tokio::task::spawn_blocking(move || sqlite_sweep(&path, batch, rows))
            .await
            .map_err(|e| e.to_string())?
    })
    .await?;
    let trickle = trickle(config.trickle_rate, config.trickle_size, config.max_age)?;
    on_row(&format!(
        "trickle at {} rows/s: size-only batch of {} makes its first row wait {:.2} s; size OR age >= {} ms bounds every wait at {:.0} ms",
        trickle.rate,
        trickle.batch,
        trickle.size_only_worst_wait_s,
        trickle.max_age_ms,
        trickle.size_or_age_worst_wait_ms
    ));
    let rows = config.rows;
    let dir = config.dir.join("sluice");
    fresh_dir(&dir)?;
    let sink = SqliteSink::open(SqliteConfig {
        path: dir.join("knee.sqlite"),
        journal_mode: JournalMode::Delete,
        synchronous: Synchronous::Full,
    })
    .map_err(|e| e.to_string())?;
    let sluice = through_sluice(config, Arc::new(sink), &dir, "t", rows).await?;
    on_row(&format!(
        "sluice, {} single-row producers into SQLite: {:.0} rows/s ({:.0} rows per commit)",
        sluice.producers, sluice.rows_per_s, sluice.rows_per_commit
    ));
    let postgres = match &config.postgres {
        Some(url) => Some(postgres(config, url, &mut on_row).await?),
        None => None,
    };
    let (knee_ratio, sluice_ratio) = ratios(&sqlite, &sluice);
    Ok(KneeReport {
        knee_ratio,
        sluice_ratio,
        sqlite,
        trickle,
        sluice,
        postgres,
    })
}

/// `dir`, emptied of an earlier run's files (the sluice rows start from nothing).
fn fresh_dir(dir: &std::path::Path) -> Result<(), String> {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())
}

/// The largest batch's rows/s over the smallest's, and sluice's over a commit per row.
fn ratios(sweep: &[KneeRow], sluice: &SluiceRow) -> (f64, f64) {
    let per_row = sweep
        .iter()
        .find(|r| r.batch == 1)
        .map_or(0.0, |r| r.rows_per_s);
    let first = sweep.first().map_or(0.0, |r| r.rows_per_s);
    let last = sweep.last().map_or(0.0, |r| r.rows_per_s);
    (
        last / first.max(1e-9),
        sluice.rows_per_s / per_row.max(1e-9),
    )
}

/// Every batch size, `reps` times each; `run(batch, rows)` returns the seconds one run took.
async fn sweep(
    config: &KneeConfig,
    store: &str,
    on_row: &mut impl FnMut(&str),
    mut run: impl AsyncFnMut(usize, usize) -> Result<f64, String>,
) -> Result<Vec<KneeRow>, String> {
    let mut out = Vec::new();
    for &batch in &config.sizes {
        let rows = if batch == 1 {
            config.rows_for_one
        } else {
            config.rows
        };
        let mut runs = Vec::new();
        for _ in 0..config.reps.max(1) {
            let seconds = run(batch.max(1), rows).await?;
            runs.push(rows as f64 / seconds);
        }
        runs.sort_by(f64::total_cmp);
        let row = KneeRow {
            batch,
            rows,
            rows_per_s: runs[runs.len() / 2],
        };
        on_row(&format!(
            "{store} batch {:>6}: {:>12.0} rows/s",
            row.batch, row.rows_per_s
        ));
        out.push(row);
    }
    Ok(out)
}

/// The sweep and the sluice row against PostgreSQL.
async fn postgres(
    config: &KneeConfig,
    url: &str,
    on_row: &mut impl FnMut(&str),
) -> Result<PostgresKnee, String> {
    let (mut client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .map_err(|e| format!("cannot connect to PostgreSQL: {e}"))?;
    let connection = tokio::spawn(connection);
    let sweep = sweep(config, "PostgreSQL", on_row, async |batch, rows| {
        postgres_sweep(&mut client, batch, rows).await
    })
    .await?;
    let sink = PostgresSink::new(PostgresConfig::new(url)).map_err(|e| e.to_string())?;
    let [_, table] = POSTGRES_TABLES;
    // A fresh table, and no ledger row left by an earlier run to skip this one's flushes (the
    // ledger exists once sluice has opened a table in this database).
    client
        .batch_execute(&format!(
            "DROP TABLE IF EXISTS {table}; DO $$ BEGIN IF to_regclass('{LEDGER_TABLE}') IS NOT \
             NULL THEN DELETE FROM {LEDGER_TABLE} WHERE table_name = '{table}'; END IF; END $$"
        ))
        .await
        .map_err(|e| e.to_string())?;
    let dir = config.dir.join("sluice-postgres");
    fresh_dir(&dir)?;
    let sluice = through_sluice(config, Arc::new(sink), &dir, table, config.rows).await?;
    on_row(&format!(
        "sluice, {} single-row producers into PostgreSQL: {:.0} rows/s ({:.0} rows per commit)",
        sluice.producers, sluice.rows_per_s, sluice.rows_per_commit
    ));
    drop(client);
    let _ = connection.await;
    let (knee_ratio, sluice_ratio) = ratios(&sweep, &sluice);
    Ok(PostgresKnee {
        sweep,
        knee_ratio,
        sluice,
        sluice_ratio,
    })
}

/// Seed 001's loop on PostgreSQL: a prepared `INSERT` per row, a transaction per batch.
async fn postgres_sweep(
    client: &mut tokio_postgres::Client,
    batch: usize,
    rows: usize,
) -> Result<f64, String> {
    let [table, _] = POSTGRES_TABLES;
    client
        .batch_execute(&format!(
            "DROP TABLE IF EXISTS {table}; CREATE TABLE {table} (id bigint, v text)"
        ))
        .await
        .map_err(|e| e.to_string())?;
    let insert = client
        .prepare(&format!("INSERT INTO {table} VALUES ($1, $2)"))
        .await
        .map_err(|e| e.to_string())?;
    let v = "x".repeat(50);
    let started = Instant::now();
    let mut next = 0;
    while next < rows {
        let end = (next + batch).min(rows);
        let tx = client.transaction().await.map_err(|e| e.to_string())?;
        for id in next..end {
            tx.execute(&insert, &[&(id as i64), &v])
                .await
                .map_err(|e| e.to_string())?;
        }
        tx.commit().await.map_err(|e| e.to_string())?;
        next = end;
    }
    Ok(started.elapsed().as_secs_f64())
}

/// Seed 001's loop: `rows` rows, one transaction per `batch`, a fresh table. Returns seconds.
fn sqlite_sweep(path: &std::path::Path, batch: usize, rows: usize) -> Result<f64, String> {
    let mut conn = Connection::open(path).map_err(|e| e.to_string())?;
    conn.execute_batch("DROP TABLE IF EXISTS t; CREATE TABLE t(id INTEGER, v TEXT);")
        .map_err(|e| e.to_string())?;
    let v = "x".repeat(50);
    let started = Instant::now();
    let mut next = 0;
    while next < rows {
        let end = (next + batch).min(rows);
        let tx = conn.transaction().map_err(|e| e.to_string())?;
        {
            let mut stmt = tx
                .prepare_cached("INSERT INTO t VALUES (?1, ?2)")
                .map_err(|e| e.to_string())?;
            for id in next..end {
                stmt.execute(params![id as i64, v])
                    .map_err(|e| e.to_string())?;
            }
        }
        tx.commit().map_err(|e| e.to_string())?;
        next = end;
    }
    Ok(started.elapsed().as_secs_f64())
}

/// Trickle arrivals every 1/rate seconds through sluice's batcher under simulated time. Returns
/// the worst wait from a row's arrival to the flush that carries it.
fn worst_wait(rate: f64, batch: usize, max_age: Duration) -> Result<Duration, String> {
    if !(rate > 0.0 && rate.is_finite()) {
        return Err(format!("the trickle rate must be positive, got {rate}"));
    }
    let policy = FlushPolicyConfig {
        max_rows: Some(i64::try_from(batch).unwrap_or(i64::MAX)),
        max_age: Some(max_age),
        ..Default::default()
    }
    .validate()
    .map_err(|e| e.to_string())?;
    let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
    let start = Instant::now();
    let age_limit = policy.max_age();
    let mut batcher: Batcher<Instant> = Batcher::new(policy);
    let mut worst = Duration::ZERO;
    let mut flush = |batcher: &mut Batcher<Instant>, at: Instant, reason: FlushReason| {
        if let Some(sealed) = batcher.take(reason) {
            for arrived in sealed.tokens {
                worst = worst.max(at - arrived);
            }
        }
    };
    // Enough arrivals for a size-only batch to fill.
    for i in 0..batch {
        let at = start + Duration::from_secs_f64(i as f64 / rate);
        // The age timer fires at its deadline, before any later arrival.
        while let Some(deadline) = batcher.deadline(age_limit).filter(|d| *d <= at) {
            flush(&mut batcher, deadline, FlushReason::Age);
        }
        let row = RecordBatch::try_new(
            schema.clone(),
            vec![Arc::new(Int64Array::from(vec![i as i64]))],
        );
        if let Ok(row) = row
            && let Some(reason) = batcher.push(row, i as u64, at, at)
        {
            flush(&mut batcher, at, reason);
        }
    }
    if let Some(deadline) = batcher.deadline(age_limit) {
        flush(&mut batcher, deadline, FlushReason::Age);
    }
    Ok(worst)
}

/// The trickle with a size-only batch (an age limit of an hour) and with size-or-age.
pub fn trickle(rate: f64, batch: usize, max_age: Duration) -> Result<Trickle, String> {
    let size_only = worst_wait(rate, batch, Duration::from_secs(3600))?;
    let size_or_age = worst_wait(rate, batch, max_age)?;
    Ok(Trickle {
        rate,
        batch,
        max_age_ms: max_age.as_secs_f64() * 1000.0,
        size_only_worst_wait_s: size_only.as_secs_f64(),
        size_or_age_worst_wait_ms: size_or_age.as_secs_f64() * 1000.0,
    })
}

/// Single-row producers through sluice's pipeline into `sink`, table `table`, in process.
async fn through_sluice(
    config: &KneeConfig,
    sink: Arc<dyn Sink>,
    dir: &std::path::Path,
    table: &str,
    rows: usize,
) -> Result<SluiceRow, String> {
    let catalog = Arc::new(FileCatalog::open(dir).map_err(|e| e.to_string())?);
    let policy = FlushPolicyConfig {
        max_rows: Some(10_000),
        max_age: Some(config.max_age),
        ..Default::default()
    }
    .validate()
    .map_err(|e| e.to_string())?;
    let pipeline_config = PipelineConfig {
        default_policy: policy,
        ..PipelineConfig::default()
    };
    let pipeline = Pipeline::builder(pipeline_config, catalog, sink)
        .start()
        .await
        .map_err(|e| e.to_string())?;
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("v", DataType::Utf8, false),
    ]));
    let next = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..config.producers.max(1) {
        let (pipeline, schema, next) = (pipeline.clone(), schema.clone(), next.clone());
        let table = table.to_owned();
        tasks.push(tokio::spawn(async move {
            let v = "x".repeat(50);
            loop {
                let id = next.fetch_add(1, Ordering::Relaxed);
                if id >= rows as u64 {
                    return Ok::<(), String>(());
                }
                let row = RecordBatch::try_new(
                    schema.clone(),
                    vec![
                        Arc::new(Int64Array::from(vec![id as i64])),
                        Arc::new(StringArray::from(vec![v.as_str()])),
                    ],
                )
                .map_err(|e| e.to_string())?;
                pipeline
                    .insert_batch(&table, row, AckMode::Async, Admission::Wait)
                    .await
                    .map_err(|e| e.to_string())?;
            }
        }));
    }
    for task in tasks {
        task.await.map_err(|e| e.to_string())??;
    }
    let report = pipeline.shutdown().await;
    let seconds = started.elapsed().as_secs_f64();
    if report.rows_lost() > 0 {
        return Err(format!("{} rows did not land", report.rows_lost()));
    }
    let info = pipeline.tables().pop().ok_or("no table")?;
    if info.rows_written != rows as u64 {
        return Err(format!("{} of {rows} rows landed", info.rows_written));
    }
    Ok(SluiceRow {
        producers: config.producers,
        rows,
        rows_per_s: rows as f64 / seconds,
        commits: info.parts_written,
        rows_per_commit: rows as f64 / info.parts_written.max(1) as f64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trickle_matches_the_seed() {
        let t = trickle(20.0, 1000, Duration::from_millis(200)).unwrap();
        assert!(trickle(0.0, 1000, Duration::from_millis(200)).is_err());
        // The first of 1,000 rows at 20 rows/s waits for the other 999: 49.95 s.
        assert!(
            (t.size_only_worst_wait_s - 49.95).abs() < 1e-6,
            "{}",
            t.size_only_worst_wait_s
        );
        // sluice's age timer fires at the deadline: no row waits longer than 200 ms.
        assert!(
            (t.size_or_age_worst_wait_ms - 200.0).abs() < 1e-6,
            "{}",
            t.size_or_age_worst_wait_ms
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn small_knee_runs_end_to_end() {
        let dir = tempfile::tempdir().unwrap();
        let config = KneeConfig {
            rows: 2_000,
            rows_for_one: 200,
            sizes: vec![1, 100],
            reps: 1,
            trickle_rate: 20.0,
            trickle_size: 1000,
            max_age: Duration::from_millis(50),
            producers: 8,
            dir: dir.path().to_path_buf(),
            postgres: None,
        };
        let report = run(&config, |_| {}).await.unwrap();
        assert_eq!(report.sqlite.len(), 2);
        assert!(report.sqlite.iter().all(|r| r.rows_per_s > 0.0));
        assert_eq!(report.sluice.rows, 2_000);
        assert!(report.sluice.commits < 2_000, "{}", report.sluice.commits);
    }
}
