#!/usr/bin/env python3
"""
test/bench/bench_scaling.py -- zipper parents (README "Scaling out"): one
zipper table against a zipper parent applied leaf by leaf and in background
workers, and reads through the parent, side by side in one run; the heap
SCD2 table and its job as the baseline.

Four tables hold the same versions:

  sc_one   one zipper table: create_table('sc_one', 'sc_src')            (a)
  sc_ser   a zipper parent: create_table('sc_ser', 'sc_src', partitions
           => --leaves), PARTITION BY HASH (id), applied leaf by leaf in
           the caller's transaction (zipper_lake.apply_workers = 0)      (b)
  sc_par   the same parent, applied with zipper_lake.apply_workers =
           --leaves: a worker a leaf, two-phase commit                   (c)
  sc_heap  heap (LIKE sc_one) with bench_apply.py's indexes (UNIQUE (id)
           WHERE valid_to = 'infinity', PRIMARY KEY (id, valid_from))

sc_src (id bigint PRIMARY KEY, name, balance, branch) is the source
create_table() takes the columns and key from.  All four are loaded with
bench_apply.py's initial image (--keys open versions) and VACUUM ANALYZE'd.

Apply throughput: --batches batches of --batch changes made as
bench_apply.py makes them (80% updates, one in ten a no-op, 10% new keys,
10% deletes; a day per batch).  First the heap job (bench_apply.py's UPDATE
+ INSERT, in a backend of its own) applies every batch as it is made, each
batch kept as a table sc_batch_<b>; then apply_changes() applies the same
batches to (a), (b) and (c), batch after batch, each variant in a backend
of its own, each call a statement of its own (autocommit: what (c) needs;
client wall time, commit included).  (c) runs between the other two (order
(a) (c) (b), then (b) (c) (a), ...): the workers of one call wait, idle and
warm, for the next (zipper_lake.apply_worker_idle, 4 s, with
shared_preload_libraries = 'zipper_lake'; without the preload each call
starts its workers afresh), and the gap between two calls of (c) is one
other apply of each batch.  The first batch is a warm-up (new backends,
new workers); the medians and ratios are over the others.  Autovacuum is
off on the four tables while batches are applied (reloption
autovacuum_enabled; --autovacuum leaves it on): a VACUUM of a zipper table
runs its maintenance worker, which on 2 cores takes the CPU one of (c)'s
workers needs, at random moments.  After every call of (c) the script
counts the transactions that wrote the leaves' change records (one a
worker; one if the call fell back to leaf by leaf: a failure) and the apply
workers connected to the database (the same ones again: reused, warm); when
the server runs on this machine, the CPU seconds every call's backend and
workers spent (/proc) are printed too.  (c) is skipped, and said so, when
max_prepared_transactions < --leaves.

Reads (plain SQL, planner defaults, nothing SET), after an untimed VACUUM
ANALYZE of all tables, on the heap, the one table and the parent (c):

  as of a time, 1% of rows  SELECT * WHERE valid_from <= X AND valid_to > X
                            AND branch = 7 ORDER BY id (X: noon of the
                            middle batch's day)
  history of a key          SELECT * WHERE id = k ORDER BY valid_from,
                            --lookups random keys (ms: per lookup)
  current rows              SELECT count(*), sum(balance) WHERE valid_to =
                            'infinity'
  as-of aggregate           SELECT count(*), sum(balance) WHERE valid_from
                            <= X AND valid_to > X

warm (one connection, an untimed run, then the median of --reps runs,
tables in rotated order) and in a new connection (connect, time the one
query; median of --connections), as bench_users.py times them.  All tables
must return the same rows.

Checks: every batch's apply_changes() counts equal over (a), (b), (c) and
the heap job's row counts; unless --no-verify, the four tables end with the
same rows (md5 of their rows in (id, valid_from) order).  A disagreement,
or a read that fails, exits with status 1.  Target (the issue): (c) applies >= 1.3x as fast as
(a) at 2 leaves on 2 cores (median per-batch ratio); reported, not failed.
--json FILE writes the results for report.py.
"""
import argparse
import os
import random
import sys
import time

