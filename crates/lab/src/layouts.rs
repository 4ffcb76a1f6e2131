//! `sluice lab layouts`: seed 000's experiment. The same rows as many tiny files and as a few big
//! ones: bytes, footers, write time, metadata time, full scans, a selective query, compaction,
//! and what a merge costs at each size.
//!
//! 2,000,000 synthetic API events in time order from a fixed seed, written as zstd Parquet with
//! 100, 1,000, 10,000, 100,000 and 1,000,000 rows per file. Every timing is the best of `reps`
//! runs with a warm page cache. Read the ratios, not the absolute times.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use arrow::array::{Array, AsArray, RecordBatch, StringArray};
use arrow::datatypes::Float64Type;
use parquet::arrow::arrow_reader::{ArrowPredicateFn, ParquetRecordBatchReaderBuilder, RowFilter};
use parquet::arrow::{ArrowWriter, ProjectionMask};
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::ParquetMetaDataReader;
use parquet::file::properties::WriterProperties;
use parquet::file::statistics::Statistics;
use serde::Serialize;

use crate::events::{EventGen, schema};

/// The seed's layouts, in rows per file.
pub const SEED_LAYOUTS: [usize; 5] = [100, 1_000, 10_000, 100_000, 1_000_000];

/// The service the selective query asks for.
pub const QUERY_SERVICE: &str = "api";

/// What to run.
#[derive(Debug, Clone)]
pub struct LayoutsConfig {
    /// Rows in the data set.
    pub rows: usize,
    /// Rows per file of each layout.
    pub layouts: Vec<usize>,
    /// Threads of the parallel scan (and of compaction).
    pub threads: usize,
    /// Each timing is the best of this many runs.
    pub reps: usize,
    /// Where the files go.
    pub dir: PathBuf,
    /// Seed of the events.
    pub seed: u64,
}

/// One layout's figures.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LayoutResult {
    /// Rows per file.
    pub rows_per_file: usize,
    /// Files written.
    pub files: usize,
    /// Bytes on disk.
    pub bytes: u64,
    /// Bytes of all footers (metadata plus the 8-byte tail).
    pub footer_bytes: u64,
    /// Footer bytes over bytes on disk.
    pub footer_share: f64,
    /// Seconds to write every file (best of reps).
    pub write_s: f64,
    /// Seconds to open every file and read its metadata.
    pub meta_open_s: f64,
    /// Seconds to read every column of every file on one thread.
    pub scan_1_thread_s: f64,
    /// The same on `threads` threads.
    pub scan_threads_s: f64,
    /// Seconds for the selective query (one service, one column).
    pub query_s: f64,
    /// The query's answer: rows of the service and the sum of their latency.
    pub query_rows: u64,
    /// Row groups the query skipped by their statistics.
    pub row_groups_pruned: u64,
}

/// Compacting the tiniest layout into `files_out` files.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Compaction {
    /// Files read.
    pub files_in: usize,
    /// Bytes read.
    pub bytes_in: u64,
    /// Files written.
    pub files_out: usize,
    /// Bytes written.
    pub bytes_out: u64,
    /// Rows.
    pub rows: u64,
    /// Seconds (best of reps).
    pub seconds: f64,
}

/// Merging 10 files into one at one size.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct MergePoint {
    /// Rows per input file.
    pub rows_per_file: usize,
    /// Rows merged.
    pub rows: usize,
    /// Seconds (best of reps).
    pub seconds: f64,
}

/// A straight line through the merge points: seconds = fixed + per_row × rows.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct MergeFit {
    /// The measured points.
    pub points: Vec<MergePoint>,
    /// Seconds per merge whatever its size.
    pub fixed_s: f64,
    /// Seconds per merged row.
    pub per_row_s: f64,
}

/// Tiny layout over big layout.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Ratios {
    /// Bytes on disk.
    pub bytes: f64,
    /// Full scan on `threads` threads.
    pub scan: f64,
    /// Full scan on one thread.
    pub scan_1_thread: f64,
    /// The selective query.
    pub query: f64,
    /// Writing.
    pub write: f64,
    /// Reading metadata.
    pub meta_open: f64,
}

