//! A fault run over time: when each fault began and ended, and every
//! answered request (a service run) or batch of IDs (a library run), drawn
//! as an SVG with the fault windows shaded.

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::history::{ClientHistory, Event};
use crate::{FaultsError, Result};

/// One fault, from its start to its end (`CLOCK_MONOTONIC` ns).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultWindow {
    /// The fault's kind.
    pub kind: String,
    /// When it began.
    pub began: u64,
    /// When it ended (the process started or thawed again, the link healed).
    pub ended: u64,
    /// Whom it held up.
    pub touched: Touched,
}

/// Whom a fault held up: a fault elsewhere leaves a client free to issue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Touched {
    /// Every client: a fault of the store, or of every lab's network.
    Everyone,
    /// The clients of one network lab.
    Lab(usize),
    /// One client (killed, paused, its clock stepped), by name.
    Client(String),
}

impl FaultWindow {
    /// Whether the fault held up the client `client`, of network lab `lab`
    /// (`None` in a run without labs).
    ///
    /// ```
    /// use workerid_faults::timeline::{FaultWindow, Touched};
    ///
    /// let pause = FaultWindow {
    ///     kind: "PauseClient".into(),
    ///     began: 0,
    ///     ended: 5,
    ///     touched: Touched::Client("c001".into()),
    /// };
    /// assert!(pause.touches("c001", Some(1)));
    /// assert!(!pause.touches("c002", Some(1)));
    /// let cut = FaultWindow { touched: Touched::Lab(1), ..pause };
    /// assert!(cut.touches("c002", Some(1)) && !cut.touches("c003", Some(0)));
    /// ```
    pub fn touches(&self, client: &str, lab: Option<usize>) -> bool {
        match &self.touched {
            Touched::Everyone => true,
            Touched::Lab(of) => lab == Some(*of),
            Touched::Client(name) => name == client,
        }
    }
}

/// One request a client got IDs for (`CLOCK_MONOTONIC` ns).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Request {
    /// Just before it was written.
    pub sent: u64,
    /// Just after its answer was read.
    pub received: u64,
}

/// A run's faults, and its answered requests (a service run) or the IDs
/// its clients issued (a library run), from `began`.
#[derive(Debug, Clone, Default)]
pub struct Timeline {
    /// When the run began.
    pub began: u64,
    /// When it ended.
    pub ended: u64,
    /// Its faults, in order.
    pub faults: Vec<FaultWindow>,
    /// A service run's answered requests, by send time.
    pub requests: Vec<Request>,
    /// A library run's batches of IDs: when each batch ended, and how many
    /// IDs it had.
    pub issued: Vec<(u64, u64)>,
}

/// One line of a chart: its name, colour and points.
type Line<'a> = (&'a str, RGBColor, Vec<(f64, f64)>);

/// The width of a bucket of the plot, in seconds.
const BUCKET: f64 = 0.5;

fn plot_error(e: impl std::fmt::Display) -> FaultsError {
    FaultsError::Io {
        path: "plot.svg".into(),
        source: std::io::Error::other(e.to_string()),
    }
}

impl Timeline {
    /// A library run's timeline: its faults, and the IDs of the clients'
    /// histories.
    pub fn of_histories(
        began: u64,
        ended: u64,
        faults: Vec<FaultWindow>,
        histories: &[ClientHistory],
    ) -> Timeline {
        let issued = histories
            .iter()
            .flat_map(|h| &h.events)
            .filter_map(|e| match e {
                Event::Ids { t1, ids, .. } => Some((*t1, ids.len() as u64)),
                _ => None,
            })
            .collect();
        Timeline {
            began,
            ended,
            faults,
            requests: Vec::new(),
            issued,
        }
    }

    fn seconds(&self, at: u64) -> f64 {
        at.saturating_sub(self.began) as f64 / 1e9
    }

    fn bucket_count(&self) -> usize {
        (self.seconds(self.ended).max(BUCKET) / BUCKET).ceil() as usize
    }

    /// IDs issued per second, per bucket of [`BUCKET`] seconds.
    fn issued_per_second(&self) -> Vec<(f64, f64)> {
        let count = self.bucket_count();
        let mut ids = vec![0u64; count];
        for &(at, n) in &self.issued {
            ids[((self.seconds(at) / BUCKET) as usize).min(count - 1)] += n;
        }
        ids.into_iter()
            .enumerate()
            .map(|(i, n)| (i as f64 * BUCKET, n as f64 / BUCKET))
            .collect()
    }