import psycopg2

import bench_apply
import bench_read
from bench_common import (add_connection_args, add_json_arg, check_batch_size, connect, KeySpace, median, q, result,
                          rows_differ, write_json)
from bench_users import Disagreement, new_connection_runs, settings, warm_runs

TARGET = 1.3                        # (c) / (a) throughput, at least
VARIANTS = ('one', 'ser', 'par')    # (a), (b), (c)
TABLE = {'heap': 'sc_heap', 'one': 'sc_one', 'ser': 'sc_ser', 'par': 'sc_par'}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--keys', type=int, default=1_000_000, help='initial keys (default 1,000,000)')
    p.add_argument('--batch', type=int, default=100_000, help='changes per batch (default 100,000)')
    p.add_argument('--batches', type=int, default=10, help='batches, the first a warm-up (default 10)')
    p.add_argument('--leaves', type=int, default=2, help='leaves of the parents, and workers of (c) (default 2)')
    p.add_argument('--reps', type=int, default=5, help='reads, warm: timed runs per query and table (default 5)')
    p.add_argument('--connections', type=int, default=5,
                   help='reads, new connection: connections per query and table (default 5)')
    p.add_argument('--lookups', type=int, default=100,
                   help='reads: random keys a warm run of key history (default 100)')
    p.add_argument('--seed', type=int, default=42)
    p.add_argument('--autovacuum', action='store_true', help='leave autovacuum on for the tables while applying')
    p.add_argument('--no-verify', action='store_true', help='skip comparing the tables\' rows at the end')
    p.add_argument('--explain', action='store_true',
                   help='print EXPLAIN (ANALYZE, BUFFERS) of each read once per table')
    p.add_argument('--keep', action='store_true', help='keep the tables')
    p.add_argument('--quiet', action='store_true', help='no per-batch lines')
    add_connection_args(p)
    p.add_argument('--smoke', action='store_true',
                   help='CI size: 2,000 keys, 4 batches of 200, one run of every read')
    add_json_arg(p)
    a = p.parse_args()
    if a.smoke:
        a.keys, a.batch, a.batches, a.reps, a.connections, a.lookups = 2000, 200, 4, 1, 1, 10
    if a.batches < 2:
        p.error('--batches must be at least 2 (the first is a warm-up)')
    if a.leaves < 2:
        p.error('--leaves must be at least 2')
    check_batch_size(p, a)
    # bench_apply.make_batch's options: a batch a day, nothing late
    a.per_day, a.late = 1, 0.0
    return a


def labels(a):
    n = a.leaves
    return {'heap': 'heap job (UPDATE + INSERT)', 'one': '(a) one zipper table',
            'ser': f'(b) zipper parent, {n} leaves, leaf by leaf', 'par': f'(c) zipper parent, {n} leaves, {n} workers'}


def batch_table(b):
    return f'sc_batch_{b}'


def leaves_of(cur, t):
    return [r[0] for r in q(cur, f"SELECT relid::regclass::text FROM pg_partition_tree('{t}') WHERE isleaf ORDER BY 1")]


# ---------------------------------------------------------------------------
# the tables
# ---------------------------------------------------------------------------

def drop_tables(cur):
    batches = [r[0] for r in q(cur, r"SELECT tablename::text FROM pg_tables WHERE tablename LIKE 'sc\_batch\_%'"
                                    " AND schemaname = current_schema()")]
    cur.execute('DROP TABLE IF EXISTS ' + ', '.join(list(TABLE.values()) + ['sc_src'] + batches))


