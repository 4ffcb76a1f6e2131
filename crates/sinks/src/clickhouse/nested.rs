//! `list`, `struct` and `map` columns in ClickHouse: the types sluice creates for them, which
//! types of a table that exists hold them, and the JSON `JSONEachRow` carries for each.
//!
//! A list is an `Array` of `Nullable` elements; ClickHouse has no `Nullable` array, so a null
//! list lands as an empty one. A struct is a named `Tuple`, whose null lands as a tuple of
//! nulls. A map is a `Map(String, Nullable(T))` where the server has `Map`, and a null map lands
//! as an empty one. What the server cannot hold natively is a `String` holding the value's JSON,
//! the same JSON SQLite and PostgreSQL keep ([`crate::values`]).
//!
//! The server decides ([`Server`]). ClickHouse 18.16 has no `Map`. It has named tuples, but its
//! `JSONEachRow` reads a tuple only as a JSON array and no tuple inside an array. There a map, and
//! a list that holds a struct, is a `String` of JSON. A newer server reads a named tuple from a
//! JSON object when `input_format_json_named_tuples_as_objects` says so; sluice sets it on such
//! an insert and sends objects, which do not depend on the tuple's element order.
//!
//! Each column's [`Shape`] says how its values go: from the type sluice created, or from the
//! type of the column a table that exists has ([`fitted`]). A null inside an `Array`, `Tuple` or
//! `Map` needs a `Nullable` element there, or ClickHouse would store it as 0 or an empty string
//! without a word, so a table whose elements are not `Nullable` is refused. So is an element
//! type narrower than the layout's: ClickHouse 18.16 wraps an integer too large for its type.

use std::borrow::Cow;

use arrow::array::Array;
use arrow::datatypes::{DataType, Field};
use sluice_core::ColumnType;
use sluice_core::schema::MAX_TYPE_DEPTH;

use super::types::{self, DATE_MAX, DATETIME_MAX, quote};
use crate::values::{self, Node, Scalar, Style, json_key, put_json_string};

/// The setting that makes ClickHouse read a named tuple from a JSON object.
pub(crate) const TUPLE_OBJECTS: &str = "input_format_json_named_tuples_as_objects";

/// What the server's version can take, as its catalog says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Server {
    /// It has `Map` (`system.data_type_families` lists it).
    pub(crate) maps: bool,
    /// It has [`TUPLE_OBJECTS`] (`system.settings` lists it). Servers that have it read a named
    /// tuple from a JSON object when it is set, and read tuples inside arrays, which 18.16 does
    /// not.
    pub(crate) tuple_objects: bool,
}

/// How a nested column's values go in `JSONEachRow`, all the way down.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Shape {
    /// A scalar, as `JSONEachRow` reads its type: see [`EachRow`].
    Scalar,
    /// The value's JSON, as a JSON string: a `String`.
    Text,
    /// An `Array`: a JSON array.
    Array(Box<Shape>),
    /// A `Tuple`: a JSON object of its named elements when `keyed`, else a JSON array of them
    /// in order.
    Tuple(Vec<Shape>, bool),
    /// A `Map`: a JSON object.
    Map(Box<Shape>),
}

impl Shape {
    /// Whether it holds a tuple anywhere.
    fn has_tuple(&self) -> bool {
        match self {
            Shape::Scalar | Shape::Text => false,
            Shape::Tuple(..) => true,
            Shape::Array(inner) | Shape::Map(inner) => inner.has_tuple(),
        }
    }

    /// Whether it holds a tuple written as an object: its insert needs [`TUPLE_OBJECTS`].
    pub(crate) fn has_keyed_tuple(&self) -> bool {
        match self {
            Shape::Scalar | Shape::Text => false,
            Shape::Tuple(shapes, keyed) => *keyed || shapes.iter().any(Shape::has_keyed_tuple),
            Shape::Array(inner) | Shape::Map(inner) => inner.has_keyed_tuple(),
        }
    }
}

/// The ClickHouse type of a layout's column, with `Nullable` where ClickHouse has it.
pub(crate) fn column_type(field: &Field, server: Server) -> Result<Cow<'static, str>, String> {
    match ColumnType::from_field(field) {
        Some(ty) if ty.is_nested() => Ok(Cow::Owned(created(&ty, field.is_nullable(), server)?.0)),
        _ => {
            let ty = types::ch_type(field)?;
            Ok(if field.is_nullable() {
                Cow::Owned(format!("Nullable({ty})"))
            } else {
                ty
            })
        }
    }
}

