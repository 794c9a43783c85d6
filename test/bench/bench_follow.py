#!/usr/bin/env python3
"""
test/bench/bench_follow.py -- a zipper table following a live source
(README "Following a live source") against a heap table kept by a
trigger-based SCD2 audit, side by side in one run, on this database as
the source (one server: the follower's decoding shares its cores).

  fw_src  -> fw_hist   the source table (--keys rows: id, owner, bal) and
                       a zipper table following it (follow(), the default
                       batch_changes and batch_interval)               (a)
  fw_trg  -> fw_scd    the same source table with an AFTER trigger that
                       keeps a heap SCD2 table (close the open version,
                       insert the new one; a partial index on the open
                       versions)                                         (b)

Sustained rate: with the follower paused, --changes changes in
transactions of --per-tx random keys each (updates, a tenth no-op updates,
a tenth deletes and inserts again; PostgreSQL's statistics count them) are
committed on fw_src; the follower is resumed and timed
until it has applied them all: changes a second.  The same transactions
on fw_trg, timed: the changes a second the trigger's SCD2 sustains (its
cost is paid by every source transaction).

Lag at half the follower's rate: pgbench writes the same transactions at
that rate (-R) for --seconds to fw_src while the history's lag (now minus
the commit time of the last source transaction applied) is sampled every
50 ms: median and p99.  The trigger has no lag but adds latency to each
source transaction: pgbench at the same rate on fw_trg and on fw_src
(no trigger), per-transaction latency medians and p99, the difference is
what the trigger adds.

Both histories must agree with their sources at the end (the open
versions equal the source rows); a disagreement exits with status 1.
Needs shared_preload_libraries = 'zipper_lake' and wal_level = logical
(else it says so and skips).  --json FILE writes the results for
report.py.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from bench_common import add_connection_args, add_json_arg, connect, median, q, result, write_json

def workload(keys, per_tx, table):
    """A pgbench script: transactions of per_tx random keys updated (a tenth
    no-op updates, a tenth deleted and inserted again), one statement each."""
    sets = ''.join(f'\\set k{i} random(1, {keys})\n' for i in range(per_tx))
    ids = ', '.join(f':k{i}' for i in range(per_tx))
    return (f'{sets}\\set r random(1, 10)\n'
            f'\\if :r = 1\nUPDATE {table} SET bal = bal WHERE id IN ({ids});\n'
            f'\\elif :r = 2\nWITH d AS (DELETE FROM {table} WHERE id IN ({ids}) RETURNING *) '
            f"INSERT INTO {table} SELECT id, 'again', bal FROM d;\n"
            f'\\else\nUPDATE {table} SET bal = bal + 1 WHERE id IN ({ids});\n\\endif\n')

SETUP = """
DROP TABLE IF EXISTS fw_src, fw_hist, fw_trg, fw_scd CASCADE;
DROP FUNCTION IF EXISTS fw_scd2();
DROP PUBLICATION IF EXISTS fw_pub;
CREATE TABLE fw_src (id int PRIMARY KEY, owner text, bal int);
INSERT INTO fw_src SELECT g, 'owner ' || g, g FROM generate_series(1, %(keys)s) g;
CREATE PUBLICATION fw_pub FOR TABLE fw_src;
CREATE TABLE fw_hist (id int, owner text, bal int, valid_from timestamptz, valid_to timestamptz)
  USING zipper_lake;
SELECT zipper_lake.register('fw_hist', ARRAY['id']);
CREATE TABLE fw_trg (id int PRIMARY KEY, owner text, bal int);
CREATE TABLE fw_scd (id int, owner text, bal int, valid_from timestamptz, valid_to timestamptz);
CREATE INDEX ON fw_scd (id) WHERE valid_to = 'infinity';
CREATE FUNCTION fw_scd2() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP IN ('UPDATE', 'DELETE') THEN
    IF TG_OP = 'UPDATE' AND NEW IS NOT DISTINCT FROM OLD THEN RETURN NULL; END IF;
    UPDATE fw_scd SET valid_to = now() WHERE id = OLD.id AND valid_to = 'infinity';
  END IF;
  IF TG_OP IN ('INSERT', 'UPDATE') THEN
    INSERT INTO fw_scd VALUES (NEW.id, NEW.owner, NEW.bal, now(), 'infinity');
  END IF;
  RETURN NULL;
