//! Writing one part: its name, its Parquet settings (the encoding `encoding.rs` picks, page
//! statistics, sort key, the flush's identity in the footer), and its encoding, a large part's
//! columns on several threads. Where the bytes go, and how they
//! are made durable, is [`TableFiles::write`].

use std::io::Write;
use std::sync::{Mutex, PoisonError};

use arrow::array::RecordBatch;
use arrow::datatypes::Schema;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_writer::{ArrowColumnChunk, ArrowColumnWriter, compute_leaves};
use parquet::errors::ParquetError;
use parquet::file::metadata::{KeyValue, ParquetMetaData, SortingColumn};
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use sluice_core::{FlushId, SinkError, TableDef};

use super::config::LakeConfig;
use super::encoding::{Encoding, encoding};
use super::path::partition_dir_name;
use super::schema::{file_schema, to_file_batch};
use super::stats::file_stats;
use super::storage::{FileSync, TableFiles};

/// The Parquet footer key under which a compacted part records how many parts it replaced.
pub const COMPACTED_FROM_KEY: &str = "sluice.compacted_from";

/// The Parquet footer key under which a part records the [`FlushId`] it was written for.
pub(crate) const FLUSH_ID_KEY: &str = "sluice.flush_id";

const SINK: &str = "lake";

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

/// Writes `batches` (a flush's rows in order) as one part of `table` named `name` (a
/// [`super::path::part_name`] of `id`'s range) into `files` (durable unless `sync` says otherwise).
pub(crate) fn write_part(
    config: &LakeConfig,
    table: &TableDef,
    files: &TableFiles,
    id: &FlushId,
    name: &str,
    batches: &[RecordBatch],
    sync: FileSync,
) -> Result<WrittenPart, SinkError> {
    let key_name = table.partition().key_name();
    let folder = partition_dir_name(key_name.as_deref(), &id.partition);
    let schema = file_schema(table);
    let batches = batches
        .iter()
        .map(|batch| to_file_batch(table, &schema, batch))
        .collect::<Result<Vec<_>, _>>()?;
    let footer = KeyValue::new(FLUSH_ID_KEY.to_owned(), id.to_string());
    let file = NewFile {
        folder: folder.as_deref(),
        name,
        footer,
        sync,
    };
    write_file(config, table, files, file, &batches, || {})
}

/// Where and how [`write_file`] writes a file.
pub(crate) struct NewFile<'a> {
    /// Its folder in the table (`None`: the table's own folder).
    pub(crate) folder: Option<&'a str>,
    /// Its name.
    pub(crate) name: &'a str,
    /// The footer entry that says where its rows come from (a flush, or a merge).
    pub(crate) footer: KeyValue,
    /// Whether it is fsynced before it counts as written.
    pub(crate) sync: FileSync,
}

/// Writes `batches` (already in the table's file schema) as `file` of the table. Readers (and
/// a crash) see no file or the whole file ([`TableFiles::write`]). `winding_down` is called
/// once the encoding needs fewer threads than the cores: its last column chunks are being
/// encoded (on one thread: they are encoded), and from there on the write waits on them and
/// then on storage (fsync and rename, or the object store's PUT), so another file's encoding
/// can start on the cores this one leaves idle.
pub(crate) fn write_file(
    config: &LakeConfig,
    table: &TableDef,
    files: &TableFiles,
    file: NewFile<'_>,
    batches: &[RecordBatch],
    winding_down: impl FnOnce() + Send,
) -> Result<WrittenPart, SinkError> {
    let NewFile {
        folder,
        name,
        footer,
        sync,
    } = file;
    let schema = batches
        .first()
        .map(RecordBatch::schema)
        .ok_or_else(|| SinkError::permanent(SINK, "a file needs at least one batch"))?;
    let relative = match folder {
        Some(folder) => format!("{folder}/{name}"),
        None => name.to_owned(),
    };
    let props = properties(config, table, footer, &schema, encoding(config, batches)?)?;
    let describe = || files.describe(&relative);
    let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
    let parallel =
        rows >= PARALLEL_ENCODE_ROWS && !schema.fields().iter().any(|f| f.data_type().is_nested());
    let mut footer = None;
    let bytes = files.write(&relative, sync, |out| {
        let writer = ArrowWriter::try_new(out, schema.clone(), Some(props))
            .map_err(|e| parquet_error(&describe(), e))?;
        let metadata = if parallel {
            encode_columns_in_parallel(writer, batches, config.row_group_rows.max(1), winding_down)
        } else {
            encode(writer, batches).inspect(|_| winding_down())
        }
        .map_err(|e| parquet_error(&describe(), e))?;
        footer = Some(metadata);
        Ok(())
    })?;
    let footer = footer.ok_or_else(|| {
        SinkError::permanent(SINK, format!("{} was written without a footer", describe()))
    })?;
    let stats = file_stats(&schema, batches, &footer);
    Ok(WrittenPart {
        relative,
        bytes,
        stats,
    })
}

