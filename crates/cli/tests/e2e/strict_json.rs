//! Strict JSON, differentially: valid rows mutated at random (a fixed seed; characters inserted,
//! deleted and replaced), each judged by serde_json as the reference for JSON (RFC 8259). Every
//! line the reference refuses, sluice refuses; every line it takes that fits the table, sluice
//! lands with the same values; every other line is refused. First through the decoder itself
//! for thousands of lines, then through both HTTP doors, read back from the lake.

use std::collections::HashMap;
use std::fs::File;

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{Float64Type, Int32Type, Int64Type};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use reqwest::StatusCode;
use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::Value;
use sluice_core::{Column, ColumnType, DecodeOptions, JsonDialect, TableSchema, decode_ndjson};

use crate::common::{Server, parts};

/// Valid rows of the table below, in several spellings, that the mutations start from.
const BASES: [&str; 6] = [
    r#"{"id": 12, "s": "abc", "f": 2.5, "b": false, "n": 7}"#,
    r#"{"id":-42,"s":"x\"y\\z \u00e9\ud83d\ude00","f":-0.0,"b":true,"n":null}"#,
    r#"{ "s" : "" , "id" : 9007199254740993 , "f" : 1e-7 }"#,
    r#"{"id":3,"f":12345678901234567890,"b":null}"#,
    r#"{"n":-2147483648,"id":0,"s":"tab\tescaped \/ \b\f\r"}"#,
    r#"{"id": 77, "f": 10, "n": 2147483647, "s": "{\"nested\": [1, 2]}"}"#,
];

/// What the mutations put in: JSON's structure, bits of literals, control characters, non-ASCII.
const ALPHABET: &[char] = &[
    '{', '}', '[', ']', ':', ',', '"', '\\', ' ', '\t', '\r', '0', '1', '9', '.', '-', '+', 'e',
    'E', 't', 'r', 'u', 'f', 'a', 'l', 's', 'n', 'x', '\u{1}', '\u{1f}', '\u{7f}', 'é',
];

const TABLE_COLUMNS: &str = r#"columns = [
  { name = "id", type = "int64", nullable = false },
  { name = "s", type = "string" },
  { name = "f", type = "float64" },
  { name = "b", type = "bool" },
  { name = "n", type = "int32" },
]"#;

fn schema() -> TableSchema {
    TableSchema::new(vec![
        Column::new("id", ColumnType::Int64).required(),
        Column::new("s", ColumnType::String),
        Column::new("f", ColumnType::Float64),
        Column::new("b", ColumnType::Bool),
        Column::new("n", ColumnType::Int32),
    ])
    .unwrap()
}

/// A row of the table. Floats are kept as their bits, so `-0.0` must come back as `-0.0`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Row {
    id: i64,
    s: Option<String>,
    f: Option<u64>,
    b: Option<bool>,
    n: Option<i32>,
}

impl Row {
    /// Whether `landed` is this row. A float may be one unit in the last place apart: the
    /// reference, serde_json without its `float_roundtrip` feature, does not always round to the
    /// nearest float (`123456789012345678.90`), and arrow-json does. Turning that feature on for
    /// the test alone would rebuild every crate that uses serde_json a second time.
    fn matches(&self, landed: &Row) -> bool {
        let floats = match (self.f, landed.f) {
            (Some(a), Some(b)) => a.abs_diff(b) <= 1,
            (a, b) => a == b,
        };
        floats && (&self.id, &self.s, self.b, self.n) == (&landed.id, &landed.s, landed.b, landed.n)
    }
}

/// Whether `landed` holds exactly `expected`, in order.
fn all_match(expected: &[Row], landed: &[Row]) -> bool {
    expected.len() == landed.len() && expected.iter().zip(landed).all(|(e, l)| e.matches(l))
}

/// The reference's verdict on one line.
#[derive(Debug)]
enum Verdict {
    /// Not JSON, or not rows: serde_json (or ClickHouse's framing around it) refuses it.
    NotJson,
    /// JSON, but not rows of this table.
    DoesNotFit,
    /// Rows of this table.
    Fits(Vec<Row>),
}

/// `count` lines, each a base row with one to three random edits, none blank.
fn mutated_lines(seed: u64, count: usize) -> Vec<String> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut lines = Vec::with_capacity(count);
    while lines.len() < count {
        let mut chars: Vec<char> = BASES[rng.random_range(0..BASES.len())].chars().collect();
        for _ in 0..rng.random_range(1..=3) {
            let at = rng.random_range(0..chars.len());
            let new = ALPHABET[rng.random_range(0..ALPHABET.len())];
            match rng.random_range(0..3) {
                0 => chars.insert(at, new),
                1 if chars.len() > 1 => {
                    chars.remove(at);
                }
                _ => chars[at] = new,
            }
        }
        let line: String = chars.into_iter().collect();
        if !line.chars().all(|c| matches!(c, ' ' | '\t' | '\r')) {
            lines.push(line);
        }
    }
    lines
}

