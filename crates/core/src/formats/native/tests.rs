use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{
    Date32Type, Decimal128Type, Float64Type, Int64Type, TimestampMicrosecondType,
};

use super::*;
use crate::formats::tests_support::{nested_rows, nested_table, options_for, rows_json};
use crate::schema::{Column, ColumnType, StructField};

fn leb128(out: &mut Vec<u8>, mut n: u64) {
    loop {
        let byte = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

fn string(out: &mut Vec<u8>, s: &str) {
    leb128(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

fn strings(values: &[&str]) -> Vec<u8> {
    let mut out = Vec::new();
    values.iter().for_each(|v| string(&mut out, v));
    out
}

fn fixed<const N: usize>(values: &[[u8; N]]) -> Vec<u8> {
    values.concat()
}

/// A block of `rows` rows: each column's name, type and data (prefix included).
fn block(rows: u64, columns: &[(&str, &str, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::new();
    leb128(&mut out, columns.len() as u64);
    leb128(&mut out, rows);
    for (name, ty, data) in columns {
        string(&mut out, name);
        string(&mut out, ty);
        out.extend_from_slice(data);
    }
    out
}

fn schema() -> TableSchema {
    TableSchema::new(vec![
        Column::new("id", ColumnType::Int64).required(),
        Column::new("msg", ColumnType::String),
        Column::new("at", ColumnType::Timestamp),
        Column::new("ok", ColumnType::Bool),
        Column::new("day", ColumnType::Date),
        Column::new("price", ColumnType::Float64),
    ])
    .unwrap()
}

fn decode_body(body: &[u8], skip_unknown: bool) -> Result<RecordBatch, DecodeError> {
    decode(&schema(), body, &options_for(None, skip_unknown))
}

fn first_block() -> Vec<u8> {
    block(
        2,
        &[
            (
                "id",
                "UInt64",
                fixed(&[7_u64.to_le_bytes(), 8_u64.to_le_bytes()]),
            ),
            (
                "msg",
                "Nullable(String)",
                [vec![0, 1], strings(&["hé", ""])].concat(),
            ),
            (
                "at",
                "DateTime64(6, 'UTC')",
                fixed(&[1_i64.to_le_bytes(), 1_796_551_200_000_000_i64.to_le_bytes()]),
            ),
            ("ok", "Bool", vec![1, 0]),
            (
                "day",
                "Date32",
                fixed(&[(-1_i32).to_le_bytes(), 20_000_i32.to_le_bytes()]),
            ),
        ],
    )
}

#[test]
fn blocks_of_columns_become_rows_in_the_tables_types() {
    let second = block(
        1,
        &[
            ("id", "UInt64", 9_u64.to_le_bytes().to_vec()),
            (
                "msg",
                "Nullable(String)",
                [vec![0], strings(&["z"])].concat(),
            ),
            ("at", "DateTime64(6, 'UTC')", 2_i64.to_le_bytes().to_vec()),
            ("ok", "Bool", vec![1]),
            ("day", "Date32", 0_i32.to_le_bytes().to_vec()),
        ],
    );
    let empty = block(0, &[("id", "UInt64", vec![])]);
    let body = [first_block(), empty, second].concat();
    let batch = decode_body(&body, false).unwrap();
    assert_eq!(batch.num_rows(), 3);
    let ids: Vec<i64> = batch
        .column(0)
        .as_primitive::<Int64Type>()
        .values()
        .to_vec();
    assert_eq!(ids, [7, 8, 9]);
    let msg = batch.column(1).as_string::<i32>();
    assert_eq!(
        (msg.value(0), msg.is_null(1), msg.value(2)),
        ("hé", true, "z")
    );
    let at = batch.column(2).as_primitive::<TimestampMicrosecondType>();
    assert_eq!(at.values().to_vec(), [1, 1_796_551_200_000_000, 2]);
    let ok = batch.column(3).as_boolean();
    assert_eq!((ok.value(0), ok.value(1)), (true, false));
    assert_eq!(batch.column(4).as_primitive::<Date32Type>().value(0), -1);
    assert_eq!(
        batch.column(5).null_count(),
        3,
        "a column no block names is null"
    );
}

#[test]
fn dictionaries_uuids_enums_and_decimals_are_read_as_their_values() {
    let mut low_cardinality = 1_u64.to_le_bytes().to_vec();
    low_cardinality.extend_from_slice(&(1_u64 << 9).to_le_bytes());
    low_cardinality.extend_from_slice(&2_u64.to_le_bytes());
    low_cardinality.extend_from_slice(&strings(&["", "red"]));
    low_cardinality.extend_from_slice(&3_u64.to_le_bytes());
    low_cardinality.extend_from_slice(&[1, 0, 1]);
    let uuid: Vec<u8> = [
        0x0123_4567_89ab_cdef_u64.to_le_bytes(),
        0x0011_2233_4455_6677_u64.to_le_bytes(),
    ]
    .concat();
    let body = block(
        3,
        &[
            ("id", "Enum8('a' = 1, 'b' = -2)", vec![1, 0xfe, 1]),
            ("msg", "LowCardinality(Nullable(String))", low_cardinality),
            (
                "price",
                "Decimal(9, 2)",
                fixed(&[
                    12_345_i32.to_le_bytes(),
                    (-5_i32).to_le_bytes(),
                    0_i32.to_le_bytes(),
                ]),
            ),
        ],
    );
    let batch = decode_body(&body, false).unwrap();
    let ids: Vec<i64> = batch
        .column(0)
        .as_primitive::<Int64Type>()
        .values()
        .to_vec();
    assert_eq!(ids, [1, -2, 1], "an Enum is its number in a number column");
    let msg = batch.column(1).as_string::<i32>();
    assert_eq!(
        (msg.value(0), msg.is_null(1), msg.value(2)),
        ("red", true, "red")
    );
    let price: Vec<f64> = batch
        .column(5)
        .as_primitive::<Float64Type>()
        .values()
        .to_vec();
    assert_eq!(price, [123.45, -0.05, 0.0]);

    let texts = TableSchema::new(vec![
        Column::new("u", ColumnType::String),
        Column::new("e", ColumnType::String),
    ])
    .unwrap();
    let body = block(
        1,
        &[
            ("u", "UUID", uuid),
            ("e", "Enum16('x' = 300)", 300_i16.to_le_bytes().to_vec()),
        ],
    );
    let batch = decode(&texts, &body, &options_for(None, false)).unwrap();
    let strings = batch.column(0).as_string::<i32>();
    assert_eq!(strings.value(0), "01234567-89ab-cdef-0011-223344556677");
    assert_eq!(batch.column(1).as_string::<i32>().value(0), "x");
}

#[test]
fn unknown_columns_of_any_shape_are_skipped_when_asked() {
    let mut array = [1_u64.to_le_bytes(), 3_u64.to_le_bytes()].concat();
    array.extend_from_slice(&strings(&["a", "b", "c"]));
    let mut map = [0_u64.to_le_bytes(), 1_u64.to_le_bytes()].concat();
    map.extend_from_slice(&strings(&["k"]));
    map.extend_from_slice(&5_u32.to_le_bytes());
    let body = block(
        2,
        &[
            ("tags", "Array(String)", array),
            (
                "id",
                "Int64",
                fixed(&[1_i64.to_le_bytes(), 2_i64.to_le_bytes()]),
            ),
            ("attrs", "Map(String, UInt32)", map),
            (
                "pair",
                "Tuple(a UInt8, b Nullable(UInt8))",
                vec![1, 2, 0, 1, 3, 4],
            ),
        ],
    );
    let batch = decode_body(&body, true).unwrap();
    assert_eq!(
        batch
            .column(0)
            .as_primitive::<Int64Type>()
            .values()
            .to_vec(),
        [1, 2]
    );
    let error = decode_body(&body, false).unwrap_err().to_string();
    assert!(
        error.contains("'tags'") && error.contains("no such column"),
        "{error}"
    );
    assert_eq!(native_block_len(&body), Ok(Some((body.len(), 2))));
}

#[test]
fn bad_blocks_are_refused_naming_the_row_and_the_column() {
    let two = |flag: u8| {
        let msg = [vec![flag], strings(&["x"])].concat();
        block(
            1,
            &[
                ("id", "UInt64", vec![0; 8]),
                ("msg", "Nullable(String)", msg),
            ],
        )
    };
    let body = [two(0), two(1), two(2)].concat();
    let error = decode_body(&body, false).unwrap_err();
    assert_eq!(
        error.to_string(),
        "row 3, column 'msg': a null flag must be 0 or 1, not 2"
    );

    let body = block(2, &[("id", "Int32", vec![0; 6])]);
    let error = decode_body(&body, false).unwrap_err().to_string();
    assert!(
        error.starts_with("row 1, column 'id': the body ends"),
        "{error}"
    );

    let body = block(1, &[("id", "UInt64", u64::MAX.to_le_bytes().to_vec())]);
    let error = decode_body(&body, false).unwrap_err().to_string();
    assert!(error.contains("out of range for int64"), "{error}");

    let array = [1_u64.to_le_bytes().to_vec(), strings(&["a"])].concat();
    let body = block(
        1,
        &[("id", "Int64", vec![0; 8]), ("msg", "Array(String)", array)],
    );
    let error = decode_body(&body, false).unwrap_err().to_string();
    assert!(
        error.contains("'msg'")
            && error.contains("a Array(String) value does not go into the table's string column"),
        "{error}"
    );

    let other = block(1, &[("msg", "String", strings(&["x"]))]);
    let error = decode_body(&[first_block(), other].concat(), false)
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with("row 3: the block's 1 columns are not the first block's id, msg,"),
        "{error}"
    );

    let body = block(1, &[("msg", "String", strings(&["x"]))]);
    let error = decode_body(&body, false).unwrap_err().to_string();
    assert!(
        error.contains("'id'") && error.contains("required"),
        "{error}"
    );
}

#[test]
fn the_placeholder_of_a_null_is_never_read_as_a_value() {
    let placeholders = [
        ("id", "Int64", 1_i64.to_le_bytes().to_vec()),
        ("msg", "Nullable(Enum8('a' = 1))", vec![1, 0]),
        (
            "at",
            "Nullable(DateTime64(3))",
            [&[1][..], &i64::MAX.to_le_bytes()].concat(),
        ),
        ("day", "Nullable(String)", vec![1, 2, 0xff, 0xfe]),
    ];
    let batch = decode_body(&block(1, &placeholders), false).unwrap();
    for column in [1, 2, 4] {
        assert!(batch.column(column).is_null(0), "column {column}");
    }
}

#[test]
fn a_block_is_measured_only_once_all_of_it_has_arrived() {
    let body = [first_block(), block(0, &[])].concat();
    let len = first_block().len();
    assert_eq!(native_block_len(&body), Ok(Some((len, 2))));
    for end in 0..len {
        assert_eq!(native_block_len(&body[..end]), Ok(None), "cut at {end}");
    }
    assert_eq!(native_block_len(&body[len..]), Ok(Some((2, 0))));
    let error = native_block_len(&block(1, &[("x", "Nope", vec![])])).unwrap_err();
    assert!(
        error.contains("does not read ClickHouse type Nope"),
        "{error}"
    );
    let mut low_cardinality = 2_u64.to_le_bytes().to_vec();
    low_cardinality.extend_from_slice(&[0; 16]);
    let error = native_block_len(&block(
        1,
        &[("x", "LowCardinality(String)", low_cardinality)],
    ))
    .unwrap_err();
    assert!(error.contains("key version 2"), "{error}");
}

#[test]
fn an_empty_body_is_no_rows() {
    let batch = decode_body(b"", false).unwrap();
    assert_eq!((batch.num_rows(), batch.num_columns()), (0, 6));
}

/// The table of ClickHouse 18.16.1's `v (n UInt8, d Decimal(18, 2), u Nullable(UUID),
/// j Nullable(String), w Decimal(38, 10))` in sluice.
fn typed_schema() -> TableSchema {
    let decimal = |precision, scale| ColumnType::Decimal { precision, scale };
    TableSchema::new(vec![
        Column::new("d", decimal(18, 2)).required(),
        Column::new("u", ColumnType::Uuid),
        Column::new("j", ColumnType::Json),
        Column::new("w", decimal(38, 10)).required(),
    ])
    .unwrap()
}

/// What ClickHouse 18.16.1 answered for `SELECT d, u, j, w FROM v ORDER BY n FORMAT Native`,
/// `v` holding `(1, -12.34, '67e55044-10b1-426f-9247-bb680e5fe0c8', '{"a":[1,2]}',
/// '-1234567890123456789012345678.0123456789')` and `(2, 9999999999999999.99, NULL, NULL,
/// 0.0000000001)`. A null UUID's placeholder is sixteen zeros, a null string's an empty one.
const CLICKHOUSE_BLOCK: [u8; 170] = [
    0x04, 0x02, 0x01, 0x64, 0x0e, 0x44, 0x65, 0x63, 0x69, 0x6d, 0x61, 0x6c, 0x28, 0x31, 0x38, 0x2c,
    0x20, 0x32, 0x29, 0x2e, 0xfb, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x63, 0xa7, 0xb3,
    0xb6, 0xe0, 0x0d, 0x01, 0x75, 0x0e, 0x4e, 0x75, 0x6c, 0x6c, 0x61, 0x62, 0x6c, 0x65, 0x28, 0x55,
    0x55, 0x49, 0x44, 0x29, 0x00, 0x01, 0x6f, 0x42, 0xb1, 0x10, 0x44, 0x50, 0xe5, 0x67, 0xc8, 0xe0,
    0x5f, 0x0e, 0x68, 0xbb, 0x47, 0x92, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x6a, 0x10, 0x4e, 0x75, 0x6c, 0x6c, 0x61, 0x62, 0x6c,
    0x65, 0x28, 0x53, 0x74, 0x72, 0x69, 0x6e, 0x67, 0x29, 0x00, 0x01, 0x0b, 0x7b, 0x22, 0x61, 0x22,
    0x3a, 0x5b, 0x31, 0x2c, 0x32, 0x5d, 0x7d, 0x00, 0x01, 0x77, 0x0f, 0x44, 0x65, 0x63, 0x69, 0x6d,
    0x61, 0x6c, 0x28, 0x33, 0x38, 0x2c, 0x20, 0x31, 0x30, 0x29, 0xeb, 0xba, 0x98, 0x33, 0xb1, 0x6f,
    0xb6, 0x3b, 0xec, 0xcc, 0xfd, 0x0f, 0x09, 0x4f, 0xb6, 0xf6, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
];

fn decimals(batch: &RecordBatch, column: usize) -> Vec<Option<i128>> {
    batch
        .column(column)
        .as_primitive::<Decimal128Type>()
        .iter()
        .collect()
}

fn texts(batch: &RecordBatch, column: usize) -> Vec<Option<&str>> {
    batch.column(column).as_string::<i32>().iter().collect()
}

#[test]
fn decimals_uuids_and_json_in_clickhouses_own_blocks() {
    let batch = decode(
        &typed_schema(),
        &CLICKHOUSE_BLOCK,
        &options_for(None, false),
    )
    .unwrap();
    assert_eq!(
        decimals(&batch, 0),
        [Some(-1234), Some(999_999_999_999_999_999)]
    );
    assert_eq!(
        texts(&batch, 1),
        [Some("67e55044-10b1-426f-9247-bb680e5fe0c8"), None]
    );
    assert_eq!(texts(&batch, 2), [Some("{\"a\":[1,2]}"), None]);
    assert_eq!(
        decimals(&batch, 3),
        [
            Some(-12_345_678_901_234_567_890_123_456_780_123_456_789),
            Some(1)
        ]
    );
    let declared = declared_columns(&CLICKHOUSE_BLOCK).unwrap();
    assert_eq!(declared[3], ("w".into(), "Decimal(38, 10)".into()));
}

#[test]
fn dictionaries_of_json_text_and_uuids_are_read_as_their_values() {
    // ClickHouse 18.16.1's `SELECT toLowCardinality(toNullable(s)) AS j FROM (SELECT
    // arrayJoin(['{"a":1}', '[true]']) AS s) FORMAT Native`, with
    // allow_experimental_low_cardinality_type=1.
    let json: [u8; 88] = [
        0x01, 0x02, 0x01, 0x6a, 0x20, 0x4c, 0x6f, 0x77, 0x43, 0x61, 0x72, 0x64, 0x69, 0x6e, 0x61,
        0x6c, 0x69, 0x74, 0x79, 0x28, 0x4e, 0x75, 0x6c, 0x6c, 0x61, 0x62, 0x6c, 0x65, 0x28, 0x53,
        0x74, 0x72, 0x69, 0x6e, 0x67, 0x29, 0x29, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x06, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x07, 0x7b, 0x22, 0x61, 0x22, 0x3a, 0x31, 0x7d, 0x06, 0x5b, 0x74, 0x72,
        0x75, 0x65, 0x5d, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x03,
    ];
    let schema = TableSchema::new(vec![
        Column::new("j", ColumnType::Json),
        Column::new("u", ColumnType::Uuid),
    ])
    .unwrap();
    let batch = decode(&schema, &json, &options_for(None, false)).unwrap();
    assert_eq!(texts(&batch, 0), [Some("{\"a\":1}"), Some("[true]")]);

    // 18.16 refuses a dictionary of UUIDs; later versions send one, laid out as a dictionary
    // of strings is: the key version, the index type, the keys (a null one first), the rows'
    // indexes.
    let mut low_cardinality = 1_u64.to_le_bytes().to_vec();
    low_cardinality.extend_from_slice(&(1_u64 << 9).to_le_bytes());
    low_cardinality.extend_from_slice(&2_u64.to_le_bytes());
    low_cardinality.extend_from_slice(&[0; 16]);
    low_cardinality.extend_from_slice(&0x0011_2233_4455_6677_u64.to_le_bytes());
    low_cardinality.extend_from_slice(&0x8899_aabb_ccdd_eeff_u64.to_le_bytes());
    low_cardinality.extend_from_slice(&3_u64.to_le_bytes());
    low_cardinality.extend_from_slice(&[1, 0, 1]);
    let body = block(
        3,
        &[("u", "LowCardinality(Nullable(UUID))", low_cardinality)],
    );
    let batch = decode(&schema, &body, &options_for(None, false)).unwrap();
    let id = "00112233-4455-6677-8899-aabbccddeeff";
    assert_eq!(texts(&batch, 1), [Some(id), None, Some(id)]);
}

#[test]
fn other_decimals_are_rescaled_exactly_or_refused_naming_the_row() {
    let schema = typed_schema();
    let column = |ty: &str, data: Vec<u8>| {
        let rows = data.len() as u64 / 4;
        block(
            rows,
            &[("d", ty, data), ("w", "Int8", vec![1; rows as usize])],
        )
    };
    let good = column(
        "Decimal(9, 4)",
        fixed(&[(-15_000_i32).to_le_bytes(), 123_400_i32.to_le_bytes()]),
    );
    let batch = decode(&schema, &good, &options_for(None, false)).unwrap();
    assert_eq!(decimals(&batch, 0), [Some(-150), Some(1234)]);
    assert_eq!(decimals(&batch, 3), [Some(10_000_000_000); 2]);

    let bad = column(
        "Decimal(9, 4)",
        fixed(&[0_i32.to_le_bytes(), 12_345_i32.to_le_bytes()]),
    );
    let error = decode(&schema, &[good, bad].concat(), &options_for(None, false))
        .unwrap_err()
        .to_string();
    assert_eq!(
        error,
        "row 4, column 'd': 1.2345 has more digits after the point than decimal(18, 2) keeps, \
         and sluice does not round"
    );

    let mut wide = (-5_i128).to_le_bytes().to_vec();
    wide.extend_from_slice(&[0xff; 16]);
    let body = block(1, &[("d", "Decimal256(2)", wide), ("w", "Int8", vec![0])]);
    let batch = decode(&schema, &body, &options_for(None, false)).unwrap();
    assert_eq!(decimals(&batch, 0), [Some(-5)]);

    let big = block(
        1,
        &[
            ("d", "Decimal128(0)", 10_i128.pow(17).to_le_bytes().to_vec()),
            ("w", "Int8", vec![0]),
        ],
    );
    let error = decode(&schema, &big, &options_for(None, false)).unwrap_err();
    assert!(
        error
            .to_string()
            .ends_with("is out of range for decimal(18, 2)"),
        "{error}"
    );
}

#[test]
fn a_column_type_no_value_of_fits_is_refused_before_its_values() {
    let schema = typed_schema();
    for (columns, says) in [
        (
            vec![("d", "UUID", vec![0; 16]), ("w", "Int8", vec![0])],
            "row 1, column 'd': a UUID value does not go into the table's decimal(18, 2) column",
        ),
        (
            vec![
                ("d", "Int8", vec![0]),
                ("w", "Int8", vec![0]),
                ("j", "Enum8('a' = 1)", vec![1]),
            ],
            "row 1, column 'j': a Enum8('a' = 1) value does not go into the table's json column",
        ),
        (
            vec![("d", "Int8", vec![0]), ("w", "Float64", vec![0; 8])],
            "row 1, column 'w': a Float64 value does not go",
        ),
        (
            vec![
                ("d", "Int8", vec![0]),
                ("w", "Int8", vec![0]),
                ("u", "Nullable(Decimal(9, 2))", vec![1, 0, 0, 0, 0]),
            ],
            "row 1, column 'u': a Nullable(Decimal(9, 2)) value",
        ),
    ] {
        let error = decode(&schema, &block(1, &columns), &options_for(None, false))
            .unwrap_err()
            .to_string();
        assert!(error.starts_with(says), "{error}");
    }
    let texts = TableSchema::new(vec![Column::new("s", ColumnType::String)]).unwrap();
    let body = block(
        1,
        &[("s", "Decimal(9, 2)", (-5_i32).to_le_bytes().to_vec())],
    );
    let batch = decode(&texts, &body, &options_for(None, false)).unwrap();
    assert_eq!(batch.column(0).as_string::<i32>().value(0), "-0.05");
}

/// What ClickHouse 18.16.1 answered for `SELECT * FROM v ORDER BY id FORMAT Native`, `v` being
/// [`nested_table`]'s and holding [`nested_rows`]: an array as its rows' end offsets then its
/// elements, a tuple as a column per element.
const CLICKHOUSE_NESTED_BLOCK: [u8; 281] = [
    0x04, 0x02, 0x02, 0x69, 0x64, 0x05, 0x49, 0x6e, 0x74, 0x36, 0x34, 0x01, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x74, 0x61, 0x67, 0x73,
    0x17, 0x41, 0x72, 0x72, 0x61, 0x79, 0x28, 0x4e, 0x75, 0x6c, 0x6c, 0x61, 0x62, 0x6c, 0x65, 0x28,
    0x53, 0x74, 0x72, 0x69, 0x6e, 0x67, 0x29, 0x29, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01, 0x61, 0x00, 0x08, 0x69,
    0x74, 0x27, 0x73, 0x09, 0x74, 0x61, 0x62, 0x04, 0x70, 0x61, 0x69, 0x72, 0x39, 0x54, 0x75, 0x70,
    0x6c, 0x65, 0x28, 0x63, 0x6f, 0x64, 0x65, 0x20, 0x4e, 0x75, 0x6c, 0x6c, 0x61, 0x62, 0x6c, 0x65,
    0x28, 0x49, 0x6e, 0x74, 0x33, 0x32, 0x29, 0x2c, 0x20, 0x74, 0x61, 0x67, 0x73, 0x20, 0x41, 0x72,
    0x72, 0x61, 0x79, 0x28, 0x4e, 0x75, 0x6c, 0x6c, 0x61, 0x62, 0x6c, 0x65, 0x28, 0x53, 0x74, 0x72,
    0x69, 0x6e, 0x67, 0x29, 0x29, 0x29, 0x00, 0x01, 0xc8, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x01, 0x78, 0x04, 0x67, 0x72, 0x69, 0x64, 0x1d, 0x41, 0x72, 0x72, 0x61, 0x79, 0x28, 0x41,
    0x72, 0x72, 0x61, 0x79, 0x28, 0x4e, 0x75, 0x6c, 0x6c, 0x61, 0x62, 0x6c, 0x65, 0x28, 0x49, 0x6e,
    0x74, 0x36, 0x34, 0x29, 0x29, 0x29, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01,
    0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0xfd, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
];

#[test]
fn arrays_and_tuples_in_clickhouses_own_blocks() {
    let batch = decode(
        &nested_table(),
        &CLICKHOUSE_NESTED_BLOCK,
        &options_for(None, false),
    )
    .unwrap();
    assert_eq!(rows_json(&batch), nested_rows());
    let twice = [CLICKHOUSE_NESTED_BLOCK, CLICKHOUSE_NESTED_BLOCK].concat();
    let batch = decode(&nested_table(), &twice, &options_for(None, false)).unwrap();
    let rows = rows_json(&batch);
    assert_eq!(
        rows[2],
        nested_rows()[0],
        "offsets go on from the first block"
    );
    assert_eq!(native_block_len(&twice), Ok(Some((281, 2))));
}

#[test]
fn dictionaries_inside_arrays_keep_their_prefix_before_the_offsets() {
    // ClickHouse 18.16.1's `SELECT CAST(['a', NULL, 'a'] AS
    // Array(LowCardinality(Nullable(String)))) AS l, CAST(['x'] AS
    // Array(LowCardinality(String))) AS m FORMAT Native`, with
    // allow_experimental_low_cardinality_type=1: the key version, then the offsets, then the
    // dictionary of the elements.
    let block: [u8; 167] = [
        0x02, 0x01, 0x01, 0x6c, 0x27, 0x41, 0x72, 0x72, 0x61, 0x79, 0x28, 0x4c, 0x6f, 0x77, 0x43,
        0x61, 0x72, 0x64, 0x69, 0x6e, 0x61, 0x6c, 0x69, 0x74, 0x79, 0x28, 0x4e, 0x75, 0x6c, 0x6c,
        0x61, 0x62, 0x6c, 0x65, 0x28, 0x53, 0x74, 0x72, 0x69, 0x6e, 0x67, 0x29, 0x29, 0x29, 0x01,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x06, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x01, 0x61, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00,
        0x02, 0x01, 0x6d, 0x1d, 0x41, 0x72, 0x72, 0x61, 0x79, 0x28, 0x4c, 0x6f, 0x77, 0x43, 0x61,
        0x72, 0x64, 0x69, 0x6e, 0x61, 0x6c, 0x69, 0x74, 0x79, 0x28, 0x53, 0x74, 0x72, 0x69, 0x6e,
        0x67, 0x29, 0x29, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x06, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x78, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x01,
    ];
    let schema = TableSchema::new(vec![
        Column::new("l", ColumnType::list(ColumnType::String)),
        Column::new("m", ColumnType::list(ColumnType::String)),
    ])
    .unwrap();
    let batch = decode(&schema, &block, &options_for(None, false)).unwrap();
    assert_eq!(
        rows_json(&batch),
        serde_json::json!([{"l": ["a", null, "a"], "m": ["x"]}])
    );
}

/// `id int64`, `labels map<string, float64>`, `attrs struct<code: int32, http: map<string,
/// list<int64>>>`.
fn map_table() -> TableSchema {
    TableSchema::new(vec![
        Column::new("id", ColumnType::Int64).required(),
        Column::new("labels", ColumnType::map(ColumnType::Float64)),
        Column::new(
            "attrs",
            ColumnType::Struct(vec![
                StructField::new("code", ColumnType::Int32),
                StructField::new("http", ColumnType::map(ColumnType::list(ColumnType::Int64))),
            ]),
        ),
    ])
    .unwrap()
}

/// Two rows of [`map_table`], the maps laid out as ClickHouse's `SerializationMap` writes them
/// in `Native`: the array of key and value pairs a map is, its end offsets, then the keys'
/// column and the values' column. `labels` is of type `labels_type`.
fn map_block(labels_type: &str) -> Vec<u8> {
    let labels = [
        fixed(&[2_u64.to_le_bytes(), 2_u64.to_le_bytes()]),
        strings(&["a", "b"]),
        vec![0, 1],
        fixed(&[1.5_f64.to_le_bytes(), 0_f64.to_le_bytes()]),
    ]
    .concat();
    let attrs = [
        vec![0, 1],
        fixed(&[7_i32.to_le_bytes(), 0_i32.to_le_bytes()]),
        fixed(&[1_u64.to_le_bytes(), 1_u64.to_le_bytes()]),
        strings(&["s"]),
        2_u64.to_le_bytes().to_vec(),
        vec![0, 1],
        fixed(&[200_i64.to_le_bytes(), 0_i64.to_le_bytes()]),
    ]
    .concat();
    block(
        2,
        &[
            (
                "id",
                "Int64",
                fixed(&[1_i64.to_le_bytes(), 2_i64.to_le_bytes()]),
            ),
            ("labels", labels_type, labels),
            (
                "attrs",
                "Tuple(code Nullable(Int32), http Map(String, Array(Nullable(Int64))))",
                attrs,
            ),
        ],
    )
}

#[test]
fn maps_and_the_arrays_of_pairs_they_are_laid_out_as() {
    let expected = serde_json::json!([
        {"id": 1, "labels": {"a": 1.5, "b": null}, "attrs": {"code": 7, "http": {"s": [200, null]}}},
        {"id": 2, "labels": {}, "attrs": {"code": null, "http": {}}},
    ]);
    for labels_type in [
        "Map(String, Nullable(Float64))",
        "Array(Tuple(String, Nullable(Float64)))",
    ] {
        let body = map_block(labels_type);
        let batch = decode(&map_table(), &body, &options_for(None, false)).unwrap();
        assert_eq!(rows_json(&batch), expected, "{labels_type}");
        assert_eq!(native_block_len(&body), Ok(Some((body.len(), 2))));
    }
}

#[test]
fn a_dictionary_of_map_values_keeps_its_prefix_before_the_offsets() {
    let schema = TableSchema::new(vec![Column::new(
        "labels",
        ColumnType::map(ColumnType::String),
    )])
    .unwrap();
    let mut labels = 1_u64.to_le_bytes().to_vec();
    labels.extend_from_slice(&fixed(&[2_u64.to_le_bytes(), 3_u64.to_le_bytes()]));
    labels.extend_from_slice(&strings(&["env", "team", "env"]));
    labels.extend_from_slice(&(1_u64 << 9).to_le_bytes());
    labels.extend_from_slice(&3_u64.to_le_bytes());
    labels.extend_from_slice(&strings(&["", "prod", "db"]));
    labels.extend_from_slice(&3_u64.to_le_bytes());
    labels.extend_from_slice(&[1, 0, 2]);
    let body = block(
        2,
        &[(
            "labels",
            "Map(String, LowCardinality(Nullable(String)))",
            labels,
        )],
    );
    let batch = decode(&schema, &body, &options_for(None, false)).unwrap();
    assert_eq!(
        rows_json(&batch),
        serde_json::json!([{"labels": {"env": "prod", "team": null}}, {"labels": {"env": "db"}}])
    );
}

#[test]
fn a_nested_value_that_does_not_fit_is_named_by_its_row_and_its_way() {
    let schema = TableSchema::new(vec![
        Column::new(
            "grid",
            ColumnType::list(ColumnType::list(ColumnType::UInt8)),
        ),
        Column::new("labels", ColumnType::map(ColumnType::UInt8)),
        Column::new(
            "pair",
            ColumnType::Struct(vec![StructField::new("n", ColumnType::UInt8)]),
        ),
    ])
    .unwrap();
    let grid = [
        fixed(&[1_u64.to_le_bytes(), 3_u64.to_le_bytes()]),
        fixed(&[
            1_u64.to_le_bytes(),
            1_u64.to_le_bytes(),
            3_u64.to_le_bytes(),
        ]),
        vec![1, 2, 255],
    ]
    .concat();
    let labels = |second: i16| {
        [
            fixed(&[1_u64.to_le_bytes(), 2_u64.to_le_bytes()]),
            strings(&["a", "b"]),
            fixed(&[5_i16.to_le_bytes(), second.to_le_bytes()]),
        ]
        .concat()
    };
    let pair = fixed(&[1_i16.to_le_bytes(), (-1_i16).to_le_bytes()]);
    let read = |grid_type: &str, labels_type: &str, second: i16| {
        let columns = [
            ("grid", grid_type, grid.clone()),
            ("labels", labels_type, labels(second)),
            ("pair", "Tuple(n Int16)", pair.clone()),
        ];
        decode(&schema, &block(2, &columns), &options_for(None, false))
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        read("Array(Array(Int8))", "Map(String, Int16)", 300),
        "row 2, column 'grid[1][1]': -1 is out of range for uint8"
    );
    assert_eq!(
        read("Array(Array(UInt8))", "Map(String, Int16)", 300),
        "row 2, column 'labels.b': 300 is out of range for uint8"
    );
    assert_eq!(
        read("Array(Array(UInt8))", "Map(String, Int16)", 7),
        "row 2, column 'pair.n': -1 is out of range for uint8"
    );
    let falling = [
        fixed(&[2_u64.to_le_bytes(), 1_u64.to_le_bytes()]),
        vec![0; 24],
    ]
    .concat();
    let error = decode(
        &schema,
        &block(2, &[("grid", "Array(Array(UInt8))", falling)]),
        &options_for(None, false),
    )
    .unwrap_err()
    .to_string();
    assert!(
        error.starts_with("row 1, column 'grid': array offset 1 falls below 2"),
        "{error}"
    );
}

#[test]
fn a_map_whose_keys_are_not_strings_is_refused_before_its_values() {
    let schema = TableSchema::new(vec![Column::new(
        "labels",
        ColumnType::map(ColumnType::UInt8),
    )])
    .unwrap();
    let numbered = [
        fixed(&[1_u64.to_le_bytes(), 2_u64.to_le_bytes()]),
        vec![1, 2],
        fixed(&[5_i16.to_le_bytes(), 7_i16.to_le_bytes()]),
    ]
    .concat();
    let error = decode(
        &schema,
        &block(2, &[("labels", "Map(UInt8, Int16)", numbered)]),
        &options_for(None, false),
    )
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        "row 1, column 'labels': a Map(UInt8, Int16) value does not go into the table's \
         map<string, uint8> column"
    );
}
