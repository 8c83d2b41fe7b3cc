//! Figures: type sizes, PNG and PDF rendering shared by `cairn analyze` and
//! the experiments. Plots are drawn once as SVG (plotters without default
//! features); a PNG is that SVG rasterized with resvg, a PDF that SVG
//! converted with svg2pdf, labels drawn with an installed font.
//!
//! Every figure is drawn to stay readable when shrunk to one paper column
//! (3.3 in wide): one column of panels [`WIDTH`] pixels wide, every text
//! sized by [`T`] so that none is below 8 pt there, titles and captions
//! short enough to fit on one line at that size, no minor grid lines.

use cairn_core::{Error, Result};
use plotters::chart::{ChartContext, SeriesLabelPosition};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::CoordTranslate;
use plotters::coord::Shift;
use plotters::prelude::{
    Cartesian2d, ChartBuilder, Color, DrawingArea, DrawingAreaErrorKind, IntoDrawingArea,
    SVGBackend, BLACK, WHITE,
};

/// The drawing area every figure is drawn on.
pub(crate) type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;
/// What a drawing function returns.
pub(crate) type Drawn = std::result::Result<(), DrawingAreaErrorKind<std::io::Error>>;

/// One paper column, in points (3.3 in): the width figures are sized for.
pub(crate) const COLUMN_PT: f64 = 237.6;

/// Text sizes of a figure `width` pixels wide, in pixels, such that shrunk
/// to one column ([`COLUMN_PT`]) they print at the named point sizes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Type {
    width: u32,
}

impl Type {
    pub(crate) const fn new(width: u32) -> Self {
        Type { width }
    }

    /// Pixels that print as `pt` points at one column wide.
    pub(crate) fn px(self, pt: f64) -> u32 {
        (pt * f64::from(self.width) / COLUMN_PT).ceil() as u32
    }

    fn font(self, pt: f64) -> (&'static str, u32) {
        ("sans-serif", self.px(pt))
    }

    /// Tick labels and value annotations: 8 pt.
    pub(crate) fn tick(self) -> (&'static str, u32) {
        self.font(8.0)
    }

    /// Axis descriptions: 8.5 pt.
    pub(crate) fn axis(self) -> (&'static str, u32) {
        self.font(8.5)
    }

    /// Legend entries: 8 pt.
    pub(crate) fn legend(self) -> (&'static str, u32) {
        self.font(8.0)
    }

    /// Panel captions: 9 pt.
    pub(crate) fn caption(self) -> (&'static str, u32) {
        self.font(9.0)
    }

    /// The figure's title: 10 pt.
    pub(crate) fn title(self) -> (&'static str, u32) {
        self.font(10.0)
    }
}

/// Width of every figure, pixels: one column of panels.
pub(crate) const WIDTH: u32 = 640;
/// Height of one panel, pixels.
pub(crate) const PANEL_HEIGHT: u32 = 420;
/// Height of the title line, pixels.
const TITLE_HEIGHT: u32 = 44;
/// The type sizes of every figure.
pub(crate) const T: Type = Type::new(WIDTH);

/// Size of a figure of `panels` panels stacked under a title.
pub(crate) const fn size(panels: usize) -> (u32, u32) {
    let panels = if panels == 0 { 1 } else { panels as u32 };
    (WIDTH, TITLE_HEIGHT + PANEL_HEIGHT * panels)
}

/// Fills the figure white, writes `title` (short: one line at 10 pt in
/// one column) and returns `panels` areas stacked below it.
pub(crate) fn panels<'a>(
    root: &Area<'a>,
    title: &str,
    panels: usize,
) -> std::result::Result<Vec<Area<'a>>, DrawingAreaErrorKind<std::io::Error>> {
    root.fill(&WHITE)?;
    let body = root.titled(title, T.title())?;
    Ok(body.split_evenly((panels.max(1), 1)))
}

/// A chart on `area` with a caption and the shared margins and label areas.
pub(crate) fn chart<'a, 'b>(
    area: &'a Area<'b>,
    caption: &str,
) -> ChartBuilder<'a, 'b, SVGBackend<'b>> {
    let mut b = ChartBuilder::on(area);
    b.caption(caption, T.caption())
        .margin(T.px(5.0))
        .margin_right(T.px(9.0))
        .x_label_area_size(T.px(24.0))
        .y_label_area_size(T.px(34.0));
    b
}

/// A chart of speed factor (MB per container read) per backup version,
/// versions 1..=`versions` across, 0..`ymax` up, its mesh drawn: the
/// per-version panels of `experiment restore` and `experiment relayout`.
pub(crate) fn per_version_chart<'a, 'b>(
    area: &'a Area<'b>,
    caption: &str,
    versions: usize,
    ymax: f64,
) -> std::result::Result<
    ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
    DrawingAreaErrorKind<std::io::Error>,