/// A column's definition in `CREATE TABLE` and `ALTER TABLE ... ADD COLUMN`.
pub(crate) fn column_ddl(field: &Field, server: Server) -> Result<String, String> {
    Ok(format!(
        "{} {}",
        quote(field.name()),
        column_type(field, server)?
    ))
}

/// The type sluice creates for a column of nested type `ty` on `server`, and its shape. Only a
/// `String` can be `Nullable` there.
pub(crate) fn created(
    ty: &ColumnType,
    nullable: bool,
    server: Server,
) -> Result<(String, Shape), String> {
    let (name, shape) = inner(ty, server, 0)?;
    Ok(match shape {
        Shape::Text if !nullable => ("String".to_owned(), Shape::Text),
        shape => (name, shape),
    })
}

/// The type of a value of type `ty` inside a list, struct or map, which may be null: a
/// `Nullable` scalar, or an `Array`, `Tuple` or `Map`, which ClickHouse has no `Nullable` of.
fn inner(ty: &ColumnType, server: Server, depth: usize) -> Result<(String, Shape), String> {
    if depth > MAX_TYPE_DEPTH {
        return Err(too_deep());
    }
    let text = || ("Nullable(String)".to_owned(), Shape::Text);
    Ok(match ty {
        ColumnType::List(element) => {
            let (name, shape) = inner(element, server, depth + 1)?;
            if shape.has_tuple() && !server.tuple_objects {
                text()
            } else {
                (format!("Array({name})"), Shape::Array(Box::new(shape)))
            }
        }
        ColumnType::Struct(fields) => {
            let mut elements = Vec::with_capacity(fields.len());
            let mut shapes = Vec::with_capacity(fields.len());
            for field in fields {
                let (name, shape) = inner(&field.ty, server, depth + 1)?;
                elements.push(format!("{} {name}", quote(&field.name)));
                shapes.push(shape);
            }
            let keyed = server.tuple_objects;
            (
                format!("Tuple({})", elements.join(", ")),
                Shape::Tuple(shapes, keyed),
            )
        }
        ColumnType::Map(value) if server.maps => {
            let (name, shape) = inner(value, server, depth + 1)?;
            (format!("Map(String, {name})"), Shape::Map(Box::new(shape)))
        }
        ColumnType::Map(_) => text(),
        scalar => {
            let name = types::ch_type(&scalar.arrow_field("element", true))?;
            (format!("Nullable({name})"), Shape::Scalar)
        }
    })
}

fn too_deep() -> String {
    format!("types nest at most {MAX_TYPE_DEPTH} levels of list, struct and map")
}

/// Whether a column of ClickHouse type `store` keeps every value of a layout's `ty` ([`fit`]'s
/// question), on `server`.
///
/// [`fit`]: crate::fit
pub(crate) fn holds(server: Server, ty: &ColumnType, store: &str) -> Result<(), String> {
    if !ty.is_nested() {
        return types::holds(ty, store);
    }
    fitted(ty, store, server).map(|_| ()).map_err(|why| {
        let own = created(ty, true, server).map_or_else(|e| e, |(name, _)| name);
        format!("{why}; sluice makes a {ty} {own}, and takes a String for its JSON")
    })
}

/// The shape of a column of nested type `ty` in a column of ClickHouse type `store`, or why
/// that column would not keep every value.
pub(crate) fn fitted(ty: &ColumnType, store: &str, server: Server) -> Result<Shape, String> {
    fitted_at(ty, store, false, server, 0)
}

