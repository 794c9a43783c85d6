#!/usr/bin/env python3
"""
test/bench/bench_indexes.py -- secondary indexes on a zipper table against a
heap SCD2 table with the same indexes, side by side in one run (issue 35,
README "Indexes").

Four tables, two of each kind, with the same versions by kind:

  z_small, z_big  USING zipper_lake, key id, and two secondary indexes:
                  btree (iban), btree (branch)
  h_small, h_big  heap, the indexes of bench_apply.py's h_acct (UNIQUE (id)
                  WHERE valid_to = 'infinity', PRIMARY KEY (id, valid_from))
                  and the same two secondary indexes

The big tables hold --scale (4) times the versions of the small ones.  With
--grow history (the default) both hold the same --keys (1,000,000) keys and
the same open versions, and the big ones --scale times the versions per key
(an older table: its keys changed every 30 days before); with --grow keys
the small tables hold every --scale-th key of the big ones, both --depth
closed versions a key (a larger customer base).  Each key's open version
begins within the 30 days before the first batch (bench_apply.py's initial
load), its closed versions 30, 60, ... days earlier; the iban is the key's
(md5 of the key), constant over its history; the heap tables are loaded in
valid_from order (as a daily job appends versions).  Load first, index
after: INSERT of the versions, VACUUM (the zipper side writes its open
versions column by column, and a second VACUUM moves them down into the
blocks the rows left), CREATE INDEX, VACUUM ANALYZE.

Then --batches (10) batches of --batch (10,000) changes, made like
bench_apply.py's (80% updates, one in ten a no-op, 5% of the others a new
iban; 10% new keys; 10% deletes; times within one day, a day later per
batch; keys of the small tables, so the same batch fits all four), each
applied to every table: apply_changes() on the zipper tables, bench_apply.py's
UPDATE + INSERT job on the heap tables (in a backend of its own), each in its
own transaction, client wall time including COMMIT, the order of the four
rotated from batch to batch.  Then --new-batches (3) more, each applied to
each table in a new connection, as a nightly job runs (connecting is not
timed; the backend's caches, zipper_lake's key directories among them,
start empty): their median per-batch ratio is reported, with no target.

Then lookups by the iban (plain SQL, planner defaults, nothing SET):

  SELECT * FROM t WHERE iban = '...' ORDER BY valid_from, id

every version that held the iban of a random key (deleted and new ones
among them; all versions of the key under --grow history), --lookups (100)
ibans a run.  Warm: one connection, an untimed run, then the median over
--reps (5) runs of the time per lookup, tables in rotated order.  New
connection: connect, time one lookup alone (the backend's caches, zipper_lake's
metadata among them, start empty); median of --connections (5).  The plan
the planner chose for each table is printed (--explain: EXPLAIN (ANALYZE,
BUFFERS) of one lookup per table).

Targets (issue 35), printed with "met?":
  lookup:  heap time / zipper time >= 0.5 (warm, both sizes)
  apply:   heap job / apply_changes >= 3 (median per-batch ratio, both sizes)
  growth:  zipper median batch time big / small < 1.3

The tables of each size must end equal (EXCEPT ALL both ways), the counts
of apply_changes must equal the heap job's row counts, every lookup must
return the same rows from both tables of its size, and
zipper_lake.verify() must report nothing (--no-verify skips it: at 1M keys
it takes long); otherwise the script exits with status 1.  Missed targets
are reported, not failed.  --json FILE writes the results for report.py.
"""
import argparse
import hashlib
import os
import random
import sys
import time

import psycopg2

from bench_common import (add_connection_args, add_json_arg, check_batch_size, connect, describe_zipper, KeySpace,
                          median, q, result, rows_differ, stage_changes, write_json, zipper_stats)

