//! Bringing an existing table's schema to the layout: one metadata commit per change.

use std::sync::Arc;

use deltalake_core::kernel::transaction::CommitProperties;
use deltalake_core::kernel::{Action, MetadataExt, StructField, StructType};
use deltalake_core::protocol::DeltaOperation;
use deltalake_core::table::state::DeltaTableState;
use sluice_core::{SinkError, TableDef};

use crate::lake::config::LakeRoot;

use super::*;

/// The table property naming how a table maps its column names to the files' (Delta's
/// column mapping): sluice writes only tables that do not.
pub(super) const COLUMN_MAPPING_KEY: &str = "delta.columnMapping.mode";

/// Tries a schema change gets beyond one per change, for commits lost to other writers'.
pub(super) const SCHEMA_RETRIES: usize = 3;

/// How an existing table's schema differs from the layout's columns, in the ways a metadata
/// commit can change: columns to add, and columns to make nullable.
#[derive(Debug, Default, PartialEq)]
pub(super) struct SchemaChange {
    add: Vec<StructField>,
    relax: Vec<String>,
}

impl SchemaChange {
    pub(super) fn is_empty(&self) -> bool {
        self.add.is_empty() && self.relax.is_empty()
    }

    /// The next commit of this change to `current`: the schema after it and the operation it
    /// records (every added column at once, or one column made nullable); `None` when there is
    /// nothing to change.
    pub(super) fn next(
        &self,
        current: &StructType,
    ) -> Result<Option<(StructType, DeltaOperation)>, SinkError> {
        let (fields, operation): (Vec<StructField>, _) = if !self.add.is_empty() {
            let fields = current.fields().chain(&self.add).cloned().collect();
            let operation = DeltaOperation::AddColumn {
                fields: self.add.clone(),
            };
            (fields, operation)
        } else if let Some(name) = self.relax.first() {
            let mut column = None;
            let fields = current
                .fields()
                .map(|field| {
                    let mut field = field.clone();
                    if field.name() == name {
                        field.nullable = true;
                        column = Some(field.clone());
                    }
                    field
                })
                .collect();
            let Some(column) = column else {
                return Ok(None);
            };
            (fields, DeltaOperation::DropColumnNotNull { column })
        } else {
            return Ok(None);
        };
        let schema = StructType::try_new(fields).map_err(|e| {
            SinkError::permanent(
                SINK,
                format!("cannot change the table's schema ({self}): {e}"),
            )
        })?;
        Ok(Some((schema, operation)))
    }
}