fn fitted_at(
    ty: &ColumnType,
    store: &str,
    inside: bool,
    server: Server,
    depth: usize,
) -> Result<Shape, String> {
    if depth > MAX_TYPE_DEPTH {
        return Err(too_deep());
    }
    let (nullable, bare) = unwrap(store);
    let null_lost = || {
        format!(
            "{store} inside may not be null, and ClickHouse would store a null there as its default"
        )
    };
    if !ty.is_nested() {
        if !nullable {
            return Err(null_lost());
        }
        scalar_holds(ty, bare)?;
        return Ok(Shape::Scalar);
    }
    if bare == "String" {
        if inside && !nullable {
            return Err(null_lost());
        }
        return Ok(Shape::Text);
    }
    match (ty, call(bare)) {
        (ColumnType::List(element), Some(("Array", arg))) => {
            let shape = fitted_at(element, arg, true, server, depth + 1)?;
            if shape.has_tuple() && !server.tuple_objects {
                return Err(format!(
                    "{store} holds a Tuple, which this ClickHouse does not read inside an Array \
                     from JSONEachRow"
                ));
            }
            Ok(Shape::Array(Box::new(shape)))
        }
        (ColumnType::Struct(fields), Some(("Tuple", args))) => {
            let elements = split_args(args);
            if elements.len() != fields.len() {
                return Err(format!(
                    "{store} has {} elements, the struct {} fields",
                    elements.len(),
                    fields.len()
                ));
            }
            let mut shapes = Vec::with_capacity(fields.len());
            let mut named = 0;
            for (n, (field, element)) in fields.iter().zip(&elements).enumerate() {
                let (name, element_type) = tuple_element(element);
                if let Some(name) = name {
                    if name != field.name {
                        return Err(format!(
                            "element {} of {store} is named '{name}', the struct's field '{}'",
                            n + 1,
                            field.name
                        ));
                    }
                    named += 1;
                }
                shapes.push(fitted_at(&field.ty, element_type, true, server, depth + 1)?);
            }
            let keyed = server.tuple_objects && named == fields.len();
            Ok(Shape::Tuple(shapes, keyed))
        }
        (ColumnType::Map(value), Some(("Map", args))) => {
            match split_args(args)[..] {
                [key, value_type] if unwrap(key).1 == "String" => Ok(Shape::Map(Box::new(
                    fitted_at(value, value_type, true, server, depth + 1)?,
                ))),
                _ => Err(format!("{store} has keys other than String")),
            }
        }
        _ => Err(format!("{store} is no type for a {ty}")),
    }
}

/// Whether a ClickHouse scalar type `store` (without `Nullable`) keeps every value of the
/// scalar `ty` inside a nested value: its own type, or a wider one.
fn scalar_holds(ty: &ColumnType, store: &str) -> Result<(), String> {
    let holds = match ty {
        ColumnType::Decimal { .. } | ColumnType::Uuid | ColumnType::Json => {
            return types::holds(ty, store);
        }
        ColumnType::Bool => matches!(store, "UInt8" | "Bool"),
        ColumnType::Float32 => matches!(store, "Float32" | "Float64"),
        ColumnType::Float64 => store == "Float64",
        ColumnType::String => store == "String",
        ColumnType::Date => store == "Date",
        ColumnType::Timestamp => store == "DateTime" || store.starts_with("DateTime("),
        _ => match (integer_of(ty), integer_named(store)) {
            (Some((signed, bits)), Some((store_signed, store_bits))) => {
                (signed == store_signed && store_bits >= bits)
                    || (!signed && store_signed && store_bits > bits)
            }
            _ => false,
        },
    };
    if holds {
        Ok(())
    } else {
        Err(format!("{store} does not hold every {ty}"))
    }
}

/// A sluice integer type's sign and width.
fn integer_of(ty: &ColumnType) -> Option<(bool, u16)> {
    Some(match ty {
        ColumnType::Int8 => (true, 8),
        ColumnType::Int16 => (true, 16),
        ColumnType::Int32 => (true, 32),
        ColumnType::Int64 => (true, 64),
        ColumnType::UInt8 => (false, 8),
        ColumnType::UInt16 => (false, 16),
        ColumnType::UInt32 => (false, 32),
        ColumnType::UInt64 => (false, 64),
        _ => return None,
    })
}

/// A ClickHouse integer type's sign and width: `Int32` is `(true, 32)`.
fn integer_named(store: &str) -> Option<(bool, u16)> {
    let (signed, bits) = match store.strip_prefix("UInt") {
        Some(bits) => (false, bits),
        None => (true, store.strip_prefix("Int")?),
    };
    Some((signed, bits.parse().ok()?))
}

/// The type inside `Nullable(...)` and `LowCardinality(...)`, and whether it was `Nullable`.
fn unwrap(store: &str) -> (bool, &str) {
    let mut store = store.trim();
    let mut nullable = false;
    loop {
        if let Some(("Nullable", inner)) = call(store) {
            nullable = true;
            store = inner.trim();
        } else if let Some(("LowCardinality", inner)) = call(store) {
            store = inner.trim();
        } else {
            return (nullable, store);
        }
    }
}

