#!/usr/bin/env python3
"""
test/bench/bench_keys.py -- key access on a zipper table vs a heap table with
a btree on (key, valid_from), side by side in one run (README "Performance").

Two tables hold the same versions:

  z_keys  USING zipper_lake, key id: an initial load of --keys keys by
          apply_changes(), then one apply_changes() per day for --days days,
          each changing --change-rate of the keys at a random time of the day.
  h_keys  an ordinary heap table with the same rows (loaded in valid_from
          order, as a daily job appends them), PRIMARY KEY (id, valid_from)
          and a btree on valid_to.  Both tables are VACUUM ANALYZE'd.

Queries, each timed by pgbench -M prepared (one client, --seconds seconds per
query and table, tables alternated, the average latency pgbench reports; a
short untimed warm-up first), a random key per execution:

  history   SELECT * FROM t WHERE id = :k                       (all versions)
  as-of     SELECT * FROM t WHERE id = :k AND valid_from <= :ts AND valid_to > :ts
  point     SELECT * FROM t WHERE id = :k AND valid_from = '<day 0>'   (the first
            version of the key, present for every key)

Then a temporal join, timed by EXPLAIN ANALYZE (execution time, median of
--reps): a fact table of --facts rows (a random key, a random time) joined
as of its time:

  join      SELECT count(*), sum(d.v) FROM facts f JOIN t d ON d.id = f.cust_id
              AND f.ts >= d.valid_from AND f.ts < d.valid_to

and the same join from a --outer-row outer (the first rows of facts): the
heap's index nested loop against the zipper table's best plan.

Results of the two tables must agree (history counts, join sums) else the
script exits with status 1.  Ratios are heap/zipper: > 1 means zipper_lake is
faster; the issue's target for key access is >= 0.5 (within 2x of the heap).
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

from bench_common import (add_connection_args, add_json_arg, connect, describe_zipper, q, result,
                          write_json, zipper_stats)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--keys', type=int, default=1_000_000, help='keys (default 1,000,000)')
    p.add_argument('--days', type=int, default=30, help='days of history (default 30)')
    p.add_argument('--change-rate', type=float, default=0.03,
                   help='fraction of keys changing per day (default 0.03)')
    p.add_argument('--facts', type=int, default=100_000, help='fact rows of the join (default 100,000)')
    p.add_argument('--outer-rows', type=int, default=1000, help='outer rows of the small join (default 1000)')
    p.add_argument('--seconds', type=int, default=10, help='pgbench seconds per query and table (default 10)')
    p.add_argument('--reps', type=int, default=5, help='EXPLAIN ANALYZE repetitions of the joins (default 5)')
    p.add_argument('--reuse', action='store_true', help='reuse the tables of an earlier run with the same sizes')
    p.add_argument('--smoke', action='store_true', help='tiny sizes, to check that the script runs')
    add_connection_args(p)
    add_json_arg(p)
    a = p.parse_args()
    if a.smoke:
        a.keys, a.days, a.facts, a.outer_rows, a.seconds, a.reps = 2000, 3, 500, 50, 1, 1
    return a


def params_key(a):
    return f"{a.keys}/{a.days}/{a.change_rate}"


def build(conn, a):
    cur = conn.cursor()
    cur.execute("CREATE EXTENSION IF NOT EXISTS zipper_lake")
    cur.execute("CREATE TABLE IF NOT EXISTS bench_keys_params (k text)")
    if a.reuse and q(cur, "SELECT k FROM bench_keys_params") == [(params_key(a),)]:
        print("reusing z_keys, h_keys")
        return
    cur.execute("DROP TABLE IF EXISTS z_keys, h_keys, keys_changes, facts")
    cur.execute("""CREATE TABLE z_keys (id int NOT NULL, name text, v int,
                   valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) USING zipper_lake""")
    cur.execute("SELECT zipper_lake.register('z_keys', key => ARRAY['id'], partition_unit => 'day')")
    cur.execute("""CREATE UNLOGGED TABLE keys_changes (id int, name text, v int,
                   change_time timestamptz, op text)""")
    cur.execute("""INSERT INTO keys_changes SELECT g, 'customer ' || g, 0,
                   '2026-01-01'::timestamptz, 'u' FROM generate_series(1, %s) g""", (a.keys,))
    cur.execute("SELECT * FROM zipper_lake.apply_changes('z_keys', 'keys_changes')")
    for d in range(1, a.days + 1):
        cur.execute("TRUNCATE keys_changes")
        cur.execute("""INSERT INTO keys_changes
                       SELECT id, 'customer ' || id, %s,
                              '2026-01-01'::timestamptz + %s * interval '1 day'
                                + (random() * 86399) * interval '1 second', 'u'
                         FROM (SELECT DISTINCT 1 + (random() * (%s - 1))::int AS id
                                 FROM generate_series(1, %s)) k""",
                    (d, d, a.keys, int(a.keys * a.change_rate)))
        cur.execute("SELECT * FROM zipper_lake.apply_changes('z_keys', 'keys_changes')")
    cur.execute("""CREATE TABLE h_keys AS SELECT * FROM z_keys ORDER BY valid_from""")
    cur.execute("ALTER TABLE h_keys ADD PRIMARY KEY (id, valid_from)")
    cur.execute("CREATE INDEX ON h_keys (valid_to)")
    cur.execute("""CREATE TABLE facts AS
                   SELECT 1 + (random() * (%s - 1))::int AS cust_id,
                          '2026-01-01'::timestamptz + random() * %s * interval '1 day' AS ts
                     FROM generate_series(1, %s)""", (a.keys, a.days + 1, a.facts))
    # both tables vacuumed: heap's removes dead rows, zipper_lake's compacts
    # sub-groups with many masked rows (README "Lifecycle")
    cur.execute("VACUUM ANALYZE h_keys")
    cur.execute("VACUUM ANALYZE z_keys")
    cur.execute("VACUUM ANALYZE facts")
    cur.execute("TRUNCATE bench_keys_params")
    cur.execute("INSERT INTO bench_keys_params VALUES (%s)", (params_key(a),))


def pgbench(a, script, seconds):
    env = dict(os.environ)
    for k, v in (('PGHOST', a.host), ('PGPORT', a.port), ('PGDATABASE', a.dbname)):
        if v:
            env[k] = str(v)
    with tempfile.NamedTemporaryFile('w', suffix='.sql', delete=False) as f:
        f.write(script)
        path = f.name
    try:
        out = subprocess.run(['pgbench', '-n', '-M', 'prepared', '-c', '1', '-T', str(seconds),
                              '-f', path], env=env, capture_output=True, text=True)
    finally:
        os.unlink(path)
    if out.returncode != 0:
        sys.exit(f"pgbench failed: {out.stderr}")
    m = re.search(r'latency average = ([0-9.]+) ms', out.stdout)
    return float(m.group(1))


def key_queries(a):
    last = f"'2026-01-01'::timestamptz + interval '{a.days + 1} days'"
    head = f"\\set k random(1, {a.keys})\n"
    return [
        ('history', head + "SELECT * FROM {t} WHERE id = :k;\n"),
        ('as-of', head + f"\\set s random(0, {(a.days + 1) * 86400})\n"
         f"SELECT * FROM {{t}} WHERE id = :k AND valid_from <= '2026-01-01'::timestamptz + :s * interval '1 second'"
         f" AND valid_to > '2026-01-01'::timestamptz + :s * interval '1 second';\n"),
        ('point', head + "SELECT * FROM {t} WHERE id = :k AND valid_from = '2026-01-01';\n"),
    ]


def explain_ms(cur, sql):
    rows = q(cur, "EXPLAIN (ANALYZE, TIMING OFF) " + sql)
    for (line,) in rows:
        m = re.search(r'Execution Time: ([0-9.]+) ms', line)
        if m:
            return float(m.group(1))
    raise RuntimeError("no execution time")


def check(cur, a):
    for k in (1, a.keys // 2, a.keys):
        z = q(cur, f"SELECT count(*), max(valid_from) FROM z_keys WHERE id = {k}")
        h = q(cur, f"SELECT count(*), max(valid_from) FROM h_keys WHERE id = {k}")
        if z != h:
            sys.exit(f"history of key {k} differs: zipper {z}, heap {h}")


def main():
    a = parse_args()
    conn = connect(a, True)
    cur = conn.cursor()
    build(conn, a)
    check(cur, a)
    versions = q(cur, "SELECT count(*) FROM h_keys")[0][0]
    print(f"{a.keys} keys, {a.days} days at {a.change_rate:.0%} a day: {versions} versions")
    print(f"zipper: {describe_zipper(zipper_stats(conn, 'z_keys'))}")
    print(f"heap:   {q(cur, 'SELECT pg_total_relation_size(%s)', ('h_keys',))[0][0] / 2**20:.1f} MB with indexes")
    print()
    print(f"{'query':<22} {'zipper ms':>10} {'heap ms':>10} {'heap/zipper':>12}")
    failed = False
    found = []
    what = {'history': 'history of one key', 'as-of': 'one key as of a time',
            'point': 'one key and its valid_from'}
    for name, script in key_queries(a):
        for t in ('z_keys', 'h_keys'):
            pgbench(a, script.format(t=t), 1)           # warm-up
        z = pgbench(a, script.format(t='z_keys'), a.seconds)
        h = pgbench(a, script.format(t='h_keys'), a.seconds)
        print(f"{name:<22} {z:>10.3f} {h:>10.3f} {h / z:>11.2f}x", flush=True)
        found.append(result('keys_' + name.replace('-', ''), what[name], z / 1000, h / 1000, 's'))

    join = ("SELECT count(*), sum(d.v) FROM {f} f JOIN {t} d ON d.id = f.cust_id"
            " AND f.ts >= d.valid_from AND f.ts < d.valid_to")
    cur.execute(f"CREATE TEMP TABLE small_facts AS SELECT * FROM facts LIMIT {a.outer_rows}")
    cur.execute("ANALYZE small_facts")
    for key, name, f in (('keys_join', 'join (facts)', 'facts'),
                         ('keys_join_outer', f'join ({a.outer_rows} outer)', 'small_facts')):
        z_sql, h_sql = join.format(f=f, t='z_keys'), join.format(f=f, t='h_keys')
        zr, hr = q(cur, z_sql), q(cur, h_sql)
        if zr != hr:
            print(f"{name}: results differ: zipper {zr}, heap {hr}")
            failed = True
        zt = statistics.median(explain_ms(cur, z_sql) for _ in range(a.reps))
        ht = statistics.median(explain_ms(cur, h_sql) for _ in range(a.reps))
        print(f"{name:<22} {zt:>10.3f} {ht:>10.3f} {ht / zt:>11.2f}x", flush=True)
        found.append(result(key, f'as-of join of {a.facts if f == "facts" else a.outer_rows} facts',
                            zt / 1000, ht / 1000, 's'))
    write_json(a, 'keys', {'keys': a.keys, 'days': a.days, 'change_rate': a.change_rate, 'versions': versions,
                           'facts': a.facts, 'outer_rows': a.outer_rows}, found)
    if failed:
        sys.exit(1)


if __name__ == '__main__':
    main()
