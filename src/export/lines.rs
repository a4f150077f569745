//! Lines against a log2 x axis, as an SVG document: the sweep's GFLOP/s
//! against matrix size and the bandwidth ladder's GB/s against footprint
//! both draw through [`log2_lines_svg`]. Each line differs by colour and by
//! marker (for grayscale print); a line may carry a level drawn dashed in
//! its colour (a datasheet peak).

use anyhow::{bail, Result};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use super::svg::{canvas, colour, draw_error, frame, legend, throughput_unit, FONT};
pub use plotters::chart::SeriesLabelPosition;

/// One line of a sweep chart: a precision's throughput at each size.
#[derive(Clone, Debug, PartialEq)]
pub struct SweepSeries {
    /// Legend entry, e.g. "fp16".
    pub label: String,
    /// (n, GFLOP/s) per measured size; missing sizes are simply absent.
    pub points: Vec<(usize, f64)>,
    /// The datasheet peak for this precision on this GPU, drawn as a dashed
    /// line in the series' colour.
    pub peak_gflops: Option<f64>,
}

/// Throughput against n, as an SVG document: GFLOP/s (TFLOP/s from 10,000
/// GFLOP/s, so a GPU's ticks stay short). The x axis is log2 (sizes double),
/// labelled at powers of two; sizes between them (1000, 1023, 3000) sit where
/// they fall. Points that are not finite and positive are left out.
pub fn sweep_svg(title: &str, series: &[SweepSeries]) -> Result<String> {
    let y_hi = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1).chain(s.peak_gflops))
        .filter(|g| g.is_finite())
        .fold(0.0, f64::max);
    let (div, unit) = throughput_unit(y_hi);
    let lines: Vec<Line> = series
        .iter()
        .map(|s| Line {
            label: s.label.clone(),
            points: s.points.iter().map(|&(n, g)| (n as f64, g / div)).collect(),
            level: s
                .peak_gflops
                .map(|p| (format!("{} datasheet peak", s.label), p / div)),
        })
        .collect();
    log2_lines_svg(
        title,
        "matrix size n (n x n matrices), log2 scale",
        &format!("throughput ({unit})"),
        &|n| format!("{}", n.round()),
        &lines,
        SeriesLabelPosition::UpperLeft,
    )
}

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
        let mut chart = frame(&root, title)
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
            draw_line(&mut chart, i, s, &points(s))?;
        }
        for (i, s) in lines.iter().enumerate() {
            draw_level(&mut chart, i, s, &x_range)?;
        }
        legend(&mut chart, legend_at)?;
        root.present().map_err(draw_error)?;
    }
    Ok(svg)
}

/// The chart's coordinates: a log2 x axis, a linear y axis.
type Chart<'a> = ChartContext<'a, SVGBackend<'a>, Cartesian2d<LogCoord<f64>, RangedCoordf64>>;

