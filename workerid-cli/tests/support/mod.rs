//! Running the real `workerid` binary.

use std::process::Command;

/// What a run of the binary left: exit code, stdout, stderr.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// Panics (showing everything) unless it exited with `code`.
    #[track_caller]
    pub fn expect(self, code: i32) -> Run {
        assert_eq!(self.code, code, "exit code; {self:#?}");
        self
    }

    /// Stdout as JSON.
    #[track_caller]
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {self:#?}"))
    }
}

/// Runs `workerid args...` with no store, namespace or timeout from the
/// environment.
pub fn workerid(args: &[&str]) -> Run {
    workerid_with_env(args, &[])
}

/// [`workerid`] with the variables `env` set.
#[allow(dead_code)] // not every test binary sets variables
pub fn workerid_with_env(args: &[&str], env: &[(&str, &str)]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_workerid"))
        .args(args)
        .env_remove("WORKERID_STORE")
        .env_remove("WORKERID_NAMESPACE")
        .env_remove("WORKERID_TIMEOUT")
        .env("RUST_LOG", "warn")
        .envs(env.iter().copied())
        .output()
        .expect("run the workerid binary");
    Run {
        code: out.status.code().expect("exited, not killed"),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A namespace (or tag) no other test or run uses.
#[allow(dead_code)] // not every test binary names things
pub fn unique(prefix: &str) -> String {
    use std::time::{SystemTime, UNIX_EPOCH};
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    format!("{prefix}{:x}{nanos:x}", std::process::id())
}
