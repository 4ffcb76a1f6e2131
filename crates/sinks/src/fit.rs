//! How a database sink fits a table that already exists in its store to the table's layout: a
//! pure plan from the columns the store reports, shared by SQLite, PostgreSQL and ClickHouse.
//!
//! A table declared in the config may grow: a column the config added is added to the store's
//! table (`ALTER TABLE ... ADD COLUMN`), and a column the config made nullable loses its
//! `NOT NULL` where the store can drop it cheaply. Without that, every flush into the table
//! would name a column the store does not have and go to the dead-letter folder. What would
//! make every insert fail and cannot be changed safely is refused when the table is opened, in
//! words that say what to do, instead of costing every batch later:
//!
//! - a column the layout has and the store's table lacks, when the layout is not declared
//!   (inferred or remembered layouts never change a table), or when it may not be null and
//!   the store cannot give the rows it holds a value for it;
//! - a column of the store's table that the layout lacks, when it may not be null and has no
//!   default: no insert could fill it;
//! - a `decimal`, `uuid`, `json`, `list`, `struct` or `map` column whose type in the store
//!   would not keep every value exactly ([`Abilities::holds`]).
//!
//! Only those types are compared. A store would change their values without a word: round a
//! decimal to a column's smaller scale, read `1.50` sent as text into a number column as `1.5`,
//! or store a null inside a ClickHouse array as 0. A nested column is compared all the way
//! down, since a store that takes the value whole may not say which part of it changed. A store
//! refuses a value of the other types that its column cannot take, and the batch goes to the
//! dead-letter folder with the store's words.

use arrow::datatypes::Field;
use sluice_core::{ColumnType, SinkError, TableDef};

/// A column of a table as the store describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StoreColumn {
    /// Its name.
    pub(crate) name: String,
    /// Whether the store refuses a row without a value for it (`NOT NULL` and no default).
    pub(crate) required: bool,
    /// Whether it is `NOT NULL` (with or without a default).
    pub(crate) not_null: bool,
    /// Whether its `NOT NULL` cannot be dropped in place: every column in SQLite (which would
    /// have to rebuild the table) and ClickHouse (a mutation rewriting every part), a primary
    /// key's column or an identity in PostgreSQL.
    pub(crate) keeps_not_null: bool,
    /// Its type, as the store spells it (`numeric(12,2)`, `Nullable(Decimal(12, 2))`, `TEXT`).
    pub(crate) ty: String,
}

/// What a store can do to a table that exists.
#[derive(Clone, Copy)]
pub(crate) struct Abilities<'a> {
    /// Column names match whatever their case (SQLite).
    pub(crate) any_case: bool,
    /// It can add a column that may not be null: the rows it holds get the type's default
    /// (ClickHouse).
    pub(crate) adds_required: bool,
    /// Whether a column of the store's type (as the store spells it) keeps every value of a
    /// layout's type exactly; why not, when it does not. Asked only of `decimal`, `uuid`,
    /// `json`, `list`, `struct` and `map` columns.
    pub(crate) holds: &'a (dyn Fn(&ColumnType, &str) -> Result<(), String> + Sync),
}

/// Whether `decimal(store_precision, store_scale)` holds every value of `decimal(precision,
/// scale)` exactly: as many digits after the point or more, and as many before it or more.
pub(crate) fn decimal_holds(
    (precision, scale): (u8, u8),
    (store_precision, store_scale): (u8, u8),
) -> Result<(), String> {
    if store_scale < scale {
        return Err(format!(
            "it keeps {store_scale} digits after the point, the layout's decimal({precision}, \
             {scale}) {scale}: the store would round them or refuse them"
        ));
    }
    let (before, store_before) = (
        precision - scale,
        store_precision.saturating_sub(store_scale),
    );
    if store_before < before {
        return Err(format!(
            "it holds {store_before} digits before the point, the layout's decimal({precision}, \
             {scale}) {before}: the store would refuse the larger values"
        ));
    }
    Ok(())
}