/// Line `i` through `line`'s points, its legend entry and its markers: a
/// circle, triangle, square or cross by `i`, so lines stay apart without
/// colour.
fn draw_line(chart: &mut Chart<'_>, i: usize, s: &Line, line: &[(f64, f64)]) -> Result<()> {
    let c = colour(i);
    // `$p => $shape` is the marker at point `$p` (data coordinates, or pixels
    // in the legend).
    macro_rules! draw_with_marker {
        ($p:ident => $shape:expr) => {{
            chart
                .draw_series(LineSeries::new(line.to_vec(), c.stroke_width(2)))
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
    Ok(())
}

/// Line `i`'s level, when it has one: a dashed line in its colour across
/// `x_range`, with its own legend entry.
fn draw_level(
    chart: &mut Chart<'_>,
    i: usize,
    s: &Line,
    x_range: &std::ops::Range<f64>,
) -> Result<()> {
    let Some((label, y)) = s.level.as_ref().filter(|l| l.1.is_finite() && l.1 > 0.0) else {
        return Ok(());
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
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sweep() -> Vec<SweepSeries> {
        let sizes = [64, 128, 256, 512, 1000, 1023, 1024, 1025, 2048, 3000, 4096];
        let line = |scale: f64| {
            sizes
                .iter()
                .map(|&n| (n, scale * (n as f64).ln()))
                .collect::<Vec<_>>()
        };
        vec![
            SweepSeries {
                label: "fp32".into(),
                points: line(40.0),
                peak_gflops: Some(600.0),
            },
            SweepSeries {
                label: "bf16".into(),
                points: line(25.0),
                peak_gflops: None,
            },
        ]
    }

    /// Checks the document is well-formed enough to parse: one root, every
    /// element closed.
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
    fn sweep_has_title_axes_units_legend_and_power_of_two_ticks() {
        let svg = sweep_svg("matmul sweep, CPU", &sweep()).unwrap();
        assert_svg(&svg);
        let t = texts(&svg);
        for want in [
            "matmul sweep, CPU",
            "throughput (GFLOP/s)",
            "matrix size n (n x n matrices), log2 scale",
            "fp32",
            "bf16",
            "fp32 datasheet peak",
            "64",
            "1024",
            "4096",
        ] {
            assert!(t.contains(&want), "no text {want:?} in {t:?}");
        }
        assert!(!t.contains(&"bf16 datasheet peak"), "bf16 has no peak");
        assert!(
            !t.iter().any(|x| x.contains("TFLOP/s")),
            "CPU values stay in GFLOP/s"
        );
        // fp32's markers are circles: one per measured size, one in the legend.
        assert_eq!(svg.matches("<circle").count(), 11 + 1);
        assert!(svg.contains("<polyline"), "lines are drawn");
    }

    #[test]
    fn sweep_skips_points_it_cannot_place() {
        let mut s = sweep();
        s[0].points.push((8192, f64::NAN));
        s[1].points.push((0, 10.0));
        let svg = sweep_svg("t", &s).unwrap();
        assert_svg(&svg);
        assert_eq!(svg.matches("<circle").count(), 11 + 1);
        let empty = [SweepSeries {
            label: "fp32".into(),
            points: vec![(64, f64::INFINITY)],
            peak_gflops: None,
        }];
        assert!(sweep_svg("t", &empty).is_err());
    }

    #[test]
    fn a_gpu_sweep_is_drawn_in_tflops_with_its_peak() {
        let gpu = [SweepSeries {
            label: "bf16".into(),
            points: vec![(1024, 150_000.0), (4096, 600_000.0)],
            peak_gflops: Some(989_400.0),
        }];
        let svg = sweep_svg("H200", &gpu).unwrap();
        assert_svg(&svg);
        let t = texts(&svg);
        assert!(t.contains(&"throughput (TFLOP/s)"), "{t:?}");
        assert!(t.contains(&"bf16 datasheet peak"), "{t:?}");
        // The y axis reaches past the peak (989 TFLOP/s): a tick at 1000.
        assert!(t.contains(&"1000"), "{t:?}");
    }

    #[test]
    fn a_line_chart_places_every_line_and_its_level() {
        let lines = [Line {
            label: "copy on 2 threads".into(),
            points: vec![(24576.0, 250.0), (1048576.0, 70.0), (f64::NAN, 1.0)],
            level: Some(("a level".into(), 100.0)),
        }];
        let svg = log2_lines_svg(
            "ladder",
            "footprint",
            "GB/s",
            &|x| format!("{x:.0}"),
            &lines,
            SeriesLabelPosition::UpperRight,
        )
        .unwrap();
        assert_svg(&svg);
        let t = texts(&svg);
        for want in [
            "ladder",
            "footprint",
            "GB/s",
            "copy on 2 threads",
            "a level",
        ] {
            assert!(t.contains(&want), "{want} in {t:?}");
        }
    }
}
