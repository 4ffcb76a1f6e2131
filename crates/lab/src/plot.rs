//! SVG plots of the lab's results, with labelled axes: rows/s against batch size for the knee;
//! bytes, scan and query time against rows per file for the layouts; parts over time for the
//! merge simulation.

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;
use sluice_core::merge_sim::MergeSimReport;

use crate::knee::KneeReport;
use crate::layouts::LayoutsReport;

const SIZE: (u32, u32) = (900, 560);
const COLORS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

/// Axis numbers as people write them: 1,000,000 rather than 1000000.0.
fn number(v: &f64) -> String {
    let v = *v;
    if v.abs() >= 1.0 || v == 0.0 {
        let digits = format!("{:.0}", v.abs());
        let mut out = String::new();
        for (i, c) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i) % 3 == 0 {
                out.push(',');
            }
            out.push(c);
        }
        if v < 0.0 { format!("-{out}") } else { out }
    } else {
        format!("{v}")
    }
}

fn fail(e: impl std::fmt::Display) -> String {
    format!("cannot draw the plot: {e}")
}

/// The bounds of a log axis around `values`.
fn log_range(values: impl Iterator<Item = f64>) -> std::ops::Range<f64> {
    let (lo, hi) = values
        .filter(|v| *v > 0.0 && v.is_finite())
        .fold((f64::INFINITY, 0.0f64), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
    if lo > hi {
        return 1.0..10.0;
    }
    let lo = 10f64.powf(lo.log10().floor());
    let hi = 10f64.powf(hi.log10().ceil()).max(lo * 10.0);
    lo..hi
}

/// Rows per second against rows per commit, on log axes; sluice's single-row producers as a
/// dashed line.
pub fn knee(report: &KneeReport, path: &Path) -> Result<(), String> {
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(fail)?;
    let mut stores = vec![("SQLite", &report.sqlite, &report.sluice)];
    if let Some(pg) = &report.postgres {
        stores.push(("PostgreSQL", &pg.sweep, &pg.sluice));
    }
    let xs = log_range(
        stores
            .iter()
            .flat_map(|(_, sweep, _)| sweep.iter().map(|r| r.batch as f64)),
    );
    let ys = log_range(stores.iter().flat_map(|(_, sweep, sluice)| {
        sweep
            .iter()
            .map(|r| r.rows_per_s)
            .chain([sluice.rows_per_s])
    }));
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "Insert throughput by batch size (one commit per batch)",
            ("sans-serif", 22),
        )
        .margin(20)
        .x_label_area_size(50)
        .y_label_area_size(80)
        .build_cartesian_2d(xs.clone().log_scale(), ys.log_scale())
        .map_err(fail)?;
    chart
        .configure_mesh()
        .x_desc("rows per commit (log)")
        .y_desc("rows per second (log)")
        .x_label_formatter(&number)
        .y_label_formatter(&number)
        .draw()
        .map_err(fail)?;
    for (i, (store, sweep, sluice)) in stores.iter().enumerate() {
        let color = COLORS[(2 * i) % COLORS.len()];
        let points: Vec<(f64, f64)> = sweep
            .iter()
            .map(|r| (r.batch as f64, r.rows_per_s))
            .collect();
        chart
            .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
            .map_err(fail)?
            .label(format!("{store}, one commit per batch"))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
        chart
            .draw_series(points.iter().map(|p| Circle::new(*p, 4, color.filled())))
            .map_err(fail)?;
        let color = COLORS[(2 * i + 1) % COLORS.len()];
        let y = sluice.rows_per_s;
        chart
            .draw_series(DashedLineSeries::new(
                vec![(xs.start, y), (xs.end, y)],
                6,
                4,
                color.stroke_width(2),
            ))
            .map_err(fail)?
            .label(format!(
                "sluice into {store}, {} single-row producers",
                sluice.producers
            ))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()
        .map_err(fail)?;
    root.present().map_err(fail)
}

/// Two panels against rows per file: megabytes on disk, and milliseconds to scan, query, write.
pub fn layouts(report: &LayoutsReport, path: &Path) -> Result<(), String> {
    let root = SVGBackend::new(path, (SIZE.0 * 2, SIZE.1)).into_drawing_area();
    root.fill(&WHITE).map_err(fail)?;
    let (left, right) = root.split_horizontally(SIZE.0);
    let xs = log_range(report.layouts.iter().map(|l| l.rows_per_file as f64));
    let mb: Vec<(f64, f64)> = report
        .layouts
        .iter()
        .map(|l| (l.rows_per_file as f64, l.bytes as f64 / 1e6))
        .collect();
    let footer: Vec<(f64, f64)> = report
        .layouts
        .iter()
        .map(|l| (l.rows_per_file as f64, l.footer_bytes as f64 / 1e6))
        .collect();
    let top = mb.iter().map(|p| p.1).fold(0.0, f64::max) * 1.1;
    series_panel(
        &left,
        "Bytes on disk by rows per file",
        "megabytes",
        xs.clone(),
        (0.0..top.max(1.0), false),
        &[("on disk", mb), ("footers", footer)],
    )?;
    let ms = |f: &dyn Fn(&crate::layouts::LayoutResult) -> f64| -> Vec<(f64, f64)> {
        report
            .layouts
            .iter()
            .map(|l| (l.rows_per_file as f64, f(l) * 1000.0))
            .collect()
    };
    let series = [
        (
            format!("full scan, {} threads", report.threads),
            ms(&|l| l.scan_threads_s),
        ),
        ("full scan, 1 thread".to_owned(), ms(&|l| l.scan_1_thread_s)),
        ("selective query".to_owned(), ms(&|l| l.query_s)),
        ("write".to_owned(), ms(&|l| l.write_s)),
        ("read metadata".to_owned(), ms(&|l| l.meta_open_s)),
    ];
    let ys = log_range(series.iter().flat_map(|(_, s)| s.iter().map(|p| p.1)));
    let named: Vec<(&str, Vec<(f64, f64)>)> = series
        .iter()
        .map(|(n, s)| (n.as_str(), s.clone()))
        .collect();
    series_panel(
        &right,
        "Time by rows per file (best of runs)",
        "milliseconds (log)",
        xs,
        (ys, true),
        &named,
    )?;
    root.present().map_err(fail)
}

fn series_panel(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    caption: &str,
    y_desc: &str,
    xs: std::ops::Range<f64>,
    (ys, log_y): (std::ops::Range<f64>, bool),
    series: &[(&str, Vec<(f64, f64)>)],
) -> Result<(), String> {
    let mut builder = ChartBuilder::on(area);
    builder
        .caption(caption, ("sans-serif", 22))
        .margin(20)
        .x_label_area_size(50)
        .y_label_area_size(80);
    macro_rules! draw {
        ($chart:expr) => {{
            let mut chart = $chart;
            chart
                .configure_mesh()
                .x_desc("rows per file (log)")
                .y_desc(y_desc)
                .x_label_formatter(&number)
                .y_label_formatter(&number)
                .draw()
                .map_err(fail)?;
            for (i, (name, points)) in series.iter().enumerate() {
                let color = COLORS[i % COLORS.len()];
                chart
                    .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
                    .map_err(fail)?
                    .label(*name)
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
                chart
                    .draw_series(points.iter().map(|p| Circle::new(*p, 4, color.filled())))
                    .map_err(fail)?;
            }
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperRight)
                .background_style(WHITE.mix(0.9))
                .border_style(BLACK)
                .draw()
                .map_err(fail)?;
        }};
    }
    if log_y {
        draw!(
            builder
                .build_cartesian_2d(xs.log_scale(), ys.log_scale())
                .map_err(fail)?
        );
    } else {
        draw!(
            builder
                .build_cartesian_2d(xs.log_scale(), ys)
                .map_err(fail)?
        );
    }
    Ok(())
}

