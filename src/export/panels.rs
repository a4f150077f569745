//! Bar panels side by side, as SVG: one panel per measure (prompt processing's
//! and generation's tokens/s, for `generate`), one bar per category
//! (precision) with its value on top ("n/a" where there is none), each panel
//! on its own y axis from zero (pp and tg differ by an order of magnitude on a
//! GPU), and per bar an optional dashed mark with its value (a bound the bar
//! is held against). Drawn with svg.rs's canvas, colours, fonts and labels; a
//! pure function: data in, an SVG string out.

use anyhow::{bail, Result};
use plotters::coord::Shift;
use plotters::prelude::*;

use super::svg::{canvas, category_at, colour, draw_error, value_label, value_style, FONT, GREY};

/// One panel: a measure's value per category, and its marks.
#[derive(Clone, Debug, PartialEq)]
pub struct Panel {
    /// The panel's caption, e.g. "generation (tg32)".
    pub title: String,
    /// One value per category; `None` where the category has none.
    pub values: Vec<Option<f64>>,
    /// A dashed mark per category over its bar (empty: no marks); `None`
    /// where a category has no mark.
    pub marks: Vec<Option<f64>>,
    /// What a mark is, written before its value: "bound".
    pub mark_label: String,
}

/// `panels` side by side under `title`, the y axes in `unit`.
pub fn panels_svg(
    title: &str,
    unit: &str,
    categories: &[String],
    panels: &[Panel],
) -> Result<String> {
    check(categories, panels)?;
    let mut svg = String::new();
    {
        let root = canvas(&mut svg)?;
        let root = root.titled(title, (FONT, 22)).map_err(draw_error)?;
        let areas = root.split_evenly((1, panels.len()));
        for (k, (area, p)) in areas.iter().zip(panels).enumerate() {
            panel(area, k, unit, categories, p)?;
        }
        root.present().map_err(draw_error)?;
    }
    Ok(svg)
}

/// A value that can be drawn: finite and above zero (a log of nothing, a
/// zero bar, would say what was not measured).
fn valid(v: &Option<f64>) -> Option<f64> {
    v.filter(|g| g.is_finite() && *g > 0.0)
}

/// Refuses what cannot be drawn: no categories or panels, a panel whose
/// values or marks do not match the categories, or no value to draw at all.
fn check(categories: &[String], panels: &[Panel]) -> Result<()> {
    if categories.is_empty() || panels.is_empty() {
        bail!("nothing to plot: no categories or no panels");
    }
    for p in panels {
        let marks_ok = p.marks.is_empty() || p.marks.len() == categories.len();
        if p.values.len() != categories.len() || !marks_ok {
            bail!(
                "panel '{}' has {} values and {} marks for {} categories",
                p.title,
                p.values.len(),
                p.marks.len(),
                categories.len()
            );
        }
    }
    if !panels
        .iter()
        .any(|p| p.values.iter().any(|v| valid(v).is_some()))
    {
        bail!("nothing to plot: no finite, positive value");
    }
    Ok(())
}

/// Panel `k` in `area`: its axes from zero, a bar per category with its
/// value, "n/a" where it has none, and its dashed marks.
fn panel(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    k: usize,
    unit: &str,
    categories: &[String],
    p: &Panel,
) -> Result<()> {
    let ncat = categories.len();
    let y_hi = p
        .values
        .iter()
        .chain(&p.marks)
        .filter_map(valid)
        .fold(0.0, f64::max);
    if y_hi <= 0.0 {
        return Ok(());
    }
    let mut chart = ChartBuilder::on(area)
        .caption(&p.title, (FONT, 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(64)
        // Headroom for the labels above the bars and marks.
        .build_cartesian_2d(-0.5..ncat as f64 - 0.5, 0.0..y_hi * 1.2)
        .map_err(draw_error)?;
    let category = |x: &f64| category_at(categories, *x);
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(ncat + 1)
        .x_label_formatter(&category)
        .y_label_formatter(&|g| format!("{g:.0}"))
        .y_desc(unit)
        .axis_desc_style((FONT, 16))
        .label_style((FONT, 14))
        .light_line_style(WHITE)
        .draw()
        .map_err(draw_error)?;
    let c = colour(k);
    let bars: Vec<(f64, f64)> = p
        .values
        .iter()
        .enumerate()
        .filter_map(|(i, v)| valid(v).map(|g| (i as f64, g)))
        .collect();
    chart
        .draw_series(
            bars.iter()
                .map(|&(x, g)| Rectangle::new([(x - 0.3, 0.0), (x + 0.3, g)], c.filled())),
        )
        .map_err(draw_error)?;
    chart
        .draw_series(
            bars.iter()
                .map(|&(x, g)| Text::new(value_label(g), (x, g), value_style(&BLACK))),
        )
        .map_err(draw_error)?;
    // A missing value is not a zero: say so where its bar would stand.
    let missing = (0..ncat).filter(|&i| valid(&p.values[i]).is_none());
    chart
        .draw_series(missing.map(|i| Text::new("n/a", (i as f64, 0.0), value_style(&GREY))))
        .map_err(draw_error)?;
    for (i, m) in p.marks.iter().enumerate() {
        let Some(m) = valid(m) else { continue };
        let ends = [(i as f64 - 0.4, m), (i as f64 + 0.4, m)];
        chart
            .draw_series(DashedLineSeries::new(ends, 6, 4, BLACK.stroke_width(2)))
            .map_err(draw_error)?;
        let label = format!("{} {}", p.mark_label, value_label(m));
        chart
            .draw_series([Text::new(label, (i as f64, m), value_style(&BLACK))])
            .map_err(draw_error)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cats() -> Vec<String> {
        ["q4_1", "fp32"].map(String::from).into()
    }

    #[test]
    fn panels_refuse_mismatched_or_empty_data() {
        let p = |values: Vec<Option<f64>>, marks: Vec<Option<f64>>| Panel {
            title: "t".into(),
            values,
            marks,
            mark_label: "bound".into(),
        };
        assert!(panels_svg("t", "tokens/s", &cats(), &[p(vec![Some(1.0)], vec![])]).is_err());
        let two = vec![Some(1.0), Some(2.0)];
        assert!(panels_svg("t", "tokens/s", &cats(), &[p(two.clone(), vec![None])]).is_err());
        assert!(panels_svg("t", "tokens/s", &[], &[p(two, vec![])]).is_err());
        assert!(panels_svg("t", "tokens/s", &cats(), &[p(vec![None, None], vec![])]).is_err());
    }
}
