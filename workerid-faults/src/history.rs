//! The history a client writes: one JSON object per line, each written with
//! one `write` call and no user-space buffer, so a client killed with
//! SIGKILL loses nothing it wrote (only a machine crash could) and a line
//! cut short can only be the last one.
//!
//! What is recorded, and when, is what makes the checker sound:
//! - a grant is written **before** the first ID of its lease is issued;
//! - a batch of IDs is written after they were issued, with the instant read
//!   just before the first and just before the last of them, and the
//!   deadline and reserved window the worker had then. An ID issued but not
//!   yet written when a client is killed was never handed out: it is not in
//!   the history and nothing downstream could have used it.
//!
//! Instants are `CLOCK_MONOTONIC` nanoseconds ([`mono_ns`](crate::clock::mono_ns)).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::{io_error, FaultsError, Result};

/// One line of a history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
pub enum Event {
    /// The client started.
    Start {
        /// The client's name (unique within a run).
        client: String,
        /// Its process ID.
        pid: u32,
        /// Whether it is a deliberately unsafe client.
        unsafe_mode: bool,
        /// Whether it makes IDs on a ticking clock (fail closed by
        /// timestamp, not by real time).
        #[serde(default)]
        ticking: bool,
        /// When.
        at: u64,
        /// Its wall clock's offset, in milliseconds.
        offset_ms: i64,
        /// How far off its clock's rate is, in parts per million.
        #[serde(default)]
        rate_ppm: i64,
    },
    /// A worker joined: it holds `worker_id`. Written before any ID of it.
    Grant {
        /// The client's number for this lease (from 0).
        lease: u32,
        /// The leased worker ID.
        worker_id: u32,
        /// The grant's fence.
        fence: u64,
        /// Read just before the join (the acquire was sent after it).
        sent: u64,
        /// Read just after the join returned (the grant happened before it).
        granted: u64,
        /// The lease's local deadline then.
        deadline: u64,
        /// The largest timestamp (layout units) the worker reserved then.
        window_end: u64,
    },
    /// An acquire was answered with this grant (written after the join
    /// that sent it, whether the join used it or failed later): what the
    /// orphan check counts as received.
    Acquired {
        /// The worker ID granted.
        worker_id: u32,
        /// The grant's fence.
        fence: u64,
        /// When the answer came.
        at: u64,
    },
    /// IDs issued under a lease, in the order they were issued.
    Ids {
        /// The lease.
        lease: u32,
        /// Read just before the first ID was asked for.
        t0: u64,
        /// Read just before the last ID was asked for: that ID was issued
        /// at or after this instant.
        tl: u64,
        /// Read after the last ID.
        t1: u64,
        /// The lease's local deadline, read after the batch (deadlines only
        /// move forward while a lease is held, so every ID of the batch was
        /// issued before it).
        deadline: u64,
        /// The largest timestamp the worker had reserved in the store, the
        /// larger of the readings before and after the batch.
        window_end: u64,
        /// The IDs.
        ids: Vec<u64>,
    },
    /// The worker reported its lease lost.
    Lost {
        /// The lease.
        lease: u32,
        /// When the client noticed.
        at: u64,
        /// Why, as the worker said.
        reason: String,
    },
    /// A graceful stop begins (no more IDs from this lease).
    Stopping {
        /// The lease.
        lease: u32,
        /// When.
        at: u64,
    },
    /// A graceful stop ended (the worker ID was released, or the lease was
    /// found lost).
    Stopped {
        /// The lease.
        lease: u32,
        /// When.
        at: u64,
        /// The worker's final state.
        state: String,
    },
    /// A join failed (no free worker ID, store unavailable, ...).
    JoinFailed {
        /// When.
        at: u64,
        /// The error.
        error: String,
        /// The store answered that every worker ID was held
        /// (`NoAvailableId`).
        #[serde(default)]
        pool_full: bool,
    },
    /// The wall clock was stepped.
    Clock {
        /// When.
        at: u64,
        /// The new offset, in milliseconds.
        offset_ms: i64,
    },
    /// The client is about to die without releasing (may be missing: a
    /// SIGKILL gives no notice).
    Crash {
        /// The lease it held, if any.
        lease: Option<u32>,
        /// When.
        at: u64,
    },
}

/// Appends events to a history file; shared by the tasks of one client.
#[derive(Debug)]
pub struct HistoryWriter {
    file: Mutex<File>,
    path: PathBuf,
}

