//! After a heal, the next fault waits until the healed clients issued
//! again: a fault that came first would cut their recovery short, and the
//! run would judge none (`network::liveness`).

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::time::Duration;

use super::Controller;
use crate::clock::mono_ns;
use crate::history::Event;
use crate::network::Heal;

impl Controller<'_> {
    /// Waits until every client of the labs `heals` healed that ran then
    /// has issued an ID since its heal, or the recovery bound and a second
    /// more have passed since the last of them, replacing clients that
    /// ended and thawing paused ones meanwhile, as the run's loop does.
    pub(super) fn wait_recovered(&mut self, heals: &[Heal]) -> crate::Result<()> {
        let Some(last) = heals.iter().map(|h| h.at).max() else {
            return Ok(());
        };
        let bound = self.config.recovery_bound() + Duration::from_secs(1);
        let give_up = last.saturating_add(u64::try_from(bound.as_nanos()).unwrap_or(u64::MAX));
        // Each client's history from where it stood at the heal: what it
        // wrote since then is all that needs reading.
        let mut waiting: Vec<(String, u64, u64)> = heals
            .iter()
            .flat_map(|heal| {
                self.clients
                    .iter()
                    .filter(move |c| c.lab == Some(heal.lab))
                    .map(move |c| (c.name.clone(), heal.at))
            })
            .map(|(name, since)| {
                let offset = std::fs::metadata(self.dir.join(format!("{name}.jsonl")))
                    .map_or(0, |m| m.len());
                (name, since, offset)
            })
            .collect();
        while !waiting.is_empty() && mono_ns() < give_up && mono_ns() < self.until {
            std::thread::sleep(Duration::from_millis(20));
            self.resume_due(false);
            self.reap_and_replace()?;
            let dir = &self.dir;
            waiting.retain(|(name, since, offset)| !issued_since(dir, name, *since, *offset));
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