/// Active parts over time for each simulated scenario, on a log axis, with MergeTree's two
/// thresholds drawn in.
pub fn merge_sim(runs: &[(String, MergeSimReport)], path: &Path) -> Result<(), String> {
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(fail)?;
    let seconds = runs
        .iter()
        .map(|(_, r)| r.parts_over_time.len())
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let ys = log_range(
        runs.iter()
            .flat_map(|(_, r)| r.parts_over_time.iter().map(|p| *p as f64))
            .chain([3_000.0]),
    );
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "Active parts during ingest (merge simulation)",
            ("sans-serif", 22),
        )
        .margin(20)
        .x_label_area_size(50)
        .y_label_area_size(80)
        .build_cartesian_2d(0.0..seconds, ys.log_scale())
        .map_err(fail)?;
    chart
        .configure_mesh()
        .x_desc("seconds of ingest")
        .y_desc("active parts (log)")
        .x_label_formatter(&number)
        .y_label_formatter(&number)
        .draw()
        .map_err(fail)?;
    for (i, (name, report)) in runs.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let points: Vec<(f64, f64)> = report
            .parts_over_time
            .iter()
            .enumerate()
            .map(|(t, p)| ((t + 1) as f64, (*p).max(1) as f64))
            .collect();
        chart
            .draw_series(LineSeries::new(points, color.stroke_width(2)))
            .map_err(fail)?
            .label(name.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
    }
    for (threshold, label) in [
        (1_000.0, "1,000 parts: inserts delayed"),
        (3_000.0, "3,000 parts: inserts refused"),
    ] {
        chart
            .draw_series(DashedLineSeries::new(
                vec![(0.0, threshold), (seconds, threshold)],
                6,
                4,
                BLACK.stroke_width(1),
            ))
            .map_err(fail)?
            .label(label)
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::MiddleRight)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()
        .map_err(fail)?;
    root.present().map_err(fail)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::merge_sim::{MergeSimConfig, simulate};

    #[test]
    fn merge_sim_plot_is_an_svg_with_labels() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("parts.svg");
        let report = simulate(&MergeSimConfig {
            rate: 200_000.0,
            ..MergeSimConfig::default()
        });
        merge_sim(&[("10x load".into(), report)], &path).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..50]);
        for text in [
            "seconds of ingest",
            "active parts (log)",
            "10x load",
            "3,000 parts",
        ] {
            assert!(svg.contains(text), "missing {text}");
        }
    }

    #[test]
    fn numbers_read_like_numbers() {
        assert_eq!(number(&1_000_000.0), "1,000,000");
        assert_eq!(number(&999.0), "999");
        assert_eq!(number(&0.25), "0.25");
    }

    #[test]
    fn log_ranges_cover_the_values() {
        assert_eq!(log_range([3.0, 450.0].into_iter()), 1.0..1000.0);
        assert_eq!(log_range(std::iter::empty()), 1.0..10.0);
    }
}
