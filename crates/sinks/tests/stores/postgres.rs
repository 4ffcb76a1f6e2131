//! The PostgreSQL sink's types on a real server (scripts/services/postgres.sh), read back by
//! `psql`: a created table's decimals as `numeric(p,s)`, UUIDs as `uuid` and JSON as `jsonb`,
//! every value to the last digit; a table that exists keeping them as `numeric`, `text` and
//! `json`; and one whose column would round a decimal refused when it is opened. Lists as arrays
//! of their element's type and structs and maps as `jsonb`, or in the arrays, `jsonb`, `json`
//! and text columns of a table that exists; and columns that would not hold them refused.

use serde_json::json;
use sluice_core::{ColumnType, Sink};
use sluice_sinks::{PostgresConfig, PostgresSink};

use crate::nested_types;
use crate::new_types::{JSONB_DOCS, Service, batch, expected, flush, output, table};

/// Every row `sql` answers at `url`, each cell as `psql` prints it (`None`: null).
fn psql(url: &str, sql: &str) -> Vec<Vec<Option<String>>> {
    const NULL: &str = "<null>";
    let text = output(
        "psql",
        &[
            "-X",
            "-q",
            "-A",
            "-t",
            "-F",
            "\u{1f}",
            "-P",
            &format!("null={NULL}"),
            "-d",
            url,
            "-c",
            sql,
        ],
    );
    text.lines()
        .map(|line| {
            line.split('\u{1f}')
                .map(|cell| (cell != NULL).then(|| cell.to_owned()))
                .collect()
        })
        .collect()
}

/// The table's columns and their types, as PostgreSQL's catalog spells them.
fn column_types(url: &str, table: &str) -> Vec<Vec<Option<String>>> {
    psql(
        url,
        &format!(
            "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute \
             WHERE attrelid = '{table}'::regclass AND attnum > 0 ORDER BY attnum"
        ),
    )
}

