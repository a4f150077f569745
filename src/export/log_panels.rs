//! Lines on log axes in panels side by side, as one SVG: each panel its own
//! x axis in log2 (the quantities double: depths, prompt lengths, batches)
//! and its own y axis in log10 (rates that span decades), with what was
//! measured drawn solid with markers and what it is held against drawn
//! dashed in the same colour (a bound, a guide line, a ceiling), vertical
//! marks with their labels (a predicted ridge), and one legend under the
//! panels. An x of 0 has no place on a log axis: it is drawn one doubling
//! left of the panel's smallest positive x and labelled "0", a slot of its
//! own rather than a value on the scale. Drawn with svg.rs's canvas, colours
//! and fonts; a pure function: data in, an SVG string out.

use anyhow::{bail, Result};
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::svg::{canvas_sized, colour, draw_error, FONT, GREY};

/// The canvas: three panels of about 500 pixels, and the legend under them.
const SIZE: (u32, u32) = (1500, 640);
/// A legend line's height, and a character's width as plotters estimates it
/// at the legend's font (for laying the entries out in rows).
const KEY_LINE: i32 = 24;
const KEY_CHAR: i32 = 7;

/// How a trace is drawn: what it is says how it looks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stroke {
    /// Solid and thick, a marker at every point: what was measured.
    Measured,
    /// Dashed and thick: the bound a measured trace is held against.
    Bound,
    /// Short dashes, thin: a guide (a memory line).
    Guide,
    /// Long dashes, thin: a ceiling (compute).
    Ceiling,
}

/// One line of a panel.
#[derive(Clone, Debug, PartialEq)]
pub struct Trace {
    /// Its colour and marker (lines apart in grayscale too).
    pub colour: usize,
    pub stroke: Stroke,
    /// (x, y); x may be 0 (its own slot), y must be positive: points that
    /// are not finite, or not positive where the log needs it, are left out.
    pub points: Vec<(f64, f64)>,
    /// Written at its last point, in its colour ("tg32" beside "pp512").
    pub end_label: Option<String>,
}

/// A vertical mark at `x` with its label, in a trace's colour.
#[derive(Clone, Debug, PartialEq)]
pub struct Mark {
    pub x: f64,
    pub label: String,
    pub colour: usize,
}

/// One panel: its caption, x axis and what it draws.
#[derive(Clone, Debug, PartialEq)]
pub struct LogPanel {
    pub title: String,
    pub x_desc: String,
    pub traces: Vec<Trace>,
    pub marks: Vec<Mark>,
}

/// What a legend entry shows beside its label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Swatch {
    Line(Stroke),
    /// A vertical mark.
    Vertical,
}

/// A legend entry: a colour's (a row) or a style's (grey: what dashes mean).
#[derive(Clone, Debug, PartialEq)]
pub struct Key {
    pub label: String,
    pub colour: Option<usize>,
    pub swatch: Swatch,
}

/// The panel's coordinates: log2 x and log10 y, as linear axes whose ticks
/// are placed by [`Axes`].
type Chart<'a> = ChartContext<'a, SVGBackend<'a>, Cartesian2d<Ticked, Ticked>>;

/// A linear axis with its ticks where they are given (plotters' own
/// `WithKeyPoints` cannot take a label formatter in 0.3).
struct Ticked {
    inner: RangedCoordf64,
    ticks: Vec<f64>,
}

impl Ticked {
    fn new(range: std::ops::Range<f64>, ticks: Vec<f64>) -> Self {
        Self {
            inner: range.into(),
            ticks,
        }
    }
}

impl Ranged for Ticked {
    type ValueType = f64;
    type FormatOption = DefaultFormatting;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.inner.map(value, limit)
    }

    fn key_points<Hint: KeyPointHint>(&self, _hint: Hint) -> Vec<f64> {
        self.ticks.clone()
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.inner.range()
    }
}

