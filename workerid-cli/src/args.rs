//! The command line: every command, its flags, and its help with examples.

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};

/// The exit codes, as `--help` lists them.
const EXIT_CODES: &str = "Exit codes:
  0  success
  1  any other failure
  2  bad usage: flag, URL, namespace, worker ID, tag or layout (nothing changed)
  3  the store cannot be reached or timed out
  4  no such database, namespace (no worker ID ever granted in it) or tag
  5  refused, nothing changed (release without --force, a tag that exists)
  6  the store cannot do this (a store without listing)
  7  the store denied access (user, password, certificate, a grant)
  8  something else answers at the address (or not over TLS)
  130  interrupted by Ctrl-C, after cleaning up";

/// Parses the command line; the accepted store URLs in `--help` are the
/// facade's own list, so they are written in one place.
pub fn parse() -> Cli {
    let urls = workerid::StoreKind::compiled_in()
        .filter(|kind| *kind != workerid::StoreKind::Memory)
        .map(|kind| format!("  {}", kind.url_form()))
        .collect::<Vec<_>>()
        .join("\n");
    let help = format!(
        "Examples:\n  \
         workerid leases --store redis://127.0.0.1:6379/ --namespace orders\n  \
         workerid release --store postgres://ops@db/ids --namespace orders --id 17 --force\n  \
         workerid decode 264905529753669637\n  \
         workerid segments --store sqlite:///var/lib/ids.db\n  \
         workerid bench --store redis://127.0.0.1:6379/\n\n\
         Stores by URL (from --store or WORKERID_STORE):\n{urls}\n\n{EXIT_CODES}"
    );
    let command = Cli::command().after_help(help);
    let args: Vec<String> = std::env::args_os()
        .map(|arg| arg.to_string_lossy().into_owned())
        .collect();
    let parsed = command
        .try_get_matches_from(&args)
        .and_then(|matches| Cli::from_arg_matches(&matches));
    parsed.unwrap_or_else(|e| usage_error(e, &args))
}

/// Exits on a usage error as clap does (2; 0 for `--help`, `--version`),
/// but with every store URL of the command line shown without its password:
/// clap quotes an argument it did not expect, and a URL given without
/// `--store` is one. With `--json`, the error is a JSON document on stdout
/// instead, as every other error is.
fn usage_error(e: clap::Error, args: &[String]) -> ! {
    use clap::error::ErrorKind;
    if matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        e.exit()
    }
    let message = redact_args(&e.render().to_string(), args);
    if args.iter().any(|arg| arg == "--json") {
        let out = serde_json::json!({
            "error": { "kind": "usage", "exit_code": crate::error::exit::USAGE, "message": message.trim_end() }
        });
        println!("{out:#}");
    } else {
        eprint!("{message}");
    }
    std::process::exit(i32::from(crate::error::exit::USAGE))
}

/// `text` with each argument that is a URL holding a password replaced by
/// the URL with the password hidden.
fn redact_args(text: &str, args: &[String]) -> String {
    let mut text = text.to_owned();
    for arg in args {
        // `--store=URL` quotes the whole argument or the value alone.
        let value = arg.split_once('=').map_or(arg.as_str(), |(flag, value)| {
            if flag.starts_with("--") {
                value
            } else {
                arg
            }
        });
        for candidate in [arg.as_str(), value] {
            let redacted = workerid::redact_url(candidate);
            if redacted != candidate && !candidate.is_empty() {
                text = text.replace(candidate, &redacted);
            }
        }
    }
    text
}

#[cfg(test)]
mod redaction_tests {
    use super::redact_args;

    #[test]
    fn a_url_quoted_in_a_usage_error_loses_its_password() {
        let args = [
            "workerid".to_string(),
            "leases".to_string(),
            "redis://:S3cret@h:6379/".to_string(),
            "--store=postgres://u:Pw0rd@db/ids".to_string(),
        ];
        let text = "error: unexpected argument 'redis://:S3cret@h:6379/' found; \
                    a value 'postgres://u:Pw0rd@db/ids'";
        let shown = redact_args(text, &args);
        assert!(
            !shown.contains("S3cret") && !shown.contains("Pw0rd"),
            "{shown}"
        );
        assert!(
            shown.contains("redis://") && shown.contains("postgres://"),
            "{shown}"
        );
    }
}