/// `Name(args)` as its name and its arguments' text.
fn call(text: &str) -> Option<(&str, &str)> {
    let (name, rest) = text.split_once('(')?;
    Some((name.trim(), rest.strip_suffix(')')?))
}

/// The arguments of a type, split at the commas outside parentheses, quotes and back quotes.
fn split_args(args: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut quote, mut escaped, mut start) = (0usize, None, false, 0);
    for (i, c) in args.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        match (quote, c) {
            (Some(_), '\\') => escaped = true,
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '`' | '"') => quote = Some(c),
            (None, '(') => depth += 1,
            (None, ')') => depth = depth.saturating_sub(1),
            (None, ',') if depth == 0 => {
                parts.push(args[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(args[start..].trim());
    parts
}

/// A tuple's element, `name Type` or `Type`: its name, when it has one, and its type. A type's
/// name holds no space before its first parenthesis, so a space there ends an element's name.
fn tuple_element(text: &str) -> (Option<String>, &str) {
    let text = text.trim();
    if let Some(rest) = text.strip_prefix('`') {
        let mut name = String::new();
        let mut chars = rest.char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => {
                    if let Some((_, next)) = chars.next() {
                        name.push(next);
                    }
                }
                '`' => return (Some(name), rest[i + 1..].trim()),
                c => name.push(c),
            }
        }
        return (None, text);
    }
    let space = text.find(char::is_whitespace);
    let paren = text.find('(');
    match (space, paren) {
        (Some(space), Some(paren)) if space < paren => {
            (Some(text[..space].to_owned()), text[space..].trim())
        }
        (Some(space), None) => (Some(text[..space].to_owned()), text[space..].trim()),
        _ => (None, text),
    }
}

/// The values of column `array`, of the layout's field `field`, to be written in `shape`.
pub(crate) fn node<'a>(
    field: &Field,
    array: &'a dyn Array,
    shape: &Shape,
) -> Result<Node<'a>, String> {
    node_at(field, array, shape, 0)
}

fn node_at<'a>(
    field: &Field,
    array: &'a dyn Array,
    shape: &Shape,
    depth: usize,
) -> Result<Node<'a>, String> {
    if depth > MAX_TYPE_DEPTH {
        return Err(too_deep());
    }
    Ok(match shape {
        Shape::Scalar => Node::Scalar(Scalar::of(field, array)?),
        Shape::Text => Node::Text(Box::new(Node::document(field, array)?)),
        Shape::Array(element) => {
            let DataType::List(element_field) = array.data_type() else {
                return Err(format!("an Array column holds {}", array.data_type()));
            };
            let list = values::list(array)?;
            let element = node_at(element_field, list.values().as_ref(), element, depth + 1)?;
            Node::List {
                array: list,
                element: Box::new(element),
            }
        }
        Shape::Tuple(shapes, keyed) => {
            let structure = values::structure(array)?;
            if structure.num_columns() != shapes.len() {
                return Err(format!(
                    "a Tuple of {} elements holds a struct of {} fields",
                    shapes.len(),
                    structure.num_columns()
                ));
            }
            let fields = structure
                .fields()
                .iter()
                .zip(structure.columns())
                .zip(shapes)
                .map(|((field, column), shape)| {
                    let node = node_at(field, column.as_ref(), shape, depth + 1)?;
                    Ok((json_key(field.name())?, node))
                })
                .collect::<Result<_, String>>()?;
            Node::Struct {
                array: structure,
                fields,
                keyed: *keyed,
            }
        }
        Shape::Map(value) => {
            let (map, keys) = values::map(array)?;
            let (_, value_field) = map.entries_fields();
            let values = node_at(value_field, map.values().as_ref(), value, depth + 1)?;
            Node::Map {
                array: map,
                keys,
                values: Box::new(values),
            }
        }
    })
}

/// The scalars inside a nested value as ClickHouse's `JSONEachRow` reads them, as its scalar
/// columns go: a `DateTime` as whole seconds, a `Date` as `"YYYY-MM-DD"`, each in its range, a
/// `json` value as a string of its text. A float that is not finite goes as `"nan"`, `"inf"` or
/// `"-inf"`, which ClickHouse 18.16 reads in quotes. ClickHouse has no null array, tuple or map,
/// so a null one is an empty one, or a tuple of nulls.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EachRow;