T0 = '2024-01-01 00:00:00+00'      # first batch day; the loaded versions lie before it
PERIOD_DAYS = 30                   # a loaded key changed every 30 days; its open version began in the last 30
SIZES = ('small', 'big')
TABLES = ('z_small', 'h_small', 'z_big', 'h_big')
LOOKUP_TARGET = 0.5                # heap time / zipper time, at least
APPLY_TARGET = 3.0                 # heap job / apply_changes, at least
GROWTH_TARGET = 1.3                # zipper batch time big / small, below


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--keys', type=int, default=1_000_000,
                   help='keys of the small tables (default 1,000,000)')
    p.add_argument('--depth', type=int, default=0,
                   help='closed versions per key in the small tables (default 0: open versions only)')
    p.add_argument('--scale', type=int, default=4, help='versions of the big tables / small (default 4)')
    p.add_argument('--grow', choices=('history', 'keys'), default='history',
                   help='the big tables hold more versions per key (history, default) or more keys')
    p.add_argument('--batch', type=int, default=10_000, help='changes per batch (default 10,000)')
    p.add_argument('--batches', type=int, default=10, help='batches (default 10)')
    p.add_argument('--new-batches', type=int, default=3,
                   help='batches after those, each table in a new connection (default 3)')
    p.add_argument('--lookups', type=int, default=100, help='ibans looked up a warm run (default 100)')
    p.add_argument('--reps', type=int, default=5, help='warm: timed runs of the lookups (default 5)')
    p.add_argument('--connections', type=int, default=5,
                   help='new connection: connections per table, one lookup each (default 5)')
    p.add_argument('--seed', type=int, default=42)
    p.add_argument('--explain', action='store_true',
                   help='print EXPLAIN (ANALYZE, BUFFERS) of one lookup per table')
    p.add_argument('--no-verify', action='store_true',
                   help='skip zipper_lake.verify() at the end (the tables are still compared)')
    p.add_argument('--keep', action='store_true', help='keep the tables (and remember the size options)')
    p.add_argument('--reuse', action='store_true',
                   help='lookups only, on the tables a --keep run with the same size options left '
                        '(built, with the batches, if there are none)')
    p.add_argument('--quiet', action='store_true', help='no per-batch lines')
    add_connection_args(p)
    p.add_argument('--smoke', action='store_true',
                   help='CI size: 2,000 keys, 3 batches of 200, 10 lookups, one run of everything')
    add_json_arg(p)
    a = p.parse_args()
    if a.smoke:
        a.keys, a.batch, a.batches, a.lookups, a.reps, a.connections = 2000, 200, 3, 10, 1, 1
        a.new_batches = 1
    if a.scale < 2:
        p.error('--scale must be at least 2')
    if a.depth < 0:
        p.error('--depth must not be negative')
    check_batch_size(p, a)
    return a


# ---------------------------------------------------------------------------
# the tables
# ---------------------------------------------------------------------------

def shape(a, size):
    """(first key, last key, step, closed versions a key) of a table."""
    if a.grow == 'history':
        closed = a.depth if size == 'small' else (a.depth + 1) * a.scale - 1
        return 1, a.keys, 1, closed
    if size == 'small':
        return a.scale, a.keys * a.scale, a.scale, a.depth
    return 1, a.keys * a.scale, 1, a.depth


def small_keys(a):
    first, last, step, _ = shape(a, 'small')
    return list(range(first, last + 1, step))


def versions_select(a, size):
    """The versions of a table, in valid_from order.  A key's open version
    has the same values in every table (the batches read them from
    h_small); version j of c closed ones is (c - j) * 100,000 richer, so
    neighbours differ."""
    first, last, step, c = shape(a, size)
    return f"""
        SELECT k, 'name_' || k, round((abs(hashint8(k)) % 10000000) / 100.0, 2) + (c - j) * 100000,
               (abs(hashint8(k + 7)) % 100)::int, 'DE' || substr(md5(k::text), 1, 20),
               o - (c - j) * interval '{PERIOD_DAYS} days',
               CASE WHEN j = c THEN timestamptz 'infinity' ELSE o - (c - j - 1) * interval '{PERIOD_DAYS} days' END
          FROM (SELECT k::bigint AS k, {c} AS c,
                       timestamptz '{T0}' - (1 + abs(hashint8(k + 13)) % ({PERIOD_DAYS} * 86400 - 1))
                                            * interval '1 second' AS o
                  FROM generate_series({first}, {last}, {step}) k) x,
               generate_series(0, {c}) j
         ORDER BY 6"""


def secondary_indexes(t):
    return [f'CREATE INDEX {t}_iban ON {t} (iban)', f'CREATE INDEX {t}_branch ON {t} (branch)']


