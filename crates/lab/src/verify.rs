//! Reading back what sluice wrote: the `id` of every row of a table, with how often each
//! appears, so a test or a lab can say "exactly once". In the lake the rows are those of the
//! table's live files (as its Delta log lists them); SQLite and PostgreSQL are asked directly.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};

use arrow::array::{Array, AsArray};
use arrow::datatypes::Int64Type;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

/// The data files of `table` under `data_dir` that its Delta log holds now, sorted. Files no
/// commit references (an interrupted flush) are not rows of the table and are left out.
pub fn part_files(data_dir: &Path, table: &str) -> Result<Vec<PathBuf>, String> {
    let dir = data_dir.join(table);
    let files = sluice_sinks::lake::live_files_blocking(&dir).map_err(|e| e.to_string())?;
    Ok(files
        .into_iter()
        .map(|file| dir.join(file.relative))
        .collect())
}

/// How often each `id` appears in the parts of `table`.
pub fn id_counts(data_dir: &Path, table: &str) -> Result<HashMap<i64, usize>, String> {
    let mut counts = HashMap::new();
    for path in part_files(data_dir, table)? {
        let file = File::open(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let reader = ParquetRecordBatchReaderBuilder::try_new(file)
            .and_then(|b| b.build())
            .map_err(|e| format!("{}: {e}", path.display()))?;
        for batch in reader {
            let batch = batch.map_err(|e| format!("{}: {e}", path.display()))?;
            let column = batch
                .column_by_name("id")
                .ok_or_else(|| format!("{} has no id column", path.display()))?;
            let ids = column
                .as_primitive_opt::<Int64Type>()
                .ok_or_else(|| format!("{}: id is not int64", path.display()))?;
            if ids.null_count() > 0 {
                return Err(format!("{} has null ids", path.display()));
            }
            for id in ids.values() {
                *counts.entry(*id).or_default() += 1;
            }
        }
    }
    Ok(counts)
}

/// How often each `id` appears in `table` of the SQLite database at `path`.
pub fn sqlite_id_counts(path: &Path, table: &str) -> Result<HashMap<i64, usize>, String> {
    let describe = |e: rusqlite::Error| format!("{}: {e}", path.display());
    // Read-only: a missing database is an error, not a new empty one.
    let connection =
        rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .map_err(describe)?;
    let mut query = connection
        .prepare(&format!("SELECT id, count(*) FROM \"{table}\" GROUP BY id"))
        .map_err(describe)?;
    let rows = query
        .query_map([], |row| Ok((row.get::<_, i64>(0)?, row.get::<_, i64>(1)?)))
        .map_err(describe)?;
    rows.map(|row| row.map(|(id, n)| (id, n as usize)).map_err(describe))
        .collect()
}

/// How often each `id` appears in `table` of the PostgreSQL database at `url`; none when the
/// table does not exist.
pub async fn postgres_id_counts(url: &str, table: &str) -> Result<HashMap<i64, usize>, String> {
    let describe = |e: tokio_postgres::Error| format!("PostgreSQL: {e}");
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .map_err(|e| format!("cannot connect to PostgreSQL: {e}"))?;
    // The connection ends when the client is dropped.
    tokio::spawn(connection);
    // sluice double-quotes the identifiers it creates.
    let quoted = format!("\"{table}\"");
    let exists: Option<String> = client
        .query_one("SELECT to_regclass($1)::text", &[&quoted])
        .await
        .and_then(|row| row.try_get(0))
        .map_err(describe)?;
    if exists.is_none() {
        return Ok(HashMap::new());
    }
    let rows = client
        .query(
            &format!("SELECT id, count(*) FROM {quoted} GROUP BY id"),
            &[],
        )
        .await
        .map_err(describe)?;
    rows.iter()
        .map(|row| {
            let id: i64 = row.try_get(0).map_err(describe)?;
            let n: i64 = row.try_get(1).map_err(describe)?;
            Ok((id, n as usize))
        })
        .collect()
}

/// Acknowledged ids that are missing, and ids that appear more than once.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Audit {
    /// Acknowledged rows.
    pub acked: u64,
    /// Distinct ids found.
    pub landed: u64,
    /// Acknowledged ids not found.
    pub lost: u64,
    /// Ids found more than once.
    pub duplicated: u64,
    /// A few lost ids, for the report.
    pub lost_examples: Vec<u64>,
    /// A few duplicated ids, for the report.
    pub duplicated_examples: Vec<i64>,
}

/// Checks `acked` id ranges (`[start, end)`) against what landed.
pub fn audit(counts: &HashMap<i64, usize>, acked: &[(u64, u64)]) -> Audit {
    let mut audit = Audit {
        landed: counts.len() as u64,
        ..Audit::default()
    };
    for &(start, end) in acked {
        audit.acked += end - start;
        for id in start..end {
            if !i64::try_from(id).is_ok_and(|id| counts.contains_key(&id)) {
                audit.lost += 1;
                if audit.lost_examples.len() < 5 {
                    audit.lost_examples.push(id);
                }
            }
        }
    }
    let mut duplicated: Vec<i64> = counts
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|(id, _)| *id)
        .collect();
    duplicated.sort_unstable();
    audit.duplicated = duplicated.len() as u64;
    audit.duplicated_examples = duplicated.into_iter().take(5).collect();
    audit
}
