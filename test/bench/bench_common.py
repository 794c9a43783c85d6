"""
test/bench/bench_common.py -- what the benchmarks share: connection
options, connecting, running a query, comparing two tables, the size
facts of a zipper table, staging a batch of changes, and results as JSON
for report.py.
"""
import io
import json
import statistics

import psycopg2


def add_connection_args(p):
    """--host, --port, --dbname (else the libpq environment)."""
    for opt in ('--host', '--port', '--dbname'):
        p.add_argument(opt)


def connect(a, autocommit):
    kw = {}
    for k in ('host', 'port', 'dbname'):
        if getattr(a, k):
            kw[k] = getattr(a, k)
    conn = psycopg2.connect(**kw)
    conn.autocommit = autocommit
    return conn


def q(cur, sql, args=None):
    cur.execute(sql, args)
    return cur.fetchall() if cur.description else None


def rows_differ(cur, a, b):
    """How many rows one of two tables holds more than the other (EXCEPT ALL both ways)."""
    return q(cur, f"""SELECT (SELECT count(*) FROM (SELECT * FROM {a} EXCEPT ALL SELECT * FROM {b}) x)
                           + (SELECT count(*) FROM (SELECT * FROM {b} EXCEPT ALL SELECT * FROM {a}) y)""")[0][0]


def median(xs):
    return statistics.median(xs) if xs else float('nan')


class KeySpace:
    """Alive keys (with an open version), every key that ever was, and the
    next new key."""

    def __init__(self, alive, next_id):
        self.alive = list(alive)
        self.pos = {k: i for i, k in enumerate(self.alive)}
        self.ever = list(self.alive)
        self.next_id = next_id

    def remove(self, k):
        i = self.pos.pop(k)
        last = self.alive.pop()
        if i < len(self.alive):
            self.alive[i] = last
            self.pos[last] = i

    def add(self, k):
        self.pos[k] = len(self.alive)
        self.alive.append(k)
        self.ever.append(k)

    def pick_batch(self, rng, n):
        """The keys of a batch of n changes, 80% updates of alive keys, 10%
        deletes of others, 10% new keys: (updated, deleted, new); the key
        space already counts the batch as applied."""
        n_new = n_del = n // 10
        n_upd = n - n_new - n_del
        picked = rng.sample(self.alive, n_upd + n_del)
        upd, dele = picked[:n_upd], picked[n_upd:]
        new = list(range(self.next_id, self.next_id + n_new))
        self.next_id += n_new
        for k in dele:
            self.remove(k)
        for k in new:
            self.add(k)
        return upd, dele, new


def check_batch_size(p, a):
    """argparse: a batch of a.batch changes must find its updates and
    deletes among a.keys distinct alive keys (KeySpace.pick_batch)."""
    if a.batch * 0.9 > a.keys:
        p.error('--batch is too large for --keys (updates and deletes need distinct alive keys)')


def stage_changes(cur, rows, columns, stage, changes, open_table, t0, day):
    """Create table `changes` (id, the columns, change_time, op) from `rows`
    of (id, kind, op, secs, *values of columns), kind one of new, chg, noop,
    del.  columns are (name, type, keep): an update leaves a keep column
    whose value is NULL as the key's open version in open_table has it; a
    no-op copies every column of the open version; a delete has none."""
    cur.execute(f'DROP TABLE IF EXISTS {changes}, {stage}')
    cur.execute(f"""CREATE TEMP TABLE {stage} (id bigint, kind text, op text, secs float8,
                   {', '.join(f'{c} {t}' for c, t, _ in columns)})""")
    buf = '\n'.join('\t'.join(r'\N' if v is None else str(v) for v in r) for r in rows) + '\n'
    cur.copy_from(io.StringIO(buf), stage)
    values = ',\n'.join(
        f"""CASE s.kind WHEN 'del' THEN NULL WHEN 'new' THEN s.{c} WHEN 'noop' THEN h.{c}
                       ELSE {f'coalesce(s.{c}, h.{c})' if keep else f's.{c}'} END AS {c}"""
        for c, _, keep in columns)
    # values of updates come from the key's open version, read before any
    # table is written
    cur.execute(f"""
        CREATE TABLE {changes} AS
        SELECT s.id, {values},
               timestamptz '{t0}' + %s * interval '1 day' + s.secs * interval '1 second' AS change_time,
               s.op
          FROM {stage} s
          LEFT JOIN {open_table} h ON h.id = s.id AND h.valid_to = 'infinity'
         ORDER BY random()""", (day,))
    cur.execute(f'DROP TABLE {stage}')


