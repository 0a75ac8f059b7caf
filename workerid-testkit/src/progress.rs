//! Progress of the long commands (the scale run, the fault soaks, the
//! report): a bar on stderr, drawn only when stderr is a terminal, so a
//! run whose output is piped or recorded prints nothing more.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressFinish, ProgressStyle};

/// A progress bar; cleared when dropped.
#[derive(Debug)]
pub struct Progress {
    bar: ProgressBar,
    stop: Arc<AtomicBool>,
    ticker: Option<JoinHandle<()>>,
}

fn style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar())
}

impl Progress {
    /// A bar of `steps` steps, named `what`.
    pub fn steps(steps: u64, what: &str) -> Progress {
        let bar = ProgressBar::new(steps)
            .with_style(style(
                "{elapsed_precise} [{bar:30}] {pos}/{len} {prefix}: {msg}",
            ))
            .with_prefix(what.to_owned())
            .with_finish(ProgressFinish::AndClear);
        bar.enable_steady_tick(Duration::from_secs(1));
        Progress {
            bar,
            stop: Arc::new(AtomicBool::new(false)),
            ticker: None,
        }
    }

    /// A bar that fills over `length` of wall time (a run of a set
    /// duration), named `what`.
    pub fn timed(length: Duration, what: &str) -> Progress {
        let secs = length.as_secs().max(1);
        let bar = ProgressBar::new(secs)
            .with_style(style(
                "{elapsed_precise} [{bar:30}] {pos}/{len} s {prefix}: {msg}",
            ))
            .with_prefix(what.to_owned())
            .with_finish(ProgressFinish::AndClear);
        let stop = Arc::new(AtomicBool::new(false));
        let ticker = (!bar.is_hidden()).then(|| {
            let (bar, stop) = (bar.clone(), stop.clone());
            let started = Instant::now();
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    bar.set_position(started.elapsed().as_secs().min(secs));
                    std::thread::sleep(Duration::from_millis(250));
                }
            })
        });
        Progress { bar, stop, ticker }
    }

    /// Says what is happening now.
    pub fn message(&self, message: impl Into<String>) {
        self.bar.set_message(message.into());
    }

    /// One step done.
    pub fn step(&self) {
        self.bar.inc(1);
    }

    /// Moves to step `position`.
    pub fn set_step(&self, position: u64) {
        self.bar.set_position(position);
    }

    /// Prints `line` on stdout without tearing the bar.
    pub fn println(&self, line: impl AsRef<str>) {
        self.bar.suspend(|| println!("{}", line.as_ref()));
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(ticker) = self.ticker.take() {
            let _ = ticker.join();
        }
    }
}