impl HistoryWriter {
    /// Creates (or appends to) `path`.
    ///
    /// # Errors
    /// [`FaultsError::Io`] when the file cannot be opened.
    pub fn create(path: &Path) -> Result<HistoryWriter> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(io_error(path))?;
        Ok(HistoryWriter {
            file: Mutex::new(file),
            path: path.to_path_buf(),
        })
    }

    /// Writes one event as one line, in one `write` call.
    ///
    /// # Errors
    /// [`FaultsError::Io`] when the write fails.
    pub fn record(&self, event: &Event) -> Result<()> {
        let mut line = serde_json::to_vec(event).map_err(|e| FaultsError::BadHistory {
            path: self.path.clone(),
            line: 0,
            source: e,
        })?;
        line.push(b'\n');
        let mut file = self.file.lock().unwrap_or_else(|e| e.into_inner());
        file.write_all(&line).map_err(io_error(&self.path))
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Parses a history text. A last line that is cut short (a kill during the
/// write) is dropped; any other bad line is an error.
///
/// ```
/// use workerid_faults::history::{parse_history, Event};
/// let text = "{\"t\":\"clock\",\"at\":5,\"offset_ms\":-1000}\n{\"t\":\"crash\",\"le";
/// let events = parse_history(text, "h".as_ref()).unwrap();
/// assert_eq!(events, vec![Event::Clock { at: 5, offset_ms: -1000 }]);
/// ```
///
/// # Errors
/// [`FaultsError::BadHistory`] for a bad line other than the last one.
pub fn parse_history(text: &str, path: &Path) -> Result<Vec<Event>> {
    let lines: Vec<&str> = text.lines().collect();
    let complete = text.ends_with('\n');
    let mut events = Vec::with_capacity(lines.len());
    for (i, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str(line) {
            Ok(event) => events.push(event),
            Err(_) if i + 1 == lines.len() && !complete => break,
            Err(source) => {
                return Err(FaultsError::BadHistory {
                    path: path.to_path_buf(),
                    line: i + 1,
                    source,
                })
            }
        }
    }
    Ok(events)
}

/// Reads a history file (see [`parse_history`]).
///
/// # Errors
/// [`FaultsError::Io`] when it cannot be read; [`FaultsError::BadHistory`].
pub fn read_history(path: &Path) -> Result<Vec<Event>> {
    let text = std::fs::read_to_string(path).map_err(io_error(path))?;
    parse_history(&text, path)
}

/// One client's history, named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientHistory {
    /// The client's name.
    pub client: String,
    /// Its events, in the order it wrote them.
    pub events: Vec<Event>,
}

/// Reads every `*.jsonl` history of `dir` (one per client), in name order.
///
/// # Errors
/// As [`read_history`].
pub fn read_dir(dir: &Path) -> Result<Vec<ClientHistory>> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(io_error(dir))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|p| {
            let client = p
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            Ok(ClientHistory {
                client,
                events: read_history(&p)?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_events_read_back_and_a_cut_tail_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c0.jsonl");
        let w = HistoryWriter::create(&path).unwrap();
        let events = vec![
            Event::JoinFailed {
                at: 1,
                error: "no free ID".into(),
                pool_full: true,
            },
            Event::Ids {
                lease: 0,
                t0: 2,
                tl: 3,
                t1: 4,
                deadline: 10,
                window_end: 99,
                ids: vec![7, 8],
            },
        ];
        for e in &events {
            w.record(e).unwrap();
        }
        assert_eq!(read_history(&path).unwrap(), events);
        std::fs::write(&path, {
            let mut t = std::fs::read_to_string(&path).unwrap();
            t.push_str("{\"t\":\"ids\",\"lea");
            t
        })
        .unwrap();
        assert_eq!(read_history(&path).unwrap(), events, "a cut last line");
        let all = read_dir(dir.path()).unwrap();
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].client, "c0");
    }

    #[test]
    fn a_bad_line_in_the_middle_is_an_error() {
        let text = "{\"t\":\"clock\",\"at\":5,\"offset_ms\":0}\nnonsense\n{\"t\":\"clock\",\"at\":6,\"offset_ms\":0}\n";
        let err = parse_history(text, Path::new("h")).unwrap_err();
        assert!(
            matches!(err, FaultsError::BadHistory { line: 2, .. }),
            "{err}"
        );
    }
}
