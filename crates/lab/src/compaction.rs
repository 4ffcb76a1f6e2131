//! `sluice lab compaction`: seed 000's remedy measured. 2,000,000 synthetic API events land as
//! 20,000 files of 100 rows in a Delta table; then pyarrow's dataset writer (when Python with
//! pyarrow is at hand) and sluice's compactor each rewrite those same files into large ones,
//! side by side on the same machine, and the report gives the time and the bytes before and
//! after of each.
//!
//! pyarrow runs first and writes elsewhere; sluice then compacts the table itself (one Delta
//! commit). Both read the inputs from a warm page cache, and each starts after the writes before
//! it have been flushed to disk (`sync`), so neither pays for writing back the other's files or
//! the inputs. With several runs the two alternate, sluice each time on a fresh copy of the
//! small files, and each side's time is its median: on a shared machine whose speed drifts from
//! one minute to the next, one run of each can land on a slow and a fast minute.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use arrow::array::RecordBatch;
use serde::Serialize;
use sluice_core::compaction::CompactionPolicy;
use sluice_core::{Column, ColumnType, FlushPolicy, TableDef, TableLayout, TableName};
use sluice_sinks::lake::{in_landing_order, live_files};
use sluice_sinks::{LakeConfig, LakeSink};

use crate::events::{EventGen, schema};
use crate::otel::{self, OtelGen};

/// What to run.
#[derive(Debug, Clone)]
pub struct CompactionLabConfig {
    /// Rows in the data set.
    pub rows: usize,
    /// Rows per input file.
    pub rows_per_file: usize,
    /// Where the table (and pyarrow's output) go; emptied first.
    pub dir: PathBuf,
    /// A Python with pyarrow, for the comparison; `None` skips it.
    pub python: Option<PathBuf>,
    /// Seed of the events.
    pub seed: u64,
    /// Write the small files with zstd, as large parts are, instead of the LZ4 sluice gives
    /// small parts.
    pub zstd_inputs: bool,
    /// Runs of each side, alternated (at least 1).
    pub runs: usize,
    /// The rows: seed 000's API events, or OpenTelemetry log records.
    pub events: Events,
}

/// Which rows the data set holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Events {
    /// Seed 000's API events: eight scalar columns.
    Api,
    /// OpenTelemetry log records, their resource and attributes maps.
    Otel,
}

impl std::str::FromStr for Events {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "api" => Ok(Events::Api),
            "otel" => Ok(Events::Otel),
            other => Err(format!("unknown events '{other}': api or otel")),
        }
    }
}

impl Events {
    /// The table the rows land in, unpartitioned, unsorted (as the files come).
    fn table(self) -> Result<TableDef, String> {
        let fields = match self {
            Events::Api => schema(),
            Events::Otel => otel::schema(),
        };
        let columns = fields
            .fields()
            .iter()
            .map(|f| {
                let ty = ColumnType::from_field(f)
                    .ok_or_else(|| format!("no column type for {}", f.data_type()))?;
                Ok(Column::new(f.name().clone(), ty).required())
            })
            .collect::<Result<Vec<_>, String>>()?;
        let layout = TableLayout {
            columns,
            partition_by: String::new(),
            sort_by: Vec::new(),
        };
        let name = TableName::new("events").map_err(|e| e.to_string())?;
        TableDef::new(name, layout, FlushPolicy::default()).map_err(|e| e.to_string())
    }

    /// `rows` rows from `seed`, as one batch.
    fn batch(self, seed: u64, rows: usize) -> RecordBatch {
        match self {
            Events::Api => EventGen::new(seed).batch(rows),
            Events::Otel => OtelGen::new(seed).batch(rows),
        }
    }
}

/// One side's figures.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Side {
    /// Wall time of the rewrite: the median of the runs.
    pub seconds: f64,
    /// Wall time of each run, in the order they ran.
    pub runs: Vec<f64>,
    /// Files written.
    pub files_out: u64,
    /// Bytes written.
    pub bytes_out: u64,
}

