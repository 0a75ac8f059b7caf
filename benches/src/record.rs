//! Benchmark results as dated markdown files: each command that measures
//! writes what it printed to `docs/benchmarks/<date>-<name>.md`, headed by
//! the date, the machine and the command, so the docs link to real output
//! rather than copied numbers.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

/// What [`say`] printed so far, for [`record_transcript`].
static TRANSCRIPT: Mutex<String> = Mutex::new(String::new());

/// Prints `line` and keeps it for [`record_transcript`]: how a benchmark
/// that prints its tables as it goes records them.
pub fn say(line: impl AsRef<str>) {
    let line = line.as_ref();
    println!("{line}");
    let mut transcript = TRANSCRIPT.lock().unwrap_or_else(|e| e.into_inner());
    transcript.push_str(line);
    transcript.push('\n');
}

/// [`record`]s everything [`say`] printed, and starts a new transcript.
pub fn record_transcript(name: &str, command: &str) -> Option<PathBuf> {
    let body = std::mem::take(&mut *TRANSCRIPT.lock().unwrap_or_else(|e| e.into_inner()));
    record(name, command, &body)
}

/// The directory the dated results go to: `docs/benchmarks` of the
/// repository, or `WORKERID_BENCH_RESULTS` when set.
pub fn results_dir() -> PathBuf {
    match std::env::var_os("WORKERID_BENCH_RESULTS") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/benchmarks"),
    }
}

/// Today's date (UTC) as `YYYY-MM-DD`.
pub fn today() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (y, m, d) = civil_from_days(i64::try_from(secs / 86_400).unwrap_or(0));
    format!("{y:04}-{m:02}-{d:02}")
}

/// The proleptic Gregorian date of a count of days since 1970-01-01
/// (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// One line about the machine: CPU model, CPU count, OS and kernel.
pub fn machine() -> String {
    let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
    let cpuinfo = read("/proc/cpuinfo");
    // The machine's CPUs, not the ones this thread may run on: a bench that
    // pinned itself to one CPU still records the machine it ran on.
    let cpus = match cpuinfo
        .lines()
        .filter(|l| l.starts_with("processor"))
        .count()
    {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    };
    let os = read("/etc/os-release")
        .lines()
        .find_map(|l| l.strip_prefix("PRETTY_NAME="))
        .map(|name| name.trim_matches('"').to_string())
        .unwrap_or_else(|| std::env::consts::OS.to_string());
    let kernel = read("/proc/sys/kernel/osrelease");
    format!(
        "{cpus} CPUs ({}), {os}, kernel {}",
        cpu_kind(),
        kernel.trim()
    )
}

/// The CPU model with its family and model where `/proc/cpuinfo` gives
/// them: `AMD EPYC, family 25 model 1`.
fn cpu_kind() -> String {
    let cpu = cpu_model();
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    match family_and_model(&cpuinfo) {
        Some(kind) => format!("{cpu}, {kind}"),
        None => cpu,
    }
}

/// `family F model M` of the first CPU in `/proc/cpuinfo`'s text: hosts
/// sold under one model name ("AMD EPYC") differ in what an atomic or a
/// clock read costs by CPU generation, which the family and model tell.
fn family_and_model(cpuinfo: &str) -> Option<String> {
    let field = |name: &str| {
        cpuinfo.lines().find_map(|l| {
            let (key, value) = l.split_once(':')?;
            (key.trim() == name).then(|| value.trim().to_string())
        })
    };
    Some(format!(
        "family {} model {}",
        field("cpu family")?,
        field("model")?
    ))
}

/// The CPU model (`/proc/cpuinfo`'s model name; the architecture where
/// there is none).
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, model)| model.trim().to_string())
        .unwrap_or_else(|| std::env::consts::ARCH.to_string())
}

