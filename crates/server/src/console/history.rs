//! The console's memory: the last fifteen minutes of samples, in rings that never grow past
//! their capacity, whatever the number of tables.
//!
//! A [`Sample`] holds totals since start and gauges, never rates: rates are the difference of
//! two neighbours, taken when the page asks. Per table the console keeps a coarser trend, one
//! point per [`TABLE_SPAN`] samples, for at most [`MAX_TRACKED_TABLES`] tables.

use std::collections::{BTreeMap, VecDeque};

use sluice_pipeline::Waits;

use super::counts::DoorCounts;

/// Samples kept: fifteen minutes at one a second.
pub(crate) const SAMPLES: usize = 900;

/// Samples per point of a table's trend.
pub(crate) const TABLE_SPAN: u32 = 15;

/// Points of a table's trend: the same fifteen minutes.
pub(crate) const TABLE_POINTS: usize = SAMPLES / TABLE_SPAN as usize;

/// Tables whose trend is kept. A table past them shows its figures but no trend.
pub(crate) const MAX_TRACKED_TABLES: usize = 2_000;

/// Wait snapshots kept, a minute's worth: the minute's quantiles are the newest less the oldest.
const WAIT_SNAPSHOTS: usize = 61;

/// The figures of the whole server at one moment: totals since start, and gauges.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Sample {
    /// Its number: one more than the sample before.
    pub(crate) seq: u64,
    /// When, in milliseconds since the Unix epoch.
    pub(crate) at_ms: u64,
    pub(crate) doors: DoorCounts,
    pub(crate) refusals: u64,
    /// Flushes by reason, in `FlushCounts::by_reason`'s order.
    pub(crate) flushes: [u64; 5],
    pub(crate) rows_written: u64,
    pub(crate) parts_written: u64,
    pub(crate) bytes_written: u64,
    pub(crate) merges: u64,
    pub(crate) memory_used: u64,
    pub(crate) wal_bytes: u64,
    pub(crate) wal_fsyncs: u64,
    /// The median and 99th percentile wait of the rows that landed since the sample before.
    pub(crate) wait_p50: Option<f64>,
    pub(crate) wait_p99: Option<f64>,
    /// The most active parts in any one partition.
    pub(crate) parts_max: u64,
}

/// One table at one moment, as its trend keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TableReading {
    pub(crate) name: String,
    /// The most active parts in any of its partitions.
    pub(crate) parts_max: u64,
    /// Rows received since start.
    pub(crate) rows_received: u64,
    /// Inserts received since start.
    pub(crate) inserts: u64,
}

/// A point of a table's trend: the most parts seen over its span, and the rows received by its
/// end.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct TablePoint {
    pub(crate) parts_max: u64,
    pub(crate) rows_received: u64,
}

/// A table's trend, and its last few readings for its current rates.
#[derive(Debug, Clone, Default)]
pub(crate) struct TableTrack {
    pub(crate) points: VecDeque<TablePoint>,
    open: TablePoint,
    in_open: u32,
    /// (milliseconds, rows received, inserts) of the last few samples.
    recent: VecDeque<(u64, u64, u64)>,
}

/// Readings kept per table for its current rates: five seconds' worth of differences.
const RECENT: usize = 6;

impl TableTrack {
    fn push(&mut self, at_ms: u64, reading: &TableReading) {
        self.open.parts_max = self.open.parts_max.max(reading.parts_max);
        self.open.rows_received = reading.rows_received;
        self.in_open += 1;
        if self.in_open >= TABLE_SPAN {
            push_bounded(&mut self.points, self.open, TABLE_POINTS);
            self.open = TablePoint::default();
            self.in_open = 0;
        }
        push_bounded(
            &mut self.recent,
            (at_ms, reading.rows_received, reading.inserts),
            RECENT,
        );
    }

    /// Rows and inserts received per second over the last few samples.
    pub(crate) fn rates(&self) -> (f64, f64) {
        match (self.recent.front(), self.recent.back()) {
            (Some(first), Some(last)) if last.0 > first.0 => {
                let seconds = (last.0 - first.0) as f64 / 1000.0;
                (
                    last.1.saturating_sub(first.1) as f64 / seconds,
                    last.2.saturating_sub(first.2) as f64 / seconds,
                )
            }
            _ => (0.0, 0.0),
        }
    }

    /// The trend's points, the one still filling last.
    pub(crate) fn trend(&self) -> impl Iterator<Item = TablePoint> + '_ {
        let open = (self.in_open > 0).then_some(self.open);
        self.points.iter().copied().chain(open)
    }
}

fn push_bounded<T>(ring: &mut VecDeque<T>, item: T, capacity: usize) {
    while ring.len() >= capacity {
        ring.pop_front();
    }
    ring.push_back(item);
}