def build(conn, a):
    """Create and load the four tables; (table -> load seconds, indexes included)."""
    conn.autocommit = True
    cur = conn.cursor()
    cur.execute('CREATE EXTENSION IF NOT EXISTS zipper_lake')
    cur.execute('DROP TABLE IF EXISTS ' + ', '.join(TABLES) + ', idx_changes, idx_stage, idx_params')
    load = {}
    for size in SIZES:
        z, h = f'z_{size}', f'h_{size}'
        cur.execute(f"""CREATE TABLE {h} (id bigint NOT NULL, name text, balance numeric, branch int, iban text,
                                          valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)""")
        cur.execute(f"""CREATE TABLE {z} (id bigint, name text, balance numeric, branch int, iban text,
                                          valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
                        USING zipper_lake""")
        cur.execute(f"SELECT zipper_lake.register('{z}', key => ARRAY['id'])")
        sel = versions_select(a, size)
        t = time.perf_counter()
        cur.execute(f'INSERT INTO {h} {sel}')
        cur.execute(f"CREATE UNIQUE INDEX {h}_open_uq ON {h} (id) WHERE valid_to = 'infinity'")
        cur.execute(f'ALTER TABLE {h} ADD CONSTRAINT {h}_pk PRIMARY KEY (id, valid_from)')
        for ddl in secondary_indexes(h):
            cur.execute(ddl)
        load[h] = time.perf_counter() - t
        t = time.perf_counter()
        cur.execute(f'INSERT INTO {z} {sel}')
        # VACUUM writes the open versions column by column, as autovacuum
        # would after a load (README "Storage formats"), and the next one
        # moves them down into the blocks the rows left (README
        # "Lifecycle"): settled, then the indexes -- else that move, a
        # VACUUM later, enters every row again under a new TID
        cur.execute(f'VACUUM {z}')
        cur.execute(f'VACUUM {z}')
        # zipper_lake builds indexes serially; builds before the planner
        # said so to CREATE INDEX refused the parallel build it planned
        cur.execute('SET max_parallel_maintenance_workers = 0')
        for ddl in secondary_indexes(z):
            cur.execute(ddl)
        cur.execute('RESET max_parallel_maintenance_workers')
        load[z] = time.perf_counter() - t
        cur.execute(f'VACUUM ANALYZE {h}')
        cur.execute(f'ANALYZE {z}')
    try:
        cur.execute('CHECKPOINT')       # start the timed part with clean buffers; needs pg_checkpoint
    except psycopg2.Error:
        pass
    conn.autocommit = False
    return load


# ---------------------------------------------------------------------------
# change batches
# ---------------------------------------------------------------------------

def iban(k, salt=None):
    return 'DE' + hashlib.md5((str(k) if salt is None else f'{k}/{salt}').encode()).hexdigest()[:20]


def make_batch(conn, rng, ks, a, day):
    """The table idx_changes of one batch (bench_apply.py's mix, and new
    ibans for 5% of the changed keys); its row count."""
    upd, dele, new = ks.pick_batch(rng, a.batch)
    rows = []

    def when():
        return rng.randrange(1, 86400 * 1000) / 1000.0

    for k in upd:
        kind = 'noop' if rng.random() < 0.10 else 'chg'
        chg = kind == 'chg'
        name = f'name_{k}_{day}' if chg and rng.random() < 0.3 else None
        branch = rng.randrange(100) if chg and rng.random() < 0.2 else None
        ib = iban(k, day) if chg and rng.random() < 0.05 else None
        rows.append((k, kind, 'U', when(), f'{rng.randrange(10_000_000) / 100:.2f}', name, branch, ib))
    for k in new:
        rows.append((k, 'new', 'I', when(), f'{rng.randrange(10_000_000) / 100:.2f}', f'name_{k}',
                     rng.randrange(100), iban(k)))
    for k in dele:
        rows.append((k, 'del', 'D', when(), None, None, None, None))
    rng.shuffle(rows)
    cur = conn.cursor()
    stage_changes(cur, rows, (('balance', 'numeric', False), ('name', 'text', True), ('branch', 'int', True),
                              ('iban', 'text', True)),
                  'idx_stage', 'idx_changes', 'h_small', T0, day)
    cur.execute('ANALYZE idx_changes')
    conn.commit()
    return len(rows)


