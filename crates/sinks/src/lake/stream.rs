//! Writing one file as its rows stream in: the rows come in pieces, read on one thread per
//! core, and each piece is encoded into the file's column writers as soon as it is read, then
//! freed. A merge of ten thousand small parts never holds its rows all at once: what it holds
//! is the file's encoded pages (about the size of the file) and a few pieces read ahead.
//!
//! The same threads read and encode. A free thread encodes the next piece into the column
//! that is furthest behind, or reads the next piece when too few are read ahead of the slowest
//! column (or no column has a piece to take). A piece is freed once every column has taken it;
//! at most [`AHEAD_PER_THREAD`] pieces per thread are read and not yet taken by every column,
//! so a column that costs more than the others (unique strings) slows the reads down to its
//! pace rather than letting pieces pile up. Each column's writer takes its pieces in order, so
//! the file holds the rows in the order of the pieces; this thread appends each row group to
//! the file once all its column chunks are encoded, as [`super::part`]'s parallel encoding
//! does.

use std::collections::BTreeMap;
use std::collections::btree_map::Entry;
use std::io::Write;
use std::sync::mpsc::{Sender, channel};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_writer::{
    ArrowColumnChunk, ArrowColumnWriter, ArrowRowGroupWriterFactory, compute_leaves,
};
use parquet::errors::ParquetError;
use parquet::file::metadata::ParquetMetaData;
use sluice_core::{SinkError, TableDef};

use super::config::LakeConfig;
use super::encoding::Encoding;
use super::part::{NewFile, WrittenPart, parquet_error, properties};
use super::stats::{ColumnRows, stats_json};
use super::storage::TableFiles;

const SINK: &str = "lake";

/// Read-ahead bound: pieces read (or being read) that some column has not taken yet, per
/// thread.
const AHEAD_PER_THREAD: usize = 4;

/// Most pieces one column takes in one go: enough to keep the lock out of the way, few enough
/// that the pieces are freed soon.
const PIECES_PER_TAKE: usize = 4;

/// The rows of a streamed file: `count` pieces, piece `i` being what `read(i)` returns. Every
/// piece is read exactly once, on whichever thread is free.
pub(crate) struct Pieces<R> {
    pub(crate) count: usize,
    pub(crate) read: R,
    /// The rows of all the pieces, when known (the inputs' log entries say): the encoding is
    /// fitted to the first piece for a file of that many rows.
    pub(crate) rows: Option<u64>,
}

/// What [`write_streamed`] did.
#[derive(Debug)]
pub(crate) enum Streamed {
    /// The file, and the rows in it.
    Written(WrittenPart, u64),
    /// The pieces do not all have the first batch's layout (files written under another
    /// layout of the table), or it has nested columns, or there are no rows: nothing was
    /// written, and the rows are for a writer that can bring them into one layout first.
    NotStreamable,
}