impl std::fmt::Display for SchemaChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let quoted = |names: &mut dyn Iterator<Item = &str>| {
            names
                .map(|n| format!("'{n}'"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut parts = Vec::new();
        if !self.add.is_empty() {
            let names = quoted(&mut self.add.iter().map(|f| f.name().as_str()));
            parts.push(format!("add {names}"));
        }
        if !self.relax.is_empty() {
            let names = quoted(&mut self.relax.iter().map(String::as_str));
            parts.push(format!("make {names} nullable"));
        }
        f.write_str(&parts.join(", "))
    }
}

/// A table's schema and partition columns, as its log holds them.
pub(super) struct Current {
    schema: Arc<StructType>,
    partition_columns: Vec<String>,
}

impl Current {
    pub(super) fn of(state: &DeltaTableState) -> Self {
        Self {
            schema: state.schema(),
            partition_columns: state.metadata().partition_columns().to_vec(),
        }
    }
}

/// What it takes to bring the table's schema (`current`) to the layout's `fields` and
/// `partition_columns`. A difference no commit can make without rewriting the rows the table
/// holds is refused, naming it: writing would make files its readers cannot read.
pub(super) fn schema_change(
    dir: &LakeRoot,
    current: &Current,
    fields: &[StructField],
    partition_columns: &[String],
) -> Result<SchemaChange, SinkError> {
    let mismatch = |what: String| {
        SinkError::permanent(
            SINK,
            format!("the Delta table at {dir} does not match the table's layout: {what}"),
        )
    };
    let existing = &current.partition_columns;
    if existing != partition_columns {
        return Err(mismatch(format!(
            "it is partitioned by {existing:?}, the layout says {partition_columns:?}"
        )));
    }
    let schema = &current.schema;
    let mut change = SchemaChange::default();
    for field in fields {
        let name = field.name();
        match schema.field(name) {
            Some(existing) if existing.data_type() != field.data_type() => {
                return Err(mismatch(format!(
                    "column '{name}' is {} there, {} here",
                    existing.data_type(),
                    field.data_type()
                )));
            }
            Some(existing) => {
                if !existing.is_nullable() && field.is_nullable() {
                    change.relax.push(name.clone());
                }
            }
            None => {
                if let Some(other) = schema
                    .fields()
                    .find(|f| f.name().eq_ignore_ascii_case(name))
                {
                    return Err(mismatch(format!(
                        "its column '{}' is '{name}' here, and a Delta table takes names that \
                         differ only in case for one column",
                        other.name()
                    )));
                }
                if !field.is_nullable() {
                    return Err(mismatch(format!(
                        "it has no column '{name}', and the rows it holds have no value for \
                         it: declare the column nullable to add it"
                    )));
                }
                change.add.push(field.clone());
            }
        }
    }
    Ok(change)
}

impl TableLog {
    /// Takes `table`'s columns as the layout to bring the table's schema to, when it has a
    /// column the layout so far does not: a table that took new columns from an insert. The
    /// next [`TableLog::conform_schema`] adds them. A layout with no new column changes
    /// nothing, so a flush of rows taken before the change does not take it back.
    pub(crate) fn relayout(&mut self, table: &TableDef) -> Result<(), SinkError> {
        let (fields, _) = crate::lake::schema::delta_columns(table)?;
        let new = fields
            .iter()
            .any(|f| !self.fields.iter().any(|known| known.name() == f.name()));
        if new {
            self.fields = fields;
            self.conformed = false;
        }
        Ok(())
    }

