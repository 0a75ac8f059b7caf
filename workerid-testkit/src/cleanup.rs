//! Making sure no server outlives the test process.
//!
//! - Every child is spawned from one long-lived thread with the Linux
//!   parent-death signal set to SIGKILL, so it dies when the test process
//!   dies, however it dies (the signal fires when the spawning *thread* exits,
//!   hence the dedicated thread).
//! - Live servers are registered; an `atexit` hook kills them and removes
//!   their directories when the test binary exits, also after failed tests
//!   (statics are never dropped in Rust, so shared servers need this).
//! - Mounts a test made (a failing disk) are registered too; the same hook
//!   detaches them once the servers on them are dead.

use std::collections::HashMap;
use std::io;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::sync::mpsc;
use std::sync::{Mutex, Once};

type Job = (Command, mpsc::Sender<io::Result<Child>>);

static SPAWNER: Mutex<Option<mpsc::Sender<Job>>> = Mutex::new(None);
/// Each live server: its pid while it runs, and its directory.
type Registry = HashMap<u64, (Option<u32>, PathBuf)>;

static LIVE: Mutex<Option<Registry>> = Mutex::new(None);
static HOOK: Once = Once::new();
/// Mount points to detach (`umount -l`) when the binary exits.
static MOUNTS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Spawns `command` so that it is killed when this process dies.
pub(crate) fn spawn(mut command: Command) -> io::Result<Child> {
    // SAFETY: prctl is async-signal-safe; the closure touches no memory of the parent.
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let sender = {
        let mut spawner = SPAWNER.lock().unwrap_or_else(|e| e.into_inner());
        spawner
            .get_or_insert_with(|| {
                let (tx, rx) = mpsc::channel::<Job>();
                std::thread::Builder::new()
                    .name("workerid-testkit-spawner".into())
                    .spawn(move || {
                        for (mut command, reply) in rx {
                            let _ = reply.send(command.spawn());
                        }
                    })
                    .expect("start the spawner thread");
                tx
            })
            .clone()
    };
    let (reply, answer) = mpsc::channel();
    sender
        .send((command, reply))
        .map_err(|_| io::Error::other("spawner thread is gone"))?;
    answer
        .recv()
        .map_err(|_| io::Error::other("spawner thread is gone"))?
}

/// Records a server (its current pid and its directory) for the exit hook.
pub(crate) fn register(key: u64, pid: Option<u32>, dir: PathBuf) {
    install_hook();
    LIVE.lock()
        .unwrap_or_else(|e| e.into_inner())
        .get_or_insert_with(HashMap::new)
        .insert(key, (pid, dir));
}

/// Records a directory (not a server's) to remove when the binary exits.
pub(crate) fn register_dir(dir: PathBuf) {
    // Keys of their own, far above the servers' (which count up from 1).
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(u64::MAX / 2);
    register(
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        None,
        dir,
    );
}

fn install_hook() {
    HOOK.call_once(|| {
        // SAFETY: registering a plain extern "C" function.
        unsafe {
            libc::atexit(kill_all_at_exit);
        }
    });
}

/// Records a mount point to detach when the binary exits, if it is still
/// mounted then.
pub(crate) fn register_mount(mount_point: PathBuf) {
    install_hook();
    MOUNTS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(mount_point);
}

/// Forgets a mount point its owner detached.
pub(crate) fn unregister_mount(mount_point: &std::path::Path) {
    MOUNTS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .retain(|m| m != mount_point);
}

pub(crate) fn unregister(key: u64) {
    if let Some(live) = LIVE.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
        live.remove(&key);
    }
}

/// Waits up to 10 s for the killed server `pid` to exit and reaps it. Not
/// forever: a pid that a test reaped already may belong to another child
/// of ours by now, and the binary must exit all the same.
fn reap(pid: u32) {
    for _ in 0..1000 {
        // SAFETY: a plain syscall on a pid we spawned.
        let reaped =
            unsafe { libc::waitpid(pid as libc::pid_t, std::ptr::null_mut(), libc::WNOHANG) };
        if reaped != 0 {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

extern "C" fn kill_all_at_exit() {
    let live = match LIVE.lock() {
        Ok(mut live) => live.take(),
        Err(_) => None,
    };
    for (pid, dir) in live.unwrap_or_default().into_values() {
        if let Some(pid) = pid {
            crate::process::kill_tree(pid);
            reap(pid);
        }
        let _ = std::fs::remove_dir_all(dir);
    }
    let mounts = match MOUNTS.lock() {
        Ok(mut mounts) => std::mem::take(&mut *mounts),
        Err(_) => Vec::new(),
    };
    for mount_point in mounts {
        if let Ok(path) = std::ffi::CString::new(mount_point.as_os_str().as_encoded_bytes()) {
            // SAFETY: a plain syscall on a path we own; a loop device
            // mounted with autoclear is freed once the file system is.
            unsafe {
                libc::umount2(path.as_ptr(), libc::MNT_DETACH);
            }
        }
        let _ = std::fs::remove_dir(mount_point);
    }
}