/// Writes `pieces` as `file` of the table, encoded as `encoding` says, streaming as the
/// module says. Readers (and a crash) see no file or the whole file, as with
/// [`super::part::write_file`]. `all_read` is called once every piece has been read: from
/// there on only encoding is left, and another file's reads can start.
pub(crate) fn write_streamed<R>(
    config: &LakeConfig,
    table: &TableDef,
    files: &TableFiles,
    file: NewFile<'_>,
    encoding: Encoding,
    pieces: Pieces<R>,
    all_read: impl FnOnce() + Send,
) -> Result<Streamed, SinkError>
where
    R: Fn(usize) -> Result<Vec<RecordBatch>, SinkError> + Sync,
{
    let NewFile {
        folder,
        name,
        footer,
        sync,
    } = file;
    let relative = match folder {
        Some(folder) => format!("{folder}/{name}"),
        None => name.to_owned(),
    };
    let describe = files.describe(&relative);
    let Some((first, schema)) = first_piece(&pieces)? else {
        return Ok(Streamed::NotStreamable);
    };
    // Fitted to the first piece, the rows at hand.
    let group_rows = pieces.rows.map_or(config.row_group_rows, |rows| {
        config
            .row_group_rows
            .min(usize::try_from(rows).unwrap_or(usize::MAX))
    });
    let encoding = encoding.fitted_to(&first, group_rows);
    let props = properties(config, table, footer, &schema, encoding)?;
    let stream = Stream {
        schema: schema.clone(),
        pieces: &pieces,
        row_group_rows: config.row_group_rows.max(1),
        describe: &describe,
    };
    let mut all_read = Some(all_read);
    let (mut encoded, mut mixed) = (None, false);
    let written = files.write(&relative, sync, |out| {
        let writer = ArrowWriter::try_new(out, schema.clone(), Some(props))
            .map_err(|e| parquet_error(&describe, e))?;
        encoded = stream.encode(writer, first, &mut all_read)?;
        mixed = encoded.is_none();
        // Abandons the file: a streamed write is whole or not there.
        match encoded {
            Some(_) => Ok(()),
            None => Err(SinkError::permanent(SINK, "the pieces differ in layout")),
        }
    });
    // Passed whatever happened, even if the pieces were not all read.
    drop(all_read);
    if mixed {
        return Ok(Streamed::NotStreamable);
    }
    let bytes = written?;
    let (footer, columns) = encoded.ok_or_else(|| {
        SinkError::permanent(SINK, format!("{describe} was written without a footer"))
    })?;
    let rows = columns.first().map_or(0, ColumnRows::rows);
    let stats = stats_json(&schema, &columns, &footer);
    Ok(Streamed::Written(
        WrittenPart {
            relative,
            bytes,
            stats,
        },
        rows as u64,
    ))
}

/// The first piece, which gives the file its layout, and that layout; `None` when the pieces
/// cannot be streamed from it: no rows, nested columns, or batches of another layout within it.
fn first_piece<R>(pieces: &Pieces<R>) -> Result<Option<(Vec<RecordBatch>, SchemaRef)>, SinkError>
where
    R: Fn(usize) -> Result<Vec<RecordBatch>, SinkError> + Sync,
{
    if pieces.count == 0 {
        return Ok(None);
    }
    let first = (pieces.read)(0)?;
    let Some(schema) = first.first().map(RecordBatch::schema) else {
        return Ok(None);
    };
    let nested = schema.fields().iter().any(|f| f.data_type().is_nested());
    if nested || first.iter().any(|b| b.schema() != schema) {
        return Ok(None);
    }
    Ok(Some((first, schema)))
}

/// One streamed file's encoding.
struct Stream<'a, R> {
    schema: SchemaRef,
    pieces: &'a Pieces<R>,
    row_group_rows: usize,
    describe: &'a str,
}

/// A column chunk encoded: row group, column, chunk.
type Encoded = (usize, usize, ArrowColumnChunk);

