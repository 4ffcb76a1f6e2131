//! The file catalog: each table's layout in `DATA_DIR/<table>/_sluice/table.json`.
//!
//! Names that start with `_` are skipped by Parquet and Delta readers, so the file sits beside
//! the table's parts without being mistaken for data.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use sluice_core::{Catalog, CatalogError, TableLayout, TableName};

use crate::fsio;

/// The folder inside a table's folder that holds sluice's own files.
pub const META_DIR: &str = "_sluice";

const LAYOUT_FILE: &str = "table.json";

/// A catalog kept as JSON files under the data directory.
#[derive(Debug, Clone)]
pub struct FileCatalog {
    root: PathBuf,
}

impl FileCatalog {
    /// A catalog rooted at the data directory, which is created if missing.
    pub fn open(root: impl Into<PathBuf>) -> Result<Self, CatalogError> {
        let root = root.into();
        fs::create_dir_all(&root).map_err(|e| {
            CatalogError::new(format!("cannot create data dir {}", root.display())).with_source(e)
        })?;
        Ok(Self { root })
    }

    /// The data directory.
    pub fn root(&self) -> &Path {
        &self.root
    }
}

impl Catalog for FileCatalog {
    fn load(&self) -> Result<Vec<(TableName, TableLayout)>, CatalogError> {
        let read_err = |path: &Path, e: io::Error| {
            CatalogError::new(format!("cannot read {}", path.display())).with_source(e)
        };
        let mut tables = Vec::new();
        for entry in fs::read_dir(&self.root).map_err(|e| read_err(&self.root, e))? {
            let entry = entry.map_err(|e| read_err(&self.root, e))?;
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let Some(name) = entry
                .file_name()
                .to_str()
                .and_then(|n| TableName::new(n).ok())
            else {
                continue;
            };
            let path = entry.path().join(META_DIR).join(LAYOUT_FILE);
            let bytes = match fs::read(&path) {
                Ok(bytes) => bytes,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(read_err(&path, e)),
            };
            let layout: TableLayout = serde_json::from_slice(&bytes).map_err(|e| {
                CatalogError::new(format!("{} is not a table layout", path.display()))
                    .with_source(e)
            })?;
            tables.push((name, layout));
        }
        tables.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(tables)
    }

    fn store(&self, name: &TableName, layout: &TableLayout) -> Result<(), CatalogError> {
        let dir = self.root.join(name.as_str()).join(META_DIR);
        let write_err = |e: io::Error| {
            CatalogError::new(format!(
                "cannot store the layout of table {name} in {}",
                dir.display()
            ))
            .with_source(e)
        };
        fsio::create_dir_durably(&self.root, &dir).map_err(write_err)?;
        let json = serde_json::to_vec_pretty(layout)
            .map_err(|e| CatalogError::new(format!("cannot encode table {name}")).with_source(e))?;
        fsio::write_atomically(&dir, LAYOUT_FILE, &json).map_err(write_err)
    }
}

#[cfg(test)]
mod tests {
    use sluice_core::{Column, ColumnType};

    use super::*;

    #[test]
    fn stores_and_loads_layouts() {
        let dir = tempfile::tempdir().unwrap();
        let catalog = FileCatalog::open(dir.path()).unwrap();
        assert!(catalog.load().unwrap().is_empty());
        let layout = TableLayout {
            columns: vec![Column::new("id", ColumnType::Int64).required()],
            partition_by: String::new(),
            sort_by: vec!["id".into()],
        };
        let name = TableName::new("events").unwrap();
        catalog.store(&name, &layout).unwrap();
        // A folder that is not a table and a stray file are ignored.
        fs::create_dir(dir.path().join("not-a-table")).unwrap();
        fs::write(dir.path().join("README"), "x").unwrap();
        assert_eq!(catalog.load().unwrap(), vec![(name, layout)]);
    }
}