/// Everything the experiment measured.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LayoutsReport {
    /// Rows in the data set.
    pub rows: usize,
    /// Arrow bytes of the data set in memory.
    pub raw_bytes: u64,
    /// Threads of the parallel measurements.
    pub threads: usize,
    /// Runs per timing.
    pub reps: usize,
    /// One result per layout.
    pub layouts: Vec<LayoutResult>,
    /// Compaction of the tiniest layout into as many files as the biggest.
    pub compaction: Option<Compaction>,
    /// Merge cost by size, and its straight-line fit.
    pub merge: Option<MergeFit>,
    /// Tiniest over biggest layout.
    pub ratios: Option<Ratios>,
}

/// What the experiment is doing, for a progress bar.
pub trait Progress: Sync {
    /// A new step with `total` units of work.
    fn step(&self, name: &str, total: u64);
    /// `n` more units done.
    fn advance(&self, n: u64);
}

/// No progress display.
pub struct Quiet;

impl Progress for Quiet {
    fn step(&self, _: &str, _: u64) {}
    fn advance(&self, _: u64) {}
}

type Result<T> = std::result::Result<T, String>;

/// Runs the whole experiment. Files are left in `config.dir`; the caller removes them.
pub fn run(config: &LayoutsConfig, progress: &dyn Progress) -> Result<LayoutsReport> {
    if config.rows == 0 || config.layouts.is_empty() || config.reps == 0 {
        return Err("rows, layouts and reps must not be empty or zero".into());
    }
    progress.step("generating events", 1);
    let data = EventGen::new(config.seed).batch(config.rows);
    progress.advance(1);
    let raw_bytes = data.get_array_memory_size() as u64;
    let threads = config.threads.max(1);
    let mut layouts = Vec::new();
    for &rows_per_file in &config.layouts {
        layouts.push(measure_layout(
            config,
            &data,
            rows_per_file,
            threads,
            progress,
        )?);
    }

    let tiny = config.layouts.iter().copied().min();
    let big = config.layouts.iter().copied().max();
    let compaction = match (tiny, big) {
        (Some(tiny), Some(big)) if tiny < big => Some(compact_layout(
            config,
            tiny,
            config.rows.div_ceil(big),
            threads,
            progress,
        )?),
        _ => None,
    };
    let merge = merge_costs(config, progress)?;
    let ratios = ratios(&layouts);
    Ok(LayoutsReport {
        rows: config.rows,
        raw_bytes,
        threads,
        reps: config.reps,
        layouts,
        compaction,
        merge,
        ratios,
    })
}

/// Writes `data` as files of `rows_per_file` rows and measures that layout: its bytes and
/// footers, then the best times to write it, read its metadata, scan it on one thread and on
/// `threads`, and run the selective query.
fn measure_layout(
    config: &LayoutsConfig,
    data: &RecordBatch,
    rows_per_file: usize,
    threads: usize,
    progress: &dyn Progress,
) -> Result<LayoutResult> {
    let dir = layout_dir(&config.dir, rows_per_file);
    let write_s = time_writes(config, data, rows_per_file, &dir, progress)?;
    let paths = list_parquet(&dir)?;
    let bytes = paths
        .iter()
        .map(|p| fs::metadata(p).map(|m| m.len()).unwrap_or(0))
        .sum();
    let footer_bytes = paths
        .iter()
        .map(|p| sluice_sinks::lake::footer_bytes(p).map_err(|e| e.to_string()))
        .collect::<Result<Vec<u64>>>()?
        .iter()
        .sum();
    let meta_open_s = time_metadata(config, &paths, rows_per_file, progress)?;
    let scan_1_thread_s = best(
        config.reps,
        progress,
        &format!("{rows_per_file} rows/file: scan, 1 thread"),
        paths.len(),
        || scan(&paths, 1, progress).map(|_| ()),
    )?;
    let scan_threads_s = best(
        config.reps,
        progress,
        &format!("{rows_per_file} rows/file: scan, {threads} threads"),
        paths.len(),
        || scan(&paths, threads, progress).map(|_| ()),
    )?;
    let mut answer = (0, 0.0, 0);
    let query_s = best(
        config.reps,
        progress,
        &format!("{rows_per_file} rows/file: query"),
        paths.len(),
        || {
            answer = query(&paths, progress)?;
            Ok(())
        },
    )?;
    Ok(LayoutResult {
        rows_per_file,
        files: paths.len(),
        bytes,
        footer_bytes,
        footer_share: footer_bytes as f64 / bytes.max(1) as f64,
        write_s,
        meta_open_s,
        scan_1_thread_s,
        scan_threads_s,
        query_s,
        query_rows: answer.0,
        row_groups_pruned: answer.2,
    })
}