END $$;
INSERT INTO fw_trg SELECT * FROM fw_src;
INSERT INTO fw_scd SELECT id, owner, bal, now(), 'infinity' FROM fw_src;
CREATE TRIGGER fw_scd2 AFTER INSERT OR UPDATE OR DELETE ON fw_trg FOR EACH ROW EXECUTE FUNCTION fw_scd2();
"""


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--keys', type=int, default=10_000, help='source rows (default 10,000)')
    p.add_argument('--changes', type=int, default=200_000, help='changes for the rate (default 200,000)')
    p.add_argument('--per-tx', type=int, default=10, help='keys changed a source transaction (default 10)')
    p.add_argument('--seconds', type=int, default=20, help='seconds of paced workload for the lag (default 20)')
    p.add_argument('--smoke', action='store_true', help='tiny sizes (CI); numbers mean nothing')
    p.add_argument('--keep', action='store_true', help='keep the tables')
    add_connection_args(p)
    add_json_arg(p)
    a = p.parse_args()
    if a.smoke:
        a.keys, a.changes, a.seconds = 500, 2000, 2
    return a


def pgbench(a, table, extra):
    """Run pgbench with the workload on table; returns per-transaction latencies (s)."""
    with tempfile.TemporaryDirectory() as d:
        script = os.path.join(d, 'w.sql')
        with open(script, 'w') as f:
            f.write(workload(a.keys, a.per_tx, table))
        os.chmod(d, 0o777)
        cmd = ['pgbench', '-n', '-f', script, '-l', '--log-prefix', os.path.join(d, 'log')] + extra
        for opt, env in (('-h', 'host'), ('-p', 'port')):
            if getattr(a, env):
                cmd += [opt, str(getattr(a, env))]
        cmd.append(a.dbname or os.environ.get('PGDATABASE', ''))
        subprocess.run(cmd, check=True, cwd=d, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        lat = []
        for name in os.listdir(d):
            if name.startswith('log'):
                with open(os.path.join(d, name)) as f:
                    for line in f:
                        fields = line.split()
                        # time, less the schedule lag of -R: the transaction's own latency
                        lag = int(fields[6]) if len(fields) > 6 else 0
                        lat.append((int(fields[2]) - lag) / 1e6)
        return lat


def changes_made(cur, table):
    """inserts, updates and deletes counted on table so far (the statistics of ended sessions)"""
    q(cur, 'SELECT pg_stat_clear_snapshot()')
    return q(cur, "SELECT n_tup_ins + n_tup_upd + n_tup_del FROM pg_stat_user_tables WHERE relid = %s::regclass",
             (table,))[0][0]


def wait_caught_up(cur, target, timeout=3600):
    t0 = time.time()
    while time.time() - t0 < timeout:
        row = q(cur, "SELECT caught_up_lsn >= %s::pg_lsn, state, last_error FROM zipper_lake.followers"
                     " WHERE tbl = 'fw_hist'::regclass", (target,))[0]
        if row[0]:
            return time.time()
        if row[1] != 'running':
            raise RuntimeError(f'the follower stopped: {row[2]}')
        time.sleep(0.01)
    raise RuntimeError('the follower did not catch up')


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))] if xs else float('nan')


def main():
    a = parse_args()
    conn = connect(a, autocommit=True)
    cur = conn.cursor()
    q(cur, 'CREATE EXTENSION IF NOT EXISTS zipper_lake')
    if q(cur, "SELECT current_setting('wal_level')")[0][0] != 'logical' or \
            'zipper_lake' not in q(cur, "SELECT current_setting('shared_preload_libraries')")[0][0]:
        print('bench_follow skipped: needs wal_level = logical and shared_preload_libraries = zipper_lake')
        write_json(a, 'follow', {'keys': a.keys, 'changes': a.changes, 'per_tx': a.per_tx, 'seconds': a.seconds},
                   [], skipped=True)
        return 0
    q(cur, "SELECT zipper_lake.unfollow(tbl) FROM zipper_lake.followers WHERE tbl::text = 'fw_hist'")
    cur.execute(SETUP, {'keys': a.keys})
    cur.execute('VACUUM ANALYZE fw_src, fw_trg, fw_scd')
    q(cur, "SELECT * FROM zipper_lake.follow('fw_hist', 'fw_src', publication => 'fw_pub')")
    print(f'bench_follow: keys={a.keys} changes={a.changes} seconds={a.seconds} '
          '(source: this database; follower defaults: batch_changes 10000, batch_interval 1 s)', flush=True)

    # sustained rate: a backlog applied by the follower; the same transactions through the trigger
    q(cur, "SELECT zipper_lake.pause('fw_hist')")
    while q(cur, "SELECT worker_pid IS NOT NULL FROM zipper_lake.followers WHERE tbl = 'fw_hist'::regclass")[0][0]:
        time.sleep(0.05)
    per_client = str(max(1, a.changes // a.per_tx // 2))
    before = changes_made(cur, 'fw_src')
    pgbench(a, 'fw_src', ['-c', '2', '-t', per_client])
    n_src = changes_made(cur, 'fw_src') - before
    target = q(cur, 'SELECT pg_current_wal_flush_lsn()')[0][0]
    t0 = time.time()
    q(cur, "SELECT zipper_lake.resume('fw_hist')")
    rate_f = n_src / (wait_caught_up(cur, target) - t0)
    before = changes_made(cur, 'fw_trg')
    t0 = time.time()
    pgbench(a, 'fw_trg', ['-c', '2', '-t', per_client])
    rate_t = (changes_made(cur, 'fw_trg') - before) / (time.time() - t0)
    print(f'sustained: follower {rate_f:,.0f} changes/s; trigger SCD2 {rate_t:,.0f} changes/s; '
          f'follower / trigger {rate_f / rate_t:.2f}', flush=True)

    # lag at half the follower's rate; what the trigger adds at that rate
    rate = max(1, int(rate_f / 2))
    tx_rate = str(max(1, rate // a.per_tx))
    samples = []
    stop = threading.Event()

    def sample():
        c = connect(a, autocommit=True).cursor()
        while not stop.is_set():
            samples.append(q(c, "SELECT extract(epoch FROM clock_timestamp() - applied_commit_time)"
                                " FROM zipper_lake.followers WHERE tbl = 'fw_hist'::regclass")[0][0])
            time.sleep(0.05)

    th = threading.Thread(target=sample)
    time.sleep(1.5)
    th.start()
    before = changes_made(cur, 'fw_src')
    lat_src = pgbench(a, 'fw_src', ['-c', '2', '-R', tx_rate, '-T', str(a.seconds)])
    achieved = (changes_made(cur, 'fw_src') - before) / a.seconds
    stop.set()
    th.join()
    lags = [float(x) for x in samples[len(samples) // 10:] if x is not None]
    lat_trg = pgbench(a, 'fw_trg', ['-c', '2', '-R', tx_rate, '-T', str(a.seconds)])
    wait_caught_up(cur, q(cur, 'SELECT pg_current_wal_flush_lsn()')[0][0])
    lag_med, lag_p99 = median(lags), pct(lags, 0.99)
    add_med = median(lat_trg) - median(lat_src)
    add_p99 = pct(lat_trg, 0.99) - pct(lat_src, 0.99)
    print(f'at {rate:,} changes/s ({achieved:,.0f} achieved): history lag median {lag_med * 1000:.0f} ms, p99 {lag_p99 * 1000:.0f} ms; '
          f'source transaction latency median {median(lat_src) * 1000:.2f} ms without, '
          f'{median(lat_trg) * 1000:.2f} ms with the trigger (p99 {pct(lat_src, 0.99) * 1000:.2f} / '
          f'{pct(lat_trg, 0.99) * 1000:.2f} ms)', flush=True)

    problems = []
    for src, hist, cond in (('fw_src', 'fw_hist', "valid_to = 'infinity'"), ('fw_trg', 'fw_scd', "valid_to = 'infinity'")):
        n = q(cur, f"""SELECT (SELECT count(*) FROM (SELECT * FROM {src} EXCEPT ALL
                                SELECT id, owner, bal FROM {hist} WHERE {cond}) x)
                            + (SELECT count(*) FROM (SELECT id, owner, bal FROM {hist} WHERE {cond}
                                EXCEPT ALL SELECT * FROM {src}) y)""")[0][0]
        if n:
            problems.append(f'{hist}: {n} open versions differ from {src}')
    if not a.keep:
        q(cur, "SELECT zipper_lake.unfollow('fw_hist')")
        cur.execute('DROP TABLE fw_src, fw_hist, fw_trg, fw_scd; DROP PUBLICATION fw_pub; DROP FUNCTION fw_scd2()')
    results = [
        result('follow_rate', 'changes a second a follower applies (baseline: a heap SCD2 trigger)',
               1 / rate_f, 1 / rate_t, 's', rate_follower=rate_f, rate_trigger=rate_t),
        result('follow_lag', 'history lag at half that rate, median (baseline: what the trigger adds to a '
               'source transaction)', lag_med, add_med, 's', rate=rate, achieved=achieved, lag_p99=lag_p99,
               added_p99=add_p99),
    ]
    write_json(a, 'follow', {'keys': a.keys, 'changes': a.changes, 'per_tx': a.per_tx, 'seconds': a.seconds},
               results)
    for p in problems:
        print('PROBLEM: ' + p)
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
