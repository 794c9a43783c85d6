#!/usr/bin/env python3
"""test/bench/apply_cpu.py -- CPU time of one apply, rolled back and repeated.

A finer measure than bench_apply.py for comparing two builds or two settings
on the same table: the same batch is applied N times, each in a transaction
that is rolled back, and the backend's CPU time (from /proc, so the server
must run on this machine) is divided by N. Rolled-back applies leave the
table as it was, but their fresh file pages stay (VACUUM the table now and
then) and their kernel time is not what committed batches pay: compare
builds alternately, on the same table, and read CPU, not elapsed time.

    PGDATABASE=zl_bench python3 test/bench/apply_cpu.py --table z_acct --changes pch --make-batch 10000
    PGDATABASE=zl_bench python3 test/bench/apply_cpu.py --table z_acct --changes pch -n 30

--make-batch N (re)creates the batch from bench_apply.py's table (`--keep`):
N changes on the day after its newest start, 80% updates, 10% deletes and
10% new keys, in random order.

test/bench/README.md, "Apply: where the ratio went since 4.7x", used it to
compare the history formats (switched with zipper_lake.set_history_format
between runs) and a build that writes no history.
"""
import argparse
import os
import statistics
import time

import psycopg2


def backend_cpu_seconds(pid):
    fields = open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')


def make_batch(cur, table, changes, n):
    """A batch shaped like bench_apply.py's, on the day after the table's newest start."""
    cur.execute('SELECT setseed(0.42)')
    cur.execute(f'DROP TABLE IF EXISTS {changes}')
    cur.execute(f"""
        CREATE TABLE {changes} AS
        WITH day AS (SELECT date_trunc('day', max(valid_from)) + interval '1 day' AS d FROM {table}),
             picked AS (SELECT id, name, branch, row_number() OVER () AS k
                          FROM (SELECT id, name, branch FROM {table} WHERE valid_to = 'infinity'
                                 ORDER BY random() LIMIT %(old)s) s)
        SELECT id, CASE WHEN k > %(upd)s THEN NULL ELSE name END AS name,
               CASE WHEN k > %(upd)s THEN NULL ELSE (random() * 100000)::numeric(12, 2) END AS balance,
               CASE WHEN k > %(upd)s THEN NULL ELSE branch END AS branch,
               (SELECT d FROM day) + random() * interval '1 day' AS change_time,
               CASE WHEN k > %(upd)s THEN 'D' ELSE 'U' END AS op
          FROM picked
        UNION ALL
        SELECT (SELECT max(id) FROM {table}) + g, 'name_' || g, (random() * 100000)::numeric(12, 2),
               (random() * 100)::int, (SELECT d FROM day) + random() * interval '1 day', 'I'
          FROM generate_series(1, %(new)s) g""",
                {'old': n - n // 10, 'upd': n * 8 // 10, 'new': n // 10})
    cur.execute(f'ANALYZE {changes}')


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--table', required=True, help='the zipper table')
    p.add_argument('--changes', required=True, help='the batch (a table of changes)')
    p.add_argument('-n', type=int, default=30, help='applies timed (default 30), after one untimed')
    p.add_argument('--make-batch', type=int, metavar='N',
                   help='create the batch first: N changes after the newest start (see above)')
    p.add_argument('--dbname', default=None)
    a = p.parse_args()

    conn = psycopg2.connect(dbname=a.dbname) if a.dbname else psycopg2.connect('')
    cur = conn.cursor()
    if a.make_batch:
        make_batch(cur, a.table, a.changes, a.make_batch)
        conn.commit()
    cur.execute('SELECT pg_backend_pid()')
    pid = cur.fetchone()[0]
    apply_sql = 'SELECT * FROM zipper_lake.apply_changes(%s, %s)'
    cur.execute(apply_sql, (a.table, a.changes))      # warms caches; not timed
    cur.fetchall()
    conn.rollback()
    elapsed = []
    cpu_before = backend_cpu_seconds(pid)
    for _ in range(a.n):
        t = time.perf_counter()
        cur.execute(apply_sql, (a.table, a.changes))
        cur.fetchall()
        elapsed.append(time.perf_counter() - t)
        conn.rollback()
    cpu = (backend_cpu_seconds(pid) - cpu_before) / a.n
    print(f'{a.n} rolled-back applies: CPU {cpu * 1000:.1f} ms an apply; elapsed median '
          f'{statistics.median(elapsed) * 1000:.1f} ms, min {min(elapsed) * 1000:.1f} ms')


if __name__ == '__main__':
    main()