/// `panels` side by side under `title`, every y axis described by `y_desc`,
/// `keys` in one legend under them. A panel with nothing to draw says "no
/// points"; fails when no panel has a point.
pub fn log_panels_svg(
    title: &str,
    y_desc: &str,
    panels: &[LogPanel],
    keys: &[Key],
) -> Result<String> {
    if !panels.iter().any(|p| Axes::of(p).is_some()) {
        bail!("nothing to plot: no panel has a finite, positive point");
    }
    let mut svg = String::new();
    {
        let root = canvas_sized(&mut svg, SIZE)?;
        let root = root.titled(title, (FONT, 22)).map_err(draw_error)?;
        let (w, h) = root.dim_in_pixel();
        let rows = key_rows(keys, w as i32).len() as i32;
        let legend_h = rows * KEY_LINE + 16;
        let (top, bottom) = root.split_vertically(h as i32 - legend_h);
        for (area, p) in top
            .split_evenly((1, panels.len().max(1)))
            .iter()
            .zip(panels)
        {
            match Axes::of(p) {
                Some(axes) => panel(area, p, &axes, y_desc)?,
                None => empty(area, p)?,
            }
        }
        legend(&bottom, keys)?;
        root.present().map_err(draw_error)?;
    }
    Ok(svg)
}

/// A point that can be placed: x finite and not negative, y finite and
/// above zero.
fn placeable(&(x, y): &(f64, f64)) -> bool {
    x.is_finite() && x >= 0.0 && y.is_finite() && y > 0.0
}

/// Where a panel's points go: the x slot of 0, the axes' ranges and ticks.
struct Axes {
    /// log2 of where an x of 0 is drawn (one doubling left of the smallest
    /// positive x), if any point has one.
    zero: Option<f64>,
    x: std::ops::Range<f64>,
    y: std::ops::Range<f64>,
    /// (position, label) of each x tick: the values the points are at.
    x_ticks: Vec<(f64, String)>,
    y_ticks: Vec<f64>,
}

impl Axes {
    /// The axes of `p`, or `None` when it has no point to place.
    fn of(p: &LogPanel) -> Option<Axes> {
        let points: Vec<(f64, f64)> = p
            .traces
            .iter()
            .flat_map(|t| t.points.iter().copied().filter(placeable))
            .collect();
        if points.is_empty() {
            return None;
        }
        let marks = p.marks.iter().map(|m| m.x);
        let positive: Vec<f64> = (points.iter().map(|p| p.0).chain(marks))
            .filter(|x| x.is_finite() && *x > 0.0)
            .map(f64::log2)
            .collect();
        let lo = positive.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = positive.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let (lo, hi) = if lo.is_finite() { (lo, hi) } else { (0.0, 0.0) };
        let zero = points.iter().any(|p| p.0 == 0.0).then_some(lo - 1.0);
        // Room for the end labels on the right.
        let right = if p.traces.iter().any(|t| t.end_label.is_some()) {
            1.0
        } else {
            0.5
        };
        let x = (zero.unwrap_or(lo) - 0.5)..(hi + right);
        let ys = points.iter().map(|p| p.1.log10());
        let y_lo = ys.clone().fold(f64::INFINITY, f64::min);
        let y_hi = ys.fold(f64::NEG_INFINITY, f64::max);
        // Room above for the marks' labels.
        let y = (y_lo - 0.08)..(y_hi + 0.08 + 0.06 * p.marks.len() as f64);
        let x_ticks = x_ticks(&points, zero);
        let y_ticks = y_ticks(&y);
        Some(Axes {
            zero,
            x,
            y,
            x_ticks,
            y_ticks,
        })
    }

    /// A data point in the panel's coordinates.
    fn at(&self, (x, y): (f64, f64)) -> (f64, f64) {
        let x = if x == 0.0 {
            self.zero.unwrap_or(0.0)
        } else {
            x.log2()
        };
        (x, y.log10())
    }

    /// The label of the x tick at `x`: the value a point is at there.
    fn x_label(&self, x: f64) -> String {
        let tick = self.x_ticks.iter().find(|(at, _)| (at - x).abs() < 1e-9);
        tick.map_or(String::new(), |t| t.1.clone())
    }
}

/// The x ticks: one at each value the points are at, up to a dozen (more
/// would crowd the axis: then one at each power of two), and "0" at its slot.
fn x_ticks(points: &[(f64, f64)], zero: Option<f64>) -> Vec<(f64, String)> {
    let mut xs: Vec<f64> = points.iter().map(|p| p.0).filter(|x| *x > 0.0).collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    let mut ticks: Vec<(f64, String)> = if xs.len() <= 12 {
        xs.iter().map(|&x| (x.log2(), format!("{x}"))).collect()
    } else {
        let (lo, hi) = (xs[0].log2().ceil() as i32, xs[xs.len() - 1].log2() as i32);
        (lo..=hi)
            .map(|k| (k as f64, format!("{}", 2f64.powi(k))))
            .collect()
    };
    if let Some(z) = zero {
        ticks.insert(0, (z, "0".into()));
    }
    ticks
}

