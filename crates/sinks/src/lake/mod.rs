//! The lake: Parquet parts in a folder tree, the embedded default.
//!
//! ```text
//! DATA_DIR/
//!   events/                          one folder per table
//!     _sluice/table.json             the table's layout (catalog)
//!     service=api/                   one folder per partition value (hive style)
//!       part-<first>-<last>-<uuid v7>.parquet
//!                                    one file per flush: zstd, statistics, sorted by the sort key;
//!                                    <first>-<last> is the range of insert sequence numbers in it
//!   logs/                            an unpartitioned table keeps its parts at the top
//!     part-<first>-<last>-<uuid v7>.parquet
//! ```
//!
//! Exactly once: [`sluice_core::Sink::committed`] reads the highest sequence number per partition
//! from the part names alone. A part is renamed into place whole, so a part that exists holds all
//! the inserts its name says; replay after a crash skips them.
//!
//! Partition values are percent-escaped in folder names (`a/b` becomes `a%2Fb`) and null is
//! `__HIVE_DEFAULT_PARTITION__`, as Hive, Spark, Delta, pyarrow and DuckDB expect. As in Delta
//! tables, a column used for partitioning by value is not repeated inside the files: readers take
//! it from the folder name (`hive_partitioning` in DuckDB, `partitioning="hive"` in pyarrow).
//!
//! # Layout
//!
//! - `config.rs`: the sink's settings with their defaults.
//! - `path.rs`: partition folder names.
//! - `part.rs`: writing one part: temporary name, fsync, rename, fsync the folder.
//! - `sink.rs`: the [`sluice_core::Sink`] implementation, running part writes off the async
//!   threads.

mod config;
mod part;
mod path;
mod sink;

pub use config::{DEFAULT_ZSTD_LEVEL, LakeConfig};
pub use part::{FLUSH_ID_KEY, PART_PREFIX, PART_SUFFIX};
pub use path::{NULL_PARTITION, parse_partition_dir_name, partition_dir_name};
pub use sink::LakeSink;
