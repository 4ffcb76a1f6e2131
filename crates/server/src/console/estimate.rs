//! `GET /v1/estimate`: seed 000's estimator, [`sluice_core::estimate::estimate`], the very
//! function `sluice estimate` runs, so the page and the command never disagree.
//!
//! What the page leaves out comes from this server: its flush policy, and the write rate and
//! rows per insert it took over the last minute ("what would happen to you without sluice").
//! With nothing taken yet, the seed's example stands in: 20,000 rows/s in 100-row inserts.

use serde_json::{Value, json};
use sluice_core::estimate::{self, EstimateInput, Field};
use sluice_core::{ByteSize, FlushPolicy};

use super::history::History;
use crate::error::{ApiError, Kind};

/// Each parameter and the input it sets, in the order the page lists them.
const PARAMS: [(&str, Field); 7] = [
    ("rows_per_second", Field::Rate),
    ("rows_per_insert", Field::InsertRows),
    ("partitions", Field::Partitions),
    ("max_age", Field::MaxAge),
    ("max_rows", Field::MaxRows),
    ("max_bytes", Field::MaxBytes),
    ("row_bytes", Field::RowBytes),
];

/// The seed's write rate, when the server measured none.
const EXAMPLE_RATE: f64 = 20_000.0;
/// The seed's rows per insert, likewise.
const EXAMPLE_INSERT_ROWS: u64 = 100;
/// Bytes a row takes in the buffer when the page does not say: `sluice estimate`'s default.
const DEFAULT_ROW_BYTES: f64 = 100.0;
/// The window the write rate is measured over, in seconds.
const MEASURE_WINDOW_S: u64 = 60;

/// The parameter that sets `field`.
fn param(field: Field) -> &'static str {
    PARAMS
        .iter()
        .find(|(_, f)| *f == field)
        .map_or("?", |(name, _)| name)
}

/// What the server took over the last minute.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Measured {
    pub(crate) rows_per_second: f64,
    pub(crate) rows_per_insert: f64,
    pub(crate) window_s: f64,
}

/// The write rate and insert size over the last minute of samples, when any insert came in.
pub(crate) fn measured(history: &History) -> Option<Measured> {
    let samples = history.samples();
    let last = samples.back()?;
    let first = (samples.iter())
        .find(|s| last.at_ms.saturating_sub(s.at_ms) <= MEASURE_WINDOW_S * 1000)
        .filter(|s| s.at_ms < last.at_ms)?;
    let window_s = (last.at_ms - first.at_ms) as f64 / 1000.0;
    let rows = last
        .doors
        .rows_total()
        .saturating_sub(first.doors.rows_total());
    let inserts = (last.doors.inserts_total()).saturating_sub(first.doors.inserts_total());
    (inserts > 0).then(|| Measured {
        rows_per_second: rows as f64 / window_s,
        rows_per_insert: rows as f64 / inserts as f64,
        window_s,
    })
}

/// The estimator's input: the page's parameters over the server's own figures. Also says where
/// each input came from: `query`, `policy`, `measured`, `example` or `default`.
pub(crate) fn input(
    pairs: &[(String, String)],
    policy: &FlushPolicy,
    measured: Option<&Measured>,
) -> Result<(EstimateInput, Value), ApiError> {
    let (rate, rows, from) = match measured {
        Some(m) => (
            m.rows_per_second,
            (m.rows_per_insert.round() as u64).max(1),
            "measured",
        ),
        None => (EXAMPLE_RATE, EXAMPLE_INSERT_ROWS, "example"),
    };
    let mut input = EstimateInput {
        rate,
        insert_rows: rows,
        partitions: 1,
        max_age_s: policy.max_age().as_secs_f64(),
        max_rows: policy.max_rows(),
        max_bytes: policy.max_bytes(),
        row_bytes: DEFAULT_ROW_BYTES,
    };
    let mut sources = serde_json::Map::new();
    for (name, field) in PARAMS {
        let source = match field {
            Field::Rate | Field::InsertRows => from,
            Field::MaxAge | Field::MaxRows | Field::MaxBytes => "policy",
            Field::Partitions | Field::RowBytes => "default",
        };
        sources.insert(name.into(), Value::from(source));
    }
    for (key, value) in pairs {
        let Some((name, field)) = PARAMS.iter().find(|(name, _)| name == key) else {
            return Err(ApiError::new(
                Kind::BadRequest,
                format!(
                    "unknown parameter '{}': the parameters are rows_per_second, \
                     rows_per_insert, partitions, max_age, max_rows, max_bytes and row_bytes",
                    key.escape_debug()
                ),
            ));
        };
        set(&mut input, *field, value.trim())
            .map_err(|why| ApiError::new(Kind::BadRequest, format!("{name}: {why}")))?;
        sources.insert((*name).into(), Value::from("query"));
    }
    input.check().map_err(|e| {
        ApiError::new(
            Kind::BadRequest,
            format!("{}: {}", param(e.field), e.reason),
        )
    })?;
    Ok((input, Value::Object(sources)))
}

