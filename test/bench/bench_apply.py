#!/usr/bin/env python3
"""
test/bench/bench_apply.py -- the SCD2 apply job, zipper_lake vs plain PostgreSQL.

Two tables hold the same data:

  z_acct  USING zipper_lake, registered with key id; batches are applied with
          SELECT * FROM zipper_lake.apply_changes('z_acct', 'changes')
  h_acct  an ordinary heap table with the indexes a PostgreSQL user creates for
          SCD2: UNIQUE (id) WHERE valid_to = 'infinity' (finds the open
          version) and PRIMARY KEY (id, valid_from) (per-key history / as-of);
          batches are applied with the classic SCD2 job in one transaction:
            UPDATE ... SET valid_to = change_time   (close changed / deleted)
            INSERT ... new versions                  (changed or new keys)

Each batch is a fresh table `changes (id, name, balance, branch, change_time,
op)` holding --batch distinct random keys: ~80% updates (1 in 10 of them a
no-op carrying the current values), ~10% new keys, ~10% deletes; its change
times are random within one day, the day after the previous batch's (with
--per-day K, within a K-th of a day, K batches a day).  Both
sides apply the very same changes table, one after the other, alternating
which side goes first, each in its own transaction (client wall time,
including COMMIT) and its own backend: the heap job's never loads
zipper_lake, so it runs as plain PostgreSQL does.

At the end of every round the two tables must hold the same rows (EXCEPT ALL
both ways) and zipper_lake.verify('z_acct') must return nothing; the counts
returned by apply_changes must match the heap job's row counts.  Any
disagreement makes the script exit with status 1.

Connection: libpq environment (PGHOST, PGPORT, PGDATABASE, PGUSER) or
--host/--port/--dbname.  The database needs CREATE EXTENSION rights (the
script runs CREATE EXTENSION IF NOT EXISTS zipper_lake).

Ratios are heap time / zipper time: > 1 means zipper_lake is faster.

--late F: a share F of each batch's changes (chosen at random) is 1-7 days
(uniformly, ms resolution) older than the batch's day.  zipper_lake folds
them into the key's history (README "Change semantics"); the script keeps a
log of every change and checks z_acct against the fold of that log computed
in SQL.  The heap job runs unchanged: it treats a late change as a current
one at its own time (closes the open version there, opens the new one), so
its history is wrong for keys that changed after the late change's time --
the script counts those keys and the versions that end before they begin,
and compares times anyway.  It also prints the change record's size
(zipper_lake.inspect_record).

--build NAME=CONNINFO (twice or more): the same job on several servers
(e.g. two builds of the extension, see compare_builds.sh) in one run; rounds
alternate between them (round 1 on the first, round 1 on the second, round 2
on the first, ...), each round timing both sides on its server, and the
summary gives each build's median ratio and its quotient by the first
build's.
"""
import argparse
import random
import re
import sys
import time

import psycopg2

from bench_common import (add_connection_args, add_json_arg, check_batch_size, connect, describe_zipper, KeySpace,
                          median, q, result, stage_changes, write_json, zipper_stats)

