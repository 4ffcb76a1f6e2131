//! Where a table's files live: a local folder (the embedded default) or an object store (S3,
//! GCS, Azure), behind one set of file operations for the sink, the compactor and readers.
//!
//! In a folder a file is written under a hidden temporary name, fsynced, renamed into place and
//! its folder fsynced: readers (and a crash) see no file or the whole file. A large file's bulk
//! is written with direct I/O as it grows ([`fsio::DurableFile`]), past the page cache, so the
//! closing fsync has only its last few MiB to write. In an object store a file is one PUT,
//! which is all-or-nothing by itself.
//!
//! deltalake-core itself knows only `file://` and `memory://` tables; its cloud crates bring
//! each cloud's SDK (and, for S3, a DynamoDB lock). [`register_object_stores`] instead teaches it
//! the object-store schemes with object_store's own clients (already built for deltalake-core)
//! and the default log store, which commits with a put-if-absent of the log entry: S3's
//! `If-None-Match: *` (AWS S3 since 2024, MinIO, R2), GCS's and Azure's preconditions. Two
//! writers racing for one version get one success and one conflict, as on a local disk.
//!
//! Object-store calls are async; the sink calls these helpers on blocking threads, so a
//! [`TableFiles::Store`] carries the runtime handle it blocks on.

use std::collections::{HashMap, HashSet};
use std::fs::{self, File};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Once};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use deltalake_core::logstore::{
    LogStore, LogStoreFactory, ObjectStoreFactory, ObjectStoreRef, StorageConfig, default_logstore,
    logstore_factories, object_store_factories,
};
use deltalake_core::{DeltaResult, DeltaTableError};
use futures_util::TryStreamExt;
use object_store::path::Path as StorePath;
use object_store::{ObjectStore, ObjectStoreExt, ObjectStoreScheme, RetryConfig};
use sluice_core::SinkError;
use url::Url;

use super::config::{LakeRoot, OBJECT_STORE_SCHEMES};
use super::footer::{footer_len, tail};
use super::path::{is_part_name, is_temporary};
use crate::fsio;

const SINK: &str = "lake";

/// Whether a written file is fsynced before it counts as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FileSync {
    /// File and folder fsynced: the file survives power loss once written. Every flush and
    /// every merge.
    Durable,
    /// Left to the page cache: only for throwaway bulk loads (the lab's data sets).
    Cached,
}

/// Teaches deltalake-core the object-store schemes (once per process).
pub(crate) fn register_object_stores() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        for scheme in OBJECT_STORE_SCHEMES {
            let Ok(url) = Url::parse(&format!("{scheme}://")) else {
                continue;
            };
            object_store_factories().insert(url.clone(), Arc::new(CloudStores));
            logstore_factories().insert(url, Arc::new(PutIfAbsentLog));
        }
    });
}

/// How many times object_store retries one request (after a timeout, a reset, a 5xx) before
/// the flush sees the error, unless `[lake.storage] max_retries` says otherwise. Its own default
/// (ten retries within three minutes) left a store that hung unnoticed for minutes, with a
/// flush, a compaction or a shutdown waiting on it; sluice retries whole flushes on its own
/// backoff anyway, so a request need only ride out a blip.
pub const DEFAULT_MAX_RETRIES: usize = 3;

/// How long after a request's first try object_store still retries it, unless `[lake.storage]
/// retry_timeout` says otherwise: one request timeout (object_store's `timeout`, 30 s by
/// default), so a store that does not answer is an error of the flush within about that.
pub const DEFAULT_RETRY_TIMEOUT: Duration = Duration::from_secs(30);

/// The options of `[lake.storage]` that set object_store's retries rather than its client,
/// each with the other spellings deltalake takes for it.
const RETRY_KEYS: [(&str, &[&str]); 5] = [
    ("max_retries", &[]),
    ("retry_timeout", &[]),
    (
        "init_backoff",
        &["backoff_config.init_backoff", "backoff.init_backoff"],
    ),
    (
        "max_backoff",
        &["backoff_config.max_backoff", "backoff.max_backoff"],
    ),
    ("base", &["backoff_config.base", "backoff.base"]),
];

/// The retry option `key` is a spelling of (in any case, as every option is), if any.
fn retry_key(key: &str) -> Option<&'static str> {
    RETRY_KEYS
        .iter()
        .find(|(name, aliases)| {
            name.eq_ignore_ascii_case(key) || aliases.iter().any(|a| a.eq_ignore_ascii_case(key))
        })
        .map(|(name, _)| *name)
}

