//! The disk whose `fsync` fails for a while behaves as Linux does on a
//! device that fails writes: the failed `fsync` answers `EIO`, what it
//! covered stays readable but never reaches the disk, every file opened
//! before is told once, metadata is kept, and the remount shows what the
//! disk holds. Also, a server's own use of it: SQLite through Python's
//! `sqlite3` in another process, as a user other than root.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::process::Command;

use workerid_testkit::fsync_failing::{FsyncFailingDisk, FsyncFailures};

fn eio(result: std::io::Result<()>) -> bool {
    matches!(result, Err(e) if e.raw_os_error() == Some(libc::EIO))
}

fn read(path: &std::path::Path) -> Vec<u8> {
    let mut out = Vec::new();
    File::open(path).unwrap().read_to_end(&mut out).unwrap();
    out
}

#[test]
fn a_failed_fsync_loses_what_it_covered_and_every_file_opened_before_is_told_once() {
    let disk = FsyncFailingDisk::mount();
    let path = disk.path().join("log");
    let mut writer = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .unwrap();
    writer.write_all(&[b'a'; 5000]).unwrap();
    writer.sync_data().unwrap();
    let other = File::open(&path).unwrap();

    disk.fail();
    writer.write_all(&[b'b'; 5000]).unwrap();
    assert!(eio(writer.sync_data()), "an fsync while the disk fails");
    // Still read as written, and the file system still takes new names.
    assert_eq!(read(&path)[5000..], [b'b'; 5000]);
    std::fs::create_dir(disk.path().join("made-while-failing")).unwrap();
    assert!(eio(writer.sync_all()), "every fsync fails while it does");

    disk.heal();
    writer.sync_data().unwrap();
    assert!(eio(other.sync_data()), "a file opened before is told once");
    other.sync_data().unwrap();
    assert_eq!(
        disk.failures(),
        FsyncFailures {
            fsyncs_failed: 3,
            pages_lost: 2
        }
    );
    writer.write_all(&[b'c'; 100]).unwrap();
    writer.sync_data().unwrap();
    drop((writer, other));

    disk.remount();
    let after = read(&path);
    assert_eq!(after.len(), 10_100, "the size the successful fsync wrote");
    assert_eq!(after[..5000], [b'a'; 5000], "what the first fsync stored");
    // The page the failed fsync lost keeps what the disk had, zeros past
    // that; a lost page written again afterwards (by the 'c's) is stored
    // whole.
    assert_eq!(after[5000..8192], [0; 3192], "a lost page");
    assert_eq!(after[8192..10_000], [b'b'; 1808]);
    assert_eq!(after[10_000..], [b'c'; 100]);
    assert!(disk.path().join("made-while-failing").is_dir());
}

#[test]
fn what_no_fsync_covered_is_gone_after_the_remount() {
    let disk = FsyncFailingDisk::mount();
    let kept = disk.path().join("kept");
    let lost = disk.path().join("lost");
    std::fs::write(&kept, b"synced before the remount").unwrap();
    disk.sync();
    let mut file = File::create(&lost).unwrap();
    file.write_all(b"never synced").unwrap();
    file.set_len(4).unwrap();
    drop(file);
    disk.remount();
    assert_eq!(read(&kept), b"synced before the remount");
    // The name and the truncate are metadata, kept; the data is gone.
    assert_eq!(read(&lost), [0; 4]);
}

/// Dropping the lost pages shows what the disk holds, through a file
/// that stayed open (the kernel's own cache of it invalidated), and a file
/// opened before the failure is still told of it once.
#[test]
fn dropped_lost_pages_read_as_the_disk_through_a_file_left_open() {
    let disk = FsyncFailingDisk::mount();
    let path = disk.path().join("f");
    let file = OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    file.write_all_at(&[b'x'; 8192], 0).unwrap();
    file.sync_data().unwrap();
    disk.fail();
    file.write_all_at(&[b'y'; 4096], 4096).unwrap();
    let mut seen = [0u8; 4096];
    file.read_exact_at(&mut seen, 4096).unwrap();
    assert_eq!(seen, [b'y'; 4096], "the lost page, read before the drop");
    let before = File::open(&path).unwrap();
    assert!(eio(file.sync_data()));
    disk.heal();
    assert_eq!(disk.drop_lost_pages(), 1);
    file.read_exact_at(&mut seen, 4096).unwrap();
    assert_eq!(seen, [b'x'; 4096], "the disk's page, read after the drop");
    assert!(
        eio(before.sync_data()),
        "opened before the failure: told once"
    );
    file.sync_data().unwrap();
}