impl<R> Stream<'_, R>
where
    R: Fn(usize) -> Result<Vec<RecordBatch>, SinkError> + Sync,
{
    /// Encodes every piece (`first` being piece 0, already read) through `writer` and closes
    /// it: the footer and each column's counts, or `None` when a piece has another layout.
    // Long because: the reading threads, the column encoders and the file writer live in
    // one thread scope and share its borrows.
    fn encode<W: Write + Send>(
        &self,
        writer: ArrowWriter<W>,
        first: Vec<RecordBatch>,
        all_read: &mut Option<impl FnOnce() + Send>,
    ) -> Result<Option<(ParquetMetaData, Vec<ColumnRows>)>, SinkError> {
        let failed = |e| parquet_error(self.describe, e);
        let width = self.schema.fields().len();
        let (mut file, factory) = writer.into_serialized_writer().map_err(failed)?;
        let shared = Shared {
            state: Mutex::new(State::new(first, self.pieces.count, width)),
            changed: Condvar::new(),
            factory,
        };
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let all_read = Mutex::new(all_read.take());
        if self.pieces.count == 1 {
            take_and_call(&all_read);
        }
        let appended = std::thread::scope(|scope| {
            let (sender, receiver) = channel::<Encoded>();
            let handles: Vec<_> = (0..threads)
                .map(|_| {
                    let (shared, sender, all_read) = (&shared, sender.clone(), &all_read);
                    scope.spawn(move || self.work(shared, threads, sender, all_read))
                })
                .collect();
            drop(sender);
            let mut pending: BTreeMap<usize, Vec<Option<ArrowColumnChunk>>> = BTreeMap::new();
            let mut written = 0;
            let appended = receiver.iter().try_for_each(|(group, index, chunk)| {
                let chunks = pending
                    .entry(group)
                    .or_insert_with(|| std::iter::repeat_with(|| None).take(width).collect());
                chunks[index] = Some(chunk);
                while pending
                    .get(&written)
                    .is_some_and(|chunks| chunks.iter().all(Option::is_some))
                {
                    let chunks = pending.remove(&written).unwrap_or_default();
                    let mut row_group = file.next_row_group()?;
                    for chunk in chunks.into_iter().flatten() {
                        chunk.append_to_row_group(&mut row_group)?;
                    }
                    row_group.close()?;
                    written += 1;
                }
                Ok::<_, ParquetError>(())
            });
            if let Err(e) = &appended {
                shared.stop(SinkError::permanent(
                    SINK,
                    format!("{}: {e}", self.describe),
                ));
            }
            // Dropping the receiver stops the threads after their current task.
            drop(receiver);
            let mut panicked = false;
            for handle in handles {
                panicked |= handle.join().is_err();
            }
            if panicked {
                shared.stop(SinkError::retriable(SINK, "an encoding thread panicked"));
            }
            appended.map(|()| pending.is_empty())
        });
        let state = shared
            .state
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(e) = state.failure {
            return Err(e);
        }
        if state.mixed {
            return Ok(None);
        }
        let complete = appended.map_err(failed)?;
        let columns: Vec<ColumnRows> = state
            .columns
            .into_iter()
            .map(|column| column.map(|c| c.rows))
            .collect::<Option<_>>()
            .filter(|_| complete && state.next.iter().all(|&n| n == self.pieces.count))
            .ok_or_else(|| {
                SinkError::permanent(
                    SINK,
                    format!("{} was left with columns unencoded", self.describe),
                )
            })?;
        let footer = file.close().map_err(failed)?;
        Ok(Some((footer, columns)))
    }

    /// One thread's share: takes tasks until there are none left, or the file has failed.
    fn work(
        &self,
        shared: &Shared,
        threads: usize,
        chunks: Sender<Encoded>,
        all_read: &Mutex<Option<impl FnOnce() + Send>>,
    ) {
        let _stop = StopOnPanic(shared);
        let mut state = shared.lock();
        loop {
            if state.failure.is_some() || state.mixed {
                return;
            }
            match state.next_task(self.pieces.count, threads * AHEAD_PER_THREAD, threads) {
                Task::Done => {
                    shared.changed.notify_all();
                    return;
                }
                Task::Wait => {
                    state = shared
                        .changed
                        .wait(state)
                        .unwrap_or_else(PoisonError::into_inner);
                }
                Task::Read(piece) => {
                    drop(state);
                    let read = (self.pieces.read)(piece);
                    state = shared.lock();
                    match read {
                        Ok(batches) if batches.iter().all(|b| b.schema() == self.schema) => {
                            state.read[piece] = Some(batches.into());
                            state.reads_done += 1;
                        }
                        Ok(_) => state.mixed = true,
                        Err(e) => {
                            state.failure.get_or_insert(e);
                        }
                    }
                    if state.reads_done == self.pieces.count {
                        drop(state);
                        take_and_call(all_read);
                        state = shared.lock();
                    }
                    shared.changed.notify_all();
                }
                Task::Encode(mut take) => {
                    drop(state);
                    let last = take.to() == self.pieces.count;
                    let done = self.encode_column(shared, &mut take, last, &chunks);
                    // This thread's hold on the pieces ends before the state can free them.
                    let Take {
                        index,
                        column,
                        from,
                        pieces,
                    } = *take;
                    let to = from + pieces.len();
                    drop(pieces);
                    state = shared.lock();
                    match done {
                        Ok(()) => {
                            state.columns[index] = Some(column);
                            state.next[index] = to;
                            for piece in from..to {
                                state.taken[piece] += 1;
                                if state.taken[piece] == state.columns.len() {
                                    state.read[piece] = None;
                                }
                            }
                        }
                        Err(e) => {
                            state.failure.get_or_insert(e);
                        }
                    }
                    shared.changed.notify_all();
                }
            }
        }
    }

    /// Writes `take`'s pieces into its column, closing (and sending on `chunks`) each row group
    /// the column fills, and with `last` the column's final one.
    fn encode_column(
        &self,
        shared: &Shared,
        take: &mut Take,
        last: bool,
        chunks: &Sender<Encoded>,
    ) -> Result<(), SinkError> {
        let failed = |e| parquet_error(self.describe, e);
        let index = take.index;
        let field = self.schema.field(index);
        let column = &mut take.column;
        let close = |column: &mut ColumnState| -> Result<(), SinkError> {
            if let Some(writer) = column.writer.take() {
                let chunk = writer.close().map_err(failed)?;
                chunks.send((column.group, index, chunk)).map_err(|_| {
                    SinkError::permanent(SINK, format!("{}: the file was abandoned", self.describe))
                })?;
            }
            column.group += 1;
            column.in_group = 0;
            Ok(())
        };
        for batch in take.pieces.iter().flat_map(|piece| piece.iter()) {
            let values = batch.column(index);
            column.rows.add(values);
            let mut offset = 0;
            while offset < values.len() {
                let rows = (self.row_group_rows - column.in_group).min(values.len() - offset);
                let writer = match &mut column.writer {
                    Some(writer) => writer,
                    None => column.writer.insert(shared.writer(column.group, index)?),
                };
                for leaf in compute_leaves(field, &values.slice(offset, rows)).map_err(failed)? {
                    writer.write(&leaf).map_err(failed)?;
                }
                offset += rows;
                column.in_group += rows;
                if column.in_group == self.row_group_rows {
                    close(column)?;
                }
            }
        }
        if last && column.in_group > 0 {
            close(column)?;
        }
        Ok(())
    }
}

