#!/usr/bin/env python3
"""
test/bench/bench_users.py -- reads as users run them: plain SQL on a deep
history with the planner's settings untouched, zipper_lake against an indexed
heap SCD2 table and a heap table partitioned by valid_to, warm and in a new
connection, under three planner modes (README "Performance").

The tables are bench_read.py's (built by its code, --no-rows): --keys keys
(150,000) changing for --days days (30), each alive key with probability
--change-rate (0.2) a day, 1% of keys deleted and 1% new a day:

  z_hist  USING zipper_lake, key id, built by one apply_changes() a day
  h_hist  heap, the indexes a user builds for SCD2: PRIMARY KEY (id,
          valid_from), btree (valid_to), btree (valid_from), btree (id,
          valid_to)
  p_hist  heap PARTITION BY RANGE (valid_to), a partition a day and one for
          the open versions (the peer a PostgreSQL expert builds), the same
          four indexes (non-unique)

all VACUUM ANALYZE'd and checked equal first.  Measures (plain SQL on every
table, the way users write it; every aggregate query in three shapes:
count(*); count(*), sum(balance), count(DISTINCT branch); branch, count(*),
sum(balance) GROUP BY branch):

  as-of, an old day     WHERE valid_from <= X AND valid_to > X, X = day 2 noon
  as-of, a recent day   the same, X = noon of the day before the last
  one day's changes     a day's window on valid_from, and one on valid_to
  current rows          WHERE valid_to = 'infinity'
  history of a key      SELECT * WHERE id = k ORDER BY valid_from, --lookups
                        random keys (ms: per lookup)
  point lookup          SELECT * WHERE id = k AND valid_from <= t AND
                        valid_to > t, --lookups random keys and times
  end-of-day snapshot   apply_snapshot() of an image of the open versions
                        (2% changed, 0.1% gone, 0.5% new) against the heap's
                        UPDATE + INSERT job (bench_snapshot.py's), each side
                        in a transaction rolled back and the table vacuumed,
                        --snapshot-reps times (planner defaults only: writes
                        are never parallel)
  bytes                 zipper: the table (file, TOAST) and every row the
                        catalog of schema zipper_lake holds for it; heap:
                        the table's own bytes (pg_table_size, no indexes)

Planner modes: defaults (nothing SET), parallel off
(max_parallel_workers_per_gather = 0), parallel on (parallel_setup_cost,
parallel_tuple_cost, min_parallel_table_scan_size and
min_parallel_index_scan_size = 0).  In each mode every query runs warm
(one connection, an untimed run, then the median of --reps, tables in
rotated order) and in a new connection (connect, SET the mode, time the one
query; median of --connections connections; key measures: one lookup).
Client wall time.  A measure's ms are the sum over its queries of their
medians; its ratio heap/zipper (partitioned/zipper) is shown as the range
over its queries, and a target is met when the lowest one meets it.

Targets (the issue "Fast as users run it"): warm, heap/zipper as-of old >=
4, as-of recent >= 3, changes >= 3, current >= 2; each >= 1 in a new
connection; key history and point lookup >= 0.5; snapshot >= 2; zipper
bytes <= 0.35 of the heap table's; every warm read >= 1.5x the partitioned
table.  (Apply keeps >= 4.5x the heap job at 1M keys: bench_apply.py.)

Prints a markdown table per mode, and one per query; --json FILE writes
every result (for report.py).  Exits with status 1 when tables or answers
disagree (missed targets are reported, not failed).
"""
import argparse
import os
import random
import statistics
import sys
import time

import bench_read
import bench_snapshot
from bench_common import (add_connection_args, add_json_arg, catalog_bytes, connect, q, result, rows_differ,
                          write_json)

TABLES = ('h_hist', 'p_hist', 'z_hist')
SIDE = {'h_hist': 'heap', 'p_hist': 'partitioned', 'z_hist': 'zipper'}