T0 = '2024-01-01 00:00:00+00'      # first batch day; the initial load lies before it
INIT_SPREAD_DAYS = 30              # initial valid_from spread over the 30 days before T0


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--keys', type=int, default=1_000_000, help='initial keys (default 1,000,000)')
    p.add_argument('--batch', type=int, default=10_000, help='changes per batch (default 10,000)')
    p.add_argument('--batches', type=int, default=10, help='batches per round (default 10)')
    p.add_argument('--rounds', type=int, default=3,
                   help='rounds: each rebuilds both tables and replays the same batches (default 3)')
    p.add_argument('--seed', type=int, default=42)
    add_connection_args(p)
    p.add_argument('--smoke', action='store_true',
                   help='CI size: 2,000 keys, batches of 200, 3 batches, 1 round; exit 1 on any disagreement')
    p.add_argument('--keep', action='store_true', help='keep the tables after the last round')
    p.add_argument('--quiet', action='store_true', help='no per-batch lines')
    p.add_argument('--late', type=float, default=0.0, metavar='F',
                   help='share of each batch\'s changes made 1-7 days older than the batch (default 0)')
    p.add_argument('--per-day', type=int, default=1, metavar='K',
                   help='batches a day (default 1): batch b lies in the (b %% K)-th K-th of day b // K, '
                        'so K batches end versions in the same history partition')
    p.add_argument('--history-group-span', metavar='INTERVAL',
                   help="register z_acct with this history_group_span (default: register's, '1 day')")
    p.add_argument('--no-verify', action='store_true',
                   help='skip zipper_lake.verify() after each round (the tables are still compared)')
    p.add_argument('--build', action='append', default=[], metavar='NAME=CONNINFO',
                   help='run on this server too (repeat); rounds alternate between the servers given')
    add_json_arg(p)
    a = p.parse_args()
    if a.smoke:
        a.keys, a.batch, a.batches, a.rounds = 2000, 200, 3, 1
    check_batch_size(p, a)
    if a.per_day < 1:
        p.error('--per-day must be at least 1')
    if not 0.0 <= a.late <= 1.0:
        p.error('--late must lie between 0 and 1')
    builds = []
    for b in a.build:
        m = re.match(r'([^=\s]+)=(.*)$', b, re.S)
        if not m:
            p.error(f'--build {b!r}: expected NAME=CONNINFO')
        if m.group(1) in [n for n, _ in builds]:
            p.error(f'--build {m.group(1)} given twice')
        builds.append((m.group(1), m.group(2)))
    a.build = builds
    return a


# ---------------------------------------------------------------------------
# setup
# ---------------------------------------------------------------------------

def initial_versions(keys):
    """The deterministic initial image (the same rows for every table): keys
    1..keys, each with one open version (id, name, balance, branch,
    valid_from, valid_to) starting at a random-looking instant in the
    INIT_SPREAD_DAYS before T0."""
    return f"""
        SELECT g::bigint, 'name_' || g, round((abs(hashint8(g)) % 10000000) / 100.0, 2),
               (abs(hashint8(g + 7)) % 100)::int,
               timestamptz '{T0}' - (1 + abs(hashint8(g + 13)) % ({INIT_SPREAD_DAYS} * 86400 - 1)) * interval '1 second',
               timestamptz 'infinity'
          FROM generate_series(1, {int(keys)}) g"""


def setup(conn, a):
    """Create and load both tables; return (heap load s, zipper load s)."""
    cur = conn.cursor()
    conn.autocommit = True
    cur.execute('CREATE EXTENSION IF NOT EXISTS zipper_lake')
    cur.execute('DROP TABLE IF EXISTS z_acct, h_acct, changes, bench_stage, bench_log')
    cur.execute("""
        CREATE TABLE h_acct (id bigint NOT NULL, name text, balance numeric, branch int,
                             valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)""")
    cur.execute("""
        CREATE TABLE z_acct (id bigint, name text, balance numeric, branch int,
                             valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
        USING zipper_lake""")
    if a.history_group_span:
        cur.execute("SELECT zipper_lake.register('z_acct', key => ARRAY['id'], history_group_span => %s)",
                    (a.history_group_span,))
    else:
        cur.execute("SELECT zipper_lake.register('z_acct', key => ARRAY['id'])")
    conn.autocommit = False

    load_select = initial_versions(a.keys)
    # heap: load first, then build the indexes (what a user does for a bulk load);
    # the index build is part of the heap load time
    t = time.perf_counter()
    cur.execute('INSERT INTO h_acct ' + load_select)
    cur.execute("CREATE UNIQUE INDEX h_acct_open_uq ON h_acct (id) WHERE valid_to = 'infinity'")
    cur.execute('ALTER TABLE h_acct ADD CONSTRAINT h_acct_pk PRIMARY KEY (id, valid_from)')
    conn.commit()
    heap_load = time.perf_counter() - t

    t = time.perf_counter()
    cur.execute('INSERT INTO z_acct ' + load_select)
    conn.commit()
    zip_load = time.perf_counter() - t

    if a.late:
        # the log of every change, for the fold check (late mode): a loaded
        # open version stands for an upsert at its valid_from
        cur.execute("""CREATE TABLE bench_log AS
                       SELECT id, name, balance, branch, valid_from AS t, 'I'::text AS op, 0 AS app
                         FROM h_acct""")
        conn.commit()

    conn.autocommit = True
    # as autovacuum would after a load: for z_acct, VACUUM writes the open
    # versions as the columnar base apply then reads (README "Storage formats")
    cur.execute('VACUUM ANALYZE h_acct')
    cur.execute('VACUUM ANALYZE z_acct')
    try:
        cur.execute('CHECKPOINT')       # start the timed part with clean buffers; needs pg_checkpoint
    except psycopg2.Error:
        pass
    conn.autocommit = False
    return heap_load, zip_load