/// Whether `key` is one of [`RETRY_KEYS`].
fn is_retry_key(key: &str) -> bool {
    retry_key(key).is_some()
}

/// object_store's retries for a store opened with `options` (keys in any case):
/// [`DEFAULT_MAX_RETRIES`] and [`DEFAULT_RETRY_TIMEOUT`] unless the options set them, and
/// object_store's backoff between tries (100 ms at first, doubling, at most 15 s) unless
/// `init_backoff`, `max_backoff` or `base` set it. The error names the option.
pub fn retry_config(options: &HashMap<String, String>) -> Result<RetryConfig, String> {
    let mut retry = RetryConfig {
        max_retries: DEFAULT_MAX_RETRIES,
        retry_timeout: DEFAULT_RETRY_TIMEOUT,
        ..RetryConfig::default()
    };
    let duration = |key: &str, value: &str| {
        humantime::parse_duration(value.trim())
            .map_err(|e| format!("{key}: '{value}' is not a duration ({e})"))
    };
    // Sorted, so that of two options in error the same one is named every time.
    let mut given: Vec<(&String, &String)> = options.iter().collect();
    given.sort();
    for (key, value) in given {
        match retry_key(key) {
            Some("max_retries") => {
                retry.max_retries = value
                    .trim()
                    .parse()
                    .map_err(|e| format!("{key}: '{value}' is not a count ({e})"))?;
            }
            Some("retry_timeout") => retry.retry_timeout = duration(key, value)?,
            Some("init_backoff") => retry.backoff.init_backoff = duration(key, value)?,
            Some("max_backoff") => retry.backoff.max_backoff = duration(key, value)?,
            Some("base") => {
                retry.backoff.base = value
                    .trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|base| base.is_finite() && *base > 1.0)
                    .ok_or_else(|| {
                        format!(
                            "{key}: '{value}' is not a backoff base (a number above 1: each \
                             wait is up to this many times the one before)"
                        )
                    })?;
            }
            _ => {}
        }
    }
    // object_store draws each wait from `init_backoff` to `base` times the last one, capped
    // at `max_backoff`: that range must never be empty (its random draw would panic), and
    // the cap must convert back to a duration. With every wait at least `init_backoff` (above
    // zero) and `base` above 1, it never is: a positive float times the smallest float above 1
    // is at least the next float up.
    let backoff = &retry.backoff;
    let format = |d: Duration| humantime::format_duration(d).to_string();
    if backoff.init_backoff.is_zero() || backoff.init_backoff > MAX_BACKOFF {
        return Err(format!(
            "init_backoff: {} is not between a nanosecond and {}",
            format(backoff.init_backoff),
            format(MAX_BACKOFF)
        ));
    }
    if backoff.max_backoff < backoff.init_backoff || backoff.max_backoff > MAX_BACKOFF {
        return Err(format!(
            "max_backoff: {} is not between init_backoff ({}) and {}",
            format(backoff.max_backoff),
            format(backoff.init_backoff),
            format(MAX_BACKOFF)
        ));
    }
    Ok(retry)
}

/// The longest wait between two tries of a request that `[lake.storage]` may set.
const MAX_BACKOFF: Duration = Duration::from_secs(60 * 60);

/// Checks the options a lake at `root` is opened with (`[lake.storage]`, keys in any case): each
/// must be one object_store's client for that cloud knows (`aws_*` for S3, `google_*` for GCS,
/// `azure_*` for Azure, and the client options every cloud shares, such as `timeout`), or one
/// of sluice's retry options ([`retry_config`]). The store is built from those and nothing
/// else, so an option misspelt (`aws_acess_key_id`) would otherwise be dropped without a word,
/// and show only as a failed request at the first flush. The error names the option. A folder
/// takes no options; that is the config's to refuse.
pub fn check_storage_options(
    root: &LakeRoot,
    options: &HashMap<String, String>,
) -> Result<(), String> {
    use object_store::aws::AmazonS3ConfigKey;
    use object_store::azure::AzureConfigKey;
    use object_store::gcp::GoogleConfigKey;
    let LakeRoot::Url(url) = root else {
        return Ok(());
    };
    let (scheme, _) = ObjectStoreScheme::parse(url).map_err(|e| format!("{url}: {e}"))?;
    let mut keys: Vec<&String> = options.keys().collect();
    keys.sort();
    for key in keys {
        let lower = key.to_ascii_lowercase();
        if is_retry_key(&lower) {
            continue;
        }
        let (known, cloud) = match scheme {
            ObjectStoreScheme::AmazonS3 => (lower.parse::<AmazonS3ConfigKey>().is_ok(), "S3"),
            ObjectStoreScheme::GoogleCloudStorage => {
                (lower.parse::<GoogleConfigKey>().is_ok(), "GCS")
            }
            ObjectStoreScheme::MicrosoftAzure => (lower.parse::<AzureConfigKey>().is_ok(), "Azure"),
            _ => (false, "this store"),
        };
        if !known {
            return Err(format!(
                "'{key}' is not an option of object_store's {cloud} client, nor one of \
                 sluice's ({}): check its spelling against object_store's names",
                RETRY_KEYS.map(|(name, _)| name).join(", ")
            ));
        }
    }
    Ok(())
}

