//! The roofline model as SVG: achieved GFLOP/s against arithmetic intensity
//! (FLOP per byte moved), both on log axes, under the *measured* ceilings of
//! the file it is drawn from (the ladder's copy past the caches, the fastest
//! matmul), not a datasheet's: a point above the roof would say the ceiling
//! is wrong. Drawn with svg.rs's canvas, colours and fonts; a pure function:
//! data in, an SVG string out.

use anyhow::{bail, Result};
use plotters::prelude::*;

use super::svg::{canvas, colour, draw_error, frame, legend, SeriesLabelPosition, FONT};

/// The chart's coordinates: log10 on both axes.
type Chart<'a> = ChartContext<'a, SVGBackend<'a>, Cartesian2d<LogCoord<f64>, LogCoord<f64>>>;

/// One point of a roofline chart.
#[derive(Clone, Debug, PartialEq)]
pub struct RooflineDot {
    /// Printed beside the point: "add f32", "matmul 1024 bf16".
    pub label: String,
    /// A matrix product (drawn as a triangle) rather than a memory-bound op.
    pub matmul: bool,
    /// Arithmetic intensity: FLOP per byte read and written.
    pub flop_per_byte: f64,
    pub gflops: f64,
}

/// The roofline model as an SVG document: achieved GFLOP/s against FLOP per
/// byte, both on log10 axes, under the ceiling min(intensity x bandwidth,
/// compute) of the *measured* ceilings (`memory_gb_per_s`: GB/s x FLOP/byte =
/// GFLOP/s; `compute_gflops`: the fastest matmul, when one ran). Points that
/// are not finite and positive are left out.
pub fn roofline_svg(
    title: &str,
    memory_gb_per_s: f64,
    compute_gflops: Option<f64>,
    dots: &[RooflineDot],
) -> Result<String> {
    let dots: Vec<&RooflineDot> = dots
        .iter()
        .filter(|d| d.flop_per_byte.is_finite() && d.flop_per_byte > 0.0)
        .filter(|d| d.gflops.is_finite() && d.gflops > 0.0)
        .collect();
    if dots.is_empty() || !(memory_gb_per_s.is_finite() && memory_gb_per_s > 0.0) {
        bail!("nothing to plot: no finite, positive point or no memory ceiling");
    }
    let roof = Roof {
        memory_gb_per_s,
        compute: compute_gflops.filter(|c| c.is_finite() && *c > 0.0),
    };
    let fold = |f: fn(f64, f64) -> f64, init: f64, v: &dyn Fn(&RooflineDot) -> f64| {
        dots.iter().map(|d| v(d)).fold(init, f)
    };
    let x_lo = fold(f64::min, f64::INFINITY, &|d| d.flop_per_byte) / 4.0;
    let x_hi = fold(f64::max, 0.0, &|d| d.flop_per_byte) * 4.0;
    let y_lo = fold(f64::min, roof.at(x_lo), &|d| d.gflops) / 4.0;
    let y_hi = fold(f64::max, roof.at(x_hi), &|d| d.gflops) * 4.0;

    let mut svg = String::new();
    {
        let root = canvas(&mut svg)?;
        let mut chart = frame(&root, title)
            .build_cartesian_2d((x_lo..x_hi).log_scale(), (y_lo..y_hi).log_scale())
            .map_err(draw_error)?;
        chart
            .configure_mesh()
            .x_desc("arithmetic intensity (FLOP per byte moved), log scale")
            .y_desc("throughput (GFLOP/s), log scale")
            .x_label_formatter(&|x| format!("{x}"))
            .y_label_formatter(&|y| format!("{y}"))
            .axis_desc_style((FONT, 18))
            .label_style((FONT, 15))
            .light_line_style(WHITE)
            .draw()
            .map_err(draw_error)?;
        draw_roof(&mut chart, roof, x_lo, x_hi)?;
        for matmul in [false, true] {
            draw_dots(&mut chart, &dots, matmul)?;
        }
        legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
        root.present().map_err(draw_error)?;
    }
    Ok(svg)
}