/// An object's entries in order, duplicates kept (serde_json's `Value` keeps the last).
struct Entries(Vec<(String, Value)>);

impl<'de> Deserialize<'de> for Entries {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct EntriesVisitor;
        impl<'de> Visitor<'de> for EntriesVisitor {
            type Value = Entries;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entries, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = map.next_entry()? {
                    entries.push(entry);
                }
                Ok(Entries(entries))
            }
        }
        deserializer.deserialize_map(EntriesVisitor)
    }
}

/// The row `object` (the text of one JSON object the reference took) makes, if it fits the
/// table. A number column takes a number in quotes when `quoted_numbers` (ClickHouse's door).
fn fit(object: &str, quoted_numbers: bool) -> Option<Row> {
    let entries = serde_json::from_str::<Entries>(object).ok()?.0;
    let mut row = Row {
        id: 0,
        s: None,
        f: None,
        b: None,
        n: None,
    };
    let mut seen = Vec::new();
    for (key, value) in entries {
        if seen.contains(&key) {
            return None;
        }
        seen.push(key.clone());
        let quoted = |v: &Value| v.as_str().filter(|_| quoted_numbers).map(str::to_owned);
        let integer = |v: &Value| {
            v.as_i64()
                .filter(|_| v.is_i64())
                .or_else(|| quoted(v)?.parse().ok())
        };
        match (key.as_str(), &value) {
            ("s" | "f" | "b" | "n", Value::Null) => {}
            ("id", v) => row.id = integer(v)?,
            ("s", Value::String(text)) => row.s = Some(text.clone()),
            ("f", v) => {
                let number = v
                    .as_f64()
                    .filter(|_| v.is_number())
                    .or_else(|| quoted(v)?.parse().ok())?;
                row.f = Some(number.to_bits());
            }
            ("b", Value::Bool(flag)) => row.b = Some(*flag),
            ("n", v) => row.n = Some(i32::try_from(integer(v)?).ok()?),
            _ => return None,
        }
    }
    seen.iter().any(|k| k == "id").then_some(row)
}

/// The reference for sluice's own API: one line, serde_json's verdict, then the table's.
fn ndjson_reference(line: &str) -> Verdict {
    let Ok(value) = serde_json::from_str::<Value>(line) else {
        return Verdict::NotJson;
    };
    match value.is_object().then(|| fit(line, false)).flatten() {
        Some(row) => Verdict::Fits(vec![row]),
        None => Verdict::DoesNotFit,
    }
}

/// The reference for ClickHouse's door: objects separated by whitespace or one comma, optionally
/// inside `[` `]`, each cut and judged by serde_json's stream reader.
fn clickhouse_reference(line: &str) -> Verdict {
    let json_space = |c: char| matches!(c, ' ' | '\t' | '\r' | '\n');
    let mut rest = line.trim_matches(json_space);
    if let Some(inner) = rest.strip_prefix('[') {
        let Some(inner) = inner.trim_end_matches(json_space).strip_suffix(']') else {
            return Verdict::NotJson;
        };
        rest = inner;
    }
    let mut objects = Vec::new();
    loop {
        rest = rest.trim_start_matches(json_space);
        if rest.is_empty() {
            break;
        }
        let mut stream = serde_json::Deserializer::from_str(rest).into_iter::<Value>();
        match stream.next() {
            Some(Ok(value)) if value.is_object() => objects.push(&rest[..stream.byte_offset()]),
            Some(Ok(_)) => return Verdict::DoesNotFit,
            _ => return Verdict::NotJson,
        }
        rest = rest[stream.byte_offset()..].trim_start_matches(json_space);
        rest = rest.strip_prefix(',').unwrap_or(rest);
    }
    let rows: Option<Vec<Row>> = objects.iter().map(|o| fit(o, true)).collect();
    rows.map_or(Verdict::DoesNotFit, Verdict::Fits)
}

/// The rows of a decoded batch of the table.
fn rows_of(batch: &RecordBatch) -> Vec<Row> {
    let column = |name: &str| batch.column_by_name(name).unwrap().clone();
    let (id, s, f, b, n) = (
        column("id"),
        column("s"),
        column("f"),
        column("b"),
        column("n"),
    );
    let (id, s) = (id.as_primitive::<Int64Type>(), s.as_string::<i32>());
    let (f, b, n) = (
        f.as_primitive::<Float64Type>(),
        b.as_boolean(),
        n.as_primitive::<Int32Type>(),
    );
    (0..batch.num_rows())
        .map(|i| Row {
            id: id.value(i),
            s: s.is_valid(i).then(|| s.value(i).to_owned()),
            f: f.is_valid(i).then(|| f.value(i).to_bits()),
            b: b.is_valid(i).then(|| b.value(i)),
            n: n.is_valid(i).then(|| n.value(i)),
        })
        .collect()
}

