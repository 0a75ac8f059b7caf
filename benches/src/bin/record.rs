//! Records a table another program printed (read from stdin) as a dated
//! benchmark file, as the Rust benches record theirs:
//! `... | cargo run -q --release -p benches --bin record -- NAME COMMAND`.

use std::io::Read;

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(name), Some(command)) = (args.next(), args.next()) else {
        eprintln!("usage: record NAME COMMAND < table.md");
        std::process::exit(2);
    };
    let mut body = String::new();
    if let Err(e) = std::io::stdin().read_to_string(&mut body) {
        eprintln!("record: cannot read the table: {e}");
        std::process::exit(1);
    }
    if benches::record::record(&name, &command, &body).is_none() {
        std::process::exit(1);
    }
}