def build(conn, a, variants, say):
    conn.autocommit = True
    cur = conn.cursor()
    cur.execute('CREATE EXTENSION IF NOT EXISTS zipper_lake')
    drop_tables(cur)
    cur.execute('CREATE TABLE sc_src (id bigint PRIMARY KEY, name text, balance numeric, branch int)')
    cur.execute("SELECT zipper_lake.create_table('sc_one', 'sc_src')")
    for v in variants[1:]:
        cur.execute(f"SELECT zipper_lake.create_table('{TABLE[v]}', 'sc_src', partitions => %s)", (a.leaves,))
    cur.execute('CREATE TABLE sc_heap (LIKE sc_one)')
    load = {}
    versions = bench_apply.initial_versions(a.keys)
    for v in ('heap',) + variants:
        t = time.perf_counter()
        cur.execute(f'INSERT INTO {TABLE[v]} {versions}')
        if v == 'heap':
            cur.execute("CREATE UNIQUE INDEX sc_heap_open_uq ON sc_heap (id) WHERE valid_to = 'infinity'")
            cur.execute('ALTER TABLE sc_heap ADD CONSTRAINT sc_heap_pk PRIMARY KEY (id, valid_from)')
        load[v] = time.perf_counter() - t
    for v in ('heap',) + variants:
        if not a.autovacuum:
            for leaf in leaves_of(cur, TABLE[v]):
                cur.execute(f'ALTER TABLE {leaf} SET (autovacuum_enabled = false)')
        # as autovacuum would after a load (bench_apply.py)
        cur.execute(f'VACUUM ANALYZE {TABLE[v]}')
    try:
        cur.execute('CHECKPOINT')       # start the timed part with clean buffers; needs pg_checkpoint
    except psycopg2.Error:
        pass
    say('loaded (s, heap with its indexes): ' + ', '.join(f'{TABLE[v]} {s:.2f}' for v, s in load.items()))


# ---------------------------------------------------------------------------
# applying the batches
# ---------------------------------------------------------------------------

def heap_phase(conn, hconn, a):
    """Make every batch (kept as sc_batch_<b>) and apply it with the heap job
    as it is made: (seconds, counts, rows) per batch and the key space."""
    rng = random.Random(a.seed)
    ks = KeySpace(range(1, a.keys + 1), a.keys + 1)
    out = []
    for b in range(a.batches):
        n = bench_apply.make_batch(conn, rng, ks, a, b, changes=batch_table(b), open_table='sc_heap')
        out.append(bench_apply.run_heap(hconn, 'sc_heap', batch_table(b)) + (n,))
    return out, ks


def worker_facts(cur, leaves):
    """After a call of (c): the transactions that last wrote its leaves'
    change records (None if the catalog is not readable), and the apply
    workers connected to this database."""
    try:
        writers = q(cur, 'SELECT count(DISTINCT xmin::text) FROM zipper_lake.record_head WHERE tbl::text = ANY(%s)',
                    (leaves,))[0][0]
    except psycopg2.Error:
        writers = None
    pids = q(cur, """SELECT coalesce(array_agg(pid ORDER BY pid), '{}') FROM pg_stat_activity
                      WHERE backend_type = 'zipper_lake apply worker' AND datname = current_database()""")[0][0]
    return writers, tuple(pids)