/// See and manage worker-ID leases, decode snowflake IDs, manage segment tags.
#[derive(Debug, Parser)]
#[command(name = "workerid", version, arg_required_else_help = true)]
pub struct Cli {
    /// Print JSON for scripts instead of a table.
    #[arg(long, global = true)]
    pub json: bool,

    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// A table of a namespace's worker IDs: live / expired / free, fence, time left, watermark.
    #[command(after_help = concat!(
        "Every worker ID ever granted in the namespace is listed; IDs never granted are not.\n\
         Time left is judged on the store's clock. The watermark is the highest timestamp\n\
         (ms since 1970) a holder reserved, shown as a UTC date.\n\n\
         Examples:\n  \
         workerid leases --store redis://127.0.0.1:6379/ --namespace orders\n  \
         workerid leases -s sqlite:///var/lib/ids.db -n orders --json | jq '.leases[] | select(.state == \"live\")'\n\n",
        "Exit codes: 0 ok, 2 bad usage, 3 store unreachable, 4 unknown namespace, 6 store cannot list,\n\
         7 access denied, 8 not this store at the address (workerid --help lists them all)."
    ))]
    Leases(LeasesArgs),

    /// Every namespace of the store: its worker IDs and how many are held live.
    #[command(after_help = concat!(
        "Lists each namespace in which a worker ID was ever granted, in name order;\n\
         `namespaces remove NAME --force` removes one that no live lease uses.\n\n\
         Examples:\n  \
         workerid namespaces --store redis://127.0.0.1:6379/\n  \
         workerid namespaces -s postgres://ops@db/ids --json\n  \
         workerid namespaces remove workerid-bench --force -s redis://127.0.0.1:6379/\n\n",
        "Exit codes: 0 ok, 2 bad usage, 3 store unreachable, 4 no such namespace (remove),\n\
         5 refused (remove), 6 store cannot list, 7 access denied."
    ))]
    Namespaces(NamespacesArgs),

    /// An operator's forced release of a stuck worker ID (needs --force).
    #[command(after_help = concat!(
        "Frees the ID whatever token holds it, as if its holder had released it: the fence\n\
         and the watermark are kept, so the next holder gets a higher fence and never goes\n\
         back in time. The former holder's next renewal fails with NotAssigned and a\n\
         snowflake worker then stops issuing IDs (a supervised one joins again, maybe on\n\
         the same ID: stop the process to evict it). With --fence, only while the ID's\n\
         fence is the one given. Without --force nothing is done.\n\n\
         Examples:\n  \
         workerid release --store redis://127.0.0.1:6379/ --namespace orders --id 17 --force\n  \
         workerid release -s redis://127.0.0.1:6379/ -n orders --id 17 --fence 42 --force\n  \
         WORKERID_STORE=postgres://ops@db/ids workerid release -n orders --id 17 --force --json\n\n",
        "Exit codes: 0 ok (released, or not held live), 2 bad usage or ID outside the pool,\n\
         3 store unreachable, 4 unknown namespace, 5 refused without --force, 6 store cannot release,\n\
         7 access denied, 8 not this store at the address."
    ))]
    Release(ReleaseArgs),

    /// A snowflake ID's time (UTC), worker ID and sequence.
    #[command(after_help = concat!(
        "Layouts: classic (41 bits of ms since 2024-01-01, 10 worker bits, 12 sequence bits),\n\
         sonyflake (Sonyflake's: 39 bits of 10 ms since 2014-09-01, then 8 sequence bits, then 16\n\
         machine bits), sonyflake-v2 (the same since 2025-01-01), twitter (41/10/12 since\n\
         2010-11-04T01:42:54.657Z), discord (41/10/12 since 2015-01-01), instagram (40/13/10\n\
         since 2011-08-24T21:07:01.721Z), js-safe (below 2^53: 38 bits of 10 ms, 8, 7), or\n\
         custom:TIMESTAMP_BITS,WORKER_BITS,SEQUENCE_BITS,UNIT_MS,EPOCH with EPOCH a date\n\
         (YYYY-MM-DD) or milliseconds since 1970. IDs in decimal or 0x hex.\n\n\
         Examples:\n  \
         workerid decode 264905529753669637\n  \
         workerid decode 0x3ad222d00011005 --json\n  \
         workerid decode 647732070973444355 --layout sonyflake\n  \
         workerid decode 1541815603606036480 --layout twitter\n  \
         workerid decode 123456789012 --layout custom:41,10,12,1,2020-01-01 --json\n\n",
        "Exit codes: 0 ok, 2 bad ID or layout."
    ))]
    Decode(DecodeArgs),

    /// Segment tags: their max_id (the first ID not handed out yet) and step;
    /// `segments show` shows one, `segments create` makes one.
    #[command(after_help = concat!(
        "Examples:\n  \
         workerid segments --store sqlite:///var/lib/ids.db\n  \
         workerid segments create orders --first-id 1 --step 1000 --store redis://127.0.0.1:6379/\n  \
         workerid segments show orders --store redis://127.0.0.1:6379/ --json\n\n",
        "Exit codes: 0 ok, 2 bad usage, 3 store unreachable, 4 no such database or tag (show), 5 the tag exists\n\
         already (unchanged), 6 store cannot list, 7 access denied, 8 not this store at the address."
    ))]
    Segments(SegmentsArgs),

    /// A quick latency check of the store from here: acquire / renew / release, p50 / p99.
    #[command(after_help = concat!(
        "Runs ROUNDS cycles of acquire, renew and release in a scratch namespace (pool of\n\
         1024 IDs; each cycle frees its ID), after one warm-up cycle, and prints each\n\
         operation's median, 99th percentile and slowest time.\n\n\
         Examples:\n  \
         workerid bench --store redis://127.0.0.1:6379/\n  \
         workerid bench --store postgres://ops@db/ids --rounds 500 --json\n\n",
        "Exit codes: 0 ok, 2 bad usage, 3 store unreachable, 4 no such database, 5 the namespace\n\
         exists already, 7 access denied, 8 not this store at the address, 130 stopped by\n\
         Ctrl-C (the namespace removed all the same)."
    ))]
    Bench(BenchArgs),

    /// Print the shell completion script for SHELL (bash, zsh, fish, elvish, powershell).
    #[command(after_help = "Example:\n  \
         workerid completions bash > /etc/bash_completion.d/workerid\n\n\
         Exit codes: 0 ok, 2 an unknown shell.")]
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