/// Calls the function in `slot` if it is still there.
fn take_and_call(slot: &Mutex<Option<impl FnOnce()>>) {
    let call = slot.lock().unwrap_or_else(PoisonError::into_inner).take();
    if let Some(call) = call {
        call();
    }
}

/// Fails the file if its thread panics: the others would otherwise wait for the column it
/// held.
struct StopOnPanic<'a>(&'a Shared);

impl Drop for StopOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0
                .stop(SinkError::retriable(SINK, "an encoding thread panicked"));
        }
    }
}

/// What the threads share.
struct Shared {
    state: Mutex<State>,
    changed: Condvar,
    /// Makes each row group's column writers.
    factory: ArrowRowGroupWriterFactory,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Fails the file: the threads take no more tasks.
    fn stop(&self, error: SinkError) {
        self.lock().failure.get_or_insert(error);
        self.changed.notify_all();
    }

    /// Column `index`'s writer for row group `group`. The first column to reach a row group
    /// makes the writers of all its columns; the others take theirs.
    fn writer(&self, group: usize, index: usize) -> Result<ArrowColumnWriter, SinkError> {
        let mut state = self.lock();
        if let Entry::Vacant(vacant) = state.writers.entry(group) {
            let writers = self.factory.create_column_writers(group).map_err(|e| {
                SinkError::permanent(SINK, format!("cannot start row group {group}: {e}"))
            })?;
            vacant.insert(writers.into_iter().map(Some).collect());
        }
        let writers = state.writers.get_mut(&group);
        let writer = writers
            .and_then(|w| w.get_mut(index))
            .and_then(Option::take);
        if state
            .writers
            .get(&group)
            .is_some_and(|w| w.iter().all(Option::is_none))
        {
            state.writers.remove(&group);
        }
        writer.ok_or_else(|| {
            SinkError::permanent(
                SINK,
                format!("row group {group} has no writer for column {index}"),
            )
        })
    }
}

