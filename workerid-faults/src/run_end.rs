//! The instant a run's clients stop. The controller moves it later while
//! the first round of faults (every fault once) is not done, so that a slow
//! round never ends the run with a fault left out; client processes read it
//! from a file of the run's directory, and only once the instant they know
//! has passed, so a check costs one clock read.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::clock::mono_ns;
use crate::nemesis::nanos;
use crate::{io_error, Result};

/// When a run ends, as a client sees it: a `CLOCK_MONOTONIC` instant (ns),
/// fixed, or kept in a file that the controller moves only later.
#[derive(Debug, Clone)]
pub struct RunEnd {
    known: Arc<AtomicU64>,
    file: Option<PathBuf>,
}

impl RunEnd {
    /// An end that never moves.
    pub fn fixed(at: u64) -> RunEnd {
        RunEnd {
            known: Arc::new(AtomicU64::new(at)),
            file: None,
        }
    }

    /// The end kept in `file` (which the run's controller moves), read now.
    ///
    /// # Errors
    /// [`FaultsError::Io`](crate::FaultsError::Io) when the file cannot be
    /// read or holds no instant.
    pub fn following(file: &Path) -> Result<RunEnd> {
        let at = read_end(file)?;
        Ok(RunEnd {
            known: Arc::new(AtomicU64::new(at)),
            file: Some(file.to_path_buf()),
        })
    }

    /// The end as last read.
    pub fn at(&self) -> u64 {
        self.known.load(Ordering::Acquire)
    }

    /// Whether the run has ended: the end as last read has passed, and, for
    /// an end kept in a file, the file says no later one. A file that
    /// cannot be read ends the run at the end last read.
    pub fn passed(&self) -> bool {
        let now = mono_ns();
        if now < self.at() {
            return false;
        }
        if let Some(at) = self.file.as_deref().and_then(|f| read_end(f).ok()) {
            self.known.fetch_max(at, Ordering::AcqRel);
        }
        now >= self.at()
    }
}

fn read_end(file: &Path) -> Result<u64> {
    let text = std::fs::read_to_string(file).map_err(io_error(file))?;
    text.trim().parse().map_err(|_| {
        io_error(file)(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("not an instant: {text:?}"),
        ))
    })
}

/// Writes `at` to `file` at once for every reader: through a file beside it
/// and a rename.
fn write_end(file: &Path, at: u64) -> Result<()> {
    let next = file.with_extension("next");
    std::fs::write(&next, at.to_string()).map_err(io_error(&next))?;
    std::fs::rename(&next, file).map_err(io_error(file))
}

/// The controller's side of a [`RunEnd`] kept in a file: a thread that
/// keeps the end at least `ahead` later than now, never past `cap`, until
/// [`finish`](EndKeeper::finish). The thread, not the controller's loop,
/// moves it, since that loop waits out every fault and every recovery,
/// and a client that reads the file after the end it holds has passed
/// stops for good.
#[derive(Debug)]
pub(crate) struct EndKeeper {
    end: RunEnd,
    planned: u64,
    done: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// How often the keeper's thread looks at the end.
const KEEPER_PERIOD: Duration = Duration::from_millis(100);

impl EndKeeper {
    /// Writes the end `at` to `file` and starts keeping it `ahead` of now
    /// (`ahead` well over [`KEEPER_PERIOD`]), up to `cap`.
    ///
    /// # Errors
    /// [`FaultsError::Io`](crate::FaultsError::Io) when the file cannot be
    /// written.
    pub(crate) fn start(file: &Path, at: u64, ahead: Duration, cap: u64) -> Result<EndKeeper> {
        write_end(file, at)?;
        let end = RunEnd::following(file)?;
        let done = Arc::new(AtomicBool::new(false));
        let (keep, stop, file) = (end.clone(), done.clone(), file.to_path_buf());
        let thread = std::thread::spawn(move || {
            while !stop.load(Ordering::Acquire) {
                let want = mono_ns().saturating_add(nanos(ahead)).min(cap);
                if want > keep.at() {
                    match write_end(&file, want) {
                        Ok(()) => keep.known.store(want, Ordering::Release),
                        Err(e) => tracing::warn!("the run's end stays where it was: {e}"),
                    }
                }
                std::thread::sleep(KEEPER_PERIOD);
            }
        });
        Ok(EndKeeper {
            end,
            planned: at,
            done,
            thread: Some(thread),
        })
    }

    /// The end as it is now.
    pub(crate) fn at(&self) -> u64 {
        self.end.at()
    }

    /// The end the run was started with.
    pub(crate) fn planned(&self) -> u64 {
        self.planned
    }

    /// Stops moving the end: the run ends where it is now. Returns that
    /// end.
    pub(crate) fn finish(&mut self) -> u64 {
        self.done.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        self.at()
    }
}

impl Drop for EndKeeper {
    fn drop(&mut self) {
        self.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn a_client_sees_the_end_move_only_once_the_one_it_knows_has_passed() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("end");
        let soon = mono_ns() + 50 * MS;
        let mut keeper =
            EndKeeper::start(&file, soon, Duration::from_millis(400), u64::MAX).unwrap();
        let client = RunEnd::following(&file).unwrap();
        assert_eq!(client.at(), soon);
        while mono_ns() < soon + 150 * MS {
            assert!(!client.passed(), "the end passed while it was kept ahead");
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(client.at() > soon, "the client never read the moved end");
        let end = keeper.finish();
        assert!(end >= mono_ns() + 200 * MS, "the end was not kept ahead");
        while mono_ns() < end {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(client.passed());
        assert_eq!(client.at(), end, "the end moved after finish");
    }

    #[test]
    fn the_end_never_moves_past_its_cap() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("end");
        let now = mono_ns();
        let cap = now + 100 * MS;
        let keeper = EndKeeper::start(&file, now, Duration::from_secs(5), cap).unwrap();
        let client = RunEnd::following(&file).unwrap();
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(keeper.at(), cap);
        assert!(client.passed());
        assert_eq!(client.at(), cap);
        assert_eq!(keeper.planned(), now);
    }

    #[test]
    fn a_fixed_end_passes_at_its_instant_and_a_bad_file_is_an_error() {
        let end = RunEnd::fixed(mono_ns() + 30 * MS);
        assert!(!end.passed());
        std::thread::sleep(Duration::from_millis(40));
        assert!(end.passed());
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("end");
        std::fs::write(&file, "soon").unwrap();
        let error = RunEnd::following(&file).unwrap_err().to_string();
        assert!(error.contains("not an instant"), "{error}");
        assert!(RunEnd::following(&dir.path().join("missing")).is_err());
    }
}