/// Writes the layout into `dir` `config.reps` times, each time into an emptied folder, and
/// returns the best time. The last run's files stay.
fn time_writes(
    config: &LayoutsConfig,
    data: &RecordBatch,
    rows_per_file: usize,
    dir: &Path,
    progress: &dyn Progress,
) -> Result<f64> {
    let files = config.rows.div_ceil(rows_per_file.max(1));
    let mut write_s = f64::INFINITY;
    for rep in 0..config.reps {
        progress.step(
            &format!(
                "{rows_per_file} rows/file: write {}/{}",
                rep + 1,
                config.reps
            ),
            files as u64,
        );
        let _ = fs::remove_dir_all(dir);
        fs::create_dir_all(dir).map_err(|e| e.to_string())?;
        let started = Instant::now();
        write_layout(data, rows_per_file, dir, progress)?;
        write_s = write_s.min(started.elapsed().as_secs_f64());
    }
    Ok(write_s)
}

/// The best time to open every file of the layout and read its metadata.
fn time_metadata(
    config: &LayoutsConfig,
    paths: &[PathBuf],
    rows_per_file: usize,
    progress: &dyn Progress,
) -> Result<f64> {
    best(
        config.reps,
        progress,
        &format!("{rows_per_file} rows/file: metadata"),
        paths.len(),
        || {
            for path in paths {
                let file = File::open(path).map_err(|e| e.to_string())?;
                ParquetMetaDataReader::new()
                    .parse_and_finish(&file)
                    .map_err(|e| e.to_string())?;
                progress.advance(1);
            }
            Ok(())
        },
    )
}

/// The first layout's figures over the last one's, when there are at least two layouts.
fn ratios(layouts: &[LayoutResult]) -> Option<Ratios> {
    match (layouts.first(), layouts.last()) {
        (Some(t), Some(b)) if layouts.len() > 1 => Some(Ratios {
            bytes: t.bytes as f64 / b.bytes.max(1) as f64,
            scan: t.scan_threads_s / b.scan_threads_s,
            scan_1_thread: t.scan_1_thread_s / b.scan_1_thread_s,
            query: t.query_s / b.query_s,
            write: t.write_s / b.write_s,
            meta_open: t.meta_open_s / b.meta_open_s,
        }),
        _ => None,
    }
}

fn layout_dir(root: &Path, rows_per_file: usize) -> PathBuf {
    root.join(format!("rows-{rows_per_file}"))
}

/// The best of `reps` timings of `f`.
fn best(
    reps: usize,
    progress: &dyn Progress,
    name: &str,
    units: usize,
    mut f: impl FnMut() -> Result<()>,
) -> Result<f64> {
    let mut best = f64::INFINITY;
    for rep in 0..reps {
        progress.step(&format!("{name} {}/{reps}", rep + 1), units as u64);
        let started = Instant::now();
        f()?;
        best = best.min(started.elapsed().as_secs_f64());
    }
    Ok(best)
}

/// zstd, as seed 000 wrote its files; everything else at parquet's defaults.
pub fn writer_properties() -> WriterProperties {
    WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        .build()
}

