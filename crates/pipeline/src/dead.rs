//! Dead letters: batches a store refused for good, kept as NDJSON so nothing is dropped silently
//! and one poison batch never blocks its table.
//!
//! ```text
//! DATA_DIR/_dead/<table>/<first seq>-<last seq>.ndjson       the rows, one JSON object per line
//! DATA_DIR/_dead/<table>/<first seq>-<last seq>.error.txt    the store's error and the flush
//! ```
//!
//! Files are written under a temporary name, fsynced and renamed, then the folder is fsynced: a
//! dead letter that exists is whole. Resend one with
//! `curl --data-binary @FILE http://127.0.0.1:8124/v1/tables/<table>/rows` once the table is fixed.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use arrow::array::RecordBatch;
use sluice_core::FlushId;

/// Writes one refused flush (its rows in `batches`) and its error. Returns the path of the rows.
pub(crate) fn write(
    root: &Path,
    id: &FlushId,
    batches: &[RecordBatch],
    sink: &str,
    error: &str,
) -> std::io::Result<PathBuf> {
    let dir = root.join(id.table.as_str());
    fs::create_dir_all(&dir)?;
    let stem = format!("{:020}-{:020}", id.first_seq, id.last_seq);
    let mut rows = Vec::new();
    {
        let mut writer = arrow::json::LineDelimitedWriter::new(&mut rows);
        writer
            .write_batches(&batches.iter().collect::<Vec<_>>())
            .and_then(|()| writer.finish())
            .map_err(std::io::Error::other)?;
    }
    let note = format!(
        "table: {}\npartition: {}\nsequence numbers: {}..={}\nrows: {}\nsink: {sink}\nerror: {error}\n",
        id.table,
        id.partition,
        id.first_seq,
        id.last_seq,
        batches.iter().map(RecordBatch::num_rows).sum::<usize>()
    );
    let rows_path = dir.join(format!("{stem}.ndjson"));
    put(&dir, &rows_path, &rows)?;
    put(
        &dir,
        &dir.join(format!("{stem}.error.txt")),
        note.as_bytes(),
    )?;
    File::open(&dir)?.sync_all()?;
    Ok(rows_path)
}

fn put(dir: &Path, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp"));
    let mut file = File::create(&tmp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    drop(file);
    fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    use sluice_core::{PartitionKey, TableName};

    use super::*;

    #[test]
    fn keeps_the_rows_and_the_reason() {
        let dir = tempfile::tempdir().unwrap();
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("s", DataType::Utf8, true),
        ]));
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from(vec![1, 2])),
                Arc::new(StringArray::from(vec![Some("a"), None])),
            ],
        )
        .unwrap();
        let id = FlushId {
            table: TableName::new("t").unwrap(),
            partition: PartitionKey::Whole,
            first_seq: 5,
            last_seq: 9,
        };
        let path = write(
            dir.path(),
            &id,
            &[batch.slice(0, 1), batch.slice(1, 1)],
            "postgres",
            "column \"s\" does not exist",
        )
        .unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "{\"id\":1,\"s\":\"a\"}\n{\"id\":2}\n"
        );
        let note = std::fs::read_to_string(path.with_extension("error.txt")).unwrap();
        assert!(
            note.contains("column \"s\" does not exist")
                && note.contains("5..=9")
                && note.contains("rows: 2"),
            "{note}"
        );
    }
}
