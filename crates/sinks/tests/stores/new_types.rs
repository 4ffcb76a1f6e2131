//! What every store's test of the `decimal`, `uuid` and `json` types shares: a table with a
//! column of each (decimals at 38 digits, at scale 0 and at scale = precision, and of one
//! digit), rows of their widest, negative, zero and null values, the text each cell must read
//! back as, and the independent readers' servers and Python.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use arrow::array::{ArrayRef, Decimal128Array, Int64Array, RecordBatch, StringArray};
use sluice_core::{
    Column, ColumnType, FlushBatch, FlushId, FlushPolicy, PartitionKey, TableDef, TableLayout,
    TableName,
};

/// The table's columns after `id`, with their types.
pub const COLUMNS: [(&str, ColumnType); 6] = [
    ("amount", decimal(38, 2)),
    ("whole", decimal(38, 0)),
    ("fraction", decimal(38, 38)),
    ("small", decimal(1, 0)),
    ("key", ColumnType::Uuid),
    ("doc", ColumnType::Json),
];

const fn decimal(precision: u8, scale: u8) -> ColumnType {
    ColumnType::Decimal { precision, scale }
}

/// The rows, as the text of each value of [`COLUMNS`] (`None`: null). A decimal is written with
/// exactly its scale's digits, as every store must give it back; a JSON value as it is sent.
pub const ROWS: [[Option<&str>; 6]; 6] = [
    [
        Some("999999999999999999999999999999999999.99"),
        Some("99999999999999999999999999999999999999"),
        Some("0.99999999999999999999999999999999999999"),
        Some("9"),
        Some("67e55044-10b1-426f-9247-bb680e5fe0c8"),
        Some(r#"{"a":[1,2.50],"b":{"c":null}}"#),
    ],
    [
        Some("-999999999999999999999999999999999999.99"),
        Some("-99999999999999999999999999999999999999"),
        Some("-0.12345678901234567890123456789012345678"),
        Some("-9"),
        Some("00000000-0000-0000-0000-000000000000"),
        Some(r#"[1,"x",true,null]"#),
    ],
    [
        Some("0.00"),
        Some("0"),
        Some("0.00000000000000000000000000000000000000"),
        Some("0"),
        Some("ffffffff-ffff-ffff-ffff-ffffffffffff"),
        Some(r#""a \"quoted\" string, é""#),
    ],
    [None, None, None, None, None, None],
    [
        Some("-0.01"),
        Some("1"),
        Some("0.00000000000000000000000000000000000001"),
        Some("1"),
        Some("f47ac10b-58cc-4372-a567-0e02b2c3d479"),
        Some("123456789012345678901234567890.50"),
    ],
    [
        Some("12.50"),
        Some("-1"),
        Some("-0.50000000000000000000000000000000000000"),
        Some("-1"),
        Some("c9bf9e57-1685-4c89-bafb-ff5af830be8a"),
        Some("null"),
    ],
];

/// The `doc` column of [`ROWS`] as PostgreSQL's `jsonb` gives it back: the same values, in its
/// own spelling (a space after each `:` and `,`).
pub const JSONB_DOCS: [Option<&str>; 6] = [
    Some(r#"{"a": [1, 2.50], "b": {"c": null}}"#),
    Some(r#"[1, "x", true, null]"#),
    Some(r#""a \"quoted\" string, é""#),
    None,
    Some("123456789012345678901234567890.50"),
    Some("null"),
];

/// Table `name` with `id` (never null) and [`COLUMNS`], sorted by `sort_by`, whose columns
/// may not be null when `keys_required` (row 4, all nulls, then fits no more).
pub fn table(name: &str, sort_by: &[&str], keys_required: bool) -> TableDef {
    partitioned(name, "", sort_by, keys_required)
}

/// [`table`], partitioned by `partition_by`.
pub fn partitioned(
    name: &str,
    partition_by: &str,
    sort_by: &[&str],
    keys_required: bool,
) -> TableDef {
    let mut columns = vec![Column::new("id", ColumnType::Int64).required()];
    columns.extend(COLUMNS.iter().map(|(name, ty)| {
        let column = Column::new(*name, ty.clone());
        match keys_required && sort_by.contains(name) {
            true => column.required(),
            false => column,
        }
    }));
    let layout = TableLayout {
        columns,
        partition_by: partition_by.to_owned(),
        sort_by: sort_by.iter().map(|&k| k.to_owned()).collect(),
    };
    TableDef::new(
        TableName::new(name).unwrap(),
        layout,
        FlushPolicy::default(),
    )
    .unwrap()
    .declared()
}

/// Rows `rows` of [`ROWS`] (ids counted from 1), as the doors would hand them to a store: in
/// the table's Arrow schema, whose metadata tells `uuid` and `json` from `string`.
pub fn batch(table: &TableDef, rows: std::ops::Range<usize>) -> RecordBatch {
    let ids = Int64Array::from_iter_values(rows.clone().map(|r| r as i64 + 1));
    let mut columns: Vec<ArrayRef> = vec![Arc::new(ids)];
    for (index, (_, ty)) in COLUMNS.iter().enumerate() {
        let texts = rows.clone().map(|r| ROWS[r][index]);
        columns.push(match *ty {
            ColumnType::Decimal { precision, scale } => Arc::new(
                texts
                    .map(|text| text.map(unscaled))
                    .collect::<Decimal128Array>()
                    .with_precision_and_scale(precision, scale as i8)
                    .unwrap(),
            ),
            _ => Arc::new(texts.collect::<StringArray>()),
        });
    }
    RecordBatch::try_new(table.schema().arrow().clone(), columns).unwrap()
}

/// A decimal's unscaled value, from its text with exactly its scale's digits.
fn unscaled(text: &str) -> i128 {
    text.replace('.', "").parse().unwrap()
}

/// Flush `seq` of `table`'s one partition, holding `batches`.
pub fn flush(table: &TableDef, seq: u64, batches: Vec<RecordBatch>) -> FlushBatch<'_> {
    flush_of(table, PartitionKey::Whole, seq, batches)
}

/// Flush `seq` of `table`'s `partition`, holding `batches`.
pub fn flush_of(
    table: &TableDef,
    partition: PartitionKey,
    seq: u64,
    batches: Vec<RecordBatch>,
) -> FlushBatch<'_> {
    FlushBatch {
        table,
        id: FlushId {
            table: table.name().clone(),
            partition,
            first_seq: seq,
            last_seq: seq,
        },
        batches,
        keys: Default::default(),
    }
}

/// Every row of [`ROWS`] as a reader must give it back: the id's text, then each cell's, with
/// `doc` replaced by `docs` when a store spells JSON its own way.
pub fn expected(docs: Option<[Option<&str>; 6]>) -> Vec<Vec<Option<String>>> {
    ROWS.iter()
        .enumerate()
        .map(|(r, row)| {
            let mut cells = vec![Some((r + 1).to_string())];
            cells.extend(row.iter().map(|cell| cell.map(str::to_owned)));
            if let Some(docs) = docs {
                cells[6] = docs[r].map(str::to_owned);
            }
            cells
        })
        .collect()
}

/// Runs `program` with `args` and returns its standard output, failing the test with its
/// standard error when it fails.
pub fn output(program: impl AsRef<std::ffi::OsStr>, args: &[&str]) -> String {
    let program = program.as_ref();
    let output = Command::new(program).args(args).output().unwrap();
    assert!(
        output.status.success(),
        "{} {args:?} failed: {}",
        program.to_string_lossy(),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// The Python interpreter with the `deltalake` and `pyarrow` packages: `SLUICE_PYTHON`
/// (scripts/test.sh sets it), else the virtualenv scripts/services/install.sh makes.
pub fn python() -> PathBuf {
    let path = std::env::var_os("SLUICE_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/pyreader/bin/python")
        });
    assert!(
        path.exists(),
        "no Python Delta reader at {}: run scripts/services/install.sh (scripts/test.sh does)",
        path.display()
    );
    path
}

/// A throwaway server started by one of the project's scripts in `scripts/services/`, on free
/// ports of 127.0.0.1, and stopped when dropped.
pub struct Service {
    script: &'static str,
    dir: tempfile::TempDir,
    /// What the script printed: the server's URL.
    pub url: String,
    /// The ports it listens on.
    pub ports: Vec<u16>,
}

impl Service {
    /// A fresh PostgreSQL 15 server.
    pub fn postgres() -> Service {
        Service::start("postgres.sh", 1)
    }

    /// A fresh ClickHouse 18.16 server: HTTP on `ports[0]`, native on `ports[1]`.
    pub fn clickhouse() -> Service {
        Service::start("clickhouse.sh", 2)
    }

    fn start(script: &'static str, ports: usize) -> Service {
        let dir = tempfile::Builder::new()
            .prefix("sluice-types-")
            .tempdir()
            .unwrap();
        // Ports picked while all are held, so no two are the same; one taken by another
        // test's server meanwhile fails the start, which is tried again on others.
        for _ in 0..3 {
            let held: Vec<std::net::TcpListener> = (0..ports)
                .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
                .collect();
            let ports: Vec<u16> = held
                .iter()
                .map(|l| l.local_addr().unwrap().port())
                .collect();
            drop(held);
            let mut args = vec!["start".to_owned(), dir.path().to_string_lossy().into()];
            args.extend(ports.iter().map(u16::to_string));
            let started = Command::new("bash")
                .arg(script_path(script))
                .args(&args)
                .output()
                .unwrap();
            if started.status.success() {
                let url = String::from_utf8(started.stdout).unwrap().trim().to_owned();
                return Service {
                    script,
                    dir,
                    url,
                    ports,
                };
            }
            let error = String::from_utf8_lossy(&started.stderr);
            assert!(
                error.contains("already in use") || error.contains("EADDRINUSE"),
                "{script} failed: {error}"
            );
        }
        panic!("{script}: no free ports in three tries");
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(script_path(self.script))
            .args(["stop", &self.dir.path().to_string_lossy()])
            .output();
    }
}

fn script_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scripts/services")
        .join(name)
}
