//! What every store's test of the `list`, `struct` and `map` types shares: a table with a column
//! of each kind, rows with nulls inside lists, structs and maps, empty lists and maps, and null
//! columns, built with arrow's builders in the layout the doors hand the stores, and the JSON
//! each value's document is.

use std::sync::Arc;

use arrow::array::{
    ArrayBuilder, ArrayRef, BooleanBuilder, Date32Builder, Decimal128Builder, Float64Builder,
    Int32Builder, Int64Builder, ListBuilder, MapBuilder, RecordBatch, StringBuilder, StructBuilder,
    TimestampMicrosecondBuilder, UInt64Builder, make_builder,
};
use serde_json::{Value, json};
use sluice_core::schema::StructField;
use sluice_core::{Column, ColumnType, FlushPolicy, TableDef, TableLayout, TableName};

/// The table's columns after `id`, with their types.
pub fn columns() -> Vec<(&'static str, ColumnType)> {
    let list = ColumnType::list;
    vec![
        ("ints", list(ColumnType::Int64)),
        ("names", list(ColumnType::String)),
        (
            "amounts",
            list(ColumnType::Decimal {
                precision: 20,
                scale: 4,
            }),
        ),
        ("keys", list(ColumnType::Uuid)),
        ("times", list(ColumnType::Timestamp)),
        ("days", list(ColumnType::Date)),
        ("flags", list(ColumnType::Bool)),
        ("docs", list(ColumnType::Json)),
        (
            "rec",
            ColumnType::Struct(vec![
                StructField::new("code", ColumnType::Int32),
                StructField::new("tags", list(ColumnType::String)),
                StructField::new("at", ColumnType::Timestamp),
            ]),
        ),
        ("scores", ColumnType::map(ColumnType::Float64)),
        ("groups", ColumnType::map(list(ColumnType::Int64))),
        (
            "pairs",
            list(ColumnType::Struct(vec![
                StructField::new("k", ColumnType::String),
                StructField::new("v", ColumnType::Json),
            ])),
        ),
        ("grid", list(list(ColumnType::Int64))),
    ]
}

/// The column names, `id` first, as a select list.
pub fn select_list() -> String {
    let mut names = vec!["id"];
    names.extend(columns().iter().map(|(name, _)| *name));
    names.join(", ")
}