/// Files of at least this many rows have their columns encoded on several threads: below it,
/// starting the threads costs more than they save.
const PARALLEL_ENCODE_ROWS: usize = 64 * 1024;

/// The size of the file `batches` (of one layout, in the table's file schema) make encoded as
/// `encoding`, with `footer` in its footer: encoded in memory, written nowhere.
pub(crate) fn encoded_size(
    config: &LakeConfig,
    table: &TableDef,
    batches: &[RecordBatch],
    encoding: Encoding,
    footer: KeyValue,
) -> Result<u64, SinkError> {
    let failed = |e| parquet_error("an estimate's sample", e);
    let Some(schema) = batches.first().map(RecordBatch::schema) else {
        return Ok(0);
    };
    let props = properties(config, table, footer, &schema, encoding)?;
    let mut file = Vec::new();
    let writer = ArrowWriter::try_new(&mut file, schema, Some(props)).map_err(failed)?;
    encode(writer, batches).map_err(failed)?;
    Ok(file.len() as u64)
}

/// Writes `batches` and closes the file: its footer.
fn encode<W: Write + Send>(
    mut writer: ArrowWriter<W>,
    batches: &[RecordBatch],
) -> Result<ParquetMetaData, ParquetError> {
    for batch in batches {
        writer.write(batch)?;
    }
    writer.close()
}

