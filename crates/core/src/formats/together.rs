//! Small bodies decoded for one round, each answered as if decoded alone: JSON rows in one
//! pass, ClickHouse's other formats body by body into one set of arrays.

use std::ops::Range;

use arrow::array::RecordBatch;

use super::decode;
use crate::error::DecodeError;
use crate::json;
use crate::options::{DecodeOptions, InputFormat};
use crate::schema::TableSchema;

/// What [`decode_together`] gives a set of bodies.
#[derive(Debug)]
#[must_use]
pub enum Together {
    /// Each body decoded alone, with the Arrow memory its rows take, or its error: no body could
    /// be decoded with others, or decoding them together failed.
    Apart(Vec<Result<(RecordBatch, u64), DecodeError>>),
    /// The arrays built for the bodies decoded together, and each body's rows, in the order the
    /// bodies came, or the error [`decode`] gives it.
    Joint(Joint, Vec<Result<BodyRows, DecodeError>>),
}

/// The arrays built for the bodies decoded together: their rows one body after another.
#[derive(Debug)]
pub struct Joint {
    batch: RecordBatch,
    /// The Arrow memory the arrays take.
    bytes: u64,
}

/// Where a body's rows are.
#[derive(Debug)]
pub enum BodyRows {
    /// Rows of the joint arrays.
    Joint(Range<usize>),
    /// A batch of its own, decoded alone, and the Arrow memory it takes.
    Alone(RecordBatch, u64),
}

impl Joint {
    /// The rows `range` and their share, by rows, of the arrays' memory: a slice reports its
    /// whole parent's buffers.
    pub fn rows(&self, range: Range<usize>) -> (RecordBatch, u64) {
        let all = self.batch.num_rows().max(1) as u64;
        let share = self.bytes * range.len() as u64 / all;
        (self.batch.slice(range.start, range.len()), share)
    }
}

impl Together {
    /// Each body's rows as a batch, or its error, in the order the bodies came: what [`decode`]
    /// gives each body alone.
    pub fn into_batches(self) -> Vec<Result<RecordBatch, DecodeError>> {
        match self {
            Together::Joint(joint, rows) => rows
                .into_iter()
                .map(|rows| rows.map(|rows| joint.batch_of(rows).0))
                .collect(),
            Together::Apart(batches) => batches
                .into_iter()
                .map(|decoded| decoded.map(|(batch, _)| batch))
                .collect(),
        }
    }
}

impl Joint {
    /// A body's batch and the Arrow memory its rows take.
    pub fn batch_of(&self, rows: BodyRows) -> (RecordBatch, u64) {
        match rows {
            BodyRows::Joint(range) => self.rows(range),
            BodyRows::Alone(batch, bytes) => (batch, bytes),
        }
    }
}

/// What [`decode`] gives each of `bodies`, read with `options`, with the bodies that allow it
/// decoded together: one set of arrays is built for all of them, and each such body's rows are
/// a range of it. Bodies in a format other than JSON rows are read into it together where the
/// format allows, and otherwise decoded alone and their rows copied into it.
/// For JSON rows of a table of plain columns whose rows the direct pass is sure of,
/// every body is read once into those arrays. Otherwise, for sluice's NDJSON with
/// [`DecodeOptions::default`], arrow-json builds them from the bodies the strict check passed;
/// under any other options each body is decoded alone. Rows, values and errors are those of
/// each body decoded alone: a body that the strict check refuses gets the check's error; one
/// that needs its rows rewritten or built apart is decoded alone; when decoding together fails,
/// each body is decoded alone, so a bad row is named in its own body's error and every other
/// body lands.
pub fn decode_together(
    schema: &TableSchema,
    bodies: &[&[u8]],
    options: &DecodeOptions,
) -> Together {
    if options.format != InputFormat::JsonEachRow {
        return other_format_together(schema, bodies, options);
    }
    if let Some(together) = plain_together(schema, bodies, options) {
        return together;
    }
    if *options != DecodeOptions::default() {
        let apart = bodies
            .iter()
            .map(|body| decode_alone(schema, body, options))
            .collect();
        return Together::Apart(apart);
    }
    let alone = |body: &[u8]| decode_alone(schema, body, options);
    let plan = json::decode::Joinable::new(schema);
    let planned: Vec<Result<Option<usize>, DecodeError>> =
        bodies.iter().map(|body| plan.rows(body)).collect();
    let together: Vec<&[u8]> = bodies
        .iter()
        .zip(&planned)
        .filter(|(_, plan)| matches!(plan, Ok(Some(rows)) if *rows > 0))
        .map(|(body, _)| *body)
        .collect();
    let rows: usize = planned
        .iter()
        .filter_map(|plan| plan.as_ref().ok().copied().flatten())
        .sum();
    let decoded = (!together.is_empty())
        .then(|| json::decode::decode_together(schema, &together, rows).ok())
        .flatten()
        .filter(|batch| batch.num_rows() == rows)
        .and_then(|batch| crate::values::conform(batch, schema).ok());
    let Some(batch) = decoded else {
        let batches = bodies
            .iter()
            .zip(planned)
            .map(|(body, plan)| plan.and_then(|_| alone(body)))
            .collect();
        return Together::Apart(batches);
    };
    let places = bodies.iter().zip(planned).map(|(body, plan)| match plan {
        Ok(Some(n)) if n > 0 => Place::Rows(n),
        Ok(_) => Place::Own(alone(body).map(|(batch, bytes)| BodyRows::Alone(batch, bytes))),
        Err(error) => Place::Own(Err(error)),
    });
    joint_of(batch, places)
}

