//! The type of a new table's column whose first values hold arrays or objects.
//!
//! - Objects that all have the same keys make a `struct` of those keys, in the order of their
//!   names. Objects whose keys differ between rows make a `json` column: their keys
//!   vary, so a struct would refuse the next row's new key.
//! - Arrays make a `list` when their elements, across every row, are of one kind: booleans,
//!   whole numbers, numbers, strings, objects with the same keys, or arrays of one kind.
//!   Mixed elements make a `json` column, and so do arrays with no element but `null`.
//! - Values of several kinds in one column or field (an object in one row, a number in the
//!   next) make `json`.
//!
//! An object wider than [`MAX_INFERRED_FIELDS`] keys, or a value nested deeper than
//! [`MAX_INFERRED_DEPTH`] levels, is `json` at that level.

use serde_json::Value;

use crate::schema::{ColumnType, StructField, check_column_name};

/// The most levels of `list` and `struct` inference makes; deeper values are `json`.
pub const MAX_INFERRED_DEPTH: usize = 8;

/// The most keys an object may have to become a `struct`; a wider one is `json`.
pub const MAX_INFERRED_FIELDS: usize = 64;

/// The type of a column whose values, across the first insert's rows, are `values`, some of
/// them arrays or objects.
pub(crate) fn nested_type(values: &[&Value]) -> ColumnType {
    infer(values, 0).unwrap_or(ColumnType::Json)
}

/// `None` when every value is null.
fn infer(values: &[&Value], depth: usize) -> Option<ColumnType> {
    let present: Vec<&Value> = values.iter().copied().filter(|v| !v.is_null()).collect();
    if present.is_empty() {
        return None;
    }
    Some(if present.iter().all(|v| v.is_object()) {
        struct_type(&present, depth)
    } else if present.iter().all(|v| v.is_array()) {
        list_type(&present, depth)
    } else {
        scalar_type(&present)
    })
}

fn struct_type(objects: &[&Value], depth: usize) -> ColumnType {
    let Some(first) = objects[0].as_object() else {
        return ColumnType::Json;
    };
    let same_keys = objects.iter().all(|o| {
        o.as_object()
            .is_some_and(|o| o.len() == first.len() && o.keys().all(|k| first.contains_key(k)))
    });
    let named = first.keys().all(|k| check_column_name(k).is_ok());
    let fits = (1..=MAX_INFERRED_FIELDS).contains(&first.len()) && depth < MAX_INFERRED_DEPTH;
    if !(same_keys && named && fits) {
        return ColumnType::Json;
    }
    let fields = first
        .keys()
        .map(|key| {
            let values: Vec<&Value> = objects.iter().map(|o| &o[key.as_str()]).collect();
            // A field null in every row is a string, as a column would be.
            let ty = infer(&values, depth + 1).unwrap_or(ColumnType::String);
            StructField::new(key.clone(), ty)
        })
        .collect();
    ColumnType::Struct(fields)
}

fn list_type(arrays: &[&Value], depth: usize) -> ColumnType {
    if depth >= MAX_INFERRED_DEPTH {
        return ColumnType::Json;
    }
    let elements: Vec<&Value> = arrays
        .iter()
        .filter_map(|a| a.as_array())
        .flatten()
        .collect();
    match infer(&elements, depth + 1) {
        None | Some(ColumnType::Json) => ColumnType::Json,
        Some(element) => ColumnType::list(element),
    }
}

/// One scalar type for all of `values`, or `json` when they are of several kinds.
fn scalar_type(values: &[&Value]) -> ColumnType {
    if values.iter().all(|v| v.is_boolean()) {
        ColumnType::Bool
    } else if values.iter().all(|v| v.is_i64()) {
        ColumnType::Int64
    } else if values.iter().all(|v| v.is_u64()) {
        ColumnType::UInt64
    } else if values.iter().all(|v| v.is_number()) {
        ColumnType::Float64
    } else if values.iter().all(|v| v.is_string()) {
        ColumnType::String
    } else {
        ColumnType::Json
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn inferred(values: &[Value]) -> ColumnType {
        nested_type(&values.iter().collect::<Vec<_>>())
    }

    #[test]
    fn objects_with_the_same_keys_make_structs_and_arrays_of_one_kind_lists() {
        let record = inferred(&[
            json!({"code": 1, "tags": ["a"], "at": {"x": 1.5}}),
            json!({"tags": [], "code": null, "at": {"x": 2}}),
            Value::Null,
        ]);
        assert_eq!(
            record.name(),
            "struct<at: struct<x: float64>, code: int64, tags: list<string>>"
        );
        assert_eq!(
            inferred(&[json!([[1, 2], [3]]), json!([[], null])]).name(),
            "list<list<int64>>"
        );
        assert_eq!(
            inferred(&[json!([{"k": "a"}]), json!([{"k": null}])]).name(),
            "list<struct<k: string>>"
        );
        assert_eq!(inferred(&[json!([1, 2.5])]).name(), "list<float64>");
    }

    #[test]
    fn varying_keys_mixed_kinds_and_empty_arrays_make_json() {
        for values in [
            vec![json!({"a": 1}), json!({"b": 1})],
            vec![json!({"a": 1}), json!({"a": 1, "b": 2})],
            vec![json!([1, "a"])],
            vec![json!([1]), json!({"a": 1})],
            vec![json!([]), json!([null])],
            vec![json!({})],
            vec![json!([{"a": 1}, {"b": 1}])],
        ] {
            assert_eq!(inferred(&values), ColumnType::Json, "{values:?}");
        }
        assert_eq!(
            inferred(&[json!({"a": [1, "x"]})]).name(),
            "struct<a: json>"
        );
    }

    #[test]
    fn width_and_depth_are_bounded() {
        let wide: serde_json::Map<String, Value> = (0..=MAX_INFERRED_FIELDS)
            .map(|i| (format!("k{i}"), json!(i)))
            .collect();
        assert_eq!(inferred(&[Value::Object(wide)]), ColumnType::Json);
        let mut deep = json!(1);
        for _ in 0..20 {
            deep = json!({ "a": deep });
        }
        let ty = inferred(&[deep]);
        assert_eq!(ty.depth(), MAX_INFERRED_DEPTH);
        assert!(ty.name().ends_with("json>>>>>>>>"), "{ty}");
    }
}
