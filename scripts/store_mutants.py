#!/usr/bin/env python3
"""Hand-written mutants of the stores' Lua scripts and SQL statements, which
cargo-mutants cannot change: each breaks one rule of the contract, and the
store's tests must fail on it: its conformance tests, and for etcd also the
crate's own tests of its transactions (the rules that guard a stale mirror
are etcd's alone, out of the suite's reach).

Runs in a git worktree of HEAD (the working tree is never touched), with its
own target directory under target/. Prints a table of the results and writes
it to mutants.out/stores.md; exits 1 if a mutant was missed.

    python3 scripts/store_mutants.py             # every mutant
    python3 scripts/store_mutants.py redis       # those of one store
"""

import os
import subprocess
import sys
import tempfile

# (store, package, the test targets that judge its mutants)
REDIS = ("redis", "workerid-redis", ("--test", "conformance"))
SQL = ("postgres", "workerid-sql", ("--test", "postgres"))
MARIADB = ("mariadb", "workerid-sql", ("--test", "mariadb"))
ETCD = ("etcd", "workerid-etcd", ("--lib", "--test", "conformance"))

# (store, file, text, replacement, the rule it breaks)
MUTANTS = [
    (REDIS, "workerid-redis/src/lua/extend.lua",
     "if token ~= ARGV[2] then", "if false then",
     "renew and release with another token: TokenMismatch"),
    (REDIS, "workerid-redis/src/lua/extend.lua",
     "if ends * 1000 <= now then", "if false then",
     "an expired lease: TokenExpired, not renewed"),
    (REDIS, "workerid-redis/src/lua/extend.lua",
     "if #given > #watermark or (#given == #watermark and given > watermark) then",
     "if true then",
     "a renewal keeps the larger watermark"),
    (REDIS, "workerid-redis/src/lua/extend.lua",
     "if given ~= '0' then", "if true then",
     "a release of watermark 0 keeps the stored one"),
    (REDIS, "workerid-redis/src/lua/acquire.lua",
     "fence = old_fence + 1", "fence = old_fence + 0",
     "the fence rises on every grant"),
    (REDIS, "workerid-redis/src/lua/acquire.lua",
     "if held == ARGV[2] and e * 1000 > now then", "if held == ARGV[2] then",
     "an acquire sent again finds only a live lease"),
    (REDIS, "workerid-redis/src/lua/acquire.lua",
     "if next_id > tonumber(ARGV[1]) then", "if next_id > tonumber(ARGV[1]) + 1 then",
     "grants stay inside the pool"),
    (REDIS, "workerid-redis/src/lua/acquire.lua",
     "if meta[1] and meta[1] ~= ARGV[1] then", "if false then",
     "a namespace remembers its pool size"),
    (REDIS, "workerid-redis/src/lua/acquire.lua",
     "free = f, w, held, e * 1000 <= now", "free = f, w, held, e * 1000 <= now + 1000000",
     "a lease lasts its whole ttl (not a second less)"),
    (REDIS, "workerid-redis/src/lua/segment_reserve.lua",
     "local version = redis.call('HINCRBY', KEYS[3], ARGV[1], 1)",
     "local version = redis.call('HGET', KEYS[1], ARGV[1])",
     "a reservation's version is one the tag never had"),
    (SQL, "workerid-sql/src/dialect.rs",
     "watermark = {greatest}(watermark, ?)", "watermark = ?",
     "a renewal keeps the larger watermark"),
    (SQL, "workerid-sql/src/dialect.rs",
     "CASE WHEN ? = 1 THEN watermark ELSE ? END", "CASE WHEN ? = 2 THEN watermark ELSE ? END",
     "a release of watermark 0 keeps the stored one"),
    (SQL, "workerid-sql/src/dialect.rs",
     "SET expires_at = {now} + ?, watermark", "SET expires_at = {now} + 0 * ?, watermark",
     "a renewal extends the lease"),
    (SQL, "workerid-sql/src/dialect.rs",
     "AND token IS NOT NULL AND expires_at > {now}\"",
     "AND token IS NOT NULL\"",
     "a forced release leaves an expired lease as it is"),
    (SQL, "workerid-sql/src/dialect.rs",
     "AND l.token IS NOT NULL AND l.expires_at > {now})",
     "AND l.token IS NOT NULL)",
     "the namespace list counts live leases only"),
    (SQL, "workerid-sql/src/dialect.rs",
     "\"DELETE FROM {table} WHERE namespace = ? \\\n                 AND (token IS NULL OR expires_at <= {now})\"",
     "\"DELETE FROM {table} WHERE namespace = ?\"",
     "a namespace with a live lease is not removed"),
    # MySQL and MariaDB acquire in a stored procedure of their own.
    (MARIADB, "workerid-sql/src/acquire_routine.rs",
     "fence = (@workerid_fence := fence + 1)", "fence = (@workerid_fence := fence + 0)",
     "the fence rises on every grant"),
    (MARIADB, "workerid-sql/src/acquire_routine.rs",
     "worker_id = (@workerid_id := worker_id) \\\n             WHERE namespace = p_ns AND expires_at <= v_now \\",
     "worker_id = (@workerid_id := worker_id) \\\n             WHERE namespace = p_ns \\",
     "never two live leases on one ID (only a free row is taken)"),
    (MARIADB, "workerid-sql/src/acquire_routine.rs",
     "WHERE namespace = p_ns AND token = p_token AND expires_at > v_now",
     "WHERE namespace = p_ns AND token = p_token",
     "an acquire sent again finds only a live lease"),
    # etcd: the compares of its transactions.
    (ETCD, "workerid-etcd/src/txn.rs",
     ".when([Compare::value(key.clone(), CompareOp::Less, value.clone())])",
     ".when([Compare::value(key.clone(), CompareOp::Greater, value.clone())])",
     "a renewal keeps the larger watermark"),
    (ETCD, "workerid-etcd/src/txn.rs",
     "            keys.owner(id),\n            CompareOp::Equal,\n            token.to_string(),",
     "            keys.owner(id),\n            CompareOp::NotEqual,\n            token.to_string(),",
     "renew and release with another token: TokenMismatch"),
    # (Dropping the take's other compare, that the owner key is absent,
    # changes nothing a test can see: every take writes the ownership key
    # that this one compares, so it is equivalent; see docs/conformance.md.)
    (ETCD, "workerid-etcd/src/txn.rs",
     "Compare::mod_revision(keys.ownership(id), CompareOp::Equal, record),",
     "Compare::mod_revision(keys.ownership(id), CompareOp::Greater, -1),",
     "a take sees the ID as the acquirer last read it (quarantine, fences)"),
]


