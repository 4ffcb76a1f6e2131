//! Active parts per partition, counted from the log and published for the insert path's
//! throttle.

use std::collections::HashMap;
use std::sync::Arc;

use deltalake_core::kernel::LogicalFileView;
use sluice_core::{PartitionKey, PartitionParts};

use crate::lake::files::LiveFile;

use super::*;

impl TableLog {
    /// The active parts per partition this log publishes.
    pub(crate) fn counts(&self) -> Arc<PartCounts> {
        self.counts.clone()
    }

    pub(super) fn counted(self) -> Self {
        self.publish_counts();
        self
    }

    /// Recounts the active parts per partition from `state` and publishes them.
    pub(super) fn publish_counts(&self) {
        let mut counts: HashMap<PartitionKey, PartitionParts> = HashMap::new();
        for file in self.state.log_data().iter() {
            let key = self.partition_of_file(&file);
            let entry = counts.entry(key.clone()).or_insert(PartitionParts {
                partition: key,
                parts: 0,
                rows: 0,
                bytes: 0,
            });
            entry.parts += 1;
            entry.rows += file.num_records().unwrap_or(0) as u64;
            entry.bytes += u64::try_from(file.size()).unwrap_or(0);
        }
        match self.counts.write() {
            Ok(mut guard) => *guard = counts,
            Err(poisoned) => *poisoned.into_inner() = counts,
        }
    }

    /// Moves the published counts by a compaction's swap (`inputs`, of one partition, became
    /// one file of `bytes_out` bytes; the rows stay), for a state left behind it.
    pub(super) fn count_swap(&self, inputs: &[LiveFile], bytes_out: u64) {
        let Some(partition) = inputs
            .first()
            .map(|input| self.partition_of(&input.partition_values))
        else {
            return;
        };
        let bytes_in: u64 = inputs.iter().map(|input| input.bytes).sum();
        let mut counts = match self.counts.write() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        if let Some(entry) = counts.get_mut(&partition) {
            entry.parts = entry.parts.saturating_sub(inputs.len() as u64) + 1;
            entry.bytes = entry.bytes.saturating_sub(bytes_in) + bytes_out;
        }
    }

    /// The partition of a file in the log. An unpartitioned table's files have no partition
    /// values to read: building each one's empty map from the log costs more than the rest of
    /// a pass over the files.
    pub(super) fn partition_of_file(&self, file: &LogicalFileView) -> PartitionKey {
        if self.partition_columns.is_empty() {
            return PartitionKey::Whole;
        }
        self.partition_of(&file.partition_values_map())
    }

    /// The partition a file's partition values stand for.
    pub(crate) fn partition_of(&self, values: &HashMap<String, Option<String>>) -> PartitionKey {
        match self.partition_columns.first() {
            None => PartitionKey::Whole,
            Some(column) => match values.get(column) {
                Some(Some(value)) => PartitionKey::Value(value.clone()),
                _ => PartitionKey::Null,
            },
        }
    }
}
