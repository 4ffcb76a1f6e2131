//! How a part's column chunks are encoded: LZ4 and plain values for a small part, zstd with
//! dictionaries for a large one, and, in a large part, plain or delta values instead of a
//! dictionary for the integer columns a sample of the rows shows a dictionary cannot win on.
//!
//! A dictionary pays for a column that repeats values. For one that rarely does (a timestamp,
//! a sequence number) the writer still hashes every value into the dictionary until its page
//! passes 1 MiB (131,072 eight-byte values of each row group), and then falls back to plain
//! values; delta encoding stores such a column's small differences instead. The choice is
//! made from a sample of the rows: an integer column leaves its dictionary when the smaller of
//! its plain and delta encodings, both measured on the sample, beats what the dictionary is
//! estimated to cost on the whole row group. That estimate starts from the sample's own
//! dictionary encoding and grows it to the distinct values the row group is estimated to hold
//! (from how many values the sample saw once and twice, [`Distinct::in_rows`]): wider indices
//! and a larger dictionary page, shared by the row group's rows. A row group estimated to hold
//! more distinct values than a dictionary page takes leaves the dictionary outright.
//!
//! The sample's own dictionary alone understates a column like a user id, drawn from many
//! values: 16,384 rows see 15,000 of 100,000 ids, mostly once, and a dictionary of those costs
//! less than delta values where the row group's dictionary of all 100,000 costs more. In the
//! compaction lab's events (merged into one file), `ts` goes from a dictionary falling back to
//! plain values to delta values, `user_id` from a dictionary to delta values and `bytes` from
//! a dictionary to plain values; `status` keeps its dictionary. Each of the three columns gets
//! smaller, and so does the file, and its writing hashes two columns fewer. Delta encoding has
//! been in the Parquet format since its version 2.0; the Python `deltalake` reader the tests
//! use reads it back (`lake_layout.rs`), and so do pyarrow and DuckDB. The sample's cost does
//! not grow with the file: three encodings of 16,384 values of each integer column, and a count
//! of their distinct values.

use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch};
use arrow::compute::concat;
use arrow::datatypes::{DataType, Field, Schema};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, Encoding as PageEncoding, ZstdLevel};
use parquet::errors::ParquetError;
use parquet::file::properties::{
    DEFAULT_DICTIONARY_PAGE_SIZE_LIMIT, EnabledStatistics, WriterProperties,
    WriterPropertiesBuilder,
};
use parquet::schema::types::ColumnPath;
use sluice_core::SinkError;

use super::config::LakeConfig;

const SINK: &str = "lake";

/// How a file's column chunks are encoded.
#[derive(Debug, Clone)]
pub(crate) struct Encoding {
    compression: Compression,
    /// Dictionary pages, for columns that repeat values.
    dictionary: bool,
    /// Columns written without a dictionary, in the encoding given ([`Encoding::fitted_to`]).
    without_dictionary: Vec<(ColumnPath, PageEncoding)>,
}

/// How to encode a file of `batches`. A small part (below [`LakeConfig::lz4_below`]) is LZ4 and
/// plain, without dictionary pages: it lives until compaction reads it back, and in a file of a
/// few hundred rows a dictionary saves little that LZ4 does not, while its reader decodes a
/// dictionary page per column and its writer hashes every value: files of a hundred rows come
/// out smaller plain than with dictionaries, and `sluice compact` takes less time and CPU on
/// them. A large part is zstd with dictionaries, which pay for themselves on a column that
/// repeats values over a million rows, fitted to the rows ([`Encoding::fitted_to`]).
pub(crate) fn encoding(
    config: &LakeConfig,
    batches: &[RecordBatch],
) -> Result<Encoding, SinkError> {
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
    let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
    Ok(encoding_of(config, bytes)?.fitted_to(batches, rows.min(config.row_group_rows)))
}