/// Where the file's encoding stands.
struct State {
    /// The first piece not yet handed to a thread to read.
    next_read: usize,
    /// Pieces read.
    reads_done: usize,
    /// Each piece's batches, from its read until every column has taken it.
    read: Vec<Option<Arc<[RecordBatch]>>>,
    /// How many columns have taken each piece.
    taken: Vec<usize>,
    /// Each column's next piece to take.
    next: Vec<usize>,
    /// Each column's encoding, `None` while a thread has it.
    columns: Vec<Option<ColumnState>>,
    /// Column writers made for a row group and not yet taken by their column.
    writers: BTreeMap<usize, Vec<Option<ArrowColumnWriter>>>,
    /// Why the file failed.
    failure: Option<SinkError>,
    /// A piece had another layout than the first.
    mixed: bool,
}

/// One column's encoding.
#[derive(Default)]
struct ColumnState {
    /// The current row group's writer, once the column has rows in it.
    writer: Option<ArrowColumnWriter>,
    /// The row group the column is in.
    group: usize,
    /// Rows written into the current row group.
    in_group: usize,
    /// What the statistics take from the column's rows.
    rows: ColumnRows,
}

/// What a thread does next.
enum Task {
    Read(usize),
    /// Boxed: a column's state is large, and the other tasks are small.
    Encode(Box<Take>),
    /// Nothing to take until another thread finishes its task.
    Wait,
    /// Every column has taken every piece.
    Done,
}

/// Pieces `from..` taken to encode into column `index`.
struct Take {
    index: usize,
    column: ColumnState,
    from: usize,
    pieces: Vec<Arc<[RecordBatch]>>,
}

impl Take {
    /// The piece after the last taken.
    fn to(&self) -> usize {
        self.from + self.pieces.len()
    }
}

impl State {
    /// The state with piece 0 read as `first`, of `count` pieces and `width` columns.
    fn new(first: Vec<RecordBatch>, count: usize, width: usize) -> Self {
        let mut read: Vec<Option<Arc<[RecordBatch]>>> = vec![None; count];
        if let Some(slot) = read.first_mut() {
            *slot = Some(first.into());
        }
        Self {
            next_read: count.min(1),
            reads_done: count.min(1),
            read,
            taken: vec![0; count],
            next: vec![0; width],
            columns: std::iter::repeat_with(|| Some(ColumnState::default()))
                .take(width)
                .collect(),
            writers: BTreeMap::new(),
            failure: None,
            mixed: false,
        }
    }

