//! One SVG figure of an [`AnalyzeReport`], four panels after the figures of
//! `004_62bf1a5ddd5ed253.txt`: savings vs average chunk size ("Average Chunk
//! Size"), chunk-size histograms of basic vs regression chunking ("Regression
//! Chunking Performance"), share of duplicate bytes by reference count
//! ("Chunk Reference Count") and global vs partitioned savings ("Efficient
//! partitioning strategies").
//!
//! Drawn with `plotters`' SVG backend, built without default features (those
//! need fontconfig/freetype); `.png` and `.pdf` are that SVG rendered with
//! the system's fonts (`crate::figure`), refused with a clear error when
//! there are none.

use std::path::Path;

use plotters::coord::ranged1d::{SegmentValue, SegmentedCoord};
use plotters::coord::types::RangedCoordu32;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use cairn_core::error::IoContext;
use cairn_core::{Error, Result};

use super::table::bytes;
use super::AnalyzeReport;

use crate::figure::{Area, Drawn, PlotFormat, T};

const BASIC: RGBColor = RGBColor(0x1f, 0x77, 0xb4);
const REGRESSION: RGBColor = RGBColor(0xd6, 0x27, 0x28);
const COMPRESSED: RGBColor = RGBColor(0xff, 0x7f, 0x0e);
const BARS: RGBColor = RGBColor(0x2c, 0xa0, 0x2c);

/// Writes the figure to `path`, which must end in `.svg`, `.png` or `.pdf`.
pub fn plot(r: &AnalyzeReport, path: &Path) -> Result<()> {
    let format = check_plot_path(path)?;
    let svg = crate::figure::svg(SIZE, |root| draw(r, root))?;
    let bytes = format.render(svg, SIZE, &path.display().to_string())?;
    std::fs::write(path, bytes).ctx(|| format!("write {}", path.display()))
}

const SIZE: (u32, u32) = crate::figure::size(4);

/// The figure format `path` names by its extension; an error for any other
/// name, so a run can refuse it before reading any data.
pub fn check_plot_path(path: &Path) -> Result<PlotFormat> {
    path.extension()
        .and_then(|e| e.to_str())
        .and_then(PlotFormat::from_ext)
        .ok_or_else(|| {
            Error::invalid(format!(
                "cannot write {}: the plot file name must end in .svg, .png or .pdf",
                path.display()
            ))
        })
}

fn draw(r: &AnalyzeReport, root: &Area) -> Drawn {
    let title = format!("Dedup study: {} files, {}", r.files, bytes(r.logical_bytes));
    let panels = crate::figure::panels(root, &title, 4)?;
    savings_panel(r, &panels[0])?;
    histogram_panel(r, &panels[1])?;
    refcount_panel(r, &panels[2])?;
    partition_panel(r, &panels[3])?;
    root.present()
}

/// Percent axis top: the largest value plus headroom, at least 1.
fn top(values: impl Iterator<Item = f64>) -> f64 {
    (values.fold(0.0, f64::max) * 1.3).max(1.0)
}

/// A segmented axis of `n` categories (a `u32` range includes its end).
fn categories(n: usize) -> SegmentedCoord<RangedCoordu32> {
    (0u32..(n as u32).saturating_sub(1)).into_segmented()
}

fn center_label(labels: &[String]) -> impl Fn(&SegmentValue<u32>) -> String + '_ {
    move |v| match v {
        SegmentValue::CenterOf(i) => labels.get(*i as usize).cloned().unwrap_or_default(),
        _ => String::new(),
    }
}

fn savings_panel(r: &AnalyzeReport, area: &Area) -> Drawn {
    let pts = &r.chunk_size_sweep;
    let labels: Vec<String> = pts.iter().map(|p| bytes(p.chunker.avg.into())).collect();
    let values = pts
        .iter()
        .flat_map(|p| [Some(p.savings), p.savings_with_compression])
        .flatten();
    let ymax = top(values.map(|v| v * 100.0));
    let mut chart = crate::figure::chart(area, "Savings vs average chunk size (FastCDC)")
        .build_cartesian_2d(categories(pts.len()), 0f64..ymax)?;
    let fmt = center_label(&labels);
    chart
        .configure_mesh()
        .disable_x_mesh()
        .disable_y_mesh()
        .y_labels(6)
        .x_desc("average chunk size")
        .y_desc("space saved (%)")
        .x_label_formatter(&fmt)
        .y_label_formatter(&|v| format!("{v:.0}"))
        .label_style(T.tick())
        .axis_desc_style(T.axis())
        .draw()?;
    let at = |i: usize| SegmentValue::CenterOf(i as u32);
    let dedup: Vec<_> = pts
        .iter()
        .enumerate()
        .map(|(i, p)| (at(i), p.savings * 100.0))
        .collect();
    chart
        .draw_series(LineSeries::new(dedup.clone(), BASIC.stroke_width(2)))?
        .label("dedup")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BASIC.stroke_width(2)));
    chart.draw_series(dedup.into_iter().map(|p| Circle::new(p, 4, BASIC.filled())))?;
    if r.compression.is_some() {
        let both: Vec<_> = pts
            .iter()
            .enumerate()
            .map(|(i, p)| (at(i), p.savings_with_compression.unwrap_or(0.0) * 100.0))
            .collect();
        chart
            .draw_series(LineSeries::new(both.clone(), COMPRESSED.stroke_width(2)))?
            .label("dedup + compression")
            .legend(|(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], COMPRESSED.stroke_width(2))
            });
        chart.draw_series(
            both.into_iter()
                .map(|p| Circle::new(p, 4, COMPRESSED.filled())),
        )?;
    }
    crate::figure::legend(&mut chart, SeriesLabelPosition::UpperRight)
}