/// The measured ceilings: memory's slope, and compute's flat top when a
/// matmul ran.
#[derive(Clone, Copy)]
struct Roof {
    memory_gb_per_s: f64,
    compute: Option<f64>,
}

impl Roof {
    /// The attainable GFLOP/s at `x` FLOP per byte: GB/s x FLOP/byte, capped
    /// by compute.
    fn at(self, x: f64) -> f64 {
        let memory = x * self.memory_gb_per_s;
        self.compute.map_or(memory, |c| c.min(memory))
    }
}

/// The roof from `x_lo` to `x_hi`: a slope up to the ridge, then flat at the
/// compute ceiling; its legend entry says both ceilings.
fn draw_roof(chart: &mut Chart<'_>, roof: Roof, x_lo: f64, x_hi: f64) -> Result<()> {
    let m = roof.memory_gb_per_s;
    let mut line = vec![(x_lo, roof.at(x_lo))];
    if let Some(c) = roof.compute {
        let ridge = c / m;
        if ridge > x_lo && ridge < x_hi {
            line.push((ridge, c));
        }
    }
    line.push((x_hi, roof.at(x_hi)));
    let black = colour(6);
    chart
        .draw_series(LineSeries::new(line, black.stroke_width(2)))
        .map_err(draw_error)?
        .label(match roof.compute {
            Some(c) => format!("measured ceilings: {m:.1} GB/s, {c:.1} GFLOP/s"),
            None => format!("measured memory ceiling: {m:.1} GB/s"),
        })
        .legend(move |at| {
            EmptyElement::at(at) + PathElement::new(vec![(0, 0), (24, 0)], black.stroke_width(2))
        });
    Ok(())
}

/// The matmul points (triangles) or the memory-bound ones (circles), each
/// with its label, and their legend entry; nothing when there are none.
fn draw_dots(chart: &mut Chart<'_>, dots: &[&RooflineDot], matmul: bool) -> Result<()> {
    let (label, c) = if matmul {
        ("matmul", colour(1))
    } else {
        ("memory-bound operations", colour(0))
    };
    let these: Vec<&&RooflineDot> = dots.iter().filter(|d| d.matmul == matmul).collect();
    if these.is_empty() {
        return Ok(());
    }
    let marker = move |p: (f64, f64)| -> DynElement<SVGBackend, (f64, f64)> {
        if matmul {
            TriangleMarker::new(p, 6, c.filled()).into_dyn()
        } else {
            Circle::new(p, 4, c.filled()).into_dyn()
        }
    };
    chart
        .draw_series(these.iter().map(|d| marker((d.flop_per_byte, d.gflops))))
        .map_err(draw_error)?
        .label(label)
        .legend(move |at| {
            let p = (at.0 + 12, at.1);
            if matmul {
                TriangleMarker::new(p, 6, c.filled()).into_dyn()
            } else {
                Circle::new(p, 4, c.filled()).into_dyn()
            }
        });
    chart
        .draw_series(these.iter().map(|d| {
            EmptyElement::at((d.flop_per_byte, d.gflops))
                + Text::new(d.label.clone(), (7, -7), (FONT, 12).into_font())
        }))
        .map_err(draw_error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roofline_draws_points_under_the_measured_ceilings() {
        let dots = [
            RooflineDot {
                label: "add f32".into(),
                matmul: false,
                flop_per_byte: 1.0 / 12.0,
                gflops: 0.6,
            },
            RooflineDot {
                label: "matmul 1024 fp32".into(),
                matmul: true,
                flop_per_byte: 170.7,
                gflops: 251.0,
            },
        ];
        let svg = roofline_svg("roofline", 11.1, Some(251.0), &dots).unwrap();
        for text in [
            "arithmetic intensity (FLOP per byte moved)",
            "throughput (GFLOP/s)",
            "add f32",
            "matmul 1024 fp32",
            "memory-bound operations",
            "measured ceilings: 11.1 GB/s, 251.0 GFLOP/s",
        ] {
            assert!(svg.contains(text), "{text}");
        }
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        // Nothing to draw: refused.
        assert!(roofline_svg("r", 11.1, None, &[]).is_err());
        assert!(roofline_svg("r", 0.0, None, &dots).is_err());
    }
}
