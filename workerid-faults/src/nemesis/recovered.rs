//! After a heal, the next fault waits until the healed clients issued
//! again: a fault that came first would cut their recovery short, and the
//! run would judge none (`network::liveness`).

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::time::Duration;

use super::inject::holds_now;
use super::Controller;
use crate::clock::mono_ns;
use crate::history::Event;
use crate::network::Heal;

/// A client that issued before a fault, and where its history stood then.
pub(super) struct Issuing {
    name: String,
    lab: Option<usize>,
    offset: u64,
}

impl Controller<'_> {
    /// The clients that hold a worker ID and are not paused, before a
    /// fault: those expected to issue again once it heals.
    pub(super) fn issuing(&self) -> Vec<Issuing> {
        self.clients
            .iter()
            .filter(|c| c.paused_until.is_none() && holds_now(&self.dir, &c.name))
            .map(|c| Issuing {
                name: c.name.clone(),
                lab: c.lab,
                offset: std::fs::metadata(self.dir.join(format!("{}.jsonl", c.name)))
                    .map_or(0, |m| m.len()),
            })
            .collect()
    }

    /// Waits until every client of `issuing` in a lab `heals` healed has
    /// issued an ID since its heal, has ended, or the recovery bound and a
    /// second more have passed since the last heal (or the run's end came),
    /// replacing clients that ended and thawing paused ones meanwhile, as
    /// the run's loop does.
    pub(super) fn wait_recovered(
        &mut self,
        heals: &[Heal],
        issuing: Vec<Issuing>,
    ) -> crate::Result<()> {
        let Some(last) = heals.iter().map(|h| h.at).max() else {
            return Ok(());
        };
        let bound = self.config.recovery_bound() + Duration::from_secs(1);
        let give_up = last.saturating_add(u64::try_from(bound.as_nanos()).unwrap_or(u64::MAX));
        let mut waiting: Vec<(Issuing, u64)> = issuing
            .into_iter()
            .filter_map(|client| {
                let since = heals
                    .iter()
                    .filter(|heal| client.lab == Some(heal.lab))
                    .map(|heal| heal.at)
                    .max()?;
                Some((client, since))
            })
            .collect();
        while !waiting.is_empty() && mono_ns() < give_up && mono_ns() < self.end.at() {
            std::thread::sleep(Duration::from_millis(20));
            self.resume_due(false);
            self.reap_and_replace()?;
            let (dir, clients) = (&self.dir, &self.clients);
            waiting.retain(|(client, since)| {
                clients.iter().any(|c| c.name == client.name)
                    && !issued_since(dir, &client.name, *since, client.offset)
            });
        }
        Ok(())
    }
}

/// Whether client `name`'s history, from byte `offset` on, records IDs
/// issued at or after `since` (ns).
fn issued_since(dir: &Path, name: &str, since: u64, offset: u64) -> bool {
    let Ok(mut file) = std::fs::File::open(dir.join(format!("{name}.jsonl"))) else {
        return false;
    };
    let mut written = Vec::new();
    if file.seek(SeekFrom::Start(offset)).is_err() || file.read_to_end(&mut written).is_err() {
        return false;
    }
    String::from_utf8_lossy(&written)
        .lines()
        .filter(|line| line.contains("\"t\":\"ids\""))
        .any(|line| matches!(serde_json::from_str(line), Ok(Event::Ids { t0, .. }) if t0 >= since))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_found_after_the_offset_and_the_instant() {
        let dir = tempfile::tempdir().unwrap();
        let ids = |t0: u64| {
            serde_json::to_string(&Event::Ids {
                lease: 0,
                t0,
                tl: t0,
                t1: t0,
                deadline: t0 + 10,
                window_end: 0,
                ids: vec![t0],
            })
            .unwrap()
        };
        let lost = serde_json::to_string(&Event::Lost {
            lease: 0,
            at: 50,
            reason: "expired".into(),
        })
        .unwrap();
        let first = format!("{}\n", ids(10));
        let text = format!("{first}{lost}\n{}\n{}", ids(40), ids(60));
        std::fs::write(dir.path().join("c000.jsonl"), &text).unwrap();
        let offset = first.len() as u64;
        assert!(issued_since(dir.path(), "c000", 60, 0));
        assert!(!issued_since(dir.path(), "c000", 61, 0));
        assert!(issued_since(dir.path(), "c000", 10, 0));
        assert!(!issued_since(dir.path(), "c000", 5, text.len() as u64));
        // From the offset on, the IDs at 40 and 60 are there, not those at 10.
        assert!(issued_since(dir.path(), "c000", 40, offset));
        assert!(!issued_since(dir.path(), "c001", 0, 0));
    }
}
