//! The ClickHouse type the doors announce for a column, in `DESCRIBE TABLE` and in the native
//! protocol's block that opens an insert: what clients then send its values as.
//!
//! It is the column type's [`ColumnType::clickhouse_name`], `Nullable(T)` when the column is
//! nullable. ClickHouse has no `Nullable` array, tuple or map, so a `list`, `struct` or `map`
//! column is announced bare, nullable or not; inside one, everything but another of them is
//! `Nullable`. A struct whose field names ClickHouse does not take, such as the `1`, `2` of an
//! unnamed tuple, is announced as an unnamed `Tuple`, whose values are laid out the same.
//!
//! A native client too old for a type is told one it knows whose values sluice reads as the
//! column's type: `String` for a single value, whose text is read, and for a `map` the
//! `Array(Tuple(String, T))` a `Map` is laid out as, so it sends the same bytes.

use std::borrow::Cow;

use sluice_core::ColumnType;
use sluice_core::schema::{StructField, quoted_field_name};

/// Which of ClickHouse's types a client knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Known {
    /// `DateTime64`, `Date32` and `Bool`.
    pub(crate) newer: bool,
    /// `Decimal` and `UUID`.
    pub(crate) decimal_and_uuid: bool,
    /// `Map`.
    pub(crate) map: bool,
}

impl Known {
    /// Every type: an HTTP client, which says nothing of its version, or a recent one.
    pub(crate) const ALL: Known = Known {
        newer: true,
        decimal_and_uuid: true,
        map: true,
    };

    /// What a native client of `version` speaking `revision` knows. A client knows a type when
    /// its version or its revision is recent enough: third-party clients such as
    /// clickhouse-driver report an old version and a recent revision. `DateTime64`, `Date32`
    /// and `Bool` all came by ClickHouse 21.12, at revision 54452; `Decimal` and `UUID` by 18.16,
    /// at revision 54412, which Debian's `clickhouse-client` 18.16 speaks. `Map` came in 21.1,
    /// which no revision marks: 54448 is one only later versions speak.
    pub(crate) fn of(version: (u64, u64), revision: u64) -> Known {
        let knows = |since: (u64, (u64, u64))| revision >= since.0 || version >= since.1;
        Known {
            newer: knows((54452, (21, 12))),
            decimal_and_uuid: knows((54412, (18, 16))),
            map: knows((54448, (21, 1))),
        }
    }
}

/// The type a column of `ty` is announced as to a client that knows `known`.
pub(crate) fn announced(ty: &ColumnType, nullable: bool, known: Known) -> String {
    let name = type_name(ty, known);
    if nullable && !ty.is_nested() {
        format!("Nullable({name})")
    } else {
        name.into_owned()
    }
}

fn type_name(ty: &ColumnType, known: Known) -> Cow<'static, str> {
    match ty {
        ColumnType::List(element) => format!("Array({})", inner(element, known)).into(),
        ColumnType::Map(value) if known.map => {
            format!("Map(String, {})", inner(value, known)).into()
        }
        ColumnType::Map(value) => format!("Array(Tuple(String, {}))", inner(value, known)).into(),
        ColumnType::Struct(fields) => tuple(fields, known).into(),
        ColumnType::Timestamp | ColumnType::Date | ColumnType::Bool if !known.newer => {
            "String".into()
        }
        ColumnType::Decimal { .. } | ColumnType::Uuid if !known.decimal_and_uuid => "String".into(),
        other => other.clickhouse_name(),
    }
}

/// The type of a value inside a list, struct or map, which may be null.
fn inner(ty: &ColumnType, known: Known) -> Cow<'static, str> {
    if ty.is_nested() {
        type_name(ty, known)
    } else {
        format!("Nullable({})", type_name(ty, known)).into()
    }
}

/// `Tuple(name T, ...)`, or `Tuple(T, ...)` when a name is one ClickHouse refuses: empty, or
/// starting with a digit.
fn tuple(fields: &[StructField], known: Known) -> String {
    let named = fields
        .iter()
        .all(|f| f.name.chars().next().is_some_and(|c| !c.is_ascii_digit()));
    let elements: Vec<String> = fields
        .iter()
        .map(|f| {
            let ty = inner(&f.ty, known);
            if named {
                format!("{} {ty}", quoted_field_name(&f.name))
            } else {
                ty.into_owned()
            }
        })
        .collect();
    format!("Tuple({})", elements.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested_types() -> Vec<ColumnType> {
        vec![
            ColumnType::list(ColumnType::Int64),
            ColumnType::map(ColumnType::list(ColumnType::Uuid)),
            ColumnType::Struct(vec![
                StructField::new("code", ColumnType::Int32),
                StructField::new("http.status", ColumnType::map(ColumnType::Float64)),
                StructField::new("tags", ColumnType::list(ColumnType::String)),
            ]),
        ]
    }

    #[test]
    fn a_recent_client_is_told_each_types_clickhouse_name_and_no_nullable_container() {
        for ty in nested_types() {
            for nullable in [true, false] {
                assert_eq!(announced(&ty, nullable, Known::ALL), ty.clickhouse_name());
            }
        }
        assert_eq!(
            announced(&ColumnType::Int64, true, Known::ALL),
            "Nullable(Int64)"
        );
        assert_eq!(
            announced(&nested_types()[2], true, Known::ALL),
            "Tuple(code Nullable(Int32), `http.status` Map(String, Nullable(Float64)), \
             tags Array(Nullable(String)))"
        );
    }

    #[test]
    fn an_unnamed_tuple_stays_unnamed() {
        let pair = ColumnType::Struct(vec![
            StructField::new("1", ColumnType::String),
            StructField::new("2", ColumnType::list(ColumnType::UInt8)),
        ]);
        assert_eq!(
            announced(&pair, false, Known::ALL),
            "Tuple(Nullable(String), Array(Nullable(UInt8)))"
        );
    }

    #[test]
    fn an_older_client_is_told_types_it_knows_laid_out_alike() {
        let old = Known::of((18, 16), 54412);
        assert_eq!(
            old,
            Known {
                newer: false,
                decimal_and_uuid: true,
                map: false
            }
        );
        let ty = ColumnType::map(ColumnType::Struct(vec![
            StructField::new("at", ColumnType::Timestamp),
            StructField::new("id", ColumnType::Uuid),
        ]));
        assert_eq!(
            announced(&ty, true, old),
            "Array(Tuple(String, Tuple(at Nullable(String), id Nullable(UUID))))"
        );
        assert_eq!(
            announced(&ColumnType::list(ColumnType::Date), true, old),
            "Array(Nullable(String))"
        );
        // clickhouse-driver says it is 20.10, at a revision that only later versions speak.
        assert_eq!(Known::of((20, 10), 54468), Known::ALL);
        assert!(Known::of((21, 1), 54443).map);
        assert!(!Known::of((20, 12), 54447).map);
    }
}