/// How to encode a file of rows of `bytes` in memory ([`encoding`]), before it is fitted to the
/// rows.
pub(crate) fn encoding_of(config: &LakeConfig, bytes: u64) -> Result<Encoding, SinkError> {
    if bytes < config.lz4_below {
        return Ok(Encoding {
            compression: Compression::LZ4_RAW,
            dictionary: false,
            without_dictionary: Vec::new(),
        });
    }
    let level = ZstdLevel::try_new(config.zstd_level).map_err(|e| {
        SinkError::permanent(SINK, format!("zstd level {}: {e}", config.zstd_level))
    })?;
    Ok(Encoding {
        compression: Compression::ZSTD(level),
        dictionary: true,
        without_dictionary: Vec::new(),
    })
}

/// Rows of the sample an encoding is fitted to, at most...
const SAMPLE_ROWS: usize = 16 * 1024;

/// ...taken in this many slices spread evenly over the first row group: data in time order
/// changes along the file.
const SAMPLE_SLICES: usize = 4;

/// Below this many rows there is too little to judge by: dictionaries stay.
const MIN_SAMPLE_ROWS: usize = 1024;

impl Encoding {
    /// This encoding with each integer column of `batches` (of one layout, the file's rows or
    /// its first rows) written as plain or delta values where a sample of its rows shows a
    /// dictionary would cost more (the module's rule). `group_rows` is how many rows the file's
    /// first row group holds: the row group size when the file's rows are not known. Unchanged
    /// for an encoding without dictionaries (a small part's) and for too few rows to judge. A
    /// column whose sample cannot be encoded keeps its dictionary: the file is written as it
    /// would have been without the fitting.
    pub(crate) fn fitted_to(mut self, batches: &[RecordBatch], group_rows: usize) -> Self {
        let Some(schema) = batches.first().map(RecordBatch::schema) else {
            return self;
        };
        let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
        let group_rows = group_rows.max(1);
        let span = rows.min(group_rows);
        if !self.dictionary || span < MIN_SAMPLE_ROWS {
            return self;
        }
        let ranges = sample_ranges(batches, span);
        for (index, field) in schema.fields().iter().enumerate() {
            if !is_integer(field.data_type()) {
                continue;
            }
            let pieces: Vec<ArrayRef> = ranges
                .iter()
                .map(|&(batch, offset, len)| batches[batch].column(index).slice(offset, len))
                .collect();
            match without_dictionary(field, &pieces, self.compression, group_rows) {
                Ok(Some(encoding)) => self
                    .without_dictionary
                    .push((ColumnPath::from(field.name().as_str()), encoding)),
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(column = %field.name(), error = %e, "kept the column's dictionary: its sample could not be encoded");
                }
            }
        }
        self
    }

    /// `builder` set to write with this encoding.
    pub(crate) fn apply(&self, builder: WriterPropertiesBuilder) -> WriterPropertiesBuilder {
        let mut builder = builder
            .set_compression(self.compression)
            .set_dictionary_enabled(self.dictionary);
        for (column, encoding) in &self.without_dictionary {
            builder = builder
                .set_column_dictionary_enabled(column.clone(), false)
                .set_column_encoding(column.clone(), *encoding);
        }
        builder
    }
}

