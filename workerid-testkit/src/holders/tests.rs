use super::*;
use crate::small_disk::SmallDisk;
use std::process::{Child, Command};

#[test]
fn the_state_follows_the_last_parenthesis() {
    assert_eq!(state_of("42 (redis-server) S 1 42 42"), Some('S'));
    assert_eq!(state_of("42 (a) b) (c) T 1 42 42"), Some('T'));
    assert_eq!(state_of("42 (no state)"), None);
    assert_eq!(state_of(""), None);
}

#[test]
fn a_maps_line_names_its_device() {
    let line = "7f00-7f10 rw-s 00000000 07:03 1234   /mnt/disk/db";
    assert_eq!(maps_line_device(line), Some(libc::makedev(7, 3)));
    let anonymous = "7f00-7f10 rw-p 00000000 00:00 0";
    assert_eq!(maps_line_device(anonymous), Some(libc::makedev(0, 0)));
    assert_eq!(maps_line_device("garbage"), None);
}

#[test]
#[should_panic(expected = "not a mounted file system of its own")]
fn a_directory_that_is_not_a_mount_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let _ = Frozen::holders_of(dir.path());
}

/// A shell running `script` with its working directory `dir`, in a
/// process group of its own, killed with its children when dropped (also
/// when the test fails).
struct Shell(Child);

impl Shell {
    fn start(script: &str, dir: &Path) -> Shell {
        let mut command = Command::new("sh");
        command.args(["-c", script]).current_dir(dir);
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        Shell(command.spawn().unwrap())
    }

