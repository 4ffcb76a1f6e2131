//! Which shard of a cluster a flush's rows land on, when sluice inserts straight into each
//! shard's own table rather than through a `Distributed` table.
//!
//! Without a shard key, a flush lands whole on one shard, the next flush on the next: each
//! flush is one part on one shard, as large as the flush. With `shard_key`, each row goes to
//! shard `sipHash64(value) % shards`, the shard a `Distributed` table with the sharding key
//! `sipHash64(column)` picks, so reads and local joins through such a table agree with where
//! sluice put the rows. A flush then makes a part on every shard its rows reach.

use std::hash::Hasher;

use arrow::array::{Array, AsArray, RecordBatch, UInt32Array};
use arrow::compute::take_record_batch;
use arrow::datatypes::DataType;
use siphasher::sip::SipHasher24;
use sluice_core::{ColumnType, TableDef};

/// Checks that `table` can be sharded by `key`: a column that is never null (ClickHouse's
/// `sipHash64` of a null is null, which picks no shard), of an integer, `bool` or `string` type.
/// ClickHouse 18.16's `sipHash64` takes no `UUID` or `Decimal`, and a `json` column's text is
/// no key a `Distributed` table would shard by.
pub(crate) fn check_key(table: &TableDef, key: &str) -> Result<(), String> {
    let name = table.name();
    let field = table
        .schema()
        .arrow()
        .field_with_name(key)
        .map_err(|_| format!("table {name} has no column '{key}', the sink's shard_key"))?
        .clone();
    if field.is_nullable() {
        return Err(format!(
            "table {name}: the shard key '{key}' may be null, which picks no shard; declare it \
             with nullable = false"
        ));
    }
    let text = ColumnType::from_field(&field) == Some(ColumnType::String);
    if byte_width(field.data_type()).is_none() && !text {
        return Err(format!(
            "table {name}: the shard key '{key}' is {}; shard by an integer, bool or string column",
            ColumnType::from_field(&field)
                .map_or_else(|| field.data_type().to_string(), |t| t.to_string())
        ));
    }
    Ok(())
}

/// The bytes ClickHouse hashes for a value of an integer type: its own width, little-endian.
/// `bool` is `UInt8` in ClickHouse.
fn byte_width(data_type: &DataType) -> Option<usize> {
    Some(match data_type {
        DataType::Boolean | DataType::Int8 | DataType::UInt8 => 1,
        DataType::Int16 | DataType::UInt16 => 2,
        DataType::Int32 | DataType::UInt32 => 4,
        DataType::Int64 | DataType::UInt64 => 8,
        _ => return None,
    })
}

/// ClickHouse's `sipHash64` of `bytes`.
fn sip_hash64(bytes: &[u8]) -> u64 {
    let mut hasher = SipHasher24::new();
    hasher.write(bytes);
    hasher.finish()
}

/// Each row's `sipHash64` of the key column `key`.
fn key_hashes(batch: &RecordBatch, key: &str) -> Result<Vec<u64>, String> {
    let column = batch
        .column_by_name(key)
        .ok_or_else(|| format!("the batch has no column '{key}', the shard key"))?;
    if column.null_count() > 0 {
        return Err(format!("the shard key '{key}' holds a null"));
    }
    let data_type = column.data_type();
    if let Some(width) = byte_width(data_type).filter(|_| data_type != &DataType::Boolean) {
        // An integer array's values in memory are the bytes ClickHouse hashes: Arrow keeps
        // them little-endian, at the type's own width.
        let data = column.to_data();
        let start = data.offset() * width;
        let bytes = &data.buffers()[0].as_slice()[start..start + data.len() * width];
        return Ok(bytes.chunks_exact(width).map(sip_hash64).collect());
    }
    Ok(match data_type {
        DataType::Utf8 => column
            .as_string::<i32>()
            .iter()
            .map(|v| sip_hash64(v.unwrap_or_default().as_bytes()))
            .collect(),
        DataType::Boolean => column
            .as_boolean()
            .iter()
            .map(|v| sip_hash64(&[u8::from(v.unwrap_or_default())]))
            .collect(),
        other => return Err(format!("cannot shard by '{key}' of type {other}")),
    })
}

