//! The picture of a scale run: renewals per second held against live
//! workers (beside the rate the workers ask for), and the renew p99, one
//! line per store, as an SVG next to the run's markdown.

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::run::Step;
use crate::stores::StoreKind;
use crate::Error;

/// The steps of one store's ramp.
pub type Ramp = (StoreKind, Vec<Step>);

fn plot_error(e: impl std::fmt::Display) -> Error {
    Error::Io(std::io::Error::other(format!("plot: {e}")))
}

/// The SVG of `ramps`: two charts, renewals per second and renew p99,
/// against live workers on a log scale.
///
/// # Errors
/// [`Error::Io`] when there is nothing to draw or the drawing fails.
pub fn svg(ramps: &[Ramp]) -> Result<String, Error> {
    let points: Vec<&Step> = ramps
        .iter()
        .flat_map(|(_, s)| s)
        .filter(|s| s.live > 0)
        .collect();
    if points.is_empty() {
        return Err(plot_error("no step with live workers"));
    }
    let workers = points.iter().map(|s| s.live as f64);
    let (low, high) = workers.fold((f64::MAX, 0.0_f64), |(l, h), w| (l.min(w), h.max(w)));
    let x = (low * 0.8)..(high * 1.25);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (1100, 440)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_error)?;
        let (left, right) = root.split_horizontally(550);
        let rate = |s: &Step| s.steady.renews_per_sec.max(f64::MIN_POSITIVE);
        let top = points
            .iter()
            .map(|s| rate(s).max(s.expected_renews_per_sec))
            .fold(1.0, f64::max);
        chart(
            &left,
            "Renewals per second held",
            "renewals / s",
            x.clone(),
            (top / 1000.0).max(0.1)..(top * 1.5),
            ramps,
            rate,
            Some(|s: &Step| s.expected_renews_per_sec),
        )?;
        let p99 = |s: &Step| (s.steady.p99.as_secs_f64() * 1e3).max(0.01);
        let slowest = points.iter().map(|s| p99(s)).fold(0.01, f64::max);
        chart(
            &right,
            "Renew p99 (steady window)",
            "ms",
            x,
            0.01..(slowest * 1.5),
            ramps,
            p99,
            None::<fn(&Step) -> f64>,
        )?;
        root.present().map_err(plot_error)?;
    }
    Ok(svg)
}

#[allow(clippy::too_many_arguments)]
fn chart(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    title: &str,
    y_desc: &str,
    x: std::ops::Range<f64>,
    y: std::ops::Range<f64>,
    ramps: &[Ramp],
    value: impl Fn(&Step) -> f64,
    asked: Option<impl Fn(&Step) -> f64>,
) -> Result<(), Error> {
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(x.log_scale(), y.log_scale())
        .map_err(plot_error)?;
    chart
        .configure_mesh()
        .x_desc("live workers")
        .y_desc(y_desc)
        .draw()
        .map_err(plot_error)?;
    for (i, (kind, steps)) in ramps.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let line: Vec<(f64, f64)> = steps
            .iter()
            .filter(|s| s.live > 0)
            .map(|s| (s.live as f64, value(s)))
            .collect();
        chart
            .draw_series(LineSeries::new(line.clone(), color.stroke_width(2)))
            .map_err(plot_error)?
            .label(kind.title())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
        chart
            .draw_series(line.iter().map(|&p| Circle::new(p, 3, color.filled())))
            .map_err(plot_error)?;
        if let Some(asked) = &asked {
            let line = steps
                .iter()
                .filter(|s| s.live > 0)
                .map(|s| (s.live as f64, asked(s)));
            let series = chart
                .draw_series(DashedLineSeries::new(line, 4, 4, BLACK.mix(0.5).into()))
                .map_err(plot_error)?;
            if i == 0 {
                series
                    .label("asked for (workers / renew period)")
                    .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK.mix(0.5)));
            }
        }
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(plot_error)?;
    Ok(())
}