fn write_file(path: &Path, batches: &[RecordBatch]) -> Result<()> {
    let file = File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut writer = ArrowWriter::try_new(file, schema(), Some(writer_properties()))
        .map_err(|e| e.to_string())?;
    for batch in batches {
        writer.write(batch).map_err(|e| e.to_string())?;
    }
    writer.close().map_err(|e| e.to_string())?;
    Ok(())
}

fn write_layout(
    data: &RecordBatch,
    rows_per_file: usize,
    dir: &Path,
    progress: &dyn Progress,
) -> Result<()> {
    let mut offset = 0;
    let mut index = 0;
    while offset < data.num_rows() {
        let len = rows_per_file.min(data.num_rows() - offset);
        write_file(
            &dir.join(format!("part-{index:06}.parquet")),
            &[data.slice(offset, len)],
        )?;
        offset += len;
        index += 1;
        progress.advance(1);
    }
    Ok(())
}

fn list_parquet(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut paths: Vec<PathBuf> = fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "parquet"))
        .collect();
    paths.sort();
    Ok(paths)
}

/// The footer's size: the metadata length in the last 8 bytes, plus those 8 bytes.
/// Reads every column of every file; returns the rows read.
fn scan(paths: &[PathBuf], threads: usize, progress: &dyn Progress) -> Result<u64> {
    let next = AtomicUsize::new(0);
    let work = || -> Result<u64> {
        let mut rows = 0;
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(path) = paths.get(i) else {
                return Ok(rows);
            };
            let file = File::open(path).map_err(|e| e.to_string())?;
            let reader = ParquetRecordBatchReaderBuilder::try_new(file)
                .and_then(|b| b.with_batch_size(64 * 1024).build())
                .map_err(|e| format!("{}: {e}", path.display()))?;
            for batch in reader {
                rows += batch.map_err(|e| e.to_string())?.num_rows() as u64;
            }
            progress.advance(1);
        }
    };
    if threads <= 1 {
        return work();
    }
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads).map(|_| scope.spawn(work)).collect();
        let mut rows = 0;
        for handle in handles {
            rows += handle
                .join()
                .map_err(|_| "a scan thread panicked".to_owned())??;
        }
        Ok(rows)
    })
}

/// `SELECT count(*), sum(latency_ms) WHERE service = 'api'`: row groups whose statistics rule the
/// service out are skipped, only the two columns are read, and latency is decoded only for the
/// rows that match. Returns (rows, sum, row groups pruned).
fn query(paths: &[PathBuf], progress: &dyn Progress) -> Result<(u64, f64, u64)> {
    let (mut rows, mut sum, mut pruned) = (0u64, 0.0f64, 0u64);
    for path in paths {
        let file = File::open(path).map_err(|e| e.to_string())?;
        let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| e.to_string())?;
        let metadata = builder.metadata().clone();
        let parquet_schema = builder.parquet_schema().clone();
        let service_idx = 1;
        let latency_idx = 4;
        let row_groups: Vec<usize> = (0..metadata.num_row_groups())
            .filter(
                |&rg| match metadata.row_group(rg).column(service_idx).statistics() {
                    Some(Statistics::ByteArray(s)) => {
                        let min = s.min_opt().map(|v| v.data());
                        let max = s.max_opt().map(|v| v.data());
                        let target = QUERY_SERVICE.as_bytes();
                        !(min.is_some_and(|m| m > target) || max.is_some_and(|m| m < target))
                    }
                    _ => true,
                },
            )
            .collect();
        pruned += (metadata.num_row_groups() - row_groups.len()) as u64;
        if row_groups.is_empty() {
            progress.advance(1);
            continue;
        }
        let predicate = ArrowPredicateFn::new(
            ProjectionMask::leaves(&parquet_schema, [service_idx]),
            |batch: RecordBatch| {
                let services = batch
                    .column(0)
                    .as_any()
                    .downcast_ref::<StringArray>()
                    .cloned()
                    .unwrap_or_else(|| StringArray::from(Vec::<&str>::new()));
                arrow::compute::kernels::cmp::eq(&services, &StringArray::new_scalar(QUERY_SERVICE))
            },
        );
        let reader = builder
            .with_row_groups(row_groups)
            .with_projection(ProjectionMask::leaves(&parquet_schema, [latency_idx]))
            .with_row_filter(RowFilter::new(vec![Box::new(predicate)]))
            .with_batch_size(64 * 1024)
            .build()
            .map_err(|e| e.to_string())?;
        for batch in reader {
            let batch = batch.map_err(|e| e.to_string())?;
            let latency = batch.column(0).as_primitive::<Float64Type>();
            rows += (latency.len() - latency.null_count()) as u64;
            sum += arrow::compute::sum(latency).unwrap_or(0.0);
        }
        progress.advance(1);
    }
    Ok((rows, sum, pruned))
}