    fn id(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Shell {
    fn drop(&mut self) {
        // SAFETY: plain syscalls on the process group this test started.
        unsafe {
            libc::kill(-(self.0.id() as libc::pid_t), libc::SIGKILL);
        }
        let _ = self.0.wait();
    }
}

/// Waits until `pid` has a thread that is not stopped.
fn wait_running(pid: u32) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while every_thread_stopped(pid) {
        assert!(Instant::now() < deadline, "process {pid} was not thawed");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Waits until the file `path` exists: the shell that makes it has set up
/// what it holds.
fn wait_for(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn holders_by_directory_open_file_and_mapping_are_frozen_and_thawed_and_no_other() {
    // A file system of its own: every process working on the one holding
    // the temporary directories would be a holder too.
    let disk = SmallDisk::mount(1);
    let elsewhere = tempfile::tempdir().unwrap();
    let file = disk.path().join("held");
    std::fs::write(&file, [0u8; 4096]).unwrap();
    let by_directory = Shell::start("exec sleep 30", disk.path());
    let opened = elsewhere.path().join("opened");
    let by_open_file = Shell::start(
        &format!(
            "exec 3<'{}'; touch '{}'; exec sleep 30",
            file.display(),
            opened.display()
        ),
        elsewhere.path(),
    );
    let mapped = elsewhere.path().join("mapped");
    let script = "import mmap, sys, time\n\
                  f = open(sys.argv[1], 'r+b')\n\
                  m = mmap.mmap(f.fileno(), 0)\n\
                  f.close()\n\
                  open(sys.argv[2], 'w').close()\n\
                  time.sleep(30)\n";
    let mut by_mapping = Command::new("python3")
        .args(["-c", script])
        .arg(&file)
        .arg(&mapped)
        .current_dir(elsewhere.path())
        .spawn()
        .unwrap();
    let not_a_holder = Shell::start("exec sleep 30", elsewhere.path());
    wait_for(&opened);
    wait_for(&mapped);
    let holders = [by_directory.id(), by_open_file.id(), by_mapping.id()];

    let frozen = Frozen::holders_of(disk.path());
    for pid in holders {
        assert!(frozen.pids.contains(&pid), "{pid} not in {frozen:?}");
        assert!(every_thread_stopped(pid));
    }
    assert!(!frozen.pids.contains(&not_a_holder.id()), "{frozen:?}");
    assert!(!every_thread_stopped(not_a_holder.id()));
    drop(frozen);
    for pid in holders {
        wait_running(pid);
    }
    by_mapping.kill().unwrap();
    by_mapping.wait().unwrap();
}

#[test]
fn a_holder_stopped_beforehand_stays_stopped() {
    let disk = SmallDisk::mount(1);
    let paused = Shell::start("exec sleep 30", disk.path());
    // SAFETY: a plain syscall on the child this test started.
    unsafe {
        libc::kill(paused.id() as libc::pid_t, libc::SIGSTOP);
    }
    while !every_thread_stopped(paused.id()) {
        std::thread::sleep(Duration::from_millis(1));
    }
    let frozen = Frozen::holders_of(disk.path());
    assert!(!frozen.pids.contains(&paused.id()), "{frozen:?}");
    drop(frozen);
    std::thread::sleep(Duration::from_millis(50));
    assert!(
        every_thread_stopped(paused.id()),
        "a paused holder was thawed"
    );
}

#[test]
fn children_a_holder_forks_while_it_is_stopped_are_stopped_too() {
    let disk = SmallDisk::mount(1);
    // A holder that starts a holder (its working directory) every
    // millisecond or so, for a few seconds at most.
    let forking = Shell::start(
        "for i in $(seq 3000); do sleep 10 & sleep 0.001; done",
        disk.path(),
    );
    std::thread::sleep(Duration::from_millis(50));
    for _ in 0..5 {
        let frozen = Frozen::holders_of(disk.path());
        let device = mounted_device(disk.path());
        let running: Vec<u32> = descendants(std::process::id())
            .into_iter()
            .filter(|&pid| holds_a_file_on(pid, device) && !every_thread_stopped(pid))
            .collect();
        assert!(running.is_empty(), "holders still running: {running:?}");
        drop(frozen);
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(forking);
}

#[test]
fn a_thread_waiting_for_its_vforked_child_runs_nothing_only_with_a_stop_pending() {
    let thread = |state, waits_in: &str, stop_pending| Thread {
        state,
        waits_in: waits_in.to_string(),
        stop_pending,
    };
    assert!(thread('T', "do_signal_stop", false).runs_nothing());
    assert!(thread('D', "kernel_clone", true).runs_nothing());
    assert!(!thread('D', "kernel_clone", false).runs_nothing());
    assert!(thread('Z', "", false).runs_nothing());
    assert!(thread('D', "wait_for_vfork_done", true).runs_nothing());
    assert!(!thread('D', "wait_for_vfork_done", false).runs_nothing());
    assert!(!thread('D', "folio_wait_bit_common", true).runs_nothing());
    assert!(!thread('t', "ptrace_stop", true).runs_nothing());
    assert!(!thread('S', "do_epoll_wait", true).runs_nothing());
}

/// The Python program of the tests below: it posix_spawns (which vforks)
/// `/bin/true` with a file action that opens the FIFO `sys.argv[1]`, so
/// the child blocks before its exec and the spawning thread waits for it
/// in the kernel, where no SIGSTOP stops it.
const SPAWN: &str = "import os, sys, threading, time\n\
                     def spawn():\n    \
                         pid = os.posix_spawn('/bin/true', ['true'], os.environ,\n        \
                             file_actions=[(os.POSIX_SPAWN_OPEN, 0, sys.argv[1], os.O_RDONLY, 0)])\n    \
                         os.waitpid(pid, 0)\n";

#[test]
fn a_holder_waiting_for_a_child_it_vforked_is_frozen_with_it() {
    frozen_while_it_waits_for_a_vforked_child(&format!("{SPAWN}spawn()\n"));
}

#[test]
fn a_holder_whose_main_thread_waits_for_a_vforked_child_has_its_other_threads_frozen() {
    frozen_while_it_waits_for_a_vforked_child(&format!(
        "{SPAWN}threading.Thread(target=time.sleep, args=(1000,), daemon=True).start()\nspawn()\n"
    ));
}

#[test]
fn a_holder_whose_other_thread_waits_for_a_vforked_child_is_frozen_with_it() {
    frozen_while_it_waits_for_a_vforked_child(&format!(
        "{SPAWN}spawner = threading.Thread(target=spawn)\nspawner.start()\nspawner.join()\n"
    ));
}

/// Runs `script` (with the FIFO as its argument) in the file system
/// of a small disk until a thread of it waits for its vforked child,
/// freezes the disk's holders, and checks both are frozen and then thawed.
fn frozen_while_it_waits_for_a_vforked_child(script: &str) {
    let disk = SmallDisk::mount(1);
    let fifo = disk.path().join("fifo");
    let made = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a plain syscall with a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(made.as_ptr(), 0o600) }, 0);
    let mut command = Command::new("python3");
    command
        .args(["-c", script])
        .arg(&fifo)
        .current_dir(disk.path());
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    // Killed with its child if the test fails.
    let mut spawner = Shell(command.spawn().unwrap());
    let waits_for_child = |pid: u32| threads(pid).iter().any(Thread::waits_for_vforked_child);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !waits_for_child(spawner.id()) {
        assert!(Instant::now() < deadline, "{:?}", threads(spawner.id()));
        std::thread::sleep(Duration::from_millis(5));
    }

    let frozen = Frozen::holders_of(disk.path());
    assert!(frozen.pids.contains(&spawner.id()), "{frozen:?}");
    let child = descendants(spawner.id());
    assert_eq!(child.len(), 1, "{child:?}");
    assert!(frozen.pids.contains(&child[0]), "{frozen:?}");
    assert!(every_thread_stopped(spawner.id()) && every_thread_stopped(child[0]));
    drop(frozen);
    // Thawed, the child opens the FIFO once it has a writer, runs
    // /bin/true, and the spawner ends.
    drop(std::fs::OpenOptions::new().write(true).open(&fifo).unwrap());
    let deadline = Instant::now() + Duration::from_secs(10);
    while spawner.0.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "the spawner was not thawed");
        std::thread::sleep(Duration::from_millis(5));
    }
}