/// How a column of `field`, sampled as `pieces`, is better written than with a dictionary in
/// row groups of `group_rows`: plain or delta values, whichever the sample makes smaller, if
/// that beats what the dictionary is estimated to cost ([`dictionary_bytes`]); `None` if it
/// does not.
fn without_dictionary(
    field: &Field,
    pieces: &[ArrayRef],
    compression: Compression,
    group_rows: usize,
) -> Result<Option<PageEncoding>, ParquetError> {
    let pieces: Vec<&dyn arrow::array::Array> = pieces.iter().map(|a| a.as_ref()).collect();
    let values = concat(&pieces)?;
    let trial = |how| encoded_bytes(field, &values, compression, how);
    let plain = trial(Trial::Values(PageEncoding::PLAIN))?.total;
    let delta = trial(Trial::Values(PageEncoding::DELTA_BINARY_PACKED))?.total;
    let (best, encoding) = if delta < plain {
        (delta, PageEncoding::DELTA_BINARY_PACKED)
    } else {
        (plain, PageEncoding::PLAIN)
    };
    let Some(distinct) = Distinct::count(&values) else {
        return Ok(None);
    };
    let groups_distinct = distinct.in_rows(group_rows);
    // A dictionary page holds its values plain: Parquet stores integers in 4 or 8 bytes.
    let width = values.data_type().primitive_width().unwrap_or(8).max(4) as f64;
    if groups_distinct * width > DEFAULT_DICTIONARY_PAGE_SIZE_LIMIT as f64 {
        // The writer would fill the dictionary's page (parquet's limit, which sluice keeps) part
        // way through the row group and write the rest as plain values: hashing every value
        // until then is spent for nothing.
        return Ok(Some(encoding));
    }
    let dictionary = dictionary_bytes(trial(Trial::Dictionary)?, distinct, group_rows);
    Ok((best < dictionary).then_some(encoding))
}

/// The distinct values of a sample of a column: how many, and how many of them were seen once.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Distinct {
    /// Rows sampled (those not null).
    rows: usize,
    /// Distinct values among them.
    values: usize,
    /// Values seen in exactly one row.
    once: usize,
    /// Values seen in exactly two.
    twice: usize,
}

impl Distinct {
    /// The distinct values of `values`, a column of fixed-width values (the integer types);
    /// `None` for any other.
    fn count(values: &ArrayRef) -> Option<Self> {
        let data = values.to_data();
        let width = data.data_type().primitive_width().filter(|&w| w <= 16)?;
        let buffer = data.buffers().first()?.as_slice();
        let start = data.offset().checked_mul(width)?;
        let bytes = buffer.get(start..start.checked_add(data.len().checked_mul(width)?)?)?;
        // Sorted, equal values sit together and each run is one distinct value. Counting them
        // in a hash map cost several times as much: hashing every value, and the map growing as
        // it filled, on the serial start of every large merge.
        let mut values: Vec<u128> = bytes
            .chunks_exact(width)
            .enumerate()
            .filter(|&(row, _)| data.is_valid(row))
            .map(|(_, value)| {
                let mut wide = [0; 16];
                wide[..width].copy_from_slice(value);
                u128::from_le_bytes(wide)
            })
            .collect();
        values.sort_unstable();
        let mut count = Self {
            rows: values.len(),
            values: 0,
            once: 0,
            twice: 0,
        };
        for run in values.chunk_by(|a, b| a == b) {
            count.values += 1;
            match run.len() {
                1 => count.once += 1,
                2 => count.twice += 1,
                _ => {}
            }
        }
        Some(count)
    }

    /// The distinct values estimated to be in `rows` rows of which these were a sample: the
    /// bias-corrected Chao1 estimator (Chao, "Nonparametric estimation of the number of classes
    /// in a population", 1984), the values seen plus `f1 (f1 - 1) / (2 (f2 + 1))`, where `f1`
    /// values were seen once and `f2` twice. Many values seen once and few twice mean many
    /// more were not seen at all. It errs low rather than high, which keeps the choice on the
    /// dictionary's side; where every value was seen once (a column of unique ids), it counts
    /// one per row. Never fewer than were seen, never more than `rows`.
    fn in_rows(&self, rows: usize) -> f64 {
        let (once, twice) = (self.once as f64, self.twice as f64);
        let unseen = once * (once - 1.0).max(0.0) / (2.0 * (twice + 1.0));
        (self.values as f64 + unseen).clamp(self.values as f64, rows.max(self.values) as f64)
    }
}

