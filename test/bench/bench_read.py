#!/usr/bin/env python3
"""
test/bench/bench_read.py -- read queries on a deep history, zipper_lake vs plain
PostgreSQL (a heap table and a heap table partitioned by valid_to).

Four tables hold the same versions:

  z_hist  USING zipper_lake, registered with key id, history columnar (the
          default, README "Storage formats").  Built the way a zipper
          table is kept: an initial load, then one apply_changes() per day
          (--zipper-load insert loads the finished history with one INSERT
          instead, to compare storage layouts).
  z_rows  the same with history_format => 'rows' (the 0.1 format), built
          alongside (--no-rows: not built).
  h_hist  an ordinary heap SCD2 table, loaded from z_hist in valid_from order
          (roughly the order a daily UPDATE+INSERT job appends versions), with
          the indexes a PostgreSQL user creates: PRIMARY KEY (id, valid_from),
          btree (valid_to), btree (valid_from); VACUUM ANALYZE'd (so are the
          zipper tables: their VACUUM compacts masked rows; z_hist is also
          VACUUMed after each day's apply, untimed, as autovacuum visits a
          table written daily, and once more at the end, which gives back
          the end of the file the last one's moves left).
  p_hist  the same rows in a heap table PARTITIONED BY RANGE (valid_to): one
          partition per day, one ['infinity', MAXVALUE) partition for the open
          versions and a DEFAULT partition; same three indexes (the first one
          non-unique: a unique index must contain the partition key).

History: --keys keys (default 200,000), --days days (default 30).  Every day
each alive key changes with probability --change-rate (default 0.9, at a
random time of the day), 1% of keys are deleted and 1% new keys appear;
deleted keys come back when they change again.  Default size: ~5.6M versions.

Initial load (--zipper-load insert, or --load-compare): the finished history
loaded with one INSERT ... ORDER BY valid_from into a new zipper table
(columnar, and rows) against a heap table loaded the same way plus its three
indexes.

Queries (each on each table, side by side; order rotated every repetition; one
untimed warm-up run first; median of --reps runs, client wall time):

  current      WHERE valid_to = 'infinity'         | zipper_lake.current(NULL::z_hist)
  as-of recent WHERE valid_from <= X AND valid_to > X, X = yesterday noon
                                                   | zipper_lake.as_of(NULL::z_hist, X)
  as-of old    same, X = noon of day 2             | zipper_lake.as_of(...)
  changes      WHERE (valid_from >= A AND valid_from < B) OR (valid_to >= A AND valid_to < B)
               for one day in the middle           | zipper_lake.changes(NULL::z_hist, A, B)
  point        WHERE id = k AND valid_from = t for a known version
  every column count(*), sum(hashtext(t::text)) over the whole table: every
               column of every row decoded (columnar against rows: "SELECT *")

Aggregate queries return count(*) and sum(balance); the results of all tables
and forms must agree, else the script exits with status 1.  A query that
errors (e.g. a helper function not installed yet) prints n/a and is skipped.

Warm (default): everything is in shared buffers after the warm-up run; this
compares executor work.  Cold (--restart-cmd): before every timed run the
server is restarted (empty shared buffers), the query is EXPLAINed once (the
catalogs, zipper_lake's metadata included, are warm, as in a running server)
and the kernel's page cache is dropped (/proc/sys/vm/drop_caches: root), so
the table's pages come from disk; this compares pages read, the case of a
history bigger than memory.

Ratios: heap/zipper, partitioned/zipper and rows/zipper (the row format
against the columnar one); > 1 means zipper_lake (columnar) is faster.
Sizes count the zipper tables' metadata rows and change record with the
file and its TOAST; the heap's, its indexes and TOAST.  --chart PATH draws
the ratios and sizes as a PNG (python3-matplotlib).

Floor: for the aggregate queries, a heap table holding exactly the answer
rows (CREATE TABLE AS, VACUUM ANALYZE'd) is scanned with the same aggregate:
the cost of the executor's per-row work with no row read in vain, the best any
row store can do.  heap/floor is the most a row store can gain on the indexed
heap; floor/z above 1 means zipper_lake reads its answer faster than a
sequential scan of a table that holds nothing else.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

import psycopg2

from bench_common import (add_connection_args, add_json_arg, connect, describe_zipper, q, result,
                          write_json, zipper_stats)

T0 = '2024-01-01 00:00:00+00'      # day 0; the initial load lies on the day before


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--keys', type=int, default=200_000, help='initial keys (default 200,000)')
    p.add_argument('--days', type=int, default=30, help='days of changes (default 30)')
    p.add_argument('--change-rate', type=float, default=0.9,
                   help='probability that a key changes on a given day (default 0.9)')
    p.add_argument('--reps', type=int, default=5, help='timed repetitions per query and table (default 5)')
    p.add_argument('--zipper-load', choices=('apply', 'insert'), default='apply',
                   help='build z_hist by daily apply_changes (default) or one INSERT of the history')
    p.add_argument('--reuse', action='store_true',
                   help='reuse z_hist/h_hist/p_hist from an earlier run with the same size parameters')
    p.add_argument('--keep', action='store_true', help='keep the tables (implied by --reuse)')
    p.add_argument('--explain', action='store_true', help='print EXPLAIN ANALYZE of every query once')
    p.add_argument('--no-rows', action='store_true', help='do not build z_rows (history in rows)')
    p.add_argument('--load-compare', action='store_true',
                   help='time an initial load of the finished history: zipper (columnar, rows) vs heap + indexes')
    p.add_argument('--chart', metavar='PNG', help='draw ratios and sizes into this PNG file')
    p.add_argument('--restart-cmd', metavar='CMD',
                   help='cold runs: shell command that restarts the server (e.g. "su postgres -c \'pg_ctl -D DATA -w restart\'"); '
                        'the page cache is dropped too, which needs root')
    add_connection_args(p)
    p.add_argument('--smoke', action='store_true',
                   help='CI size: 2,000 keys, 5 days, 1 repetition; exit 1 on any disagreement')
    add_json_arg(p)
    a = p.parse_args()
    if a.smoke:
        a.keys, a.days, a.reps = 2000, 5, 1
    if a.days < 4:
        p.error('--days must be at least 4')
    return a


def day(d, hours=0):
    """SQL literal of day d (0 = T0) plus hours."""
    return f"(timestamptz '{T0}' + interval '{d} days {hours} hours')"


# ---------------------------------------------------------------------------
# build
# ---------------------------------------------------------------------------

def params_key(a):
    return (f'keys={a.keys} days={a.days} change_rate={a.change_rate} zipper_load={a.zipper_load} '
            f'rows={not a.no_rows}' + ''.join(f' index={c}' for c in extra_indexes(a)))


def extra_indexes(a):
    """Column lists of the heap tables' indexes besides the three below
    (another script that builds these tables may ask for more)."""
    return getattr(a, 'extra_indexes', ())


def zipper_tables(a):
    return ('z_hist',) if a.no_rows else ('z_hist', 'z_rows')


def build(conn, a):
    cur = conn.cursor()
    cur.execute('CREATE EXTENSION IF NOT EXISTS zipper_lake')
    if a.reuse:
        cur.execute("SELECT to_regclass('bench_read_params') IS NOT NULL")
        if cur.fetchone()[0]:
            cur.execute('SELECT params FROM bench_read_params')
            r = cur.fetchone()
            if r and r[0] == params_key(a) and all(
                    q(cur, 'SELECT to_regclass(%s) IS NOT NULL', (t,))[0][0]
                    for t in ('h_hist', 'p_hist') + zipper_tables(a)):
                print(f'reusing {", ".join(zipper_tables(a))}, h_hist, p_hist ({params_key(a)})')
                return
    cur.execute('DROP TABLE IF EXISTS z_hist, z_rows, h_hist, p_hist, bench_read_params, rchanges')
    t_all = time.perf_counter()
    cur.execute("""
        CREATE TABLE z_hist (id bigint, name text, balance numeric, branch int,
                             valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
        USING zipper_lake""")
    cur.execute("SELECT zipper_lake.register('z_hist', key => ARRAY['id'])")
    if not a.no_rows:
        cur.execute('CREATE TABLE z_rows (LIKE z_hist) USING zipper_lake')
        cur.execute("SELECT zipper_lake.register('z_rows', key => ARRAY['id'], history_format => 'rows')")

    new_per_day = max(1, a.keys // 100)
    del_rate = 0.01
    # values depend on (key, day) only; balances carry the day so that two
    # consecutive versions of a key never have equal values
    init_select = f"""
        SELECT g::bigint, 'name_' || g, round((abs(hashint8(g)) % 1000000) / 100.0, 2),
               (abs(hashint8(g + 7)) % 100)::int,
               {day(-1)} + (abs(hashint8(g + 13)) % 86400000) * interval '1 millisecond',
               timestamptz 'infinity'
          FROM generate_series(1::bigint, {int(a.keys)}) g"""

    def day_changes(d):
        """SQL producing day d's changes (d >= 0)."""
        u = f'(abs(hashint8(g * 1000003 + {d})) % 1000000) / 1000000.0'
        return f"""
        SELECT g::bigint AS id,
               'name_' || g || CASE WHEN abs(hashint8(g + {d} * 7919)) % 10 = 0 THEN '_' || {d} ELSE '' END AS name,
               ({d} + 1) * 10000 + round((abs(hashint8(g * 31 + {d})) % 1000000) / 100.0, 2) AS balance,
               (abs(hashint8(g + 7 + CASE WHEN abs(hashint8(g - {d})) % 20 = 0 THEN {d} ELSE 0 END)) % 100)::int AS branch,
               {day(d)} + (abs(hashint8(g * 17 + {d})) % 86400000) * interval '1 millisecond' AS change_time,
               CASE WHEN g > {int(a.keys)} + {d} * {new_per_day} THEN 'I'
                    WHEN {u} < {del_rate} THEN 'D' ELSE 'U' END AS op
          FROM generate_series(1::bigint, {int(a.keys)} + ({d} + 1) * {new_per_day}) g
         WHERE g > {int(a.keys)} + {d} * {new_per_day} OR {u} < {del_rate + a.change_rate}"""

    t = time.perf_counter()
    if a.zipper_load == 'apply':
        cur.execute('INSERT INTO z_hist ' + init_select)
        z_build = time.perf_counter() - t
        if not a.no_rows:
            cur.execute('INSERT INTO z_rows SELECT * FROM z_hist')
        per_day = []
        per_day_rows = []
        per_change = []             # seconds per change: batches grow with the keys
        for d in range(a.days):
            cur.execute('DROP TABLE IF EXISTS rchanges')
            cur.execute('CREATE TABLE rchanges AS ' + day_changes(d))
            if not a.no_rows:
                t = time.perf_counter()
                cur.execute("SELECT * FROM zipper_lake.apply_changes('z_rows', 'rchanges', 'change_time', 'op')")
                per_day_rows.append(time.perf_counter() - t)
            t = time.perf_counter()
            cur.execute("SELECT * FROM zipper_lake.apply_changes('z_hist', 'rchanges', 'change_time', 'op')")
            r = cur.fetchone()
            per_day.append(time.perf_counter() - t)
            per_change.append(per_day[-1] / max(1, r[0]))
            if d % 10 == 0 or d == a.days - 1:
                print(f'  day {d}: apply {per_day[-1]:.2f}s {dict(zip([c[0] for c in cur.description], r))}'
                      + (f'; history in rows {per_day_rows[-1]:.2f}s' if per_day_rows else ''),
                      flush=True)
            # autovacuum visits a table written every day (untimed): it
            # compacts and moves sub-groups off the end, the next visit cuts it
            cur.execute('VACUUM z_hist')
        if per_day_rows:
            print(f'  apply, all days: columnar history {sum(per_day):.1f}s, rows {sum(per_day_rows):.1f}s '
                  f'(rows/columnar {sum(per_day_rows) / sum(per_day):.2f})')
        cur.execute('DROP TABLE rchanges')
        z_build += sum(per_day)
        k = 3
        print(f'  zipper apply per day: median of first {k} days {statistics.median(per_day[:k]):.2f}s, '
              f'of last {k} days {statistics.median(per_day[-k:]):.2f}s, growth '
              f'{statistics.median(per_day[-k:]) / statistics.median(per_day[:k]):.2f}x; per change '
              f'{statistics.median(per_change[:k]) * 1e6:.1f} us -> {statistics.median(per_change[-k:]) * 1e6:.1f} us, growth '
              f'{statistics.median(per_change[-k:]) / statistics.median(per_change[:k]):.2f}x (1.0 = flat)')
    else:
        z_build = None

    # the heap copies, in valid_from order
    t = time.perf_counter()
    cur.execute("""
        CREATE TABLE h_hist (id bigint NOT NULL, name text, balance numeric, branch int,
                             valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)""")
    if a.zipper_load == 'apply':
        cur.execute('INSERT INTO h_hist SELECT * FROM z_hist ORDER BY valid_from')
    else:
        # same history, computed in SQL: the events of every key in time order
        # (the initial load and every day's changes); an upsert's version runs
        # to the next event; deletes only end versions
        events = ' UNION ALL '.join(
            [f"SELECT id, name, balance, branch, change_time, 'U' AS op FROM ({init_select}) i(id, name, balance, branch, change_time, vt)"]
            + [f'SELECT * FROM ({day_changes(d)}) c{d}' for d in range(a.days)])
        cur.execute(f"""
            INSERT INTO h_hist
            SELECT id, name, balance, branch, change_time, vt FROM (
                SELECT e.*, coalesce(lead(change_time) OVER (PARTITION BY id ORDER BY change_time),
                                     'infinity') AS vt
                  FROM ({events}) e) v
             WHERE op <> 'D'
             ORDER BY change_time""")
        t = time.perf_counter()
        cur.execute('INSERT INTO z_hist SELECT * FROM h_hist ORDER BY valid_from')
        z_build = time.perf_counter() - t
        if not a.no_rows:
            cur.execute('INSERT INTO z_rows SELECT * FROM h_hist ORDER BY valid_from')
        t = time.perf_counter()
    cur.execute('ALTER TABLE h_hist ADD PRIMARY KEY (id, valid_from)')
    cur.execute('CREATE INDEX ON h_hist (valid_to)')
    cur.execute('CREATE INDEX ON h_hist (valid_from)')
    for cols in extra_indexes(a):
        cur.execute(f'CREATE INDEX ON h_hist {cols}')
    h_build = time.perf_counter() - t

    t = time.perf_counter()
    cur.execute("""
        CREATE TABLE p_hist (id bigint NOT NULL, name text, balance numeric, branch int,
                             valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
        PARTITION BY RANGE (valid_to)""")
    for d in range(-1, a.days + 1):
        cur.execute(f"""CREATE TABLE p_hist_d{d + 1:04d} PARTITION OF p_hist
                        FOR VALUES FROM ({day(d)}) TO ({day(d + 1)})""")
    cur.execute("CREATE TABLE p_hist_open PARTITION OF p_hist FOR VALUES FROM ('infinity') TO (MAXVALUE)")
    cur.execute('CREATE TABLE p_hist_default PARTITION OF p_hist DEFAULT')
    cur.execute('INSERT INTO p_hist SELECT * FROM h_hist ORDER BY valid_from')
    cur.execute('CREATE INDEX ON p_hist (id, valid_from)')
    cur.execute('CREATE INDEX ON p_hist (valid_to)')
    cur.execute('CREATE INDEX ON p_hist (valid_from)')
    for cols in extra_indexes(a):
        cur.execute(f'CREATE INDEX ON p_hist {cols}')
    p_build = time.perf_counter() - t

    t = time.perf_counter()
    cur.execute('VACUUM ANALYZE h_hist')
    cur.execute('VACUUM ANALYZE p_hist')
    for z in zipper_tables(a):
        cur.execute(f'VACUUM ANALYZE {z}')    # compacts masked rows, as heap's removes dead ones
        # and moves sub-groups off the end of a mostly free file; the next
        # VACUUM (autovacuum's next visit) cuts the end they left
        cur.execute(f'VACUUM {z}')
    try:
        cur.execute('CHECKPOINT')       # start the timed part with clean buffers; needs pg_checkpoint
    except psycopg2.Error:
        pass
    print(f'built in {time.perf_counter() - t_all:.0f}s: z_hist {z_build:.1f}s ({a.zipper_load}), '
          f'h_hist {h_build:.1f}s (copy + indexes), p_hist {p_build:.1f}s, vacuum/analyze {time.perf_counter() - t:.1f}s')
    cur.execute('CREATE TABLE bench_read_params (params text)')
    cur.execute('INSERT INTO bench_read_params VALUES (%s)', (params_key(a),))


def load_compare(cur):
    """Seconds of an initial load of the finished history (h_hist): into a
    heap table plus its three indexes, and into new zipper tables."""
    loads = {}
    cur.execute('DROP TABLE IF EXISTS l_heap, l_columnar, l_rows')
    t = time.perf_counter()
    cur.execute('CREATE TABLE l_heap (LIKE h_hist)')
    cur.execute('INSERT INTO l_heap SELECT * FROM h_hist ORDER BY valid_from')
    cur.execute('ALTER TABLE l_heap ADD PRIMARY KEY (id, valid_from)')
    cur.execute('CREATE INDEX ON l_heap (valid_to)')
    cur.execute('CREATE INDEX ON l_heap (valid_from)')
    loads['heap + indexes'] = time.perf_counter() - t
    for fmt in ('columnar', 'rows'):
        t = time.perf_counter()
        cur.execute(f'CREATE TABLE l_{fmt} (LIKE h_hist) USING zipper_lake')
        cur.execute(f"SELECT zipper_lake.register('l_{fmt}', key => ARRAY['id'], history_format => '{fmt}')")
        cur.execute(f'INSERT INTO l_{fmt} SELECT * FROM h_hist ORDER BY valid_from')
        loads[f'zipper {fmt}'] = time.perf_counter() - t
    cur.execute('DROP TABLE l_heap, l_columnar, l_rows')
    h = loads['heap + indexes']
    print('initial load of the finished history: ' + ', '.join(f'{k} {v:.1f}s' for k, v in loads.items())
          + f'; zipper columnar / heap {loads["zipper columnar"] / h:.2f}x, rows / heap {loads["zipper rows"] / h:.2f}x'
          + ' (<= 1.3 is the target)')
    return loads


def check_tables(conn, a):
    cur = conn.cursor()
    problems = []
    cols = 'id, name, balance, branch, valid_from, valid_to'
    tables = ('h_hist', 'p_hist') + zipper_tables(a)
    n = {t: q(cur, f'SELECT count(*) FROM {t}')[0][0] for t in tables}
    if len(set(n.values())) != 1:
        problems.append(f'row counts differ: {n}')
    for z in zipper_tables(a):
        for x, y in ((z, 'h_hist'), ('h_hist', z)):
            d = q(cur, f'SELECT count(*) FROM (SELECT {cols} FROM {x} EXCEPT ALL SELECT {cols} FROM {y}) e')[0][0]
            if d:
                problems.append(f'{d} rows of {x} are missing from {y}')
        for r in q(cur, f"SELECT check_name, detail FROM zipper_lake.verify('{z}') LIMIT 5"):
            problems.append(f'verify {z}: {r[0]}: {r[1]}')
    return n['h_hist'], problems


# ---------------------------------------------------------------------------
# queries
# ---------------------------------------------------------------------------

def queries(conn, a):
    cur = conn.cursor()
    recent = day(a.days - 2, 12)
    old = day(2, 12)
    ca, cb = day(a.days // 2), day(a.days // 2 + 1)
    # a known version in the middle of some key's history
    k, t = q(cur, f"""SELECT id, valid_from FROM h_hist WHERE id = {a.keys // 2 + 1}
                      ORDER BY valid_from
                      OFFSET (SELECT count(*) / 2 FROM h_hist WHERE id = {a.keys // 2 + 1}) LIMIT 1""")[0]
    t = t.isoformat()
    agg = 'SELECT count(*), sum(balance) FROM '
    asof = 'WHERE valid_from <= {x} AND valid_to > {x}'
    chg = f'WHERE (valid_from >= {ca} AND valid_from < {cb}) OR (valid_to >= {ca} AND valid_to < {cb})'
    point = f"WHERE id = {k} AND valid_from = '{t}'"

    def plain(where, select=agg):
        return {tb: f'{select}{tb} {where}' for tb in ('h_hist', 'p_hist', 'z_hist', 'z_rows')}

    fams = []
    fams.append(('current', plain("WHERE valid_to = 'infinity'"),
                 [('current()', f'{agg}zipper_lake.current(NULL::z_hist)')]))
    fams.append(('as-of yesterday noon', plain(asof.format(x=recent)),
                 [('as_of()', f'{agg}zipper_lake.as_of(NULL::z_hist, {recent})')]))
    fams.append(('as-of day 2 noon', plain(asof.format(x=old)),
                 [('as_of()', f'{agg}zipper_lake.as_of(NULL::z_hist, {old})')]))
    fams.append((f'changes of day {a.days // 2}', plain(chg),
                 [('changes()', f'{agg}zipper_lake.changes(NULL::z_hist, {ca}, {cb})')]))
    fams.append(('point lookup', plain(point), []))
    # nothing qualifies: the fixed cost of a query (planning, metadata)
    fams.append(('empty (prunes everything)', plain(f"WHERE valid_from = {day(-100)}"), []))
    # every column of every row: the whole row as text ("SELECT *")
    fams.append(('every column, all rows', plain('t', 'SELECT count(*), sum(hashtext(t::text)) FROM '), []))
    return fams


def build_floors(cur, fams):
    """family -> aggregate over a heap table of just its answer rows (the
    families that read rows in bulk: those with a zipper_lake helper)."""
    floors = {}
    for i, (fam, plain, extra) in enumerate(fams):
        if not extra:
            continue
        where = plain['h_hist'].split(' h_hist ', 1)[1]
        cur.execute(f'DROP TABLE IF EXISTS floor_{i}')
        cur.execute(f'CREATE TABLE floor_{i} AS SELECT * FROM h_hist {where}')
        cur.execute(f'VACUUM ANALYZE floor_{i}')
        floors[fam] = f'SELECT count(*), sum(balance) FROM floor_{i}'
    return floors


def run_one(cur, sql):
    """(seconds, result) or (None, error text)."""
    try:
        t = time.perf_counter()
        cur.execute(sql)
        r = cur.fetchall()
        return time.perf_counter() - t, r
    except psycopg2.Error as e:
        return None, (e.pgerror or str(e)).strip().split('\n')[0]


def run_cold(a, sql):
    """run_one with the table's pages on disk only: restart the server, warm
    the catalogs by planning (EXPLAIN) the query, drop the page cache."""
    subprocess.run(a.restart_cmd, shell=True, check=True, stdout=subprocess.DEVNULL)
    conn = connect(a, autocommit=True)
    cur = conn.cursor()
    try:
        cur.execute('EXPLAIN ' + sql)
    except psycopg2.Error:
        pass                            # run_one reports the error
    os.sync()
    with open('/proc/sys/vm/drop_caches', 'w') as f:
        f.write('3\n')
    r = run_one(cur, sql)
    conn.close()
    return r


def fmt_ms(s):
    return 'n/a' if s is None else f'{s * 1000:.1f}'


def fmt_ratio(x, y):
    return 'n/a' if x is None or y is None or y == 0 else f'{x / y:.2f}'


def draw_chart(a, mode, chart, sizes):
    """Two panels: query speed-ups of the columnar zipper table over the
    indexed heap and over the row format; sizes against the heap."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5), gridspec_kw={'width_ratios': [3, 1.4]})
    names = [c[0] for c in chart]
    ys = range(len(chart))
    left.barh([y + 0.2 for y in ys], [c[1] for c in chart], height=0.4, label='indexed heap / zipper')
    left.barh([y - 0.2 for y in ys], [c[2] or 0 for c in chart], height=0.4, label='row format / columnar')
    left.axvline(1, color='black', linewidth=0.8)
    left.set_yticks(list(ys))
    left.set_yticklabels(names)
    left.invert_yaxis()
    left.set_xlabel('speed-up (> 1: columnar zipper_lake faster)')
    left.set_title(f'queries, {mode.split(" ")[0]}: {a.keys:,} keys x {a.days} days, {a.change_rate:.0%}/day')
    left.legend(loc='lower right')
    labels = list(sizes)
    right.bar(labels, [sizes[k] / sizes['heap'] for k in labels],
              color=['tab:gray', 'tab:gray'] + ['tab:blue', 'tab:orange'][:len(labels) - 2])
    right.set_ylabel('bytes / indexed heap table')
    right.set_title('size (with indexes, metadata, record)')
    right.tick_params(axis='x', labelrotation=30)
    fig.tight_layout()
    fig.savefig(a.chart, dpi=110)
    print(f'chart: {a.chart}')


def main():
    a = parse_args()
    conn = connect(a, autocommit=True)
    cur = conn.cursor()
    server = q(cur, "SELECT current_setting('server_version'), current_setting('shared_buffers'),"
                    " current_setting('work_mem'), current_setting('random_page_cost'),"
                    " current_setting('max_parallel_workers_per_gather'), current_setting('jit')")[0]
    print(f'bench_read: keys={a.keys} days={a.days} change_rate={a.change_rate} reps={a.reps} '
          f'zipper_load={a.zipper_load}')
    print(f'server {server[0]}, shared_buffers={server[1]}, work_mem={server[2]}, '
          f'random_page_cost={server[3]}, max_parallel_workers_per_gather={server[4]}, jit={server[5]}')
    build(conn, a)
    if a.load_compare or a.zipper_load == 'insert':
        load_compare(cur)
    nrows, problems = check_tables(conn, a)
    if problems:
        print('MISMATCH after build:\n  ' + '\n  '.join(problems))
    else:
        print(f'{", ".join(zipper_tables(a))}, h_hist, p_hist hold the same {nrows} versions; verify clean')
    sz = {t: q(cur, f"""SELECT CASE WHEN relkind = 'p'
                                   THEN (SELECT sum(pg_total_relation_size(relid)) FROM pg_partition_tree(oid))
                                   ELSE pg_total_relation_size(oid) END
                          FROM pg_class WHERE oid = '{t}'::regclass""")[0][0]
          for t in ('z_hist', 'h_hist', 'p_hist')}
    print(f'sizes (pg_total_relation_size, all partitions and indexes): h_hist {sz["h_hist"] / 2**20:.1f} MB, '
          f'p_hist {sz["p_hist"] / 2**20:.1f} MB')
    zs = {z: zipper_stats(conn, z) for z in zipper_tables(a)}
    for z in zipper_tables(a):
        print(f'  {z} ' + describe_zipper(zs[z]))
        print(f'  {z} size: {zs[z]["all_bytes"] / sz["h_hist"]:.3f}x the heap table (heap/zipper '
              f'{sz["h_hist"] / zs[z]["all_bytes"]:.2f}), partitioned/zipper {sz["p_hist"] / zs[z]["all_bytes"]:.2f}')
    sizes = {'heap': sz['h_hist'], 'partitioned': sz['p_hist']}
    sizes.update({('zipper columnar' if z == 'z_hist' else 'zipper rows'): zs[z]['all_bytes'] for z in zipper_tables(a)})

    fams = queries(conn, a)
    # forms: (family, label, table, sql)
    results = {}   # (family, label) -> list of seconds / error
    answers = {}
    forms = []
    floors = build_floors(cur, fams)
    for fam, plain, extra in fams:
        forms.append((fam, 'heap', plain['h_hist']))
        forms.append((fam, 'partitioned', plain['p_hist']))
        forms.append((fam, 'zipper SQL', plain['z_hist']))
        if not a.no_rows:
            forms.append((fam, 'rows', plain['z_rows']))
        for label, sql in extra:
            forms.append((fam, 'zipper ' + label, sql))
        if fam in floors:
            forms.append((fam, 'floor', floors[fam]))

    if a.explain:
        for fam, label, sql in forms:
            print(f'\n--- EXPLAIN ANALYZE {fam} / {label}\n{sql}')
            try:
                cur.execute('EXPLAIN (ANALYZE, BUFFERS) ' + sql)
                print('\n'.join(r[0] for r in cur.fetchall()))
            except psycopg2.Error as e:
                print('n/a: ' + (e.pgerror or str(e)).strip().split('\n')[0])

    for fam, _, _ in fams:
        fforms = [f for f in forms if f[0] == fam]
        errors = {}
        for rep in range(a.reps + 1):              # rep 0: warm-up, not timed
            order = fforms[rep % len(fforms):] + fforms[:rep % len(fforms)]
            for f in order:
                if f[1] in errors:
                    continue
                s, r = run_cold(a, f[2]) if a.restart_cmd else run_one(cur, f[2])
                if s is None:
                    errors[f[1]] = r
                    continue
                answers.setdefault((fam, f[1]), r)
                if rep > 0:
                    results.setdefault((fam, f[1]), []).append(s)
        for label, e in errors.items():
            results[(fam, label)] = e

    # agreement
    for fam, _, _ in fams:
        got = {lab: ans for (f, lab), ans in answers.items() if f == fam}
        if len({repr(v) for v in got.values()}) > 1:
            problems.append(f'{fam}: results differ: ' + '; '.join(f'{k}={v}' for k, v in got.items()))

    mode = 'COLD (restart + page cache dropped before each run)' if a.restart_cmd else 'warm'
    print(f'\n=== {mode}: medians of {a.reps} runs in ms (noisy machine: trust ratios, not ms); ratio > 1: zipper_lake faster')
    print(f'{"query":<26} {"zipper form":<12} {"heap":>9} {"partitioned":>11} {"rows":>9} {"zipper":>9} {"heap/z":>7}'
          f' {"part/z":>7} {"rows/z":>7} {"floor":>7} {"floor/z":>7} {"heap/floor":>10}  result')

    def median_of(fam, label):
        r = results.get((fam, label))
        return statistics.median(r) if isinstance(r, list) else None

    chart = []
    cold = ' (cold)' if a.restart_cmd else ''
    found = [result('read_size', 'bytes of the history (zipper: file, TOAST, metadata, record; heap: indexes)',
                    zs['z_hist']['all_bytes'], sz['h_hist'], 'bytes')]
    json_keys = {'current': 'read_current', 'as-of yesterday noon': 'read_asof_recent',
                 'as-of day 2 noon': 'read_asof_old', f'changes of day {a.days // 2}': 'read_changes',
                 'point lookup': 'read_point'}
    json_what = {'read_current': 'current versions', 'read_asof_recent': 'as of yesterday noon',
                 'read_asof_old': 'as of day 2 noon', 'read_changes': "one day's changes",
                 'read_point': 'one key and its valid_from'}
    for fam, _, extra in fams:
        hm, pm, rm, fm = (median_of(fam, l) for l in ('heap', 'partitioned', 'rows', 'floor'))
        for label in ['zipper SQL'] + ['zipper ' + l for l, _ in extra]:
            zm = median_of(fam, label)
            ans = answers.get((fam, 'heap'), [('?',)])[0]
            note = '' if zm is not None else f'  ({results.get((fam, label))})'
            print(f'{fam:<26} {label[7:]:<12} {fmt_ms(hm):>9} {fmt_ms(pm):>11} {fmt_ms(rm):>9} {fmt_ms(zm):>9} '
                  f'{fmt_ratio(hm, zm):>7} {fmt_ratio(pm, zm):>7} {fmt_ratio(rm, zm):>7} {fmt_ms(fm):>7} '
                  f'{fmt_ratio(fm, zm):>7} {fmt_ratio(hm, fm):>10}  {ans}{note}')
            if label == 'zipper SQL' and hm and zm:
                chart.append((fam, hm / zm, rm / zm if rm else None))
                if fam in json_keys:
                    k = json_keys[fam]
                    found.append(result(k + ('_cold' if cold else ''), json_what[k] + cold, zm, hm, 's'))
    if a.chart:
        draw_chart(a, mode, chart, sizes)
    write_json(a, 'read', {'keys': a.keys, 'days': a.days, 'change_rate': a.change_rate, 'versions': nrows,
                           'reps': a.reps}, found)

    if a.restart_cmd:                   # the first connection did not survive the restarts
        conn = connect(a, autocommit=True)
        cur = conn.cursor()
    cur.execute('DROP TABLE IF EXISTS ' + ', '.join(f'floor_{i}' for i in range(len(fams))))
    if not (a.keep or a.reuse):
        cur.execute('DROP TABLE IF EXISTS z_hist, z_rows, h_hist, p_hist, bench_read_params')
    conn.close()
    if problems:
        print('\nFAILED:\n  ' + '\n  '.join(problems))
        return 1
    print('\nok: all tables and forms agree')
    return 0


if __name__ == '__main__':
    sys.exit(main())