/// The y ticks: 1, 2 and 5 of each decade inside `y` (log10), or every
/// digit where that leaves fewer than two.
fn y_ticks(y: &std::ops::Range<f64>) -> Vec<f64> {
    let decades = y.start.floor() as i32..=y.end.ceil() as i32;
    let within = |digits: &[f64]| -> Vec<f64> {
        decades
            .clone()
            .flat_map(|k| digits.iter().map(move |d| (d * 10f64.powi(k)).log10()))
            .filter(|t| y.contains(t))
            .collect()
    };
    let ticks = within(&[1.0, 2.0, 5.0]);
    if ticks.len() >= 2 {
        ticks
    } else {
        within(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0])
    }
}

/// A y tick's label: the rate it stands for, without needless digits.
fn y_label(y: f64) -> String {
    let v = 10f64.powf(y);
    if v >= 1.0 {
        format!("{v:.0}")
    } else {
        format!("{}", (v * 1e3).round() / 1e3)
    }
}

/// A panel with nothing to draw: its caption and "no points".
fn empty(area: &DrawingArea<SVGBackend<'_>, Shift>, p: &LogPanel) -> Result<()> {
    let area = area.titled(&p.title, (FONT, 17)).map_err(draw_error)?;
    let (w, h) = area.dim_in_pixel();
    let style = TextStyle::from((FONT, 16).into_font())
        .pos(Pos::new(HPos::Center, VPos::Center))
        .color(&GREY);
    area.draw_text("no points", &style, (w as i32 / 2, h as i32 / 2))
        .map_err(draw_error)
}

/// Panel `p` in `area`: its axes, its traces (guides first, what was
/// measured on top), their end labels and its marks.
fn panel(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    p: &LogPanel,
    axes: &Axes,
    y_desc: &str,
) -> Result<()> {
    let mut chart = ChartBuilder::on(area)
        .caption(&p.title, (FONT, 17))
        .margin(12)
        .x_label_area_size(48)
        .y_label_area_size(64)
        .build_cartesian_2d(
            Ticked::new(axes.x.clone(), axes.x_ticks.iter().map(|t| t.0).collect()),
            Ticked::new(axes.y.clone(), axes.y_ticks.clone()),
        )
        .map_err(draw_error)?;
    chart
        .configure_mesh()
        .x_desc(&p.x_desc)
        .y_desc(y_desc)
        .x_label_formatter(&|x| axes.x_label(*x))
        .y_label_formatter(&|y| y_label(*y))
        .axis_desc_style((FONT, 15))
        .label_style((FONT, 13))
        .bold_line_style(BLACK.mix(0.08))
        .draw()
        .map_err(draw_error)?;
    let order = [
        Stroke::Guide,
        Stroke::Ceiling,
        Stroke::Bound,
        Stroke::Measured,
    ];
    for stroke in order {
        for t in p.traces.iter().filter(|t| t.stroke == stroke) {
            let points: Vec<(f64, f64)> = t
                .points
                .iter()
                .filter(|q| placeable(q))
                .map(|&q| axes.at(q))
                .collect();
            trace(&mut chart, t, &points)?;
        }
    }
    for (i, m) in p.marks.iter().enumerate() {
        mark(&mut chart, axes, m, i)?;
    }
    Ok(())
}

/// A trace through `points` (panel coordinates), in its stroke, and its end
/// label.
fn trace(chart: &mut Chart<'_>, t: &Trace, points: &[(f64, f64)]) -> Result<()> {
    let c = colour(t.colour);
    let (size, gap, width) = match t.stroke {
        Stroke::Measured => {
            chart
                .draw_series(LineSeries::new(points.to_vec(), c.stroke_width(2)))
                .map_err(draw_error)?;
            chart
                .draw_series(points.iter().map(|&p| marker(p, t.colour)))
                .map_err(draw_error)?;
            (0, 0, 0)
        }
        Stroke::Bound => (10, 6, 2),
        Stroke::Guide => (3, 4, 1),
        Stroke::Ceiling => (14, 5, 1),
    };
    if width > 0 {
        let style = c.stroke_width(width);
        chart
            .draw_series(DashedLineSeries::new(points.to_vec(), size, gap, style))
            .map_err(draw_error)?;
    }
    if let (Some(label), Some(&last)) = (&t.end_label, points.last()) {
        let style = TextStyle::from((FONT, 13).into_font())
            .pos(Pos::new(HPos::Left, VPos::Center))
            .color(&c);
        chart
            .draw_series([EmptyElement::at(last) + Text::new(label.clone(), (8, 0), style)])
            .map_err(draw_error)?;
    }
    Ok(())
}