    /// The next task, with at most `max_ahead` pieces read ahead of the slowest column, and a
    /// read preferred while fewer than `min_ahead` are.
    fn next_task(&mut self, count: usize, max_ahead: usize, min_ahead: usize) -> Task {
        let slowest = self.next.iter().copied().min().unwrap_or(count);
        if slowest == count {
            return Task::Done;
        }
        let ahead = self.next_read - slowest;
        let can_read = self.next_read < count && ahead < max_ahead;
        // The column furthest behind whose next piece is read.
        let encode = (0..self.next.len())
            .filter(|&c| {
                let next = self.next[c];
                self.columns[c].is_some() && next < count && self.read[next].is_some()
            })
            .min_by_key(|&c| self.next[c]);
        match encode {
            Some(index) if !can_read || ahead >= min_ahead => {
                let from = self.next[index];
                let pieces: Vec<_> = self.read[from..]
                    .iter()
                    .take(PIECES_PER_TAKE)
                    .map_while(Clone::clone)
                    .collect();
                let column = self.columns[index].take().unwrap_or_default();
                Task::Encode(Box::new(Take {
                    index,
                    column,
                    from,
                    pieces,
                }))
            }
            _ if can_read => {
                self.next_read += 1;
                Task::Read(self.next_read - 1)
            }
            _ => Task::Wait,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use arrow::array::{Array, Int64Array};
    use arrow::datatypes::{DataType, Field, Schema};
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    use parquet::file::metadata::KeyValue;

    use super::*;
    use crate::lake::encoding::encoding_of;
    use crate::lake::part::tests::{rows, three_columns};
    use crate::lake::storage::FileSync;

    fn table() -> TableDef {
        three_columns(&[])
    }

    /// Piece sizes that cut across the row groups of [`setup`] unevenly, one of them empty.
    const PIECES: [i64; 7] = [1_500, 1, 2_499, 0, 4_000, 777, 1_223];

    /// The pieces of [`PIECES`] as batches of at most 1,000 rows (a piece can hold several),
    /// with a NaN at row `nan`.
    fn pieces(table: &TableDef, nan: Option<i64>) -> Vec<Vec<RecordBatch>> {
        let mut start = 0;
        PIECES
            .iter()
            .map(|&len| {
                let piece: Vec<RecordBatch> = (start..start + len)
                    .step_by(1_000)
                    .map(|from| rows(table, from, (from + 1_000).min(start + len), nan))
                    .collect();
                start += len;
                piece
            })
            .collect()
    }

    struct Setup {
        dir: tempfile::TempDir,
        config: LakeConfig,
        files: TableFiles,
    }

    fn setup() -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let mut config = LakeConfig::new(dir.path());
        config.row_group_rows = 3_000;
        let files = TableFiles::Folder {
            root: dir.path().to_owned(),
            dir: dir.path().join("t"),
        };
        Setup { dir, config, files }
    }

    fn file(name: &str) -> NewFile<'_> {
        NewFile {
            folder: Some("p=1"),
            name,
            footer: KeyValue::new("k".to_owned(), "v".to_owned()),
            sync: FileSync::Cached,
        }
    }

    /// What `write_streamed` makes of `pieces`, and how many times it said all were read.
    fn stream(
        setup: &Setup,
        table: &TableDef,
        pieces: &[Result<Vec<RecordBatch>, SinkError>],
    ) -> (Result<Streamed, SinkError>, usize) {
        let all_read = AtomicUsize::new(0);
        let encoding = encoding_of(&setup.config, u64::MAX).unwrap();
        let reads = Pieces {
            count: pieces.len(),
            // A read error is rebuilt each time: errors are not `Clone`.
            read: |i: usize| match &pieces[i] {
                Ok(batches) => Ok(batches.clone()),
                Err(error) => Err(SinkError::retriable(SINK, error.to_string())),
            },
            rows: None,
        };
        let streamed = write_streamed(
            &setup.config,
            table,
            &setup.files,
            file("part-s.parquet"),
            encoding,
            reads,
            || {
                all_read.fetch_add(1, Ordering::Relaxed);
            },
        );
        (streamed, all_read.into_inner())
    }

    /// The files under the table's folder, temporaries included.
    fn files_in(setup: &Setup) -> Vec<String> {
        let folder = setup.dir.path().join("t").join("p=1");
        let Ok(entries) = std::fs::read_dir(folder) else {
            return Vec::new();
        };
        entries
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn pieces_land_in_order_in_row_groups_with_their_statistics() {
        let (table, setup) = (table(), setup());
        let read: Vec<_> = pieces(&table, None).into_iter().map(Ok).collect();
        let (streamed, all_read) = stream(&setup, &table, &read);
        let Streamed::Written(part, rows) = streamed.unwrap() else {
            panic!("not streamed");
        };
        assert_eq!(all_read, 1);
        let total: i64 = PIECES.iter().sum();
        assert_eq!(rows, total as u64);
        assert_eq!(part.relative, "p=1/part-s.parquet");
        let path = setup.dir.path().join("t").join(&part.relative);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), part.bytes);
        assert_eq!(files_in(&setup), ["part-s.parquet"]);

