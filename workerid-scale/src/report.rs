//! Text for people: a line per step while the ramp runs, and the markdown
//! tables of the README's "Sizing" section.

use std::fmt::Write;
use std::time::Duration;

use crate::run::{Settings, Step, Window};
use crate::stores::StoreKind;

/// A duration as µs below 10 ms, else ms.
pub fn latency(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us < 10_000.0 {
        format!("{us:.0} µs")
    } else {
        format!("{:.1} ms", us / 1000.0)
    }
}

/// Bytes in KiB, MiB or GiB.
pub fn bytes(b: f64) -> String {
    const K: f64 = 1024.0;
    if b < K * K {
        format!("{:.1} KiB", b / K)
    } else if b < K * K * K {
        format!("{:.0} MiB", b / K / K)
    } else {
        format!("{:.2} GiB", b / K / K / K)
    }
}

fn cpu(c: Option<f64>) -> String {
    c.map(|c| format!("{c:.0} %"))
        .unwrap_or_else(|| "in client".into())
}

/// CPU time (`cpu`, in % of a core) per renewal confirmed in `w`.
fn per_renewal(cpu: f64, w: &Window) -> String {
    let us = cpu / 100.0 / w.renews_per_sec.max(1e-9) * 1e6;
    format!("{us:.0} µs")
}

/// The store's CPU in `w`, as a share of a core and per renewal.
fn store_cpu(w: &Window) -> String {
    match w.store_cpu {
        Some(c) => format!("{} ({} per renewal)", cpu(Some(c)), per_renewal(c, w)),
        None => cpu(None),
    }
}

/// Disk syncs per renewal in a window, or why there is no figure.
fn syncs_per_renewal(w: &Window) -> String {
    match w.disk_syncs {
        Some(syncs) if w.renews > 0 => format!("{:.2}", syncs as f64 / w.renews as f64),
        Some(_) => "no renewals".into(),
        None => "not counted".into(),
    }
}

fn memory(m: Option<u64>) -> String {
    m.map(|m| bytes(m as f64))
        .unwrap_or_else(|| "in client".into())
}

/// One line about a finished step.
pub fn step_line(kind: StoreKind, step: &Step) -> String {
    let s = &step.steady;
    let mut line = format!(
        "{}: {} workers ({} live, {} namespaces), joined in {:.1} s ({} lapses meanwhile); \
         steady {:.1} s: \
         {} renewals, {:.0}/s of {:.0} expected, renew p50 {} p99 {} max {}, store CPU {} memory {}, \
         disk syncs per renewal {}, client CPU {:.0} %, {} per worker, {} lapses, {} failed renewals, load {:.1}",
        kind.title(),
        step.workers,
        step.live,
        step.namespaces,
        step.join_time.as_secs_f64(),
        step.join_lapses,
        s.elapsed.as_secs_f64(),
        s.renews,
        s.renews_per_sec,
        step.expected_renews_per_sec,
        latency(s.p50),
        latency(s.p99),
        latency(s.max),
        store_cpu(s),
        memory(s.store_memory),
        syncs_per_renewal(s),
        s.client_cpu,
        bytes(step.client_bytes_per_worker),
        s.lapses,
        s.renew_failures,
        s.load,
    );
    if let Some(c) = &step.churn {
        let _ = write!(
            line,
            "; churn {:.0} s: {} cycles, {} stopped and {} joined (stops {} a cycle, join p50 {} p99 {}), \
             {:.0} renews/s, renew p99 {}, store CPU {}, {} lapses, {} failed joins",
            c.window.elapsed.as_secs_f64(),
            c.cycles,
            c.stopped,
            c.joined,
            latency(c.mean_stop),
            latency(c.join_p50),
            latency(c.join_p99),
            c.window.renews_per_sec,
            latency(c.window.p99),
            cpu(c.window.store_cpu),
            c.window.lapses,
            c.join_failures,
        );
    }
    let _ = write!(line, " => {}", verdict(step));
    if !step.held() && !step.reasons.is_empty() {
        let _ = write!(line, " (first reasons: {})", step.reasons.join("; "));
    }
    line
}