/// Where the store is. Its `Debug` hides the URL's password.
#[derive(Args)]
pub struct StoreArgs {
    /// The store's URL (see --help for the forms); its password is never shown.
    #[arg(
        long,
        short = 's',
        env = "WORKERID_STORE",
        hide_env_values = true,
        value_name = "URL"
    )]
    pub store: String,
    /// How long to wait for the store.
    #[command(flatten)]
    pub timeout: TimeoutArgs,
}

impl StoreArgs {
    /// The store to open.
    pub fn target(&self) -> Target<'_> {
        Target {
            url: &self.store,
            timeout: self.timeout.timeout,
        }
    }
}

/// How long a command waits for the store: to connect, and for each answer.
#[derive(Debug, Clone, Copy, Args)]
pub struct TimeoutArgs {
    /// How long to wait to connect to the store, and for each of its
    /// answers: 500ms, 3s, 2m (a bare number is seconds).
    #[arg(
        long,
        env = "WORKERID_TIMEOUT",
        value_name = "DURATION",
        default_value = "3s",
        value_parser = parse_timeout,
        global = true
    )]
    pub timeout: std::time::Duration,
}

/// The shortest and longest `--timeout`.
const TIMEOUTS: std::ops::RangeInclusive<std::time::Duration> =
    std::time::Duration::from_millis(10)..=std::time::Duration::from_secs(3600);

