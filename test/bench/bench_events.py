#!/usr/bin/env python3
"""
test/bench/bench_events.py -- CDC events vs typed changes (README "Loading
CDC events").

The same N upserts (payload-only Debezium events: before, after, source
with ts_ms and lsn, op, ts_ms) are applied to two fresh zipper tables: once
from a typed changes table by apply_changes, once from a jsonb (and,
separately, a text) column of events by apply_events, which parses and
converts every event.  Each round rebuilds the tables; the tables must end
equal.  Printed: per round the times and the ratio events / typed, and the
medians.  The issue's target: decoding and applying events costs at most 2x
applying the typed changes (1M events).

  PGDATABASE=zl_bench /usr/bin/python3 bench_events.py            # 1M events, 3 rounds
  PGDATABASE=zl_bench /usr/bin/python3 bench_events.py --smoke    # CI
"""
import argparse
import statistics
import time

from bench_common import add_connection_args, add_json_arg, connect, q, result, write_json


def setup(cur, n):
    cur.execute("CREATE EXTENSION IF NOT EXISTS zipper_lake")
    cur.execute("SET timezone = 'UTC'")
    cur.execute("DROP TABLE IF EXISTS ev_typed, ev_jsonb, ev_text")
    cur.execute("""
        CREATE TABLE ev_typed AS
        SELECT g::bigint AS id, 'name-' || g AS name, (g %% 1000)::numeric / 10 AS balance,
               timestamptz '2024-01-01' + (g / 10) * interval '1 ms' AS change_time,
               g::bigint AS lsn
          FROM generate_series(1, %s) g""", (n,))
    cur.execute("""
        CREATE TABLE ev_jsonb AS
        SELECT jsonb_build_object(
                 'before', NULL,
                 'after', jsonb_build_object('id', id, 'name', name, 'balance', balance::text),
                 'source', jsonb_build_object('ts_ms', (extract(epoch FROM change_time) * 1000)::bigint,
                                              'lsn', lsn, 'db', 'shop', 'schema', 'public',
                                              'table', 'account'),
                 'op', 'c',
                 'ts_ms', (extract(epoch FROM change_time) * 1000)::bigint + 5) AS event
          FROM ev_typed""")
    cur.execute("CREATE TABLE ev_text AS SELECT event::text AS event FROM ev_jsonb")
    cur.execute("ANALYZE ev_typed, ev_jsonb, ev_text")


def fresh(cur, name):
    cur.execute(f"DROP TABLE IF EXISTS {name}")
    cur.execute(f"""CREATE TABLE {name} (id bigint, name text, balance numeric,
                    valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) USING zipper_lake""")
    cur.execute(f"SELECT zipper_lake.register('{name}', ARRAY['id'])")


def timed(cur, sql):
    t0 = time.perf_counter()
    cur.execute(sql)
    cur.fetchall()
    return time.perf_counter() - t0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[1])
    p.add_argument("--events", type=int, default=1_000_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--smoke", action="store_true", help="20,000 events, one round")
    add_connection_args(p)
    add_json_arg(p)
    a = p.parse_args()
    if a.smoke:
        a.events, a.rounds = 20_000, 1
    conn = connect(a, True)
    cur = conn.cursor()
    setup(cur, a.events)
    rows = []
    for r in range(1, a.rounds + 1):
        for name in ("zt_typed", "zt_jsonb", "zt_text"):
            fresh(cur, name)
        cur.execute("CHECKPOINT")
        typed = timed(cur, "SELECT * FROM zipper_lake.apply_changes('zt_typed', 'ev_typed', seq => 'lsn')")
        jsonb = timed(cur, "SELECT * FROM zipper_lake.apply_events('zt_jsonb', 'ev_jsonb', 'debezium')")
        text = timed(cur, "SELECT * FROM zipper_lake.apply_events('zt_text', 'ev_text', 'debezium')")
        differ = q(cur, """
            SELECT (SELECT count(*) FROM ((TABLE zt_typed EXCEPT ALL TABLE zt_jsonb)
                                          UNION ALL (TABLE zt_jsonb EXCEPT ALL TABLE zt_typed)) d)
                 + (SELECT count(*) FROM ((TABLE zt_typed EXCEPT ALL TABLE zt_text)
                                          UNION ALL (TABLE zt_text EXCEPT ALL TABLE zt_typed)) d)""")[0][0]
        if differ:
            raise SystemExit(f"round {r}: the tables differ in {differ} rows")
        rows.append((typed, jsonb, text))
        print(f"round {r}: typed {typed:.2f} s, jsonb events {jsonb:.2f} s ({jsonb / typed:.2f}x), "
              f"text events {text:.2f} s ({text / typed:.2f}x)")
    med = [statistics.median(c) for c in zip(*rows)]
    print(f"{a.events} events, median of {a.rounds}: typed {med[0]:.2f} s; "
          f"jsonb events {med[1]:.2f} s = {med[1] / med[0]:.2f}x; "
          f"text events {med[2]:.2f} s = {med[2] / med[0]:.2f}x (target: at most 2x)")
    # the baseline of events is apply_changes of the same changes from a typed table
    write_json(a, 'events', {'events': a.events, 'rounds': a.rounds},
               [result('events_jsonb', 'Debezium events in jsonb (baseline: the typed changes)', med[1], med[0], 's'),
                result('events_text', 'Debezium events in text (baseline: the typed changes)', med[2], med[0], 's')])
    for name in ("zt_typed", "zt_jsonb", "zt_text", "ev_typed", "ev_jsonb", "ev_text"):
        cur.execute(f"DROP TABLE {name}")


if __name__ == "__main__":
    main()