fn verdict(step: &Step) -> String {
    if step.held() {
        return "held".into();
    }
    let mut why = Vec::new();
    let lapses =
        step.join_lapses + step.steady.lapses + step.churn.as_ref().map_or(0, |c| c.window.lapses);
    if lapses > 0 {
        why.push(format!("{lapses} lapses"));
    }
    if step.behind {
        why.push(format!(
            "behind ({:.0}/s of {:.0})",
            step.steady.renews_per_sec, step.expected_renews_per_sec
        ));
    }
    let failed = step.join_failures + step.churn.as_ref().map_or(0, |c| c.join_failures);
    if failed > 0 {
        why.push(format!("{failed} failed joins"));
    }
    format!("NOT held: {}", why.join(", "))
}

/// The header of the summary table.
pub fn summary_header(settings: &Settings) -> String {
    format!(
        "| store | workers held at ttl {:.0} s, no lapse | renews/s | store CPU (% of a core) | \
         store CPU per renewal | disk syncs per renewal | store memory | p99 renew | client memory per worker | \
         client CPU per renewal | churn ({:.0} % every {:.0} s) | limit |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        settings.ttl.as_secs_f64(),
        settings.churn_fraction * 100.0,
        settings.churn_every.as_secs_f64(),
    )
}

/// One row of the summary table: the largest step held, and why the ramp ended.
pub fn summary_row(kind: StoreKind, steps: &[Step]) -> String {
    let held = steps.iter().rev().find(|s| s.held());
    let limit = match steps.last() {
        Some(last) if !last.held() => format!("at {}: {}", last.workers, verdict(last)),
        Some(_) => "not reached (ramp ended)".into(),
        None => "no step ran".into(),
    };
    let Some(s) = held else {
        return format!("| {} | none | | | | | | | | | | {limit} |", kind.title());
    };
    let store_per_renewal = s
        .steady
        .store_cpu
        .map(|c| per_renewal(c, &s.steady))
        .unwrap_or_else(|| "in client".into());
    let churn = match &s.churn {
        Some(c) => format!(
            "0 lapses; {} rejoined, join p99 {}, renew p99 {}",
            c.joined,
            latency(c.join_p99),
            latency(c.window.p99)
        ),
        None => "not run".into(),
    };
    let reached = if steps.last().is_some_and(Step::held) {
        "≥ "
    } else {
        ""
    };
    format!(
        "| {} | {reached}{} | {:.0} | {} | {store_per_renewal} | {} | {} | {} | {} | {} \
         | {churn} | {limit} |",
        kind.title(),
        s.workers,
        s.steady.renews_per_sec,
        cpu(s.steady.store_cpu),
        syncs_per_renewal(&s.steady),
        memory(s.steady.store_memory),
        latency(s.steady.p99),
        bytes(s.client_bytes_per_worker),
        per_renewal(s.steady.client_cpu, &s.steady),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(latency(Duration::from_micros(420)), "420 µs");
        assert_eq!(latency(Duration::from_millis(25)), "25.0 ms");
        assert_eq!(bytes(2048.0), "2.0 KiB");
        assert_eq!(bytes(3.0 * 1024.0 * 1024.0), "3 MiB");
        let window = Window {
            renews_per_sec: 3000.0,
            store_cpu: Some(25.0),
            ..Window::default()
        };
        assert_eq!(store_cpu(&window), "25 % (83 µs per renewal)");
        let in_client = Window {
            store_cpu: None,
            ..window
        };
        assert_eq!(store_cpu(&in_client), "in client");
    }

    #[test]
    fn a_row_without_steps_says_so() {
        assert!(summary_row(StoreKind::Redis, &[]).contains("no step ran"));
        let held = Step {
            workers: 1000,
            ..Step::default()
        };
        let row = summary_row(StoreKind::Redis, &[held]);
        assert!(row.contains("≥ 1000"), "{row}");
    }
}