/// The rows, one value per column of [`columns`], in the test's own notation: a decimal, a
/// timestamp (`YYYY-MM-DD HH:MM:SS.ffffff`, UTC), a date, a UUID and a `json` value as text, a
/// float that is not finite by its name, a map as `[key, value]` pairs in order.
pub fn rows() -> Vec<Vec<Value>> {
    let nulls = |n| vec![Value::Null; n];
    vec![
        vec![
            json!([1, null, i64::MIN, i64::MAX]),
            json!(["a", null, "é \"q\", a\\b"]),
            json!(["9999999999999999.9999", null, "-0.0001", "0.0000"]),
            json!(["67e55044-10b1-426f-9247-bb680e5fe0c8", null]),
            json!([
                "2025-11-29 12:00:00.000001",
                null,
                "1970-01-01 00:00:01.000000"
            ]),
            json!(["2025-11-29", null]),
            json!([true, null, false]),
            json!([r#"{"a":[1,2.50]}"#, null, "null", r#""s""#]),
            json!({"code": 7, "tags": ["x", null], "at": "2025-11-29 12:00:00.000000"}),
            json!([["p50", 1.5], ["bad", "NaN"], ["none", null]]),
            json!([["a", [1, null]], ["b", []], ["c", null]]),
            json!([{"k": "x", "v": r#"{"n":1}"#}, null, {"k": null, "v": null}]),
            json!([[1, 2], [], null, [null]]),
        ],
        {
            let mut row = vec![json!([]); 8];
            row.push(json!({"code": null, "tags": [], "at": null}));
            row.extend([json!([]), json!([]), json!([]), json!([])]);
            row
        },
        nulls(13),
        {
            let mut row = vec![json!([null]); 8];
            row.push(json!({"code": null, "tags": null, "at": null}));
            row.extend([
                json!([["k", null]]),
                json!([["k", [null]]]),
                json!([null]),
                json!([null]),
            ]);
            row
        },
    ]
}

/// Each value of [`rows`] as its JSON document, the text SQLite holds (`None`: null), with
/// the row's id first.
pub fn documents() -> Vec<Vec<Option<String>>> {
    let row = |id: &str, cells: [&str; 13]| {
        std::iter::once(Some(id.to_owned()))
            .chain(cells.iter().map(|c| Some((*c).to_owned())))
            .collect::<Vec<_>>()
    };
    vec![
        row(
            "1",
            [
                "[1,null,-9223372036854775808,9223372036854775807]",
                r#"["a",null,"é \"q\", a\\b"]"#,
                "[9999999999999999.9999,null,-0.0001,0.0000]",
                r#"["67e55044-10b1-426f-9247-bb680e5fe0c8",null]"#,
                r#"["2025-11-29 12:00:00.000001",null,"1970-01-01 00:00:01.000000"]"#,
                r#"["2025-11-29",null]"#,
                "[true,null,false]",
                r#"[{"a":[1,2.50]},null,null,"s"]"#,
                r#"{"code":7,"tags":["x",null],"at":"2025-11-29 12:00:00.000000"}"#,
                r#"{"p50":1.5,"bad":"NaN","none":null}"#,
                r#"{"a":[1,null],"b":[],"c":null}"#,
                r#"[{"k":"x","v":{"n":1}},null,{"k":null,"v":null}]"#,
                "[[1,2],[],null,[null]]",
            ],
        ),
        row(
            "2",
            [
                "[]",
                "[]",
                "[]",
                "[]",
                "[]",
                "[]",
                "[]",
                "[]",
                r#"{"code":null,"tags":[],"at":null}"#,
                "{}",
                "{}",
                "[]",
                "[]",
            ],
        ),
        std::iter::once(Some("3".to_owned()))
            .chain(std::iter::repeat_n(None, 13))
            .collect(),
        row(
            "4",
            [
                "[null]",
                "[null]",
                "[null]",
                "[null]",
                "[null]",
                "[null]",
                "[null]",
                "[null]",
                r#"{"code":null,"tags":null,"at":null}"#,
                r#"{"k":null}"#,
                r#"{"k":[null]}"#,
                "[null]",
                "[null]",
            ],
        ),
    ]
}

/// Table `name`: `id` (never null) and [`columns`], all nullable.
pub fn table(name: &str) -> TableDef {
    table_of(name, columns())
}

/// Table `name`: `id` (never null) and `columns`, all nullable.
pub fn table_of(name: &str, columns: Vec<(&str, ColumnType)>) -> TableDef {
    let mut all = vec![Column::new("id", ColumnType::Int64).required()];
    all.extend(columns.into_iter().map(|(name, ty)| Column::new(name, ty)));
    let layout = TableLayout {
        columns: all,
        partition_by: String::new(),
        sort_by: vec![],
    };
    TableDef::new(
        TableName::new(name).unwrap(),
        layout,
        FlushPolicy::default(),
    )
    .unwrap()
    .declared()
}

/// Rows `rows` of [`rows`] (ids counted from 1) in `table`'s Arrow schema.
pub fn batch(table: &TableDef, range: std::ops::Range<usize>) -> RecordBatch {
    let all = rows();
    let values: Vec<Vec<Value>> = range.clone().map(|r| all[r].clone()).collect();
    batch_of(table, range.map(|r| r as i64 + 1).collect(), &values)
}

/// A batch of `table` whose ids are `ids` and whose other columns hold `values`, a row each.
pub fn batch_of(table: &TableDef, ids: Vec<i64>, values: &[Vec<Value>]) -> RecordBatch {
    let schema = table.schema().arrow().clone();
    let mut arrays: Vec<ArrayRef> = vec![Arc::new(arrow::array::Int64Array::from(ids))];
    for (i, column) in table.schema().columns().iter().enumerate().skip(1) {
        let field = schema.field(i);
        let mut builder = make_builder(field.data_type(), values.len());
        for row in values {
            append(builder.as_mut(), &column.ty, &row[i - 1]);
        }
        arrays.push(builder.finish());
    }
    RecordBatch::try_new(schema, arrays).unwrap()
}

/// Appends `value`, of type `ty` in the test's notation, to `builder`, which arrow's
/// `make_builder` made for `ty`'s Arrow type.
fn append(builder: &mut dyn ArrayBuilder, ty: &ColumnType, value: &Value) {
    let any = builder.as_any_mut();
    match ty {
        ColumnType::List(element) => {
            let list = any
                .downcast_mut::<ListBuilder<Box<dyn ArrayBuilder>>>()
                .unwrap();
            for item in value.as_array().into_iter().flatten() {
                append(list.values().as_mut(), element, item);
            }
            list.append(!value.is_null());
        }
        ColumnType::Struct(fields) => {
            let structure = any.downcast_mut::<StructBuilder>().unwrap();
            for (field, builder) in fields.iter().zip(structure.field_builders_mut()) {
                append(builder.as_mut(), &field.ty, &value[&field.name]);
            }
            structure.append(!value.is_null());
        }
        ColumnType::Map(element) => {
            let map = any
                .downcast_mut::<MapBuilder<Box<dyn ArrayBuilder>, Box<dyn ArrayBuilder>>>()
                .unwrap();
            for pair in value.as_array().into_iter().flatten() {
                let (keys, values) = map.entries();
                append(keys.as_mut(), &ColumnType::String, &pair[0]);
                append(values.as_mut(), element, &pair[1]);
            }
            map.append(!value.is_null()).unwrap();
        }
        ColumnType::Int32 => any
            .downcast_mut::<Int32Builder>()
            .unwrap()
            .append_option(value.as_i64().map(|v| i32::try_from(v).unwrap())),
        ColumnType::Int64 => any
            .downcast_mut::<Int64Builder>()
            .unwrap()
            .append_option(value.as_i64()),
        ColumnType::UInt64 => any
            .downcast_mut::<UInt64Builder>()
            .unwrap()
            .append_option(value.as_u64()),
        ColumnType::Float64 => {
            any.downcast_mut::<Float64Builder>()
                .unwrap()
                .append_option(match value {
                    Value::String(name) => Some(name.parse::<f64>().unwrap()),
                    other => other.as_f64(),
                })
        }
        ColumnType::Bool => any
            .downcast_mut::<BooleanBuilder>()
            .unwrap()
            .append_option(value.as_bool()),
        ColumnType::String | ColumnType::Uuid | ColumnType::Json => any
            .downcast_mut::<StringBuilder>()
            .unwrap()
            .append_option(value.as_str()),
        ColumnType::Decimal { .. } => any
            .downcast_mut::<Decimal128Builder>()
            .unwrap()
            .append_option(value.as_str().map(|t| t.replace('.', "").parse().unwrap())),
        ColumnType::Date => {
            any.downcast_mut::<Date32Builder>()
                .unwrap()
                .append_option(value.as_str().map(|t| {
                    let day = chrono::NaiveDate::parse_from_str(t, "%Y-%m-%d").unwrap();
                    (day - chrono::NaiveDate::default()).num_days() as i32
                }))
        }
        ColumnType::Timestamp => any
            .downcast_mut::<TimestampMicrosecondBuilder>()
            .unwrap()
            .append_option(value.as_str().map(|t| {
                chrono::NaiveDateTime::parse_from_str(t, "%Y-%m-%d %H:%M:%S%.6f")
                    .unwrap()
                    .and_utc()
                    .timestamp_micros()
            })),
        other => unreachable!("no test values of {other}"),
    }
}