MODES = {
    'defaults': ('planner defaults (nothing SET)', []),
    'parallel_off': ('parallel plans forced off', ['SET max_parallel_workers_per_gather = 0']),
    'parallel_on': ('parallel plans forced on',
                    ['SET parallel_setup_cost = 0', 'SET parallel_tuple_cost = 0',
                     'SET min_parallel_table_scan_size = 0', 'SET min_parallel_index_scan_size = 0']),
}

AGGREGATES = (
    ('count', 'SELECT count(*) FROM {t} WHERE {w}'),
    ('count, sum, distinct', 'SELECT count(*), sum(balance), count(DISTINCT branch) FROM {t} WHERE {w}'),
    ('group by branch', 'SELECT branch, count(*), sum(balance) FROM {t} WHERE {w} GROUP BY branch ORDER BY branch'),
)

# measure -> (label, heap/zipper warm, heap/zipper new connection, partitioned/zipper warm)
TARGETS = {
    'asof_old': ('as-of, an old day', 4, 1, 1.5),
    'asof_recent': ('as-of, a recent day', 3, 1, 1.5),
    'changes': ("one day's changes", 3, 1, 1.5),
    'current': ('current rows', 2, 1, 1.5),
    'history': ('history of a key', 0.5, None, 1.5),
    'point': ('point lookup (key + time)', 0.5, None, 1.5),
}
SNAPSHOT_TARGET = 2
SIZE_TARGET = 0.35              # zipper bytes / heap table bytes at most


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--keys', type=int, default=150_000, help='initial keys (default 150,000)')
    p.add_argument('--days', type=int, default=30, help='days of changes (default 30)')
    p.add_argument('--change-rate', type=float, default=0.2,
                   help='probability that a key changes on a given day (default 0.2)')
    p.add_argument('--reps', type=int, default=5, help='warm: timed runs per query and table (default 5)')
    p.add_argument('--connections', type=int, default=5,
                   help='new connection: connections per query and table (default 5)')
    p.add_argument('--lookups', type=int, default=100, help='random keys per key measure and run (default 100)')
    p.add_argument('--snapshot-reps', type=int, default=3, help='runs of each end-of-day job (default 3)')
    p.add_argument('--modes', default=','.join(MODES), help=f'planner modes (default {",".join(MODES)})')
    p.add_argument('--seed', type=int, default=34, help='random keys and times (default 34)')
    p.add_argument('--reuse', action='store_true',
                   help='reuse the tables of an earlier run of this script with the same size options')
    p.add_argument('--keep', action='store_true', help='keep the tables (implied by --reuse)')
    p.add_argument('--explain', action='store_true',
                   help='print EXPLAIN (ANALYZE, BUFFERS) of every aggregate query once per mode and table')
    add_connection_args(p)
    p.add_argument('--smoke', action='store_true', help='CI size: 2,000 keys, 5 days, one run of everything')
    add_json_arg(p)
    a = p.parse_args()
    if a.smoke:
        a.keys, a.days, a.reps, a.connections, a.lookups, a.snapshot_reps = 2000, 5, 1, 1, 10, 1
    if a.days < 4:
        p.error('--days must be at least 4')
    a.modes = a.modes.split(',')
    unknown = [m for m in a.modes if m not in MODES]
    if unknown:
        p.error(f'unknown mode(s) {", ".join(unknown)}: choose from {", ".join(MODES)}')
    # bench_read.build's options: daily apply, no table in rows, the fourth index
    a.zipper_load, a.no_rows, a.extra_indexes = 'apply', True, ('(id, valid_to)',)
    # the image of the end-of-day job (bench_snapshot.build_image)
    a.changed, a.gone, a.new = 0.02, 0.001, 0.005
    return a


# ---------------------------------------------------------------------------
# queries
# ---------------------------------------------------------------------------