> {
    let gens = versions.max(1) as f64;
    let mut chart =
        chart(area, caption).build_cartesian_2d(1f64..gens.max(2.0), 0f64..ymax.max(1e-3))?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .disable_y_mesh()
        .x_labels(versions.clamp(1, 10))
        .y_labels(6)
        .x_label_formatter(&|x| format!("{}", x.round() as u64))
        .x_desc("backup version")
        .y_desc("speed factor (MB/read)")
        .label_style(T.tick())
        .axis_desc_style(T.axis())
        .draw()?;
    Ok(chart)
}

/// The legend of a panel: framed, on a light background, at `at`.
pub(crate) fn legend<'a, 'b: 'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, SVGBackend<'b>, CT>,
    at: SeriesLabelPosition,
) -> Drawn {
    chart
        .configure_series_labels()
        .position(at)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(T.legend())
        .legend_area_size(T.px(14.0))
        .draw()
}

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

/// Parses an SVG figure with the system's fonts for its labels; `what`
/// names the file being written, for the error when there are no fonts.
fn parse(svg: &str, what: &str) -> Result<resvg::usvg::Tree> {
    use resvg::usvg;
    let mut opt = usvg::Options::default();
    opt.fontdb_mut().load_system_fonts();
    if opt.fontdb.is_empty() {
        return Err(Error::invalid(format!(
            "cannot write {what}: no system fonts to draw the labels with (install a TrueType \
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
    usvg::Tree::from_str(svg, &opt)
        .map_err(|e| Error::invalid(format!("plot: rendering the figure: {e}")))
}

/// Renders an SVG figure of `width` x `height` to PNG with the system's
/// fonts (as `cairn analyze --plot x.png` does).
pub(crate) fn rasterize(svg: &str, width: u32, height: u32, what: &str) -> Result<Vec<u8>> {
    use resvg::tiny_skia;
    let tree = parse(svg, what)?;
    let mut pixmap = tiny_skia::Pixmap::new(width, height)
        .ok_or_else(|| Error::invalid("plot: figure size out of range"))?;
    resvg::render(&tree, tiny_skia::Transform::default(), &mut pixmap.as_mut());
    pixmap
        .encode_png()
        .map_err(|e| Error::invalid(format!("plot: encoding PNG: {e}")))
}

/// Converts an SVG figure to a one-page PDF (vector, the system's fonts
/// embedded), for `cairn analyze --plot x.pdf` and `--plot-format pdf`.
pub(crate) fn pdf(svg: &str, what: &str) -> Result<Vec<u8>> {
    let tree = parse(svg, what)?;
    svg2pdf::to_pdf(
        &tree,
        svg2pdf::ConversionOptions::default(),
        svg2pdf::PageOptions::default(),
    )
    .map_err(|e| Error::invalid(format!("plot: converting the figure to PDF: {e}")))
}

/// The figure file formats.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PlotFormat {
    #[default]
    Svg,
    Png,
    Pdf,
}

impl std::fmt::Display for PlotFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.ext())
    }
}

impl std::str::FromStr for PlotFormat {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Self::from_ext(s)
            .ok_or_else(|| Error::invalid(format!("plot format {s:?}: must be svg, png or pdf")))
    }
}

impl PlotFormat {
    /// The names [`Self::from_ext`] accepts (any case).
    pub const NAMES: [&'static str; 3] = ["svg", "png", "pdf"];

    /// The format named by a file extension or `--plot-format` (any case).
    pub fn from_ext(ext: &str) -> Option<Self> {
        match ext.to_ascii_lowercase().as_str() {
            "svg" => Some(PlotFormat::Svg),
            "png" => Some(PlotFormat::Png),
            "pdf" => Some(PlotFormat::Pdf),
            _ => None,
        }
    }

    pub fn ext(self) -> &'static str {
        match self {
            PlotFormat::Svg => "svg",
            PlotFormat::Png => "png",
            PlotFormat::Pdf => "pdf",
        }
    }

    /// The file bytes of SVG figure `svg` (`width` x `height`) in this format.
    pub(crate) fn render(
        self,
        svg: String,
        (width, height): (u32, u32),
        what: &str,
    ) -> Result<Vec<u8>> {
        match self {
            PlotFormat::Svg => Ok(svg.into_bytes()),
            PlotFormat::Png => rasterize(&svg, width, height, what),
            PlotFormat::Pdf => pdf(&svg, what),
        }
    }
}
