//! A table with a column of every type sluice stores, and a required id: the schema the
//! decoders' fuzz targets read bodies into.

use std::sync::OnceLock;

use sluice_core::{Column, ColumnType, TableSchema};

pub fn schema() -> &'static TableSchema {
    static SCHEMA: OnceLock<TableSchema> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        let mut columns = vec![Column::new("id", ColumnType::Int64).required()];
        for (i, ty) in ColumnType::ALL.into_iter().enumerate() {
            columns.push(Column::new(format!("c{i}"), ty));
        }
        TableSchema::new(columns).expect("schema")
    })
}