/// The report.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CompactionLabReport {
    /// Rows in the data set.
    pub rows: u64,
    /// Input files.
    pub files_in: u64,
    /// Input bytes.
    pub bytes_in: u64,
    /// The input files' codec.
    pub input_codec: String,
    /// The rows.
    pub events: Events,
    /// sluice's compactor.
    pub sluice: Side,
    /// pyarrow's dataset writer, when it ran.
    pub pyarrow: Option<Side>,
    /// Why pyarrow did not run, when it did not.
    pub pyarrow_skipped: Option<String>,
    /// pyarrow's time over sluice's.
    pub speedup: Option<f64>,
}

/// pyarrow's side: reads the listed files as one dataset and writes it with zstd, 1,000,000 rows
/// per file and per row group (the seed's big layout; without `min_rows_per_group` it would
/// write every 100-row input batch as a row group of its own). Prints seconds, files and bytes
/// as JSON.
const PYARROW: &str = r#"
import json, os, sys, time
import pyarrow.dataset as ds
files = [line.strip() for line in open(sys.argv[1]) if line.strip()]
out = sys.argv[2]
started = time.perf_counter()
dataset = ds.dataset(files, format="parquet")
options = ds.ParquetFileFormat().make_write_options(compression="zstd")
ds.write_dataset(dataset, out, format="parquet", file_options=options,
                 max_rows_per_file=1_000_000, min_rows_per_group=1_000_000,
                 max_rows_per_group=1_000_000,
                 existing_data_behavior="overwrite_or_ignore")
seconds = time.perf_counter() - started
written = [os.path.join(root, f) for root, _, fs in os.walk(out) for f in fs]
print(json.dumps({"seconds": seconds, "files_out": len(written),
                  "bytes_out": sum(os.path.getsize(f) for f in written)}), flush=True)
os._exit(0)
"#;

/// Runs the experiment. `progress` hears each step's name.
pub async fn run(
    config: &CompactionLabConfig,
    progress: &dyn Fn(&str),
) -> Result<CompactionLabReport, String> {
    if config.rows_per_file == 0 || config.rows == 0 {
        return Err("rows and rows per file must be at least 1".into());
    }
    let inputs = prepare(config, progress).await?;
    let runs = config.runs.max(1);

    let mut pyarrow_runs: Vec<Side> = Vec::new();
    let mut pyarrow_skipped = config
        .python
        .is_none()
        .then(|| "no Python given".to_owned());
    let mut sluice_runs: Vec<Side> = Vec::new();
    let mut merged_first = None;
    for run in 0..runs {
        if let (Some(python), None) = (&config.python, &pyarrow_skipped) {
            settle();
            progress(&format!(
                "pyarrow's dataset writer (run {} of {runs})",
                run + 1
            ));
            let out = config.dir.join("pyarrow");
            remove_dir(&out)?;
            match run_pyarrow(python, &inputs.list, &out) {
                Ok(side) => pyarrow_runs.push(side),
                Err(why) => {
                    pyarrow_runs.clear();
                    pyarrow_skipped = Some(why);
                }
            }
        }
        let side = sluice_run(config, &inputs, run, runs, &mut merged_first, progress).await?;
        sluice_runs.push(side);
    }
    let sluice = median_side(sluice_runs).ok_or("sluice did not run")?;
    let pyarrow = median_side(pyarrow_runs);
    Ok(CompactionLabReport {
        rows: config.rows as u64,
        files_in: inputs.files_in,
        bytes_in: inputs.bytes_in,
        input_codec: if config.zstd_inputs { "zstd" } else { "lz4" }.to_owned(),
        events: config.events,
        speedup: pyarrow.as_ref().map(|p| p.seconds / sluice.seconds),
        sluice,
        pyarrow,
        pyarrow_skipped,
    })
}

/// The small files every run starts from, and where they and the lab's other files lie.
struct Inputs {
    /// The table the small files belong to.
    table: TableDef,
    /// The lake holding the table.
    lake_dir: PathBuf,
    /// The table's folder in the lake.
    table_dir: PathBuf,
    /// The file listing the small files for pyarrow, one path a line.
    list: PathBuf,
    /// The copy of the lake each sluice run after the first starts from.
    pristine: PathBuf,
    /// Small files written.
    files_in: u64,
    /// Their bytes.
    bytes_in: u64,
}