/// Builds object stores with object_store's clients, with sluice's retries
/// ([`retry_config`]); every other option goes to the client as object_store spells it.
struct CloudStores;

impl ObjectStoreFactory for CloudStores {
    fn parse_url_opts(
        &self,
        url: &Url,
        config: &StorageConfig,
    ) -> DeltaResult<(ObjectStoreRef, StorePath)> {
        let retry = retry_config(&config.raw).map_err(DeltaTableError::Generic)?;
        let (scheme, path) = ObjectStoreScheme::parse(url).map_err(object_store::Error::from)?;
        let path = StorePath::parse(path)?;
        let options = config.raw.iter().filter(|(key, _)| !is_retry_key(key));
        // Each cloud's builder, given the options its client knows. Others are ignored: the
        // config's were checked at start (`check_storage_options`), so only variables of the
        // environment with the cloud's prefix that its client does not read are left.
        macro_rules! build {
            ($builder:ty) => {{
                let builder = options.fold(
                    <$builder>::new().with_url(url.as_str()),
                    |builder, (key, value)| match key.to_ascii_lowercase().parse() {
                        Ok(key) => builder.with_config(key, value),
                        Err(_) => builder,
                    },
                );
                Arc::new(builder.with_retry(retry).build()?) as ObjectStoreRef
            }};
        }
        let store = match scheme {
            ObjectStoreScheme::AmazonS3 => build!(object_store::aws::AmazonS3Builder),
            ObjectStoreScheme::GoogleCloudStorage => {
                build!(object_store::gcp::GoogleCloudStorageBuilder)
            }
            ObjectStoreScheme::MicrosoftAzure => build!(object_store::azure::MicrosoftAzureBuilder),
            _ => {
                return Err(DeltaTableError::InvalidTableLocation(format!(
                    "{url} is not an object store"
                )));
            }
        };
        Ok((store, path))
    }
}

/// The default log store: commits are put-if-absent of the log entry.
struct PutIfAbsentLog;

impl LogStoreFactory for PutIfAbsentLog {
    fn with_options(
        &self,
        prefixed_store: ObjectStoreRef,
        root_store: ObjectStoreRef,
        location: &Url,
        options: &StorageConfig,
    ) -> DeltaResult<Arc<dyn LogStore>> {
        Ok(default_logstore(
            prefixed_store,
            root_store,
            location,
            options,
        ))
    }
}

/// The options an object store at `url` is opened with: the environment's variables for its
/// cloud (`AWS_*` for S3, `GOOGLE_*` for GCS, `AZURE_*` for Azure), then `configured`, which
/// win. Keys are lower-cased, as object_store spells them.
pub(crate) fn storage_options(
    url: &Url,
    configured: &HashMap<String, String>,
) -> HashMap<String, String> {
    let prefix = match url.scheme() {
        "s3" | "s3a" => "AWS_",
        "gs" => "GOOGLE_",
        _ => "AZURE_",
    };
    let mut options: HashMap<String, String> = std::env::vars()
        .filter(|(key, _)| key.starts_with(prefix))
        .map(|(key, value)| (key.to_ascii_lowercase(), value))
        .collect();
    for (key, value) in configured {
        options.insert(key.to_ascii_lowercase(), value.clone());
    }
    options
}

