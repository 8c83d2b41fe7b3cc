//! Figures of `cairn experiment gc` (`003_ea5fccc485a97c5d.txt` Fig. 6(a),
//! 7(a), 7(b)): one figure per sweep, mark time per collector against the
//! sweep's x (physical capacity, total compression, file count) above the
//! mark phase's I/O count against the same x, both on log y axes. Log axes
//! are drawn as linear axes over logarithms of the values (log10 for y,
//! doublings for x), labelled with the values themselves.

use cairn_core::Result;
use plotters::prelude::*;
use serde_json::Value;

use super::gc_variants::VARIANTS;
use super::tabulate::{f, s, u};
use crate::figure::{Area, Drawn, T};

/// One figure: file stem, SVG text, size.
pub(crate) type Figure = (String, String, (u32, u32));

struct Sweep {
    name: &'static str,
    title: &'static str,
    x_desc: &'static str,
    log_x: bool,
}

const SWEEPS: [Sweep; 3] = [
    Sweep {
        name: "capacity",
        title: "GC mark vs capacity (003 Fig. 6a)",
        x_desc: "physical capacity in use (MiB)",
        log_x: false,
    },
    Sweep {
        name: "compression",
        title: "GC mark vs total compression (003 Fig. 7a)",
        x_desc: "total compression (fastcopy doubling, log)",
        log_x: true,
    },
    Sweep {
        name: "files",
        title: "GC mark vs file count (003 Fig. 7b)",
        x_desc: "files over all snapshots (log)",
        log_x: true,
    },
];

const COLORS: [RGBColor; 5] = [
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0xff, 0x98, 0x96),
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0x9e, 0xc6, 0xe8),
    RGBColor(0x2c, 0xa0, 0x2c),
];

/// The figures of every sweep that has rows.
pub(crate) fn figures(rows: &[Value]) -> Result<Vec<Figure>> {
    let mut out = Vec::new();
    for sweep in &SWEEPS {
        let of: Vec<&Value> = rows
            .iter()
            .filter(|r| s(r, "sweep") == sweep.name)
            .collect();
        if of.is_empty() {
            continue;
        }
        let size = crate::figure::size(2);
        let svg = crate::figure::svg(size, |root| draw(sweep, &of, root))?;
        out.push((format!("gc-{}", sweep.name), svg, size));
    }
    Ok(out)
}

fn draw(sweep: &Sweep, rows: &[&Value], root: &Area) -> Drawn {
    let p = crate::figure::panels(root, sweep.title, 2)?;
    panel(
        sweep,
        rows,
        &p[0],
        "mark phase time",
        "mark seconds (fastest run, log)",
        &|r| f(r, "mark_seconds"),
    )?;
    panel(
        sweep,
        rows,
        &p[1],
        "mark phase I/O",
        "metadata + chunk reads (log)",
        &|r| u(r, "mark_ios") as f64,
    )?;
    root.present()
}

/// A power of ten `10^v` (v an integer tick) as text: `0.001`, `1`,
/// `100`, `10k`, `1M`.
fn decade(v: f64) -> String {
    let v = v.round() as i32;
    match v {
        ..=0 => format!("{:.*}", (-v) as usize, 10f64.powi(v)),
        1..=2 => format!("{}", 10u64.pow(v as u32)),
        3..=5 => format!("{}k", 10u64.pow(v as u32 - 3)),
        _ => format!("{}M", 10u64.pow((v - 6).min(12) as u32)),
    }
}

/// A count or ratio as text: whole above 100, one decimal below.
fn amount(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}

fn span(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = values.fold((f64::MAX, f64::MIN), |(l, h), v| (l.min(v), h.max(v)));
    if lo > hi {
        (0.0, 1.0)
    } else {
        (lo, hi)
    }
}

/// One panel: `y` (log scale, whole decades) per variant against the
/// sweep's x. A log x axis is drawn in doublings of the smallest x (every
/// sweep that uses one doubles its x), ticks labelled with the x values.
fn panel(
    sweep: &Sweep,
    rows: &[&Value],
    area: &Area,
    caption: &str,
    y_desc: &str,
    y: &dyn Fn(&Value) -> f64,
) -> Drawn {
    let x0 = rows
        .iter()
        .map(|r| f(r, "x"))
        .fold(f64::MAX, f64::min)
        .max(1e-9);
    let tx = |r: &Value| {
        let x = f(r, "x");
        if sweep.log_x {
            (x / x0).log2()
        } else {
            x
        }
    };
    let ty = |r: &Value| y(r).max(1e-6).log10();
    let (xl, xh) = span(rows.iter().map(|r| tx(r)));
    let pad = ((xh - xl) * 0.06).max(0.05);
    let (xl, xh) = (xl - pad, xh + pad);
    let (yl, yh) = span(rows.iter().map(|r| ty(r)));
    // Whole decades, and one more on top for the legend.
    let (yl, yh) = (yl.floor(), yh.ceil() + 1.0);
    let mut chart = crate::figure::chart(area, caption).build_cartesian_2d(xl..xh, yl..yh)?;
    let fx = |v: &f64| {
        if sweep.log_x {
            amount(x0 * 2f64.powf(*v))
        } else {
            amount(*v)
        }
    };
    let fy = |v: &f64| decade(*v);
    let x_labels = if sweep.log_x {
        (xh - xl).ceil() as usize + 1
    } else {
        6
    };
    chart
        .configure_mesh()
        .disable_x_mesh()
        .disable_y_mesh()
        .x_labels(x_labels)
        .y_labels((yh - yl) as usize + 1)
        .x_label_formatter(&fx)
        .y_label_formatter(&fy)
        .x_desc(sweep.x_desc)
        .y_desc(y_desc)
        .label_style(T.tick())
        .axis_desc_style(T.axis())
        .draw()?;
    for (k, v) in VARIANTS.iter().enumerate() {
        let mut pts: Vec<(f64, f64)> = rows
            .iter()
            .filter(|r| s(r, "collector") == v.label)
            .map(|r| (tx(r), ty(r)))
            .collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let c = COLORS[k];
        let dashed = v.label.ends_with("-2");
        let style = c.stroke_width(if dashed { 1 } else { 2 });
        chart
            .draw_series(LineSeries::new(pts.clone(), style))?
            .label(v.label.to_uppercase())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], style));
        chart.draw_series(pts.iter().map(|&p| Circle::new(p, 3, c.filled())))?;
    }
    crate::figure::legend(&mut chart, SeriesLabelPosition::UpperLeft)
}

#[cfg(test)]
mod tests {
    #[test]
    fn decade_labels_are_short() {
        let labels: Vec<String> = (-3..=7).map(|v| super::decade(f64::from(v))).collect();
        assert_eq!(
            labels,
            ["0.001", "0.01", "0.1", "1", "10", "100", "1k", "10k", "100k", "1M", "10M"]
        );
    }
}
