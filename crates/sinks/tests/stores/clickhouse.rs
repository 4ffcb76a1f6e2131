//! The ClickHouse sink's types on a real ClickHouse 18.16 (scripts/services/clickhouse.sh),
//! read back by `clickhouse-client`: decimals as `Decimal(p, s)` to the last digit, UUIDs as
//! `UUID`, JSON as the `String` it was sent as, sorted by a decimal and a UUID; and a table that
//! exists with a column that would not keep a decimal refused when it is opened. Lists as
//! arrays, structs as named tuples, maps and lists of structs as the `String` of their JSON,
//! since 18.16 has no `Map` and reads no tuple inside an array; a table that exists taking them
//! in the columns that keep them, and refused where a column would lose a null or a digit.

use sluice_core::Sink;
use sluice_sinks::{ClickHouseConfig, ClickHouseSink};

use crate::nested_types;
use crate::new_types::{Service, batch, expected, flush, output, table};

/// Every row `sql` answers on the server whose native port is `port`, in `TabSeparated`, each
/// cell unescaped (`None`: null).
fn query(port: u16, sql: &str) -> Vec<Vec<Option<String>>> {
    let text = output(
        "clickhouse-client",
        &["--port", &port.to_string(), "--query", sql],
    );
    text.lines()
        .map(|line| line.split('\t').map(unescape).collect())
        .collect()
}