/// Empties `config.dir`, writes the small files into a fresh Delta table, lists them for pyarrow
/// in the order they landed, and copies the lake aside when there is more than one run.
async fn prepare(config: &CompactionLabConfig, progress: &dyn Fn(&str)) -> Result<Inputs, String> {
    remove_dir(&config.dir)?;
    let lake_dir = config.dir.join("lake");
    let table = config.events.table()?;

    progress("writing the small files");
    let data = config.events.batch(config.seed, config.rows);
    let batches: Vec<_> = (0..config.rows)
        .step_by(config.rows_per_file)
        .map(|start| data.slice(start, config.rows_per_file.min(config.rows - start)))
        .collect();
    let mut input_config = LakeConfig::new(&lake_dir);
    if config.zstd_inputs {
        input_config.lz4_below = 0;
    }
    LakeSink::new(input_config)
        .map_err(|e| e.to_string())?
        .bulk_append(&table, batches, false)
        .await
        .map_err(|e| e.to_string())?;
    let table_dir = lake_dir.join(table.name().as_str());
    // pyarrow reads them in the order they landed, as sluice's merge does.
    let inputs = in_landing_order(live_files(&table_dir).await.map_err(|e| e.to_string())?);
    let files_in = inputs.len() as u64;
    let bytes_in: u64 = inputs.iter().map(|f| f.bytes).sum();

    let list = config.dir.join("inputs.txt");
    let text: String = inputs
        .iter()
        .map(|f| format!("{}\n", table_dir.join(&f.relative).display()))
        .collect();
    std::fs::write(&list, text).map_err(|e| e.to_string())?;
    // sluice compacts the table in place: each run after the first starts from this copy.
    let pristine = config.dir.join("pristine");
    let runs = config.runs.max(1);
    if runs > 1 {
        copy_tree(&lake_dir, &pristine)?;
    }
    Ok(Inputs {
        table,
        lake_dir,
        table_dir,
        list,
        pristine,
        files_in,
        bytes_in,
    })
}

/// One run of sluice's compactor: restores the small files (after the first run), compacts the
/// table, and checks that it merged as many files as the first run and kept every row.
async fn sluice_run(
    config: &CompactionLabConfig,
    inputs: &Inputs,
    run: usize,
    runs: usize,
    merged_first: &mut Option<u64>,
    progress: &dyn Fn(&str),
) -> Result<Side, String> {
    let Inputs {
        table,
        lake_dir,
        table_dir,
        pristine,
        ..
    } = inputs;
    if run > 0 {
        remove_dir(lake_dir)?;
        copy_tree(pristine, lake_dir)?;
    }
    settle();
    progress(&format!("sluice's compactor (run {} of {runs})", run + 1));
    // A sink of its own each run: nothing of the last run's log stays in memory.
    let lake = LakeSink::new(LakeConfig::new(lake_dir)).map_err(|e| e.to_string())?;
    let started = Instant::now();
    let report = lake
        .compact(table, CompactionPolicy::default(), &|_, _| {})
        .await
        .map_err(|e| e.to_string())?;
    // Every run merges what the first did: a run on the last one's output would not.
    let first = *merged_first.get_or_insert(report.files_in);
    if report.files_in != first {
        return Err(format!(
            "run {} merged {} files, the first {first}: the small files were not restored",
            run + 1,
            report.files_in
        ));
    }
    let side = Side {
        seconds: started.elapsed().as_secs_f64(),
        runs: Vec::new(),
        files_out: report.files_out,
        bytes_out: report.bytes_out,
    };
    let after = live_files(table_dir).await.map_err(|e| e.to_string())?;
    let rows_after: u64 = after.iter().map(|f| f.rows.unwrap_or(0)).sum();
    if rows_after != config.rows as u64 {
        return Err(format!(
            "the compacted table holds {rows_after} rows, not {}",
            config.rows
        ));
    }
    Ok(side)
}

