//! The PostgreSQL sink's types on a real server (scripts/services/postgres.sh), read back by
//! `psql`: a created table's decimals as `numeric(p,s)`, UUIDs as `uuid` and JSON as `jsonb`,
//! every value to the last digit; a table that exists keeping them as `numeric`, `text` and
//! `json`; and one whose column would round a decimal refused when it is opened.

use sluice_core::Sink;
use sluice_sinks::{PostgresConfig, PostgresSink};

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