def cpu_seconds(pid):
    """CPU seconds (user + system) of a server process if it runs on this
    machine (a postgres process in /proc), else None."""
    try:
        with open(f'/proc/{pid}/cmdline', 'rb') as f:
            if b'postgres' not in f.read():
                return None
        with open(f'/proc/{pid}/stat') as f:
            fields = f.read().rsplit(')', 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')
    except (OSError, ValueError, IndexError):
        return None


def cpu_spent(before, pids):
    """CPU seconds each of pids spent since before (pid -> seconds; a pid
    not in it started since); None where not readable."""
    after = {p: cpu_seconds(p) for p in pids}
    return [None if after[p] is None else after[p] - (before.get(p) or 0) for p in pids]


def zipper_phase(conns, a, variants, leaves, say):
    """Apply every batch to the zipper variants, (c) between the others:
    variant -> [(seconds, counts)] per batch; the CPU seconds each call's
    backend (and workers) spent; facts of (c) per batch."""
    times = {v: [] for v in variants}
    cpu = {v: [] for v in variants}
    backend = {v: q(conns[v].cursor(), 'SELECT pg_backend_pid()')[0][0] for v in variants}
    facts = []
    last_end, last_pids = None, ()
    for b in range(a.batches):
        order = variants if b % 2 == 0 else variants[::-1]
        if 'par' in variants:
            order = [v for v in order if v != 'par']
            order.insert(1, 'par')
        for v in order:
            before = {p: cpu_seconds(p) for p in (backend[v],) + (last_pids if v == 'par' else ())}
            start = time.perf_counter()
            times[v].append(bench_apply.run_zipper(conns[v], TABLE[v], batch_table(b)))
            if v != 'par':
                cpu[v].append({'backend': cpu_spent(before, [backend[v]])[0]})
                continue
            writers, pids = worker_facts(conns[v].cursor(), leaves)
            spent = cpu_spent(before, [backend[v]] + list(pids))
            cpu[v].append({'backend': spent[0], 'workers': spent[1:] if pids and None not in spent else None})
            facts.append({'gap': None if last_end is None else start - last_end, 'writers': writers,
                          'pids': pids, 'reused': bool(pids) and pids == last_pids, 'first': order[0]})
            last_end, last_pids = start + times[v][-1][0], pids
        if not a.quiet:
            line = f'{b + 1:>5} ' + ' '.join(f'{times[v][-1][0]:>9.3f}' for v in variants)
            if 'par' in variants:
                f, w = facts[-1], cpu['par'][-1]['workers']
                gap = '-' if f['gap'] is None else f'{f["gap"]:.2f}'
                line += (f'  {times["one"][-1][0] / times["par"][-1][0]:>6.2f} {gap:>6} '
                         f'{"reused" if f["reused"] else "new":>7} {f["writers"]!s:>7} '
                         + ('-' if w is None else '+'.join(f'{x:.2f}' for x in w)))
            say(f'{line}  {order[0]}', flush=True)
    return times, cpu, facts


def cpu_line(a, times, cpu, variants):
    """The CPU seconds of the calls after the first (medians), or None when
    the server's processes are not readable here."""
    calls = {v: cpu[v][1:] for v in variants}
    if any(c['backend'] is None for v in variants for c in calls[v]):
        return None
    lab = labels(a)
    parts = [f'{lab[v][:3]} backend {median([c["backend"] for c in calls[v]]):.2f}' for v in variants if v != 'par']
    if 'par' in variants:
        ws = [c['workers'] for c in calls['par']]
        if None in ws:
            parts.append(f'(c) leader {median([c["backend"] for c in calls["par"]]):.2f}, workers n/a (gone)')
        else:
            busy = median([sum(w) / t for w, (t, _) in zip(ws, times['par'][1:])])
            parts.append(f'(c) leader {median([c["backend"] for c in calls["par"]]):.2f}, workers '
                         + ' + '.join(f'{median([w[i] for w in ws]):.2f}' for i in range(len(ws[0])))
                         + f' = {median([sum(w) for w in ws]):.2f}: their CPU seconds over the wall time '
                           f'{busy:.2f} (of {a.leaves}; {os.cpu_count()} CPUs)')
    return 'CPU seconds a call (medians; server processes read in /proc): ' + '; '.join(parts)


# ---------------------------------------------------------------------------
# checks
# ---------------------------------------------------------------------------

def check_counts(heap, times, variants, facts, a):
    problems = []
    for b in range(a.batches):
        ch = heap[b][1]
        for v in variants:
            cz = times[v][b][1]
            if cz != times['one'][b][1] or cz['inserted'] != ch['inserted'] or cz['closed'] != ch['closed']:
                problems.append(f'batch {b + 1}: {TABLE[v]} counts {cz} vs {TABLE["one"]} '
                                f'{times["one"][b][1]} vs heap {ch}')
    for b, f in enumerate(facts):
        if f['writers'] is not None and f['writers'] != a.leaves:
            problems.append(f'batch {b + 1}: {f["writers"]} transaction(s) wrote the leaves of sc_par, not {a.leaves} '
                            f'(a worker a leaf): the call fell back to leaf by leaf')
    return problems


def check_tables(cur, tables):
    """The tables must hold the same rows: md5 of their rows in (id,
    valid_from) order (rows_differ counts them where they do not)."""
    digest = {t: q(cur, f"SELECT count(*), md5(string_agg(x::text, E'\\n' ORDER BY id, valid_from)) FROM {t} x")[0]
              for t in tables}
    base = tables[0]
    return [f'{t} and {base} differ in {rows_differ(cur, t, base)} rows ({digest[t][0]} and {digest[base][0]} versions)'
            for t in tables[1:] if digest[t] != digest[base]], digest[base][0]


# ---------------------------------------------------------------------------
# reads
# ---------------------------------------------------------------------------

def read_queries(a):
    """name -> (label, SQL template ({t}: the table))."""
    x = bench_read.day(a.batches // 2, 12)
    asof = f'valid_from <= {x} AND valid_to > {x}'
    return {
        'asof_rows': ('as of a time, 1% of rows (branch = 7)',
                      f'SELECT * FROM {{t}} WHERE {asof} AND branch = 7 ORDER BY id'),
        'current': ('current rows: count, sum', "SELECT count(*), sum(balance) FROM {t} WHERE valid_to = 'infinity'"),
        'asof_agg': ('as-of aggregate: count, sum', f'SELECT count(*), sum(balance) FROM {{t}} WHERE {asof}'),
    }


def history_queries(rng, ks, n):
    return [f'SELECT * FROM {{t}} WHERE id = {rng.choice(ks.ever)} ORDER BY valid_from' for _ in range(n)]


def reads(a, tables, rng, ks):
    """(name, label) -> {'warm': table -> s, 'new': table -> s}."""
    conn = connect(a, autocommit=True)
    cur = conn.cursor()
    out = {}
    queries = read_queries(a)
    for name, (label, tpl) in queries.items():
        out[(name, label)] = {'warm': warm_runs(cur, f'warm: {tpl}', [[tpl]] * (a.reps + 1), tables)}
    runs = [history_queries(rng, ks, a.lookups) for _ in range(a.reps + 1)]
    out[('history', 'history of a key (per lookup)')] = {'warm': warm_runs(cur, 'warm: history of a key', runs, tables)}
    conn.close()
    for (name, label), r in out.items():
        qs = [queries[name][1]] * a.connections if name in queries else history_queries(rng, ks, a.connections)
        r['new'] = new_connection_runs(a, 'defaults', f'new connection: {label}', qs, tables)
    if a.explain:
        conn = connect(a, autocommit=True)
        for name, (label, tpl) in list(queries.items()) + [('history', ('', history_queries(rng, ks, 1)[0]))]:
            for t in tables:
                print(f'\n--- EXPLAIN ANALYZE: {tpl.format(t=t)}')
                print('\n'.join(r[0] for r in q(conn.cursor(), 'EXPLAIN (ANALYZE, BUFFERS) ' + tpl.format(t=t))))
        conn.close()
    return out


# ---------------------------------------------------------------------------
# main
# ---------------------------------------------------------------------------

def fmt_ms(s):
    return f'{s * 1000:.3f}' if s < 0.01 else f'{s * 1000:.1f}'


def apply_results(a, heap, times, variants):
    """Printed lines and JSON results of the apply measures (batches after
    the first)."""
    lab = labels(a)
    secs = {'heap': [t for t, _, _ in heap[1:]]}
    secs.update({v: [t for t, _ in times[v][1:]] for v in variants})
    med = {v: median(s) for v, s in secs.items()}

    def ratio(base, v):
        """median per-batch ratio base / v."""
        return median([x / y for x, y in zip(secs[base], secs[v])])

    def cell(base, v):
        return '–' if v == base else f'{ratio(base, v):.2f}'

    lines = [f'| apply a batch of {a.batch:,} | median s | changes/s | (a) / it | (b) / it | heap job / it |',
             '|---|--:|--:|--:|--:|--:|']
    for v in ('heap',) + variants:
        lines.append(f'| {lab[v]} | {med[v]:.3f} | {a.batch / med[v]:,.0f} | {cell("one", v)} | {cell("ser", v)} '
                     f'| {cell("heap", v)} |')
    res = []
    for v in variants:
        res.append(result(f'scaling_apply_{v}', f'apply a batch, {lab[v][4:]}', med[v], med['heap'], 's',
                          ratio('heap', v), leaves=a.leaves))
    for v, base in (('ser', 'one'), ('par', 'one'), ('par', 'ser')):
        if v in variants:
            r = ratio(base, v)
            extra = {'target': TARGET, 'met': r >= TARGET} if (v, base) == ('par', 'one') else {}
            res.append(result(f'scaling_apply_{v}_vs_{base}',
                              f'apply a batch, {lab[v][4:]} (baseline: {lab[base][4:]})',
                              med[v], med[base], 's', r, **extra))
    return lines, res, med


def main():
    a = parse_args()
    say = print
    conn = connect(a, autocommit=True)
    cur = conn.cursor()
    st = settings(cur)
    st.update(q(cur, """SELECT name, setting FROM pg_settings
                          WHERE name IN ('max_prepared_transactions', 'synchronous_commit')"""))
    preloaded = 'zipper_lake' in st['shared_preload_libraries']
    variants = VARIANTS if int(st['max_prepared_transactions']) >= a.leaves else VARIANTS[:2]
    load_avg = [os.getloadavg()]
    say(f'bench_scaling: keys={a.keys} batch={a.batch} batches={a.batches} leaves={a.leaves} reps={a.reps} '
        f'connections={a.connections} lookups={a.lookups} seed={a.seed}')
    say('server ' + ', '.join(f'{k}={v}' for k, v in st.items() if k != 'planner_not_default'))
    say('planner settings not at PostgreSQL\'s defaults (server configuration): '
        + (', '.join(f'{k}={v}' for k, v in st['planner_not_default'].items()) or 'none'))
    say(f'load average {load_avg[0][0]:.2f} {load_avg[0][1]:.2f} {load_avg[0][2]:.2f}')
    if 'par' not in variants:
        say(f'(c) skipped: max_prepared_transactions = {st["max_prepared_transactions"]} < {a.leaves} workers')
    elif not preloaded:
        say('zipper_lake is not in shared_preload_libraries: every call of (c) starts its workers afresh (cold)')
    sys.stdout.flush()

    t0 = time.perf_counter()
    build(conn, a, variants, say)
    parent_leaves = leaves_of(cur, TABLE['par']) if 'par' in variants else []
    hconn = connect(a, autocommit=False)    # the heap job in a backend that never loads zipper_lake
    t = time.perf_counter()
    heap, ks = heap_phase(conn, hconn, a)
    hconn.close()
    say(f'heap job: {a.batches} batches made and applied in {time.perf_counter() - t:.0f}s: '
        + ' '.join(f'{s:.3f}' for s, _, _ in heap), flush=True)
    conns = {v: connect(a, autocommit=True) for v in variants}
    conns['ser'].cursor().execute('SET zipper_lake.apply_workers = 0')
    if 'par' in variants:
        conns['par'].cursor().execute('SET zipper_lake.apply_workers = %s', (a.leaves,))
    if not a.quiet:
        say(f'{"batch":>5} ' + ' '.join(f'{TABLE[v] + " s":>9}' for v in variants)
            + ('   a/c   gap s workers writers workers\' cpu s' if 'par' in variants else '') + '  first')
    times, cpu, facts = zipper_phase(conns, a, variants, parent_leaves, say)
    idle = q(conns['par' if 'par' in variants else 'one'].cursor(),
             "SELECT current_setting('zipper_lake.apply_worker_idle', true)")[0][0]
    for c in conns.values():
        c.close()

    problems = check_counts(heap, times, variants, facts, a)
    tables = [TABLE[v] for v in ('heap',) + variants]
    if not a.no_verify:
        t = time.perf_counter()
        diff, versions = check_tables(cur, tables)
        problems += diff
        say(f'tables compared in {time.perf_counter() - t:.0f}s: '
            + ('; '.join(diff) if diff else f'{", ".join(tables)} hold the same {versions:,} versions'), flush=True)
    t = time.perf_counter()
    cur.execute('VACUUM ANALYZE ' + ', '.join(tables))
    say(f'VACUUM ANALYZE in {time.perf_counter() - t:.0f}s (untimed, before the reads)', flush=True)

    read_tables = ('sc_heap', 'sc_one', TABLE[variants[-1]])
    try:
        rd = reads(a, read_tables, random.Random(a.seed + 1), ks)
    except Disagreement as e:
        problems.append(f'reads differ: {e}')
        rd = {}
    except psycopg2.Error as e:
        problems.append(f'a read failed: {str(e).strip()}')
        rd = {}
    load_avg.append(os.getloadavg())

    lines, res, med = apply_results(a, heap, times, variants)
    say(f'\n## Scaling out: {a.keys:,} keys, {a.batches} batches of {a.batch:,} changes (the first a warm-up), '
        f'zipper parents of {a.leaves} leaves\n')
    say(f'Load average {load_avg[0][0]:.2f} at the start, {load_avg[1][0]:.2f} at the end; '
        f'{os.cpu_count()} CPUs; preloaded: {"yes" if preloaded else "no"}; apply_worker_idle {idle}; '
        f'autovacuum {"on" if a.autovacuum else "off"} for the tables while applying. '
        f'Ratios: median of the per-batch ratios (batches 2..{a.batches}; x / it > 1: the row is faster than x).\n')
    say('\n'.join(lines))
    if 'par' in variants:
        f = facts[1:]
        gaps = [x['gap'] for x in f]
        r = [x for x in res if x['key'] == 'scaling_apply_par_vs_one'][0]
        say(f"\n(c) between calls: gap {min(gaps):.2f}–{max(gaps):.2f} s; workers reused (the same pids as the call "
            f"before) in {sum(x['reused'] for x in f)} of {len(f)} calls; writers of the leaves' records: "
            + ', '.join(sorted({str(x['writers']) for x in facts})))
        say(f"target: (c) vs (a) ≥ {TARGET:g}x: {r['ratio']:.2f}x, {'met' if r['met'] else 'NOT met'}")
    line = cpu_line(a, times, cpu, variants)
    if line:
        say(line)
    say(f'\n| read (plain SQL, planner defaults), through {read_tables[2]} | heap ms | one table ms | parent ms '
        '| one/parent | heap/parent | heap/one |')
    say('|---|--:|--:|--:|--:|--:|--:|')
    for (name, label), r in rd.items():
        for kind in ('warm', 'new'):
            h, o, p = (r[kind][t] for t in read_tables)
            say(f"| {label}, {'warm' if kind == 'warm' else 'new connection'} | {fmt_ms(h)} | {fmt_ms(o)} "
                f"| {fmt_ms(p)} | {o / p:.2f} | {h / p:.2f} | {h / o:.2f} |")
            res.append(result(f'scaling_{name}' + ('_new' if kind == 'new' else ''),
                              f"{label} through a zipper parent of {a.leaves} leaves, "
                              f"{'warm' if kind == 'warm' else 'new connection'} (baseline: one zipper table)",
                              p, o, 's', heap=h, heap_ratio=h / p))
    say('\nbatch seconds: ' + '; '.join(f'{TABLE[v]} ' + ' '.join(f'{s:.3f}' for s, _ in times[v]) for v in variants))
    say(f'total {time.perf_counter() - t0:.0f}s')
    write_json(a, 'scaling', {'keys': a.keys, 'batch': a.batch, 'batches': a.batches, 'leaves': a.leaves},
               res, settings=st, load_average=load_avg, preloaded=preloaded, cpu=cpu, worker_facts=[
                   {k: v for k, v in f.items() if k != 'pids'} for f in facts])
    if not a.keep:
        drop_tables(cur)
    conn.close()
    if problems:
        print('\nFAILED:\n' + '\n'.join(problems))
        return 1
    print('\nok: all variants agree')
    return 0


if __name__ == '__main__':
    sys.exit(main())
