//! Writing one part: its name, its Parquet settings (zstd, or LZ4 for a small part; page
//! statistics, sort key, the flush's identity in the footer). Where the bytes go, and how they are made durable, is
//! [`TableFiles::write`].

use arrow::array::RecordBatch;
use arrow::datatypes::{Schema, SchemaRef};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::errors::ParquetError;
use parquet::file::metadata::{KeyValue, SortingColumn};
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use sluice_core::{FlushId, SinkError, TableDef};

use super::config::LakeConfig;
use super::path::partition_dir_name;
use super::schema::to_file_batch;
use super::stats::file_stats;
use super::storage::TableFiles;

/// The Parquet footer key under which a compacted part records how many parts it replaced.
pub const COMPACTED_FROM_KEY: &str = "sluice.compacted_from";

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

/// A compacted part's file name: `part-c-<uuid v7>.parquet` (its rows come from many flushes,
/// possibly of several writers, so no sequence range describes them).
pub(crate) fn compacted_name() -> String {
    format!("{PART_PREFIX}c-{}{PART_SUFFIX}", uuid::Uuid::now_v7())
}

/// Whether a file name is a temporary part left by an interrupted write.
pub(crate) fn is_temporary(name: &str) -> bool {
    name.starts_with(&format!(".{PART_PREFIX}")) && name.ends_with(".tmp")
}

/// Whether a written file is fsynced before it counts as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FileSync {
    /// File and folder fsynced: the file survives power loss once written. Every flush and
    /// every merge.
    Durable,
    /// Left to the page cache: only for throwaway bulk loads (the lab's data sets).
    Cached,
}

/// A part written, not yet in the table's log.
#[derive(Debug)]
pub(crate) struct WrittenPart {
    /// Its path from the table's folder, `/`-separated, as written (not URI-escaped).
    pub(crate) relative: String,
    /// Its size.
    pub(crate) bytes: u64,
    /// Its Delta statistics.
    pub(crate) stats: String,
}

/// Writes `batch` as one part of `table` into `files` (durable unless `sync` says otherwise).
/// `schema` is the table's file schema ([`super::schema::file_schema`]).
pub(crate) fn write_part(
    config: &LakeConfig,
    table: &TableDef,
    files: &TableFiles,
    schema: &SchemaRef,
    id: &FlushId,
    batch: &RecordBatch,
    sync: FileSync,
) -> Result<WrittenPart, SinkError> {
    let key_name = table.partition().key_name();
    let folder = partition_dir_name(key_name.as_deref(), &id.partition);
    let batch = to_file_batch(table, schema, batch)?;
    let name = part_name(id.first_seq, id.last_seq);
    let footer = KeyValue::new(FLUSH_ID_KEY.to_owned(), id.to_string());
    write_file(
        config,
        table,
        files,
        folder.as_deref(),
        &name,
        &[batch],
        footer,
        sync,
    )
}

/// Writes `batches` (already in the table's file schema) as one file named `name` in `folder`
/// of the table (`None`: the table's own folder). Readers (and a crash) see no file or the
/// whole file ([`TableFiles::write`]).
#[allow(clippy::too_many_arguments)]
pub(crate) fn write_file(
    config: &LakeConfig,
    table: &TableDef,
    files: &TableFiles,
    folder: Option<&str>,
    name: &str,
    batches: &[RecordBatch],
    footer: KeyValue,
    sync: FileSync,
) -> Result<WrittenPart, SinkError> {
    let schema = batches
        .first()
        .map(RecordBatch::schema)
        .ok_or_else(|| SinkError::permanent(SINK, "a file needs at least one batch"))?;
    let relative = match folder {
        Some(folder) => format!("{folder}/{name}"),
        None => name.to_owned(),
    };
    let props = properties(config, table, footer, &schema, codec(config, batches)?)?;
    let describe = || files.describe(&relative);
    let bytes = files.write(&relative, sync, |out| {
        let mut writer = ArrowWriter::try_new(out, schema.clone(), Some(props))
            .map_err(|e| parquet_error(&describe(), e))?;
        for batch in batches {
            writer
                .write(batch)
                .map_err(|e| parquet_error(&describe(), e))?;
        }
        writer.close().map_err(|e| parquet_error(&describe(), e))?;
        Ok(())
    })?;
    Ok(WrittenPart {
        relative,
        bytes,
        stats: file_stats(&schema, batches),
    })
}

/// The codec for a file of `batches`: LZ4 below [`LakeConfig::lz4_below`], else zstd.
fn codec(config: &LakeConfig, batches: &[RecordBatch]) -> Result<Compression, SinkError> {
    // The memory of the rows themselves: a slice of a larger batch counts only its share.
    let bytes: u64 = batches
        .iter()
        .flat_map(RecordBatch::columns)
        .map(|column| {
            column
                .to_data()
                .get_slice_memory_size()
                .map_or(u64::MAX, |n| n as u64)
        })
        .fold(0, u64::saturating_add);
    if bytes < config.lz4_below {
        return Ok(Compression::LZ4_RAW);
    }
    let level = ZstdLevel::try_new(config.zstd_level).map_err(|e| {
        SinkError::permanent(SINK, format!("zstd level {}: {e}", config.zstd_level))
    })?;
    Ok(Compression::ZSTD(level))
}

fn properties(
    config: &LakeConfig,
    table: &TableDef,
    footer: KeyValue,
    schema: &Schema,
    compression: Compression,
) -> Result<WriterProperties, SinkError> {
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
        .set_compression(compression)
        .set_statistics_enabled(EnabledStatistics::Page)
        .set_max_row_group_row_count(Some(config.row_group_rows.max(1)))
        .set_created_by(format!("sluice {}", env!("CARGO_PKG_VERSION")))
        .set_sorting_columns((!sorting.is_empty()).then_some(sorting))
        .set_key_value_metadata(Some(vec![footer]))
        .build())
}

fn parquet_error(what: &str, e: ParquetError) -> SinkError {
    let message = format!("cannot write {what}: {e}");
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
    fn small_parts_are_lz4_and_large_ones_zstd() {
        let column: arrow::array::ArrayRef =
            std::sync::Arc::new(arrow::array::Int64Array::from_iter_values(0..100_000));
        let batch = RecordBatch::try_from_iter([("id", column)]).unwrap();
        let mut config = LakeConfig::new("unused");
        config.lz4_below = 100_000 * 8;
        // A slice counts only its own rows, not the buffer it shares.
        assert_eq!(
            codec(&config, &[batch.slice(0, 1000)]).unwrap(),
            Compression::LZ4_RAW
        );
        assert!(matches!(
            codec(&config, std::slice::from_ref(&batch)).unwrap(),
            Compression::ZSTD(_)
        ));
        config.lz4_below = 0;
        assert!(matches!(
            codec(&config, &[batch.slice(0, 1)]).unwrap(),
            Compression::ZSTD(_)
        ));
    }

    #[test]
    fn part_names_carry_their_sequence_range_and_temporaries_are_recognised() {
        let name = part_name(7, 1234);
        assert!(
            name.starts_with("part-00000000000000000007-00000000000000001234-"),
            "{name}"
        );
        assert!(is_temporary(&format!(".{name}.tmp")));
        assert!(!is_temporary(&name));
    }
}