/// What a dictionary costs the sample's rows in a row group of `group_rows` that holds the
/// distinct values [`Distinct::in_rows`] estimates, from how the sample's own dictionary
/// encoded it (`sample`): its index pages, with each index as many bits wider as the row
/// group's larger dictionary needs, plus the sample's share of a dictionary page grown in
/// proportion to its values.
fn dictionary_bytes(sample: Encoded, distinct: Distinct, group_rows: usize) -> u64 {
    let seen = distinct.values.max(1) as f64;
    let estimated = distinct.in_rows(group_rows).max(seen);
    // Indices into a dictionary of n values take ceil(log2(n)) bits, at least one.
    let bits = |n: f64| n.log2().ceil().max(1.0);
    let indices = sample.total.saturating_sub(sample.dictionary_page) as f64;
    let page = sample.dictionary_page as f64 * estimated / seen;
    let share = distinct.rows as f64 / group_rows.max(distinct.rows).max(1) as f64;
    (indices * bits(estimated) / bits(seen) + page * share).ceil() as u64
}
/// Column types stored as Parquet integers, which delta encoding takes.
fn is_integer(data_type: &DataType) -> bool {
    matches!(
        data_type,
        DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::UInt8
            | DataType::UInt16
            | DataType::UInt32
            | DataType::UInt64
            | DataType::Date32
            | DataType::Date64
            | DataType::Timestamp(_, _)
    )
}

/// The sample's rows, as `(batch, offset, length)`: [`SAMPLE_SLICES`] slices spread evenly over
/// the first `span` rows of `batches` (all of them if there are no more than [`SAMPLE_ROWS`]).
fn sample_ranges(batches: &[RecordBatch], span: usize) -> Vec<(usize, usize, usize)> {
    let (starts, slice_rows) = if span <= SAMPLE_ROWS {
        (vec![0], span)
    } else {
        let slice_rows = SAMPLE_ROWS / SAMPLE_SLICES;
        let last = span - slice_rows;
        let starts = (0..SAMPLE_SLICES)
            .map(|k| last * k / (SAMPLE_SLICES - 1))
            .collect();
        (starts, slice_rows)
    };
    let mut ranges = Vec::new();
    for start in starts {
        let (end, mut at) = (start + slice_rows, 0);
        for (index, batch) in batches.iter().enumerate() {
            let (from, to) = (start.max(at), end.min(at + batch.num_rows()));
            if from < to {
                ranges.push((index, from - at, to - from));
            }
            at += batch.num_rows();
            if at >= end {
                break;
            }
        }
    }
    ranges
}

/// One way of encoding a sample, for [`encoded_bytes`].
#[derive(Debug, Clone, Copy)]
enum Trial {
    /// With a dictionary.
    Dictionary,
    /// Without one, in this encoding.
    Values(PageEncoding),
}

/// A sample's column chunk as written.
#[derive(Debug, Clone, Copy)]
struct Encoded {
    /// Its bytes, compressed, dictionary page included.
    total: u64,
    /// Its dictionary page's bytes (none without a dictionary).
    dictionary_page: u64,
}

/// The bytes `values` (a column of `field`) take encoded as `how` says and compressed as
/// `compression`.
fn encoded_bytes(
    field: &Field,
    values: &ArrayRef,
    compression: Compression,
    how: Trial,
) -> Result<Encoded, ParquetError> {
    let schema = Arc::new(Schema::new(vec![field.clone()]));
    let batch = RecordBatch::try_new(schema.clone(), vec![values.clone()])?;
    let builder = WriterProperties::builder()
        .set_compression(compression)
        .set_statistics_enabled(EnabledStatistics::None);
    let builder = match how {
        Trial::Dictionary => builder.set_dictionary_enabled(true),
        Trial::Values(encoding) => builder.set_dictionary_enabled(false).set_encoding(encoding),
    };
    let mut out = Vec::new();
    let mut writer = ArrowWriter::try_new(&mut out, schema, Some(builder.build()))?;
    writer.write(&batch)?;
    let metadata = writer.close()?;
    let chunk = metadata.row_group(0).column(0);
    let dictionary_page = chunk
        .dictionary_page_offset()
        .map_or(0, |start| (chunk.data_page_offset() - start).max(0) as u64);
    Ok(Encoded {
        total: chunk.compressed_size().max(0) as u64,
        dictionary_page,
    })
}

