//! When a batch is full: the flush policy, as written in config and as validated.
//!
//! A batch flushes when it reaches ANY of its limits: rows, bytes, age or inserts. Size sets
//! throughput under load; age sets the worst wait when traffic is light (seed 001: a size-only
//! batch of 1,000 at 20 rows/s keeps its first row waiting 50 s).
//!
//! With `min_age` set the age limit adapts to the table's row rate: a table that receives few
//! rows flushes its batches at `min_age`, so a producer waiting for `committed` is answered soon;
//! a busy one waits up to `max_age`, where parts are worth keeping large. See
//! [`FlushPolicy::age_limit`].

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::ConfigError;

/// Rows per batch: ClickHouse advises 10,000 to 100,000+ rows per insert; a million keeps parts
/// large under heavy load while the age limit keeps light load fresh.
pub const DEFAULT_MAX_ROWS: u64 = 1_000_000;

/// Bytes per batch (Arrow memory of the buffered rows): large enough for well-compressed parts of
/// tens of MiB, small enough that several tables fit in the default buffer.
pub const DEFAULT_MAX_BYTES: u64 = 64 * MIB;

/// Age of the oldest row in a batch: about one part per second per partition, as ClickHouse's
/// insert guide recommends, and at most a second of staleness.
pub const DEFAULT_MAX_AGE: Duration = Duration::from_secs(1);

/// Inserts per batch: bounds the per-insert bookkeeping (one waiter per insert) held by a batch,
/// while still allowing about one flush per second at 100,000 single-row inserts per second.
pub const DEFAULT_MAX_INSERTS: u64 = 100_000;

/// The largest `max_bytes` accepted: a flush concatenates a batch into one Arrow batch whose
/// string offsets are 32-bit, so a batch must stay well under 2 GiB.
pub const MAX_BATCH_BYTES: u64 = GIB;

/// The table row rate up to which batches flush at `min_age` when it is set. Such a table makes
/// at most one part per `min_age` per partition however it is spread, and a producer waiting for
/// `committed` is answered within about `min_age`.
pub const LIGHT_ROWS_PER_SECOND: f64 = 100.0;

/// The table row rate at and above which batches wait the whole `max_age` when `min_age` is set:
/// a table busy enough to fill parts keeps about one part per `max_age` per partition. Between
/// the light and the dense rate the age limit grows in proportion. The rate is the table's, not
/// each partition's, so a busy table spread over many partitions is still busy.
pub const DENSE_ROWS_PER_SECOND: f64 = 1000.0;

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;
const GIB: u64 = 1024 * MIB;

/// Why a batch was flushed. Also the label of the flush metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FlushReason {
    /// It reached `max_rows`.
    Rows,
    /// It reached `max_bytes`.
    Bytes,
    /// Its oldest row reached the age limit: `max_age`, or less with `min_age` on a light load.
    Age,
    /// It reached `max_inserts`.
    Inserts,
    /// sluice is shutting down and flushes everything.
    Shutdown,
}

impl FlushReason {
    /// The lower-case label used in metrics and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Rows => "rows",
            Self::Bytes => "bytes",
            Self::Age => "age",
            Self::Inserts => "inserts",
            Self::Shutdown => "shutdown",
        }
    }
}

impl fmt::Display for FlushReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A validated flush policy: every limit is positive and they agree with each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlushPolicy {
    max_rows: u64,
    max_bytes: u64,
    max_age: Duration,
    min_age: Option<Duration>,
    max_inserts: u64,
}

impl Default for FlushPolicy {
    fn default() -> Self {
        Self {
            max_rows: DEFAULT_MAX_ROWS,
            max_bytes: DEFAULT_MAX_BYTES,
            max_age: DEFAULT_MAX_AGE,
            min_age: None,
            max_inserts: DEFAULT_MAX_INSERTS,
        }
    }
}

impl FlushPolicy {
    /// Rows that fill a batch.
    pub fn max_rows(&self) -> u64 {
        self.max_rows
    }

    /// Bytes of Arrow memory that fill a batch.
    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    /// Age of the oldest row at which a batch flushes.
    pub fn max_age(&self) -> Duration {
        self.max_age
    }

    /// The shortest age limit of an adaptive policy; `None` when the age limit is `max_age`.
    pub fn min_age(&self) -> Option<Duration> {
        self.min_age
    }