impl Style for EachRow {
    fn date(&self, days: i32, out: &mut Vec<u8>) -> Result<(), String> {
        if !(0..=DATE_MAX).contains(&days) {
            return Err(format!(
                "day {days} since 1970-01-01 is outside what ClickHouse Date holds (1970-01-01 \
                 to 2149-06-06)"
            ));
        }
        put_json_string(out, &values::date_text(days)?)
    }

    fn timestamp(&self, micros: i64, out: &mut Vec<u8>) -> Result<(), String> {
        // The fraction is dropped: 18.16's DateTime holds whole seconds.
        let seconds = micros.div_euclid(1_000_000);
        if !(0..=DATETIME_MAX).contains(&seconds) {
            return Err(format!(
                "{} is outside what ClickHouse DateTime holds (1970-01-01 00:00:00 to \
                 2106-02-07 06:28:15 UTC)",
                types::timestamp_text(micros)
            ));
        }
        out.extend_from_slice(seconds.to_string().as_bytes());
        Ok(())
    }

    fn json(&self, text: &str, out: &mut Vec<u8>) -> Result<(), String> {
        put_json_string(out, text)
    }

    fn not_finite(&self, value: f64, out: &mut Vec<u8>) {
        out.extend_from_slice(match value {
            v if v.is_nan() => b"\"nan\"".as_slice(),
            v if v > 0.0 => b"\"inf\"",
            _ => b"\"-inf\"",
        });
    }