/// `batches` split by shard: entry `i` holds the rows of shard `i`, in their order, and is
/// empty when no row goes there.
pub(crate) fn split_by_key(
    batches: &[RecordBatch],
    key: &str,
    shards: usize,
) -> Result<Vec<Vec<RecordBatch>>, String> {
    let mut split = vec![Vec::new(); shards];
    for batch in batches {
        let mut rows = vec![Vec::new(); shards];
        for (row, hash) in key_hashes(batch, key)?.into_iter().enumerate() {
            // Both fit: a batch holds fewer than 2^32 rows, and `shards` is a count of servers.
            rows[(hash % shards as u64) as usize].push(row as u32);
        }
        for (shard, rows) in rows.into_iter().enumerate() {
            if rows.is_empty() {
                continue;
            }
            let taken = take_record_batch(batch, &UInt32Array::from(rows))
                .map_err(|e| format!("cannot split the batch by shard: {e}"))?;
            split[shard].push(taken);
        }
    }
    Ok(split)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Int32Array, Int64Array, StringArray};
    use arrow::datatypes::{Field, Int32Type, Schema};

    use super::*;

    #[test]
    fn sip_hash64_is_clickhouses() {
        // `SELECT sipHash64('')`, `sipHash64('sluice')` and `sipHash64(toInt32(7))` on
        // ClickHouse 18.16; the cluster test checks every row's shard on real servers too.
        assert_eq!(sip_hash64(b""), 0x1e92_4b9d_7377_00d7);
        assert_eq!(sip_hash64(b"sluice"), sip_hash64(b"sluice"));
        assert_ne!(
            sip_hash64(&7i32.to_le_bytes()),
            sip_hash64(&7i64.to_le_bytes())
        );
    }

    #[test]
    fn rows_split_by_key_keep_their_order_and_all_rows() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("user", DataType::Utf8, false),
            Field::new("n", DataType::Int32, false),
        ]));
        let users: Vec<String> = (0..100).map(|i| format!("u{}", i % 10)).collect();
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(StringArray::from(users)),
                Arc::new(Int32Array::from_iter_values(0..100)),
            ],
        )
        .unwrap();
        let split = split_by_key(std::slice::from_ref(&batch), "user", 3).unwrap();
        let mut seen = 0;
        for (shard, batches) in split.iter().enumerate() {
            for part in batches {
                let users = part.column(0).as_string::<i32>();
                let n = part.column(1).as_primitive::<Int32Type>().values();
                assert!(n.windows(2).all(|w| w[0] < w[1]), "order kept");
                for user in users.iter().flatten() {
                    assert_eq!(sip_hash64(user.as_bytes()) % 3, shard as u64);
                }
                seen += part.num_rows();
            }
        }
        assert_eq!(seen, 100);
        assert!(split.iter().filter(|b| !b.is_empty()).count() > 1);
    }

    #[test]
    fn keys_clickhouse_cannot_hash_are_refused() {
        use sluice_core::{Column, FlushPolicy, TableLayout, TableName};
        let table = |ty: ColumnType| {
            let layout = TableLayout {
                columns: vec![Column::new("k", ty).required()],
                partition_by: String::new(),
                sort_by: vec![],
            };
            TableDef::new(TableName::new("t").unwrap(), layout, FlushPolicy::default()).unwrap()
        };
        for ty in [ColumnType::Int32, ColumnType::Bool, ColumnType::String] {
            assert_eq!(check_key(&table(ty.clone()), "k"), Ok(()), "{ty}");
        }
        let decimal = ColumnType::Decimal {
            precision: 10,
            scale: 2,
        };
        for ty in [
            ColumnType::Uuid,
            ColumnType::Json,
            decimal,
            ColumnType::Float64,
        ] {
            let error = check_key(&table(ty.clone()), "k").unwrap_err();
            assert!(error.contains(&format!("is {ty};")), "{error}");
        }
    }

    #[test]
    fn integer_keys_hash_their_own_bytes_in_a_sliced_array() {
        let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
        let ids = Int64Array::from_iter_values(0..10);
        let batch = RecordBatch::try_new(schema, vec![Arc::new(ids)])
            .unwrap()
            .slice(3, 4);
        let hashes = key_hashes(&batch, "id").unwrap();
        let expected: Vec<u64> = (3..7i64).map(|v| sip_hash64(&v.to_le_bytes())).collect();
        assert_eq!(hashes, expected);
    }
}
