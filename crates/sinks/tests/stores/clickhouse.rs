//! The ClickHouse sink's types on a real ClickHouse 18.16 (scripts/services/clickhouse.sh),
//! read back by `clickhouse-client`: decimals as `Decimal(p, s)` to the last digit, UUIDs as
//! `UUID`, JSON as the `String` it was sent as, sorted by a decimal and a UUID; and a table that
//! exists with a column that would not keep a decimal refused when it is opened.

use sluice_core::Sink;
use sluice_sinks::{ClickHouseConfig, ClickHouseSink};

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
