//! Writing one part. The I/O of the lake sink lives here.
//!
//! Hazard, in order: write the Parquet file under a hidden temporary name, fsync it, rename it to
//! its final name, fsync the folder. Readers (and a crash) see either no part or the whole part.
//! A failed write removes its temporary file.

use std::fs::{self, File};
use std::path::{Path, PathBuf};

use arrow::array::RecordBatch;
use arrow::datatypes::Schema;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::errors::ParquetError;
use parquet::file::metadata::{KeyValue, SortingColumn};
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use sluice_core::{FlushId, PartitionSpec, SinkError, TableDef};

use super::config::LakeConfig;
use super::path::partition_dir_name;
use crate::fsio;

/// Part file names start with this.
pub const PART_PREFIX: &str = "part-";

/// Part file names end with this.
pub const PART_SUFFIX: &str = ".parquet";

/// The Parquet footer key under which a part records the [`FlushId`] it was written for.
pub const FLUSH_ID_KEY: &str = "sluice.flush_id";

const SINK: &str = "lake";

/// A part's file name: `part-<first seq>-<last seq>-<uuid v7>.parquet`. The sequence range says
/// which inserts it holds without opening it; the UUID keeps names unique.
pub(crate) fn part_name(first_seq: u64, last_seq: u64) -> String {
    format!(
        "{PART_PREFIX}{first_seq:020}-{last_seq:020}-{}{PART_SUFFIX}",
        uuid::Uuid::now_v7()
    )
}

/// The sequence range of a part file name, when it is one.
pub(crate) fn parse_part_name(name: &str) -> Option<(u64, u64)> {
    let rest = name.strip_prefix(PART_PREFIX)?.strip_suffix(PART_SUFFIX)?;
    let mut fields = rest.splitn(3, '-');
    let first = fields.next()?.parse().ok()?;
    let last = fields.next()?.parse().ok()?;
    fields.next()?;
    Some((first, last))
}

/// Whether a file name is a temporary part left by an interrupted write.
pub(crate) fn is_temporary(name: &str) -> bool {
    name.starts_with(&format!(".{PART_PREFIX}")) && name.ends_with(".tmp")
}

/// A part on disk.
#[derive(Debug)]
pub(crate) struct WrittenPart {
    pub(crate) path: PathBuf,
    pub(crate) bytes: u64,
}

/// Writes `batch` as one part of `table` and makes it durable.
pub(crate) fn write_part(
    config: &LakeConfig,
    table: &TableDef,
    id: &FlushId,
    batch: RecordBatch,
) -> Result<WrittenPart, SinkError> {
    let table_dir = config.root.join(table.name().as_str());
    let key_name = table.partition().key_name();
    let dir = match partition_dir_name(key_name.as_deref(), &id.partition) {
        Some(name) => table_dir.join(name),
        None => table_dir,
    };
    fsio::create_dir_durably(&config.root, &dir).map_err(|e| io_error(&dir, "create", e))?;

    let batch = without_partition_column(table, batch)?;
    let name = part_name(id.first_seq, id.last_seq);
    let tmp = dir.join(format!(".{name}.tmp"));
    let path = dir.join(&name);
    let result = write_file(config, table, id, &batch, &tmp).and_then(|bytes| {
        fs::rename(&tmp, &path).map_err(|e| io_error(&path, "rename", e))?;
        fsio::sync_dir(&dir).map_err(|e| io_error(&dir, "fsync", e))?;
        Ok(bytes)
    });
    match result {
        Ok(bytes) => Ok(WrittenPart { path, bytes }),
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            Err(e)
        }
    }
}

fn write_file(
    config: &LakeConfig,
    table: &TableDef,
    id: &FlushId,
    batch: &RecordBatch,
    tmp: &Path,
) -> Result<u64, SinkError> {
    let mut file = File::create(tmp).map_err(|e| io_error(tmp, "create", e))?;
    let props = properties(config, table, id, &batch.schema())?;
    let mut writer = ArrowWriter::try_new(&mut file, batch.schema(), Some(props))
        .map_err(|e| parquet_error(tmp, e))?;
    writer.write(batch).map_err(|e| parquet_error(tmp, e))?;
    writer.close().map_err(|e| parquet_error(tmp, e))?;
    file.sync_all().map_err(|e| io_error(tmp, "fsync", e))?;
    let bytes = file.metadata().map_err(|e| io_error(tmp, "stat", e))?.len();
    Ok(bytes)
}

fn properties(
    config: &LakeConfig,
    table: &TableDef,
    id: &FlushId,
    schema: &Schema,
) -> Result<WriterProperties, SinkError> {
    let level = ZstdLevel::try_new(config.zstd_level).map_err(|e| {
        SinkError::permanent(SINK, format!("zstd level {}: {e}", config.zstd_level))
    })?;
    let sorting: Vec<SortingColumn> = table
        .sort_by()
        .iter()
        .filter_map(|name| schema.index_of(name).ok())
        .map(|idx| SortingColumn {
            column_idx: idx as i32,
            descending: false,
            nulls_first: true,
        })
        .collect();
    Ok(WriterProperties::builder()
        .set_compression(Compression::ZSTD(level))
        .set_statistics_enabled(EnabledStatistics::Page)
        .set_max_row_group_row_count(Some(config.row_group_rows.max(1)))
        .set_created_by(format!("sluice {}", env!("CARGO_PKG_VERSION")))
        .set_sorting_columns((!sorting.is_empty()).then_some(sorting))
        .set_key_value_metadata(Some(vec![KeyValue::new(
            FLUSH_ID_KEY.to_owned(),
            id.to_string(),
        )]))
        .build())
}

/// Parts of a table partitioned by a column's value leave that column out: its value is in the
/// folder name, as in Delta and Hive tables.
fn without_partition_column(
    table: &TableDef,
    batch: RecordBatch,
) -> Result<RecordBatch, SinkError> {
    let PartitionSpec::Column(column) = table.partition() else {
        return Ok(batch);
    };
    let schema = batch.schema();
    let keep: Vec<usize> = (0..schema.fields().len())
        .filter(|&i| schema.field(i).name() != column)
        .collect();
    batch
        .project(&keep)
        .map_err(|e| SinkError::permanent(SINK, format!("cannot drop partition column: {e}")))
}

fn io_error(path: &Path, action: &str, e: std::io::Error) -> SinkError {
    // Every I/O failure (disk full, permissions fixed by an operator, a flaky mount) may pass.
    SinkError::retriable(SINK, format!("cannot {action} {}: {e}", path.display())).with_source(e)
}

fn parquet_error(path: &Path, e: ParquetError) -> SinkError {
    let message = format!("cannot write {}: {e}", path.display());
    match e {
        ParquetError::External(_) | ParquetError::EOF(_) => {
            SinkError::retriable(SINK, message).with_source(e)
        }
        _ => SinkError::permanent(SINK, message).with_source(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn part_names_carry_their_sequence_range() {
        let name = part_name(7, 1234);
        assert!(
            name.starts_with("part-00000000000000000007-00000000000000001234-"),
            "{name}"
        );
        assert_eq!(parse_part_name(&name), Some((7, 1234)));
        assert_eq!(parse_part_name("part-01a2.parquet"), None);
        assert!(is_temporary(&format!(".{name}.tmp")));
        assert!(!is_temporary(&name));
    }
}
