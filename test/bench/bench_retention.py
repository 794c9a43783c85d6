#!/usr/bin/env python3
"""
test/bench/bench_retention.py -- drop_history is O(partitions), not O(rows)
(README "Lifecycle", "Performance").

The same history -- PARTITIONS days of versions, each ending on its day --
at ROWS, 10 x ROWS and 100 x ROWS versions per day, in a zipper table and in
a heap table with a btree index on valid_to.  Half the days are dropped:
zipper_lake.drop_history(tbl, cut) against DELETE FROM heap WHERE valid_to
<= cut, each in a transaction rolled back, best of --repeat.  drop_history
deletes the catalog rows of whole partitions and reads no row, so its time
stays flat while DELETE grows with the rows.

    bench_retention.py [--rows 1000] [--partitions 20] [--repeat 3] [--smoke]
"""
import argparse
import time

from bench_common import add_connection_args, add_json_arg, connect, q, result, write_json


def build(cur, scale, rows, partitions):
    n = rows * scale
    cur.execute(f"""
        DROP TABLE IF EXISTS z_{scale}, h_{scale};
        CREATE TABLE z_{scale} (id bigint, v int, note text,
                                valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) USING zipper_lake;
        SELECT zipper_lake.register('z_{scale}', ARRAY['id']);
        CREATE TABLE h_{scale} (LIKE z_{scale});
        INSERT INTO h_{scale}
        SELECT i, d, 'note ' || i,
               '2024-01-01'::timestamptz + (d - 1) * interval '1 day' + (i % 1000) * interval '1 minute',
               '2024-01-01'::timestamptz + d * interval '1 day' + (i % 1000) * interval '1 minute'
          FROM generate_series(1, {partitions}) d, generate_series(1, {n}) i;
        CREATE INDEX ON h_{scale} (valid_to);
        INSERT INTO z_{scale} SELECT * FROM h_{scale};
    """)
    cur.execute(f"VACUUM ANALYZE h_{scale}")


def timed(cur, sql, repeat):
    best = None
    for _ in range(repeat):
        cur.execute('BEGIN')
        start = time.perf_counter()
        cur.execute(sql)
        elapsed = time.perf_counter() - start
        cur.execute('ROLLBACK')
        best = elapsed if best is None else min(best, elapsed)
    return best


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    add_connection_args(p)
    p.add_argument('--rows', type=int, default=1000, help='versions per day at x1')
    p.add_argument('--partitions', type=int, default=20)
    p.add_argument('--repeat', type=int, default=3)
    p.add_argument('--smoke', action='store_true', help='tiny sizes, checks only')
    add_json_arg(p)
    a = p.parse_args()
    if a.smoke:
        a.rows, a.partitions, a.repeat = 20, 4, 1
    conn = connect(a, autocommit=True)
    cur = conn.cursor()
    cur.execute('CREATE EXTENSION IF NOT EXISTS zipper_lake')
    # the end of a day: whole partitions (a cut inside a day also reads that day's rows)
    cut = f"'2024-01-01'::timestamptz + {a.partitions // 2 + 1} * interval '1 day' - interval '1 microsecond'"
    print(f"drop_history of {a.partitions // 2} of {a.partitions} daily partitions, best of {a.repeat}")
    print(f"{'rows/day':>10} {'versions':>10} {'drop_history ms':>16} {'heap DELETE ms':>15} {'ratio':>7}")
    found = []
    for scale in (1, 10, 100):
        build(cur, scale, a.rows, a.partitions)
        dropped = q(cur, f"SELECT count(*) FROM h_{scale} WHERE valid_to <= {cut}")[0][0]
        cur.execute('BEGIN')
        got = q(cur, f"SELECT zipper_lake.drop_history('z_{scale}', {cut})")[0][0]
        left = q(cur, f"""SELECT (SELECT count(*) FROM z_{scale})
                               = (SELECT count(*) FROM h_{scale} WHERE valid_to > {cut})""")[0][0]
        cur.execute('ROLLBACK')
        if got != dropped or not left:
            raise SystemExit(f"drop_history removed {got} versions, DELETE would remove {dropped}")
        z = timed(cur, f"SELECT zipper_lake.drop_history('z_{scale}', {cut})", a.repeat)
        h = timed(cur, f"DELETE FROM h_{scale} WHERE valid_to <= {cut}", a.repeat)
        print(f"{a.rows * scale:>10} {dropped:>10} {z * 1000:>16.1f} {h * 1000:>15.1f} {z / h:>7.3f}")
        found.append(result(f'retention_{scale}', f'drop {dropped:,} versions ({a.rows * scale:,} a day)', z, h, 's',
                            versions_a_day=a.rows * scale))
        if a.smoke:
            cur.execute(f"DROP TABLE z_{scale}, h_{scale}")
    write_json(a, 'retention', {'rows': a.rows, 'partitions': a.partitions, 'repeat': a.repeat}, found)


if __name__ == '__main__':
    main()