/// Writes `body` (the markdown a benchmark printed) to
/// `<results_dir>/<today>-<name>.md` under a header with the date, the
/// machine and `command`; returns the path. A run on the machine that
/// wrote today's file replaces it; a run on another machine goes beside
/// it, named after its CPU (see [`path_for`]). A failure to write is
/// printed, not fatal: the figures were printed already.
pub fn record(name: &str, command: &str, body: &str) -> Option<PathBuf> {
    let dir = results_dir();
    let day = today();
    let machine = machine();
    let text = format!(
        "# {name}, {day}\n\nMachine: {machine}.\n\nCommand: `{command}`\n\n{}\n",
        body.trim()
    );
    let made = std::fs::create_dir_all(&dir);
    let path = path_for(
        &dir.canonicalize().unwrap_or(dir),
        &day,
        name,
        &machine,
        &cpu_kind(),
    );
    let written = made.and_then(|()| std::fs::write(&path, text));
    match written {
        Ok(()) => {
            println!("\n(recorded in {})", path.display());
            Some(path)
        }
        Err(e) => {
            eprintln!("could not record the results in {}: {e}", path.display());
            None
        }
    }
}

/// Where today's results of `name` on `machine` go in `dir`:
/// `<day>-<name>.md`, unless that file holds another machine's results;
/// then `<day>-<name>-<cpu>.md`, named after the CPU `cpu` (its model,
/// family and model number) in lowercase words joined by dashes, so that
/// two machines' runs of one day are both kept.
pub fn path_for(dir: &Path, day: &str, name: &str, machine: &str, cpu: &str) -> PathBuf {
    let plain = dir.join(format!("{day}-{name}.md"));
    let header = format!("Machine: {machine}.");
    match std::fs::read_to_string(&plain) {
        Ok(text) if !text.lines().any(|line| line == header) => {
            dir.join(format!("{day}-{name}-{}.md", cpu_slug(cpu)))
        }
        _ => plain,
    }
}

/// A CPU model in lowercase words joined by dashes, trademark marks
/// dropped: `Intel(R) Xeon(R) Processor` is `intel-xeon-processor`.
fn cpu_slug(cpu: &str) -> String {
    let words: Vec<String> = cpu
        .replace("(R)", " ")
        .replace("(TM)", " ")
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|word| !word.is_empty())
        .map(str::to_ascii_lowercase)
        .collect();
    if words.is_empty() {
        "other".to_owned()
    } else {
        words.join("-")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_civil() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(59), (1970, 3, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(20_782), (2026, 11, 25));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
    }

    #[test]
    fn cpu_models_name_files() {
        assert_eq!(
            cpu_slug("Intel(R) Xeon(R) Processor"),
            "intel-xeon-processor"
        );
        assert_eq!(cpu_slug("AMD EPYC"), "amd-epyc");
        assert_eq!(
            cpu_slug("AMD EPYC, family 25 model 1"),
            "amd-epyc-family-25-model-1"
        );
        assert_eq!(cpu_slug("Intel(R) Core(TM) i7-8700"), "intel-core-i7-8700");
        assert_eq!(cpu_slug(""), "other");
    }

    #[test]
    fn the_cpus_family_and_model_are_read_from_cpuinfo() {
        let cpuinfo = "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 26\n\
                       model\t\t: 2\nmodel name\t: AMD EPYC\n";
        assert_eq!(
            family_and_model(cpuinfo).as_deref(),
            Some("family 26 model 2")
        );
        assert_eq!(family_and_model("model name\t: AMD EPYC\n"), None);
    }

    #[test]
    fn another_machine_goes_beside_todays_file() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let (intel, amd) = (
            "2 CPUs (Intel(R) Xeon(R)), Debian",
            "2 CPUs (AMD EPYC), Debian",
        );
        let at = |machine: &str, cpu: &str| {
            path_for(dir.path(), "2026-11-28", "snowflake", machine, cpu)
        };
        let plain = dir.path().join("2026-11-28-snowflake.md");
        assert_eq!(at(intel, "Intel(R) Xeon(R)"), plain);
        std::fs::write(
            &plain,
            format!("# snowflake, 2026-11-28\n\nMachine: {intel}.\n"),
        )
        .expect("write");
        assert_eq!(at(intel, "Intel(R) Xeon(R)"), plain);
        assert_eq!(
            at(amd, "AMD EPYC"),
            dir.path().join("2026-11-28-snowflake-amd-epyc.md")
        );
    }
}
