//! How a part's column chunks are encoded: LZ4 and plain values for a small part, zstd with
//! dictionaries for a large one, and, in a large part, plain or delta values instead of a
//! dictionary for the integer columns a sample of the rows shows a dictionary cannot win on.
//!
//! A dictionary pays for a column that repeats values. For one that rarely does (a timestamp,
//! a sequence number) the writer still hashes every value into the dictionary until its page
//! passes 1 MiB (131,072 eight-byte values of each row group), and then falls back to plain
//! values; delta encoding stores such a column's small differences instead. The choice is
//! made from the rows, conservatively: an integer column leaves its dictionary only when the
//! smaller of its plain and delta encodings, both measured on the sample, beats the least the
//! dictionary could cost on the whole row group (the sample's index pages as measured, plus its
//! dictionary page spread over the row group's rows). A larger row group only adds distinct
//! values, so the real dictionary costs at least that: where it may win, it stays, as before.
//!
//! In the compaction lab's events (2,000,000 rows, merged into one file), `ts` goes from a
//! dictionary falling back to plain values (4.67 MB) to delta values (2.80 MB), and the file
//! from 54.4 to 52.5 MB; the other integer columns (`status`, `bytes`, `user_id`) keep their
//! dictionaries. pyarrow reads that `ts` column in a quarter of the time. Delta encoding has
//! been in the Parquet format since its version 2.0; the Python `deltalake` reader the tests
//! use reads it back (`lake_layout.rs`), and so do pyarrow and DuckDB. The sample costs about
//! 5 ms of CPU for that file: three encodings of 16,384 values of each integer column.

use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch};
use arrow::compute::concat;
use arrow::datatypes::{DataType, Field, Schema};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, Encoding as PageEncoding, ZstdLevel};
use parquet::errors::ParquetError;
use parquet::file::properties::{EnabledStatistics, WriterProperties, WriterPropertiesBuilder};
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
/// dictionary page per column and its writer hashes every value. The compaction lab's 20,000
/// files of 100 rows took 174.9 MB plain against 177.6 MB with dictionaries, and `sluice
/// compact` on them 1.36 s and 2.44 s of CPU against 1.45 s and 2.54 s (medians of eight
/// alternated runs). A large part is zstd with dictionaries, which pay for themselves on a
/// column that repeats values over a million rows, fitted to the rows
/// ([`Encoding::fitted_to`]).
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
    /// dictionary cannot win (the module's rule). `group_rows` is how many rows the file's
    /// first row group holds: the row group size when the file's rows are not known, which
    /// counts a dictionary page at its cheapest. Unchanged for an encoding without dictionaries
    /// (a small part's) and for too few rows to judge. A column whose sample cannot be encoded
    /// keeps its dictionary: the file is written as it would have been without the fitting.
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
/// that beats the least the dictionary could cost; `None` if it does not.
fn without_dictionary(
    field: &Field,
    pieces: &[ArrayRef],
    compression: Compression,
    group_rows: usize,
) -> Result<Option<PageEncoding>, ParquetError> {
    let pieces: Vec<&dyn arrow::array::Array> = pieces.iter().map(|a| a.as_ref()).collect();
    let values = concat(&pieces)?;
    let trial = |how| encoded_bytes(field, &values, compression, how);
    let dictionary = trial(Trial::Dictionary { group_rows })?;
    let plain = trial(Trial::Values(PageEncoding::PLAIN))?;
    let delta = trial(Trial::Values(PageEncoding::DELTA_BINARY_PACKED))?;
    let (best, encoding) = if delta < plain {
        (delta, PageEncoding::DELTA_BINARY_PACKED)
    } else {
        (plain, PageEncoding::PLAIN)
    };
    Ok((best < dictionary).then_some(encoding))
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
    /// With a dictionary, counting its page as spread over a row group of `group_rows`.
    Dictionary { group_rows: usize },
    /// Without one, in this encoding.
    Values(PageEncoding),
}

/// The bytes `values` (a column of `field`) take encoded as `how` says and compressed as
/// `compression`. For a dictionary, its index pages as written, plus the sample's share of its
/// dictionary page if that page served a whole row group: the least the dictionary costs for
/// these rows, since a row group holds at least the sample's distinct values.
fn encoded_bytes(
    field: &Field,
    values: &ArrayRef,
    compression: Compression,
    how: Trial,
) -> Result<u64, ParquetError> {
    let schema = Arc::new(Schema::new(vec![field.clone()]));
    let batch = RecordBatch::try_new(schema.clone(), vec![values.clone()])?;
    let builder = WriterProperties::builder()
        .set_compression(compression)
        .set_statistics_enabled(EnabledStatistics::None);
    let builder = match how {
        Trial::Dictionary { .. } => builder.set_dictionary_enabled(true),
        Trial::Values(encoding) => builder.set_dictionary_enabled(false).set_encoding(encoding),
    };
    let mut out = Vec::new();
    let mut writer = ArrowWriter::try_new(&mut out, schema, Some(builder.build()))?;
    writer.write(&batch)?;
    let metadata = writer.close()?;
    let chunk = metadata.row_group(0).column(0);
    let total = chunk.compressed_size().max(0) as u64;
    let Trial::Dictionary { group_rows } = how else {
        return Ok(total);
    };
    let dictionary_page = chunk
        .dictionary_page_offset()
        .map_or(0, |start| (chunk.data_page_offset() - start).max(0) as u64);
    let share = dictionary_page as f64 * values.len() as f64 / group_rows.max(1) as f64;
    Ok(total.saturating_sub(dictionary_page) + share.ceil() as u64)
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
    fn a_sequence_is_delta_and_unique_random_numbers_keep_the_dictionary() {
        let sequence = column(1_000_000..1_050_000);
        let fitted = zstd().fitted_to(&[sequence], 1_000_000);
        assert_eq!(
            fitted.without_dictionary,
            vec![(ColumnPath::from("v"), PageEncoding::DELTA_BINARY_PACKED)]
        );
        // Unique random numbers: a sample of them cannot tell how many distinct values the
        // row group holds, so it cannot rule the dictionary out, and the writer keeps it until
        // its page is full, as it did before the encoding was fitted.
        let random = column(noise(13).take(50_000).map(|n| (n >> 24) as i64));
        let fitted = zstd().fitted_to(&[random], 1_000_000);
        assert!(fitted.without_dictionary.is_empty(), "{fitted:?}");
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