/// Trace `i`'s marker at `p`: a disc, triangle, cross or ring by `i`.
fn marker<'b, C: Copy + 'static>(p: C, i: usize) -> DynElement<'static, SVGBackend<'b>, C> {
    let c = colour(i);
    match i % 4 {
        0 => Circle::new(p, 4, c.filled()).into_dyn(),
        1 => TriangleMarker::new(p, 6, c.filled()).into_dyn(),
        2 => Cross::new(p, 5, c.stroke_width(2)).into_dyn(),
        _ => Circle::new(p, 5, c.stroke_width(2)).into_dyn(),
    }
}

/// Mark `i` of a panel: a dotted vertical line over the panel's height and
/// its label near the top, each mark's a line lower than the one before.
fn mark(chart: &mut Chart<'_>, axes: &Axes, m: &Mark, i: usize) -> Result<()> {
    if !(m.x.is_finite() && m.x > 0.0) {
        return Ok(());
    }
    let (x, c) = (m.x.log2(), colour(m.colour));
    let ends = [(x, axes.y.start), (x, axes.y.end)];
    chart
        .draw_series(DashedLineSeries::new(ends, 2, 4, c.stroke_width(2)))
        .map_err(draw_error)?;
    let style = TextStyle::from((FONT, 14).into_font())
        .pos(Pos::new(HPos::Left, VPos::Top))
        .color(&c);
    let at = (x, axes.y.end);
    chart
        .draw_series([
            EmptyElement::at(at) + Text::new(m.label.clone(), (5, 4 + 18 * i as i32), style)
        ])
        .map_err(draw_error)?;
    Ok(())
}

/// The legend's entries laid out in rows across `width` pixels: each
/// entry's left edge, by row.
fn key_rows(keys: &[Key], width: i32) -> Vec<Vec<(i32, &Key)>> {
    let mut rows: Vec<Vec<(i32, &Key)>> = vec![Vec::new()];
    let mut x = 16;
    for k in keys {
        let w = 40 + KEY_CHAR * k.label.chars().count() as i32 + 28;
        if x + w > width && x > 16 {
            rows.push(Vec::new());
            x = 16;
        }
        if let Some(row) = rows.last_mut() {
            row.push((x, k));
        }
        x += w;
    }
    rows
}

/// The legend in `area`: each entry's swatch, then its label.
fn legend(area: &DrawingArea<SVGBackend<'_>, Shift>, keys: &[Key]) -> Result<()> {
    let (w, _) = area.dim_in_pixel();
    for (r, row) in key_rows(keys, w as i32).iter().enumerate() {
        let y = 8 + KEY_LINE * r as i32 + KEY_LINE / 2;
        for &(x, k) in row {
            swatch(area, k, (x, y))?;
            let style = TextStyle::from((FONT, 14).into_font())
                .pos(Pos::new(HPos::Left, VPos::Center))
                .color(&BLACK);
            area.draw_text(&k.label, &style, (x + 40, y))
                .map_err(draw_error)?;
        }
    }
    Ok(())
}

