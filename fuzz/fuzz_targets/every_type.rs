//! A table with a column of every type sluice stores, and a required id: the schema the
//! decoders' fuzz targets read bodies into.

use std::sync::OnceLock;

use sluice_core::schema::StructField;
use sluice_core::{Column, ColumnType, TableSchema};

pub fn schema() -> &'static TableSchema {
    static SCHEMA: OnceLock<TableSchema> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        let mut columns = vec![Column::new("id", ColumnType::Int64).required()];
        let record = ColumnType::Struct(vec![
            StructField::new("a", ColumnType::decimal(10, 2).expect("decimal")),
            StructField::new("b", ColumnType::Json),
        ]);
        let nested = [
            ColumnType::list(ColumnType::Int16),
            ColumnType::map(ColumnType::list(ColumnType::Uuid)),
            record,
        ];
        for (i, ty) in ColumnType::ALL.into_iter().chain(nested).enumerate() {
            columns.push(Column::new(format!("c{i}"), ty));
        }
        TableSchema::new(columns).expect("schema")
    })
}
