//! Figures: PNG rendering shared by `cairn analyze` and the experiments.
//! Plots are drawn once as SVG (plotters without default features); a PNG
//! is that SVG rasterized with resvg, labels drawn with an installed font.

use cairn_core::{Error, Result};
use plotters::coord::Shift;
use plotters::prelude::{DrawingArea, DrawingAreaErrorKind, IntoDrawingArea, SVGBackend};

/// The drawing area every figure is drawn on.
pub(crate) type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;
/// What a drawing function returns.
pub(crate) type Drawn = std::result::Result<(), DrawingAreaErrorKind<std::io::Error>>;

/// Draws a `width` x `height` figure with `draw` and returns its SVG text.
pub(crate) fn svg(
    (width, height): (u32, u32),
    draw: impl FnOnce(&Area) -> Drawn,
) -> Result<String> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (width, height)).into_drawing_area();
        draw(&root).map_err(|e| Error::invalid(format!("plot: {e}")))?;
    }
    Ok(out)
}

/// The label of category bars drawn at `i..i+1` for x = `i + 0.5` (empty
/// between categories), for `x_label_formatter`.
pub(crate) fn category_label<S: AsRef<str>>(names: &[S], x: f64) -> String {
    let i = (x - 0.5).round();
    if (x - 0.5 - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < names.len() {
        names[i as usize].as_ref().to_string()
    } else {
        String::new()
    }
}

/// Renders an SVG figure of `width` x `height` to PNG with the system's
/// fonts (as `cairn analyze --plot x.png` does).
pub(crate) fn rasterize(svg: &str, width: u32, height: u32, what: &str) -> Result<Vec<u8>> {
    use resvg::{tiny_skia, usvg};
    let mut opt = usvg::Options::default();
    opt.fontdb_mut().load_system_fonts();
    if opt.fontdb.is_empty() {
        return Err(Error::invalid(format!(
            "cannot write {what}: no system fonts to draw PNG labels with (install a TrueType \
             font such as fonts-dejavu-core, or write an .svg figure)"
        )));
    }
    let db = opt.fontdb_mut();
    let family = ["DejaVu Sans", "Liberation Sans", "Noto Sans", "FreeSans"]
        .into_iter()
        .find(|f| {
            db.faces()
                .any(|face| face.families.iter().any(|(n, _)| n == f))
        })
        .map(str::to_string)
        .or_else(|| {
            db.faces()
                .next()
                .and_then(|f| f.families.first().map(|(n, _)| n.clone()))
        });
    if let Some(family) = family {
        db.set_sans_serif_family(family.clone());
        db.set_serif_family(family.clone());
        db.set_monospace_family(family);
    }
    let tree = usvg::Tree::from_str(svg, &opt)
        .map_err(|e| Error::invalid(format!("plot: rendering the figure: {e}")))?;
    let mut pixmap = tiny_skia::Pixmap::new(width, height)
        .ok_or_else(|| Error::invalid("plot: figure size out of range"))?;
    resvg::render(&tree, tiny_skia::Transform::default(), &mut pixmap.as_mut());
    pixmap
        .encode_png()
        .map_err(|e| Error::invalid(format!("plot: encoding PNG: {e}")))
}