#[cfg(test)]
mod tests {
    use arrow::array::{Array, Int32Array, Int64Array, StringArray, TimestampMicrosecondArray};
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    use parquet::file::reader::{FileReader, SerializedFileReader};

    use super::*;

    /// A deterministic stream of pseudo-random numbers (xorshift), for columns with no order.
    fn noise(seed: u64) -> impl Iterator<Item = u64> {
        let mut state = seed.max(1);
        std::iter::repeat_with(move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        })
    }

    /// 200,000 rows: a timestamp a few milliseconds apart, a status of five values, an id
    /// among 500 random 64-bit numbers, a small count, and a name.
    fn events() -> RecordBatch {
        let rows = 200_000;
        let mut rng = noise(7);
        let mut ts = 1_700_000_000_000_000i64;
        let ts: TimestampMicrosecondArray = (0..rows)
            .map(|_| {
                ts += (rng.next().unwrap() % 3_000) as i64;
                ts
            })
            .collect::<Vec<_>>()
            .into();
        let status: Int32Array = noise(3)
            .take(rows)
            .map(|n| [200, 200, 200, 404, 500, 301, 302][n as usize % 7])
            .collect::<Vec<_>>()
            .into();
        let ids: Vec<i64> = noise(11).take(500).map(|n| n as i64).collect();
        let account: Int64Array = noise(5)
            .take(rows)
            .map(|n| ids[n as usize % ids.len()])
            .collect::<Vec<_>>()
            .into();
        let count: Int64Array = noise(9)
            .take(rows)
            .map(|n| (n % 50) as i64)
            .collect::<Vec<_>>()
            .into();
        let name = StringArray::from_iter_values((0..rows).map(|i| format!("n{}", i % 40)));
        let schema = Schema::new(vec![
            Field::new("ts", ts.data_type().clone(), false),
            Field::new("status", DataType::Int32, false),
            Field::new("account", DataType::Int64, false),
            Field::new("count", DataType::Int64, true),
            Field::new("name", DataType::Utf8, false),
        ]);
        RecordBatch::try_new(
            Arc::new(schema),
            vec![
                Arc::new(ts),
                Arc::new(status),
                Arc::new(account),
                Arc::new(count),
                Arc::new(name),
            ],
        )
        .unwrap()
    }

    fn zstd() -> Encoding {
        let config = LakeConfig::new("/unused");
        encoding_of(&config, u64::MAX).unwrap()
    }

    /// The file `batches` make with `encoding`, in row groups of 100,000 rows: its bytes, and
    /// each column's encodings in its first row group.
    fn written(batches: &[RecordBatch], encoding: &Encoding) -> (Vec<u8>, Vec<Vec<PageEncoding>>) {
        let props = encoding
            .apply(WriterProperties::builder().set_max_row_group_row_count(Some(100_000)))
            .build();
        let mut file = Vec::new();
        let mut writer = ArrowWriter::try_new(&mut file, batches[0].schema(), Some(props)).unwrap();
        for batch in batches {
            writer.write(batch).unwrap();
        }
        writer.close().unwrap();
        let reader = SerializedFileReader::new(bytes::Bytes::from(file.clone())).unwrap();
        let encodings = reader
            .metadata()
            .row_group(0)
            .columns()
            .iter()
            .map(|chunk| chunk.encodings().collect())
            .collect();
        (file, encodings)
    }

    #[test]
    fn integers_that_rarely_repeat_leave_the_dictionary_and_the_others_keep_it() {
        let batch = events();
        let fitted = zstd().fitted_to(std::slice::from_ref(&batch), 100_000);
        let chosen: Vec<(String, PageEncoding)> = fitted
            .without_dictionary
            .iter()
            .map(|(path, encoding)| (path.string(), *encoding))
            .collect();
        // The timestamp's small steps take delta; the status repeats, the account is one of a
        // few hundred values no delta or plain encoding of 64-bit numbers can match, and the
        // count repeats: they keep their dictionaries. Strings are never fitted.
        assert_eq!(
            chosen,
            vec![("ts".to_owned(), PageEncoding::DELTA_BINARY_PACKED)]
        );
        let (fitted_file, encodings) = written(std::slice::from_ref(&batch), &fitted);
        assert!(
            encodings[0].contains(&PageEncoding::DELTA_BINARY_PACKED),
            "{encodings:?}"
        );
        for column in &encodings[1..] {
            assert!(
                column.contains(&PageEncoding::RLE_DICTIONARY),
                "{encodings:?}"
            );
        }
        let (dictionary_file, _) = written(std::slice::from_ref(&batch), &zstd());
        assert!(
            fitted_file.len() < dictionary_file.len(),
            "fitted {} bytes, all dictionaries {}",
            fitted_file.len(),
            dictionary_file.len()
        );
        // What is read back is what was written.
        let read: Vec<RecordBatch> =
            ParquetRecordBatchReaderBuilder::try_new(bytes::Bytes::from(fitted_file))
                .unwrap()
                .build()
                .unwrap()
                .map(Result::unwrap)
                .collect();
        let read = arrow::compute::concat_batches(&batch.schema(), &read).unwrap();
        assert_eq!(read, batch);
    }

    /// A one-column batch of `values`.
    fn column(values: impl IntoIterator<Item = i64>) -> RecordBatch {
        let values: Int64Array = values.into_iter().collect::<Vec<_>>().into();
        let schema = Schema::new(vec![Field::new("v", DataType::Int64, false)]);
        RecordBatch::try_new(Arc::new(schema), vec![Arc::new(values)]).unwrap()
    }

    #[test]
    fn a_sequence_is_delta_and_unique_random_numbers_leave_the_dictionary() {
        let sequence = column(1_000_000..1_050_000);
        let fitted = zstd().fitted_to(&[sequence], 1_000_000);
        assert_eq!(
            fitted.without_dictionary,
            vec![(ColumnPath::from("v"), PageEncoding::DELTA_BINARY_PACKED)]
        );
        // Unique random numbers: every value of the sample seen once, so the row group is
        // counted as holding one per row, more than a dictionary page takes. The writer would
        // hash values into the dictionary until its page filled and then write plain values.
        let random = column(noise(13).take(50_000).map(|n| (n >> 24) as i64));
        let fitted = zstd().fitted_to(std::slice::from_ref(&random), 1_000_000);
        assert_eq!(columns_without_dictionary(&fitted), ["v"]);
        let (without, _) = written(std::slice::from_ref(&random), &fitted);
        let (dictionary, _) = written(&[random], &zstd());
        assert!(
            without.len() < dictionary.len(),
            "without {} bytes, dictionary {}",
            without.len(),
            dictionary.len()
        );
    }

    /// The columns `encoding` writes without a dictionary.
    fn columns_without_dictionary(encoding: &Encoding) -> Vec<String> {
        let columns = encoding.without_dictionary.iter();
        columns.map(|(path, _)| path.string()).collect()
    }

    /// `rows` ids drawn evenly from 1..=`ids`, in no order: a user id.
    fn drawn(rows: usize, ids: u64) -> RecordBatch {
        column(noise(17).take(rows).map(|n| (n % ids) as i64 + 1))
    }

    #[test]
    fn ids_drawn_from_many_leave_a_dictionary_the_sample_alone_would_keep() {
        // 400,000 rows of 40,000 ids: each id is in about ten rows, but a sample of 16,384
        // sees most of its ids once or twice. Its own dictionary has a third of the ids, and
        // as the least the row group's could cost it would win; counted at the ids the row
        // group holds, plain or delta values win, and the file says so.
        let batch = drawn(400_000, 40_000);
        let fitted = zstd().fitted_to(std::slice::from_ref(&batch), 400_000);
        assert_eq!(columns_without_dictionary(&fitted), ["v"]);
        let props = |encoding: &Encoding| {
            encoding
                .apply(WriterProperties::builder().set_max_row_group_row_count(Some(400_000)))
                .build()
        };
        let size = |encoding: &Encoding| {
            let mut file = Vec::new();
            let mut writer =
                ArrowWriter::try_new(&mut file, batch.schema(), Some(props(encoding))).unwrap();
            writer.write(&batch).unwrap();
            writer.close().unwrap();
            file.len()
        };
        let (fitted, dictionary) = (size(&fitted), size(&zstd()));
        assert!(
            fitted < dictionary,
            "fitted {fitted} bytes, dictionary {dictionary}"
        );
        // Fewer ids, each in many rows: the sample sees nearly all of them, often.
        let few = zstd().fitted_to(&[drawn(400_000, 2_000)], 400_000);
        assert!(few.without_dictionary.is_empty(), "{few:?}");
    }

    #[test]
    fn distinct_values_are_estimated_from_those_seen_once_and_twice() {
        let sample = |batch: RecordBatch| Distinct::count(batch.column(0)).unwrap();
        // 16,384 draws from 100,000 ids: about 15,100 seen, 13,900 once, 1,100 twice.
        let many = sample(drawn(16_384, 100_000));
        let estimate = many.in_rows(1_000_000);
        assert!(
            (90_000.0..110_000.0).contains(&estimate),
            "{many:?}: {estimate}"
        );
        // All seen often: no more than were seen.
        let few = sample(drawn(16_384, 50));
        assert_eq!(few.values, 50);
        assert_eq!(few.in_rows(1_000_000), 50.0);
        // All seen once: one per row, at most.
        let unique = sample(column(0..16_384));
        assert_eq!((unique.values, unique.once), (16_384, 16_384));
        assert_eq!(unique.in_rows(1_000_000), 1_000_000.0);
        // Nulls are not values.
        let nulls: ArrayRef = Arc::new(Int64Array::from(vec![Some(1), None, Some(1), None]));
        let counted = Distinct::count(&nulls).unwrap();
        assert_eq!((counted.rows, counted.values, counted.once), (2, 1, 0));
        // Strings have no fixed width.
        let names: ArrayRef = Arc::new(StringArray::from(vec!["a", "b"]));
        assert_eq!(Distinct::count(&names), None);
    }

    #[test]
    fn small_parts_and_few_rows_are_left_as_they_are() {
        let batch = events();
        let mut config = LakeConfig::new("/unused");
        config.lz4_below = u64::MAX;
        let lz4 = encoding(&config, std::slice::from_ref(&batch)).unwrap();
        assert!(
            !lz4.dictionary && lz4.without_dictionary.is_empty(),
            "{lz4:?}"
        );
        let few = zstd().fitted_to(&[batch.slice(0, 1000)], 1_000_000);
        assert!(few.without_dictionary.is_empty(), "{few:?}");
    }

    #[test]
    fn the_sample_spreads_over_the_first_row_group_across_batches() {
        let batch = events();
        let batches = [batch.slice(0, 33_000), batch.slice(33_000, 167_000)];
        let ranges = sample_ranges(&batches, 100_000);
        let slice = SAMPLE_ROWS / SAMPLE_SLICES;
        let rows: usize = ranges.iter().map(|&(_, _, len)| len).sum();
        assert_eq!(rows, SAMPLE_ROWS);
        // Starts at the first row, ends at the row group's last, and a slice that crosses from
        // one batch into the next is cut in two.
        assert_eq!(ranges.len(), SAMPLE_SLICES + 1);
        assert_eq!(ranges[0], (0, 0, slice));
        let second = (100_000 - slice) / 3;
        assert!(second < 33_000 && second + slice > 33_000);
        assert_eq!(ranges[1], (0, second, 33_000 - second));
        assert_eq!(ranges[2], (1, 0, slice - (33_000 - second)));
        assert_eq!(ranges[4], (1, 100_000 - slice - 33_000, slice));
        assert_eq!(sample_ranges(&batches[..1], 5_000), vec![(0, 0, 5_000)]);
    }
}