/// The changes that bring a store's table to a layout, in the layout's column order.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Fit<'a> {
    /// Columns to add.
    pub(crate) add: Vec<&'a Field>,
    /// Columns whose `NOT NULL` to drop.
    pub(crate) relax: Vec<&'a Field>,
    /// Columns that stay `NOT NULL` although the layout lets them be null (the store cannot
    /// drop it, or the layout is not declared): a row without a value for one is refused by the
    /// store, or in ClickHouse given the type's default (worth a warning, not a refusal:
    /// producers that always send it land fine).
    pub(crate) kept_not_null: Vec<&'a Field>,
}

impl Fit<'_> {
    /// Whether the table fits as it is.
    pub(crate) fn is_empty(&self) -> bool {
        self.add.is_empty() && self.relax.is_empty()
    }

    /// Logs what the fit changed (once it is done) and a warning for each column kept
    /// `NOT NULL`, saying what `the store` does with a row without a value for it.
    pub(crate) fn log(&self, table: &str, without_value: &str) {
        for field in &self.kept_not_null {
            tracing::warn!(
                table,
                column = %field.name(),
                "the column is NOT NULL in the store, which sluice cannot change, although the \
                 table's layout lets it be null: {without_value}"
            );
        }
        if !self.is_empty() {
            tracing::info!(table, change = %self.describe(), "table changed to fit its layout");
        }
    }

    /// What will change, for the log.
    pub(crate) fn describe(&self) -> String {
        let names = |fields: &[&Field]| {
            fields
                .iter()
                .map(|f| format!("'{}'", f.name()))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut parts = Vec::new();
        if !self.add.is_empty() {
            parts.push(format!("add {}", names(&self.add)));
        }
        if !self.relax.is_empty() {
            parts.push(format!("drop NOT NULL from {}", names(&self.relax)));
        }
        parts.join("; ")
    }
}

/// Plans how `table`'s layout fits `existing`, the columns of its table in the store (`sink`
/// names the store in the error).
pub(crate) fn plan<'a>(
    sink: &'static str,
    table: &'a TableDef,
    existing: &[StoreColumn],
    can: Abilities<'_>,
) -> Result<Fit<'a>, SinkError> {
    let same = |a: &str, b: &str| {
        if can.any_case {
            a.eq_ignore_ascii_case(b)
        } else {
            a == b
        }
    };
    let refuse = |what: String| {
        SinkError::permanent(
            sink,
            format!("table {} exists in the store and {what}", table.name()),
        )
    };
    let fields = table.schema().arrow().fields();
    let mut fit = Fit::default();
    for (field, layout) in fields.iter().zip(table.schema().columns()) {
        let found = existing.iter().find(|c| same(&c.name, field.name()));
        if let Some(column) = found
            && (layout.ty.is_nested()
                || matches!(
                    layout.ty,
                    ColumnType::Decimal { .. } | ColumnType::Uuid | ColumnType::Json
                ))
        {
            (can.holds)(&layout.ty, &column.ty).map_err(|why| {
                refuse(format!(
                    "its column '{}' is {}, which does not keep every {} value exactly: {why}; \
                     change the column's type in the store, or the layout's",
                    column.name, column.ty, layout.ty
                ))
            })?;
        }
        match found {
            Some(column) if column.not_null && field.is_nullable() => {
                if table.is_declared() && !column.keeps_not_null {
                    fit.relax.push(field);
                } else {
                    fit.kept_not_null.push(field);
                }
            }
            Some(_) => {}
            None if !table.may_add_columns() => {
                return Err(refuse(format!(
                    "has no column '{}': sluice adds columns only to a table declared in the \
                     config ([tables.{}]) or one that evolves; add the column to the table, or \
                     declare it",
                    field.name(),
                    table.name()
                )));
            }
            None if !field.is_nullable() && !can.adds_required => {
                return Err(refuse(format!(
                    "has no column '{}', which the config says may not be null: the rows the \
                     table holds have no value for it; declare it nullable, or add it to the \
                     table yourself with a default",
                    field.name()
                )));
            }
            None => fit.add.push(field),
        }
    }
    if let Some(column) = existing
        .iter()
        .find(|c| c.required && !fields.iter().any(|f| same(&c.name, f.name())))
    {
        return Err(refuse(format!(
            "has a column '{}' that may not be null and has no default, which the table's \
             layout lacks: every insert would be refused; add it to the layout, give it a \
             default, or let it be null",
            column.name
        )));
    }
    Ok(fit)
}