# ---------------------------------------------------------------------------
# the apply jobs
# ---------------------------------------------------------------------------

# bench_apply.py's heap job, with the iban
HEAP_CLOSE = """
    UPDATE {h} h SET valid_to = c.change_time
      FROM idx_changes c
     WHERE h.id = c.id AND h.valid_to = 'infinity'
       AND (upper(c.op) = 'D'
            OR (h.name, h.balance, h.branch, h.iban) IS DISTINCT FROM (c.name, c.balance, c.branch, c.iban))"""

HEAP_OPEN = """
    INSERT INTO {h} (id, name, balance, branch, iban, valid_from, valid_to)
    SELECT c.id, c.name, c.balance, c.branch, c.iban, c.change_time, 'infinity'
      FROM idx_changes c
     WHERE upper(c.op) <> 'D'
       AND NOT EXISTS (SELECT 1 FROM {h} h WHERE h.id = c.id AND h.valid_to = 'infinity')"""


def run_heap(conn, h):
    cur = conn.cursor()
    t = time.perf_counter()
    cur.execute(HEAP_CLOSE.format(h=h))
    closed = cur.rowcount
    cur.execute(HEAP_OPEN.format(h=h))
    inserted = cur.rowcount
    conn.commit()
    return time.perf_counter() - t, {'closed': closed, 'inserted': inserted}


def run_zipper(conn, z):
    cur = conn.cursor()
    t = time.perf_counter()
    cur.execute(f"SELECT * FROM zipper_lake.apply_changes('{z}', 'idx_changes')")
    row = cur.fetchone()
    conn.commit()
    return time.perf_counter() - t, dict(zip([d[0] for d in cur.description], row))


def heap_job_plan(conn):
    """The plan of the heap job's UPDATE on h_big (planner defaults), in a few words."""
    cur = conn.cursor()
    plan = [r[0] for r in q(cur, 'EXPLAIN ' + HEAP_CLOSE.format(h='h_big'))]
    conn.rollback()
    return plan


def apply_batches(zconn, hconn, a, say):
    """Apply every batch to the four tables, the last --new-batches each in
    a connection of its own: table -> seconds per batch (in the first
    connections, in new ones); the failures of the count checks."""
    rng = random.Random(a.seed)
    ks = KeySpace(small_keys(a), shape(a, 'big')[1] + 1)
    times = {t: [] for t in TABLES}
    times_new = {t: [] for t in TABLES}
    failures = []
    for b in range(a.batches + a.new_batches):
        n = make_batch(zconn, rng, ks, a, b)
        new = b >= a.batches
        if b == 0:
            say('plan of the heap job\'s UPDATE on h_big (planner defaults):\n  '
                + '\n  '.join(heap_job_plan(hconn)))
            if not a.quiet:
                say(f'{"batch":>5} {"changes":>8} ' + ' '.join(f'{t + " s":>10}' for t in TABLES)
                    + '  small h/z  big h/z  first', flush=True)
        order = TABLES[b % 4:] + TABLES[:b % 4]
        counts = {}
        for t in order:
            conn = connect(a, autocommit=False) if new else zconn if t[0] == 'z' else hconn
            s, counts[t] = run_zipper(conn, t) if t[0] == 'z' else run_heap(conn, t)
            if new:
                conn.close()
            (times_new if new else times)[t].append(s)
        for size in SIZES:
            cz, ch = counts[f'z_{size}'], counts[f'h_{size}']
            if cz['inserted'] != ch['inserted'] or cz['closed'] != ch['closed']:
                failures.append(f'batch {b + 1}, {size}: zipper counts {cz} vs heap {ch}')
        if not a.quiet:
            tb = times_new if new else times
            say(f'{b + 1:>5} {n:>8} ' + ' '.join(f'{tb[t][-1]:>10.3f}' for t in TABLES)
                + f'  {tb["h_small"][-1] / tb["z_small"][-1]:>9.2f} '
                  f'{tb["h_big"][-1] / tb["z_big"][-1]:>8.2f}  {order[0]}{"  new connections" if new else ""}',
                flush=True)
    return times, times_new, ks, failures


# ---------------------------------------------------------------------------
# lookups
# ---------------------------------------------------------------------------