/// An entry's swatch, 32 pixels wide from `(x, y)`: its stroke (with its
/// marker, for a colour's), or a short vertical mark.
fn swatch(area: &DrawingArea<SVGBackend<'_>, Shift>, k: &Key, (x, y): (i32, i32)) -> Result<()> {
    let c = k.colour.map_or(GREY, colour);
    let seg = |a: i32, b: i32, width: u32| {
        PathElement::new(vec![(x + a, y), (x + b, y)], c.stroke_width(width))
    };
    let pieces: Vec<PathElement<(i32, i32)>> = match k.swatch {
        Swatch::Line(Stroke::Measured) => vec![seg(0, 32, 2)],
        Swatch::Line(Stroke::Bound) => vec![seg(0, 10, 2), seg(16, 26, 2)],
        Swatch::Line(Stroke::Guide) => (0..5).map(|i| seg(7 * i, 7 * i + 3, 1)).collect(),
        Swatch::Line(Stroke::Ceiling) => vec![seg(0, 13, 1), seg(19, 32, 1)],
        Swatch::Vertical => vec![PathElement::new(
            vec![(x + 16, y - 9), (x + 16, y + 9)],
            c.stroke_width(2),
        )],
    };
    for p in &pieces {
        area.draw(p).map_err(draw_error)?;
    }
    if let (Some(i), Swatch::Line(Stroke::Measured)) = (k.colour, k.swatch) {
        area.draw(&marker((x + 16, y), i)).map_err(draw_error)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The text nodes of `svg`, in order.
    fn texts(svg: &str) -> Vec<&str> {
        svg.split("<text")
            .skip(1)
            .filter_map(|t| Some(t.split_once('>')?.1.split_once("</text>")?.0.trim()))
            .collect()
    }

    fn measured(colour: usize, points: Vec<(f64, f64)>) -> Trace {
        Trace {
            colour,
            stroke: Stroke::Measured,
            points,
            end_label: None,
        }
    }

    #[test]
    fn a_zero_x_gets_its_own_slot_and_ticks_sit_on_the_points() {
        let p = LogPanel {
            title: "depth".into(),
            x_desc: "tokens".into(),
            traces: vec![measured(
                0,
                vec![(0.0, 300.0), (512.0, 250.0), (2048.0, 150.0)],
            )],
            marks: Vec::new(),
        };
        let axes = Axes::of(&p).unwrap();
        assert_eq!(axes.zero, Some(8.0), "a doubling left of 512");
        let labels: Vec<&str> = axes.x_ticks.iter().map(|t| t.1.as_str()).collect();
        assert_eq!(labels, ["0", "512", "2048"]);
        assert_eq!(axes.x_label(9.0), "512");
        assert_eq!(axes.x_label(9.5), "");
        // 150 to 300 tokens/s: of 1, 2 and 5 only 200 is inside, so every
        // digit is a tick.
        let ys: Vec<String> = axes.y_ticks.iter().map(|&y| y_label(y)).collect();
        assert_eq!(ys, ["200", "300"]);
    }

    #[test]
    fn a_narrow_range_gets_every_digit_and_nothing_placeable_is_refused() {
        // 260 to 450 tokens/s: no 1, 2 or 5 inside; 300 and 400 are.
        let ticks = y_ticks(&(260f64.log10()..450f64.log10()));
        let ys: Vec<String> = ticks.iter().map(|&y| y_label(y)).collect();
        assert_eq!(ys, ["300", "400"]);
        let p = LogPanel {
            title: "t".into(),
            x_desc: "x".into(),
            traces: vec![measured(0, vec![(f64::NAN, 1.0), (4.0, 0.0), (-1.0, 3.0)])],
            marks: Vec::new(),
        };
        assert!(Axes::of(&p).is_none());
        assert!(log_panels_svg("t", "y", &[p], &[]).is_err());
    }

    #[test]
    fn panels_draw_traces_marks_legend_and_say_when_empty() {
        let full = LogPanel {
            title: "batch".into(),
            x_desc: "B".into(),
            traces: vec![
                measured(0, vec![(1.0, 300.0), (4.0, 900.0), (16.0, 1300.0)]),
                Trace {
                    colour: 0,
                    stroke: Stroke::Guide,
                    points: vec![(1.0, 330.0), (16.0, 5280.0)],
                    end_label: Some("memory".into()),
                },
            ],
            marks: vec![Mark {
                x: 5.9,
                label: "B* = 5.9".into(),
                colour: 0,
            }],
        };
        let empty = LogPanel {
            title: "prompt".into(),
            x_desc: "tokens".into(),
            traces: Vec::new(),
            marks: Vec::new(),
        };
        let keys = [
            Key {
                label: "q4_1".into(),
                colour: Some(0),
                swatch: Swatch::Line(Stroke::Measured),
            },
            Key {
                label: "ridge".into(),
                colour: None,
                swatch: Swatch::Vertical,
            },
        ];
        let svg = log_panels_svg("scaling", "tokens/s", &[full, empty], &keys).unwrap();
        assert!(svg.trim_start().starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(!svg.contains("NaN") && !svg.contains("inf"), "non-finite");
        let t = texts(&svg);
        for want in [
            "scaling",
            "batch",
            "prompt",
            "no points",
            "B* = 5.9",
            "memory",
            "q4_1",
            "ridge",
            "1",
            "16",
            "1000",
        ] {
            assert!(t.contains(&want), "{want} not in {t:?}");
        }
        // Three markers and the legend's: circles.
        assert_eq!(svg.matches("<circle").count(), 3 + 1);
    }
}