#[cfg(test)]
mod tests {
    use sluice_core::{Column, ColumnType, FlushPolicy, TableLayout, TableName};

    use super::*;

    const SQL: Abilities<'static> = Abilities {
        any_case: false,
        adds_required: false,
        holds: &|_, _| Ok(()),
    };

    fn table(declared: bool) -> TableDef {
        let layout = TableLayout {
            columns: vec![
                Column::new("id", ColumnType::Int64).required(),
                Column::new("note", ColumnType::String),
                Column::new("level", ColumnType::Int32),
            ],
            partition_by: String::new(),
            sort_by: vec![],
        };
        let def =
            TableDef::new(TableName::new("t").unwrap(), layout, FlushPolicy::default()).unwrap();
        if declared { def.declared() } else { def }
    }

    fn column(name: &str, not_null: bool, default: bool) -> StoreColumn {
        StoreColumn {
            name: name.into(),
            required: not_null && !default,
            not_null,
            keeps_not_null: false,
            ty: "text".into(),
        }
    }

    fn names(fields: &[&Field]) -> Vec<String> {
        fields.iter().map(|f| f.name().clone()).collect()
    }

    #[test]
    fn a_declared_table_gets_its_new_nullable_columns_and_loses_not_nulls() {
        let def = table(true);
        let existing = [column("id", true, false), column("note", true, false)];
        let fit = plan("sql", &def, &existing, SQL).unwrap();
        assert_eq!(names(&fit.add), ["level"]);
        assert_eq!(names(&fit.relax), ["note"]);
        assert_eq!(fit.describe(), "add 'level'; drop NOT NULL from 'note'");
        // A column that cannot lose its NOT NULL in place (any in SQLite, a primary key's in
        // PostgreSQL) keeps it, and the fit says so.
        let key = [
            column("id", true, false),
            StoreColumn {
                keeps_not_null: true,
                ..column("note", true, false)
            },
        ];
        let fit = plan("sql", &def, &key, SQL).unwrap();
        assert!(fit.relax.is_empty());
        assert_eq!(names(&fit.kept_not_null), ["note"]);
        // A table that has every column fits as it is.
        let all = [
            column("id", true, false),
            column("note", false, false),
            column("level", false, false),
        ];
        assert!(plan("sql", &def, &all, SQL).unwrap().is_empty());
    }

    #[test]
    fn what_would_fail_every_insert_is_refused() {
        let declared = table(true);
        // A new column that may not be null, where the store cannot fill the rows it holds.
        let error = plan("sql", &declared, &[column("note", false, false)], SQL).unwrap_err();
        assert!(error.message.contains("no column 'id'"), "{error}");
        assert!(!error.is_retriable());
        // ClickHouse can: old rows get the type's default.
        let clickhouse = Abilities {
            adds_required: true,
            ..SQL
        };
        let fit = plan(
            "clickhouse",
            &declared,
            &[column("note", false, false)],
            clickhouse,
        );
        assert_eq!(names(&fit.unwrap().add), ["id", "level"]);
        // A NOT NULL column without a default that the layout lacks.
        let existing = [column("id", true, false), column("legacy", true, false)];
        let error = plan("sql", &declared, &existing, SQL).unwrap_err();
        assert!(
            error.message.contains("'legacy' that may not be null"),
            "{error}"
        );
        // With a default, inserts fill it.
        let existing = [column("id", true, false), column("legacy", true, true)];
        assert_eq!(
            names(&plan("sql", &declared, &existing, SQL).unwrap().add),
            ["note", "level"]
        );
        // A layout that is not declared changes no table.
        let error = plan("sql", &table(false), &[column("id", true, false)], SQL).unwrap_err();
        assert!(
            error.message.contains("no column 'note'") && error.message.contains("[tables.t]"),
            "{error}"
        );
    }

    #[test]
    fn new_types_must_fit_the_store_column_exactly() {
        let layout = TableLayout {
            columns: vec![
                Column::new("id", ColumnType::Uuid).required(),
                Column::new(
                    "amount",
                    ColumnType::Decimal {
                        precision: 12,
                        scale: 2,
                    },
                ),
                Column::new("note", ColumnType::String),
            ],
            partition_by: String::new(),
            sort_by: vec![],
        };
        let def = TableDef::new(TableName::new("t").unwrap(), layout, FlushPolicy::default())
            .unwrap()
            .declared();
        let typed = |ty: &str| StoreColumn {
            ty: ty.into(),
            ..column("amount", false, false)
        };
        // A store whose numeric columns are spelled `numeric(p,s)`.
        let numeric = Abilities {
            holds: &|ty, store| match (ty, store.strip_prefix("numeric(")) {
                (ColumnType::Decimal { precision, scale }, Some(rest)) => {
                    let (p, s) = rest.trim_end_matches(')').split_once(',').unwrap();
                    decimal_holds(
                        (*precision, *scale),
                        (p.parse().unwrap(), s.parse().unwrap()),
                    )
                }
                (ColumnType::Decimal { .. }, None) => Err("not a number type".into()),
                _ => Ok(()),
            },
            ..SQL
        };
        let with = |amount: StoreColumn| {
            let existing = [
                column("id", true, false),
                amount,
                column("note", false, false),
            ];
            plan("sql", &def, &existing, numeric)
        };
        for wider in ["numeric(12,2)", "numeric(14,4)", "numeric(38,2)"] {
            assert!(with(typed(wider)).unwrap().is_empty(), "{wider}");
        }
        let rounds = with(typed("numeric(12,1)")).unwrap_err();
        assert!(
            rounds.message.contains("column 'amount' is numeric(12,1)")
                && rounds.message.contains("decimal(12, 2)")
                && rounds.message.contains("keeps 1 digits after the point"),
            "{rounds}"
        );
        let narrow = with(typed("numeric(11,2)")).unwrap_err();
        assert!(
            narrow.message.contains("holds 9 digits before the point"),
            "{narrow}"
        );
        assert!(!narrow.is_retriable());
        // A nested column is judged too, by the same question.
        let nested = TableLayout {
            columns: vec![Column::new("tags", ColumnType::list(ColumnType::String))],
            partition_by: String::new(),
            sort_by: vec![],
        };
        let def_nested =
            TableDef::new(TableName::new("n").unwrap(), nested, FlushPolicy::default()).unwrap();
        let only_arrays = Abilities {
            holds: &|ty, store| match (ty.is_nested(), store.ends_with("[]")) {
                (true, false) => Err("not an array".into()),
                _ => Ok(()),
            },
            ..SQL
        };
        let tags = |ty: &str| StoreColumn {
            ty: ty.into(),
            ..column("tags", false, false)
        };
        assert!(plan("sql", &def_nested, &[tags("text[]")], only_arrays).is_ok());
        let error = plan("sql", &def_nested, &[tags("text")], only_arrays).unwrap_err();
        assert!(
            error.message.contains("column 'tags' is text")
                && error.message.contains("list<string>")
                && error.message.contains("not an array"),
            "{error}"
        );
        // Only the new types are judged: a string column into anything, as before.
        let existing = [
            column("id", true, false),
            typed("numeric(12,2)"),
            StoreColumn {
                ty: "numeric(1,0)".into(),
                ..column("note", false, false)
            },
        ];
        assert!(plan("sql", &def, &existing, numeric).unwrap().is_empty());
    }

    #[test]
    fn names_match_whatever_their_case_where_the_store_says_so() {
        let def = table(true);
        let existing = [
            column("ID", true, false),
            column("Note", false, false),
            column("LEVEL", false, false),
        ];
        let sqlite = Abilities {
            any_case: true,
            ..SQL
        };
        assert!(plan("sqlite", &def, &existing, sqlite).unwrap().is_empty());
        // Where case matters, the store's ID is another column, required and unfilled.
        assert!(plan("sql", &def, &existing, SQL).is_err());
    }
}