/// Whether `body`, read with `options`, may be decoded and logged with other bodies. A body in
/// one of ClickHouse's other formats always may: it is decoded alone and logged with its length
/// beside the others. JSON rows are logged as one body, so they may when they frame as the same
/// rows when bodies follow one another, each ending in a newline. Under ClickHouse's framing a
/// body inside `[` `]`, or one that opens with a byte order mark, would not, so it goes alone.
pub fn may_join(body: &[u8], options: &DecodeOptions) -> bool {
    if options.format != InputFormat::JsonEachRow {
        return true;
    }
    if options.dialect.is_line_framed() {
        return true;
    }
    body.iter()
        .find(|byte| !json::frame::is_json_space(byte))
        .is_none_or(|&byte| byte == b'{')
}

/// A body decoded alone, with the Arrow memory its rows take.
fn decode_alone(
    schema: &TableSchema,
    body: &[u8],
    options: &DecodeOptions,
) -> Result<(RecordBatch, u64), DecodeError> {
    decode(schema, body, options).map(|batch| {
        let bytes = batch.get_array_memory_size() as u64;
        (batch, bytes)
    })
}

/// Bodies in a format other than JSON rows, in one set of arrays. Bodies that
/// [`super::decode_many`] takes (those whose headers agree, in any of these formats) are read
/// straight into it. Otherwise each body is decoded
/// alone, and the rows of those that hold any are copied into one set of arrays: what the round
/// shares is then all that comes after decoding, the partition split, the reservation, the log
/// frame and the writer's message. Either way a body without rows, or one that fails, keeps its
/// own answer.
fn other_format_together(
    schema: &TableSchema,
    bodies: &[&[u8]],
    options: &DecodeOptions,
) -> Together {
    if let Some((batch, rows)) = super::decode_many(schema, bodies, options) {
        return read_as_one(schema, bodies, options, batch, rows);
    }
    let decoded: Vec<Result<(RecordBatch, u64), DecodeError>> = bodies
        .iter()
        .map(|body| decode_alone(schema, body, options))
        .collect();
    let with_rows = || {
        decoded
            .iter()
            .filter_map(|d| d.as_ref().ok())
            .filter(|(batch, _)| batch.num_rows() > 0)
            .map(|(batch, _)| batch)
    };
    let joined = match with_rows().count() {
        0 => None,
        _ => arrow::compute::concat_batches(schema.arrow(), with_rows()).ok(),
    };
    let Some(batch) = joined else {
        return Together::Apart(decoded);
    };
    let places = decoded.into_iter().map(|body| match body {
        Ok((batch, _)) if batch.num_rows() > 0 => Place::Rows(batch.num_rows()),
        own => Place::Own(own.map(|(batch, bytes)| BodyRows::Alone(batch, bytes))),
    });
    joint_of(batch, places)
}

/// Where a body's answer is: rows of the joint arrays, next after the body before's, or its own.
enum Place {
    Rows(usize),
    Own(Result<BodyRows, DecodeError>),
}

