use std::collections::BTreeMap;
use std::fs::File;
use std::io::Read;

use proptest::prelude::*;

use super::*;

fn backing() -> File {
    tempfile::tempfile().expect("a temporary file")
}

fn on_disk(backing: &File) -> Vec<u8> {
    let mut out = Vec::new();
    let mut file = backing.try_clone().expect("clone");
    std::io::Seek::rewind(&mut file).expect("rewind");
    file.read_to_end(&mut out).expect("read");
    out
}

fn read_all(cache: &FileCache, backing: &File) -> Vec<u8> {
    cache.read(backing, 0, u64::MAX).expect("read")
}

#[test]
fn a_write_is_read_back_before_it_reaches_the_disk() {
    let file = backing();
    let mut cache = FileCache::default();
    cache.write(&file, 5000, b"hello").unwrap();
    assert_eq!(cache.size(&file).unwrap(), 5005);
    assert_eq!(&read_all(&cache, &file)[5000..], b"hello");
    assert!(on_disk(&file).is_empty());
    let done = cache.write_back(&file, false).unwrap();
    assert_eq!(done, WrittenBack { stored: 1, lost: 0 });
    assert_eq!(on_disk(&file).len(), 5005);
    assert!(!cache.holds_pages());
}

#[test]
fn what_a_failed_write_back_covered_is_read_until_the_remount_and_never_stored() {
    let file = backing();
    let mut cache = FileCache::default();
    cache.write(&file, 0, &[1; 4096]).unwrap();
    cache.write_back(&file, false).unwrap();
    cache.write(&file, 0, &[2; 100]).unwrap();
    cache.write(&file, 4096, &[3; 100]).unwrap();
    assert_eq!(cache.write_back(&file, true).unwrap().lost, 2);
    // Still read as written, as Linux's page cache keeps showing it.
    assert_eq!(read_all(&cache, &file)[..100], [2; 100]);
    // A later write-back that succeeds does not store the lost page: the
    // page stored past it leaves a hole of zeros where it was.
    cache.write(&file, 8192, &[4; 10]).unwrap();
    cache.write_back(&file, false).unwrap();
    cache.remount();
    let disk = read_all(&cache, &file);
    assert_eq!(disk[..4096], [1; 4096]);
    assert_eq!(disk[4096..8192], [0; 4096]);
    assert_eq!(disk[8192..], [4; 10]);
}

#[test]
fn a_lost_page_written_again_is_stored_whole() {
    let file = backing();
    let mut cache = FileCache::default();
    cache.write(&file, 0, &[7; 200]).unwrap();
    cache.write_back(&file, true).unwrap();
    cache.write(&file, 0, &[8; 10]).unwrap();
    cache.write_back(&file, false).unwrap();
    cache.remount();
    let disk = on_disk(&file);
    assert_eq!(disk[..10], [8; 10]);
    assert_eq!(disk[10..200], [7; 190]);
}

#[test]
fn every_opened_file_is_told_of_a_failed_write_back_once() {
    let file = backing();
    let mut cache = FileCache::default();
    let mut before = cache.sample();
    cache.write(&file, 0, b"x").unwrap();
    cache.write_back(&file, true).unwrap();
    // Opened after the failure, before any fsync reported it: told too.
    let mut after = cache.sample();
    assert!(cache.take_error(&mut before));
    assert!(!cache.take_error(&mut before));
    assert!(cache.take_error(&mut after));
    // Opened once it was reported: not told.
    let mut late = cache.sample();
    assert!(!cache.take_error(&mut late));
}

#[test]
fn a_truncate_reaches_the_disk_at_once_and_drops_the_pages_past_it() {
    let file = backing();
    let mut cache = FileCache::default();
    cache.write(&file, 0, &[9; 10_000]).unwrap();
    cache.truncate(&file, 4100).unwrap();
    assert_eq!(on_disk(&file).len(), 4100);
    cache.truncate(&file, 6000).unwrap();
    let seen = read_all(&cache, &file);
    assert_eq!(seen.len(), 6000);
    assert_eq!(seen[..4100], [9; 4100]);
    assert_eq!(seen[4100..], [0; 1900]);
}

#[test]
fn dropping_the_lost_pages_shows_the_disk_and_keeps_the_dirty_ones() {
    let file = backing();
    let mut cache = FileCache::default();
    cache.write(&file, 0, &[1; 3000]).unwrap();
    cache.write_back(&file, false).unwrap();
    cache.write(&file, 3000, &[2; 3000]).unwrap();
    cache.write_back(&file, true).unwrap();
    cache.write(&file, 10_000, &[3; 10]).unwrap();
    assert_eq!(cache.drop_lost(&file).unwrap(), 2);
    let seen = read_all(&cache, &file);
    assert_eq!(seen.len(), 10_010);
    assert_eq!(seen[..3000], [1; 3000]);
    assert!(seen[3000..10_000].iter().all(|&b| b == 0));
    assert_eq!(seen[10_000..], [3; 10]);
    // With no dirty page left, the file is the disk's again, size and all.
    cache.write(&file, 3000, &[4; 5000]).unwrap();
    cache.write_back(&file, true).unwrap();
    let mut only_lost = FileCache::default();
    only_lost.write(&file, 3000, &[5; 100]).unwrap();
    only_lost.write_back(&file, true).unwrap();
    only_lost.drop_lost(&file).unwrap();
    assert_eq!(read_all(&only_lost, &file), [1; 3000]);
}

