//! Throttling by active parts, as ClickHouse's MergeTree does it: when a partition holds more
//! parts than `parts_to_delay_insert`, inserts into it are delayed, more the more parts there
//! are, up to `max_delay`; above `parts_to_throw_insert` they are refused ("too many parts")
//! until compaction catches up. Producers slow down before the store degrades, instead of after.

use std::time::Duration;

use serde::Deserialize;

use crate::error::ConfigError;
use crate::policy::duration_text;

/// ClickHouse's default for `parts_to_delay_insert`.
pub const DEFAULT_PARTS_TO_DELAY_INSERT: u64 = 1_000;

/// ClickHouse's default for `parts_to_throw_insert`.
pub const DEFAULT_PARTS_TO_THROW_INSERT: u64 = 3_000;

/// ClickHouse's default for `max_delay_to_insert`.
pub const DEFAULT_MAX_DELAY: Duration = Duration::from_secs(1);

/// The throttle as written in a config file; unset fields come from the level above.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ThrottleConfig {
    /// Active parts in a partition above which inserts into it are delayed.
    pub parts_to_delay_insert: Option<u64>,
    /// Active parts in a partition above which inserts into it are refused.
    pub parts_to_throw_insert: Option<u64>,
    /// The longest delay, reached just below `parts_to_throw_insert`.
    #[serde(default, with = "duration_text")]
    pub max_delay: Option<Duration>,
}

impl ThrottleConfig {
    /// Fills unset fields from `base`.
    pub fn or(self, base: &ThrottleConfig) -> ThrottleConfig {
        ThrottleConfig {
            parts_to_delay_insert: self.parts_to_delay_insert.or(base.parts_to_delay_insert),
            parts_to_throw_insert: self.parts_to_throw_insert.or(base.parts_to_throw_insert),
            max_delay: self.max_delay.or(base.max_delay),
        }
    }

    /// Applies the defaults and checks the thresholds are in order.
    pub fn validate(self) -> Result<PartsThrottle, ConfigError> {
        let delay_at = self
            .parts_to_delay_insert
            .unwrap_or(DEFAULT_PARTS_TO_DELAY_INSERT);
        let throw_at = self
            .parts_to_throw_insert
            .unwrap_or(DEFAULT_PARTS_TO_THROW_INSERT);
        if delay_at == 0 {
            return Err(ConfigError::new(
                "parts_to_delay_insert",
                "must be greater than zero",
            ));
        }
        if throw_at <= delay_at {
            return Err(ConfigError::new(
                "parts_to_throw_insert",
                format!("must be greater than parts_to_delay_insert ({delay_at})"),
            ));
        }
        Ok(PartsThrottle {
            parts_to_delay_insert: delay_at,
            parts_to_throw_insert: throw_at,
            max_delay: self.max_delay.unwrap_or(DEFAULT_MAX_DELAY),
        })
    }
}

/// A validated throttle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartsThrottle {
    /// Active parts above which inserts are delayed.
    pub parts_to_delay_insert: u64,
    /// Active parts above which inserts are refused.
    pub parts_to_throw_insert: u64,
    /// The longest delay.
    pub max_delay: Duration,
}

impl Default for PartsThrottle {
    fn default() -> Self {
        Self {
            parts_to_delay_insert: DEFAULT_PARTS_TO_DELAY_INSERT,
            parts_to_throw_insert: DEFAULT_PARTS_TO_THROW_INSERT,
            max_delay: DEFAULT_MAX_DELAY,
        }
    }
}

/// What to do with an insert into a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Take it now.
    Go,
    /// Take it after this long.
    Delay(Duration),
    /// Refuse it: too many parts.
    Refuse,
}

impl PartsThrottle {
    /// The verdict for an insert into a partition holding `parts` active parts. The delay
    /// grows linearly from zero just above `parts_to_delay_insert` to `max_delay` at
    /// `parts_to_throw_insert`.
    pub fn verdict(&self, parts: u64) -> Verdict {
        if parts > self.parts_to_throw_insert {
            Verdict::Refuse
        } else if parts > self.parts_to_delay_insert {
            let over = (parts - self.parts_to_delay_insert) as f64;
            let span = (self.parts_to_throw_insert - self.parts_to_delay_insert) as f64;
            Verdict::Delay(self.max_delay.mul_f64((over / span).min(1.0)))
        } else {
            Verdict::Go
        }
    }

    /// Whether a partition holding `parts` is over the first threshold: compaction should
    /// merge it eagerly.
    pub fn is_pressed(&self, parts: u64) -> bool {
        parts > self.parts_to_delay_insert
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_on_a_ramp_then_refuses() {
        let throttle = ThrottleConfig {
            parts_to_delay_insert: Some(10),
            parts_to_throw_insert: Some(20),
            max_delay: Some(Duration::from_millis(500)),
        }
        .validate()
        .unwrap();
        assert_eq!(throttle.verdict(0), Verdict::Go);
        assert_eq!(throttle.verdict(10), Verdict::Go);
        assert_eq!(
            throttle.verdict(15),
            Verdict::Delay(Duration::from_millis(250))
        );
        assert_eq!(
            throttle.verdict(20),
            Verdict::Delay(Duration::from_millis(500))
        );
        assert_eq!(throttle.verdict(21), Verdict::Refuse);
        assert!(throttle.is_pressed(11) && !throttle.is_pressed(10));
    }

    #[test]
    fn thresholds_must_be_in_order() {
        let bad = ThrottleConfig {
            parts_to_delay_insert: Some(10),
            parts_to_throw_insert: Some(10),
            max_delay: None,
        };
        assert_eq!(
            bad.validate().unwrap_err().field,
            "parts_to_throw_insert".to_owned()
        );
        let merged = ThrottleConfig {
            parts_to_delay_insert: Some(5),
            ..ThrottleConfig::default()
        }
        .or(&ThrottleConfig {
            parts_to_delay_insert: Some(1),
            parts_to_throw_insert: Some(50),
            max_delay: None,
        });
        assert_eq!(merged.validate().unwrap().parts_to_delay_insert, 5);
        assert_eq!(merged.validate().unwrap().parts_to_throw_insert, 50);
        assert_eq!(
            ThrottleConfig::default().validate().unwrap(),
            PartsThrottle::default()
        );
    }
}
