//! A server's wall clock moved by the test: the server runs under
//! libfaketime (Debian's `faketime`), which reads the offset from a file on
//! every clock read. Only the wall clock moves (`DONT_FAKE_MONOTONIC`), as
//! when NTP or an operator steps a machine's clock.

use std::ffi::OsString;
use std::path::PathBuf;

/// The offset file of a server started under libfaketime
/// ([`ServerProcess::fake_wall_clock`](crate::ServerProcess::fake_wall_clock)).
#[derive(Debug, Clone)]
pub struct FakeWallClock {
    file: PathBuf,
}

/// Where Debian's `faketime` package puts the preloaded library.
fn library() -> PathBuf {
    let found = std::fs::read_dir("/usr/lib")
        .into_iter()
        .flatten()
        .filter_map(|entry| entry.ok())
        .map(|entry| entry.path().join("faketime/libfaketime.so.1"))
        .find(|path| path.exists());
    found.unwrap_or_else(|| {
        panic!(
            "libfaketime is not installed: the test moves a server's clock with it. Install \
             the Debian package `faketime` (bash scripts/setup.sh does it for you)."
        )
    })
}

impl FakeWallClock {
    /// A clock whose offset lives in `file`, set to zero.
    pub(crate) fn create(file: PathBuf) -> FakeWallClock {
        let clock = FakeWallClock { file };
        clock.set_offset(0.0);
        clock
    }

    /// The environment that runs a program on this clock.
    pub(crate) fn env(&self) -> Vec<(OsString, OsString)> {
        [
            ("LD_PRELOAD", library().into_os_string()),
            (
                "FAKETIME_TIMESTAMP_FILE",
                self.file.clone().into_os_string(),
            ),
            ("FAKETIME_NO_CACHE", "1".into()),
            ("DONT_FAKE_MONOTONIC", "1".into()),
        ]
        .into_iter()
        .map(|(k, v)| (OsString::from(k), v))
        .collect()
    }

    /// Puts the server's wall clock `seconds` ahead of the real one
    /// (behind, if negative), at once.
    pub fn set_offset(&self, seconds: f64) {
        // Written whole and renamed, so that a read never sees half a line.
        let text = format!("{seconds:+.6}\n");
        let staged = self.file.with_extension("new");
        std::fs::write(&staged, text)
            .and_then(|()| std::fs::rename(&staged, &self.file))
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", self.file.display()));
    }
}