#[derive(Debug, Clone)]
enum Op {
    Write { offset: u64, len: usize, byte: u8 },
    Truncate(u64),
    WriteBack { failing: bool },
    DropLost,
    ReadAt { offset: u64, len: u64 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u64..20_000, 1usize..6_000, any::<u8>())
            .prop_map(|(offset, len, byte)| Op::Write { offset, len, byte }),
        1 => (0u64..20_000).prop_map(Op::Truncate),
        2 => any::<bool>().prop_map(|failing| Op::WriteBack { failing }),
        1 => Just(Op::DropLost),
        1 => (0u64..25_000, 0u64..9_000).prop_map(|(offset, len)| Op::ReadAt { offset, len }),
    ]
}

/// The file as a plain model: what readers see, what the disk holds, and
/// for each cached page whether its write-back failed and how far into it
/// the file reaches.
#[derive(Debug, Default)]
struct Model {
    visible: Vec<u8>,
    disk: Vec<u8>,
    pages: BTreeMap<u64, (bool, usize)>,
}

impl Model {
    fn write(&mut self, offset: u64, len: usize, byte: u8) {
        let end = offset + len as u64;
        for page in offset / PAGE..=(end - 1) / PAGE {
            let start = page * PAGE;
            let loaded = (self.visible.len() as u64).saturating_sub(start).min(PAGE) as usize;
            let entry = self.pages.entry(page).or_insert((false, loaded));
            entry.0 = false;
            entry.1 = entry.1.max((end.min(start + PAGE) - start) as usize);
        }
        if self.visible.len() < end as usize {
            self.visible.resize(end as usize, 0);
        }
        self.visible[offset as usize..end as usize].fill(byte);
    }

    fn truncate(&mut self, size: u64) {
        self.visible.resize(size as usize, 0);
        self.disk.resize(size as usize, 0);
        self.pages.retain(|page, _| page * PAGE < size);
        if let Some(entry) = self.pages.get_mut(&(size / PAGE)) {
            entry.1 = entry.1.min((size % PAGE) as usize);
        }
    }

    /// A successful write-back stores each dirty page as far as the file
    /// reaches into it; a failed one marks every page lost.
    fn write_back(&mut self, failing: bool) {
        if failing {
            if self.pages.values().any(|(lost, _)| !lost) {
                self.pages.values_mut().for_each(|(lost, _)| *lost = true);
            }
            return;
        }
        for (page, (lost, extent)) in &self.pages {
            if *lost {
                continue;
            }
            let start = (page * PAGE) as usize;
            if self.disk.len() < start + extent {
                self.disk.resize(start + extent, 0);
            }
            self.disk[start..start + extent].copy_from_slice(&self.visible[start..start + extent]);
        }
        self.pages.retain(|_, (lost, _)| *lost);
    }

    /// Lost pages dropped: readers see the disk there, and the file
    /// reaches as far as the disk and the dirty pages do.
    fn drop_lost(&mut self) {
        self.pages.retain(|_, (lost, _)| !*lost);
        let len = self
            .pages
            .iter()
            .map(|(page, (_, extent))| (page * PAGE) as usize + extent)
            .max()
            .unwrap_or(0)
            .max(self.disk.len());
        self.visible = (0..len)
            .map(|i| {
                let from = if self.pages.contains_key(&(i as u64 / PAGE)) {
                    &self.visible
                } else {
                    &self.disk
                };
                from.get(i).copied().unwrap_or(0)
            })
            .collect();
    }
}

proptest! {
    /// Against a plain model of the same file: reads (whole or at an
    /// offset) always see every write and truncate, and the lost pages'
    /// bytes until they are dropped; after the remount the disk holds
    /// exactly what the successful write-backs stored, and no byte of a
    /// page whose write-back failed (and that was not written again)
    /// reaches it.
    #[test]
    fn the_cache_keeps_what_was_written_back_and_nothing_a_failure_lost(
        ops in proptest::collection::vec(op(), 1..40),
    ) {
        let file = backing();
        let mut cache = FileCache::default();
        let mut model = Model::default();
        for op in ops {
            match op {
                Op::Write { offset, len, byte } => {
                    cache.write(&file, offset, &vec![byte; len]).unwrap();
                    model.write(offset, len, byte);
                }
                Op::Truncate(size) => {
                    cache.truncate(&file, size).unwrap();
                    model.truncate(size);
                }
                Op::WriteBack { failing } => {
                    cache.write_back(&file, failing).unwrap();
                    model.write_back(failing);
                }
                Op::DropLost => {
                    cache.drop_lost(&file).unwrap();
                    model.drop_lost();
                }
                Op::ReadAt { offset, len } => {
                    let end = (offset + len).min(model.visible.len() as u64) as usize;
                    let expected = model.visible.get(offset as usize..end).unwrap_or_default();
                    prop_assert_eq!(cache.read(&file, offset, len).unwrap(), expected);
                }
            }
            prop_assert_eq!(&read_all(&cache, &file), &model.visible);
            prop_assert_eq!(&on_disk(&file), &model.disk);
        }
        cache.remount();
        prop_assert_eq!(on_disk(&file), model.disk.clone());
        prop_assert_eq!(read_all(&cache, &file), model.disk);
    }
}