/// A table's data files.
#[derive(Clone)]
pub(crate) enum TableFiles {
    /// In a local folder.
    Folder {
        /// The lake's root folder (folders below it are created durably).
        root: PathBuf,
        /// The table's folder.
        dir: PathBuf,
    },
    /// In an object store.
    Store {
        /// The store, rooted at the table.
        store: ObjectStoreRef,
        /// The table's location, for messages.
        url: Url,
        /// The runtime the store's calls block on.
        runtime: tokio::runtime::Handle,
    },
}

impl TableFiles {
    /// The files of the table at `location`; `store` (rooted at the table) serves an
    /// object-store location. Call inside the runtime that is to serve the store.
    pub(crate) fn new(root: &LakeRoot, location: &LakeRoot, store: ObjectStoreRef) -> Self {
        match (root, location) {
            (LakeRoot::Folder(root), LakeRoot::Folder(dir)) => Self::Folder {
                root: root.clone(),
                dir: dir.clone(),
            },
            (_, LakeRoot::Folder(dir)) => Self::Folder {
                root: dir.clone(),
                dir: dir.clone(),
            },
            (_, LakeRoot::Url(url)) => Self::Store {
                store,
                url: url.clone(),
                runtime: tokio::runtime::Handle::current(),
            },
        }
    }

    /// Where `relative` is, for messages.
    pub(crate) fn describe(&self, relative: &str) -> String {
        match self {
            Self::Folder { dir, .. } => dir.join(relative).display().to_string(),
            Self::Store { url, .. } => format!("{url}{relative}"),
        }
    }

    /// Writes the file `relative` with what `encode` writes: durably when `sync` says so, and
    /// whole or not at all. Returns its size.
    pub(crate) fn write(
        &self,
        relative: &str,
        sync: FileSync,
        encode: impl FnOnce(&mut (dyn Write + Send)) -> Result<(), SinkError>,
    ) -> Result<u64, SinkError> {
        match self {
            Self::Folder { root, dir } => {
                let path = dir.join(relative);
                let folder = path.parent().unwrap_or(dir);
                fsio::create_dir_durably(root, folder)
                    .map_err(|e| io_error(&self.describe(relative), "create the folder of", e))?;
                let name = path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let tmp = folder.join(format!(".{name}.tmp"));
                let written = write_local(&tmp, sync, encode).and_then(|bytes| {
                    fs::rename(&tmp, &path)
                        .map_err(|e| io_error(&path.display().to_string(), "rename", e))?;
                    if sync == FileSync::Durable {
                        fsio::sync_dir(folder)
                            .map_err(|e| io_error(&folder.display().to_string(), "fsync", e))?;
                    }
                    Ok(bytes)
                });
                if written.is_err() {
                    let _ = fs::remove_file(&tmp);
                }
                written
            }
            Self::Store { store, runtime, .. } => {
                let mut buffer = Vec::new();
                encode(&mut buffer)?;
                let bytes = buffer.len() as u64;
                let location = store_path(relative)?;
                runtime
                    .block_on(store.put(&location, buffer.into()))
                    .map_err(|e| store_error(&self.describe(relative), "write", e))?;
                Ok(bytes)
            }
        }
    }

    /// The whole of `relative`, `size` bytes as its log entry says, read at once: one read (or
    /// one GET) per file, rather than one per column chunk as a reader of an open file does,
    /// which is most of the cost of reading thousands of small parts. (Knowing the size, a file
    /// in a folder is opened and read, without asking its size and reading again to find its
    /// end.)
    pub(crate) fn read(&self, relative: &str, size: u64) -> Result<Bytes, SinkError> {
        match self {
            Self::Folder { dir, .. } => {
                // The size comes from the log: a wrong one is an error, never an abort.
                let mut bytes = Vec::new();
                let len = usize::try_from(size)
                    .ok()
                    .filter(|&len| bytes.try_reserve_exact(len).is_ok())
                    .ok_or_else(|| {
                        SinkError::permanent(
                            SINK,
                            format!(
                                "cannot hold {} in memory: its log entry says {size} bytes",
                                self.describe(relative)
                            ),
                        )
                    })?;
                // One read call for the whole file. Reading to the end into the reserved
                // capacity (no zeroing) took two for any file over 8 KiB, the standard
                // library's first read size without a size hint. Zeroing a buffer the read
                // then overwrites costs less than a call into the kernel.
                bytes.resize(len, 0);
                fsio::open_to_read(&dir.join(relative))
                    .and_then(|mut file| file.read_exact(&mut bytes))
                    .map_err(|e| match e.kind() {
                        std::io::ErrorKind::UnexpectedEof => SinkError::permanent(
                            SINK,
                            format!(
                                "{} is shorter than the {size} bytes its log entry says",
                                self.describe(relative)
                            ),
                        ),
                        _ => io_error(&self.describe(relative), "read", e),
                    })?;
                Ok(Bytes::from(bytes))
            }
            Self::Store { store, runtime, .. } => {
                let location = store_path(relative)?;
                runtime
                    .block_on(async { store.get(&location).await?.bytes().await })
                    .map_err(|e| store_error(&self.describe(relative), "read", e))
            }
        }
    }

