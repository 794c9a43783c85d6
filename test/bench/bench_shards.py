#!/usr/bin/env python3
"""
test/bench/bench_shards.py -- a zipper parent whose leaves are shards
(README "Scaling out"), reached through postgres_fdw, against one zipper
table holding the same versions: reads and applies through the router,
side by side in one run.

  sh_one   one zipper table: create_table('sh_one', 'sh_src')            (a)
  sh_par   a zipper parent PARTITION BY HASH (id) of --leaves shards:
           postgres_fdw foreign tables over zipper tables sh_par_<i> in the
           database <dbname>_shards of the same server (a loopback server
           over its socket: on this one machine the shards share its 2
           cores, so this measures the router's own cost -- routing,
           staging, two-phase commit, postgres_fdw -- not more hardware) (b)

Both are loaded with bench_apply.py's initial image (--keys open versions;
the shards through the router, postgres_fdw batch_size 10000) and VACUUM
ANALYZE'd (each shard on its server).

Apply: --batches batches of --batch changes made as bench_apply.py makes
them; apply_changes() applies each to (a) and to (b), each in a backend of
its own, alternating which goes first; the first batch is a warm-up.

Reads (plain SQL, planner defaults, nothing SET), warm (one connection,
an untimed run, then the median of --reps runs) and in a new connection
(median of --connections): as of a time, 1% of rows; history of a key
(per lookup); the as-of count and sum with PostgreSQL's defaults (the
shards send the rows, the router aggregates), with
enable_partitionwise_aggregate = on (partial aggregates over each shard's
rows: PostgreSQL 15's postgres_fdw pushes down no partial aggregate), and
written as one aggregate per shard (postgres_fdw pushes each down whole;
the baseline runs the plain query).  The loopback server has fetch_size
10000 (postgres_fdw's default, 100, costs a round trip per 100 rows).  Both tables must return the same rows, every
batch the same counts; a disagreement exits with status 1.  --json FILE
writes the results for report.py.
"""
import argparse
import random
import sys
import time

import psycopg2

import bench_apply
import bench_read
from bench_common import add_connection_args, add_json_arg, check_batch_size, connect, KeySpace, median, q, result, \
    write_json
from bench_users import Disagreement, new_connection_runs, settings, warm_runs

PUSHDOWN = 'SET enable_partitionwise_aggregate = on; '


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--keys', type=int, default=1_000_000, help='initial keys (default 1,000,000)')
    p.add_argument('--batch', type=int, default=10_000, help='changes per batch (default 10,000)')
    p.add_argument('--batches', type=int, default=6, help='batches, the first a warm-up (default 6)')
    p.add_argument('--leaves', type=int, default=2, help='shards of the parent (default 2)')
    p.add_argument('--reps', type=int, default=5, help='reads, warm: timed runs (default 5)')
    p.add_argument('--connections', type=int, default=5, help='reads, new connection: runs (default 5)')
    p.add_argument('--lookups', type=int, default=50, help='reads: random keys a run of key history (default 50)')
    p.add_argument('--seed', type=int, default=42)
    p.add_argument('--keep', action='store_true', help='keep the tables and the shard database')
    add_connection_args(p)
    p.add_argument('--smoke', action='store_true', help='CI size: 2,000 keys, 3 batches of 200, one run of every read')
    add_json_arg(p)
    a = p.parse_args()
    if a.smoke:
        a.keys, a.batch, a.batches, a.reps, a.connections, a.lookups = 2000, 200, 3, 1, 1, 5
    if a.batches < 2:
        p.error('--batches must be at least 2 (the first is a warm-up)')
    check_batch_size(p, a)
    a.per_day, a.late = 1, 0.0
    return a


def shard_connect(a, dbname):
    kw = {k: getattr(a, k) for k in ('host', 'port') if getattr(a, k)}
    conn = psycopg2.connect(dbname=dbname, **kw)
    conn.autocommit = True
    return conn