/// `--timeout`'s value: a whole number with `ms`, `s` or `m`, or none for
/// seconds, from 10ms to 1 hour.
fn parse_timeout(text: &str) -> Result<std::time::Duration, String> {
    use std::time::Duration;
    let digits = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(digits);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration such as 500ms, 3s or 2m"))?;
    let duration = match unit {
        "ms" => Duration::from_millis(number),
        "" | "s" => Duration::from_secs(number),
        "m" => Duration::from_secs(number.saturating_mul(60)),
        _ => {
            return Err(format!(
                "{text:?}: the unit must be ms, s or m (500ms, 3s, 2m)"
            ))
        }
    };
    if !TIMEOUTS.contains(&duration) {
        return Err(format!("{text:?} is not between 10ms and 60m"));
    }
    Ok(duration)
}

#[cfg(test)]
mod timeout_tests {
    use super::parse_timeout;
    use std::time::Duration;

    #[test]
    fn durations_with_and_without_a_unit() {
        assert_eq!(parse_timeout("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_timeout("3s"), Ok(Duration::from_secs(3)));
        assert_eq!(parse_timeout("7"), Ok(Duration::from_secs(7)));
        assert_eq!(parse_timeout("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_timeout("60m"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_timeout("10ms"), Ok(Duration::from_millis(10)));
    }

    #[test]
    fn anything_else_is_refused_with_the_forms_named() {
        for bad in [
            "",
            "s",
            "3h",
            "1.5s",
            "-1s",
            "0",
            "9ms",
            "61m",
            " 3s",
            "3 s",
            "99999999999999999999s",
        ] {
            let err = parse_timeout(bad).unwrap_err();
            assert!(err.contains("ms") || err.contains("60m"), "{bad:?}: {err}");
        }
        assert!(parse_timeout(&format!("{}m", u64::MAX)).is_err());
    }
}

/// A store URL and how long to wait for it.
#[derive(Clone, Copy)]
pub struct Target<'a> {
    /// The URL (with its password: never print it as it is).
    pub url: &'a str,
    /// How long to wait to connect, and for each answer.
    pub timeout: std::time::Duration,
}

/// `leases`.
#[derive(Debug, Args)]
pub struct LeasesArgs {
    /// The store.
    #[command(flatten)]
    pub store: StoreArgs,
    /// The namespace (the pool of worker IDs).
    #[arg(long, short = 'n', env = "WORKERID_NAMESPACE")]
    pub namespace: String,
}

/// The store of a command with subcommands: `--store` may come before or
/// after the subcommand. Its `Debug` hides the URL's password.
#[derive(Args)]
pub struct OptionalStoreArgs {
    /// The store's URL (see --help for the forms); its password is never shown.
    #[arg(
        long,
        short = 's',
        env = "WORKERID_STORE",
        hide_env_values = true,
        value_name = "URL",
        global = true
    )]
    pub store: Option<String>,
    /// How long to wait for the store.
    #[command(flatten)]
    pub timeout: TimeoutArgs,
}

impl OptionalStoreArgs {
    /// The store to open.
    ///
    /// # Errors
    /// [`CliError::Usage`](crate::error::CliError::Usage) naming `command`
    /// when no store is given.
    pub fn target(&self, command: &str) -> Result<Target<'_>, crate::error::CliError> {
        let url = self.store.as_deref().ok_or_else(|| {
            crate::error::CliError::Usage(format!(
                "{command} needs --store URL (or WORKERID_STORE)"
            ))
        })?;
        Ok(Target {
            url,
            timeout: self.timeout.timeout,
        })
    }
}

impl std::fmt::Debug for OptionalStoreArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OptionalStoreArgs")
            .field("store", &self.store.as_deref().map(workerid::redact_url))
            .field("timeout", &self.timeout.timeout)
            .finish()
    }
}

/// `namespaces`.
#[derive(Debug, Args)]
pub struct NamespacesArgs {
    /// The store.
    #[command(flatten)]
    pub store: OptionalStoreArgs,
    /// `remove`, or nothing to list the namespaces.
    #[command(subcommand)]
    pub action: Option<NamespacesCommand>,
}