#[test]
fn a_file_s_size_holes_and_renames_pass_through() {
    let disk = FsyncFailingDisk::mount();
    let path = disk.path().join("a");
    let file = File::create(&path).unwrap();
    file.write_all_at(b"end", 100_000).unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 100_003);
    drop(file);
    std::fs::create_dir_all(disk.path().join("d/e")).unwrap();
    std::fs::rename(&path, disk.path().join("d/e/b")).unwrap();
    std::fs::rename(disk.path().join("d"), disk.path().join("f")).unwrap();
    let moved = disk.path().join("f/e/b");
    let data = read(&moved);
    assert_eq!(data.len(), 100_003);
    assert!(data[..100_000].iter().all(|&b| b == 0));
    assert_eq!(&data[100_000..], b"end");
    std::os::unix::fs::symlink("e/b", disk.path().join("f/link")).unwrap();
    assert_eq!(read(&disk.path().join("f/link")), data);
    std::fs::hard_link(&moved, disk.path().join("f/hard")).unwrap();
    let mut names: Vec<_> = std::fs::read_dir(disk.path().join("f"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["e", "hard", "link"]);
    std::fs::remove_file(disk.path().join("f/hard")).unwrap();
    disk.sync();
    disk.remount();
    assert_eq!(read(&moved), data);
}

/// SQLite in WAL mode, in a process of its own running as `nobody`: a
/// commit whose `fsync` fails answers an I/O error, and after the remount
/// the database holds every commit that was acknowledged.
#[test]
fn sqlite_as_another_user_keeps_every_acknowledged_commit() {
    const SCRIPT: &str = "import sqlite3, sys, time, os\n\
        c = sqlite3.connect(sys.argv[1], isolation_level=None)\n\
        c.execute('PRAGMA journal_mode=WAL')\n\
        c.execute('PRAGMA synchronous=FULL')\n\
        c.execute('CREATE TABLE t (n INTEGER)')\n\
        ok = 0\n\
        failed = 0\n\
        for n in range(400):\n\
        \x20   if n == 100: open(sys.argv[2], 'w').close(); time.sleep(0.3)\n\
        \x20   try:\n\
        \x20       c.execute('INSERT INTO t VALUES (?)', (n,))\n\
        \x20       ok = n\n\
        \x20   except sqlite3.OperationalError as e:\n\
        \x20       failed += 1\n\
        print(ok, failed, flush=True)\n";
    let disk = FsyncFailingDisk::mount();
    let db = disk.path().join("db.sqlite");
    let signal = disk.path().join("fail-now");
    let mut child = Command::new("setpriv")
        .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
        // Debian's own Python: the caller's may live where `nobody` cannot
        // reach it.
        .args(["/usr/bin/python3", "-c", SCRIPT])
        .arg(&db)
        .arg(&signal)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("setpriv and python3");
    while !signal.exists() {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the SQLite writer exited before the failure: {status}");
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    disk.fail();
    std::thread::sleep(std::time::Duration::from_millis(500));
    disk.heal();
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    assert!(child.wait().unwrap().success());
    let (last_ok, failed) = out.trim().split_once(' ').expect("two numbers");
    let failed: u64 = failed.parse().unwrap();
    assert!(failed > 0, "no commit failed while the disk did: {out}");
    assert!(disk.failures().fsyncs_failed > 0);
    // Made by `nobody`, with the mode asked for (0644 less its umask).
    let made = std::fs::metadata(&db).unwrap();
    assert_eq!((made.uid(), made.gid()), (65534, 65534));
    assert_eq!(made.mode() & 0o777, 0o644);
    disk.remount();
    let count = Command::new("python3")
        .args([
            "-c",
            "import sqlite3, sys\n\
             c = sqlite3.connect(sys.argv[1])\n\
             print(c.execute('SELECT max(n) FROM t').fetchone()[0])",
        ])
        .arg(&db)
        .output()
        .unwrap();
    let max = String::from_utf8_lossy(&count.stdout);
    assert_eq!(
        max.trim(),
        last_ok,
        "{}",
        String::from_utf8_lossy(&count.stderr)
    );
}