/// Every sample of the last fifteen minutes, and every tracked table's trend.
#[derive(Debug, Default)]
pub(crate) struct History {
    samples: VecDeque<Sample>,
    tables: BTreeMap<String, TableTrack>,
    waits: VecDeque<Waits>,
    next_seq: u64,
}

impl History {
    /// Keeps a sample of the server, with each table's reading and the waits counted so far
    /// (all tables together). Numbers the sample, and works out its wait quantiles.
    pub(crate) fn record(&mut self, mut sample: Sample, tables: &[TableReading], waits: Waits) {
        self.next_seq += 1;
        sample.seq = self.next_seq;
        if let Some(previous) = self.waits.back() {
            let landed = waits.since(previous);
            sample.wait_p50 = landed.quantile(0.5);
            sample.wait_p99 = landed.quantile(0.99);
        }
        push_bounded(&mut self.waits, waits, WAIT_SNAPSHOTS);
        for reading in tables {
            let tracked = self.tables.len() < MAX_TRACKED_TABLES;
            match self.tables.get_mut(&reading.name) {
                Some(track) => track.push(sample.at_ms, reading),
                None if tracked => {
                    let mut track = TableTrack::default();
                    track.push(sample.at_ms, reading);
                    self.tables.insert(reading.name.clone(), track);
                }
                None => {}
            }
        }
        push_bounded(&mut self.samples, sample, SAMPLES);
    }

    pub(crate) fn samples(&self) -> &VecDeque<Sample> {
        &self.samples
    }

    pub(crate) fn table(&self, name: &str) -> Option<&TableTrack> {
        self.tables.get(name)
    }

    /// The median and 99th percentile wait over the last minute.
    pub(crate) fn minute_waits(&self) -> (Option<f64>, Option<f64>) {
        match (self.waits.front(), self.waits.back()) {
            (Some(first), Some(last)) => {
                let landed = last.since(first);
                (landed.quantile(0.5), landed.quantile(0.99))
            }
            _ => (None, None),
        }
    }

    /// Everything kept, counted: samples, wait snapshots, and each table's points and readings.
    /// What the bound on memory is checked against.
    #[cfg(test)]
    fn entries(&self) -> usize {
        let tables: usize = (self.tables.values())
            .map(|t| t.points.len() + t.recent.len() + 1)
            .sum();
        self.samples.len() + self.waits.len() + tables
    }
}

/// The most [`History::entries`] can ever be.
#[cfg(test)]
const MAX_ENTRIES: usize =
    SAMPLES + WAIT_SNAPSHOTS + MAX_TRACKED_TABLES * (TABLE_POINTS + RECENT + 1);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_history_stays_bounded_after_many_samples_of_many_tables() {
        let mut history = History::default();
        let tables = MAX_TRACKED_TABLES + 500;
        let mut readings: Vec<TableReading> = (0..tables)
            .map(|i| TableReading {
                name: format!("table_{i:05}"),
                parts_max: 0,
                rows_received: 0,
                inserts: 0,
            })
            .collect();
        let samples = SAMPLES + 3 * TABLE_POINTS * TABLE_SPAN as usize;
        for s in 0..samples as u64 {
            for (i, reading) in readings.iter_mut().enumerate() {
                reading.parts_max = (s + i as u64) % 50;
                reading.rows_received += 10;
                reading.inserts += 1;
            }
            let sample = Sample {
                at_ms: s * 1000,
                ..Sample::default()
            };
            history.record(sample, &readings, Waits::default());
        }
        assert_eq!(history.samples().len(), SAMPLES);
        assert_eq!(history.samples().back().unwrap().seq, samples as u64);
        assert_eq!(history.tables.len(), MAX_TRACKED_TABLES);
        assert!(history.table(&format!("table_{:05}", tables - 1)).is_none());
        let track = history.table("table_00000").unwrap();
        assert_eq!(track.points.len(), TABLE_POINTS);
        assert_eq!(track.trend().count(), TABLE_POINTS);
        assert_eq!(track.rates(), (10.0, 1.0));
        assert!(history.entries() <= MAX_ENTRIES, "{}", history.entries());
        assert_eq!(history.entries(), MAX_ENTRIES);
    }

    #[test]
    fn each_sample_gets_the_wait_quantiles_of_the_rows_landed_since_the_last() {
        let mut history = History::default();
        let mut waits = Waits::default();
        history.record(Sample::default(), &[], waits.clone());
        assert_eq!(history.samples()[0].wait_p50, None);
        waits.add(&Waits::of(&[1.0]));
        history.record(Sample::default(), &[], waits.clone());
        let p50 = history.samples()[1].wait_p50.unwrap();
        assert!((p50 - 1.0).abs() < 0.2, "{p50}");
        history.record(Sample::default(), &[], waits);
        assert_eq!(history.samples()[2].wait_p50, None, "nothing landed since");
        assert!(history.minute_waits().0.is_some());
    }
}