def build(conn, a, say):
    """Create the shard database, its tables, the router's parent over them
    and the one table; load both."""
    cur = conn.cursor()
    db = q(cur, 'SELECT current_database()')[0][0]
    shard_db = f'{db}_shards'
    socket = q(cur, "SELECT split_part(current_setting('unix_socket_directories'), ',', 1)")[0][0].strip()
    port = q(cur, "SELECT current_setting('port')")[0][0]
    cur.execute('CREATE EXTENSION IF NOT EXISTS zipper_lake')
    cur.execute('CREATE EXTENSION IF NOT EXISTS postgres_fdw')
    cur.execute('DROP TABLE IF EXISTS sh_one, sh_par, sh_src')
    cur.execute('DROP SERVER IF EXISTS sh_loop CASCADE')
    cur.execute(f'DROP DATABASE IF EXISTS {shard_db} WITH (FORCE)')
    cur.execute(f'CREATE DATABASE {shard_db}')
    scur = shard_connect(a, shard_db).cursor()
    scur.execute('CREATE EXTENSION zipper_lake')
    cur.execute('CREATE TABLE sh_src (id bigint PRIMARY KEY, name text, balance numeric, branch int)')
    cur.execute("SELECT zipper_lake.create_table('sh_one', 'sh_src')")
    cur.execute('CREATE TABLE sh_par (LIKE sh_one) PARTITION BY HASH (id)')
    cur.execute('CREATE TABLE sh_par_reg (LIKE sh_one) USING zipper_lake')
    cur.execute(f'ALTER TABLE sh_par ATTACH PARTITION sh_par_reg FOR VALUES WITH (MODULUS {a.leaves}, REMAINDER 0)')
    cur.execute("SELECT zipper_lake.register('sh_par', ARRAY['id'])")
    cur.execute('ALTER TABLE sh_par DETACH PARTITION sh_par_reg')
    cur.execute('DROP TABLE sh_par_reg')
    cur.execute(f"CREATE SERVER sh_loop FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '{socket}', port '{port}', "
                f"dbname '{shard_db}', batch_size '10000', fetch_size '10000')")
    cur.execute('CREATE USER MAPPING FOR CURRENT_USER SERVER sh_loop')
    for i in range(a.leaves):
        scur.execute(f'CREATE TABLE sh_par_{i} (id bigint NOT NULL, name text, balance numeric, branch int, '
                     'valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) USING zipper_lake')
        scur.execute(f"SELECT zipper_lake.register('sh_par_{i}', ARRAY['id'])")
        cur.execute(f'CREATE FOREIGN TABLE sh_par_{i} PARTITION OF sh_par '
                    f'FOR VALUES WITH (MODULUS {a.leaves}, REMAINDER {i}) SERVER sh_loop')
    versions = bench_apply.initial_versions(a.keys)
    load = {}
    for t in ('sh_one', 'sh_par'):
        start = time.perf_counter()
        cur.execute(f'INSERT INTO {t} {versions}')
        load[t] = time.perf_counter() - start
    cur.execute('VACUUM ANALYZE sh_one')
    for i in range(a.leaves):
        scur.execute(f'VACUUM ANALYZE sh_par_{i}')
    cur.execute('ANALYZE sh_par')
    scur.connection.close()
    say('loaded (s): ' + ', '.join(f'{t} {s:.2f}' for t, s in load.items()))
    return shard_db


def apply_phase(conn, a, say):
    """Make each batch and apply it to both: table -> [(s, counts)]."""
    rng = random.Random(a.seed)
    ks = KeySpace(range(1, a.keys + 1), a.keys + 1)
    conns = {t: connect(a, autocommit=True) for t in ('sh_one', 'sh_par')}
    times = {t: [] for t in conns}
    for b in range(a.batches):
        bench_apply.make_batch(conn, rng, ks, a, b, changes='sh_batch', open_table='sh_one')
        for t in (('sh_one', 'sh_par') if b % 2 == 0 else ('sh_par', 'sh_one')):
            times[t].append(bench_apply.run_zipper(conns[t], t, 'sh_batch'))
        say(f'{b + 1:>5} {times["sh_one"][-1][0]:>9.3f} {times["sh_par"][-1][0]:>9.3f}', flush=True)
    for c in conns.values():
        c.close()
    return times, ks


class PerTable(str):
    """A query template whose text differs by table: format(t=...) gives
    the table's own (warm_runs and new_connection_runs format templates)."""
    def __new__(cls, texts):
        obj = str.__new__(cls, texts['sh_par'])
        obj.texts = texts
        return obj

    def format(self, t):
        return self.texts[t]