/// Chunk-size histogram of the chunks each chunker cut, and of the chunks
/// the end of a file cut (most chunks of a tree of small files): log
/// scale, so both show.
fn histogram_panel(r: &AnalyzeReport, area: &Area) -> Drawn {
    let c = &r.chunking;
    let kib = |b: u64| b as f64 / 1024.0;
    let xmax = kib(c.basic.histogram.last().map_or(1, |b| b.hi));
    let ymax = c
        .basic
        .histogram
        .iter()
        .chain(&c.regression.histogram)
        .flat_map(|b| [b.chunks, b.eof_chunks])
        .max()
        .unwrap_or(0)
        .max(1) as f64
        * 20.0;
    let caption = format!(
        "Chunk sizes (min {} / avg {} / max {})",
        bytes(c.sizes.min.into()),
        bytes(c.sizes.avg.into()),
        bytes(c.sizes.max.into())
    );
    let mut chart = crate::figure::chart(area, &caption)
        .build_cartesian_2d(0f64..xmax, (0.8f64..ymax).log_scale())?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .disable_y_mesh()
        .x_labels(8)
        .x_desc("chunk size (KiB)")
        .y_desc("chunks (log scale)")
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&|v| format!("{v:.0}"))
        .label_style(T.tick())
        .axis_desc_style(T.axis())
        .draw()?;
    // Counts of zero sit on the axis floor of the log scale.
    let steps = |count: &dyn Fn(&crate::analyze::SizeBucket) -> u64,
                 stats: &crate::analyze::ChunkingStats| {
        let mut steps = vec![(0.0, 0.8)];
        for b in &stats.histogram {
            let n = (count(b) as f64).max(0.8);
            steps.push((kib(b.lo - 1), n));
            steps.push((kib(b.hi), n));
        }
        steps.push((xmax, 0.8));
        steps
    };
    for (stats, color) in [(&c.basic, BASIC), (&c.regression, REGRESSION)] {
        let cut: u64 = stats.histogram.iter().map(|b| b.chunks).sum();
        let label = format!(
            "{}: {} cut, {:.1}% forced",
            stats.algorithm,
            cut,
            stats.forced_share * 100.0,
        );
        chart
            .draw_series(LineSeries::new(
                steps(&|b| b.chunks, stats),
                color.stroke_width(2),
            ))?
            .label(label)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
    }
    let eof: u64 = c.basic.histogram.iter().map(|b| b.eof_chunks).sum();
    let grey = RGBColor(0x77, 0x77, 0x77);
    chart
        .draw_series(DashedLineSeries::new(
            steps(&|b| b.eof_chunks, &c.basic),
            6,
            4,
            grey.stroke_width(2),
        ))?
        .label(format!("{eof} ended by end of file"))
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], grey.stroke_width(2)));
    crate::figure::legend(&mut chart, SeriesLabelPosition::UpperRight)
}

fn bar_panel(
    area: &Area,
    caption: &str,
    (xdesc, ydesc): (&str, &str),
    labels: &[String],
    values: &[f64],
) -> Drawn {
    let ymax = top(values.iter().copied());
    let mut chart = crate::figure::chart(area, caption)
        .build_cartesian_2d(categories(values.len()), 0f64..ymax)?;
    let fmt = center_label(labels);
    chart
        .configure_mesh()
        .disable_x_mesh()
        .disable_y_mesh()
        .y_labels(6)
        .x_desc(xdesc)
        .y_desc(ydesc)
        .x_label_formatter(&fmt)
        .y_label_formatter(&|v| format!("{v:.0}"))
        .label_style(T.tick())
        .axis_desc_style(T.axis())
        .draw()?;
    chart.draw_series(
        Histogram::vertical(&chart)
            .style(BARS.filled())
            .margin(10)
            .data(values.iter().enumerate().map(|(i, v)| (i as u32, *v))),
    )?;
    chart.draw_series(values.iter().enumerate().map(|(i, v)| {
        Text::new(
            format!("{v:.1}%"),
            (SegmentValue::CenterOf(i as u32), *v),
            T.tick()
                .into_font()
                .color(&BLACK)
                .pos(Pos::new(HPos::Center, VPos::Bottom)),
        )
    }))?;
    Ok(())
}

fn refcount_panel(r: &AnalyzeReport, area: &Area) -> Drawn {
    let rc = &r.reference_counts;
    let labels: Vec<String> = rc
        .groups
        .iter()
        .map(|g| match g.max_refs - g.min_refs {
            0 => g.min_refs.to_string(),
            _ => format!("{}-{}", g.min_refs, g.max_refs),
        })
        .collect();
    let values: Vec<f64> = rc
        .groups
        .iter()
        .map(|g| g.duplicate_share * 100.0)
        .collect();
    let caption = format!(
        "Duplicate bytes by references (FastCDC {} avg)",
        bytes(rc.chunker.avg.into())
    );
    bar_panel(
        area,
        &caption,
        ("references to the chunk", "share of duplicate bytes (%)"),
        &labels,
        &values,
    )
}

fn partition_panel(r: &AnalyzeReport, area: &Area) -> Drawn {
    let p = &r.partitioning;
    let all = [&p.global, &p.by_type, &p.by_path];
    let labels: Vec<String> = all
        .iter()
        .map(|s| format!("{} ({})", s.scheme, s.partitions))
        .collect();
    let values: Vec<f64> = all.iter().map(|s| s.savings * 100.0).collect();
    let caption = format!(
        "Global vs partitioned dedup (FastCDC {} avg)",
        bytes(p.chunker.avg.into())
    );
    bar_panel(
        area,
        &caption,
        ("dedup scope (partitions)", "space saved (%)"),
        &labels,
        &values,
    )
}