/// Sets `field` from the text of its parameter.
fn set(input: &mut EstimateInput, field: Field, text: &str) -> Result<(), String> {
    let shown = text.escape_debug();
    let real = || -> Result<f64, String> {
        text.parse::<f64>()
            .ok()
            .filter(|x| x.is_finite())
            .ok_or_else(|| format!("must be a number, got '{shown}'"))
    };
    let whole = || -> Result<u64, String> {
        text.parse::<u64>()
            .map_err(|_| format!("must be a whole number, got '{shown}'"))
    };
    match field {
        Field::Rate => input.rate = real()?,
        Field::InsertRows => input.insert_rows = whole()?,
        Field::Partitions => input.partitions = whole()?,
        Field::MaxRows => input.max_rows = whole()?,
        Field::RowBytes => input.row_bytes = real()?,
        Field::MaxBytes => {
            input.max_bytes = text.parse::<ByteSize>().map(|b| b.0).map_err(|e| {
                format!("must be a size such as 64MiB or 1048576, got '{shown}': {e}")
            })?;
        }
        Field::MaxAge => {
            input.max_age_s = match text.parse::<f64>() {
                Ok(seconds) if seconds.is_finite() => seconds,
                Ok(_) => return Err(format!("must be a duration, got '{shown}'")),
                Err(_) => humantime::parse_duration(text)
                    .map_err(|e| {
                        format!("must be a duration such as 1s or 250ms, got '{shown}': {e}")
                    })?
                    .as_secs_f64(),
            };
        }
    }
    Ok(())
}

/// The answer: the input as it was taken, where each part came from, what was measured, and
/// the estimate exactly as `sluice estimate --json` prints it.
pub(crate) fn answer(input: &EstimateInput, sources: Value, measured: Option<&Measured>) -> Value {
    let estimate = estimate::estimate(input);
    json!({
        "input": {
            "rows_per_second": input.rate,
            "rows_per_insert": input.insert_rows,
            "partitions": input.partitions,
            "max_age_s": input.max_age_s,
            "max_rows": input.max_rows,
            "max_bytes": input.max_bytes,
            "row_bytes": input.row_bytes,
        },
        "from": sources,
        "measured": measured.map(|m| json!({
            "rows_per_second": m.rows_per_second,
            "rows_per_insert": m.rows_per_insert,
            "window_s": m.window_s,
        })),
        "estimate": estimate,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(query: &[(&str, &str)]) -> Vec<(String, String)> {
        (query.iter())
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn the_page_overrides_the_servers_figures_and_gets_the_seeds_answer() {
        let measured = Measured {
            rows_per_second: 50.0,
            rows_per_insert: 2.4,
            window_s: 60.0,
        };
        let policy = FlushPolicy::default();
        let (prefilled, from) = input(&[], &policy, Some(&measured)).unwrap();
        assert_eq!((prefilled.rate, prefilled.insert_rows), (50.0, 2));
        assert_eq!(from["rows_per_second"], "measured");
        assert_eq!(from["max_age"], "policy");
        let query = pairs(&[("rows_per_second", "20000"), ("rows_per_insert", "100")]);
        let (given, from) = input(&query, &policy, Some(&measured)).unwrap();
        assert_eq!(from["rows_per_insert"], "query");
        let answer = answer(&given, from, Some(&measured));
        assert_eq!(answer["estimate"]["direct"]["parts_per_s"], 200.0);
        assert_eq!(answer["estimate"]["direct"]["parts_per_hour"], 720_000.0);
        let (example, from) = input(&[], &policy, None).unwrap();
        assert_eq!((example.rate, example.insert_rows), (20_000.0, 100));
        assert_eq!(from["rows_per_second"], "example");
    }

    #[test]
    fn durations_and_sizes_are_read_as_the_config_writes_them() {
        let policy = FlushPolicy::default();
        let query = pairs(&[("max_age", "250ms"), ("max_bytes", "16MiB")]);
        let (taken, _) = input(&query, &policy, None).unwrap();
        assert_eq!((taken.max_age_s, taken.max_bytes), (0.25, 16 << 20));
        let (taken, _) = input(&pairs(&[("max_age", "2.5")]), &policy, None).unwrap();
        assert_eq!(taken.max_age_s, 2.5);
    }

    #[test]
    fn a_bad_parameter_is_refused_by_name_and_reason() {
        let policy = FlushPolicy::default();
        for (query, says) in [
            (
                ("rows_per_second", "fast"),
                "rows_per_second: must be a number",
            ),
            (
                ("rows_per_second", "NaN"),
                "rows_per_second: must be a number",
            ),
            (
                ("rows_per_second", "-5"),
                "rows_per_second: must be more than 0",
            ),
            (
                ("rows_per_second", "1e300"),
                "rows_per_second: must be more than 0",
            ),
            (
                ("rows_per_insert", "1.5"),
                "rows_per_insert: must be a whole number",
            ),
            (
                ("rows_per_insert", "0"),
                "rows_per_insert: must be at least 1",
            ),
            (("partitions", ""), "partitions: must be a whole number"),
            (("max_age", "soon"), "max_age: must be a duration"),
            (("max_age", "0s"), "max_age: must be more than 0"),
            (("max_bytes", "lots"), "max_bytes: must be a size"),
            (("color", "blue"), "unknown parameter 'color'"),
        ] {
            let error = input(&pairs(&[query]), &policy, None).unwrap_err();
            assert_eq!(error.kind, Kind::BadRequest);
            assert!(
                error.message.starts_with(says),
                "{query:?}: {}",
                error.message
            );
        }
    }
}