/// `namespaces remove`.
#[derive(Debug, Subcommand)]
pub enum NamespacesCommand {
    /// Removes a namespace none of whose worker IDs a live lease holds
    /// (needs --force).
    #[command(
        after_help = "Forgets the namespace whole: its pool size, and each worker ID's fence,\n\
        watermark and holder label. A worker ID leased there afterwards starts from its\n\
        holder's clock alone, with nothing to keep it above the timestamps issued before:\n\
        remove only a namespace whose IDs are done with (a finished test, a scratch pool\n\
        left by an interrupted bench), never one a fleet will use again.\n\n\
        Example:\n  \
        workerid namespaces remove workerid-bench --force --store redis://127.0.0.1:6379/\n\n\
        Exit codes: 0 removed, 2 bad name, 3 store unreachable, 4 no such namespace,\n\
        5 refused (without --force, or a live lease holds one of its IDs), 6 store cannot\n\
        remove, 7 access denied."
    )]
    Remove {
        /// The namespace.
        namespace: String,
        /// Yes, forget its fences and watermarks.
        #[arg(long)]
        force: bool,
    },
}

/// `release`.
#[derive(Debug, Args)]
pub struct ReleaseArgs {
    /// The store.
    #[command(flatten)]
    pub store: StoreArgs,
    /// The namespace (the pool of worker IDs).
    #[arg(long, short = 'n', env = "WORKERID_NAMESPACE")]
    pub namespace: String,
    /// The worker ID to free.
    #[arg(long)]
    pub id: u64,
    /// Yes, free it even if a live process holds it.
    #[arg(long)]
    pub force: bool,
    /// Only while the ID's fence is still this one (as `leases` showed it):
    /// a release sent again never frees a grant made since.
    #[arg(long, value_name = "FENCE")]
    pub fence: Option<u64>,
}

/// `decode`.
#[derive(Debug, Args)]
pub struct DecodeArgs {
    /// The snowflake ID (decimal, or hex with 0x).
    pub id: String,
    /// classic, sonyflake, sonyflake-v2, twitter, discord, instagram, js-safe, or
    /// custom:TS_BITS,WORKER_BITS,SEQ_BITS,UNIT_MS,EPOCH.
    #[arg(long, default_value = "classic")]
    pub layout: String,
}

/// `segments`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = false)]
pub struct SegmentsArgs {
    /// The store.
    #[command(flatten)]
    pub store: OptionalStoreArgs,
    /// `create`, `show`, or nothing to list the tags.
    #[command(subcommand)]
    pub action: Option<SegmentsCommand>,
}

/// `segments create` and `segments show`.
#[derive(Debug, Subcommand)]
pub enum SegmentsCommand {
    /// One tag: its max_id, step, and how many IDs are left before it is
    /// exhausted.
    #[command(after_help = "Example:\n  \
        workerid segments show orders --store redis://127.0.0.1:6379/\n\n\
        Exit codes: 0 ok, 2 bad tag, 3 store unreachable, 4 no such tag or database,\n\
        6 store cannot list, 7 access denied, 8 not this store at the address.")]
    Show {
        /// The tag.
        tag: String,
    },
    /// Creates a tag; refuses (exit 5) if it exists.
    #[command(after_help = "Example:\n  \
        workerid segments create orders --first-id 1 --step 1000 --store redis://127.0.0.1:6379/\n\n\
        Exit codes: 0 created, 2 bad tag, start or step, 3 store unreachable,\n\
        5 the tag exists already (unchanged).")]
    Create {
        /// The tag: 1 to 32 bytes of [A-Za-z0-9._:-].
        tag: String,
        /// The tag's first ID (the server's config calls it first_id too).
        #[arg(long, default_value_t = 1)]
        first_id: u64,
        /// How many IDs a process reserves at once (its default step).
        #[arg(long, default_value_t = 1000)]
        step: u64,
    },
}

/// `bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// The store.
    #[command(flatten)]
    pub store: StoreArgs,
    /// The scratch namespace (pool of 1024 IDs).
    #[arg(long, short = 'n', default_value = "workerid-bench")]
    pub namespace: String,
    /// How many acquire / renew / release cycles.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub rounds: u32,
}

impl std::fmt::Debug for StoreArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreArgs")
            .field("store", &workerid::redact_url(&self.store))
            .field("timeout", &self.timeout.timeout)
            .finish()
    }
}

/// The completion script of `shell` for `workerid`.
pub fn completions(shell: clap_complete::Shell) -> String {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "workerid", &mut script);
    String::from_utf8_lossy(&script).into_owned()
}