def run(cmd, cwd, env=None, quiet=True):
    out = subprocess.DEVNULL if quiet else None
    return subprocess.run(cmd, cwd=cwd, env=env, stdout=out, stderr=out).returncode


def main():
    wanted = set(sys.argv[1:])
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, CARGO_TARGET_DIR=os.path.join(repo, "target", "store-mutants"))
    work = tempfile.mkdtemp(prefix="workerid-store-mutants-")
    tree = os.path.join(work, "tree")
    subprocess.run(["git", "worktree", "add", "--detach", tree, "HEAD"], cwd=repo, check=True,
                   stdout=subprocess.DEVNULL)
    rows, missed = [], 0
    try:
        stores = sorted({m[0] for m in MUTANTS if not wanted or m[0][0] in wanted})
        for store, package, targets in stores:
            print(f"== {store}: the unchanged tree must pass", flush=True)
            if run(["cargo", "test", "-q", "-p", package, *targets], tree, env, False):
                sys.exit(f"the unchanged {store} tests fail: fix them first")
        for (store, package, targets), path, text, replacement, rule in MUTANTS:
            if wanted and store not in wanted:
                continue
            file = os.path.join(tree, path)
            with open(file) as f:
                original = f.read()
            if original.count(text) != 1:
                sys.exit(f"{path}: {text!r} occurs {original.count(text)} times, not once")
            with open(file, "w") as f:
                f.write(original.replace(text, replacement))
            try:
                failed = run(["cargo", "test", "-q", "-p", package, *targets], tree, env) != 0
            finally:
                with open(file, "w") as f:
                    f.write(original)
            verdict = "caught" if failed else "MISSED"
            missed += not failed
            print(f"{verdict:7} {store:9} {rule}", flush=True)
            rows.append(f"| {store} | `{os.path.basename(path)}` | {rule} | {verdict} |")
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", tree], cwd=repo,
                       stdout=subprocess.DEVNULL)
    table = "| store | file | the rule the mutant breaks | result |\n| --- | --- | --- | --- |\n"
    table += "\n".join(rows) + "\n"
    os.makedirs(os.path.join(repo, "mutants.out"), exist_ok=True)
    with open(os.path.join(repo, "mutants.out", "stores.md"), "w") as f:
        f.write(table)
    print(table)
    sys.exit(1 if missed else 0)


if __name__ == "__main__":
    main()