def read_queries(a, rng, ks):
    # a constant: postgres_fdw ships no stable expression (timestamptz +
    # interval) to a shard, which would then send every row
    conn = connect(a, autocommit=True)
    x = f"timestamptz '{q(conn.cursor(), f'SELECT {bench_read.day(a.batches // 2, 12)}')[0][0]}'"
    conn.close()
    asof = f'valid_from <= {x} AND valid_to > {x}'
    agg = f'SELECT count(*), sum(balance) FROM {{t}} WHERE {asof}'
    # the aggregate of each shard on its server: a query per leaf, which
    # postgres_fdw pushes down whole (PostgreSQL 15 pushes no partial one)
    per_leaf = ' UNION ALL '.join(agg.format(t=f'sh_par_{i}') for i in range(a.leaves))
    pushed = PerTable({'sh_one': agg.format(t='sh_one'),
                       'sh_par': f'SELECT sum(count)::bigint, sum(sum) FROM ({per_leaf}) leaves'})
    return {
        'asof_rows': ('as of a time, 1% of rows', [f'SELECT * FROM {{t}} WHERE {asof} AND branch = 7 ORDER BY id']),
        'asof_agg': ('as-of count and sum, defaults', [agg]),
        'asof_agg_push': ('as-of count and sum, partitionwise aggregate on', [PUSHDOWN + agg]),
        'asof_agg_leaves': ('as-of count and sum, a query per shard (pushed down)', [pushed]),
        'history': ('history of a key (per lookup)',
                    [f'SELECT * FROM {{t}} WHERE id = {rng.choice(ks.ever)} ORDER BY valid_from'
                     for _ in range(a.lookups)]),
    }


def reads(a, rng, ks):
    tables = ['sh_one', 'sh_par']
    out = {}
    for name, (label, queries) in read_queries(a, rng, ks).items():
        conn = connect(a, autocommit=True)
        warm = warm_runs(conn.cursor(), f'warm: {label}', [queries] * (a.reps + 1), tables)
        conn.close()
        new = new_connection_runs(a, 'defaults', f'new connection: {label}',
                                  [queries[i % len(queries)] for i in range(a.connections)], tables)
        out[name] = (label, warm, new)
    return out


def main():
    a = parse_args()
    rng = random.Random(a.seed + 1)
    conn = connect(a, autocommit=True)
    cur = conn.cursor()
    st = settings(cur)
    print(f'bench_shards: keys={a.keys} batch={a.batch} batches={a.batches} leaves={a.leaves} (shards: another '
          'database of this server)')
    print('server ' + ', '.join(f'{k}={v}' for k, v in st.items() if k != 'planner_not_default'), flush=True)
    if int(q(cur, "SELECT current_setting('max_prepared_transactions')")[0][0]) < a.leaves:
        print(f'skipped: max_prepared_transactions < {a.leaves} (each shard prepares a transaction)')
        return 0
    shard_db = build(conn, a, print)
    print('batch   (a) one s  (b) router s')
    times, ks = apply_phase(conn, a, print)
    problems = [f'batch {b + 1}: counts {times["sh_one"][b][1]} (one) vs {times["sh_par"][b][1]} (router)'
                for b in range(a.batches) if times['sh_one'][b][1] != times['sh_par'][b][1]]
    one = [t for t, _ in times['sh_one'][1:]]
    par = [t for t, _ in times['sh_par'][1:]]
    ratio = median([x / y for x, y in zip(one, par)])
    results = [result('shards_apply', f'apply a batch through a router to {a.leaves} shards (baseline: one table)',
                      median(par), median(one), 's', ratio, leaves=a.leaves)]
    print(f'apply: one table {median(one):.3f} s, router {median(par):.3f} s: one / router {ratio:.2f}')
    try:
        got = reads(a, rng, ks)
    except Disagreement as e:
        problems.append(str(e))
        got = {}
    print('| read | one table ms | router ms | one / router | new connection: one ms | router ms | one / router |')
    print('|---|--:|--:|--:|--:|--:|--:|')
    for name, (label, warm, new) in got.items():
        print(f'| {label} | {warm["sh_one"] * 1000:.2f} | {warm["sh_par"] * 1000:.2f} | '
              f'{warm["sh_one"] / warm["sh_par"]:.2f} | {new["sh_one"] * 1000:.2f} | {new["sh_par"] * 1000:.2f} | '
              f'{new["sh_one"] / new["sh_par"]:.2f} |')
        results.append(result(f'shards_{name}', f'{label}, through a router (baseline: one table)',
                              warm['sh_par'], warm['sh_one'], 's', leaves=a.leaves))
        results.append(result(f'shards_{name}_new', f'{label}, through a router, new connection (baseline: one table)',
                              new['sh_par'], new['sh_one'], 's', leaves=a.leaves))
    if not a.keep:
        cur.execute('DROP TABLE IF EXISTS sh_one, sh_par, sh_src, sh_batch')
        cur.execute('DROP SERVER IF EXISTS sh_loop CASCADE')
        cur.execute(f'DROP DATABASE IF EXISTS {shard_db} WITH (FORCE)')
    write_json(a, 'shards', {'keys': a.keys, 'batch': a.batch, 'batches': a.batches, 'leaves': a.leaves}, results,
               settings=st)
    for p in problems:
        print('PROBLEM: ' + p)
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