LOOKUP = "SELECT * FROM {t} WHERE iban = %s ORDER BY valid_from, id"


class Disagreement(Exception):
    pass


def lookup_ibans(conn, rng, ks, n):
    """n ibans: the newest of a random key that ever was (deleted and new
    keys among them)."""
    keys = [rng.choice(ks.ever) for _ in range(n)]
    cur = conn.cursor()
    got = dict(q(cur, """SELECT DISTINCT ON (id) id, iban FROM h_small WHERE id = ANY(%s)
                          ORDER BY id, valid_from DESC""", (keys,)))
    conn.rollback()
    return [got[k] for k in keys]


def rotated(tables, i):
    return tables[i % len(tables):] + tables[:i % len(tables)]


def agree(answers, what):
    """answers: table -> rows; the two tables of each size must agree."""
    for size in SIZES:
        z, h = answers.get(f'z_{size}'), answers.get(f'h_{size}')
        if z is not None and h is not None and z != h:
            raise Disagreement(f'{what}, {size}: zipper {repr(z)[:200]} vs heap {repr(h)[:200]}')


def timed(cur, t, value):
    s = time.perf_counter()
    cur.execute(LOOKUP.format(t=t), (value,))
    rows = cur.fetchall()
    return time.perf_counter() - s, rows


def warm_lookups(a, runs):
    """runs: the ibans of each run, run 0 untimed.  Table -> median over the
    timed runs of the seconds a lookup took (its run's average); rows a
    lookup returned (average)."""
    conn = connect(a, autocommit=True)
    cur = conn.cursor()
    per = {t: [] for t in TABLES}
    nrows = {t: 0 for t in TABLES}
    for rep, ibans in enumerate(runs):
        ans = {}
        for t in rotated(TABLES, rep):
            total, ans[t] = 0.0, []
            for v in ibans:
                s, rows = timed(cur, t, v)
                total += s
                ans[t].append(rows)
                nrows[t] += len(rows)
            if rep:
                per[t].append(total / len(ibans))
        agree(ans, 'warm lookups')
    conn.close()
    looked = sum(len(r) for r in runs)
    return {t: median(per[t]) for t in TABLES}, {t: nrows[t] / looked for t in TABLES}


def new_connection_lookups(a, ibans):
    """One lookup in a new connection per iban and table: table -> median seconds."""
    per = {t: [] for t in TABLES}
    for i, v in enumerate(ibans):
        ans = {}
        for t in rotated(TABLES, i):
            conn = connect(a, autocommit=True)
            s, ans[t] = timed(conn.cursor(), t, v)
            conn.close()
            per[t].append(s)
        agree(ans, 'new-connection lookups')
    return {t: median(per[t]) for t in TABLES}


def plans(a, value):
    """table -> EXPLAIN of a lookup (planner defaults); printed with
    ANALYZE, BUFFERS under --explain."""
    conn = connect(a, autocommit=True)
    cur = conn.cursor()
    out = {}
    for t in TABLES:
        opts = '(ANALYZE, BUFFERS) ' if a.explain else ''
        out[t] = [r[0] for r in q(cur, f'EXPLAIN {opts}' + LOOKUP.format(t=t), (value,))]
    conn.close()
    return out


def plan_kind(lines):
    """The scan node of a lookup's plan: 'Index Scan', 'Bitmap Heap Scan',
    'Parallel Custom Scan (ZipperScan)', ..."""
    for line in lines:
        node = line.strip().lstrip('->').strip()
        if 'Scan' in node and not node.startswith(('Bitmap Index Scan', 'Sort', 'Gather')):
            return node.split(' on ')[0].split(' using ')[0].split('  (')[0]
    return lines[0].strip() if lines else '?'


# ---------------------------------------------------------------------------
# checks and sizes
# ---------------------------------------------------------------------------

def check_tables(conn, a):
    cur = conn.cursor()
    problems = []
    for size in SIZES:
        diff = rows_differ(cur, f'z_{size}', f'h_{size}')      # the same columns in the same order
        if diff:
            problems.append(f'z_{size} and h_{size} differ in {diff} rows')
        if not a.no_verify:
            problems += [f'verify z_{size}: {r[0]}: {r[1]}'
                         for r in q(cur, f"SELECT check_name, detail FROM zipper_lake.verify('z_{size}') LIMIT 5")]
    conn.commit()
    return problems