/// Tallies of the reference's verdicts, so a test can show it exercised each.
#[derive(Debug, Default)]
struct Tally {
    not_json: usize,
    does_not_fit: usize,
    fits: usize,
}

impl Tally {
    fn count(&mut self, verdict: &Verdict) {
        match verdict {
            Verdict::NotJson => self.not_json += 1,
            Verdict::DoesNotFit => self.does_not_fit += 1,
            Verdict::Fits(_) => self.fits += 1,
        }
    }

    /// Each verdict came up often enough for the comparison to mean something.
    fn assert_each_at_least(&self, times: usize) {
        assert!(
            self.not_json >= times && self.does_not_fit >= times && self.fits >= times,
            "{self:?}"
        );
    }
}

#[test]
fn the_decoder_agrees_with_serde_json_on_mutated_rows() {
    let schema = schema();
    for (dialect, reference) in [
        (JsonDialect::Ndjson, ndjson_reference as fn(&str) -> Verdict),
        (JsonDialect::ClickHouse, clickhouse_reference),
    ] {
        let options = DecodeOptions {
            dialect,
            ..Default::default()
        };
        let mut tally = Tally::default();
        for line in mutated_lines(47, 5_000) {
            let verdict = reference(&line);
            tally.count(&verdict);
            let decoded = decode_ndjson(&schema, line.as_bytes(), &options);
            match (&verdict, decoded) {
                (Verdict::Fits(rows), Ok(batch)) => {
                    let landed = rows_of(&batch);
                    assert!(all_match(rows, &landed), "{dialect:?} {line:?}: {landed:?}");
                }
                (Verdict::NotJson | Verdict::DoesNotFit, Err(_)) => {}
                (verdict, decoded) => {
                    panic!("{dialect:?} {line:?}: reference {verdict:?}, sluice {decoded:?}")
                }
            }
        }
        tally.assert_each_at_least(200);
    }
}

/// Every row in the lake's parts of `table`, sorted.
fn landed(server: &Server, table: &str) -> Vec<Row> {
    let mut rows = Vec::new();
    for part in parts(&server.data_dir, table) {
        let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(part).unwrap())
            .unwrap()
            .build()
            .unwrap();
        for batch in reader {
            rows.extend(rows_of(&batch.unwrap()));
        }
    }
    rows.sort();
    rows
}

#[tokio::test]
async fn both_doors_refuse_what_serde_json_refuses_and_land_the_rest_exactly() {
    let config = format!(
        "auto_create = false\n[flush]\nmax_age = \"50ms\"\n\
         [tables.native]\n{TABLE_COLUMNS}\n[tables.clickhouse]\n{TABLE_COLUMNS}\n"
    );
    let server = Server::start(&config);
    let client = reqwest::Client::new();
    let native = server.url("/v1/tables/native/rows?ack=durable");
    let clickhouse =
        server.url("/?query=INSERT%20INTO%20clickhouse%20FORMAT%20JSONEachRow&sluice_ack=durable");
    let lines = mutated_lines(4_700, 800);
    let mut expected: HashMap<&str, Vec<Row>> = HashMap::new();
    for (table, url, reference) in [
        ("native", &native, ndjson_reference as fn(&str) -> Verdict),
        ("clickhouse", &clickhouse, clickhouse_reference),
    ] {
        let mut tally = Tally::default();
        for line in &lines {
            let verdict = reference(line);
            tally.count(&verdict);
            let response = client.post(url).body(line.clone()).send().await.unwrap();
            let status = response.status();
            let text = response.text().await.unwrap();
            match verdict {
                Verdict::Fits(rows) => {
                    assert_eq!(status, StatusCode::OK, "{table} {line:?}: {text}");
                    expected.entry(table).or_default().extend(rows);
                }
                _ => {
                    assert_eq!(status, StatusCode::BAD_REQUEST, "{table} {line:?}: {text}");
                    assert!(text.contains("line 1"), "{table} {line:?}: {text}");
                }
            }
        }
        tally.assert_each_at_least(30);
    }
    for (table, mut rows) in expected {
        rows.sort();
        server
            .wait_rows_written(table, rows.len() as u64, std::time::Duration::from_secs(30))
            .await;
        let landed = landed(&server, table);
        let first_difference = rows.iter().zip(&landed).find(|(e, l)| !e.matches(l));
        assert!(
            all_match(&rows, &landed),
            "{table}: {} rows landed, {} expected; first difference {first_difference:?}",
            landed.len(),
            rows.len()
        );
    }
}