/// Reads `inputs` in order and writes them as one file.
fn merge_files(inputs: &[PathBuf], output: &Path) -> Result<u64> {
    let file = File::create(output).map_err(|e| e.to_string())?;
    let mut writer = ArrowWriter::try_new(file, schema(), Some(writer_properties()))
        .map_err(|e| e.to_string())?;
    let mut rows = 0;
    for input in inputs {
        let reader =
            ParquetRecordBatchReaderBuilder::try_new(File::open(input).map_err(|e| e.to_string())?)
                .and_then(|b| b.with_batch_size(64 * 1024).build())
                .map_err(|e| e.to_string())?;
        for batch in reader {
            let batch = batch.map_err(|e| e.to_string())?;
            rows += batch.num_rows() as u64;
            writer.write(&batch).map_err(|e| e.to_string())?;
        }
    }
    writer.close().map_err(|e| e.to_string())?;
    Ok(rows)
}

/// Compacts the `tiny` layout into `outputs` files, one thread per output file.
fn compact_layout(
    config: &LayoutsConfig,
    tiny: usize,
    outputs: usize,
    threads: usize,
    progress: &dyn Progress,
) -> Result<Compaction> {
    let inputs = list_parquet(&layout_dir(&config.dir, tiny))?;
    let bytes_in = inputs
        .iter()
        .map(|p| fs::metadata(p).map(|m| m.len()).unwrap_or(0))
        .sum();
    let out_dir = config.dir.join("compacted");
    let outputs = outputs.max(1);
    let chunk = inputs.len().div_ceil(outputs);
    let mut best = f64::INFINITY;
    let mut rows = 0;
    for rep in 0..config.reps {
        progress.step(
            &format!(
                "compacting {} files into {outputs} ({}/{})",
                inputs.len(),
                rep + 1,
                config.reps
            ),
            outputs as u64,
        );
        let _ = fs::remove_dir_all(&out_dir);
        fs::create_dir_all(&out_dir).map_err(|e| e.to_string())?;
        let started = Instant::now();
        let next = AtomicUsize::new(0);
        let work = || -> Result<u64> {
            let mut rows = 0;
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(group) = inputs.chunks(chunk).nth(i) else {
                    return Ok(rows);
                };
                rows += merge_files(group, &out_dir.join(format!("part-{i:06}.parquet")))?;
                progress.advance(1);
            }
        };
        rows = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads.min(outputs).max(1))
                .map(|_| scope.spawn(work))
                .collect();
            let mut rows = 0;
            for handle in handles {
                rows += handle
                    .join()
                    .map_err(|_| "a compaction thread panicked".to_owned())??;
            }
            Ok::<u64, String>(rows)
        })?;
        best = best.min(started.elapsed().as_secs_f64());
    }
    let written = list_parquet(&out_dir)?;
    Ok(Compaction {
        files_in: inputs.len(),
        bytes_in,
        files_out: written.len(),
        bytes_out: written
            .iter()
            .map(|p| fs::metadata(p).map(|m| m.len()).unwrap_or(0))
            .sum(),
        rows,
        seconds: best,
    })
}

