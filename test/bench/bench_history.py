#!/usr/bin/env python3
"""
test/bench/bench_history.py -- does the apply job slow down as history grows?
zipper_lake vs plain PostgreSQL, side by side in one run (README "Performance").

Four tables: for each of two history depths, a zipper table (key id) and a
heap table with the SCD2 indexes (UNIQUE (id) WHERE valid_to = 'infinity',
PRIMARY KEY (id, valid_from)).  Each holds --keys keys whose versions were
loaded by INSERT: --depth closed versions per key (one a day) and an open
one, in the small tables; --scale times as many closed versions in the big
ones (default 10).  Then --batches batches of --batch changes (random keys,
new values, times on the days after the history) are applied to each table
in turn -- apply_changes() on the zipper tables, the classic UPDATE + INSERT
job on the heap tables -- and timed (client wall time, each in its own
transaction, tables alternated).

Prints the median batch time of each table, the growth big/small of each
side (1.0 = flat; the issue's target for zipper_lake is < 1.2) and the
heap/zipper ratios.  The tables must hold the same rows at the end (EXCEPT
ALL both ways), else the script exits with status 1.
"""
import argparse
import statistics
import sys
import time

from bench_common import add_connection_args, add_json_arg, connect, q, result, rows_differ, write_json


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--keys', type=int, default=100_000, help='keys (default 100,000)')
    p.add_argument('--depth', type=int, default=2, help='closed versions per key in the small tables (default 2)')
    p.add_argument('--scale', type=int, default=10, help='history of the big tables / small (default 10)')
    p.add_argument('--batch', type=int, default=10_000, help='changes per batch (default 10,000)')
    p.add_argument('--batches', type=int, default=10, help='batches per table (default 10)')
    p.add_argument('--smoke', action='store_true', help='tiny sizes, to check that the script runs')
    add_connection_args(p)
    add_json_arg(p)
    a = p.parse_args()
    if a.smoke:
        a.keys, a.depth, a.scale, a.batch, a.batches = 2000, 2, 3, 200, 2
    return a


T0 = "'2025-01-01'::timestamptz"


def build(cur, a, name, depth):
    """A zipper and a heap table of the given history depth."""
    rows = f"""SELECT k, d, {T0} + d * interval '1 day',
                      CASE WHEN d = {depth} THEN 'infinity' ELSE {T0} + (d + 1) * interval '1 day' END
                 FROM generate_series(1, {a.keys}) k, generate_series(0, {depth}) d"""
    cur.execute(f"DROP TABLE IF EXISTS z_{name}, h_{name}")
    cur.execute(f"""CREATE TABLE z_{name} (id int, v int, valid_from timestamptz NOT NULL,
                    valid_to timestamptz NOT NULL) USING zipper_lake""")
    cur.execute(f"SELECT zipper_lake.register('z_{name}', key => ARRAY['id'], partition_unit => 'month')")
    cur.execute(f"INSERT INTO z_{name} {rows}")
    cur.execute(f"""CREATE TABLE h_{name} (id int NOT NULL, v int, valid_from timestamptz NOT NULL,
                    valid_to timestamptz NOT NULL)""")
    cur.execute(f"INSERT INTO h_{name} {rows}")
    cur.execute(f"CREATE UNIQUE INDEX ON h_{name} (id) WHERE valid_to = 'infinity'")
    cur.execute(f"ALTER TABLE h_{name} ADD PRIMARY KEY (id, valid_from)")
    cur.execute(f"VACUUM ANALYZE h_{name}")
    cur.execute(f"ANALYZE z_{name}")


def timed(conn, sql):
    cur = conn.cursor()
    t = time.perf_counter()
    cur.execute(sql)
    conn.commit()
    return time.perf_counter() - t


def main():
    a = parse_args()
    conn = connect(a, True)
    cur = conn.cursor()
    cur.execute("CREATE EXTENSION IF NOT EXISTS zipper_lake")
    depths = {'small': a.depth, 'big': a.depth * a.scale}
    for name, depth in depths.items():
        build(cur, a, name, depth)
    cur.execute("DROP TABLE IF EXISTS hist_changes")
    cur.execute("CREATE TABLE hist_changes (id int, v int, change_time timestamptz)")
    conn.autocommit = False
    times = {f'{side}_{name}': [] for side in 'zh' for name in depths}
    start_day = max(depths.values()) + 1
    for b in range(a.batches):
        cur.execute("TRUNCATE hist_changes")
        cur.execute(f"""INSERT INTO hist_changes
                        SELECT id, 1000 + %s, {T0} + (%s + random()) * interval '1 day'
                          FROM (SELECT DISTINCT 1 + (random() * (%s - 1))::int AS id
                                  FROM generate_series(1, %s)) k""",
                    (b, start_day + b, a.keys, a.batch))
        conn.commit()
        order = list(times) if b % 2 == 0 else list(reversed(list(times)))
        for t in order:
            side, name = t.split('_')
            if side == 'z':
                sql = f"SELECT * FROM zipper_lake.apply_changes('z_{name}', 'hist_changes')"
            else:
                sql = f"""UPDATE h_{name} h SET valid_to = c.change_time FROM hist_changes c
                           WHERE h.id = c.id AND h.valid_to = 'infinity';
                          INSERT INTO h_{name} SELECT id, v, change_time, 'infinity' FROM hist_changes"""
            times[t].append(timed(conn, sql))
    conn.autocommit = True

    failed = False
    for name in depths:
        diff = rows_differ(cur, f'z_{name}', f'h_{name}')
        if diff:
            print(f"{name}: the zipper and heap tables differ in {diff} rows")
            failed = True
    med = {t: statistics.median(v) for t, v in times.items()}
    print(f"{a.keys} keys; history: small {a.depth}, big {a.depth * a.scale} closed versions a key; "
          f"{a.batches} batches of {a.batch} changes each")
    print(f"{'table':<12} {'median s':>9}")
    for t in times:
        print(f"{t:<12} {med[t]:>9.3f}")
    print(f"growth big/small: zipper {med['z_big'] / med['z_small']:.2f}, heap {med['h_big'] / med['h_small']:.2f}  (1.0 = flat)")
    print(f"ratio heap/zipper: small {med['h_small'] / med['z_small']:.2f}, big {med['h_big'] / med['z_big']:.2f}")
    write_json(a, 'history', {'keys': a.keys, 'depth': a.depth, 'scale': a.scale, 'batch': a.batch,
                              'batches': a.batches},
               [result('history_small', f'apply a batch, {a.depth} closed versions a key',
                       med['z_small'], med['h_small'], 's'),
                result('history_big', f'apply a batch, {a.depth * a.scale} closed versions a key',
                       med['z_big'], med['h_big'], 's',
                       zipper_growth=med['z_big'] / med['z_small'], heap_growth=med['h_big'] / med['h_small'])])
    if failed:
        sys.exit(1)


if __name__ == '__main__':
    main()
