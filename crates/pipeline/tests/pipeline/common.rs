//! What both concerns read back: the ids in the lake table `t` under a test's folder.

use std::collections::HashMap;
use std::fs::File;
use std::path::Path;

use arrow::array::AsArray;
use arrow::datatypes::Int64Type;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

/// How often each id appears in table `t` of the lake in `dir`.
pub(crate) fn ids_on_disk(dir: &Path) -> HashMap<i64, usize> {
    let mut counts = HashMap::new();
    // The files the table's Delta log holds: a file no commit references is not in the table.
    for file in sluice_sinks::lake::live_files_blocking(&dir.join("t")).unwrap() {
        let path = dir.join("t").join(file.relative);
        let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(&path).unwrap())
            .unwrap()
            .build()
            .unwrap();
        for batch in reader {
            for id in batch
                .unwrap()
                .column(0)
                .as_primitive::<Int64Type>()
                .values()
            {
                *counts.entry(*id).or_default() += 1;
            }
        }
    }
    counts
}
