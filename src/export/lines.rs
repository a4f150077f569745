//! Lines against a log2 x axis, as an SVG document: the sweep's GFLOP/s
//! against matrix size and the bandwidth ladder's GB/s against footprint
//! both draw through [`log2_lines_svg`]. Each line differs by colour and by
//! marker (for grayscale print); a line may carry a level drawn dashed in
//! its colour (a datasheet peak).

use anyhow::{bail, Result};
use plotters::prelude::*;

use super::svg::{canvas, colour, draw_error, legend, FONT};

/// One line of a chart on a log2 x axis, and a level drawn dashed in its
/// colour (a datasheet peak), if any.
#[derive(Clone, Debug, PartialEq)]
pub struct Line {
    pub label: String,
    /// (x, y) per point; points that are not finite and positive are left out.
    pub points: Vec<(f64, f64)>,
    pub level: Option<(String, f64)>,
}

/// Lines against a log2 x axis (`x_label` formats a tick), as an SVG
/// document; each line differs by colour and marker (for grayscale print).
pub fn log2_lines_svg(
    title: &str,
    x_desc: &str,
    y_desc: &str,
    x_label: &dyn Fn(f64) -> String,
    lines: &[Line],
    legend_at: SeriesLabelPosition,
) -> Result<String> {
    let points = |s: &Line| -> Vec<(f64, f64)> {
        s.points
            .iter()
            .filter(|&&(x, y)| x > 0.0 && x.is_finite() && y.is_finite() && y > 0.0)
            .copied()
            .collect()
    };
    let all: Vec<(f64, f64)> = lines.iter().flat_map(points).collect();
    if all.is_empty() {
        bail!("nothing to plot: no series has a finite, positive point");
    }
    let (x_lo, x_hi) = all
        .iter()
        .fold((f64::INFINITY, 0.0f64), |(lo, hi), &(x, _)| {
            (lo.min(x), hi.max(x))
        });
    let levels = lines.iter().filter_map(|s| s.level.as_ref().map(|l| l.1));
    let y_hi = all.iter().map(|p| p.1).chain(levels).fold(0.0, f64::max);
    // Half a doubling of room either side, so end markers are not clipped.
    let x_range = (x_lo / 2f64.sqrt())..(x_hi * 2f64.sqrt());

    let mut svg = String::new();
    {
        let root = canvas(&mut svg)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, (FONT, 24))
            .margin(16)
            .x_label_area_size(56)
            .y_label_area_size(84)
            .build_cartesian_2d(x_range.clone().log_scale().base(2.0), 0.0..y_hi * 1.1)
            .map_err(draw_error)?;
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc(y_desc)
            .x_label_formatter(&|x| x_label(*x))
            .y_label_formatter(&|g| format!("{g:.0}"))
            .axis_desc_style((FONT, 18))
            .label_style((FONT, 15))
            .light_line_style(WHITE)
            .draw()
            .map_err(draw_error)?;

        for (i, s) in lines.iter().enumerate() {
            let c = colour(i);
            let line = points(s);
            // The line, its legend entry and its markers; `$p => $shape` is the
            // marker at point `$p` (data coordinates, or pixels in the legend).
            macro_rules! draw_with_marker {
                ($p:ident => $shape:expr) => {{
                    chart
                        .draw_series(LineSeries::new(line.clone(), c.stroke_width(2)))
                        .map_err(draw_error)?
                        .label(&s.label)
                        .legend(move |at| {
                            let $p = (12, 0);
                            EmptyElement::at(at)
                                + PathElement::new(vec![(0, 0), (24, 0)], c.stroke_width(2))
                                + $shape
                        });
                    chart
                        .draw_series(line.iter().map(|&$p| $shape))
                        .map_err(draw_error)?;
                }};
            }
            match i % 4 {
                0 => draw_with_marker!(p => Circle::new(p, 4, c.filled())),
                1 => draw_with_marker!(p => TriangleMarker::new(p, 6, c.filled())),
                2 => draw_with_marker!(p => EmptyElement::at(p)
                    + Rectangle::new([(-4, -4), (4, 4)], c.filled())),
                _ => draw_with_marker!(p => Cross::new(p, 5, c.stroke_width(2))),
            }
        }
        for (i, s) in lines.iter().enumerate() {
            let Some((label, y)) = s.level.as_ref().filter(|l| l.1.is_finite() && l.1 > 0.0) else {
                continue;
            };
            let c = colour(i);
            let ends = [(x_range.start, *y), (x_range.end, *y)];
            chart
                .draw_series(DashedLineSeries::new(ends, 10, 6, c.stroke_width(2)))
                .map_err(draw_error)?
                .label(label)
                .legend(move |at| {
                    EmptyElement::at(at)
                        + PathElement::new(vec![(0, 0), (9, 0)], c.stroke_width(2))
                        + PathElement::new(vec![(15, 0), (24, 0)], c.stroke_width(2))
                });
        }
        legend(&mut chart, legend_at)?;
        root.present().map_err(draw_error)?;
    }
    Ok(svg)
}