/// Writes `batches` (of a schema without nested columns: one Parquet column per field) as row
/// groups of `row_group_rows` rows, their column chunks encoded on one thread per core; the
/// file is the one [`ArrowWriter`] would write.
///
/// Every column chunk of every row group is one task, and the tasks go largest first (within
/// windows of [`QUEUE_WINDOW`] row groups) to whichever thread is free next: columns differ
/// several times over in cost (a unique string against a small enum), and one column can
/// outweigh all the others, so a thread that is done with a row group's small columns goes on
/// to the next row group's instead of waiting. This thread appends each row group to the file
/// as soon as its chunks, and those of every row group before it, are encoded. Returns the
/// file's footer.
///
/// `winding_down` is called when the first thread finds no chunk left to take: the others are
/// on the file's last chunks, the largest of which can take a thread alone for a while (a
/// million unique strings). Merging many files, a core stood idle at the end of each file's
/// encoding while the next merge waited for it to finish.
// Long because: the worker threads, their shared queue and the in-order assembly of row
// groups live in one thread scope and share its borrows.
fn encode_columns_in_parallel<W: Write + Send>(
    writer: ArrowWriter<W>,
    batches: &[RecordBatch],
    row_group_rows: usize,
    winding_down: impl FnOnce() + Send,
) -> Result<ParquetMetaData, ParquetError> {
    let Some(schema) = batches.first().map(RecordBatch::schema) else {
        return encode(writer, batches).inspect(|_| winding_down());
    };
    let width = schema.fields().len();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let (mut file, factory) = writer.into_serialized_writer()?;
    let groups = row_groups(batches, row_group_rows);
    let mut tasks = Vec::with_capacity(groups.len() * width);
    for (group, slices) in groups.iter().enumerate() {
        let writers = factory.create_column_writers(group)?;
        if writers.len() != width {
            return Err(ParquetError::General(
                "nested columns are not encoded in parallel".into(),
            ));
        }
        for (index, writer) in writers.into_iter().enumerate() {
            let cost = column_bytes(slices, index);
            tasks.push(ChunkTask {
                group,
                index,
                writer,
                cost,
            });
        }
    }
    tasks.sort_by_key(|task| (task.group / QUEUE_WINDOW, std::cmp::Reverse(task.cost)));
    let queue = Mutex::new(tasks.into_iter());
    let winding_down = Mutex::new(Some(winding_down));
    std::thread::scope(|scope| {
        let (sender, receiver) = std::sync::mpsc::channel();
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let (schema, groups, queue, sender) = (&schema, &groups, &queue, sender.clone());
                let winding_down = &winding_down;
                scope.spawn(move || {
                    loop {
                        let next = queue.lock().unwrap_or_else(PoisonError::into_inner).next();
                        let Some(task) = next else {
                            let first = winding_down
                                .lock()
                                .unwrap_or_else(PoisonError::into_inner)
                                .take();
                            if let Some(winding_down) = first {
                                winding_down();
                            }
                            return;
                        };
                        let (group, index) = (task.group, task.index);
                        let encoded = encode_chunk(schema, &groups[group], task)
                            .map(|chunk| (group, index, chunk));
                        let failed = encoded.is_err();
                        // A closed channel: the file failed; stop encoding for it.
                        if sender.send(encoded).is_err() || failed {
                            return;
                        }
                    }
                })
            })
            .collect();
        drop(sender);
        let mut pending: Vec<Vec<Option<ArrowColumnChunk>>> = groups
            .iter()
            .map(|_| std::iter::repeat_with(|| None).take(width).collect())
            .collect();
        let mut written = 0;
        let appended = receiver.iter().try_for_each(|encoded| {
            let (group, index, chunk) = encoded?;
            pending[group][index] = Some(chunk);
            while written < groups.len() && pending[written].iter().all(Option::is_some) {
                let mut row_group = file.next_row_group()?;
                for chunk in pending[written].drain(..).flatten() {
                    chunk.append_to_row_group(&mut row_group)?;
                }
                row_group.close()?;
                written += 1;
            }
            Ok::<_, ParquetError>(())
        });
        // Dropping the receiver stops the threads after their current chunk.
        drop(receiver);
        // Every thread joined: one left unjoined that panicked would panic the scope.
        let mut panicked = false;
        for handle in handles {
            panicked |= handle.join().is_err();
        }
        appended?;
        if panicked || written < groups.len() {
            return Err(ParquetError::General("an encoding thread panicked".into()));
        }
        Ok(())
    })?;
    file.close()
}

/// Row groups whose column chunks are taken largest first together. The window bounds what
/// waits in memory: chunks encoded ahead wait for the row groups before theirs to be appended,
/// and without it a file of many row groups would encode every row group's largest column
/// before appending the first.
const QUEUE_WINDOW: usize = 2;

/// One column chunk to encode: column `index` of row group `group`.
struct ChunkTask {
    group: usize,
    index: usize,
    writer: ArrowColumnWriter,
    /// The memory of the column's values in the row group, for the order.
    cost: usize,
}

fn encode_chunk(
    schema: &Schema,
    slices: &[RecordBatch],
    task: ChunkTask,
) -> Result<ArrowColumnChunk, ParquetError> {
    let ChunkTask {
        index, mut writer, ..
    } = task;
    let field = schema.field(index);
    for slice in slices {
        for leaf in compute_leaves(field, slice.column(index))? {
            writer.write(&leaf)?;
        }
    }
    writer.close()
}

/// The memory of column `index` in `slices` (a slice counts only its share of its buffers).
fn column_bytes(slices: &[RecordBatch], index: usize) -> usize {
    slices
        .iter()
        .map(|slice| {
            slice
                .column(index)
                .to_data()
                .get_slice_memory_size()
                .unwrap_or(0)
        })
        .sum()
}

/// `batches` cut into row groups of `rows` rows (the last may be shorter), each a list of
/// slices.
fn row_groups(batches: &[RecordBatch], rows: usize) -> Vec<Vec<RecordBatch>> {
    let mut groups = Vec::new();
    let mut current = Vec::new();
    let mut filled = 0;
    for batch in batches {
        let mut offset = 0;
        while offset < batch.num_rows() {
            let take = (rows - filled).min(batch.num_rows() - offset);
            current.push(batch.slice(offset, take));
            offset += take;
            filled += take;
            if filled == rows {
                groups.push(std::mem::take(&mut current));
                filled = 0;
            }
        }
    }
    if !current.is_empty() {
        groups.push(current);
    }
    groups
}