    /// Per bucket of [`BUCKET`] seconds: its start, its requests per
    /// second, and the worst and median latency (ms) of its requests.
    fn buckets(&self) -> Vec<(f64, f64, f64, f64)> {
        let count = self.bucket_count();
        let mut latencies: Vec<Vec<f64>> = vec![Vec::new(); count];
        for r in &self.requests {
            let i = ((self.seconds(r.sent) / BUCKET) as usize).min(count - 1);
            latencies[i].push(r.received.saturating_sub(r.sent) as f64 / 1e6);
        }
        latencies
            .into_iter()
            .enumerate()
            .map(|(i, mut l)| {
                l.sort_by(f64::total_cmp);
                let worst = l.last().copied().unwrap_or(0.0);
                let median = l.get(l.len() / 2).copied().unwrap_or(0.0);
                (i as f64 * BUCKET, l.len() as f64 / BUCKET, worst, median)
            })
            .collect()
    }

    /// The SVG: answered requests per second, and their worst and median
    /// latency, against the run's seconds, with every fault's window
    /// shaded and named.
    ///
    /// # Errors
    /// [`FaultsError::Io`] when the drawing fails.
    pub fn svg(&self) -> Result<String> {
        let end = self.seconds(self.ended).max(BUCKET);
        let mut svg = String::new();
        if self.requests.is_empty() {
            let root = SVGBackend::with_string(&mut svg, (1100, 330)).into_drawing_area();
            root.fill(&WHITE).map_err(plot_error)?;
            let issued = self.issued_per_second();
            let most = issued.iter().map(|b| b.1).fold(1.0, f64::max);
            self.chart(
                &root,
                "IDs issued per second, all clients (per 0.5 s)",
                end,
                most * 1.15,
                vec![("issued", BLACK, issued)],
            )?;
            root.present().map_err(plot_error)?;
            drop(root);
            return Ok(svg);
        }
        let buckets = self.buckets();
        {
            let root = SVGBackend::with_string(&mut svg, (1100, 620)).into_drawing_area();
            root.fill(&WHITE).map_err(plot_error)?;
            let (top, bottom) = root.split_vertically(330);
            let answered: Vec<_> = buckets.iter().filter(|b| b.1 > 0.0).collect();
            let slowest = answered.iter().map(|b| b.2).fold(1.0, f64::max);
            let worst = answered.iter().map(|b| (b.0, b.2)).collect();
            let median = answered.iter().map(|b| (b.0, b.3)).collect();
            self.chart(
                &top,
                "Request latency, ms (per 0.5 s)",
                end,
                slowest * 1.15,
                vec![("worst", RED, worst), ("median", BLUE, median)],
            )?;
            let most = buckets.iter().map(|b| b.1).fold(1.0, f64::max);
            let rate = buckets.iter().map(|b| (b.0, b.1)).collect();
            self.chart(
                &bottom,
                "Requests answered per second",
                end,
                most * 1.15,
                vec![("answered", BLACK, rate)],
            )?;
            root.present().map_err(plot_error)?;
        }
        Ok(svg)
    }

    /// One chart of `lines` over the run's seconds, the faults shaded
    /// behind them and named at the top.
    fn chart(
        &self,
        area: &DrawingArea<SVGBackend<'_>, Shift>,
        title: &str,
        end: f64,
        top: f64,
        lines: Vec<Line<'_>>,
    ) -> Result<()> {
        let mut chart = ChartBuilder::on(area)
            .caption(title, ("sans-serif", 17))
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..end, 0.0..top)
            .map_err(plot_error)?;
        chart
            .configure_mesh()
            .x_desc("seconds")
            .draw()
            .map_err(plot_error)?;
        for f in &self.faults {
            let a = self.seconds(f.began);
            let b = self.seconds(f.ended).max(a + 0.1);
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(a, 0.0), (b, top)],
                    RGBColor(255, 150, 150).mix(0.35).filled(),
                )))
                .map_err(plot_error)?;
            chart
                .draw_series(std::iter::once(Text::new(
                    f.kind.clone(),
                    (a, top),
                    ("sans-serif", 11).into_font().color(&RGBColor(150, 0, 0)),
                )))
                .map_err(plot_error)?;
        }
        for (name, color, points) in lines {
            chart
                .draw_series(LineSeries::new(points, color.stroke_width(2)))
                .map_err(plot_error)?
                .label(name)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(plot_error)?;
        Ok(())
    }
}