/// The answer for bodies whose rows lie one after another in `batch`, in the order of `places`.
fn joint_of(batch: RecordBatch, places: impl Iterator<Item = Place>) -> Together {
    let mut offset = 0;
    let bodies = places
        .map(|place| match place {
            Place::Rows(n) => {
                offset += n;
                Ok(BodyRows::Joint(offset - n..offset))
            }
            Place::Own(answer) => answer,
        })
        .collect();
    let bytes = batch.get_array_memory_size() as u64;
    Together::Joint(Joint { batch, bytes }, bodies)
}

/// The answer for bodies read into one set of arrays, `rows` of it each in order; a body of no
/// rows is answered as it is alone, with a batch of none.
fn read_as_one(
    schema: &TableSchema,
    bodies: &[&[u8]],
    options: &DecodeOptions,
    batch: RecordBatch,
    rows: Vec<usize>,
) -> Together {
    let places = bodies.iter().zip(rows).map(|(body, rows)| match rows {
        0 => Place::Own(
            decode_alone(schema, body, options).map(|(batch, bytes)| BodyRows::Alone(batch, bytes)),
        ),
        n => Place::Rows(n),
    });
    joint_of(batch, places)
}

/// The bodies read once, straight into one set of arrays, when they are JSON rows, the table's
/// columns are all plain and every row is one that pass is sure of; `None` sends them all the
/// long way.
fn plain_together(
    schema: &TableSchema,
    bodies: &[&[u8]],
    options: &DecodeOptions,
) -> Option<Together> {
    if options.format != InputFormat::JsonEachRow {
        return None;
    }
    let target = json::decode::target_schema(schema, options).ok()?;
    let mut texts = Vec::new();
    let mut counts = Vec::with_capacity(bodies.len());
    for body in bodies {
        let rows = json::frame::rows(body, options.dialect).ok()?;
        counts.push(rows.len());
        texts.extend(rows.iter().map(|row| row.text));
    }
    let batch =
        json::decode::decode_plain(schema, texts.iter().copied(), texts.len(), options, &target)?;
    Some(read_as_one(schema, bodies, options, batch, counts))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{Column, ColumnType};

    fn schema() -> TableSchema {
        TableSchema::new(vec![
            Column::new("id", ColumnType::Int64).required(),
            Column::new("name", ColumnType::String),
        ])
        .unwrap()
    }

    fn decoded_alone(body: &[u8]) -> Result<RecordBatch, DecodeError> {
        decode(&schema(), body, &DecodeOptions::default())
    }

    /// Good bodies of a table of plain columns are read once into one set of arrays, and each
    /// body's rows there are the rows the long way gives it alone; an empty body gets none.
    #[test]
    fn plain_bodies_share_arrays_read_once() {
        let bodies = [
            "{\"id\": 1, \"name\": \"a\"}\n{\"id\": 2}",
            "",
            "{\"name\": null, \"id\": 3}",
        ];
        let refs: Vec<&[u8]> = bodies.iter().map(|b| b.as_bytes()).collect();
        assert!(
            plain_together(&schema(), &refs, &DecodeOptions::default()).is_some(),
            "went the long way"
        );
        let Together::Joint(joint, rows) =
            decode_together(&schema(), &refs, &DecodeOptions::default())
        else {
            panic!("the bodies were not decoded together");
        };
        for (body, rows) in bodies.iter().zip(rows) {
            let (batch, _) = joint.batch_of(rows.unwrap());
            let options = DecodeOptions::default();
            let long =
                json::decode::decode_ndjson_ways(&schema(), body.as_bytes(), &options, false);
            assert_eq!(Ok(batch), long, "{body}");
        }
    }

    /// Each body of a set decodes to the rows, or the error, it gets alone; the good ones share
    /// one set of arrays, in order, and their shares of its memory add up to it.
    #[test]
    fn together_each_body_decodes_as_it_does_alone() {
        let bodies: Vec<String> = (0..6)
            .map(|i| match i {
                2 => "{\"id\": 2 \"name\": \"x\"}\n".to_owned(),
                4 => "{\"id\": \"four\"}\n".to_owned(),
                _ => format!(
                    "{{\"id\": {i}, \"name\": \"x{i}\"}}\n{{\"id\": {}}}",
                    i + 100
                ),
            })
            .collect();
        let refs: Vec<&[u8]> = bodies.iter().map(|b| b.as_bytes()).collect();
        let Together::Joint(joint, rows) =
            decode_together(&schema(), &refs, &DecodeOptions::default())
        else {
            panic!("the good bodies were not decoded together");
        };
        let ranges: Vec<Option<Range<usize>>> = rows
            .iter()
            .map(|rows| match rows {
                Ok(BodyRows::Joint(range)) => Some(range.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(
            ranges,
            [Some(0..2), Some(2..4), None, Some(4..6), None, Some(6..8)]
        );
        let whole = joint.bytes;
        let mut shares = 0;
        for (body, result) in refs.iter().zip(rows) {
            let result = result.map(|rows| joint.batch_of(rows));
            match (result, decoded_alone(body)) {
                (Ok((batch, bytes)), Ok(alone)) => {
                    assert_eq!(batch, alone);
                    shares += bytes;
                }
                (Err(together), Err(alone)) => assert_eq!(together, alone),
                (together, alone) => panic!("together {together:?}, alone {alone:?}"),
            }
        }
        assert!(shares > 0 && shares <= whole, "{shares} of {whole}");
    }

    fn clickhouse() -> DecodeOptions {
        DecodeOptions {
            dialect: crate::options::JsonDialect::ClickHouse,
            ..DecodeOptions::default()
        }
    }

    /// ClickHouse's `JSONEachRow` bodies under its settings (a column list, unknown keys
    /// skipped) are read once together, and each body gets the rows, or the error, it gets alone.
    #[test]
    fn clickhouse_bodies_decode_together_as_they_do_alone() {
        let listed = DecodeOptions {
            columns: Some(vec!["id".to_owned()]),
            ..clickhouse()
        };
        let skipping = DecodeOptions {
            skip_unknown_fields: true,
            ..clickhouse()
        };
        let cases = [
            (
                clickhouse(),
                [
                    "{\"id\": \"1\"},{\"id\": 2, \"name\": \"b\"}",
                    "{\"id\":3}{\"id\":4}",
                ],
            ),
            (listed, ["{\"id\": 5}", "[{\"id\": 6}]"]),
            (
                skipping,
                ["{\"id\": 7, \"x\": [1]}", "{\"id\": 8, \"name\": 9}"],
            ),
        ];
        for (options, bodies) in cases {
            let refs: Vec<&[u8]> = bodies.iter().map(|b| b.as_bytes()).collect();
            let answers = decode_together(&schema(), &refs, &options).into_batches();
            for (body, answer) in bodies.iter().zip(answers) {
                assert_eq!(
                    answer,
                    decode(&schema(), body.as_bytes(), &options),
                    "{body}"
                );
            }
        }
        let refs: Vec<&[u8]> = vec![b"{\"id\": 1}", b"{\"id\": \"2\"}"];
        assert!(
            matches!(
                decode_together(&schema(), &refs, &clickhouse()),
                Together::Joint(..)
            ),
            "plain ClickHouse bodies were not read together"
        );
    }

    /// A string as ClickHouse's binary formats write it: its length, then its bytes.
    fn put_string(out: &mut Vec<u8>, text: &str) {
        out.push(text.len() as u8);
        out.extend_from_slice(text.as_bytes());
    }

    /// `RowBinary` rows of `id` and a nullable `name`, behind `header` when it is given.
    fn row_binary(header: Option<[&str; 2]>, rows: &[(i64, Option<&str>)]) -> Vec<u8> {
        let mut out = Vec::new();
        if let Some(names) = header {
            out.push(2);
            names.iter().for_each(|name| put_string(&mut out, name));
            for ty in ["Int64", "Nullable(String)"] {
                put_string(&mut out, ty);
            }
        }
        for (id, name) in rows {
            out.extend_from_slice(&id.to_le_bytes());
            match name {
                Some(name) => {
                    out.push(0);
                    put_string(&mut out, name);
                }
                None => out.push(1),
            }
        }
        out
    }

    /// A `Native` block of `id` and a nullable `name`.
    fn native_block(rows: &[(i64, Option<&str>)]) -> Vec<u8> {
        let mut out = vec![2, rows.len() as u8];
        put_string(&mut out, "id");
        put_string(&mut out, "Int64");
        rows.iter()
            .for_each(|(id, _)| out.extend_from_slice(&id.to_le_bytes()));
        put_string(&mut out, "name");
        put_string(&mut out, "Nullable(String)");
        out.extend(rows.iter().map(|(_, name)| u8::from(name.is_none())));
        rows.iter()
            .for_each(|(_, name)| put_string(&mut out, name.unwrap_or("")));
        out
    }

    /// Each body's answer from [`decode_together`], as a batch or an error.
    fn answers(bodies: &[&[u8]], options: &DecodeOptions) -> Vec<Result<RecordBatch, DecodeError>> {
        decode_together(&schema(), bodies, options).into_batches()
    }

    /// `RowBinary` bodies of one header, `Native` bodies of the same columns, CSV, `TabSeparated`
    /// and `JSONCompactEachRow` bodies of one header or none, `Values` and `JSONStringsEachRow`
    /// are read into one set of arrays; a body with another header, or one that fails, sends every body to be decoded
    /// alone. Each body gets the rows, or the error, it gets alone.
    #[test]
    fn bodies_of_one_header_are_read_as_one() {
        use crate::options::Header;
        let with_types = DecodeOptions {
            format: InputFormat::RowBinary(Header::NamesAndTypes),
            ..DecodeOptions::default()
        };
        let plain = DecodeOptions {
            format: InputFormat::RowBinary(Header::None),
            ..DecodeOptions::default()
        };
        let native = DecodeOptions {
            format: InputFormat::Native,
            ..DecodeOptions::default()
        };
        let named = Some(["id", "name"]);
        let [a, b]: [&[(i64, Option<&str>)]; 2] = [&[(1, Some("a")), (2, None)], &[(3, Some("c"))]];
        let cases: Vec<(DecodeOptions, Vec<Vec<u8>>, bool)> = vec![
            (
                with_types.clone(),
                vec![
                    row_binary(named, a),
                    row_binary(named, &[]),
                    row_binary(named, b),
                ],
                true,
            ),
            (
                plain.clone(),
                vec![row_binary(None, a), Vec::new(), row_binary(None, b)],
                true,
            ),
            (
                native.clone(),
                vec![
                    native_block(a),
                    Vec::new(),
                    [native_block(b), native_block(a)].concat(),
                ],
                true,
            ),
            // Another order of the header's columns.
            (
                with_types,
                vec![row_binary(named, a), row_binary(Some(["name", "id"]), b)],
                false,
            ),
            // A row cut short.
            (
                plain,
                vec![row_binary(None, a), row_binary(None, b)[..5].to_vec()],
                false,
            ),
            (
                native,
                vec![native_block(a), native_block(b)[..9].to_vec()],
                false,
            ),
        ];
        let text = |format, bodies: &[&str], as_one| {
            let options = DecodeOptions {
                format,
                ..DecodeOptions::default()
            };
            let bodies = bodies.iter().map(|b| b.as_bytes().to_vec()).collect();
            (options, bodies, as_one)
        };
        let cases = cases.into_iter().chain([
            text(
                InputFormat::Csv(Header::None),
                &["1,a\n2,b\n", "", "3,\"c\n\""],
                true,
            ),
            text(
                InputFormat::Csv(Header::None),
                &["1,a", "2,\"b", "x,c"],
                false,
            ),
            text(
                InputFormat::Csv(Header::NamesAndTypes),
                &["id,name\nInt64,String\n1,a\n", "id,name\nInt64,String\n2,b"],
                true,
            ),
            // Another header's types.
            text(
                InputFormat::Csv(Header::NamesAndTypes),
                &[
                    "id,name\nInt64,String\n1,a\n",
                    "id,name\nInt64,Nullable(String)\n2,b",
                ],
                false,
            ),
            text(
                InputFormat::TabSeparated(Header::None),
                &["1\ta\n", "\n", "2\t\\N"],
                true,
            ),
            text(
                InputFormat::TabSeparated(Header::None),
                &["1\ta", "x\tb", "2\tc"],
                false,
            ),
            text(
                InputFormat::TabSeparated(Header::Names),
                &["id\tname\n1\ta\n", "id\tname\n2\t\\N"],
                true,
            ),
            text(
                InputFormat::TabSeparated(Header::Names),
                &["id\tname\n1\ta\n", "name\tid\nb\t2"],
                false,
            ),
            text(
                InputFormat::Values,
                &["(1, 'a'), (2, NULL)", "", "(3, 'c');"],
                true,
            ),
            // A body may not open with the comma between rows, whatever came before it.
            text(InputFormat::Values, &["(1, 'a')", ", (2, 'b')"], false),
            text(
                InputFormat::JsonCompactEachRow(Header::None),
                &["[1, \"a\"]\n[2, null]", "", "[3, \"c\"]"],
                true,
            ),
            text(
                InputFormat::JsonCompactEachRow(Header::None),
                &["[1, \"a\"]", "[2, \"b\"", "]"],
                false,
            ),
            text(
                InputFormat::JsonCompactEachRow(Header::Names),
                &[
                    "[\"id\", \"name\"]\n[1, \"a\"]",
                    "[\"id\", \"name\"]\n[2, null]",
                ],
                true,
            ),
            text(
                InputFormat::JsonCompactEachRow(Header::Names),
                &[
                    "[\"id\", \"name\"]\n[1, \"a\"]",
                    "[\"name\", \"id\"]\n[\"b\", 2]",
                ],
                false,
            ),
            text(
                InputFormat::JsonStringsEachRow,
                &[
                    "{\"id\": \"1\", \"name\": \"a\"}\n",
                    "",
                    "{\"name\": null, \"id\": \"2\"}",
                ],
                true,
            ),
            text(
                InputFormat::JsonStringsEachRow,
                &["{\"id\": \"1\"}", "{\"id\": 2}"],
                false,
            ),
        ]);
        for (options, bodies, as_one) in cases {
            let refs: Vec<&[u8]> = bodies.iter().map(Vec::as_slice).collect();
            let read = super::super::decode_many(&schema(), &refs, &options);
            assert_eq!(read.is_some(), as_one, "{:?} {bodies:?}", options.format);
            for (body, answer) in refs.iter().zip(answers(&refs, &options)) {
                assert_eq!(
                    answer,
                    decode(&schema(), body, &options),
                    "{:?} {body:?}",
                    options.format
                );
            }
        }
    }

    /// A body joins others when its rows frame the same with bodies logged after it: any body of
    /// lines, and under ClickHouse's framing one that opens with an object.
    #[test]
    fn bodies_join_others_when_they_frame_the_same_logged_together() {
        let ndjson = DecodeOptions::default();
        assert!(may_join(b"[{\"id\": 1}]", &ndjson));
        assert!(may_join(b"", &ndjson));
        assert!(may_join(b" \n\t{\"id\": 1},", &clickhouse()));
        assert!(may_join(b"", &clickhouse()));
        assert!(!may_join(b" [{\"id\": 1}]", &clickhouse()));
        assert!(!may_join(b"\xEF\xBB\xBF{\"id\": 1}", &clickhouse()));
        let csv = DecodeOptions {
            format: InputFormat::Csv(crate::options::Header::None),
            ..DecodeOptions::default()
        };
        assert!(may_join(b"1,\"a", &csv));
    }

    /// Bodies in ClickHouse's other formats are each decoded alone, and those with rows share
    /// one set of arrays, in order; a body that fails, or holds no rows, keeps its own answer.
    #[test]
    fn other_formats_share_arrays_of_bodies_decoded_alone() {
        use crate::options::Header;
        let formats = [
            (
                InputFormat::Csv(Header::None),
                ["1,a\n2,b\n", "", "3,\"c", "x,d", "4,e"],
                [Some(0..2), None, Some(2..3), None, Some(3..4)],
            ),
            (
                InputFormat::TabSeparated(Header::Names),
                [
                    "id\tname\n1\ta\n",
                    "id\n",
                    "name\tid\nc\t3",
                    "id\nx",
                    "id\n4",
                ],
                [Some(0..1), None, Some(1..2), None, Some(2..3)],
            ),
        ];
        for (format, bodies, expected) in formats {
            let options = DecodeOptions {
                format,
                ..DecodeOptions::default()
            };
            let refs: Vec<&[u8]> = bodies.iter().map(|b| b.as_bytes()).collect();
            let Together::Joint(joint, rows) = decode_together(&schema(), &refs, &options) else {
                panic!("{format:?}: the bodies were not put together");
            };
            let ranges: Vec<Option<Range<usize>>> = rows
                .iter()
                .map(|rows| match rows {
                    Ok(BodyRows::Joint(range)) => Some(range.clone()),
                    _ => None,
                })
                .collect();
            assert_eq!(ranges, expected, "{format:?}");
            for (body, result) in refs.iter().zip(rows) {
                let together = result.map(|rows| joint.batch_of(rows).0);
                assert_eq!(
                    together,
                    decode(&schema(), body, &options),
                    "{format:?} {body:?}"
                );
            }
        }
    }
}
