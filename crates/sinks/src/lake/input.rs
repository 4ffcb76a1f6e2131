//! Reading parts back, for a merge: a run of files, their rows packed into large batches.

use arrow::array::RecordBatch;
use arrow::compute::BatchCoalescer;
use parquet::arrow::arrow_reader::{ArrowReaderOptions, ParquetRecordBatchReaderBuilder};
use parquet::file::metadata::ParquetStatisticsPolicy;
use parquet::schema::types::TypePtr;
use sluice_core::SinkError;

use super::files::LiveFile;
use super::storage::TableFiles;

const SINK: &str = "lake";

/// Reads `run`'s files in order, their rows packed into batches of [`WRITE_BATCH_ROWS`] rows
/// (the last may be smaller; a file of another layout starts batches of its own).
pub(super) fn read_run(
    files: &TableFiles,
    run: &[LiveFile],
) -> Result<Vec<RecordBatch>, SinkError> {
    let failed = |e| SinkError::permanent(SINK, format!("cannot merge batches: {e}"));
    let mut out = Vec::new();
    let mut coalescer: Option<BatchCoalescer> = None;
    let mut options = None;
    let finish = |coalescer: &mut BatchCoalescer, out: &mut Vec<RecordBatch>| {
        coalescer.finish_buffered_batch().map_err(failed)?;
        out.extend(std::iter::from_fn(|| coalescer.next_completed_batch()));
        Ok::<_, SinkError>(())
    };
    for file in run {
        for batch in read_file(files, file, &mut options)? {
            // A file written under another layout of the table starts batches of its own.
            if let Some(mut other) = coalescer.take_if(|c| c.schema() != batch.schema()) {
                finish(&mut other, &mut out)?;
            }
            let coalescer = coalescer
                .get_or_insert_with(|| BatchCoalescer::new(batch.schema(), WRITE_BATCH_ROWS));
            coalescer.push_batch(batch).map_err(failed)?;
            out.extend(std::iter::from_fn(|| coalescer.next_completed_batch()));
        }
    }
    if let Some(mut coalescer) = coalescer {
        finish(&mut coalescer, &mut out)?;
    }
    Ok(out)
}

/// Reads one input whole. `read_as` starts as `None` and is set from the first file read: the
/// Arrow schema that file gave, which later files with the same Parquet schema are read with
/// instead of each converting the schema stored in its footer (a file of another layout is
/// read with its own, and `compact.rs`'s `one_layout` brings the merge's batches together); and no column
/// statistics decoded, which merging never looks at. The two make opening many small files
/// cheaper, and with it the whole read.
fn read_file(
    files: &TableFiles,
    file: &LiveFile,
    read_as: &mut Option<ReadAs>,
) -> Result<Vec<RecordBatch>, SinkError> {
    let relative = &file.relative;
    let failed = |e: &dyn std::fmt::Display| {
        SinkError::retriable(
            SINK,
            format!("cannot read {}: {e}", files.describe(relative)),
        )
    };
    let source = files.read(relative, file.bytes)?;
    let fresh = || {
        ArrowReaderOptions::new()
            .with_column_stats_policy(ParquetStatisticsPolicy::SkipAll)
            .with_encoding_stats_policy(ParquetStatisticsPolicy::SkipAll)
            .with_size_stats_policy(ParquetStatisticsPolicy::SkipAll)
    };
    // A file written under another layout of the table (a column since added to or dropped
    // from the config) is read with its own schema.
    let reused = read_as.as_ref().and_then(|first| {
        ParquetRecordBatchReaderBuilder::try_new_with_options(source.clone(), first.options.clone())
            .ok()
            .filter(|b| b.parquet_schema().root_schema() == first.parquet.as_ref())
    });
    let builder = match reused {
        Some(builder) => builder,
        None => ParquetRecordBatchReaderBuilder::try_new_with_options(source, fresh())
            .map_err(|e| failed(&e))?,
    };
    if read_as.is_none() {
        *read_as = Some(ReadAs {
            options: fresh().with_schema(builder.schema().clone()),
            parquet: builder.parquet_schema().root_schema_ptr(),
        });
    }
    let reader = builder
        .with_batch_size(64 * 1024)
        .build()
        .map_err(|e| failed(&e))?;
    reader
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| failed(&e))
}

/// How a run reads its files: with the first file's Arrow schema, for every file whose Parquet
/// schema is the first's.
struct ReadAs {
    options: ArrowReaderOptions,
    parquet: TypePtr,
}

/// Rows per batch handed to the Parquet writer: small inputs (100-row files) are coalesced so
/// statistics and encoding work on large arrays, not on thousands of tiny ones.
pub(super) const WRITE_BATCH_ROWS: usize = 64 * 1024;