/// Merges 10 files into one at every size that has 10 files, and fits a line.
fn merge_costs(config: &LayoutsConfig, progress: &dyn Progress) -> Result<Option<MergeFit>> {
    let mut points = Vec::new();
    let out = config.dir.join("merged.parquet");
    for &rows_per_file in &config.layouts {
        let inputs = list_parquet(&layout_dir(&config.dir, rows_per_file))?;
        if inputs.len() < 10 {
            continue;
        }
        let seconds = best(
            config.reps,
            progress,
            &format!("merging 10 files of {rows_per_file} rows"),
            1,
            || {
                merge_files(&inputs[..10], &out)?;
                progress.advance(1);
                Ok(())
            },
        )?;
        points.push(MergePoint {
            rows_per_file,
            rows: rows_per_file * 10,
            seconds,
        });
    }
    let _ = fs::remove_file(&out);
    Ok(fit(&points).map(|(fixed_s, per_row_s)| MergeFit {
        points,
        fixed_s,
        per_row_s,
    }))
}

/// Least squares through (rows, seconds).
pub fn fit(points: &[MergePoint]) -> Option<(f64, f64)> {
    if points.len() < 2 {
        return None;
    }
    let n = points.len() as f64;
    let mean_x = points.iter().map(|p| p.rows as f64).sum::<f64>() / n;
    let mean_y = points.iter().map(|p| p.seconds).sum::<f64>() / n;
    let sxx: f64 = points
        .iter()
        .map(|p| (p.rows as f64 - mean_x).powi(2))
        .sum();
    if sxx == 0.0 {
        return None;
    }
    let sxy: f64 = points
        .iter()
        .map(|p| (p.rows as f64 - mean_x) * (p.seconds - mean_y))
        .sum();
    let slope = sxy / sxx;
    Some((mean_y - slope * mean_x, slope))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fits_a_line() {
        let points: Vec<MergePoint> = [(1_000, 0.0150), (10_000, 0.0180), (100_000, 0.0474)]
            .into_iter()
            .map(|(rows, seconds)| MergePoint {
                rows_per_file: rows / 10,
                rows,
                seconds,
            })
            .collect();
        let (fixed, per_row) = fit(&points).unwrap();
        assert!((fixed - 0.0146).abs() < 0.0005, "{fixed}");
        assert!((per_row - 0.328e-6).abs() < 0.01e-6, "{per_row}");
        assert!(fit(&points[..1]).is_none());
    }

    #[test]
    fn small_run_measures_every_layout() {
        let dir = tempfile::tempdir().unwrap();
        let config = LayoutsConfig {
            rows: 20_000,
            layouts: vec![100, 1_000, 10_000],
            threads: 2,
            reps: 1,
            dir: dir.path().to_path_buf(),
            seed: 1,
        };
        let report = run(&config, &Quiet).unwrap();
        let files: Vec<usize> = report.layouts.iter().map(|l| l.files).collect();
        assert_eq!(files, [200, 20, 2]);
        // Same rows, same answer, whatever the layout.
        let answers: Vec<u64> = report.layouts.iter().map(|l| l.query_rows).collect();
        assert!(
            answers.iter().all(|a| *a == answers[0] && *a > 0),
            "{answers:?}"
        );
        // Tiny files cost bytes: footers repeat per file.
        let tiny = &report.layouts[0];
        let big = &report.layouts[2];
        assert!(tiny.bytes > big.bytes);
        assert!(tiny.footer_share > big.footer_share);
        let compaction = report.compaction.unwrap();
        assert_eq!(
            (compaction.files_in, compaction.files_out, compaction.rows),
            (200, 2, 20_000)
        );
        assert!(compaction.bytes_out < compaction.bytes_in);
        let merge = report.merge.unwrap();
        assert_eq!(merge.points.len(), 2);
        assert!(report.ratios.unwrap().bytes > 1.0);
    }
}