def sizes(conn):
    cur = conn.cursor()
    out = {}
    for t in TABLES:
        out[t] = dict(zip(('rows', 'open', 'total', 'table'), q(cur, f"""
            SELECT (SELECT count(*) FROM {t}), (SELECT count(*) FROM {t} WHERE valid_to = 'infinity'),
                   pg_total_relation_size('{t}'), pg_table_size('{t}')""")[0]))
        out[t]['indexes'] = q(cur, f"""SELECT indexrelid::regclass::text, pg_relation_size(indexrelid)
                                         FROM pg_index WHERE indrelid = '{t}'::regclass ORDER BY 1""")
    conn.commit()
    for size in SIZES:
        out[f'z_{size}']['zip'] = zipper_stats(conn, f'z_{size}')
    return out


def mb(b):
    return f'{b / 2**20:.1f} MB'


def fmt_ms(s):
    return f'{s * 1000:.3f}' if s < 0.01 else f'{s * 1000:.1f}'


def met(ok):
    return 'yes' if ok else 'NO'


# ---------------------------------------------------------------------------
# main
# ---------------------------------------------------------------------------

def params_key(a):
    return f'{a.keys}/{a.depth}/{a.scale}/{a.grow}/{a.batch}/{a.batches}/{a.seed}'


def reusable(conn, a):
    """Are the tables those a --keep run of the same size options left?"""
    cur = conn.cursor()
    ok = q(cur, "SELECT to_regclass('idx_params') IS NOT NULL")[0][0] and \
        q(cur, 'SELECT k FROM idx_params') == [(params_key(a),)] and \
        all(q(cur, f"SELECT to_regclass('{t}') IS NOT NULL")[0][0] for t in TABLES)
    conn.commit()
    return ok


def remember(conn, a):
    cur = conn.cursor()
    cur.execute('DROP TABLE IF EXISTS idx_params')
    cur.execute('CREATE TABLE idx_params (k text)')
    cur.execute('INSERT INTO idx_params VALUES (%s)', (params_key(a),))
    conn.commit()


class KeptKeys:
    """--reuse: every key the kept tables hold."""

    def __init__(self, conn):
        cur = conn.cursor()
        self.ever = [r[0] for r in q(cur, 'SELECT DISTINCT id FROM h_small ORDER BY 1')]
        conn.commit()


def apply_rows(a, times, times_new):
    """Table lines and results of the apply measures."""
    lines, results = [], []
    med = {t: median(times[t]) for t in TABLES}
    ratio = {s: [h / z for h, z in zip(times[f'h_{s}'], times[f'z_{s}'])] for s in SIZES}
    growth = {k: med[f'{k}_big'] / med[f'{k}_small'] for k in 'zh'}
    growth_q = median([b / s for b, s in zip(times['z_big'], times['z_small'])])
    for s in SIZES:
        z, h = f'z_{s}', f'h_{s}'
        r = median(ratio[s])
        lines.append(f'| apply a batch, two secondary indexes, {s} table (median per-batch ratio; '
                     f'min {min(ratio[s]):.2f}, max {max(ratio[s]):.2f}) | {fmt_ms(med[h])} | {fmt_ms(med[z])} '
                     f'| {r:.2f} | ≥ {APPLY_TARGET:g}x | {met(r >= APPLY_TARGET)} |')
        # the growth (zipper_growth, heap_growth: report.py notes them under its table)
        extra = {'zipper_growth': growth['z'], 'heap_growth': growth['h'], 'zipper_growth_per_batch': growth_q,
                 'growth_target': GROWTH_TARGET, 'growth_met': growth['z'] < GROWTH_TARGET} if s == 'big' else {}
        results.append(result('indexes_apply' + ('_big' if s == 'big' else ''),
                              'apply a batch with two secondary indexes, the small table' if s == 'small' else
                              f'apply a batch with two secondary indexes, {a.scale}x the versions',
                              med[z], med[h], 's', r, target=APPLY_TARGET, met=r >= APPLY_TARGET,
                              batch_ratio_min=min(ratio[s]), batch_ratio_max=max(ratio[s]), **extra))
    lines.append(f'| apply: batch time big / small ({a.scale}x the versions) | {growth["h"]:.2f}x '
                 f'| {growth["z"]:.2f}x (per batch {growth_q:.2f}x) | – | zipper < {GROWTH_TARGET:g}x '
                 f'| {met(growth["z"] < GROWTH_TARGET)} |')
    # a nightly job's batch: the backend's caches start empty (informational)
    for s in SIZES if a.new_batches > 0 else ():
        z, h = f'z_{s}', f'h_{s}'
        ratio = [hb / zb for hb, zb in zip(times_new[h], times_new[z])]
        mz, mh = median(times_new[z]), median(times_new[h])
        lines.append(f'| apply a batch, {s} table, new connection (median of {len(ratio)} per-batch ratios) '
                     f'| {fmt_ms(mh)} | {fmt_ms(mz)} | {median(ratio):.2f} | – | – |')
        results.append(result('indexes_apply' + ('_big' if s == 'big' else '') + '_new',
                              f'apply a batch with two secondary indexes, {s} table, new connection',
                              mz, mh, 's', median(ratio)))
    return lines, results, med