/// A `TabSeparated` cell's value: `\N` is null, and a backslash escapes the next character.
fn unescape(cell: &str) -> Option<String> {
    if cell == "\\N" {
        return None;
    }
    let mut out = String::with_capacity(cell.len());
    let mut chars = cell.chars();
    while let Some(c) = chars.next() {
        out.push(match (c, c == '\\') {
            (_, true) => match chars.next() {
                Some('n') => '\n',
                Some('t') => '\t',
                Some('0') => '\0',
                Some(other) => other,
                None => '\\',
            },
            (c, false) => c,
        });
    }
    Some(out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decimals_uuids_and_json_land_in_clickhouse_exactly() {
    let ch = Service::clickhouse();
    let native = ch.ports[1];
    let sink = ClickHouseSink::new(ClickHouseConfig::new(&ch.url)).unwrap();
    // A decimal and a UUID as the sort key, MergeTree's ORDER BY, which takes no nullable
    // column: row 4, all nulls, is left out.
    let t = table("typed", &["whole", "key"], true);
    sink.create_table(&t).await.unwrap();
    let rows = vec![batch(&t, 0..3), batch(&t, 4..6)];
    let landed = sink.write(flush(&t, 1, rows)).await.unwrap();
    assert_eq!(landed.parts, 1);
    let types = query(
        native,
        "SELECT name, type FROM system.columns WHERE database = 'default' AND table = 'typed' \
         FORMAT TabSeparated",
    );
    let expected_types = [
        ("id", "Int64"),
        ("amount", "Nullable(Decimal(38, 2))"),
        ("whole", "Decimal(38, 0)"),
        ("fraction", "Nullable(Decimal(38, 38))"),
        ("small", "Nullable(Decimal(1, 0))"),
        ("key", "UUID"),
        ("doc", "Nullable(String)"),
    ];
    let expected_types: Vec<Vec<Option<String>>> = expected_types
        .iter()
        .map(|(name, ty)| vec![Some((*name).to_owned()), Some((*ty).to_owned())])
        .collect();
    assert_eq!(types, expected_types);
    // The values as ClickHouse prints them (not through toString, which garbles a wide
    // Decimal in 18.16).
    let landed = query(
        native,
        "SELECT id, amount, whole, fraction, small, key, doc FROM default.typed ORDER BY id \
         FORMAT TabSeparated",
    );
    let mut want = expected(None);
    want.remove(3);
    assert_eq!(landed, want);
    // The decimal orders as a number.
    let order = query(
        native,
        "SELECT id FROM default.typed ORDER BY whole, key FORMAT TabSeparated",
    );
    let ids: Vec<String> = order.into_iter().flatten().flatten().collect();
    assert_eq!(ids, ["2", "6", "3", "5", "1"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_column_that_would_not_keep_a_decimal_is_refused_when_opened() {
    let ch = Service::clickhouse();
    let sink = ClickHouseSink::new(ClickHouseConfig::new(&ch.url)).unwrap();
    for (name, amount) in [("rounds", "Decimal(38, 1)"), ("text", "String")] {
        let create = format!(
            "CREATE TABLE default.{name} (id Int64, amount Nullable({amount}), \
             whole Nullable(Decimal(38, 0)), fraction Nullable(Decimal(38, 38)), \
             small Nullable(Decimal(1, 0)), key Nullable(UUID), doc Nullable(String)) \
             ENGINE = MergeTree() ORDER BY tuple()"
        );
        query(ch.ports[1], &create);
        let error = sink
            .create_table(&table(name, &[], false))
            .await
            .unwrap_err();
        assert!(!error.is_retriable(), "{error}");
        assert!(
            error
                .message
                .contains(&format!("column 'amount' is Nullable({amount})")),
            "{error}"
        );
    }
}

/// Each value of [`nested_types::rows`] as ClickHouse 18.16 prints it in `TabSeparated` from
/// the table sluice creates there: arrays and tuples in ClickHouse's text form, timestamps in
/// whole seconds, a null list an empty one and a null struct a tuple of nulls; maps and a list
/// of structs as the `String` of their JSON.
fn nested_rows() -> Vec<Vec<Option<String>>> {
    let row = |id: &str, cells: [Option<&str>; 13]| {
        std::iter::once(Some(id.to_owned()))
            .chain(cells.iter().map(|c| c.map(str::to_owned)))
            .collect::<Vec<_>>()
    };
    let empty_record = Some("(NULL,[],NULL)");
    vec![
        row(
            "1",
            [
                Some("[1,NULL,-9223372036854775808,9223372036854775807]"),
                // `TabSeparated` prints an array's text with one level of escapes, which the
                // reader takes off: the backslash is one, as `names[3]` shows below.
                Some(r#"['a',NULL,'é "q", a\b']"#),
                Some("[9999999999999999.9999,NULL,-0.0001,0.0000]"),
                Some("['67e55044-10b1-426f-9247-bb680e5fe0c8',NULL]"),
                Some("['2025-11-29 12:00:00',NULL,'1970-01-01 00:00:01']"),
                Some("['2025-11-29',NULL]"),
                Some("[1,NULL,0]"),
                Some(r#"['{"a":[1,2.50]}',NULL,'null','"s"']"#),
                Some("(7,['x',NULL],'2025-11-29 12:00:00')"),
                Some(r#"{"p50":1.5,"bad":"NaN","none":null}"#),
                Some(r#"{"a":[1,null],"b":[],"c":null}"#),
                Some(r#"[{"k":"x","v":{"n":1}},null,{"k":null,"v":null}]"#),
                Some("[[1,2],[],[],[NULL]]"),
            ],
        ),
        row(
            "2",
            [
                Some("[]"),
                Some("[]"),
                Some("[]"),
                Some("[]"),
                Some("[]"),
                Some("[]"),
                Some("[]"),
                Some("[]"),
                empty_record,
                Some("{}"),
                Some("{}"),
                Some("[]"),
                Some("[]"),
            ],
        ),
        row(
            "3",
            [
                Some("[]"),
                Some("[]"),
                Some("[]"),
                Some("[]"),
                Some("[]"),
                Some("[]"),
                Some("[]"),
                Some("[]"),
                empty_record,
                None,
                None,
                None,
                Some("[]"),
            ],
        ),
        row(
            "4",
            [
                Some("[NULL]"),
                Some("[NULL]"),
                Some("[NULL]"),
                Some("[NULL]"),
                Some("[NULL]"),
                Some("[NULL]"),
                Some("[NULL]"),
                Some("[NULL]"),
                empty_record,
                Some(r#"{"k":null}"#),
                Some(r#"{"k":[null]}"#),
                Some("[null]"),
                Some("[[]]"),
            ],
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_land_as_arrays_structs_as_tuples_and_maps_as_json_on_18_16() {
    let ch = Service::clickhouse();
    let native = ch.ports[1];
    let sink = ClickHouseSink::new(ClickHouseConfig::new(&ch.url)).unwrap();
    let t = nested_types::table("nested");
    sink.create_table(&t).await.unwrap();
    let batches = vec![nested_types::batch(&t, 0..2), nested_types::batch(&t, 2..4)];
    sink.write(flush(&t, 1, batches)).await.unwrap();
    let types = query(
        native,
        "SELECT name, type FROM system.columns WHERE database = 'default' AND table = 'nested' \
         FORMAT TabSeparated",
    );
    let want: Vec<Vec<Option<String>>> = [
        ("id", "Int64"),
        ("ints", "Array(Nullable(Int64))"),
        ("names", "Array(Nullable(String))"),
        ("amounts", "Array(Nullable(Decimal(20, 4)))"),
        ("keys", "Array(Nullable(UUID))"),
        ("times", "Array(Nullable(DateTime('UTC')))"),
        ("days", "Array(Nullable(Date))"),
        ("flags", "Array(Nullable(UInt8))"),
        ("docs", "Array(Nullable(String))"),
        (
            "rec",
            "Tuple(code Nullable(Int32), tags Array(Nullable(String)), at Nullable(DateTime('UTC')))",
        ),
        ("scores", "Nullable(String)"),
        ("groups", "Nullable(String)"),
        ("pairs", "Nullable(String)"),
        ("grid", "Array(Array(Nullable(Int64)))"),
    ]
    .iter()
    .map(|(name, ty)| vec![Some((*name).to_owned()), Some((*ty).to_owned())])
    .collect();
    assert_eq!(types, want);
    let select = format!(
        "SELECT {} FROM default.nested ORDER BY id FORMAT TabSeparated",
        nested_types::select_list()
    );
    assert_eq!(query(native, &select), nested_rows());
    // The values are ClickHouse's own: numbers add up, tuples have their names.
    let read = query(
        native,
        "SELECT arraySum(arrayMap(x -> ifNull(x, 0), flags)), tupleElement(rec, 'code') + 1, \
         toUInt32(times[3]), visitParamExtractString(scores, 'bad'), names[3], \
         length(names[3]) FROM default.nested WHERE id = 1 FORMAT TabSeparated",
    );
    let want = ["1", "8", "1", "NaN", "é \"q\", a\\b", "11"]
        .map(|c| Some(c.to_owned()))
        .to_vec();
    assert_eq!(read, [want]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_that_exists_takes_nested_values_in_columns_that_keep_them() {
    let ch = Service::clickhouse();
    let native = ch.ports[1];
    // An unnamed tuple by position, JSON in plain Strings, wider decimals and integers.
    query(
        native,
        "CREATE TABLE default.kept (id Int64, ints Array(Nullable(Int64)), names String, \
         amounts Array(Nullable(Decimal(38, 6))), keys Array(Nullable(String)), \
         times Array(Nullable(DateTime)), days Array(Nullable(Date)), \
         flags Array(Nullable(UInt8)), docs Nullable(String), \
         rec Tuple(Nullable(Int64), Nullable(String), Nullable(DateTime('UTC'))), \
         scores Nullable(String), groups Nullable(String), pairs String, \
         grid Array(Array(Nullable(Int64)))) ENGINE = MergeTree() ORDER BY id",
    );
    let sink = ClickHouseSink::new(ClickHouseConfig::new(&ch.url)).unwrap();
    let t = nested_types::table("kept");
    sink.create_table(&t).await.unwrap();
    sink.write(flush(&t, 1, vec![nested_types::batch(&t, 0..4)]))
        .await
        .unwrap();
    let select = format!(
        "SELECT {} FROM default.kept ORDER BY id FORMAT TabSeparated",
        nested_types::select_list()
    );
    let documents = nested_types::documents();
    let mut want = nested_rows();
    for (row, document) in want.iter_mut().zip(&documents) {
        // JSON where the table has a String, and "" for a null where it is not Nullable.
        row[8] = document[8].clone();
        for column in [2, 12] {
            row[column] = document[column].clone().or(Some(String::new()));
        }
    }
    let amounts = [
        "[9999999999999999.999900,NULL,-0.000100,0.000000]",
        "[]",
        "[]",
        "[NULL]",
    ];
    let records = [
        "(7,'[\"x\",null]','2025-11-29 12:00:00')",
        "(NULL,'[]',NULL)",
        "(NULL,NULL,NULL)",
        "(NULL,NULL,NULL)",
    ];
    for (row, (amount, record)) in want.iter_mut().zip(amounts.iter().zip(records)) {
        row[3] = Some((*amount).to_owned());
        row[9] = Some(record.to_owned());
    }
    assert_eq!(query(native, &select), want);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_column_that_would_lose_nested_values_is_refused_when_opened() {
    let ch = Service::clickhouse();
    let sink = ClickHouseSink::new(ClickHouseConfig::new(&ch.url)).unwrap();
    let own = |name: &str| match name {
        "rec" => "Nullable(String)".to_owned(),
        "grid" => "Array(Array(Nullable(Int64)))".to_owned(),
        _ => "String".to_owned(),
    };
    let cases = [
        ("nulls", "ints", "Array(Int64)", "may not be null"),
        (
            "narrow",
            "ints",
            "Array(Nullable(Int32))",
            "does not hold every int64",
        ),
        (
            "rounds",
            "amounts",
            "Array(Nullable(Decimal(20, 2)))",
            "keeps 2 digits after the point",
        ),
        (
            "renamed",
            "rec",
            "Tuple(code Nullable(Int32), labels Array(Nullable(String)), at Nullable(DateTime))",
            "element 2",
        ),
        (
            "scalar",
            "grid",
            "Int64",
            "is no type for a list<list<int64>>",
        ),
        // 18.16 keeps an Array of Tuples as an array per element.
        (
            "tuples",
            "pairs",
            "Array(Tuple(Nullable(String), Nullable(String)))",
            "split into the subcolumns pairs.1, pairs.2",
        ),
    ];
    for (table, name, ty, why) in cases {
        let columns: Vec<String> = nested_types::columns()
            .iter()
            .map(|(column, _)| match *column == name {
                true => format!("{column} {ty}"),
                false => format!("{column} {}", own(column)),
            })
            .collect();
        query(
            ch.ports[1],
            &format!(
                "CREATE TABLE default.{table} (id Int64, {}) ENGINE = MergeTree() ORDER BY id",
                columns.join(", ")
            ),
        );
        let error = sink
            .create_table(&nested_types::table(table))
            .await
            .unwrap_err();
        assert!(!error.is_retriable(), "{error}");
        let named = match table {
            "tuples" => format!("column '{name}' is split"),
            _ => format!("column '{name}' is {ty}"),
        };
        assert!(
            error.message.contains(&named) && error.message.contains(why),
            "{table}: {error}"
        );
    }
}
