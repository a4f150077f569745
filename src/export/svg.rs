//! Charts as SVG text, from plain data (the lines on a log2 axis, the sweep's
//! and the ladder's, are `export::lines`'),
//! [`bars_svg`] draws one bar per precision for one or more machines (and
//! [`time_bars_svg`], [`percent_bars_svg`] the same in ms and in %; the
//! roofline is `export::roofline`'s), and the canvas, colours and labels every
//! chart shares. Pure
//! functions: data in, an SVG string out; the caller writes the file. The SVG
//! backend of `plotters` emits `<text>` elements that the viewer renders with
//! its own fonts, so no font files or system libraries are needed; text widths
//! for layout are plotters' estimate, hence the generous margins.

use anyhow::{bail, Result};
pub use plotters::chart::SeriesLabelPosition;
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// Canvas size in pixels: wide enough for a legend beside short lines.
const SIZE: (u32, u32) = (960, 560);
pub(super) const FONT: &str = "sans-serif";

/// Okabe-Ito colours: distinguishable with the common colour-vision
/// deficiencies; sweep lines also differ by marker, for grayscale print.
const COLOURS: [RGBColor; 7] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
    RGBColor(0, 0, 0),
];

pub(super) fn colour(i: usize) -> RGBColor {
    COLOURS[i % COLOURS.len()]
}

/// The unit an axis shows throughput in: GFLOP/s, or TFLOP/s once values reach
/// 10,000 GFLOP/s (a GPU), so tick labels stay short. Returns (divisor, unit).
pub(super) fn throughput_unit(max_gflops: f64) -> (f64, &'static str) {
    if max_gflops >= 1e4 {
        (1e3, "TFLOP/s")
    } else {
        (1.0, "GFLOP/s")
    }
}

/// One set of bars: a machine (or run), one value per category.
#[derive(Clone, Debug, PartialEq)]
pub struct BarSeries {
    /// Legend entry, e.g. "NVIDIA H200" or "reference (GB10)".
    pub label: String,
    /// GFLOP/s per category, in the order of the chart's categories; `None`
    /// where this machine has no such row (no bar is drawn).
    pub values: Vec<Option<f64>>,
}

/// One group of bars per category (precision), one bar per series in it, with
/// its value printed on top ("n/a" where a series has none); the y axis starts
/// at zero, in GFLOP/s (TFLOP/s from 10,000 GFLOP/s).
pub fn bars_svg(title: &str, categories: &[String], series: &[BarSeries]) -> Result<String> {
    bars(title, categories, series, BarAxis::Throughput)
}

/// The same bars in milliseconds (a block's time per op class), one group per
/// phase and precision.
pub fn time_bars_svg(title: &str, categories: &[String], series: &[BarSeries]) -> Result<String> {
    bars(title, categories, series, BarAxis::Milliseconds)
}

/// The same bars as a percentage (the kernels' share of the copy ceiling),
/// one group per op, one bar per implementation and precision.
pub fn percent_bars_svg(
    title: &str,
    categories: &[String],
    series: &[BarSeries],
) -> Result<String> {
    bars(title, categories, series, BarAxis::Percent)
}

/// What a bar chart's y axis holds.
#[derive(Clone, Copy, PartialEq, Eq)]
enum BarAxis {
    Throughput,
    Milliseconds,
    Percent,
}

/// The bars of `series` over `categories`, the y axis as `axis` says.
fn bars(title: &str, categories: &[String], series: &[BarSeries], axis: BarAxis) -> Result<String> {
    let y_hi = highest_bar(categories, series)?;
    let (div, x_desc, y_desc) = axis.words(y_hi);
    // Small times need their decimals on the axis.
    let digits = usize::from(axis == BarAxis::Milliseconds && y_hi < 10.0);
    let ncat = categories.len();
    // Category i is centred on x = i; its bars share 80% of a unit.
    let width = 0.8 / series.len() as f64;
    let mut svg = String::new();
    {
        let root = canvas(&mut svg)?;
        let mut chart = frame(&root, title)
            // Headroom for the value labels and the legend.
            .build_cartesian_2d(-0.5..ncat as f64 - 0.5, 0.0..y_hi / div * 1.25)
            .map_err(draw_error)?;
        let category = |x: &f64| category_at(categories, *x);
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(ncat + 1)
            .x_label_formatter(&category)
            .y_label_formatter(&|g| format!("{g:.digits$}"))
            .x_desc(x_desc)
            .y_desc(y_desc)
            .axis_desc_style((FONT, 18))
            .label_style((FONT, 15))
            .light_line_style(WHITE)
            .draw()
            .map_err(draw_error)?;
        for (j, s) in series.iter().enumerate() {
            bar_series(&mut chart, s, j, width, div)?;
        }
        legend(&mut chart, SeriesLabelPosition::UpperRight)?;
        root.present().map_err(draw_error)?;
    }
    Ok(svg)
}