        let reader =
            ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(path).unwrap()).unwrap();
        // 10,000 rows in row groups of 3,000.
        let groups: Vec<i64> = reader
            .metadata()
            .row_groups()
            .iter()
            .map(|g| g.num_rows())
            .collect();
        assert_eq!(groups, [3_000, 3_000, 3_000, 1_000]);
        let read: Vec<RecordBatch> = reader.build().unwrap().map(Result::unwrap).collect();
        let read = arrow::compute::concat_batches(&read[0].schema(), &read).unwrap();
        let expected = rows_of(&table, total);
        for (index, column) in expected.columns().iter().enumerate() {
            assert_eq!(
                read.column(index).to_data(),
                column.to_data(),
                "column {index}"
            );
        }

        let stats: serde_json::Value = serde_json::from_str(&part.stats).unwrap();
        assert_eq!(stats["numRecords"], total);
        assert_eq!(stats["minValues"]["id"], 0);
        assert_eq!(stats["maxValues"]["id"], total - 1);
        assert_eq!(stats["nullCount"]["id"], 0);
        assert_eq!(
            stats["nullCount"]["service"],
            expected.column(1).null_count()
        );
        assert_eq!(
            stats["nullCount"]["latency"],
            expected.column(2).null_count()
        );
        assert_eq!(stats["minValues"]["latency"], 0.25);
        assert_eq!(stats["maxValues"]["latency"], (total - 1) as f64 / 4.0);
    }

    /// The table's first `total` rows in one batch.
    fn rows_of(table: &TableDef, total: i64) -> RecordBatch {
        rows(table, 0, total, None)
    }

    #[test]
    fn a_nan_in_any_piece_leaves_the_float_column_without_bounds() {
        let (table, setup) = (table(), setup());
        let read: Vec<_> = pieces(&table, Some(9_000)).into_iter().map(Ok).collect();
        let (streamed, _) = stream(&setup, &table, &read);
        let Streamed::Written(part, _) = streamed.unwrap() else {
            panic!("not streamed");
        };
        let stats: serde_json::Value = serde_json::from_str(&part.stats).unwrap();
        assert!(stats["minValues"].get("latency").is_none());
        assert!(stats["maxValues"].get("latency").is_none());
        assert_eq!(stats["minValues"]["id"], 0);
    }

    #[test]
    fn a_piece_of_another_layout_or_a_failed_read_leaves_no_file() {
        let (table, setup) = (table(), setup());
        let mut read: Vec<_> = pieces(&table, None).into_iter().map(Ok).collect();
        // Piece 4 was written before a column was added to the table.
        let older = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
        let batch = RecordBatch::try_new(older, vec![Arc::new(Int64Array::from(vec![1, 2]))]);
        read[4] = Ok(vec![batch.unwrap()]);
        let (streamed, _) = stream(&setup, &table, &read);
        assert!(matches!(streamed.unwrap(), Streamed::NotStreamable));
        assert!(files_in(&setup).is_empty(), "{:?}", files_in(&setup));

        let mut read: Vec<_> = pieces(&table, None).into_iter().map(Ok).collect();
        read[5] = Err(SinkError::retriable(SINK, "cannot read piece 5"));
        let (streamed, all_read) = stream(&setup, &table, &read);
        let error = streamed.unwrap_err();
        assert!(error.to_string().contains("cannot read piece 5"), "{error}");
        assert_eq!(all_read, 0, "a piece was never read");
        assert!(files_in(&setup).is_empty(), "{:?}", files_in(&setup));

        // No rows at all: nothing to stream.
        let (streamed, _) = stream(&setup, &table, &[Ok(Vec::new())]);
        assert!(matches!(streamed.unwrap(), Streamed::NotStreamable));
    }
}
