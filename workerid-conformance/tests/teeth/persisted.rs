//! The reference store's state kept in a file, so that handles in several
//! OS processes share it: every critical section reads the file under an
//! exclusive lock on it and writes it back before the lock goes.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};
use std::sync::MutexGuard;
use std::time::Duration;

use workerid_core::{Holder, Token};

use super::{Slot, State};

/// The state for one critical section: the process's lock, and with a file
/// the file's contents read under the file's lock, written back on drop.
pub struct Held<'a> {
    state: MutexGuard<'a, State>,
    file: Option<File>,
    /// Without the file's lock: hold the state a while before writing it
    /// back (a slow write), so that the store is seen to race, and write it
    /// to a file beside it renamed over it, so that a reader racing the
    /// write finds a whole state (lost updates are the flaw; a torn read
    /// would fail the scenario on something else).
    unlocked: Option<PathBuf>,
}

impl<'a> Held<'a> {
    pub fn new(mut state: MutexGuard<'a, State>, path: Option<&Path>, lock_file: bool) -> Self {
        let file = path.map(|path| {
            let mut file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(path)
                .expect("open the state file");
            if lock_file {
                file.lock().expect("lock the state file");
            }
            let mut text = String::new();
            file.read_to_string(&mut text).expect("read the state file");
            *state = decode(&text);
            file
        });
        Self {
            state,
            file,
            unlocked: path.filter(|_| !lock_file).map(Path::to_path_buf),
        }
    }
}

impl Deref for Held<'_> {
    type Target = State;
    fn deref(&self) -> &State {
        &self.state
    }
}

impl DerefMut for Held<'_> {
    fn deref_mut(&mut self) -> &mut State {
        &mut self.state
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        let Some(file) = self.file.as_mut() else {
            return;
        };
        let text = encode(&self.state);
        if let Some(path) = &self.unlocked {
            std::thread::sleep(Duration::from_millis(5));
            let beside = path.with_extension(format!("{}.new", std::process::id()));
            std::fs::write(&beside, text.as_bytes()).expect("write the state file");
            std::fs::rename(&beside, path).expect("replace the state file");
            return;
        }
        file.set_len(0).expect("truncate the state file");
        file.seek(SeekFrom::Start(0)).expect("seek the state file");
        file.write_all(text.as_bytes())
            .expect("write the state file");
        // Closing the file releases its lock.
    }
}

fn hex(text: &str) -> String {
    text.bytes().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> String {
    let bytes = (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex"))
        .collect();
    String::from_utf8(bytes).expect("UTF-8")
}

fn token(text: &str) -> Option<Token> {
    (text != "-").then(|| text.parse().expect("a token"))
}

fn untoken(token: &Option<Token>) -> String {
    token.as_ref().map_or("-".to_string(), Token::to_string)
}

/// One line per pool size and per slot, fields separated by tabs, text in hex.
fn encode(state: &State) -> String {
    let mut out = String::new();
    for (namespace, max) in &state.pool_sizes {
        out += &format!("pool\t{}\t{max}\n", hex(namespace));
    }
    for ((namespace, id), slot) in &state.slots {
        out += &format!(
            "slot\t{}\t{id}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\n",
            hex(namespace),
            untoken(&slot.holder),
            untoken(&slot.last_holder),
            hex(slot.label.as_str()),
            slot.expires_at.as_nanos(),
            slot.ttl.as_nanos(),
            slot.fence,
            slot.watermark,
            slot.renewals,
        );
    }
    out
}

fn decode(text: &str) -> State {
    let mut state = State::default();
    for line in text.lines() {
        let fields: Vec<&str> = line.split('\t').collect();
        let nanos = |i: usize| Duration::from_nanos(fields[i].parse().expect("nanoseconds"));
        let number = |i: usize| fields[i].parse::<u64>().expect("a number");
        match fields[0] {
            "pool" => {
                let max = fields[2].parse().expect("a pool size");
                state.pool_sizes.insert(unhex(fields[1]), max);
            }
            "slot" => {
                let id = fields[2].parse().expect("a worker ID");
                let slot = Slot {
                    holder: token(fields[3]),
                    last_holder: token(fields[4]),
                    label: Holder::new(unhex(fields[5])).expect("a holder label"),
                    expires_at: nanos(6),
                    ttl: nanos(7),
                    fence: number(8),
                    watermark: number(9),
                    renewals: number(10),
                };
                state.slots.insert((unhex(fields[1]), id), slot);
            }
            other => panic!("the state file has a line of kind {other:?}"),
        }
    }
    state
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_survives_its_file() {
        let mut state = State::default();
        state.pool_sizes.insert("a\tb c".into(), 9);
        state.slots.insert(
            ("a\tb c".into(), 3),
            Slot {
                holder: Some(Token::generate()),
                last_holder: None,
                label: Holder::new("host-1:pid/7").expect("label"),
                expires_at: Duration::new(5, 7),
                ttl: Duration::from_millis(1500),
                fence: 4,
                watermark: u64::MAX,
                renewals: 2,
            },
        );
        let again = decode(&encode(&state));
        assert_eq!(format!("{again:?}"), format!("{state:?}"));
    }
}