def zipper_stats(conn, tbl):
    """Size facts of a zipper table: file size, blocks its visible sub-groups
    use (the rest is space of replaced sub-groups), metadata (best effort:
    the catalog tables may not be readable)."""
    cur = conn.cursor()
    r = {}
    r['total'], r['file_blocks'] = q(cur, f"SELECT pg_total_relation_size('{tbl}'), pg_relation_size('{tbl}') / 8192")[0]
    r['subgroups'], r['live_blocks'], r['masked_rows'] = q(cur, f"""
        SELECT count(*), coalesce(sum(blocks), 0), coalesce(sum(masked_rows), 0)
          FROM zipper_lake.inspect('{tbl}')""")[0]
    tx = not conn.autocommit
    try:
        if tx:
            cur.execute('SAVEPOINT zl_meta')
        cat = catalog_bytes(cur, tbl)
        r['meta'] = cat.get('subgroup', 0) + cat.get('mask', 0)
    except psycopg2.Error:
        if tx:
            cur.execute('ROLLBACK TO SAVEPOINT zl_meta')
        r['meta'] = None
    # the change record (README "Change semantics"), readable with SELECT on the table
    # (0 in builds older than the record, compared by compare_builds.sh: no inspect_record)
    has_record = q(cur, "SELECT to_regproc('zipper_lake.inspect_record') IS NOT NULL")[0][0]
    r['record'] = q(cur, f"SELECT coalesce(sum(bytes), 0) FROM zipper_lake.inspect_record('{tbl}')")[0][0] \
        if has_record else 0
    if tx:
        conn.commit()
    r['all_bytes'] = r['total'] + (r['meta'] or 0) + r['record']
    return r


def catalog_bytes(cur, tbl):
    """Bytes of the rows zipper_lake's catalog (every table of schema
    zipper_lake) holds for one zipper table, by catalog table: the sum of
    pg_column_size of its rows (tuple header and out-of-line values such as
    key directories included; the catalog's indexes not).  A catalog table
    is matched by its column storage_id (the table's storages), tbl or
    relid; one with none of them maps to None.  Needs read access to the
    catalog (raises psycopg2.Error otherwise)."""
    cats = q(cur, """
        SELECT c.relname::text, array_agg(a.attname::text)
          FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
          JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
         WHERE n.nspname = 'zipper_lake' AND c.relkind = 'r'
         GROUP BY 1 ORDER BY 1""")
    out = {}
    for rel, cols in cats:
        if 'storage_id' in cols:
            where = f"storage_id IN (SELECT storage_id FROM zipper_lake.storage WHERE relid = '{tbl}'::regclass)"
        elif 'tbl' in cols or 'relid' in cols:
            where = f"{'tbl' if 'tbl' in cols else 'relid'} = '{tbl}'::regclass"
        else:
            out[rel] = None
            continue
        out[rel] = q(cur, f'SELECT coalesce(sum(pg_column_size(x.*)), 0) FROM zipper_lake.{rel} x WHERE {where}')[0][0]
    return out


def describe_zipper(r):
    meta = 'n/a' if r['meta'] is None else f"~{r['meta'] / 2**20:.1f} MB"
    dead = 1 - r['live_blocks'] / r['file_blocks'] if r['file_blocks'] else 0
    return (f"{r['total'] / 2**20:.1f} MB + metadata {meta} + change record {r['record'] / 2**20:.1f} MB; "
            f"{r['subgroups']} sub-groups, "
            f"{r['masked_rows']} masked rows; visible sub-groups use {r['live_blocks']} of "
            f"{r['file_blocks']} blocks ({dead:.0%} of the file is space of replaced sub-groups)")


def add_json_arg(p):
    """--json FILE: the results also as JSON (report.py reads them)."""
    p.add_argument('--json', metavar='FILE',
                   help='also write the results as JSON to FILE (for report.py)')


def result(key, what, zipper, baseline, unit, ratio=None, **extra):
    """One measurement: zipper_lake against its baseline (the heap table and
    its job, unless `what` says otherwise).  ratio is baseline / zipper
    (> 1: zipper_lake faster, or smaller for sizes) unless given."""
    zipper, baseline = (None if x is None else float(x) for x in (zipper, baseline))
    if ratio is None:
        ratio = baseline / zipper if zipper and baseline is not None else None
    r = {'key': key, 'what': what, 'zipper': zipper, 'baseline': baseline, 'unit': unit, 'ratio': ratio}
    r.update(extra)
    return r


def write_json(a, bench, size, results, **extra):
    """Write the results of one run to a.json, if given: bench is the
    script's short name, size says what was measured (keys, batches)."""
    if not getattr(a, 'json', None):
        return
    doc = {'bench': bench, 'size': size, 'smoke': bool(getattr(a, 'smoke', False)), 'results': results}
    doc.update(extra)
    with open(a.json, 'w') as f:
        json.dump(doc, f, indent=1)
        f.write('\n')