    /// The age at which a batch flushes while its table receives `rows_per_second`.
    ///
    /// Without `min_age` it is `max_age`. With it, it is `min_age` up to
    /// [`LIGHT_ROWS_PER_SECOND`], grows in proportion to the rate above that and is `max_age` at
    /// [`DENSE_ROWS_PER_SECOND`] and above.
    pub fn age_limit(&self, rows_per_second: f64) -> Duration {
        let Some(min_age) = self.min_age else {
            return self.max_age;
        };
        let density = ((rows_per_second - LIGHT_ROWS_PER_SECOND)
            / (DENSE_ROWS_PER_SECOND - LIGHT_ROWS_PER_SECOND))
            .clamp(0.0, 1.0);
        if density.is_nan() {
            return min_age;
        }
        min_age + (self.max_age - min_age).mul_f64(density)
    }

    /// Inserts that fill a batch.
    pub fn max_inserts(&self) -> u64 {
        self.max_inserts
    }

    /// The limit a batch of this size has reached, if any, checked in a fixed order.
    pub fn full(&self, rows: u64, bytes: u64, inserts: u64) -> Option<FlushReason> {
        if rows >= self.max_rows {
            Some(FlushReason::Rows)
        } else if bytes >= self.max_bytes {
            Some(FlushReason::Bytes)
        } else if inserts >= self.max_inserts {
            Some(FlushReason::Inserts)
        } else {
            None
        }
    }
}

/// A flush policy as written in a config file: every field optional, unvalidated.
///
/// ```toml
/// [flush]
/// max_rows = 1000000
/// max_bytes = "64MiB"
/// max_age = "1s"
/// min_age = "100ms"    # optional: adapt the age to the load
/// max_inserts = 100000
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlushPolicyConfig {
    /// Rows that fill a batch.
    pub max_rows: Option<i64>,
    /// Bytes of Arrow memory that fill a batch (`"64MiB"` or a number of bytes).
    pub max_bytes: Option<ByteSize>,
    /// Age of the oldest row at which a batch flushes (`"1s"`, `"200ms"`).
    #[serde(default, with = "duration_text")]
    pub max_age: Option<Duration>,
    /// The age limit of a table receiving nothing; the limit grows with the table's row rate up
    /// to `max_age`. Unset: every batch flushes at `max_age`.
    #[serde(default, with = "duration_text")]
    pub min_age: Option<Duration>,
    /// Inserts that fill a batch.
    pub max_inserts: Option<i64>,
}

impl FlushPolicyConfig {
    /// `self` with its unset fields taken from `base`.
    pub fn or(&self, base: &FlushPolicyConfig) -> FlushPolicyConfig {
        FlushPolicyConfig {
            max_rows: self.max_rows.or(base.max_rows),
            max_bytes: self.max_bytes.or(base.max_bytes),
            max_age: self.max_age.or(base.max_age),
            min_age: self.min_age.or(base.min_age),
            max_inserts: self.max_inserts.or(base.max_inserts),
        }
    }

    /// Fills unset fields with the defaults and checks every value. Errors name the field.
    pub fn validate(&self) -> Result<FlushPolicy, ConfigError> {
        let max_rows = positive("max_rows", self.max_rows, DEFAULT_MAX_ROWS)?;
        let max_inserts = positive("max_inserts", self.max_inserts, DEFAULT_MAX_INSERTS)?;
        let max_bytes = match self.max_bytes {
            None => DEFAULT_MAX_BYTES,
            Some(ByteSize(0)) => {
                return Err(ConfigError::new("max_bytes", "must be greater than zero"));
            }
            Some(ByteSize(bytes)) if bytes > MAX_BATCH_BYTES => {
                return Err(ConfigError::new(
                    "max_bytes",
                    format!(
                        "{} is more than the largest batch sluice can build ({})",
                        ByteSize(bytes),
                        ByteSize(MAX_BATCH_BYTES)
                    ),
                ));
            }
            Some(ByteSize(bytes)) => bytes,
        };
        let max_age = self.max_age.unwrap_or(DEFAULT_MAX_AGE);
        if max_age.is_zero() {
            return Err(ConfigError::new("max_age", "must be greater than zero"));
        }
        let min_age = self.validated_min_age(max_age)?;
        let default_inserts = self.max_inserts.is_none();
        if max_inserts > max_rows {
            if default_inserts {
                // The default insert limit follows a lowered row limit instead of contradicting it.
                return Ok(FlushPolicy {
                    max_rows,
                    max_bytes,
                    max_age,
                    min_age,
                    max_inserts: max_rows,
                });
            }
            return Err(ConfigError::new(
                "max_inserts",
                format!(
                    "{max_inserts} can never be reached: every insert carries at least one row, \
                     so max_rows ({max_rows}) is always reached first"
                ),
            ));
        }
        Ok(FlushPolicy {
            max_rows,
            max_bytes,
            max_age,
            min_age,
            max_inserts,
        })
    }

