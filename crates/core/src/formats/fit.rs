//! Whether a body's column of some ClickHouse type can go into a table's column at all, judged
//! before any value is read, for `RowBinaryWithNamesAndTypes` headers and `Native` blocks alike.
//!
//! A nested type fits by its structure: an `Array` a `list`, a `Tuple` a `struct` of as many
//! fields, by position, and a `Map` with string keys, or the `Array(Tuple(K, V))` it is laid out
//! as, a `map`. What they hold fits as a single value does ([`can_take`]).

use super::value::{Kind, can_take};
use crate::schema::ColumnType;

/// The structure of a ClickHouse type, one level down.
pub(crate) enum Shape<'a, T> {
    Array(&'a T),
    Tuple(Vec<&'a T>),
    Map(&'a T, &'a T),
    /// `Nullable` or `LowCardinality` of an array, tuple or map, which ClickHouse has none of.
    NullableNested,
    /// A type that holds no other, with the kind of values it gives, when that says anything.
    Single(Option<Kind>),
}

/// A ClickHouse type as one of the binary formats parses it.
pub(crate) trait Layout: Sized {
    fn shape(&self) -> Shape<'_, Self>;
}

/// Whether values of `ty` can go into a column of `target`: never, when this is false.
pub(crate) fn fits<T: Layout>(ty: &T, target: &ColumnType) -> bool {
    match (ty.shape(), target) {
        (Shape::Array(element), ColumnType::List(target)) => fits(element, target),
        (Shape::Array(entry), ColumnType::Map(target)) => match entry.shape() {
            Shape::Tuple(pair) => match pair[..] {
                [key, value] => is_key(key) && fits(value, target),
                _ => false,
            },
            _ => false,
        },
        (Shape::Map(key, value), ColumnType::Map(target)) => is_key(key) && fits(value, target),
        (Shape::Tuple(elements), ColumnType::Struct(fields)) => {
            elements.len() == fields.len()
                && elements.iter().zip(fields).all(|(e, f)| fits(*e, &f.ty))
        }
        (Shape::Single(kind), target) => kind.is_none_or(|kind| can_take(target, kind)),
        _ => false,
    }
}

/// Whether a map's keys of `ty` are text, as sluice's map keys are.
fn is_key<T: Layout>(ty: &T) -> bool {
    matches!(ty.shape(), Shape::Single(Some(Kind::Text)))
}