def lookup_rows(sz, pl, warm, new, per_lookup_rows):
    """Table lines and results of the lookups."""
    lines, results = [], []
    for s in SIZES:
        z, h = f'z_{s}', f'h_{s}'
        ok = warm[h] / warm[z] >= LOOKUP_TARGET
        lines.append(f'| lookup by iban, {s} table ({sz[h]["rows"]:,} versions; {per_lookup_rows[z]:.1f} rows a '
                     f'lookup), warm | {fmt_ms(warm[h])} | {fmt_ms(warm[z])} | {warm[h] / warm[z]:.2f} '
                     f'| ≥ {LOOKUP_TARGET:g}x | {met(ok)} |')
        lines.append(f'| lookup by iban, {s} table, new connection | {fmt_ms(new[h])} | {fmt_ms(new[z])} '
                     f'| {new[h] / new[z]:.2f} | – | – |')
        results.append(result(f'indexes_lookup_{s}', f'lookup by iban (btree), {s} table, warm', warm[z], warm[h],
                              's', target=LOOKUP_TARGET, met=bool(ok), plan_zipper=plan_kind(pl[z]),
                              plan_heap=plan_kind(pl[h]), rows_per_lookup=per_lookup_rows[z],
                              versions=sz[h]['rows']))
        results.append(result(f'indexes_lookup_{s}_new', f'lookup by iban (btree), {s} table, new connection',
                              new[z], new[h], 's', versions=sz[h]['rows']))
    return lines, results