    fn validated_min_age(&self, max_age: Duration) -> Result<Option<Duration>, ConfigError> {
        match self.min_age {
            Some(min_age) if min_age.is_zero() => {
                Err(ConfigError::new("min_age", "must be greater than zero"))
            }
            Some(min_age) if min_age > max_age => Err(ConfigError::new(
                "min_age",
                format!(
                    "{min_age:?} is more than max_age ({max_age:?}): the age limit grows from \
                     min_age on a light load to max_age on a busy one"
                ),
            )),
            other => Ok(other),
        }
    }
}

fn positive(field: &str, value: Option<i64>, default: u64) -> Result<u64, ConfigError> {
    match value {
        None => Ok(default),
        Some(v) if v <= 0 => Err(ConfigError::new(
            field,
            format!("must be greater than zero, got {v}"),
        )),
        Some(v) => Ok(v.unsigned_abs()),
    }
}

/// A number of bytes, written in config as an integer or as text with a unit
/// (`"64MiB"`, `"512 KiB"`, `"1GB"`; `K`/`M`/`G` are powers of 1000, `Ki`/`Mi`/`Gi` of 1024).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "ByteSizeText", into = "u64")]
pub struct ByteSize(pub u64);

#[derive(Deserialize)]
#[serde(untagged)]
enum ByteSizeText {
    Number(i64),
    Text(String),
}

impl TryFrom<ByteSizeText> for ByteSize {
    type Error = String;

    fn try_from(value: ByteSizeText) -> Result<Self, Self::Error> {
        match value {
            ByteSizeText::Number(n) => u64::try_from(n)
                .map(ByteSize)
                .map_err(|_| format!("a size cannot be negative, got {n}")),
            ByteSizeText::Text(text) => text.parse(),
        }
    }
}

impl From<ByteSize> for u64 {
    fn from(size: ByteSize) -> u64 {
        size.0
    }
}

impl FromStr for ByteSize {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let text = text.trim();
        let split = text
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(text.len());
        let (number, unit) = text.split_at(split);
        let number: f64 = number
            .parse()
            .map_err(|_| format!("'{text}' is not a size: write it like \"64MiB\" or 1048576"))?;
        let scale: u64 = match unit.trim() {
            "" | "B" => 1,
            "K" | "KB" | "k" | "kB" => 1000,
            "Ki" | "KiB" => KIB,
            "M" | "MB" => 1000 * 1000,
            "Mi" | "MiB" => MIB,
            "G" | "GB" => 1000 * 1000 * 1000,
            "Gi" | "GiB" => GIB,
            other => return Err(format!("unknown size unit '{other}' in '{text}'")),
        };
        let bytes = number * scale as f64;
        if !bytes.is_finite() || bytes > u64::MAX as f64 {
            return Err(format!("'{text}' is too large"));
        }
        Ok(ByteSize(bytes.round() as u64))
    }
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        if b >= GIB && b.is_multiple_of(GIB) {
            write!(f, "{}GiB", b / GIB)
        } else if b >= MIB && b.is_multiple_of(MIB) {
            write!(f, "{}MiB", b / MIB)
        } else if b >= KIB && b.is_multiple_of(KIB) {
            write!(f, "{}KiB", b / KIB)
        } else {
            write!(f, "{b}B")
        }
    }
}

/// Serde for optional durations written as text (`"1s"`, `"250ms"`), through humantime.
pub mod duration_text {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes a duration as humantime text.
    pub fn serialize<S: Serializer>(value: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match value {
            Some(d) => s.serialize_str(&humantime::format_duration(*d).to_string()),
            None => s.serialize_none(),
        }
    }