/// The run of median time (of an even count, the faster of the middle two), with every run's
/// time.
fn median_side(mut runs: Vec<Side>) -> Option<Side> {
    let times: Vec<f64> = runs.iter().map(|r| r.seconds).collect();
    runs.sort_by(|a, b| a.seconds.total_cmp(&b.seconds));
    let middle = runs.len().checked_sub(1)? / 2;
    let mut side = runs.swap_remove(middle);
    side.runs = times;
    Some(side)
}

/// Removes a folder and everything in it; one that is not there is fine.
fn remove_dir(dir: &Path) -> Result<(), String> {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("cannot empty {}: {e}", dir.display())),
    }
}

/// Copies the folder `from` (files and folders) to `to`, which must not exist.
fn copy_tree(from: &Path, to: &Path) -> Result<(), String> {
    let failed = |what: &Path, e: std::io::Error| format!("cannot copy {}: {e}", what.display());
    std::fs::create_dir_all(to).map_err(|e| failed(to, e))?;
    for entry in std::fs::read_dir(from).map_err(|e| failed(from, e))? {
        let entry = entry.map_err(|e| failed(from, e))?;
        let (source, target) = (entry.path(), to.join(entry.file_name()));
        if entry.file_type().map_err(|e| failed(&source, e))?.is_dir() {
            copy_tree(&source, &target)?;
        } else {
            std::fs::copy(&source, &target).map_err(|e| failed(&source, e))?;
        }
    }
    Ok(())
}

/// Flushes every dirty page to disk, so the next side's timing holds no writeback of earlier
/// writes. Where `sync` cannot run, the run goes on (noisier).
fn settle() {
    if let Err(e) = Command::new("sync").status() {
        eprintln!("cannot run sync ({e}); timings may include writeback of earlier writes");
    }
}

fn run_pyarrow(python: &Path, list: &Path, out: &Path) -> Result<Side, String> {
    let output = Command::new(python)
        .args(["-c", PYARROW])
        .arg(list)
        .arg(out)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", python.display()))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let last = stderr.lines().last().unwrap_or("").to_owned();
        return Err(format!("pyarrow failed: {last}"));
    }
    serde_json::from_slice::<serde_json::Value>(&output.stdout)
        .ok()
        .and_then(|v| {
            Some(Side {
                seconds: v["seconds"].as_f64()?,
                runs: Vec::new(),
                files_out: v["files_out"].as_u64()?,
                bytes_out: v["bytes_out"].as_u64()?,
            })
        })
        .ok_or_else(|| "pyarrow printed no figures".to_owned())
}

#[cfg(test)]
mod tests {
    use arrow::array::AsArray;

    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn small_files_become_one_with_every_row() {
        let dir = tempfile::tempdir().unwrap();
        let config = CompactionLabConfig {
            rows: 5_000,
            rows_per_file: 100,
            dir: dir.path().join("lab"),
            python: None,
            seed: 7,
            zstd_inputs: false,
            runs: 2,
            events: Events::Api,
        };
        let report = run(&config, &|_| {}).await.unwrap();
        assert_eq!((report.files_in, report.sluice.files_out), (50, 1));
        // Two runs, each on the small files (the lab checks that each merged as many as the
        // first).
        assert_eq!(report.sluice.runs.len(), 2);
        assert!(report.sluice.bytes_out < report.bytes_in);
        assert_eq!(report.pyarrow_skipped.as_deref(), Some("no Python given"));

        // The small files were written on every core, committed in one commit, and merged by
        // size: the merged file still holds the events in the order they were made (their
        // timestamps never go back).
        let table_dir = config.dir.join("lake").join("events");
        let merged = live_files(&table_dir).await.unwrap();
        assert_eq!(merged.len(), 1);
        let file = std::fs::File::open(table_dir.join(&merged[0].relative)).unwrap();
        let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
            .unwrap()
            .build()
            .unwrap();
        let mut ts = Vec::new();
        for batch in reader {
            let batch = batch.unwrap();
            let column = batch.column_by_name("ts").unwrap();
            let column = column.as_primitive::<arrow::datatypes::TimestampMicrosecondType>();
            ts.extend(column.values().iter().copied());
        }
        assert_eq!(ts.len(), config.rows);
        let back = ts.windows(2).filter(|w| w[1] < w[0]).count();
        assert_eq!(back, 0, "the merged events are out of order {back} times");
    }
}