def main():
    a = parse_args()
    say = print
    zconn = connect(a, autocommit=False)
    # the heap job in a backend of its own, as in bench_apply.py
    hconn = connect(a, autocommit=False)
    cur = zconn.cursor()
    names = ('server_version', 'shared_buffers', 'work_mem', 'random_page_cost', 'effective_cache_size', 'jit',
             'max_parallel_workers_per_gather', 'synchronous_commit', 'shared_preload_libraries')
    st = dict(zip(names, q(cur, 'SELECT ' + ', '.join(f"current_setting('{n}')" for n in names))[0]))
    zconn.commit()
    load_avg = [os.getloadavg()]
    say(f'bench_indexes: keys={a.keys} depth={a.depth} scale={a.scale} grow={a.grow} batch={a.batch} '
        f'batches={a.batches} lookups={a.lookups} reps={a.reps} connections={a.connections} seed={a.seed}')
    say('server ' + ', '.join(f'{k}={v}' for k, v in st.items()))
    say(f'load average {load_avg[0][0]:.2f} {load_avg[0][1]:.2f} {load_avg[0][2]:.2f}')
    for s in SIZES:
        first, last, step, c = shape(a, s)
        say(f'{s}: keys {first}..{last} step {step}, {c} closed versions a key')
    sys.stdout.flush()

    failures, times = [], None
    if a.reuse and reusable(zconn, a):
        say('reusing the tables of an earlier --keep run: lookups only')
        ks = KeptKeys(zconn)
    else:
        if a.reuse:
            say('no tables of an earlier --keep run with these options: building them')
        t = time.perf_counter()
        load = build(zconn, a)
        say(f'built in {time.perf_counter() - t:.0f}s; load (versions + indexes): '
            + ', '.join(f'{tb} {load[tb]:.2f}s' for tb in TABLES), flush=True)
        times, times_new, ks, failures = apply_batches(zconn, hconn, a, say)
        t = time.perf_counter()
        failures += check_tables(zconn, a)
        say(f'checks in {time.perf_counter() - t:.0f}s: ' + ('; '.join(failures) if failures else
            'the tables of each size agree' + ('' if a.no_verify else ', verify clean')), flush=True)
        if a.keep:
            remember(zconn, a)

    rng = random.Random(a.seed + 1)
    pl = plans(a, lookup_ibans(zconn, rng, ks, 1)[0])
    try:
        warm, per_lookup_rows = warm_lookups(a, [lookup_ibans(zconn, rng, ks, a.lookups)
                                                 for _ in range(a.reps + 1)])
        new = new_connection_lookups(a, lookup_ibans(zconn, rng, ks, a.connections))
    except Disagreement as e:
        failures.append(f'lookups differ: {e}')
        warm = None
    load_avg.append(os.getloadavg())
    sz = sizes(zconn)

    say(f'\n## Secondary indexes: {a.keys:,} keys{" x " + str(a.scale) if a.grow == "keys" else ""}, '
        f'batches of {a.batch:,}, big = {a.scale}x the versions by {a.grow} '
        f'(small {sz["h_small"]["rows"]:,} versions, big {sz["h_big"]["rows"]:,} at the end)\n')
    say(f'Load average {load_avg[0][0]:.2f} at the start, {load_avg[1][0]:.2f} at the end. '
        'heap/zipper > 1: zipper_lake faster.\n')
    for t in TABLES:
        say(f'plan of a lookup on {t}:\n  ' + '\n  '.join(pl[t]))
    say('')
    lines = ['| measure | heap ms | zipper ms | heap/zipper | target | met? |', '|---|--:|--:|--:|---|---|']
    results = []
    if warm is not None:
        ln, res = lookup_rows(sz, pl, warm, new, per_lookup_rows)
        lines += ln
        results += res
    if times is not None:
        ln, res, med = apply_rows(a, times, times_new)
        lines += ln
        results += res
    say('\n'.join(lines))
    if times is not None:
        say('\nper batch (s): ' + '; '.join(f'{t} ' + ' '.join(f'{x:.3f}' for x in times[t]) for t in TABLES))
        say('medians (s): ' + ', '.join(f'{t} {med[t]:.3f}' for t in TABLES))
    for t in TABLES:
        s = sz[t]
        say(f'{t}: {s["rows"]:,} versions, {s["open"]:,} open; pg_total_relation_size {mb(s["total"])} '
            f'(table {mb(s["table"])}; indexes ' + ', '.join(f'{n} {mb(b)}' for n, b in s['indexes']) + ')')
        if 'zip' in s:
            say('  ' + describe_zipper(s['zip']))
    judged = [(r['key'], r['met']) for r in results if 'met' in r] + \
        [('indexes_growth', r['growth_met']) for r in results if 'growth_met' in r]
    missed = [k for k, ok in judged if not ok]
    say(f'\ntargets met: {len(judged) - len(missed)} of {len(judged)}'
        + (f'; missed: {", ".join(missed)}' if missed else ''))
    write_json(a, 'indexes', {'keys': a.keys, 'depth': a.depth, 'scale': a.scale, 'grow': a.grow,
                              'batch': a.batch, 'batches': a.batches, 'lookups': a.lookups,
                              'versions_small': sz['h_small']['rows'], 'versions_big': sz['h_big']['rows']},
               results, settings=st, load_average=load_avg, plans=pl, times=times,
               times_new_connection=times_new if times is not None else None)
    if not (a.keep or a.reuse):
        zconn.autocommit = True
        zconn.cursor().execute('DROP TABLE IF EXISTS ' + ', '.join(TABLES) + ', idx_changes, idx_params')
    zconn.close()
    hconn.close()
    if failures:
        print('\nFAILED:\n' + '\n'.join(failures))
        return 1
    print('\nok: both sides agree')
    return 0


if __name__ == '__main__':
    sys.exit(main())