    /// The size of `relative`'s Parquet footer (metadata plus the 8-byte tail).
    pub(crate) fn footer_bytes(&self, relative: &str, size: u64) -> Result<u64, SinkError> {
        let tail = match self {
            Self::Folder { dir, .. } => tail(&dir.join(relative))
                .map_err(|e| io_error(&self.describe(relative), "read", e))?,
            Self::Store { store, runtime, .. } => {
                let location = store_path(relative)?;
                let bytes = runtime
                    .block_on(store.get_range(&location, size.saturating_sub(8)..size))
                    .map_err(|e| store_error(&self.describe(relative), "read", e))?;
                <[u8; 8]>::try_from(bytes.as_ref()).map_err(|_| {
                    SinkError::permanent(SINK, format!("{} is too short", self.describe(relative)))
                })?
            }
        };
        footer_len(tail).ok_or_else(|| {
            SinkError::permanent(
                SINK,
                format!("{} is not a Parquet file", self.describe(relative)),
            )
        })
    }

    /// Deletes `relative`: whether it was there. Failures are logged.
    pub(crate) fn delete(&self, relative: &str) -> bool {
        let result = match self {
            Self::Folder { dir, .. } => match fs::remove_file(dir.join(relative)) {
                Ok(()) => Ok(true),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
                Err(e) => Err(e.to_string()),
            },
            Self::Store { store, runtime, .. } => match store_path(relative) {
                Ok(location) => match runtime.block_on(store.delete(&location)) {
                    Ok(()) => Ok(true),
                    Err(object_store::Error::NotFound { .. }) => Ok(false),
                    Err(e) => Err(e.to_string()),
                },
                Err(e) => Err(e.to_string()),
            },
        };
        result.unwrap_or_else(|error| {
            tracing::warn!(file = %self.describe(relative), %error, "cannot delete a file");
            false
        })
    }

    /// The data files under the table (not under `_`-folders) that `referenced` does not name:
    /// each one's path from the table and when it was last modified.
    pub(crate) fn unreferenced_files(
        &self,
        referenced: &HashSet<String>,
    ) -> Result<Vec<(String, SystemTime)>, SinkError> {
        match self {
            Self::Folder { dir, .. } => Ok(local_unreferenced_files(dir, referenced)),
            Self::Store { store, runtime, .. } => {
                let objects: Vec<_> = runtime
                    .block_on(store.list(None).try_collect())
                    .map_err(|e| store_error(&self.describe(""), "list", e))?;
                Ok(objects
                    .into_iter()
                    .filter_map(|meta| {
                        let relative = meta.location.to_string();
                        (is_data_file(&relative) && !referenced.contains(&relative))
                            .then(|| (relative, SystemTime::from(meta.last_modified)))
                    })
                    .collect())
            }
        }
    }

    /// Removes temporary files an interrupted write left (only a folder has them).
    pub(crate) fn remove_temporaries(&self) -> std::io::Result<()> {
        match self {
            Self::Folder { root, dir } => {
                fsio::create_dir_durably(root, dir)?;
                remove_local_temporaries(dir)
            }
            Self::Store { .. } => Ok(()),
        }
    }
}

fn write_local(
    tmp: &Path,
    sync: FileSync,
    encode: impl FnOnce(&mut (dyn Write + Send)) -> Result<(), SinkError>,
) -> Result<u64, SinkError> {
    let describe = || tmp.display().to_string();
    let file = if sync == FileSync::Durable {
        let mut writer =
            fsio::DurableFile::create(tmp).map_err(|e| io_error(&describe(), "create", e))?;
        encode(&mut writer)?;
        let (file, _) = writer
            .finish()
            .map_err(|e| io_error(&describe(), "write and fsync", e))?;
        file
    } else {
        let mut file = File::create(tmp).map_err(|e| io_error(&describe(), "create", e))?;
        encode(&mut file)?;
        file
    };
    Ok(file
        .metadata()
        .map_err(|e| io_error(&describe(), "stat", e))?
        .len())
}

