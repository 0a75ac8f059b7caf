//! The host's side of the labs: choosing a free subnet under a lock shared
//! between processes, finding the tools, removing what dead processes left.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::{LOCK_FILE, NETNS_DIR, SUBNETS};

/// Removes the namespace `name` and the veth pair whose host end is
/// `host_interface`, ignoring what does not exist.
pub(super) fn remove(ip: &Path, name: &str, host_interface: &str) {
    let _ = Command::new(ip)
        .args(["link", "del", host_interface])
        .output();
    let _ = Command::new(ip).args(["netns", "del", name]).output();
}

/// Removes the namespaces (and veth pairs) of processes that are gone.
pub(super) fn remove_stale(ip: &Path) {
    let Ok(entries) = fs::read_dir(NETNS_DIR) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some((pid, n)) = name
            .strip_prefix("workerid-")
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, n)| Some((pid.parse::<u32>().ok()?, n.parse::<u32>().ok()?)))
        else {
            continue;
        };
        if pid == std::process::id() || alive(pid) {
            continue;
        }
        remove(ip, name, &format!("wh{pid}n{n}"));
    }
}

/// Whether process `pid` exists.
pub(super) fn alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 only checks whether the process exists.
    let sent = unsafe { libc::kill(pid, 0) };
    sent == 0 || io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// An exclusive lock (`flock`) on [`LOCK_FILE`], shared with every process
/// using this module; released when the file is dropped.
pub(super) fn lock() -> File {
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(LOCK_FILE)
        .unwrap_or_else(|e| panic!("cannot open {LOCK_FILE}: {e}"));
    file.lock()
        .unwrap_or_else(|e| panic!("cannot lock {LOCK_FILE}: {e}"));
    file
}

/// The index of a /30 of 10.213.0.0/16 that no interface of the root
/// namespace has an address in. Call it under [`lock`].
pub(super) fn free_subnet(ip: &Path) -> u32 {
    let out = Command::new(ip)
        .args(["-o", "-4", "addr", "show"])
        .output()
        .expect("run ip addr show");
    assert!(out.status.success(), "ip addr show failed");
    let listing = String::from_utf8_lossy(&out.stdout);
    let used: std::collections::HashSet<u32> = listing
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            words.find(|w| *w == "inet")?;
            let address: Ipv4Addr = words.next()?.split('/').next()?.parse().ok()?;
            let [a, b, c, d] = address.octets();
            ((a, b) == (10, 213)).then_some(u32::from(c) * 64 + u32::from(d) / 4)
        })
        .collect();
    (0..SUBNETS)
        .find(|subnet| !used.contains(subnet))
        .expect("every /30 of 10.213.0.0/16 is taken")
}

/// The full path of `program`, or a panic naming it and its Debian package.
pub(super) fn tool(program: &str, debian_package: &str) -> PathBuf {
    crate::find_program(program).unwrap_or_else(|| {
        panic!(
            "`{program}` is not installed: the network-fault lab (workerid_testkit::netns) needs \
             it. Install the Debian package `{debian_package}` (bash scripts/setup.sh does it for \
             you)."
        )
    })
}