def bulk_queries(a):
    """measure -> (name, SQL template ({t}: the table)) of its aggregate queries."""
    day = bench_read.day
    asof = 'valid_from <= {x} AND valid_to > {x}'
    ca, cb = day(a.days // 2), day(a.days // 2 + 1)
    wheres = {
        'asof_old': [('as-of old', asof.format(x=day(2, 12)))],
        'asof_recent': [('as-of recent', asof.format(x=day(a.days - 2, 12)))],
        'changes': [('began that day', f'valid_from >= {ca} AND valid_from < {cb}'),
                    ('ended that day', f'valid_to >= {ca} AND valid_to < {cb}')],
        'current': [('current', "valid_to = 'infinity'")],
    }
    return {m: [(f'{wn}: {an}', agg.format(t='{t}', w=w)) for wn, w in ws for an, agg in AGGREGATES]
            for m, ws in wheres.items()}


def key_queries(a, rng, n):
    """measure -> n query templates of random keys (point lookups: and times)."""
    top = a.keys + (a.days + 1) * max(1, a.keys // 100)        # bench_read's new keys
    span = (a.days + 1) * 86400
    out = {'history': [], 'point': []}
    for _ in range(n):
        k = rng.randint(1, top)
        ts = f"(timestamptz '{bench_read.T0}' - interval '1 day' + interval '{rng.randint(0, span - 1)} seconds')"
        out['history'].append(f'SELECT * FROM {{t}} WHERE id = {k} ORDER BY valid_from')
        out['point'].append(f'SELECT * FROM {{t}} WHERE id = {k} AND valid_from <= {ts} AND valid_to > {ts}')
    return out


# ---------------------------------------------------------------------------
# timing
# ---------------------------------------------------------------------------

class Disagreement(Exception):
    pass


def session(a, mode):
    """A new connection with the planner mode SET."""
    conn = connect(a, autocommit=True)
    cur = conn.cursor()
    for s in MODES[mode][1]:
        cur.execute(s)
    return conn, cur


def timed(cur, sql):
    """(seconds, rows) of one query, client wall time."""
    t = time.perf_counter()
    cur.execute(sql)
    rows = cur.fetchall()
    return time.perf_counter() - t, rows


def agree(answers, what):
    """answers: table -> what it returned; all must be equal."""
    if len({repr(r) for r in answers.values()}) > 1:
        raise Disagreement(f'{what}: ' + '; '.join(f'{SIDE.get(t, t)} {repr(r)[:200]}' for t, r in answers.items()))


def rotated(i, tables=TABLES):
    return tables[i % len(tables):] + tables[:i % len(tables)]


def warm_runs(cur, what, batches, tables=TABLES):
    """batches: the queries of each run, run 0 an untimed warm-up; every
    table runs them one after the other in the same connection.  Table ->
    median over the timed runs of the seconds a query took (on average
    over the run's queries)."""
    runs = {t: [] for t in tables}
    for rep, batch in enumerate(batches):
        ans = {}
        for t in rotated(rep, tables):
            total, ans[t] = 0.0, []
            for tpl in batch:
                s, rows = timed(cur, tpl.format(t=t))
                total += s
                ans[t].append(rows)
            if rep:
                runs[t].append(total / len(batch))
        agree(ans, what)
    return {t: statistics.median(runs[t]) for t in tables}


def new_connection_runs(a, mode, what, queries, tables=TABLES):
    """Every query on every table in a new connection of its own (the query
    alone timed).  Table -> median seconds."""
    runs = {t: [] for t in tables}
    for i, tpl in enumerate(queries):
        ans = {}
        for t in rotated(i, tables):
            conn, cur = session(a, mode)
            s, ans[t] = timed(cur, tpl.format(t=t))
            conn.close()
            runs[t].append(s)
        agree(ans, what)
    return {t: statistics.median(runs[t]) for t in tables}


def summary(per_query):
    """A measure from its queries' medians: per_query is (name, table ->
    seconds) of each."""
    def span(t):
        r = [d[t] / d['z_hist'] for _, d in per_query]
        return min(r), max(r)
    return {'seconds': {t: sum(d[t] for _, d in per_query) for t in TABLES},
            'heap': span('h_hist'), 'partitioned': span('p_hist'), 'queries': per_query}


def measure_mode(a, mode, bulk, rng):
    """(measure, 'warm' | 'new') -> summary, in one planner mode."""
    out = {}
    conn, cur = session(a, mode)
    for m, queries in bulk.items():
        out[(m, 'warm')] = summary([(n, warm_runs(cur, f'{mode}, warm: {tpl}', [[tpl]] * (a.reps + 1)))
                                    for n, tpl in queries])
    runs = [key_queries(a, rng, a.lookups) for _ in range(a.reps + 1)]
    for m in ('history', 'point'):
        out[(m, 'warm')] = summary([(TARGETS[m][0], warm_runs(cur, f'{mode}, warm: {m}', [r[m] for r in runs]))])
    conn.close()
    for m, queries in bulk.items():
        out[(m, 'new')] = summary([(n, new_connection_runs(a, mode, f'{mode}, new connection: {tpl}',
                                                           [tpl] * a.connections)) for n, tpl in queries])
    one = key_queries(a, rng, a.connections)
    for m in ('history', 'point'):
        out[(m, 'new')] = summary([(TARGETS[m][0],
                                    new_connection_runs(a, mode, f'{mode}, new connection: {m}', one[m]))])
    return out


def explain(a, mode, bulk):
    conn, cur = session(a, mode)
    for m, queries in bulk.items():
        for _, tpl in queries:
            for t in TABLES:
                sql = tpl.format(t=t)
                print(f'\n--- EXPLAIN ANALYZE, {MODES[mode][0]}: {sql}')
                print('\n'.join(r[0] for r in q(cur, 'EXPLAIN (ANALYZE, BUFFERS) ' + sql)))
    conn.close()


def snapshot_job(a, conn):
    """The end-of-day job on each table: table -> median seconds.  Each run
    is rolled back and its table vacuumed (untimed), so runs are alike."""
    cur = conn.cursor()
    at = bench_read.day(a.days, 12)
    jobs = {'h_hist': bench_snapshot.HEAP_JOB.format(t=at, h='h_hist'),
            'p_hist': bench_snapshot.HEAP_JOB.format(t=at, h='p_hist'),
            'z_hist': f"SELECT * FROM zipper_lake.apply_snapshot('z_hist', 'snap_image', {at})"}
    conn.autocommit = False
    bench_snapshot.build_image(cur, a, 'h_hist')
    conn.commit()
    for t in TABLES:                    # all three in one transaction, compared, rolled back
        cur.execute(jobs[t])
    diff = rows_differ(cur, 'z_hist', 'h_hist') + rows_differ(cur, 'p_hist', 'h_hist')
    conn.rollback()
    if diff:
        raise Disagreement(f'end-of-day job: the tables differ in {diff} rows afterwards')
    runs = {t: [] for t in TABLES}
    for rep in range(a.snapshot_reps + 1):      # rep 0: warm-up
        for t in rotated(rep):
            conn.autocommit = True
            cur.execute(f'VACUUM {t}')
            conn.autocommit = False
            s = time.perf_counter()
            cur.execute(jobs[t])
            if rep:
                runs[t].append(time.perf_counter() - s)
            conn.rollback()
    conn.autocommit = True
    cur.execute('VACUUM h_hist, p_hist, z_hist')
    cur.execute('DROP TABLE snap_image')
    return {t: statistics.median(runs[t]) for t in TABLES}


# ---------------------------------------------------------------------------
# sizes
# ---------------------------------------------------------------------------

def sizes(cur):
    """Bytes: the heap tables' own (no indexes) and with indexes; the
    zipper table and its catalog rows, split."""
    own, total = {}, {}
    for t in ('h_hist', 'p_hist'):
        own[t], total[t] = q(cur, f"""SELECT sum(pg_table_size(r))::bigint, sum(pg_total_relation_size(r))::bigint
                                        FROM (SELECT relid FROM pg_partition_tree('{t}')
                                              UNION SELECT '{t}'::regclass) p(r)""")[0]
    cat = catalog_bytes(cur, 'z_hist')
    z = {'data': q(cur, "SELECT pg_total_relation_size('z_hist')")[0][0],
         'catalog': sum(v or 0 for v in cat.values()),
         'key_directories': q(cur, """SELECT coalesce(sum(pg_column_size(key_directory)), 0) FROM zipper_lake.subgroup
                                       WHERE storage_id = zipper_lake._storage_id('z_hist')""")[0][0],
         'masks': cat.get('mask', 0),
         'by_catalog_table': cat}
    z['total'] = z['data'] + z['catalog']
    return {'heap_own': own['h_hist'], 'heap_total': total['h_hist'],
            'partitioned_own': own['p_hist'], 'partitioned_total': total['p_hist'], 'zipper': z}


# ---------------------------------------------------------------------------
# the tables
# ---------------------------------------------------------------------------

def fmt_s(s):
    return f'{s * 1000:.2f}' if s < 0.01 else f'{s * 1000:.1f}'


def fmt_mb(b):
    return f'{b / 2**20:.1f} MB'


def fmt_span(lo_hi):
    lo, hi = lo_hi
    return f'{lo:.2f}' if hi - lo < 0.005 else f'{lo:.2f}–{hi:.2f}'


def verdict(checks):
    """checks: (name, value, wanted minimum); 'yes' or what falls short."""
    short = [f'{n} {v:.2f}x < {w:g}x' for n, v, w in checks if w is not None and v < w]
    return 'yes' if not short else 'NO: ' + ', '.join(short)


def read_rows(a, mode, res):
    """Table rows and JSON results of one mode's reads."""
    lines, found = [], []
    for m, (label, warm_t, new_t, part_t) in TARGETS.items():
        for conn_kind in ('warm', 'new'):
            r = res[(m, conn_kind)]
            heap_t, p_t = (warm_t, part_t) if conn_kind == 'warm' else (new_t, None)
            target = ', '.join(f'{n} ≥ {w:g}x' for n, w in (('heap', heap_t), ('partitioned', p_t)) if w)
            met = verdict([('heap', r['heap'][0], heap_t), ('partitioned', r['partitioned'][0], p_t)]) \
                if target else '–'
            sec = r['seconds']
            name = f"{label} ({'warm' if conn_kind == 'warm' else 'new connection'})"
            lines.append(f"| {name} | {fmt_s(sec['h_hist'])} | {fmt_s(sec['p_hist'])} | {fmt_s(sec['z_hist'])} "
                         f"| {fmt_span(r['heap'])} | {fmt_span(r['partitioned'])} | {target or '–'} | {met} |")
            key = f'users_{m}' + ('' if mode == 'defaults' else f'_{mode}') + ('_new' if conn_kind == 'new' else '')
            found.append(result(key, f'{name}, {MODES[mode][0]}', sec['z_hist'], sec['h_hist'], 's',
                                partitioned=sec['p_hist'], ratio_min=r['heap'][0], ratio_max=r['heap'][1],
                                partitioned_ratio_min=r['partitioned'][0], partitioned_ratio_max=r['partitioned'][1],
                                target_heap=heap_t, target_partitioned=p_t,
                                met=None if not target else met == 'yes', mode=mode, connection=conn_kind,
                                queries=[{'query': n, 'zipper': d['z_hist'], 'baseline': d['h_hist'],
                                          'partitioned': d['p_hist']} for n, d in r['queries']]))
    return lines, found


def query_rows(res):
    """Per query of one mode: warm and new-connection medians side by side."""
    lines = []
    for m in TARGETS:
        for (n, w), (_, c) in zip(res[(m, 'warm')]['queries'], res[(m, 'new')]['queries']):
            lines.append(f"| {n} | " + ' | '.join(
                f"{fmt_s(d['h_hist'])} | {fmt_s(d['p_hist'])} | {fmt_s(d['z_hist'])} "
                f"| {d['h_hist'] / d['z_hist']:.2f} | {d['p_hist'] / d['z_hist']:.2f}" for d in (w, c)) + ' |')
    return lines


def write_tables(a, results_by_mode, snap, sz):
    found = []
    for mode in a.modes:
        lines, res = read_rows(a, mode, results_by_mode[mode])
        found += res
        if mode == 'defaults':
            h, p, z = (snap[t] for t in TABLES)
            met = verdict([('heap', h / z, SNAPSHOT_TARGET)])
            lines.append(f'| end-of-day apply_snapshot vs UPDATE + INSERT | {fmt_s(h)} | {fmt_s(p)} | {fmt_s(z)} '
                         f'| {h / z:.2f} | {p / z:.2f} | heap ≥ {SNAPSHOT_TARGET:g}x | {met} |')
            found.append(result('users_snapshot', 'end-of-day snapshot (2% changed, 0.1% gone, 0.5% new)', z, h, 's',
                                partitioned=p, partitioned_ratio=p / z, target_heap=SNAPSHOT_TARGET,
                                met=met == 'yes'))
            zb, hb, pb = sz['zipper']['total'], sz['heap_own'], sz['partitioned_own']
            share = zb / hb
            met = 'yes' if share <= SIZE_TARGET else f'NO: {share:.3f} > {SIZE_TARGET}'
            lines.append(f'| bytes: zipper table + its catalog rows vs the table alone (no indexes) | {fmt_mb(hb)} '
                         f'| {fmt_mb(pb)} | {fmt_mb(zb)} | {hb / zb:.2f} | {pb / zb:.2f} '
                         f'| zipper ≤ {SIZE_TARGET:g} x heap (is {share:.3f}) | {met} |')
            found.append(result('users_size', 'bytes: zipper table + catalog rows vs heap table (no indexes)',
                                zb, hb, 'bytes', partitioned=pb, zipper_share=share, target_share=SIZE_TARGET,
                                met=share <= SIZE_TARGET, zipper_parts=sz['zipper'],
                                heap_with_indexes=sz['heap_total'], partitioned_with_indexes=sz['partitioned_total']))
        print(f'\n### {MODES[mode][0]}'
              + ('' if mode == 'defaults' else ' (' + '; '.join(s[4:] for s in MODES[mode][1]) + ')') + '\n')
        print('| measure | heap ms | partitioned ms | zipper ms | heap/zipper | partitioned/zipper | target | met? |')
        print('|---|--:|--:|--:|--:|--:|---|---|')
        print('\n'.join(lines))
        print('\nper query (medians; history and point lookup: per lookup):\n')
        print('| query | heap ms | partitioned ms | zipper ms | heap/zipper | partitioned/zipper '
              '| new conn.: heap ms | partitioned ms | zipper ms | heap/zipper | partitioned/zipper |')
        print('|---' + '|--:' * 10 + '|')
        print('\n'.join(query_rows(results_by_mode[mode])))
    return found


def settings(cur):
    """The server's settings that matter, and the planner settings not at
    PostgreSQL's defaults."""
    names = ('server_version', 'shared_buffers', 'work_mem', 'effective_cache_size', 'random_page_cost', 'jit',
             'max_parallel_workers_per_gather', 'max_parallel_workers', 'max_worker_processes',
             'shared_preload_libraries')
    s = dict(zip(names, q(cur, 'SELECT ' + ', '.join(f"current_setting('{n}')" for n in names))[0]))
    s['planner_not_default'] = dict(q(cur, """
        SELECT name, setting FROM pg_settings
         WHERE category LIKE 'Query Tuning%' AND setting IS DISTINCT FROM boot_val AND source <> 'default'
         ORDER BY name"""))
    return s


def main():
    a = parse_args()
    rng = random.Random(a.seed)
    conn = connect(a, autocommit=True)
    cur = conn.cursor()
    load = [os.getloadavg()]
    st = settings(cur)
    print(f'bench_users: keys={a.keys} days={a.days} change_rate={a.change_rate} reps={a.reps} '
          f'connections={a.connections} lookups={a.lookups} snapshot_reps={a.snapshot_reps}')
    print('server ' + ', '.join(f'{k}={v}' for k, v in st.items() if k != 'planner_not_default'))
    print('planner settings not at PostgreSQL\'s defaults (server configuration; the modes SET nothing else): '
          + (', '.join(f'{k}={v}' for k, v in st['planner_not_default'].items()) or 'none'))
    print(f'load average {load[0][0]:.2f} {load[0][1]:.2f} {load[0][2]:.2f}', flush=True)
    bench_read.build(conn, a)
    t = time.perf_counter()
    nrows, problems = bench_read.check_tables(conn, a)
    if problems:
        print('MISMATCH after build:\n  ' + '\n  '.join(problems))
        return 1
    print(f'z_hist, h_hist, p_hist hold the same {nrows} versions; verify clean '
          f'({time.perf_counter() - t:.0f}s)', flush=True)
    sz = sizes(cur)
    z = sz['zipper']
    print(f"bytes: heap {fmt_mb(sz['heap_own'])} ({fmt_mb(sz['heap_total'])} with indexes), partitioned "
          f"{fmt_mb(sz['partitioned_own'])} ({fmt_mb(sz['partitioned_total'])}); zipper {fmt_mb(z['total'])} = "
          f"data {fmt_mb(z['data'])} + catalog {fmt_mb(z['catalog'])} (key directories "
          f"{fmt_mb(z['key_directories'])}, masks {fmt_mb(z['masks'])}; by catalog table: "
          + ', '.join(f'{k} {fmt_mb(v or 0)}' for k, v in z['by_catalog_table'].items() if v) + ')', flush=True)

    bulk = bulk_queries(a)
    by_mode = {}
    try:
        for mode in a.modes:
            if a.explain:
                explain(a, mode, bulk)
            t = time.perf_counter()
            by_mode[mode] = measure_mode(a, mode, bulk, rng)
            print(f'measured {MODES[mode][0]} in {time.perf_counter() - t:.0f}s', flush=True)
        t = time.perf_counter()
        snap = None
        if 'defaults' in a.modes:
            snap = snapshot_job(a, conn)
            print(f'end-of-day jobs in {time.perf_counter() - t:.0f}s', flush=True)
    except Disagreement as e:
        print(f'\nFAILED: results differ: {e}')
        return 1
    load.append(os.getloadavg())
    print(f'\n## As users run it: {a.keys:,} keys x {a.days} days, {a.change_rate:.0%} of keys change a day '
          f'({nrows:,} versions)\n')
    print(f'heap/zipper > 1: zipper_lake faster. ms: sum over the measure\'s queries of their medians '
          f'({a.reps} warm runs after a warm-up; {a.connections} new connections); key history and point '
          f'lookup: per lookup ({a.lookups} random keys a warm run). Ratios: range over the measure\'s queries; '
          f'a target is met by the lowest. Load average {load[0][0]:.2f} at the start, {load[1][0]:.2f} at the end.')
    found = write_tables(a, by_mode, snap, sz)
    write_json(a, 'users', {'keys': a.keys, 'days': a.days, 'change_rate': a.change_rate, 'versions': nrows,
                            'reps': a.reps, 'connections': a.connections, 'lookups': a.lookups},
               found, settings=st, load_average=load, modes={m: MODES[m][1] for m in a.modes})
    missed = [r['key'] for r in found if r.get('met') is False]
    judged = [r for r in found if r.get('met') is not None]
    print(f"\ntargets met: {sum(1 for r in judged if r['met'])} of {len(judged)}"
          + (f"; missed: {', '.join(missed)}" if missed else ''))
    if not (a.keep or a.reuse):
        cur.execute('DROP TABLE IF EXISTS z_hist, h_hist, p_hist, bench_read_params')
    conn.close()
    print('ok: all tables agree')
    return 0


if __name__ == '__main__':
    sys.exit(main())