    fn empty_for_null(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use sluice_core::schema::StructField;

    use super::*;

    const OLD: Server = Server {
        maps: false,
        tuple_objects: false,
    };
    const NEW: Server = Server {
        maps: true,
        tuple_objects: true,
    };

    fn record() -> ColumnType {
        ColumnType::Struct(vec![
            StructField::new("code", ColumnType::Int32),
            StructField::new("tags", ColumnType::list(ColumnType::String)),
            StructField::new("at", ColumnType::Timestamp),
        ])
    }

    #[test]
    fn what_sluice_creates_follows_the_server() {
        let pairs = ColumnType::list(ColumnType::Struct(vec![
            StructField::new("k", ColumnType::String),
            StructField::new("v", ColumnType::Json),
        ]));
        let amounts = ColumnType::list(ColumnType::Decimal {
            precision: 20,
            scale: 4,
        });
        let groups = ColumnType::map(ColumnType::list(ColumnType::Int64));
        let cases = [
            (
                amounts.clone(),
                "Array(Nullable(Decimal(20, 4)))",
                "Array(Nullable(Decimal(20, 4)))",
            ),
            (
                ColumnType::list(ColumnType::list(ColumnType::Timestamp)),
                "Array(Array(Nullable(DateTime('UTC'))))",
                "Array(Array(Nullable(DateTime('UTC'))))",
            ),
            (
                record(),
                "Tuple(`code` Nullable(Int32), `tags` Array(Nullable(String)), \
                 `at` Nullable(DateTime('UTC')))",
                "Tuple(`code` Nullable(Int32), `tags` Array(Nullable(String)), \
                 `at` Nullable(DateTime('UTC')))",
            ),
            (
                groups.clone(),
                "Nullable(String)",
                "Map(String, Array(Nullable(Int64)))",
            ),
            (
                pairs.clone(),
                "Nullable(String)",
                "Array(Tuple(`k` Nullable(String), `v` Nullable(String)))",
            ),
        ];
        for (ty, old, new) in cases {
            assert_eq!(created(&ty, true, OLD).unwrap().0, old, "{ty}");
            assert_eq!(created(&ty, true, NEW).unwrap().0, new, "{ty}");
        }
        assert_eq!(created(&groups, false, OLD).unwrap().0, "String");
        assert_eq!(
            created(&record(), true, OLD).unwrap().1,
            Shape::Tuple(
                vec![
                    Shape::Scalar,
                    Shape::Array(Box::new(Shape::Scalar)),
                    Shape::Scalar
                ],
                false
            )
        );
        assert!(created(&record(), true, NEW).unwrap().1.has_keyed_tuple());
        assert!(!created(&record(), true, OLD).unwrap().1.has_keyed_tuple());
        // What sluice creates, it takes back.
        for ty in [amounts, record(), groups, pairs] {
            for server in [OLD, NEW] {
                let (name, shape) = created(&ty, true, server).unwrap();
                assert_eq!(fitted(&ty, &name, server), Ok(shape), "{ty} as {name}");
            }
        }
    }

    #[test]
    fn a_column_that_loses_nulls_or_digits_is_refused() {
        let ints = ColumnType::list(ColumnType::Int64);
        for store in [
            "Array(Nullable(Int64))",
            "Array(LowCardinality(Nullable(Int64)))",
            "String",
            "Nullable(String)",
        ] {
            assert!(holds(OLD, &ints, store).is_ok(), "{store}");
        }
        for (store, why) in [
            ("Array(Int64)", "may not be null"),
            ("Array(Nullable(Int32))", "Int32 does not hold every int64"),
            (
                "Array(Nullable(UInt64))",
                "UInt64 does not hold every int64",
            ),
            ("Array(Nullable(Float64))", "does not hold"),
            ("Int64", "Int64 is no type for a list<int64>"),
        ] {
            let error = holds(OLD, &ints, store).unwrap_err();
            assert!(
                error.contains(why) && error.contains("sluice makes a list<int64>"),
                "{store}: {error}"
            );
        }
        let small = ColumnType::list(ColumnType::UInt32);
        assert!(holds(OLD, &small, "Array(Nullable(Int64))").is_ok());
        assert!(holds(OLD, &small, "Array(Nullable(Int32))").is_err());
        let amounts = ColumnType::list(ColumnType::Decimal {
            precision: 20,
            scale: 4,
        });
        assert!(holds(OLD, &amounts, "Array(Nullable(Decimal(38, 4)))").is_ok());
        let error = holds(OLD, &amounts, "Array(Nullable(Decimal(20, 2)))").unwrap_err();
        assert!(error.contains("keeps 2 digits after the point"), "{error}");
        // A tuple by position, its names checked where it has them.
        assert!(
            holds(
                OLD,
                &record(),
                "Tuple(Nullable(Int32), Array(Nullable(String)), Nullable(DateTime))"
            )
            .is_ok()
        );
        let error = holds(
            OLD,
            &record(),
            "Tuple(code Nullable(Int32), labels Array(Nullable(String)), at Nullable(DateTime))",
        )
        .unwrap_err();
        assert!(error.contains("element 2"), "{error}");
        let error = holds(OLD, &record(), "Tuple(Nullable(Int32), Nullable(String))").unwrap_err();
        assert!(error.contains("2 elements, the struct 3 fields"), "{error}");
        // 18.16 reads no tuple inside an array.
        let pairs = ColumnType::list(ColumnType::Struct(vec![StructField::new(
            "k",
            ColumnType::String,
        )]));
        let store = "Array(Tuple(k Nullable(String)))";
        assert!(
            holds(OLD, &pairs, store)
                .unwrap_err()
                .contains("inside an Array")
        );
        assert_eq!(
            fitted(&pairs, store, NEW),
            Ok(Shape::Array(Box::new(Shape::Tuple(
                vec![Shape::Scalar],
                true
            ))))
        );
        let groups = ColumnType::map(ColumnType::Float64);
        assert!(holds(NEW, &groups, "Map(String, Nullable(Float64))").is_ok());
        assert!(holds(NEW, &groups, "Map(String, Float64)").is_err());
        assert!(holds(NEW, &groups, "Map(Int32, Nullable(Float64))").is_err());
    }

    #[test]
    fn type_names_split_as_clickhouse_writes_them() {
        assert_eq!(
            split_args("`a,b` Nullable(Decimal(20, 4)), DateTime('UTC, x'), b Array(String)"),
            [
                "`a,b` Nullable(Decimal(20, 4))",
                "DateTime('UTC, x')",
                "b Array(String)"
            ]
        );
        assert_eq!(
            tuple_element("`a\\`b` Int8"),
            (Some("a`b".to_owned()), "Int8")
        );
        assert_eq!(
            tuple_element("code Nullable(Int32)"),
            (Some("code".to_owned()), "Nullable(Int32)")
        );
        assert_eq!(tuple_element("Decimal(20, 4)"), (None, "Decimal(20, 4)"));
        assert_eq!(tuple_element("x UInt8"), (Some("x".to_owned()), "UInt8"));
        assert_eq!(unwrap("LowCardinality(Nullable(String))"), (true, "String"));
    }
}