/// A bar's value when it can be drawn: finite and not negative.
fn bar_value(v: &Option<f64>) -> Option<f64> {
    v.filter(|g| g.is_finite() && *g >= 0.0)
}

/// The highest bar of `series`, refusing what cannot be drawn: no
/// categories or series, a series whose values do not match the categories,
/// or nothing above zero.
fn highest_bar(categories: &[String], series: &[BarSeries]) -> Result<f64> {
    if categories.is_empty() || series.is_empty() {
        bail!("nothing to plot: no categories or no series");
    }
    if let Some(s) = series.iter().find(|s| s.values.len() != categories.len()) {
        bail!(
            "series '{}' has {} values for {} categories",
            s.label,
            s.values.len(),
            categories.len()
        );
    }
    let y_hi = series
        .iter()
        .flat_map(|s| s.values.iter().filter_map(bar_value))
        .fold(0.0, f64::max);
    if y_hi <= 0.0 {
        bail!("nothing to plot: no finite, positive value");
    }
    Ok(y_hi)
}

impl BarAxis {
    /// What the values are divided by on this axis (GFLOP/s to TFLOP/s for
    /// large ones), and the x and y axes' descriptions.
    fn words(self, y_hi: f64) -> (f64, String, String) {
        match self {
            BarAxis::Throughput => {
                let (div, unit) = throughput_unit(y_hi);
                (div, "precision".into(), format!("throughput ({unit})"))
            }
            BarAxis::Milliseconds => (
                1.0,
                "phase and precision".into(),
                "time per call (ms)".into(),
            ),
            BarAxis::Percent => (1.0, "op".into(), "% of the measured copy ceiling".into()),
        }
    }
}

/// Series `j`'s bars (the `j`th of each category's group, `width` wide,
/// values divided by `div`), each with its value on top, "n/a" where it has
/// none, and its legend entry.
fn bar_series<'a>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
    s: &BarSeries,
    j: usize,
    width: f64,
    div: f64,
) -> Result<()> {
    let (value_style, missing_style) = (value_style(&BLACK), value_style(&GREY));
    let c = colour(j);
    let left = |i: usize| i as f64 - 0.4 + width * j as f64;
    let bars: Vec<(f64, f64)> = s
        .values
        .iter()
        .enumerate()
        .filter_map(|(i, v)| bar_value(v).map(|g| (left(i), g / div)))
        .collect();
    chart
        .draw_series(
            bars.iter()
                .map(|&(x, g)| Rectangle::new([(x, 0.0), (x + width, g)], c.filled())),
        )
        .map_err(draw_error)?
        .label(&s.label)
        .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], c.filled()));
    chart
        .draw_series(
            bars.iter().map(|&(x, g)| {
                Text::new(value_label(g), (x + width / 2.0, g), value_style.clone())
            }),
        )
        .map_err(draw_error)?;
    // A missing row is not a zero: say so where its bar would stand.
    let missing = (0..s.values.len()).filter(|&i| bar_value(&s.values[i]).is_none());
    chart
        .draw_series(
            missing.map(|i| Text::new("n/a", (left(i) + width / 2.0, 0.0), missing_style.clone())),
        )
        .map_err(draw_error)?;
    Ok(())
}

/// The grey of what is missing ("n/a").
pub(super) const GREY: RGBColor = RGBColor(120, 120, 120);

/// A value's label, centred on top of its bar or mark, in `colour`.
pub(super) fn value_style(colour: &'static RGBColor) -> TextStyle<'static> {
    TextStyle::from((FONT, 13).into_font())
        .pos(Pos::new(HPos::Center, VPos::Bottom))
        .color(colour)
}

/// A bar's value, to about three significant digits.
pub(super) fn value_label(g: f64) -> String {
    if g >= 100.0 {
        format!("{g:.0}")
    } else if g >= 10.0 {
        format!("{g:.1}")
    } else {
        format!("{g:.2}")
    }
}

pub(super) fn canvas(svg: &mut String) -> Result<DrawingArea<SVGBackend<'_>, Shift>> {
    canvas_sized(svg, SIZE)
}

/// A white canvas of `size` pixels: wider than [`canvas`] for panels side by
/// side.
pub(super) fn canvas_sized(
    svg: &mut String,
    size: (u32, u32),
) -> Result<DrawingArea<SVGBackend<'_>, Shift>> {
    let root = SVGBackend::with_string(svg, size).into_drawing_area();
    root.fill(&WHITE).map_err(draw_error)?;
    Ok(root)
}

