//! `workerid`: the ops CLI. See `workerid --help`.

mod args;
mod bench;
mod decode;
mod error;
mod leases;
mod namespaces;
mod render;
mod segments;
mod store;

use std::io::Write;
use std::process::ExitCode;

use crate::error::CliError;

use args::{Cli, Command};

async fn run(cli: &Cli) -> Result<String, CliError> {
    match &cli.command {
        Command::Leases(args) => leases::leases(args, cli.json).await,
        Command::Namespaces(args) => namespaces::namespaces(args, cli.json).await,
        Command::Release(args) => leases::release(args, cli.json).await,
        Command::Decode(args) => decode::decode(args, cli.json),
        Command::Segments(args) => segments::segments(args, cli.json).await,
        Command::Bench(args) => bench::bench(args, cli.json).await,
        Command::Completions { shell } => Ok(args::completions(*shell)),
    }
}

fn main() -> ExitCode {
    // Usage errors exit 2, --help and --version 0 (clap's codes, as documented).
    let cli = args::parse();
    // No colour codes in logs piped to a file or another program.
    let colour = std::io::IsTerminal::is_terminal(&std::io::stderr());
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(colour)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .init();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("workerid: cannot start the async runtime: {e}");
            return ExitCode::from(error::exit::FAILED);
        }
    };
    let answer = runtime.block_on(run(&cli));
    let answer = answer.and_then(|out| {
        let mut stdout = std::io::stdout().lock();
        stdout.write_all(out.as_bytes())?;
        stdout.flush()?;
        Ok(())
    });
    match answer {
        Ok(()) => ExitCode::from(error::exit::OK),
        Err(e) if cli.json => {
            // Scripts read one JSON document on stdout, success or not.
            let out = serde_json::json!({
                "error": { "kind": e.kind(), "exit_code": e.exit_code(), "message": e.to_string() }
            });
            println!("{out:#}");
            ExitCode::from(e.exit_code())
        }
        Err(e) => {
            eprintln!("workerid: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}
