//! Decoders kept between small inserts, a few per thread.
//!
//! Building an arrow-json decoder walks the table's schema and makes a decoder per column, which
//! for a one-row insert costs about as much as decoding the row. A decoder that flushed cleanly
//! holds nothing and decodes the next body of the same schema as a new one would, so each thread
//! keeps its last few, by schema.

use std::cell::RefCell;
use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use arrow::error::ArrowError;
use arrow::json::ReaderBuilder;
use arrow::json::reader::Decoder;

/// Rows up to which a body is decoded by a kept decoder; also those decoders' batch size, so
/// such a body is one batch.
pub(super) const KEPT_ROWS: usize = 64;

/// Decoders kept per thread: about one per table inserts arrive for, the least recently used
/// dropped first.
const KEPT_PER_THREAD: usize = 16;

struct Kept {
    schema: SchemaRef,
    strict: bool,
    decoder: Decoder,
}

thread_local! {
    static KEPT: RefCell<Vec<Kept>> = const { RefCell::new(Vec::new()) };
}

/// Runs `decode` with a decoder for `schema`: this thread's kept one if it has one, else a new
/// one. The decoder is kept afterwards only when `decode` succeeded, which leaves it empty; a
/// failed decode may leave rows in it, so it is dropped.
///
/// The kept decoder holds its schema, so a schema is matched by pointer: a table's schema is one
/// `Arc` for as long as the table keeps its layout.
pub(super) fn with_decoder<T>(
    schema: &SchemaRef,
    strict: bool,
    decode: impl FnOnce(&mut Decoder) -> Result<T, ArrowError>,
) -> Result<T, ArrowError> {
    let kept = KEPT.with(|kept| {
        let mut kept = kept.borrow_mut();
        let found = kept
            .iter()
            .position(|k| k.strict == strict && Arc::ptr_eq(&k.schema, schema))?;
        Some(kept.remove(found).decoder)
    });
    let mut decoder = match kept {
        Some(decoder) => decoder,
        None => ReaderBuilder::new(schema.clone())
            .with_batch_size(KEPT_ROWS)
            .with_strict_mode(strict)
            .build_decoder()?,
    };
    let result = decode(&mut decoder);
    if result.is_ok() {
        KEPT.with(|kept| {
            let mut kept = kept.borrow_mut();
            if kept.len() >= KEPT_PER_THREAD {
                kept.remove(0);
            }
            kept.push(Kept {
                schema: schema.clone(),
                strict,
                decoder,
            });
        });
    }
    result
}

#[cfg(test)]
mod tests {
    use arrow::array::AsArray;
    use arrow::datatypes::{DataType, Field, Int64Type, Schema};

    use super::*;

    fn kept_for(schema: &SchemaRef) -> usize {
        KEPT.with(|kept| {
            kept.borrow()
                .iter()
                .filter(|k| Arc::ptr_eq(&k.schema, schema))
                .count()
        })
    }

    fn decode(schema: &SchemaRef, body: &[u8]) -> Result<Vec<i64>, ArrowError> {
        with_decoder(schema, true, |decoder| {
            decoder.decode(body)?;
            let batch = decoder.flush()?.expect("rows");
            Ok(batch
                .column(0)
                .as_primitive::<Int64Type>()
                .values()
                .to_vec())
        })
    }

    #[test]
    fn a_decoder_is_kept_after_success_and_dropped_after_failure() {
        let schema = Arc::new(Schema::new(vec![Field::new("a", DataType::Int64, false)]));
        assert_eq!(decode(&schema, b"{\"a\":1}\n{\"a\":2}\n").unwrap(), [1, 2]);
        assert_eq!(kept_for(&schema), 1);
        assert_eq!(decode(&schema, b"{\"a\":3}\n").unwrap(), [3]);
        assert_eq!(
            kept_for(&schema),
            1,
            "the kept decoder was taken and put back"
        );
        // The first row is decoded into the tape before the second fails.
        assert!(decode(&schema, b"{\"a\":4}\n{\"a\":\"x\"}\n").is_err());
        assert_eq!(kept_for(&schema), 0);
        // Nothing of the failed body is left for the next one.
        assert_eq!(decode(&schema, b"{\"a\":5}\n").unwrap(), [5]);
    }

    #[test]
    fn each_schema_has_its_own_decoder() {
        let ints = Arc::new(Schema::new(vec![Field::new("a", DataType::Int64, false)]));
        let same_fields = Arc::new(Schema::new(vec![Field::new("a", DataType::Int64, false)]));
        decode(&ints, b"{\"a\":1}\n").unwrap();
        decode(&same_fields, b"{\"a\":1}\n").unwrap();
        assert_eq!((kept_for(&ints), kept_for(&same_fields)), (1, 1));
    }
}
