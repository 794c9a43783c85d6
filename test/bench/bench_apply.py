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
times are random within one day, the day after the previous batch's.  Both
sides apply the very same changes table, one after the other, alternating
which side goes first, each in its own transaction (client wall time,
including COMMIT).

At the end of every round the two tables must hold the same rows (EXCEPT ALL
both ways) and zipper_lake.verify('z_acct') must return nothing; the counts
returned by apply_changes must match the heap job's row counts.  Any
disagreement makes the script exit with status 1.

Connection: libpq environment (PGHOST, PGPORT, PGDATABASE, PGUSER) or
--host/--port/--dbname.  The database needs CREATE EXTENSION rights (the
script runs CREATE EXTENSION IF NOT EXISTS zipper_lake).

Ratios are heap time / zipper time: > 1 means zipper_lake is faster.
"""
import argparse
import io
import random
import statistics
import sys
import time

import psycopg2

from bench_common import connect, q, zipper_stats, describe_zipper

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
    p.add_argument('--host')
    p.add_argument('--port')
    p.add_argument('--dbname')
    p.add_argument('--smoke', action='store_true',
                   help='CI size: 2,000 keys, batches of 200, 3 batches, 1 round; exit 1 on any disagreement')
    p.add_argument('--keep', action='store_true', help='keep the tables after the last round')
    p.add_argument('--quiet', action='store_true', help='no per-batch lines')
    a = p.parse_args()
    if a.smoke:
        a.keys, a.batch, a.batches, a.rounds = 2000, 200, 3, 1
    if a.batch * 0.9 > a.keys:
        p.error('--batch is too large for --keys (updates and deletes need distinct alive keys)')
    return a


def median(xs):
    return statistics.median(xs) if xs else float('nan')


# ---------------------------------------------------------------------------
# setup
# ---------------------------------------------------------------------------

def setup(conn, a):
    """Create and load both tables; return (heap load s, zipper load s)."""
    cur = conn.cursor()
    conn.autocommit = True
    cur.execute('CREATE EXTENSION IF NOT EXISTS zipper_lake')
    cur.execute('DROP TABLE IF EXISTS z_acct, h_acct, changes, bench_stage')
    cur.execute("""
        CREATE TABLE h_acct (id bigint NOT NULL, name text, balance numeric, branch int,
                             valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)""")
    cur.execute("""
        CREATE TABLE z_acct (id bigint, name text, balance numeric, branch int,
                             valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
        USING zipper_lake""")
    cur.execute("SELECT zipper_lake.register('z_acct', key => ARRAY['id'])")
    conn.autocommit = False

    # deterministic initial image (same rows for both sides), open versions
    # starting at a random-looking instant in the INIT_SPREAD_DAYS before T0
    load_select = f"""
        SELECT g::bigint, 'name_' || g, round((abs(hashint8(g)) % 10000000) / 100.0, 2),
               (abs(hashint8(g + 7)) % 100)::int,
               timestamptz '{T0}' - (1 + abs(hashint8(g + 13)) % ({INIT_SPREAD_DAYS} * 86400 - 1)) * interval '1 second',
               timestamptz 'infinity'
          FROM generate_series(1, {int(a.keys)}) g"""
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

    conn.autocommit = True
    cur.execute('VACUUM ANALYZE h_acct')
    cur.execute('ANALYZE z_acct')
    try:
        cur.execute('CHECKPOINT')       # start the timed part with clean buffers; needs pg_checkpoint
    except psycopg2.Error:
        pass
    conn.autocommit = False
    return heap_load, zip_load


# ---------------------------------------------------------------------------
# change batches
# ---------------------------------------------------------------------------

class KeySpace:
    """Alive keys (with an open version) and the next new key."""

    def __init__(self, nkeys):
        self.alive = list(range(1, nkeys + 1))
        self.pos = {k: i for i, k in enumerate(self.alive)}
        self.next_id = nkeys + 1

    def remove(self, k):
        i = self.pos.pop(k)
        last = self.alive.pop()
        if i < len(self.alive):
            self.alive[i] = last
            self.pos[last] = i

    def add(self, k):
        self.pos[k] = len(self.alive)
        self.alive.append(k)


def make_batch(conn, rng, ks, a, day):
    """Build the table `changes` for batch `day` (0-based); return its row count."""
    n = a.batch
    n_new = n // 10
    n_del = n // 10
    n_upd = n - n_new - n_del
    picked = rng.sample(ks.alive, n_upd + n_del)
    upd, dele = picked[:n_upd], picked[n_upd:]
    new = list(range(ks.next_id, ks.next_id + n_new))
    ks.next_id += n_new
    for k in dele:
        ks.remove(k)
    for k in new:
        ks.add(k)

    rows = []

    def when():
        return rng.randrange(1, 86400 * 1000) / 1000.0   # seconds into the day, ms resolution

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
    rng.shuffle(rows)

    cur = conn.cursor()
    cur.execute('DROP TABLE IF EXISTS changes, bench_stage')
    cur.execute("""CREATE TEMP TABLE bench_stage (id bigint, kind text, op text, secs float8,
                   balance numeric, name text, branch int)""")
    buf = '\n'.join('\t'.join(r'\N' if v is None else str(v) for v in r) for r in rows) + '\n'
    cur.copy_from(io.StringIO(buf), 'bench_stage')
    # values of updates come from the key's open version (no-ops copy all of it),
    # read from the heap table before either side runs
    cur.execute(f"""
        CREATE TABLE changes AS
        SELECT s.id,
               CASE s.kind WHEN 'del' THEN NULL WHEN 'new' THEN s.name
                           WHEN 'noop' THEN h.name ELSE coalesce(s.name, h.name) END AS name,
               CASE s.kind WHEN 'del' THEN NULL WHEN 'new' THEN s.balance
                           WHEN 'noop' THEN h.balance ELSE s.balance END AS balance,
               CASE s.kind WHEN 'del' THEN NULL WHEN 'new' THEN s.branch
                           WHEN 'noop' THEN h.branch ELSE coalesce(s.branch, h.branch) END AS branch,
               timestamptz '{T0}' + %s * interval '1 day' + s.secs * interval '1 second' AS change_time,
               s.op
          FROM bench_stage s
          LEFT JOIN h_acct h ON h.id = s.id AND h.valid_to = 'infinity'
         ORDER BY random()""", (day,))
    cur.execute('DROP TABLE bench_stage')
    cur.execute('ANALYZE changes')
    conn.commit()
    return len(rows)


# ---------------------------------------------------------------------------
# the two apply jobs
# ---------------------------------------------------------------------------

HEAP_CLOSE = """
    UPDATE h_acct h SET valid_to = c.change_time
      FROM changes c
     WHERE h.id = c.id AND h.valid_to = 'infinity'
       AND (upper(c.op) = 'D'
            OR (h.name, h.balance, h.branch) IS DISTINCT FROM (c.name, c.balance, c.branch))"""

HEAP_OPEN = """
    INSERT INTO h_acct (id, name, balance, branch, valid_from, valid_to)
    SELECT c.id, c.name, c.balance, c.branch, c.change_time, 'infinity'
      FROM changes c
     WHERE upper(c.op) <> 'D'
       AND NOT EXISTS (SELECT 1 FROM h_acct h WHERE h.id = c.id AND h.valid_to = 'infinity')"""


def run_heap(conn):
    cur = conn.cursor()
    t = time.perf_counter()
    cur.execute(HEAP_CLOSE)
    closed = cur.rowcount
    cur.execute(HEAP_OPEN)
    inserted = cur.rowcount
    conn.commit()
    return time.perf_counter() - t, {'closed': closed, 'inserted': inserted}


def run_zipper(conn):
    cur = conn.cursor()
    t = time.perf_counter()
    cur.execute("SELECT * FROM zipper_lake.apply_changes('z_acct', 'changes')")
    row = cur.fetchone()
    conn.commit()
    names = [d[0] for d in cur.description]
    return time.perf_counter() - t, dict(zip(names, row))


# ---------------------------------------------------------------------------
# checks and sizes
# ---------------------------------------------------------------------------

COLS = 'id, name, balance, branch, valid_from, valid_to'


def check_tables(conn):
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
    bad = q(cur, "SELECT check_name, detail FROM zipper_lake.verify('z_acct') LIMIT 5")
    for r in bad:
        problems.append(f'verify: {r[0]}: {r[1]}')
    conn.commit()
    return problems


def sizes(conn):
    cur = conn.cursor()
    r = {}
    r['rows'] = q(cur, 'SELECT count(*) FROM h_acct')[0][0]
    r['open'] = q(cur, "SELECT count(*) FROM h_acct WHERE valid_to = 'infinity'")[0][0]
    r['heap_table'] = q(cur, "SELECT pg_table_size('h_acct')")[0][0]
    r['heap_total'] = q(cur, "SELECT pg_total_relation_size('h_acct')")[0][0]
    conn.commit()
    r['zip'] = zipper_stats(conn, 'z_acct')
    return r


def mb(b):
    return f'{b / 1048576:.1f} MB'


# ---------------------------------------------------------------------------
# main
# ---------------------------------------------------------------------------

def main():
    a = parse_args()
    conn = connect(a, autocommit=False)
    cur = conn.cursor()
    server = q(cur, "SELECT current_setting('server_version'), current_setting('shared_buffers'),"
                    " current_setting('synchronous_commit'), current_setting('work_mem'),"
                    " current_setting('random_page_cost'), current_setting('effective_cache_size'),"
                    " current_setting('jit')")[0]
    conn.commit()
    print(f'bench_apply: keys={a.keys} batch={a.batch} batches={a.batches} rounds={a.rounds} seed={a.seed}')
    print(f'server {server[0]}, shared_buffers={server[1]}, synchronous_commit={server[2]}, work_mem={server[3]}, '
          f'random_page_cost={server[4]}, effective_cache_size={server[5]}, jit={server[6]}')
    print('ratio = heap time / zipper time (> 1: zipper_lake is faster)')

    failures = []
    z_times = [[] for _ in range(a.batches)]   # per batch index, one per round
    h_times = [[] for _ in range(a.batches)]
    ratios = []
    load_ratios = []
    z_growth, h_growth = [], []
    last_sizes = None

    for rnd in range(a.rounds):
        heap_load, zip_load = setup(conn, a)
        load_ratios.append(heap_load / zip_load)
        print(f'\nround {rnd + 1}: initial load of {a.keys} keys: heap {heap_load:.2f}s (incl. indexes), '
              f'zipper {zip_load:.2f}s, ratio {heap_load / zip_load:.2f}')
        if not a.quiet:
            print(f'{"batch":>5} {"changes":>8} {"zipper s":>9} {"heap s":>9} {"ratio":>6}  first   zipper counts')
        rng = random.Random(a.seed)
        ks = KeySpace(a.keys)
        rz, rh = [], []
        for b in range(a.batches):
            n = make_batch(conn, rng, ks, a, b)
            zipper_first = (b + rnd) % 2 == 0
            if zipper_first:
                tz, cz = run_zipper(conn)
                th, ch = run_heap(conn)
            else:
                th, ch = run_heap(conn)
                tz, cz = run_zipper(conn)
            if cz['inserted'] != ch['inserted'] or cz['closed'] != ch['closed']:
                failures.append(f'round {rnd + 1} batch {b + 1}: zipper counts {cz} vs heap {ch}')
            z_times[b].append(tz)
            h_times[b].append(th)
            rz.append(tz)
            rh.append(th)
            ratios.append(th / tz)
            if not a.quiet:
                print(f'{b + 1:>5} {n:>8} {tz:>9.3f} {th:>9.3f} {th / tz:>6.2f}  {"zipper" if zipper_first else "heap  "}  '
                      + ' '.join(f'{k}={v}' for k, v in cz.items()))
        k = min(3, a.batches // 2) or 1
        z_growth.append(median(rz[-k:]) / median(rz[:k]))
        h_growth.append(median(rh[-k:]) / median(rh[:k]))
        problems = check_tables(conn)
        if problems:
            failures.append(f'round {rnd + 1}: ' + '\n'.join(problems))
            print('MISMATCH:\n' + '\n'.join(problems))
        else:
            print(f'round {rnd + 1}: z_acct and h_acct hold the same rows; verify clean')
        last_sizes = sizes(conn)

    print('\n=== summary (medians; noisy machine: trust ratios, not seconds)')
    print(f'{"batch":>5} {"zipper s":>9} {"heap s":>9} {"ratio":>6}')
    for b in range(a.batches):
        mz, mh = median(z_times[b]), median(h_times[b])
        print(f'{b + 1:>5} {mz:>9.3f} {mh:>9.3f} {mh / mz:>6.2f}')
    print(f'median per-batch ratio heap/zipper: {median(ratios):.2f}  (>1: zipper_lake faster; '
          f'{len(ratios)} batches, min {min(ratios):.2f}, max {max(ratios):.2f})')
    print(f'median initial-load ratio heap/zipper: {median(load_ratios):.2f}')
    print(f'growth with history, median(last {k} batches)/median(first {k}): '
          f'zipper {median(z_growth):.2f}, heap {median(h_growth):.2f}  (1.0 = flat)')
    s = last_sizes
    print(f'sizes after the last round: {s["rows"]} versions, {s["open"]} open')
    print(f'  h_acct  pg_total_relation_size {mb(s["heap_total"])} (table {mb(s["heap_table"])}, '
          f'indexes {mb(s["heap_total"] - s["heap_table"])})')
    z = s['zip']
    print('  z_acct  pg_total_relation_size ' + describe_zipper(z))
    print(f'  size ratio heap/zipper: {s["heap_total"] / (z["total"] + (z["meta"] or 0)):.2f}')

    if not a.keep:
        conn.autocommit = True
        conn.cursor().execute('DROP TABLE IF EXISTS z_acct, h_acct, changes')
    conn.close()
    if failures:
        print('\nFAILED:\n' + '\n'.join(failures))
        return 1
    print('\nok: both sides agree')
    return 0


if __name__ == '__main__':
    sys.exit(main())