# ---------------------------------------------------------------------------
# change batches
# ---------------------------------------------------------------------------

def make_batch(conn, rng, ks, a, b, changes='changes', open_table='h_acct'):
    """Build the table `changes` for batch b (0-based), the values of
    updates from the open versions of open_table: its changes lie in slice
    b % per_day of day b // per_day; return its row count."""
    day, part = divmod(b, a.per_day)
    upd, dele, new = ks.pick_batch(rng, a.batch)
    rows = []

    def when():
        # seconds into the day within the batch's slice of it, ms resolution
        return (part * 86400 * 1000 // a.per_day + rng.randrange(1, 86400 * 1000 // a.per_day)) / 1000.0

    for k in upd:
        kind = 'noop' if rng.random() < 0.10 else 'chg'
        name = f'name_{k}_{day}' if (kind == 'chg' and rng.random() < 0.3) else None
        branch = rng.randrange(100) if (kind == 'chg' and rng.random() < 0.2) else None
        rows.append((k, kind, 'U', when(), f'{rng.randrange(10_000_000) / 100:.2f}', name, branch))
    for k in new:
        rows.append((k, 'new', 'I', when(), f'{rng.randrange(10_000_000) / 100:.2f}', f'name_{k}',
                     rng.randrange(100)))
    for k in dele:
        rows.append((k, 'del', 'D', when(), None, None, None))
    if a.late:
        # late changes: 1-7 days (uniform, ms) before their time in the batch's day
        for i in rng.sample(range(len(rows)), round(a.late * len(rows))):
            r = rows[i]
            rows[i] = r[:3] + (r[3] - rng.randrange(86400 * 1000, 7 * 86400 * 1000 + 1) / 1000.0,) + r[4:]
    rng.shuffle(rows)

    cur = conn.cursor()
    stage_changes(cur, rows, (('balance', 'numeric', False), ('name', 'text', True), ('branch', 'int', True)),
                  'bench_stage', changes, open_table, T0, day)
    if a.late:
        cur.execute(f'INSERT INTO bench_log SELECT id, name, balance, branch, change_time, op, %s FROM {changes}',
                    (b + 1,))
    cur.execute(f'ANALYZE {changes}')
    conn.commit()
    return len(rows)


# ---------------------------------------------------------------------------
# the two apply jobs
# ---------------------------------------------------------------------------

# {h}: the heap table, {changes}: the batch
HEAP_CLOSE = """
    UPDATE {h} h SET valid_to = c.change_time
      FROM {changes} c
     WHERE h.id = c.id AND h.valid_to = 'infinity'
       AND (upper(c.op) = 'D'
            OR (h.name, h.balance, h.branch) IS DISTINCT FROM (c.name, c.balance, c.branch))"""

HEAP_OPEN = """
    INSERT INTO {h} (id, name, balance, branch, valid_from, valid_to)
    SELECT c.id, c.name, c.balance, c.branch, c.change_time, 'infinity'
      FROM {changes} c
     WHERE upper(c.op) <> 'D'
       AND NOT EXISTS (SELECT 1 FROM {h} h WHERE h.id = c.id AND h.valid_to = 'infinity')"""


def run_heap(conn, h='h_acct', changes='changes'):
    cur = conn.cursor()
    t = time.perf_counter()
    cur.execute(HEAP_CLOSE.format(h=h, changes=changes))
    closed = cur.rowcount
    cur.execute(HEAP_OPEN.format(h=h, changes=changes))
    inserted = cur.rowcount
    conn.commit()
    return time.perf_counter() - t, {'closed': closed, 'inserted': inserted}


def run_zipper(conn, z='z_acct', changes='changes'):
    """apply_changes of the batch to z: (seconds including COMMIT -- in
    autocommit, the statement's own --, its counts)."""
    cur = conn.cursor()
    t = time.perf_counter()
    cur.execute(f"SELECT * FROM zipper_lake.apply_changes('{z}', '{changes}')")
    row = cur.fetchone()
    conn.commit()
    names = [d[0] for d in cur.description]
    return time.perf_counter() - t, dict(zip(names, row))


# ---------------------------------------------------------------------------
# checks and sizes
# ---------------------------------------------------------------------------

COLS = 'id, name, balance, branch, valid_from, valid_to'


def verify_problems(cur, a):
    if a.no_verify:
        return []
    return [f'verify: {r[0]}: {r[1]}'
            for r in q(cur, "SELECT check_name, detail FROM zipper_lake.verify('z_acct') LIMIT 5")]


def check_tables(conn, a):
    cur = conn.cursor()
    problems = []
    only_z = q(cur, f'SELECT count(*) FROM (SELECT {COLS} FROM z_acct EXCEPT ALL SELECT {COLS} FROM h_acct) x')[0][0]
    only_h = q(cur, f'SELECT count(*) FROM (SELECT {COLS} FROM h_acct EXCEPT ALL SELECT {COLS} FROM z_acct) x')[0][0]
    if only_z or only_h:
        problems.append(f'tables differ: {only_z} rows only in z_acct, {only_h} rows only in h_acct')
        for r in q(cur, f'(SELECT \'z\' AS side, {COLS} FROM z_acct EXCEPT ALL SELECT \'z\', {COLS} FROM h_acct)'
                        f' UNION ALL (SELECT \'h\', {COLS} FROM h_acct EXCEPT ALL SELECT \'h\', {COLS} FROM z_acct)'
                        ' ORDER BY 2, 6 LIMIT 10'):
            problems.append('  ' + repr(r))
    problems += verify_problems(cur, a)
    conn.commit()
    return problems


# The fold of the log (README "Change semantics", "The fold"), for this
# script's data only: no seq, no snapshots, one change of a key per batch.
# Per key and instant the change of the latest application wins; the key's
# state after each change is absent (a delete) or its values; a version
# begins where the state becomes present or changes values and ends at the
# next such boundary (or stays open).
FOLD = """
    CREATE TEMP TABLE bench_fold AS
    WITH last AS (
        SELECT DISTINCT ON (id, t) id, t, upper(op) <> 'D' AS present, name, balance, branch
          FROM bench_log ORDER BY id, t, app DESC),
    step AS (
        SELECT *, present IS DISTINCT FROM lag(present) OVER w
                  OR (present AND (name, balance, branch) IS DISTINCT FROM
                                  (lag(name) OVER w, lag(balance) OVER w, lag(branch) OVER w)) AS boundary
          FROM last WINDOW w AS (PARTITION BY id ORDER BY t)),
    bounds AS (
        SELECT id, t, present, name, balance, branch, lead(t) OVER (PARTITION BY id ORDER BY t) AS next_t
          FROM step WHERE boundary)
    SELECT id, name, balance, branch, t AS valid_from, coalesce(next_t, 'infinity') AS valid_to
      FROM bounds WHERE present"""


def check_late(conn, a):
    """Late mode: z_acct must equal the fold of every change applied, and
    verify() must be clean (problems); the heap job's departures from the
    fold are measured (info: keys whose history differs, versions ending
    before they begin)."""
    cur = conn.cursor()
    problems = []
    cur.execute('DROP TABLE IF EXISTS bench_fold')
    cur.execute(FOLD)
    only_z = q(cur, f'SELECT count(*) FROM (SELECT {COLS} FROM z_acct EXCEPT ALL SELECT {COLS} FROM bench_fold) x')[0][0]
    only_f = q(cur, f'SELECT count(*) FROM (SELECT {COLS} FROM bench_fold EXCEPT ALL SELECT {COLS} FROM z_acct) x')[0][0]
    if only_z or only_f:
        problems.append(f'z_acct is not the fold of the changes: {only_z} rows only in z_acct, '
                        f'{only_f} rows only in the fold')
        for r in q(cur, f'(SELECT \'z\' AS side, {COLS} FROM z_acct EXCEPT ALL SELECT \'z\', {COLS} FROM bench_fold)'
                        f' UNION ALL (SELECT \'fold\', {COLS} FROM bench_fold EXCEPT ALL SELECT \'fold\', {COLS} FROM z_acct)'
                        ' ORDER BY 2, 6 LIMIT 10'):
            problems.append('  ' + repr(r))
    problems += verify_problems(cur, a)
    info = {}
    info['heap_keys_wrong'] = q(cur, f"""
        SELECT count(DISTINCT id) FROM
          ((SELECT {COLS} FROM h_acct EXCEPT ALL SELECT {COLS} FROM bench_fold)
           UNION ALL
           (SELECT {COLS} FROM bench_fold EXCEPT ALL SELECT {COLS} FROM h_acct)) x""")[0][0]
    info['heap_inverted'] = q(cur, 'SELECT count(*) FROM h_acct WHERE valid_to < valid_from')[0][0]
    info['keys'] = q(cur, 'SELECT count(DISTINCT id) FROM bench_log')[0][0]
    cur.execute('DROP TABLE bench_fold')
    conn.commit()
    return problems, info


def record_size(conn):
    """(instants, bytes, pieces) of z_acct's change record, or None if this
    build has no zipper_lake.inspect_record (builds before the record)."""
    cur = conn.cursor()
    cur.execute('SAVEPOINT zl_record')
    try:
        r = q(cur, "SELECT coalesce(sum(instants), 0), coalesce(sum(bytes), 0), count(*)"
                   " FROM zipper_lake.inspect_record('z_acct')")[0]
    except psycopg2.Error:
        cur.execute('ROLLBACK TO SAVEPOINT zl_record')
        r = None
    conn.commit()
    return r


def sizes(conn):
    cur = conn.cursor()
    r = {}
    r['rows'] = q(cur, 'SELECT count(*) FROM h_acct')[0][0]
    r['open'] = q(cur, "SELECT count(*) FROM h_acct WHERE valid_to = 'infinity'")[0][0]
    r['z_rows'] = q(cur, 'SELECT count(*) FROM z_acct')[0][0]
    r['z_open'] = q(cur, "SELECT count(*) FROM z_acct WHERE valid_to = 'infinity'")[0][0]
    r['heap_table'] = q(cur, "SELECT pg_table_size('h_acct')")[0][0]
    r['heap_total'] = q(cur, "SELECT pg_total_relation_size('h_acct')")[0][0]
    conn.commit()
    r['zip'] = zipper_stats(conn, 'z_acct')
    r['record'] = record_size(conn)
    return r


def mb(b):
    return f'{b / 1048576:.1f} MB'


# ---------------------------------------------------------------------------
# main
# ---------------------------------------------------------------------------

class Side:
    """One server the job runs on (one build of the extension) and its results."""

    def __init__(self, name, conn, heap_conn, a):
        self.name = name
        self.conn = conn
        # the heap job in a backend of its own that never loads zipper_lake,
        # so it runs as plain PostgreSQL does (zipper_lake.retained_memory
        # changes the C library's settings of the backend that loads it)
        self.heap_conn = heap_conn
        self.z_times = [[] for _ in range(a.batches)]   # per batch index, one per round
        self.h_times = [[] for _ in range(a.batches)]
        self.ratios = []                                # per (round, batch), in order
        self.round_ratios = []                          # median ratio of each round
        self.load_ratios = []
        self.load_times = []                            # (zipper, heap) per round
        self.z_growth, self.h_growth = [], []
        self.counts = {}                                # zipper counts summed over the last round
        self.late_info = None
        self.last_sizes = None
        self.failures = []


def run_round(side, a, rnd, say):
    conn = side.conn
    heap_load, zip_load = setup(conn, a)
    side.load_ratios.append(heap_load / zip_load)
    side.load_times.append((zip_load, heap_load))
    say(f'\nround {rnd + 1}: initial load of {a.keys} keys: heap {heap_load:.2f}s (incl. indexes), '
        f'zipper {zip_load:.2f}s, ratio {heap_load / zip_load:.2f}')
    if not a.quiet:
        say(f'{"batch":>5} {"changes":>8} {"zipper s":>9} {"heap s":>9} {"ratio":>6}  first   zipper counts')
    rng = random.Random(a.seed)
    ks = KeySpace(range(1, a.keys + 1), a.keys + 1)
    rz, rh, rr = [], [], []
    counts = {}
    for b in range(a.batches):
        n = make_batch(conn, rng, ks, a, b)
        zipper_first = (b + rnd) % 2 == 0
        if zipper_first:
            tz, cz = run_zipper(conn)
            th, ch = run_heap(side.heap_conn)
        else:
            th, ch = run_heap(side.heap_conn)
            tz, cz = run_zipper(conn)
        # late changes: the heap job's counts follow its own (classic) semantics
        if not a.late and (cz['inserted'] != ch['inserted'] or cz['closed'] != ch['closed']):
            side.failures.append(f'round {rnd + 1} batch {b + 1}: zipper counts {cz} vs heap {ch}')
        for k, v in cz.items():
            counts[k] = counts.get(k, 0) + v
        side.z_times[b].append(tz)
        side.h_times[b].append(th)
        rz.append(tz)
        rh.append(th)
        rr.append(th / tz)
        if not a.quiet:
            say(f'{b + 1:>5} {n:>8} {tz:>9.3f} {th:>9.3f} {th / tz:>6.2f}  {"zipper" if zipper_first else "heap  "}  '
                + ' '.join(f'{k}={v}' for k, v in cz.items()))
    side.ratios.extend(rr)
    side.round_ratios.append(median(rr))
    side.counts = counts
    k = min(3, a.batches // 2) or 1
    side.z_growth.append(median(rz[-k:]) / median(rz[:k]))
    side.h_growth.append(median(rh[-k:]) / median(rh[:k]))
    t = time.perf_counter()
    if a.late:
        problems, info = check_late(conn, a)
        side.late_info = info
    else:
        problems = check_tables(conn, a)
    verified = ('verify skipped' if a.no_verify else 'verify clean') + f' (checks {time.perf_counter() - t:.0f} s)'
    if problems:
        side.failures.append(f'round {rnd + 1}: ' + '\n'.join(problems))
        say('MISMATCH:\n' + '\n'.join(problems))
    elif a.late:
        say(f'round {rnd + 1}: z_acct is the fold of all changes; {verified}; heap job: '
            f'{info["heap_keys_wrong"]} of {info["keys"]} keys hold another history, '
            f'{info["heap_inverted"]} versions end before they begin')
    else:
        say(f'round {rnd + 1}: z_acct and h_acct hold the same rows; {verified}')
    side.last_sizes = sizes(conn)
    if len(a.build) > 1:
        # leave nothing dirty for this server to write during another's round
        conn.autocommit = True
        try:
            conn.cursor().execute('CHECKPOINT')
        except psycopg2.Error:
            pass
        conn.autocommit = False


def summary(side, a, say):
    say(f'{"batch":>5} {"zipper s":>9} {"heap s":>9} {"ratio":>6}')
    for b in range(a.batches):
        mz, mh = median(side.z_times[b]), median(side.h_times[b])
        say(f'{b + 1:>5} {mz:>9.3f} {mh:>9.3f} {mh / mz:>6.2f}')
    r = side.ratios
    say(f'median per-batch ratio heap/zipper: {median(r):.2f}  (>1: zipper_lake faster; '
        f'{len(r)} batches, min {min(r):.2f}, max {max(r):.2f}; per round: '
        + ', '.join(f'{x:.2f}' for x in side.round_ratios) + ')')
    say(f'median per-batch time: zipper {median([t for ts in side.z_times for t in ts]):.3f} s, '
        f'heap {median([t for ts in side.h_times for t in ts]):.3f} s')
    say(f'median initial-load ratio heap/zipper: {median(side.load_ratios):.2f}')
    k = min(3, a.batches // 2) or 1
    say(f'growth with history, median(last {k} batches)/median(first {k}): '
        f'zipper {median(side.z_growth):.2f}, heap {median(side.h_growth):.2f}  (1.0 = flat)')
    say('zipper counts, sum over the last round: ' + ' '.join(f'{k}={v}' for k, v in side.counts.items()))
    if a.late and side.late_info:
        i = side.late_info
        say(f'late changes: z_acct is the fold of all changes; the heap job (late changes taken as current) '
            f'left {i["heap_keys_wrong"]} of {i["keys"]} keys with another history, '
            f'{i["heap_inverted"]} versions ending before they begin')
    s = side.last_sizes
    say(f'sizes after the last round: h_acct {s["rows"]} versions, {s["open"]} open; '
        f'z_acct {s["z_rows"]} versions, {s["z_open"]} open')
    say(f'  h_acct  pg_total_relation_size {mb(s["heap_total"])} (table {mb(s["heap_table"])}, '
        f'indexes {mb(s["heap_total"] - s["heap_table"])})')
    z = s['zip']
    say('  z_acct  pg_total_relation_size ' + describe_zipper(z))
    rec = s['record']
    if rec is None:
        say('  change record: n/a (this build has no zipper_lake.inspect_record)')
    else:
        say(f'  change record: {rec[0]} instants, {rec[1]} bytes ({mb(rec[1])}) in {rec[2]} pieces '
            f'(inspect_record: sum(instants), sum(bytes))')
    zbytes = z['total'] + (z['meta'] or 0) + (rec[1] if rec else 0)
    say(f'  size ratio heap/zipper (zipper: table + metadata + change record): {s["heap_total"] / zbytes:.2f}')


def json_results(side, a):
    """The side's medians for --json: a batch, and the initial load."""
    build = {'build': side.name} if side.name else {}
    late = f', {a.late:.0%} late' if a.late else ''
    return [
        result('apply', f'apply a batch of changes{late}',
               median([t for ts in side.z_times for t in ts]), median([t for ts in side.h_times for t in ts]),
               's', median(side.ratios), **build),
        result('apply_load', 'initial load of the open versions (heap: with its indexes)',
               median([z for z, _ in side.load_times]), median([h for _, h in side.load_times]),
               's', median(side.load_ratios), **build),
    ]


def main():
    a = parse_args()
    if a.build:
        sides = []
        for name, conninfo in a.build:
            conns = [psycopg2.connect(conninfo) for _ in range(2)]
            for c in conns:
                c.autocommit = False
            sides.append(Side(name, conns[0], conns[1], a))
    else:
        sides = [Side('', connect(a, autocommit=False), connect(a, autocommit=False), a)]
    many = len(sides) > 1

    def sayer(side):
        if not many:
            return print
        return lambda text: print('\n'.join(f'[{side.name}] {l}' if l else l for l in text.split('\n')))

    print(f'bench_apply: keys={a.keys} batch={a.batch} batches={a.batches} rounds={a.rounds} seed={a.seed}'
          + (f' late={a.late}' if a.late else ''))
    for side in sides:
        cur = side.conn.cursor()
        server = q(cur, "SELECT current_setting('server_version'), current_setting('shared_buffers'),"
                        " current_setting('synchronous_commit'), current_setting('work_mem'),"
                        " current_setting('random_page_cost'), current_setting('effective_cache_size'),"
                        " current_setting('jit'), current_setting('port')")[0]
        side.conn.commit()
        sayer(side)(f'server {server[0]} (port {server[7]}), shared_buffers={server[1]}, '
                    f'synchronous_commit={server[2]}, work_mem={server[3]}, random_page_cost={server[4]}, '
                    f'effective_cache_size={server[5]}, jit={server[6]}')
    print('ratio = heap time / zipper time (> 1: zipper_lake is faster)')
    if a.late:
        print(f'late: {a.late:.0%} of each batch\'s changes are 1-7 days older than the batch; zipper_lake folds '
              'them into history (checked against the fold of all changes); the heap job applies them as '
              'current changes at their own time (the classic job cannot fold them)')
    if many:
        print('builds: ' + ', '.join(s.name for s in sides) + '; rounds alternate between them')

    for rnd in range(a.rounds):
        for side in sides:
            run_round(side, a, rnd, sayer(side))

    for side in sides:
        print(f'\n=== summary{" of " + side.name if many else ""} (medians; noisy machine: trust ratios, not seconds)')
        summary(side, a, sayer(side))

    if many:
        base = sides[0]
        print(f'\n=== builds side by side (same run, rounds alternating; ratio = heap/zipper per batch)')
        print(f'{"build":<24} {"median ratio":>12} {"min":>6} {"max":>6} {"zipper s":>9} {"heap s":>9}  rounds')
        for side in sides:
            print(f'{side.name:<24} {median(side.ratios):>12.2f} {min(side.ratios):>6.2f} {max(side.ratios):>6.2f} '
                  f'{median([t for ts in side.z_times for t in ts]):>9.3f} '
                  f'{median([t for ts in side.h_times for t in ts]):>9.3f}  '
                  + ', '.join(f'{x:.2f}' for x in side.round_ratios))
        for side in sides[1:]:
            paired = [x / y for x, y in zip(side.ratios, base.ratios)]
            print(f'{side.name}/{base.name}: median ratio {median(side.ratios):.2f} / {median(base.ratios):.2f} = '
                  f'{median(side.ratios) / median(base.ratios):.2f}  (median of the per-batch quotients, '
                  f'same round and batch: {median(paired):.2f})')

    write_json(a, 'apply', {'keys': a.keys, 'batch': a.batch, 'batches': a.batches, 'rounds': a.rounds,
                            'late': a.late, 'per_day': a.per_day},
               [r for side in sides for r in json_results(side, a)])
    failures = [f'{s.name + ": " if many else ""}{f}' for s in sides for f in s.failures]
    for side in sides:
        if not a.keep:
            side.conn.autocommit = True
            side.conn.cursor().execute('DROP TABLE IF EXISTS z_acct, h_acct, changes, bench_log')
        side.conn.close()
    if failures:
        print('\nFAILED:\n' + '\n'.join(failures))
        return 1
    print('\nok: both sides agree' if not a.late else '\nok: zipper_lake holds the fold of all changes')
    return 0


if __name__ == '__main__':
    sys.exit(main())
