//! The helper programs tests run (servers' tools, `ip`, `mkfs`): found on
//! the PATH with an install hint when missing, and run to completion
//! within a time limit.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Runs a helper program to completion; panics with its output if it fails
/// or is still running after two minutes.
pub(crate) fn run(command: &mut Command, what: &str) {
    let out = output_within(command, what, Duration::from_secs(120));
    assert!(
        out.status.success(),
        "{what} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs a helper program to completion and returns what it printed; a
/// program still running after `limit` is killed with every process it
/// started (it runs in a process group of its own: `initdb` starts a
/// server of its own, for one), and the call panics with what it printed
/// until then, so that a helper that never ends fails its test instead of
/// hanging it.
///
/// # Panics
/// When the program cannot be started, or runs past `limit`.
pub(crate) fn output_within(command: &mut Command, what: &str, limit: Duration) -> Output {
    let mut child = command
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {what}: {e}"));
    // Each pipe drained by a thread of its own into a buffer, so that a
    // program that prints much never blocks on a full pipe, and what was
    // printed can be taken even while a process the program left behind
    // holds the pipe open.
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        let buffer = Arc::new(Mutex::new(Vec::new()));
        let (done, finished) = channel::<()>();
        let filled = buffer.clone();
        std::thread::spawn(move || {
            if let Some(mut pipe) = pipe {
                let mut chunk = [0u8; 8192];
                while let Ok(n @ 1..) = pipe.read(&mut chunk) {
                    filled
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .extend_from_slice(&chunk[..n]);
                }
            }
            drop(done);
        });
        (buffer, finished)
    };
    let stdout = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let stderr = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    // Up to a second after the end for the pipe to close, then what it
    // gave until then.
    let printed = |(buffer, finished): (Arc<Mutex<Vec<u8>>>, Receiver<()>)| {
        let _ = finished.recv_timeout(Duration::from_secs(1));
        std::mem::take(&mut *buffer.lock().unwrap_or_else(|e| e.into_inner()))
    };
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child
            .try_wait()
            .unwrap_or_else(|e| panic!("cannot wait for {what}: {e}"))
        {
            break status;
        }
        if Instant::now() >= deadline {
            // The group is the child's pid, which stays its own until the
            // child is reaped below.
            if let Ok(group) = libc::pid_t::try_from(child.id()) {
                // SAFETY: kill has no memory effects.
                unsafe { libc::kill(-group, libc::SIGKILL) };
            }
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{what} was still running after {limit:?}, and was killed; it printed: {}{}",
                String::from_utf8_lossy(&printed(stdout)),
                String::from_utf8_lossy(&printed(stderr))
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: printed(stdout),
        stderr: printed(stderr),
    }
}

/// Panics with an install hint unless `program` is on the PATH (or is a path
/// that exists). Returns its full path.
pub fn require_program(program: &str, debian_package: &str) -> PathBuf {
    if let Some(full) = find_program(program) {
        return full;
    }
    panic!(
        "`{program}` is not installed: the tests need a real server. Install the Debian \
         package `{debian_package}` (bash scripts/test.sh does it for you)."
    );
}

/// The full path of `program` when it is on the PATH, in `/usr/sbin` or
/// `/sbin` (or is an absolute path that exists).
pub(crate) fn find_program(program: &str) -> Option<PathBuf> {
    let candidate = std::path::Path::new(program);
    if candidate.is_absolute() {
        return candidate.exists().then(|| candidate.to_path_buf());
    }
    let paths = std::env::var_os("PATH").unwrap_or_default();
    let extra = [
        std::path::PathBuf::from("/usr/sbin"),
        std::path::PathBuf::from("/sbin"),
    ];
    std::env::split_paths(&paths)
        .chain(extra)
        .map(|dir| dir.join(program))
        .find(|full| full.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Command {
        let mut command = Command::new("sh");
        command.args(["-c", script]);
        command
    }

    #[test]
    fn a_program_that_ends_gives_its_status_and_what_it_printed() {
        let out = output_within(
            &mut sh("echo out; echo err >&2; exit 3"),
            "sh",
            Duration::from_secs(10),
        );
        assert_eq!(out.status.code(), Some(3));
        assert_eq!(out.stdout, b"out\n");
        assert_eq!(out.stderr, b"err\n");
    }

    #[test]
    fn what_a_program_printed_is_kept_when_a_process_it_left_holds_its_pipes() {
        let started = Instant::now();
        let out = output_within(
            &mut sh("echo left; sleep 5 & exit 0"),
            "sh",
            Duration::from_secs(10),
        );
        assert!(out.status.success());
        assert_eq!(out.stdout, b"left\n");
        assert!(
            started.elapsed() < Duration::from_secs(4),
            "{:?}",
            started.elapsed()
        );
    }

    #[test]
    fn a_program_past_its_limit_is_killed_and_says_what_it_printed() {
        let started = Instant::now();
        let panic = std::panic::catch_unwind(|| {
            output_within(
                &mut sh("echo begun; exec sleep 30"),
                "the sleeper",
                Duration::from_millis(300),
            )
        })
        .expect_err("a program past its limit is a panic");
        let message = panic.downcast_ref::<String>().expect("a message");
        assert!(
            message.contains("the sleeper was still running"),
            "{message}"
        );
        assert!(message.contains("begun"), "{message}");
        assert!(started.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn a_program_past_its_limit_is_killed_with_the_processes_it_started() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pid");
        let script = format!("sleep 30 & echo $! > {}; wait", pid_file.display());
        let panic = std::panic::catch_unwind(|| {
            output_within(&mut sh(&script), "the parent", Duration::from_millis(500))
        });
        assert!(panic.is_err(), "a program past its limit is a panic");
        let pid: libc::pid_t = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        // Gone, or a zombie its new parent has not reaped yet.
        while std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|stat| !stat.contains(") Z "))
        {
            assert!(
                Instant::now() < deadline,
                "the child {pid} outlived its parent's kill"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