/// A whole-canvas chart's frame: `title` over it, its margin, and room for
/// the axes' labels and descriptions.
pub(super) fn frame<'a, 'b>(
    root: &'a DrawingArea<SVGBackend<'b>, Shift>,
    title: &str,
) -> ChartBuilder<'a, 'static, SVGBackend<'b>> {
    let mut builder = ChartBuilder::on(root);
    builder
        .caption(title, (FONT, 24))
        .margin(16)
        .x_label_area_size(56)
        .y_label_area_size(84);
    builder
}

pub(super) fn legend<'a, X, Y>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, Cartesian2d<X, Y>>,
    position: SeriesLabelPosition,
) -> Result<()>
where
    X: Ranged,
    Y: Ranged,
{
    chart
        .configure_series_labels()
        .position(position)
        .label_font((FONT, 15))
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK.mix(0.4))
        .margin(12)
        .draw()
        .map_err(draw_error)
}

/// plotters' errors borrow the backend's error type; one line is enough.
/// The label of a bar chart's x axis at `x`: the category whose bar is
/// centred there, nothing between bars (plotters asks at every tick).
pub(super) fn category_at(categories: &[String], x: f64) -> String {
    let i = x.round();
    let on_centre = (x - i).abs() < 1e-9 && i >= 0.0;
    on_centre
        .then(|| categories.get(i as usize).cloned())
        .flatten()
        .unwrap_or_default()
}

pub(super) fn draw_error<E: std::error::Error + Send + Sync>(
    e: plotters::drawing::DrawingAreaErrorKind<E>,
) -> anyhow::Error {
    anyhow::anyhow!("drawing a chart: {e}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_svg(svg: &str) {
        assert!(svg.trim_start().starts_with("<svg"), "{}", &svg[..80]);
        assert!(svg.trim_end().ends_with("</svg>"));
        let opens = svg.matches("<text").count();
        assert_eq!(opens, svg.matches("</text>").count(), "unbalanced <text>");
        assert!(
            !svg.contains("NaN") && !svg.contains("inf"),
            "non-finite coordinate"
        );
    }

    /// The text nodes of `svg`, in order.
    fn texts(svg: &str) -> Vec<&str> {
        svg.split("<text")
            .skip(1)
            .filter_map(|t| Some(t.split_once('>')?.1.split_once("</text>")?.0.trim()))
            .collect()
    }

    #[test]
    fn bars_label_every_category_series_and_value() {
        let cats: Vec<String> = ["fp32", "fp16", "bf16"].map(String::from).into();
        let series = [
            BarSeries {
                label: "NVIDIA H200".into(),
                values: vec![Some(51234.5), Some(612345.0), None],
            },
            BarSeries {
                label: "reference (GB10)".into(),
                values: vec![Some(7250.0), Some(55500.0), Some(48000.0)],
            },
        ];
        let svg = bars_svg("matmul 4096", &cats, &series).unwrap();
        assert_svg(&svg);
        let t = texts(&svg);
        // GPU-sized values: the axis and labels switch to TFLOP/s.
        for want in [
            "matmul 4096",
            "precision",
            "throughput (TFLOP/s)",
            "fp32",
            "fp16",
            "bf16",
            "NVIDIA H200",
            "reference (GB10)",
            "51.2",
            "612",
            "7.25",
            "55.5",
            "48.0",
        ] {
            assert!(t.contains(&want), "no text {want:?} in {t:?}");
        }
        assert_eq!(t.iter().filter(|&&x| x == "n/a").count(), 1, "{t:?}");
        // Five bars, two legend swatches and the background are <rect>s.
        let (bars, swatches, background) = (5, 2, 1);
        assert!(svg.matches("<rect").count() >= bars + swatches + background);

        let cpu = [BarSeries {
            label: "cpu".into(),
            values: vec![Some(393.2), Some(7.8), Some(48.1)],
        }];
        let t_svg = bars_svg("cpu", &cats, &cpu).unwrap();
        let t = texts(&t_svg);
        for want in ["throughput (GFLOP/s)", "393", "7.80", "48.1"] {
            assert!(t.contains(&want), "no text {want:?} in {t:?}");
        }
    }

    #[test]
    fn bars_refuse_mismatched_or_empty_data() {
        let cats = vec!["fp32".to_string()];
        let two = [BarSeries {
            label: "x".into(),
            values: vec![Some(1.0), Some(2.0)],
        }];
        assert!(bars_svg("t", &cats, &two).is_err());
        assert!(bars_svg("t", &[], &two).is_err());
        let none = [BarSeries {
            label: "x".into(),
            values: vec![None],
        }];
        assert!(bars_svg("t", &cats, &none).is_err());
    }
}