    /// Reads a duration from humantime text.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        let text: Option<String> = Option::deserialize(d)?;
        text.map(|t| {
            humantime::parse_duration(&t).map_err(|e| {
                serde::de::Error::custom(format!(
                    "'{t}' is not a duration ({e}): write it like \"1s\" or \"200ms\""
                ))
            })
        })
        .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        assert_eq!(
            FlushPolicyConfig::default().validate().unwrap(),
            FlushPolicy::default()
        );
    }

    #[test]
    fn zero_and_negative_values_name_the_field() {
        let cases = [
            (
                FlushPolicyConfig {
                    max_rows: Some(0),
                    ..Default::default()
                },
                "max_rows",
            ),
            (
                FlushPolicyConfig {
                    max_rows: Some(-3),
                    ..Default::default()
                },
                "max_rows",
            ),
            (
                FlushPolicyConfig {
                    max_inserts: Some(0),
                    ..Default::default()
                },
                "max_inserts",
            ),
            (
                FlushPolicyConfig {
                    max_bytes: Some(ByteSize(0)),
                    ..Default::default()
                },
                "max_bytes",
            ),
            (
                FlushPolicyConfig {
                    max_age: Some(Duration::ZERO),
                    ..Default::default()
                },
                "max_age",
            ),
            (
                FlushPolicyConfig {
                    max_bytes: Some(ByteSize(2 * GIB)),
                    ..Default::default()
                },
                "max_bytes",
            ),
        ];
        for (config, field) in cases {
            assert_eq!(config.validate().unwrap_err().field, field, "{config:?}");
        }
    }

    #[test]
    fn insert_limit_above_row_limit_contradicts() {
        let config = FlushPolicyConfig {
            max_rows: Some(100),
            max_inserts: Some(1000),
            ..Default::default()
        };
        let err = config.validate().unwrap_err();
        assert_eq!(err.field, "max_inserts");
        assert!(err.reason.contains("never be reached"), "{err}");
        let lowered = FlushPolicyConfig {
            max_rows: Some(100),
            ..Default::default()
        };
        assert_eq!(lowered.validate().unwrap().max_inserts(), 100);
    }

    #[test]
    fn min_age_must_be_positive_and_at_most_max_age() {
        let zero = FlushPolicyConfig {
            min_age: Some(Duration::ZERO),
            ..Default::default()
        };
        assert_eq!(zero.validate().unwrap_err().field, "min_age");
        let above = FlushPolicyConfig {
            min_age: Some(Duration::from_secs(2)),
            ..Default::default()
        };
        let err = above.validate().unwrap_err();
        assert_eq!(err.field, "min_age");
        assert!(err.to_string().contains("more than max_age"), "{err}");
    }

    #[test]
    fn the_age_limit_follows_the_row_rate_between_min_and_max_age() {
        let fixed = FlushPolicy::default();
        assert_eq!(fixed.age_limit(0.0), DEFAULT_MAX_AGE);
        let adaptive = FlushPolicyConfig {
            max_age: Some(Duration::from_millis(1100)),
            min_age: Some(Duration::from_millis(100)),
            ..Default::default()
        }
        .validate()
        .unwrap();
        let ms = |rate: f64| adaptive.age_limit(rate).as_millis();
        assert_eq!(ms(0.0), 100);
        assert_eq!(ms(LIGHT_ROWS_PER_SECOND), 100);
        let halfway = (LIGHT_ROWS_PER_SECOND + DENSE_ROWS_PER_SECOND) / 2.0;
        assert_eq!(ms(halfway), 600);
        assert_eq!(ms(DENSE_ROWS_PER_SECOND), 1100);
        assert_eq!(ms(DENSE_ROWS_PER_SECOND * 50.0), 1100);
        assert_eq!(ms(f64::NAN), 100);
    }

    #[test]
    fn full_reports_the_first_limit_reached() {
        let policy = FlushPolicyConfig {
            max_rows: Some(10),
            max_bytes: Some(ByteSize(100)),
            max_inserts: Some(5),
            ..Default::default()
        }
        .validate()
        .unwrap();
        assert_eq!(policy.full(9, 99, 4), None);
        assert_eq!(policy.full(10, 0, 0), Some(FlushReason::Rows));
        assert_eq!(policy.full(1, 100, 1), Some(FlushReason::Bytes));
        assert_eq!(policy.full(5, 1, 5), Some(FlushReason::Inserts));
    }

    #[test]
    fn byte_sizes_parse() {
        assert_eq!("64MiB".parse::<ByteSize>().unwrap(), ByteSize(64 * MIB));
        assert_eq!("1.5 KiB".parse::<ByteSize>().unwrap(), ByteSize(1536));
        assert_eq!("2GB".parse::<ByteSize>().unwrap(), ByteSize(2_000_000_000));
        assert_eq!("123".parse::<ByteSize>().unwrap(), ByteSize(123));
        assert!("-5MiB".parse::<ByteSize>().is_err());
        assert!("5 parsecs".parse::<ByteSize>().is_err());
        assert_eq!(ByteSize(64 * MIB).to_string(), "64MiB");
    }
}