pub(crate) fn properties(
    config: &LakeConfig,
    table: &TableDef,
    footer: KeyValue,
    schema: &Schema,
    encoding: Encoding,
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
    Ok(encoding
        .apply(WriterProperties::builder())
        .set_statistics_enabled(EnabledStatistics::Page)
        .set_max_row_group_row_count(Some(config.row_group_rows.max(1)))
        .set_created_by(format!("sluice {}", env!("CARGO_PKG_VERSION")))
        .set_sorting_columns((!sorting.is_empty()).then_some(sorting))
        .set_key_value_metadata(Some(vec![footer]))
        .build())
}

pub(crate) fn parquet_error(what: &str, e: ParquetError) -> SinkError {
    let message = format!("cannot write {what}: {e}");
    match e {
        ParquetError::External(_) | ParquetError::EOF(_) => {
            SinkError::retriable(SINK, message).with_source(e)
        }
        _ => SinkError::permanent(SINK, message).with_source(e),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::sync::Arc;

    use arrow::array::{Float64Array, Int64Array, StringArray};
    use sluice_core::{Column, ColumnType, FlushPolicy, TableLayout, TableName};

    use super::*;
    use crate::lake::path::compacted_name;

    /// Table `t`: a required `id`, a `service` and a `latency`, sorted by `sort_by`.
    pub(crate) fn three_columns(sort_by: &[&str]) -> TableDef {
        let layout = TableLayout {
            columns: vec![
                Column::new("id", ColumnType::Int64).required(),
                Column::new("service", ColumnType::String),
                Column::new("latency", ColumnType::Float64),
            ],
            partition_by: String::new(),
            sort_by: sort_by.iter().map(|&c| c.to_owned()).collect(),
        };
        TableDef::new(TableName::new("t").unwrap(), layout, FlushPolicy::default()).unwrap()
    }

    /// Rows `from..to` of [`three_columns`]: a null service every 7th row, a null latency
    /// every 5th, and a NaN latency at row `nan` if it is among them.
    pub(crate) fn rows(table: &TableDef, from: i64, to: i64, nan: Option<i64>) -> RecordBatch {
        let ids = Int64Array::from_iter_values(from..to);
        let services: StringArray = (from..to)
            .map(|i| (i % 7 != 0).then(|| format!("service-{}", i % 13)))
            .collect();
        let latencies: Float64Array = (from..to)
            .map(|i| match i {
                i if Some(i) == nan => Some(f64::NAN),
                i => (i % 5 != 0).then_some(i as f64 / 4.0),
            })
            .collect();
        RecordBatch::try_new(
            table.schema().arrow().clone(),
            vec![Arc::new(ids), Arc::new(services), Arc::new(latencies)],
        )
        .unwrap()
    }

    #[test]
    fn large_parts_encoded_in_parallel_read_back_whole_in_row_groups() {
        use arrow::array::Array;
        use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

        let rows = 150_000;
        let table = three_columns(&["id"]);
        let batch = self::rows(&table, 0, rows, None);
        // Uneven input batches, cut across row-group boundaries.
        let batches = [
            batch.slice(0, 70_001),
            batch.slice(70_001, 9),
            batch.slice(70_010, 79_990),
        ];
        let dir = tempfile::tempdir().unwrap();
        let mut config = LakeConfig::new(dir.path());
        config.row_group_rows = 40_000;
        let files = TableFiles::Folder {
            root: dir.path().to_owned(),
            dir: dir.path().join("t"),
        };
        let footer = KeyValue::new("k".to_owned(), "v".to_owned());
        let file = NewFile {
            folder: None,
            name: "part-x.parquet",
            footer,
            sync: FileSync::Cached,
        };
        // Told once that the threads run out of chunks to take, whichever thread sees it.
        let wound_down = std::sync::atomic::AtomicUsize::new(0);
        let part = write_file(&config, &table, &files, file, &batches, || {
            wound_down.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        })
        .unwrap();
        assert_eq!(wound_down.into_inner(), 1);
        let file = std::fs::File::open(dir.path().join("t").join(&part.relative)).unwrap();
        let reader = ParquetRecordBatchReaderBuilder::try_new(file).unwrap();
        let metadata = reader.metadata().clone();
        assert_eq!(metadata.num_row_groups(), 4);
        assert_eq!(metadata.file_metadata().num_rows(), rows);
        let read: Vec<RecordBatch> = reader.build().unwrap().map(Result::unwrap).collect();
        let read = arrow::compute::concat_batches(&read[0].schema(), &read).unwrap();
        assert_eq!(read.num_rows(), batch.num_rows());
        for (index, column) in batch.columns().iter().enumerate() {
            assert_eq!(
                read.column(index).to_data(),
                column.to_data(),
                "column {index}"
            );
            assert_eq!(read.column(index).null_count(), column.null_count());
        }
    }

    #[test]
    fn small_parts_are_lz4_and_plain_and_large_ones_zstd_with_dictionaries_where_they_pay() {
        use parquet::basic::{Compression, Encoding as PageEncoding};
        use parquet::file::reader::{FileReader, SerializedFileReader};

        let layout = TableLayout {
            columns: vec![
                Column::new("id", ColumnType::Int64).required(),
                Column::new("service", ColumnType::String).required(),
            ],
            partition_by: String::new(),
            sort_by: Vec::new(),
        };
        let table =
            TableDef::new(TableName::new("t").unwrap(), layout, FlushPolicy::default()).unwrap();
        let rows = 100_000;
        let batch = RecordBatch::try_new(
            table.schema().arrow().clone(),
            vec![
                std::sync::Arc::new(arrow::array::Int64Array::from_iter_values(0..rows)),
                std::sync::Arc::new(arrow::array::StringArray::from_iter_values(
                    (0..rows).map(|i| ["api", "web", "worker"][i as usize % 3]),
                )),
            ],
        )
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let files = TableFiles::Folder {
            root: dir.path().to_owned(),
            dir: dir.path().join("t"),
        };
        let mut config = LakeConfig::new(dir.path());
        // Below: the first 1,000 rows (a slice counts only its own rows, not the buffer it
        // shares); above: all of them.
        config.lz4_below = 100_000 * 8;
        // Each column chunk's codec, and whether any of its pages is dictionary-encoded.
        let written = |config: &LakeConfig, batch: RecordBatch| {
            let footer = KeyValue::new("k".to_owned(), "v".to_owned());
            let file = NewFile {
                folder: None,
                name: &compacted_name(),
                footer,
                sync: FileSync::Cached,
            };
            let part = write_file(config, &table, &files, file, &[batch], || {}).unwrap();
            let file = std::fs::File::open(dir.path().join("t").join(&part.relative)).unwrap();
            let reader = SerializedFileReader::new(file).unwrap();
            let chunks: Vec<(Compression, bool)> = reader
                .metadata()
                .row_groups()
                .iter()
                .flat_map(|group| group.columns())
                .map(|chunk| {
                    let dictionary = chunk.encodings().any(|e| {
                        matches!(
                            e,
                            PageEncoding::RLE_DICTIONARY | PageEncoding::PLAIN_DICTIONARY
                        )
                    });
                    (chunk.compression(), dictionary)
                })
                .collect();
            assert_eq!(chunks.len(), 2);
            chunks
        };
        for (compression, dictionary) in written(&config, batch.slice(0, 1000)) {
            assert_eq!((compression, dictionary), (Compression::LZ4_RAW, false));
        }
        // The sequence of ids takes delta values instead (`encoding.rs`); the service keeps
        // its dictionary.
        let large = written(&config, batch.clone());
        for (compression, _) in &large {
            assert!(matches!(compression, Compression::ZSTD(_)), "{compression}");
        }
        assert_eq!(
            large.iter().map(|&(_, d)| d).collect::<Vec<_>>(),
            [false, true]
        );
        config.lz4_below = 0;
        // One row is too few to judge by: dictionaries stay.
        for (compression, dictionary) in written(&config, batch.slice(0, 1)) {
            assert!(matches!(compression, Compression::ZSTD(_)), "{compression}");
            assert!(dictionary, "a zstd part has no dictionary pages");
        }
    }
}