/// Whether a path from a table's root is a data file sluice wrote (not under `_`-folders).
fn is_data_file(relative: &str) -> bool {
    let mut parts = relative.split('/').peekable();
    while let Some(part) = parts.next() {
        if parts.peek().is_none() {
            return is_part_name(part);
        }
        if part.starts_with('_') {
            return false;
        }
    }
    false
}

fn local_unreferenced_files(dir: &Path, referenced: &HashSet<String>) -> Vec<(String, SystemTime)> {
    let mut out = Vec::new();
    let mut stack = vec![(String::new(), dir.to_owned())];
    while let Some((prefix, folder)) = stack.pop() {
        let Ok(entries) = fs::read_dir(&folder) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let relative = if prefix.is_empty() {
                name.clone()
            } else {
                format!("{prefix}/{name}")
            };
            let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
            if is_dir && !name.starts_with('_') {
                stack.push((relative, entry.path()));
            } else if !is_dir && is_data_file(&relative) && !referenced.contains(&relative) {
                let modified = entry
                    .metadata()
                    .and_then(|m| m.modified())
                    .unwrap_or_else(|_| SystemTime::now());
                out.push((relative, modified));
            }
        }
    }
    out
}

/// Removes `.part-*.tmp` files in a table's folder and its partition folders.
fn remove_local_temporaries(dir: &Path) -> std::io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if entry.file_type()?.is_dir() && !name.starts_with('_') {
            remove_local_temporaries(&path)?;
        } else if is_temporary(&name) {
            tracing::info!(path = %path.display(), "removing a part an interrupted write left behind");
            fs::remove_file(&path)?;
        }
    }
    Ok(())
}

/// An object's path from the table root. Partition folders are already escaped the Hive way
/// (`%2F`); the key keeps those characters as they are, as in a local folder.
fn store_path(relative: &str) -> Result<StorePath, SinkError> {
    StorePath::parse(relative)
        .map_err(|e| SinkError::permanent(SINK, format!("'{relative}' is not an object path: {e}")))
}

fn io_error(what: &str, action: &str, e: std::io::Error) -> SinkError {
    // Every I/O failure (disk full, permissions fixed by an operator, a flaky mount) may pass.
    SinkError::retriable(SINK, format!("cannot {action} {what}: {e}")).with_source(e)
}