    /// Brings the table's schema to the layout's columns, one metadata commit per change:
    /// columns the config added are added (nullable: the rows the table holds have no value for
    /// them), columns the config made nullable lose their `NOT NULL`. Anything else that
    /// differs (a column's type, the partitioning, a new column that may not be null) is
    /// refused, and nothing is changed. A change that races with another writer's is planned
    /// again from the newest version: when both add the same column, the second finds it there.
    /// Done once per opening; rows are landed only after it.
    pub(crate) async fn conform_schema(&mut self) -> Result<(), SinkError> {
        if self.conformed {
            return Ok(());
        }
        if self.behind {
            self.refresh().await?;
        }
        // Each change is one commit; a few more tries cover commits lost to other writers.
        let mut attempts = self.fields.len() + SCHEMA_RETRIES;
        loop {
            let change = schema_change(
                &self.location,
                &Current::of(&self.state),
                &self.fields,
                &self.partition_columns,
            )?;
            let Some((schema, operation)) = change.next(&self.state.schema())? else {
                self.conformed = true;
                return Ok(());
            };
            let mapping = self
                .state
                .metadata()
                .configuration()
                .get(COLUMN_MAPPING_KEY);
            if mapping.is_some_and(|mode| !mode.eq_ignore_ascii_case("none")) {
                return Err(SinkError::permanent(
                    SINK,
                    format!(
                        "the Delta table at {} maps its column names, and sluice cannot {} \
                         there: {change}",
                        self.location,
                        operation.name().to_lowercase()
                    ),
                ));
            }
            let metadata = self
                .state
                .metadata()
                .clone()
                .with_schema(&schema)
                .map_err(|e| delta_error(&self.location, "change the schema of", e.into()))?;
            let properties = CommitProperties::default().with_cleanup_expired_logs(Some(false));
            match self
                .commit(
                    properties,
                    vec![Action::Metadata(metadata)],
                    operation,
                    Then::Update,
                )
                .await
            {
                Ok(()) => tracing::info!(table = %self.location, %change, "table schema changed"),
                Err(e) if attempts == 0 => return Err(e),
                // Lost to another writer's commit, or landed without our knowing: read the
                // log again and see what is still to do.
                Err(e) => {
                    tracing::debug!(table = %self.location, error = %e, "schema change retried");
                    self.refresh().await?;
                }
            }
            attempts = attempts.saturating_sub(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use deltalake_core::kernel::{DataType, PrimitiveType};

    use super::*;

    pub(super) fn field(name: &str, ty: PrimitiveType, nullable: bool) -> StructField {
        StructField::new(name, DataType::Primitive(ty), nullable)
    }

    /// A table of `id` (a long, not null) and `name` (a string, nullable), unpartitioned.
    pub(super) fn current() -> Current {
        let fields = [
            field("id", PrimitiveType::Long, false),
            field("name", PrimitiveType::String, true),
        ];
        Current {
            schema: Arc::new(StructType::try_new(fields).unwrap()),
            partition_columns: vec![],
        }
    }

    pub(super) fn change(
        fields: &[StructField],
        partitions: &[&str],
    ) -> Result<SchemaChange, String> {
        let dir = LakeRoot::Folder("/lake/t".into());
        let partitions: Vec<String> = partitions.iter().map(|p| (*p).to_owned()).collect();
        schema_change(&dir, &current(), fields, &partitions).map_err(|e| e.to_string())
    }

    #[test]
    pub(super) fn new_nullable_columns_are_added_and_relaxed_ones_made_nullable() {
        let (id, name) = (
            field("id", PrimitiveType::Long, true),
            field("name", PrimitiveType::String, true),
        );
        let note = field("note", PrimitiveType::String, true);
        // The same columns, one dropped, or one made required: nothing to commit.
        let same = [field("id", PrimitiveType::Long, false), name.clone()];
        assert_eq!(change(&same, &[]).unwrap(), SchemaChange::default());
        assert_eq!(change(&same[..1], &[]).unwrap(), SchemaChange::default());
        let required = [same[0].clone(), field("name", PrimitiveType::String, false)];
        assert_eq!(change(&required, &[]).unwrap(), SchemaChange::default());

        let wanted = [id, name, note.clone()];
        let planned = change(&wanted, &[]).unwrap();
        assert_eq!(planned.add, std::slice::from_ref(&note));
        assert_eq!(planned.relax, ["id"]);
        assert_eq!(planned.to_string(), "add 'note', make 'id' nullable");
        // The additions commit first, then each relaxed column.
        let (schema, operation) = planned.next(&current().schema).unwrap().unwrap();
        assert!(matches!(operation, DeltaOperation::AddColumn { fields } if fields == [note]));
        let names: Vec<&String> = schema.fields().map(StructField::name).collect();
        assert_eq!(names, ["id", "name", "note"]);
        let relax_only = SchemaChange {
            add: vec![],
            relax: vec!["id".into()],
        };
        let (schema, operation) = relax_only.next(&current().schema).unwrap().unwrap();
        assert!(
            matches!(operation, DeltaOperation::DropColumnNotNull { column } if column.name() == "id")
        );
        assert!(schema.fields().all(StructField::is_nullable));
        assert!(
            SchemaChange::default()
                .next(&current().schema)
                .unwrap()
                .is_none()
        );
    }

    #[test]
    pub(super) fn changes_that_would_need_the_rows_rewritten_are_refused_by_name() {
        let id = field("id", PrimitiveType::Long, false);
        let cases = [
            (
                vec![id.clone(), field("tag", PrimitiveType::String, false)],
                vec![],
                "it has no column 'tag', and the rows it holds have no value for it",
            ),
            (
                vec![field("id", PrimitiveType::String, false)],
                vec![],
                "column 'id' is long there, string here",
            ),
            (
                vec![id.clone(), field("Name", PrimitiveType::String, true)],
                vec![],
                "its column 'name' is 'Name' here",
            ),
            (
                vec![id.clone()],
                vec!["id"],
                "it is partitioned by [], the layout says [\"id\"]",
            ),
        ];
        for (fields, partitions, expected) in cases {
            let refused = change(&fields, &partitions).unwrap_err();
            assert!(
                refused.contains("the Delta table at /lake/t does not match the table's layout")
                    && refused.contains(expected),
                "{refused}"
            );
        }
    }
}
