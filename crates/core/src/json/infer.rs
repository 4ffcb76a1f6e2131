//! A new table's schema, from its first insert.

use std::collections::{HashMap, HashSet};

use arrow::datatypes::DataType;

use super::frame;
use super::{JsonDialect, check, shape};
use crate::error::DecodeError;
use crate::name::printable;
use crate::schema::{
    Column, ColumnType, MAX_INFERRED_COLUMNS, TableSchema, check_column_name, json_kind,
};

/// Infers a schema from the first insert into an auto-created table.
///
/// Every row is read, so a column that holds `1` in one row and `1.5` in another becomes
/// `float64`. Inferred columns are nullable. A column that holds an array or an object in any
/// row becomes a `list`, a `struct` or `json`, by the rules of [`super::shape`].
pub fn infer_schema(body: &[u8], dialect: JsonDialect) -> Result<TableSchema, DecodeError> {
    let (values, nested) = flat_objects(body, dialect)?;
    if values.is_empty() {
        return Err(DecodeError::new(
            None,
            None,
            "the first insert into a new table must carry at least one row".to_owned(),
        ));
    }
    let mut columns = inferred_columns(&values)?;
    for column in &mut columns {
        if let Some(values) = nested.get(&column.name) {
            column.ty = shape::nested_type(&values.iter().collect::<Vec<_>>());
        }
    }
    if columns.is_empty() {
        return Err(DecodeError::new(
            None,
            None,
            "the first insert into a new table must name at least one column: every row of \
             this one is an empty object"
                .to_owned(),
        ));
    }
    if columns.len() > MAX_INFERRED_COLUMNS {
        return Err(DecodeError::new(
            None,
            None,
            format!(
                "a first insert may give a new table at most {MAX_INFERRED_COLUMNS} columns; \
                 this one has {}: declare a wider table in the config",
                columns.len()
            ),
        ));
    }
    let schema =
        TableSchema::new(columns).map_err(|e| DecodeError::new(None, None, e.to_string()))?;
    // A table made from names that differ only in case could not be created in a Delta
    // table or SQLite. (A declared table's sink refuses it at start.)
    if let Some((earlier, later)) = schema.case_clash() {
        return Err(DecodeError::new(
            None,
            Some(printable(later)),
            format!(
                "this is column '{}' spelled in another case; names that differ only in \
                 case are one column to Delta Lake and SQLite",
                printable(earlier)
            ),
        ));
    }
    Ok(schema)
}

/// The columns a body's keys would add to `schema`: each key of its rows that no column has,
/// nullable, with the type its values infer to, in the order inference gives them.
pub fn new_columns(
    body: &[u8],
    dialect: JsonDialect,
    schema: &TableSchema,
) -> Result<Vec<Column>, DecodeError> {
    let inferred = infer_schema(body, dialect)?;
    Ok(inferred
        .columns()
        .iter()
        .filter(|c| schema.column(&c.name).is_none())
        .cloned()
        .collect())
}

/// The values, row by row, of each key that holds an array or an object in some row.
type NestedValues = HashMap<String, Vec<serde_json::Value>>;

/// Every row of the body as a JSON object of scalars with names a column may have, and the
/// values, row by row, of the keys that hold an array or an object in some row: those are taken
/// out of the rows (left as null), since their types are inferred apart.
fn flat_objects(
    body: &[u8],
    dialect: JsonDialect,
) -> Result<(Vec<serde_json::Value>, NestedValues), DecodeError> {
    let mut values = Vec::new();
    let mut nested_keys = HashSet::new();
    for row in frame::rows(body, dialect)? {
        let mut value: serde_json::Value =
            serde_json::from_slice(row.text).map_err(|e| check::refusal(&row, &e))?;
        let serde_json::Value::Object(map) = &mut value else {
            return Err(DecodeError::new(
                Some(row.line),
                None,
                format!("expected a JSON object, found {}", json_kind(&value)),
            ));
        };
        for (key, field) in map.iter_mut() {
            let refuse =
                |reason: String| DecodeError::new(Some(row.line), Some(printable(key)), reason);
            check_column_name(key).map_err(refuse)?;
            if field.is_array() || field.is_object() {
                nested_keys.insert(key.clone());
            }
        }
        values.push(value);
    }
    // Every value of such a key, scalars in other rows too, decides its type.
    let mut nested = NestedValues::new();
    for value in &mut values {
        if let serde_json::Value::Object(map) = value {
            for key in &nested_keys {
                if let Some(field) = map.get_mut(key) {
                    let taken = std::mem::take(field);
                    nested.entry(key.clone()).or_default().push(taken);
                }
            }
        }
    }
    Ok((values, nested))
}