const SELECT: &str = "SELECT id, amount, whole, fraction, small, key, doc FROM";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decimals_uuids_and_json_land_in_postgres_own_types_exactly() {
    let pg = Service::postgres();
    let sink = PostgresSink::new(PostgresConfig::new(&pg.url)).unwrap();
    let t = table("typed", &[], false);
    sink.create_table(&t).await.unwrap();
    let landed = sink
        .write(flush(&t, 1, vec![batch(&t, 0..3), batch(&t, 3..6)]))
        .await
        .unwrap();
    assert_eq!(landed.parts, 1);
    let types: Vec<Vec<Option<String>>> = [
        ("id", "bigint"),
        ("amount", "numeric(38,2)"),
        ("whole", "numeric(38,0)"),
        ("fraction", "numeric(38,38)"),
        ("small", "numeric(1,0)"),
        ("key", "uuid"),
        ("doc", "jsonb"),
    ]
    .iter()
    .map(|(name, ty)| vec![Some((*name).to_owned()), Some((*ty).to_owned())])
    .collect();
    assert_eq!(column_types(&pg.url, "typed"), types);
    let rows = psql(&pg.url, &format!("{SELECT} typed ORDER BY id"));
    assert_eq!(rows, expected(Some(JSONB_DOCS)));
    // JSON's null is a value, not SQL's NULL.
    let nulls = psql(&pg.url, "SELECT id FROM typed WHERE doc IS NULL");
    assert_eq!(nulls, [[Some("4".to_owned())]]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_that_exists_keeps_them_as_numeric_text_and_json() {
    let pg = Service::postgres();
    output(
        "psql",
        &[
            "-X",
            "-q",
            "-d",
            &pg.url,
            "-c",
            "CREATE TABLE kept (id bigint NOT NULL, amount numeric, whole text, \
             fraction numeric(40,38), small varchar(8), key text, doc json)",
        ],
    );
    let sink = PostgresSink::new(PostgresConfig::new(&pg.url)).unwrap();
    let t = table("kept", &[], false);
    sink.create_table(&t).await.unwrap();
    sink.write(flush(&t, 1, vec![batch(&t, 0..6)]))
        .await
        .unwrap();
    // `json` keeps the text as it was sent, and `numeric` without a scale the one sent.
    let rows = psql(&pg.url, &format!("{SELECT} kept ORDER BY id"));
    assert_eq!(rows, expected(None));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_column_that_would_change_a_value_is_refused_when_opened() {
    let pg = Service::postgres();
    for (name, amount) in [("rounds", "numeric(38,1)"), ("floats", "double precision")] {
        output(
            "psql",
            &[
                "-X",
                "-q",
                "-d",
                &pg.url,
                "-c",
                &format!(
                    "CREATE TABLE {name} (id bigint NOT NULL, amount {amount}, \
                     whole numeric(38,0), fraction numeric(38,38), small numeric(1,0), \
                     key uuid, doc jsonb)"
                ),
            ],
        );
        let sink = PostgresSink::new(PostgresConfig::new(&pg.url)).unwrap();
        let error = sink
            .create_table(&table(name, &[], false))
            .await
            .unwrap_err();
        assert!(!error.is_retriable(), "{error}");
        assert!(
            error
                .message
                .contains(&format!("column 'amount' is {amount}"))
                && error.message.contains("decimal(38, 2)"),
            "{error}"
        );
    }
}

/// Each value of [`nested_types::rows`] as `psql` prints it from the table sluice creates, in
/// the session time zone UTC: arrays in PostgreSQL's text form, `jsonb` in its own spelling and
/// key order (shorter keys first).
fn nested_rows() -> Vec<Vec<Option<String>>> {
    let row = |id: &str, cells: [&str; 13]| {
        std::iter::once(Some(id.to_owned()))
            .chain(cells.iter().map(|c| Some((*c).to_owned())))
            .collect::<Vec<_>>()
    };
    vec![
        row(
            "1",
            [
                "{1,NULL,-9223372036854775808,9223372036854775807}",
                r#"{a,NULL,"é \"q\", a\\b"}"#,
                "{9999999999999999.9999,NULL,-0.0001,0.0000}",
                "{67e55044-10b1-426f-9247-bb680e5fe0c8,NULL}",
                r#"{"2025-11-29 12:00:00.000001+00",NULL,"1970-01-01 00:00:01+00"}"#,
                "{2025-11-29,NULL}",
                "{t,NULL,f}",
                r#"{"{\"a\": [1, 2.50]}",NULL,"null","\"s\""}"#,
                r#"{"at": "2025-11-29 12:00:00.000000", "code": 7, "tags": ["x", null]}"#,
                r#"{"bad": "NaN", "p50": 1.5, "none": null}"#,
                r#"{"a": [1, null], "b": [], "c": null}"#,
                r#"[{"k": "x", "v": {"n": 1}}, null, {"k": null, "v": null}]"#,
                "[[1, 2], [], null, [null]]",
            ],
        ),
        row(
            "2",
            [
                "{}",
                "{}",
                "{}",
                "{}",
                "{}",
                "{}",
                "{}",
                "{}",
                r#"{"at": null, "code": null, "tags": []}"#,
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
                "{NULL}",
                "{NULL}",
                "{NULL}",
                "{NULL}",
                "{NULL}",
                "{NULL}",
                "{NULL}",
                "{NULL}",
                r#"{"at": null, "code": null, "tags": null}"#,
                r#"{"k": null}"#,
                r#"{"k": [null]}"#,
                "[null]",
                "[null]",
            ],
        ),
    ]
}

fn run(url: &str, sql: &str) {
    output(
        "psql",
        &["-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", url, "-c", sql],
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_land_as_arrays_and_structs_and_maps_as_jsonb() {
    let pg = Service::postgres();
    let sink = PostgresSink::new(PostgresConfig::new(&pg.url)).unwrap();
    let t = nested_types::table("nested");
    sink.create_table(&t).await.unwrap();
    let batches = vec![nested_types::batch(&t, 0..2), nested_types::batch(&t, 2..4)];
    sink.write(flush(&t, 1, batches)).await.unwrap();
    let types: Vec<Vec<Option<String>>> = [
        ("id", "bigint"),
        ("ints", "bigint[]"),
        ("names", "text[]"),
        ("amounts", "numeric(20,4)[]"),
        ("keys", "uuid[]"),
        ("times", "timestamp with time zone[]"),
        ("days", "date[]"),
        ("flags", "boolean[]"),
        ("docs", "jsonb[]"),
        ("rec", "jsonb"),
        ("scores", "jsonb"),
        ("groups", "jsonb"),
        ("pairs", "jsonb"),
        ("grid", "jsonb"),
    ]
    .iter()
    .map(|(name, ty)| vec![Some((*name).to_owned()), Some((*ty).to_owned())])
    .collect();
    assert_eq!(column_types(&pg.url, "nested"), types);
    let select = format!(
        "SET TimeZone = 'UTC'; SELECT {} FROM nested ORDER BY id",
        nested_types::select_list()
    );
    assert_eq!(psql(&pg.url, &select), nested_rows());
    // An empty list is an empty array, a null element SQL's NULL and a JSON null a value.
    let read = psql(
        &pg.url,
        "SELECT cardinality(ints), array_ndims(ints) IS NULL, docs[2] IS NULL, \
         jsonb_typeof(docs[3]), (rec->>'code')::int + 1 FROM nested WHERE id IN (1, 2) \
         ORDER BY id",
    );
    let cells = |row: [Option<&str>; 5]| row.map(|c| c.map(str::to_owned)).to_vec();
    assert_eq!(
        read,
        [
            cells([Some("4"), Some("f"), Some("t"), Some("null"), Some("8")]),
            cells([Some("0"), Some("t"), Some("t"), None, None]),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_that_exists_takes_arrays_of_the_element_type_or_json() {
    let pg = Service::postgres();
    run(
        &pg.url,
        "CREATE TABLE kept (id bigint NOT NULL, ints bigint[], names jsonb, amounts numeric[], \
         keys text[], times timestamptz[], days date[], flags boolean[], docs json[], rec json, \
         scores text, groups jsonb, pairs json, grid text)",
    );
    let sink = PostgresSink::new(PostgresConfig::new(&pg.url)).unwrap();
    let t = nested_types::table("kept");
    sink.create_table(&t).await.unwrap();
    sink.write(flush(&t, 1, vec![nested_types::batch(&t, 0..4)]))
        .await
        .unwrap();
    let select = format!(
        "SET TimeZone = 'UTC'; SELECT {} FROM kept ORDER BY id",
        nested_types::select_list()
    );
    let documents = nested_types::documents();
    let mut want = nested_rows();
    for (row, document) in want.iter_mut().zip(&documents) {
        // `json` and text keep the JSON as sluice wrote it.
        for column in [9, 10, 12, 13] {
            row[column] = document[column].clone();
        }
    }
    want[0][2] = Some(r#"["a", null, "é \"q\", a\\b"]"#.to_owned());
    want[1][2] = Some("[]".to_owned());
    want[3][2] = Some("[null]".to_owned());
    want[0][8] = Some(r#"{"{\"a\":[1,2.50]}",NULL,"null","\"s\""}"#.to_owned());
    assert_eq!(psql(&pg.url, &select), want);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_column_that_would_not_hold_a_nested_value_is_refused_when_opened() {
    let pg = Service::postgres();
    let cases = [
        (
            "narrow",
            "ints integer[]",
            "ints",
            "sluice sends each int64 as bigint",
        ),
        (
            "rounds",
            "amounts numeric(20,2)[]",
            "amounts",
            "keeps 2 digits after the point",
        ),
        (
            "scalar",
            "rec bigint",
            "rec",
            "as its JSON, into jsonb, json or text",
        ),
        (
            "varchars",
            "names varchar(10)[]",
            "names",
            "sluice sends each string as text",
        ),
    ];
    for (table, column, name, why) in cases {
        let others: Vec<String> = nested_types::columns()
            .iter()
            .filter(|(other, _)| *other != name)
            .map(|(other, _)| format!("{other} jsonb"))
            .collect();
        run(
            &pg.url,
            &format!(
                "CREATE TABLE {table} (id bigint NOT NULL, {column}, {})",
                others.join(", ")
            ),
        );
        let sink = PostgresSink::new(PostgresConfig::new(&pg.url)).unwrap();
        let error = sink
            .create_table(&nested_types::table(table))
            .await
            .unwrap_err();
        assert!(!error.is_retriable(), "{error}");
        assert!(
            error.message.contains(&format!("column '{name}' is")) && error.message.contains(why),
            "{table}: {error}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_uint64_too_large_for_bigint_inside_a_list_is_refused() {
    let pg = Service::postgres();
    let sink = PostgresSink::new(PostgresConfig::new(&pg.url)).unwrap();
    let t = nested_types::table_of("big", vec![("ns", ColumnType::list(ColumnType::UInt64))]);
    sink.create_table(&t).await.unwrap();
    let fits = nested_types::batch_of(&t, vec![1], &[vec![json!([1, i64::MAX as u64])]]);
    sink.write(flush(&t, 1, vec![fits])).await.unwrap();
    let over = nested_types::batch_of(&t, vec![2], &[vec![json!([1, null, 1u64 << 63])]]);
    let error = sink.write(flush(&t, 2, vec![over])).await.unwrap_err();
    assert!(!error.is_retriable(), "{error}");
    assert!(
        error
            .message
            .contains("column 'ns': element 3: 9223372036854775808 is too large for a bigint"),
        "{error}"
    );
    let rows = psql(&pg.url, "SELECT id, ns FROM big ORDER BY id");
    assert_eq!(
        rows,
        [[
            Some("1".to_owned()),
            Some("{1,9223372036854775807}".to_owned())
        ]]
    );
}