fn store_error(what: &str, action: &str, e: object_store::Error) -> SinkError {
    // The client already retried with backoff; the store may still come back.
    SinkError::retriable(SINK, format!("cannot {action} {what}: {e}")).with_source(e)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lake::path::{compacted_name, part_name};

    fn options(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn storage_options_are_the_clouds_own_or_sluices_retries() {
        let root = |url: &str| LakeRoot::parse(url).unwrap();
        let s3 = options(&[
            ("aws_access_key_id", "k"),
            ("AWS_ENDPOINT", "http://127.0.0.1:9000"),
            ("aws_allow_http", "true"),
            ("timeout", "10s"),
            ("max_retries", "2"),
            ("RETRY_TIMEOUT", "5s"),
        ]);
        assert_eq!(check_storage_options(&root("s3://b/lake"), &s3), Ok(()));
        let gcs = options(&[("google_service_account", "/k.json"), ("timeout", "10s")]);
        assert_eq!(check_storage_options(&root("gs://b/lake"), &gcs), Ok(()));
        let azure = options(&[
            ("azure_storage_account_name", "a"),
            ("azure_allow_http", "1"),
        ]);
        assert_eq!(
            check_storage_options(&root("abfss://c@a.dfs.core.windows.net/lake"), &azure),
            Ok(())
        );
        // A misspelt key, and another cloud's key, are named.
        let typo = options(&[("aws_region", "eu"), ("aws_acess_key_id", "k")]);
        let err = check_storage_options(&root("s3://b/lake"), &typo).unwrap_err();
        assert!(
            err.contains("'aws_acess_key_id'") && err.contains("S3"),
            "{err}"
        );
        let err = check_storage_options(&root("gs://b/lake"), &options(&[("aws_region", "eu")]))
            .unwrap_err();
        assert!(err.contains("'aws_region'") && err.contains("GCS"), "{err}");
        // A folder takes none; the config refuses them there.
        assert_eq!(
            check_storage_options(&root("/tmp/lake"), &typo),
            Ok(()),
            "a folder's options are the config's to refuse"
        );
    }

    #[test]
    fn retries_and_their_backoff_are_set_by_their_options_and_checked() {
        let default = retry_config(&HashMap::new()).unwrap();
        assert_eq!(default.max_retries, DEFAULT_MAX_RETRIES);
        assert_eq!(default.retry_timeout, DEFAULT_RETRY_TIMEOUT);
        assert_eq!(default.backoff.init_backoff, Duration::from_millis(100));

        // deltalake's spellings of the backoff options are taken too.
        let set = retry_config(&options(&[
            ("MAX_RETRIES", "7"),
            ("retry_timeout", "1m"),
            ("backoff_config.init_backoff", "250ms"),
            ("max_backoff", "5s"),
            ("backoff.base", "3"),
        ]))
        .unwrap();
        assert_eq!(set.max_retries, 7);
        assert_eq!(set.retry_timeout, Duration::from_secs(60));
        assert_eq!(set.backoff.init_backoff, Duration::from_millis(250));
        assert_eq!(set.backoff.max_backoff, Duration::from_secs(5));
        assert_eq!(set.backoff.base, 3.0);
        let root = LakeRoot::parse("s3://b/lake").unwrap();
        assert_eq!(
            check_storage_options(&root, &options(&[("backoff_config.max_backoff", "5s")])),
            Ok(())
        );

        // Values object_store could not draw a wait from are refused, naming the option.
        for (pairs, named) in [
            (&[("base", "1")][..], "base"),
            (&[("base", "NaN")][..], "base"),
            (&[("init_backoff", "0s")][..], "init_backoff"),
            (
                &[("init_backoff", "2s"), ("max_backoff", "1s")][..],
                "max_backoff",
            ),
            (&[("max_backoff", "2days")][..], "max_backoff"),
            (&[("max_retries", "many")][..], "max_retries"),
            (&[("retry_timeout", "soon")][..], "retry_timeout"),
        ] {
            let err = retry_config(&options(pairs)).unwrap_err();
            assert!(err.starts_with(named), "{pairs:?}: {err}");
        }
    }

    #[test]
    fn a_gcs_root_builds_its_client_from_the_options() {
        // No request is made: the client is built, with the table's path under the bucket.
        let url = Url::parse("gs://bucket/lake/events/").unwrap();
        let config =
            StorageConfig::parse_options([("google_skip_signature", "true"), ("timeout", "5s")])
                .unwrap();
        let (store, path) = CloudStores.parse_url_opts(&url, &config).unwrap();
        assert_eq!(path.as_ref(), "lake/events");
        assert!(store.to_string().contains("GoogleCloudStorage"), "{store}");
    }

    #[test]
    fn data_files_are_parts_outside_underscore_folders() {
        let (part, compacted) = (part_name(1, 2), compacted_name());
        assert!(is_data_file(&part));
        assert!(is_data_file(&format!("service=a%2Fb/{compacted}")));
        assert!(!is_data_file("_delta_log/00000000000000000000.json"));
        assert!(!is_data_file(&format!("_sluice/{part}")));
        assert!(!is_data_file(&format!("service=a/.{part}.tmp")));
        assert!(!is_data_file("service=a/other.parquet"));
        // Another writer's file.
        assert!(!is_data_file(
            "service=a/part-00000-01a22e1a-dcc2-76bd-aed4-bfc6f6567ef6-c000.zstd.parquet"
        ));
    }

    #[test]
    fn a_read_takes_the_logged_size_and_refuses_a_wrong_one() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("part-1.parquet"), b"0123456789").unwrap();
        let files = TableFiles::Folder {
            root: dir.path().to_owned(),
            dir: dir.path().to_owned(),
        };
        assert_eq!(
            files.read("part-1.parquet", 10).unwrap().as_ref(),
            b"0123456789"
        );
        let short = files.read("part-1.parquet", 11).unwrap_err().to_string();
        assert!(short.contains("shorter than the 11 bytes"), "{short}");
        // A size no allocation can hold is an error, not an abort.
        let huge = files
            .read("part-1.parquet", u64::MAX)
            .unwrap_err()
            .to_string();
        assert!(huge.contains("cannot hold"), "{huge}");
    }
}