/// The columns arrow-json infers from `values`, as sluice's column types.
fn inferred_columns(values: &[serde_json::Value]) -> Result<Vec<Column>, DecodeError> {
    let inferred = arrow::json::reader::infer_json_schema_from_iterator(values.iter().map(Ok))
        .map_err(|e| DecodeError::new(None, None, format!("cannot infer a schema: {e}")))?;
    inferred
        .fields()
        .iter()
        .map(|field| {
            let ty = match field.data_type() {
                DataType::Null => ColumnType::String,
                other => ColumnType::from_arrow(other).ok_or_else(|| {
                    DecodeError::new(
                        None,
                        Some(field.name().clone()),
                        format!("cannot infer a column type from values of type {other}"),
                    )
                })?,
            };
            Ok(Column::new(field.name().clone(), ty))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn struct_of(name: &str, ty: ColumnType) -> ColumnType {
        ColumnType::Struct(vec![crate::schema::StructField::new(name, ty)])
    }

    fn infer(body: &[u8]) -> Result<TableSchema, DecodeError> {
        infer_schema(body, JsonDialect::Ndjson)
    }

    #[test]
    fn inference_refuses_names_that_differ_only_in_case() {
        let err = infer(br#"{"id":1,"Name":"a","ID":2}"#).unwrap_err();
        // Either spelling may be the one named; the message names the other.
        let other = match err.field.as_deref() {
            Some("ID") => "id",
            Some("id") => "ID",
            field => panic!("{field:?}: {err}"),
        };
        let says = format!("column '{other}' spelled in another case");
        assert!(err.message.contains(&says), "{err}");
        // A declared table may have both: PostgreSQL and ClickHouse keep them apart.
        let both = vec![
            Column::new("id", ColumnType::Int64),
            Column::new("ID", ColumnType::Int64),
        ];
        let schema = TableSchema::new(both).unwrap();
        // The lake's sink refuses it, naming both.
        assert_eq!(schema.case_clash(), Some(("id", "ID")));
        let apart = vec![
            Column::new("id", ColumnType::Int64),
            Column::new("idx", ColumnType::Int64),
        ];
        assert_eq!(TableSchema::new(apart).unwrap().case_clash(), None);
    }

    #[test]
    fn inference_bounds_the_columns_and_declarations_do_not() {
        let row = |n: usize| {
            let fields: Vec<String> = (0..n).map(|i| format!("\"c{i}\":{i}")).collect();
            format!("{{{}}}", fields.join(","))
        };
        let schema = infer(row(MAX_INFERRED_COLUMNS).as_bytes()).unwrap();
        assert_eq!(schema.columns().len(), MAX_INFERRED_COLUMNS);
        let err = infer(row(MAX_INFERRED_COLUMNS + 1).as_bytes()).unwrap_err();
        assert!(err.message.contains("at most 2000 columns"), "{err}");
        let declared = (0..=MAX_INFERRED_COLUMNS)
            .map(|i| Column::new(format!("c{i}"), ColumnType::Int64))
            .collect();
        assert!(TableSchema::new(declared).is_ok());
    }

    #[test]
    fn infers_widest_type_over_all_lines() {
        let schema = infer(b"{\"a\":1,\"b\":\"x\"}\n{\"a\":1.5,\"c\":true}\n").unwrap();
        let types: Vec<_> = schema
            .columns()
            .iter()
            .map(|c| (c.name.as_str(), c.ty.clone()))
            .collect();
        assert_eq!(
            types,
            [
                ("a", ColumnType::Float64),
                ("b", ColumnType::String),
                ("c", ColumnType::Bool)
            ]
        );
    }

    #[test]
    fn arrays_and_objects_make_nested_or_json_columns() {
        let schema = infer(
            b"{\"a\":1,\"tags\":\"x\",\"ids\":[]}\n\n\
              {\"tags\":[1],\"attrs\":{\"k\":{}},\"n\":null,\"ids\":[1,null],\"at\":{\"x\":1}}",
        )
        .unwrap();
        let types: Vec<_> = schema
            .columns()
            .iter()
            .map(|c| (c.name.as_str(), c.ty.clone()))
            .collect();
        assert_eq!(
            types,
            [
                ("a", ColumnType::Int64),
                ("ids", ColumnType::list(ColumnType::Int64)),
                ("tags", ColumnType::Json),
                ("at", struct_of("x", ColumnType::Int64)),
                ("attrs", struct_of("k", ColumnType::Json)),
                ("n", ColumnType::String),
            ]
        );
    }

    #[test]
    fn inference_needs_a_row() {
        assert!(infer(b"\n  \n").is_err());
    }

    #[test]
    fn inference_needs_a_column_and_says_so() {
        let err = infer(b"{}\n{}").unwrap_err();
        assert!(err.to_string().contains("at least one column"), "{err}");
        assert!(!err.to_string().contains("config"), "{err}");
    }
}
