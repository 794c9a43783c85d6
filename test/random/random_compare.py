#!/usr/bin/env python3
"""
test/random/random_compare.py — randomized comparison test for zipper_lake.

What it checks
--------------
For each seed, a stream of random change batches (and now and then a snapshot)
is applied to

  * rc_zip — a zipper_lake table, through zipper_lake.apply_changes /
             zipper_lake.apply_snapshot;
  * rc_ref — an ordinary heap table, through the PL/pgSQL reference
             implementation in reference.sql (zl_ref.apply_changes /
             zl_ref.apply_snapshot);
  * a Python model of SPEC §1 kept in this file (two of them, see below).

After every batch: rc_ref equals the Python model and satisfies the zipper
invariants; rc_zip equals rc_ref row for row; zipper_lake.verify('rc_zip')
returns no rows; and (unless --no-read-helpers) zipper_lake.as_of,
zipper_lake.changes and the equivalent plain-SQL predicates on rc_zip return
what the reference queries return on rc_ref at random instants / windows.
With --reference-only the zipper table is not used at all: the reference is
checked against the Python models alone, which validates the reference before
the extension exists.

Python models
-------------
VersionModel is a literal transcription of the table in SPEC §1 on a sorted
list of versions (split / cut / fill the gap, then merge equal neighbours).
TimelineModel is independent of that table: it stores, per key, the state
(a value or "absent") of every hour cell of the time grid, and a change at t
simply sets the state from t to the end of the run of equal cells that
contains t.  Because versions are always maximal runs (equal neighbours are
merged), "the version / gap containing t" is exactly "the run containing t",
so both models must agree; they are compared after every batch.

Random data
-----------
Everything comes from random.Random(seed), so a seed reproduces a run.
Times are whole hours after BASE (so equal instants, same-instant replacement
and changes exactly at an existing valid_from are frequent), values come from
tiny domains including NULL (so no-ops and equal-neighbour merges are
frequent; a third of the values are copied from the key's neighbouring
versions), ops mix every upsert / delete spelling and case, batches contain
identical duplicates, some batches carry a seq column with several changes
for one (key, instant) ordered by seq, some have no op column, some are views,
some have their columns in another order, and some are re-applied right away
(which must change nothing, unless the batch has seq ties: see has_ties).  --mode inorder keeps every batch at or after the
newest instant applied so far, late draws times from the whole past, mixed
(the default) mixes both within and across batches.  Snapshots are taken at or
after the newest applied instant (the classic end-of-day job).

Batches without seq never contain two different changes for the same key and
instant (the spec rejects those); batches with seq never repeat a seq for one
(key, instant) except in exact duplicates.

Usage: see README.md in this directory.  Exit status 0 = all seeds passed,
1 = mismatch (seed, batch, its contents and the diff are printed).
"""

import argparse
import collections
import datetime
import decimal
import os
import random
import sys
import tempfile
import time

try:
    import psycopg2
    import psycopg2.extras
except ImportError:  # e.g. a pyenv python ahead of Debian's in PATH
    if os.path.exists("/usr/bin/python3") and os.path.realpath(sys.executable) != \
            os.path.realpath("/usr/bin/python3") and not os.environ.get("RC_REEXEC"):
        os.environ["RC_REEXEC"] = "1"
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    sys.exit("random_compare.py needs psycopg2: apt-get install -y python3-psycopg2")

HERE = os.path.dirname(os.path.abspath(__file__))
BASE = datetime.datetime(2026, 3, 1, tzinfo=datetime.timezone.utc)
BASE_EPOCH = decimal.Decimal(int(BASE.timestamp()))
INF = float("inf")          # hour offset of 'infinity'

UPSERT_OPS = ["I", "U", "c", "u", "r", "insert", "update", "upsert",
              "i", "C", "R", "INSERT", "Update", "UPSERT", None]
DELETE_OPS = ["D", "d", "delete", "DELETE", "Delete"]
NAMES = [None, "a", "b"]
AMOUNTS = [None, 1, 2]

COLS = "id, name, amount, valid_from, valid_to"
TABLE_DDL = ("(id int, name text, amount int, "
             "valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)")


def ts(hour):
    """Hour offset -> timestamptz parameter."""
    if hour == INF:
        return "infinity"
    return BASE + datetime.timedelta(hours=hour)


def fmt_hour(h):
    return "inf" if h == INF else "h%g" % h


def is_upsert(op):
    if op is None or op.lower() in ("i", "u", "c", "r", "insert", "update", "upsert"):
        return True
    if op.lower() in ("d", "delete"):
        return False
    raise ValueError("unknown op %r" % op)


# A change as generated and loaded into rc_changes.  hour is an int offset.
Change = collections.namedtuple("Change", "id name amount hour op seq")


def normalize_batch(changes):
    """SPEC §1 batch preparation: collapse identical duplicates, order per key
    by (change_time, seq).  Returns [(id, hour, seq, upsert, vals)]."""
    rows = set()
    for c in changes:
        up = is_upsert(c.op)
        vals = (c.name, c.amount) if up else None   # a delete carries no value
        rows.add((c.id, c.hour, c.seq, up, vals))
    seen = collections.Counter((r[0], r[1], r[2]) for r in rows)
    bad = [k for k, n in seen.items() if n > 1]
    if bad:  # the generator must never do this; the engines would reject it
        raise AssertionError("generator produced conflicting changes for %r" % (bad[:3],))
    return sorted(rows, key=lambda r: (r[0], r[1], -1 if r[2] is None else r[2]))


class VersionModel:
    """Literal SPEC §1: per key a sorted list of (valid_from, valid_to, vals)."""

    def __init__(self):
        self.keys = {}
        self.events = collections.Counter()     # what kinds of edits happened

    def copy(self):
        m = VersionModel()
        m.keys = {k: list(v) for k, v in self.keys.items()}
        return m

    def apply(self, key, t, upsert, vals):
        vs = self.keys.setdefault(key, [])
        if vs and t < max(v[0] for v in vs):
            self.events["late"] += 1
        inside = [v for v in vs if v[0] <= t < v[1]]
        assert len(inside) <= 1
        if upsert:
            if inside and inside[0][2] == vals:
                self.events["noop"] += 1
                return
            if inside:
                a, b, w = inside[0]
                vs.remove(inside[0])
                if a < t:
                    vs.append((a, t, w))
                    self.events["split"] += 1
                else:
                    self.events["same_instant_replace"] += 1
                vs.append((t, b, vals))
            else:
                n = min([v[0] for v in vs if v[0] > t], default=INF)
                vs.append((t, n, vals))
                self.events["gap_fill" if n != INF else "open_insert"] += 1
        else:
            if not inside:
                self.events["delete_in_gap"] += 1
                return
            a, b, w = inside[0]
            vs.remove(inside[0])
            if a < t:
                vs.append((a, t, w))
            self.events["delete"] += 1
        vs.sort(key=lambda v: v[0])
        self._merge(vs)

    def _merge(self, vs):
        i = 0
        while i + 1 < len(vs):
            (a, b, x), (c, d, y) = vs[i], vs[i + 1]
            if b == c and x == y:       # None == None, like IS NOT DISTINCT FROM
                vs[i:i + 2] = [(a, d, x)]
                self.events["merge"] += 1
            else:
                i += 1

    def rows(self):
        return sorted(((k,) + v[2] + (v[0], v[1]) for k, vs in self.keys.items() for v in vs),
                      key=sort_key)

    def open_image(self):
        return {k: v[2] for k, vs in self.keys.items() for v in vs if v[1] == INF}


ABSENT = object()


class TimelineModel:
    """Independent model: per key one state per hour cell (cell H-1 reaches to
    infinity); a change at t sets the run of equal cells containing t, from t on."""

    def __init__(self, hours):
        self.hours = hours
        self.keys = {}

    def apply(self, key, t, upsert, vals):
        cells = self.keys.setdefault(key, [ABSENT] * self.hours)
        old, end = cells[t], t + 1
        while end < self.hours and cells[end] == old:
            end += 1
        cells[t:end] = [vals if upsert else ABSENT] * (end - t)

    def rows(self):
        out = []
        for k, cells in self.keys.items():
            i = 0
            while i < self.hours:
                j = i + 1
                while j < self.hours and cells[j] == cells[i]:
                    j += 1
                if cells[i] is not ABSENT:
                    out.append((k,) + cells[i] + (i, INF if j == self.hours else j))
                i = j
        return sorted(out, key=sort_key)


def sort_key(row):
    """Total order on rows that may contain None."""
    return tuple((0, 0) if x is None else (1, x) for x in row)


def as_of(rows, t):
    return sorted((r for r in rows if r[3] <= t < r[4]), key=sort_key)


def changes_in(rows, f, u):
    return sorted((r for r in rows if f <= r[3] < u or f <= r[4] < u), key=sort_key)


# --------------------------------------------------------------------------- generation

class Generator:
    """Random batches for one seed.  Knows the current model so that it can
    copy neighbouring values (to provoke no-ops and merges)."""

    def __init__(self, rng, args, hours):
        self.rng = rng
        self.args = args
        self.hours = hours
        self.window = 6                 # in-order batches cover [wm, wm + window]
        self.wm = 0                     # newest instant applied so far

    def hour(self, late):
        hi = min(self.hours - 1, self.wm + self.window)
        lo = 0 if late else min(self.wm, hi)
        return self.rng.randint(lo, hi)

    def value(self, model, key, t):
        rng = self.rng
        vs = model.keys.get(key, [])
        if vs and rng.random() < 0.35:
            # the value at t, just before or just after t: no-ops and merges
            near = [v for v in vs if v[0] <= t < v[1]] + \
                   [v for v in vs if v[1] == t] + [v for v in vs if v[0] > t][:1]
            if near:
                return rng.choice(near)[2]
        return rng.choice(NAMES), rng.choice(AMOUNTS)

    def batch_kind(self):
        mode = self.args.mode
        if mode != "mixed":
            return mode
        return self.rng.choices(["inorder", "late", "mixed"], [5, 2, 3])[0]

    def changes(self, model, kind):
        """One batch: (changes, has_op, has_seq)."""
        rng, args = self.rng, self.args
        has_seq = rng.random() < 0.3
        has_op = rng.random() >= 0.07
        out = []
        first_at = {}                       # (id, hour) -> first change there
        used_seq = set()
        while len(out) < args.batch_size:
            if out and rng.random() < 0.08:                 # identical duplicate
                out.append(rng.choice(out))
                continue
            late = kind == "late" or (kind == "mixed" and rng.random() < 0.3)
            key = rng.randint(1, args.keys)
            hour = self.hour(late)
            if has_seq and out and rng.random() < 0.25:     # a seq tie to break
                other = rng.choice(out)
                key, hour = other.id, other.hour
            if has_op and rng.random() < 0.22:
                op = rng.choice(DELETE_OPS)
                name, amount = rng.choice(NAMES), rng.choice(AMOUNTS)
            else:
                op = rng.choice(UPSERT_OPS) if has_op else None
                name, amount = self.value(model, key, hour)
            seq = None
            if has_seq:
                seq = rng.randint(1, 10 * args.batch_size)
                while seq in used_seq:
                    seq = rng.randint(1, 10 * args.batch_size)
                used_seq.add(seq)
            c = Change(key, name, amount, hour, op, seq)
            if not has_seq and (key, hour) in first_at:
                # without seq only an identical duplicate may share the instant
                c = first_at[(key, hour)]
            first_at.setdefault((key, hour), c)
            out.append(c)
        rng.shuffle(out)
        return out, has_op, has_seq

    def snapshot(self, model):
        """(rows, hour, deletes): the current image with random edits."""
        rng = self.rng
        rows = []
        for key, vals in sorted(model.open_image().items()):
            r = rng.random()
            if r < 0.15:
                continue                                    # key vanishes
            if r < 0.35:
                vals = (rng.choice(NAMES), rng.choice(AMOUNTS))
            rows.append((key,) + vals)
        present = {r[0] for r in rows}
        for key in range(1, self.args.keys + 1):            # keys (re)appearing
            if key not in present and rng.random() < 0.1:
                rows.append((key, rng.choice(NAMES), rng.choice(AMOUNTS)))
        rng.shuffle(rows)
        hour = min(self.hours - 1, self.wm + rng.randint(0, 3))
        return rows, hour, rng.random() < 0.8


def has_ties(changes):
    """Whether a batch has two different changes for one (key, instant)."""
    slots = collections.Counter((r[0], r[1]) for r in normalize_batch(changes))
    return any(n > 1 for n in slots.values())


def snapshot_as_changes(model, rows, hour, deletes):
    """SPEC §2 in terms of §1: upserts for the rows, deletes for missing open keys."""
    out = [Change(r[0], r[1], r[2], hour, "U", None) for r in rows]
    if deletes:
        present = {r[0] for r in rows}
        out += [Change(k, None, None, hour, "D", None)
                for k in sorted(model.open_image()) if k not in present]
    return out


# --------------------------------------------------------------------------- database

class Failure(Exception):
    pass


class Db:
    def __init__(self):
        self.conn = psycopg2.connect("")        # libpq environment variables
        self.conn.autocommit = True
        self.cur = self.conn.cursor()
        self.cur.execute("SET client_min_messages = warning")

    def run(self, sql, params=None):
        self.cur.execute(sql, params)

    def all(self, sql, params=None):
        self.cur.execute(sql, params)
        return self.cur.fetchall()

    def rows(self, sql, params=None):
        """Rows of a query over (id, name, amount, valid_from, valid_to) as
        sorted tuples with hour offsets."""
        res = self.all("SELECT id, name, amount, extract(epoch FROM valid_from), "
                       "extract(epoch FROM valid_to) FROM (%s) q" % sql, params)
        return sorted((r[:3] + (to_hour(r[3]), to_hour(r[4])) for r in res), key=sort_key)

    def drop(self, name):
        kind = self.all("SELECT relkind FROM pg_class WHERE oid = to_regclass(%s)", (name,))
        if kind:
            self.run("DROP %s %s CASCADE" % ("VIEW" if kind[0][0] == "v" else "TABLE", name))


def to_hour(epoch):
    if epoch is None:
        return None
    if epoch.is_infinite():
        return INF if epoch > 0 else -INF
    h = (epoch - BASE_EPOCH) / 3600
    return int(h) if h == int(h) else float(h)


def diff(expected, actual):
    e, a = collections.Counter(expected), collections.Counter(actual)
    missing = sorted((e - a).elements(), key=sort_key)
    extra = sorted((a - e).elements(), key=sort_key)
    return missing, extra


def fmt_row(r):
    return "(id=%s name=%s amount=%s [%s, %s))" % (r[0], r[1], r[2], fmt_hour(r[3]), fmt_hour(r[4]))


# --------------------------------------------------------------------------- one seed

class SeedRun:
    def __init__(self, db, args, seed):
        self.db, self.args, self.seed = db, args, seed
        self.rng = random.Random(seed)          # data: same in every mode
        self.probe_rng = random.Random("probe-%d" % seed)   # read-check instants
        self.hours = args.batches * 6 + 24
        self.gen = Generator(self.rng, args, self.hours)
        self.model = VersionModel()
        self.timeline = TimelineModel(self.hours)
        self.zip = not args.reference_only
        self.counts = collections.Counter()
        self.stats = collections.Counter()      # summed apply_changes results

    # ---- setup
    def setup(self):
        db = self.db
        for name in ("rc_changes", "rc_changes_data", "rc_snapshot", "rc_ref", "rc_zip"):
            db.drop(name)
        db.run("CREATE TABLE rc_ref " + TABLE_DDL)
        if self.zip:
            db.run("CREATE TABLE rc_zip " + TABLE_DDL + " USING zipper_lake")
            db.run("SELECT zipper_lake.register('rc_zip', key => ARRAY['id'])")

    # ---- loading
    def load_changes(self, changes, has_op, has_seq):
        db, rng = self.db, self.rng
        db.drop("rc_changes")
        db.drop("rc_changes_data")
        cols = [("id", "int"), ("name", "text"), ("amount", "int"), ("change_time", "timestamptz")]
        if has_op:
            cols.append(("op", "text"))
        if has_seq:
            cols.append(("seq", "int"))
        if rng.random() < 0.2:
            rng.shuffle(cols)                   # columns are matched by name
        as_view = rng.random() < 0.1
        table = "rc_changes_data" if as_view else "rc_changes"
        db.run("CREATE TABLE %s (%s)" % (table, ", ".join("%s %s" % c for c in cols)))
        values = []
        for c in changes:
            d = {"id": c.id, "name": c.name, "amount": c.amount,
                 "change_time": ts(c.hour), "op": c.op, "seq": c.seq}
            values.append(tuple(d[n] for n, _ in cols))
        psycopg2.extras.execute_values(
            db.cur, "INSERT INTO %s (%s) VALUES %%s" % (table, ", ".join(n for n, _ in cols)),
            values, page_size=1000)
        if as_view:
            db.run("CREATE VIEW rc_changes AS SELECT * FROM rc_changes_data")
        return "view" if as_view else "table"

    # ---- applying
    def apply_changes(self, has_seq):
        db = self.db
        seq_arg = ", seq => 'seq'" if has_seq else ""
        if self.zip:
            res = db.all("SELECT * FROM zipper_lake.apply_changes('rc_zip', 'rc_changes'%s)" % seq_arg)
            cols = [d[0] for d in db.cur.description]
            for row in res:
                self.stats.update({k: v for k, v in zip(cols, row) if isinstance(v, int)})
        db.run("SELECT zl_ref.apply_changes('rc_ref', 'rc_changes', ARRAY['id']%s)" % seq_arg)

    def apply_snapshot(self, rows, hour, deletes):
        db = self.db
        db.drop("rc_snapshot")
        db.run("CREATE TABLE rc_snapshot (id int, name text, amount int)")
        if rows:
            psycopg2.extras.execute_values(db.cur, "INSERT INTO rc_snapshot VALUES %s", rows)
        if self.zip:
            res = db.all("SELECT * FROM zipper_lake.apply_snapshot('rc_zip', 'rc_snapshot', %s, "
                         "deletes => %s)", (ts(hour), deletes))
            cols = [d[0] for d in db.cur.description]
            for row in res:
                self.stats.update({k: v for k, v in zip(cols, row) if isinstance(v, int)})
        db.run("SELECT zl_ref.apply_snapshot('rc_ref', 'rc_snapshot', ARRAY['id'], %s, %s)",
               (ts(hour), deletes))

    def apply_model(self, changes):
        for key, hour, _seq, up, vals in normalize_batch(changes):
            self.model.apply(key, hour, up, vals)
            self.timeline.apply(key, hour, up, vals)

    # ---- checks
    def check(self):
        db = self.db
        expected = self.model.rows()

        # the two Python models agree
        missing, extra = diff(self.timeline.rows(), expected)
        if missing or extra:
            raise Failure("VersionModel differs from TimelineModel (bug in the test's models)",
                          missing, extra, "timeline", "version model")

        # the reference's invariants
        problems = db.all("""
            SELECT 'overlap', x.id FROM rc_ref x JOIN rc_ref y
              ON x.id = y.id AND x.ctid <> y.ctid
             AND x.valid_from < y.valid_to AND y.valid_from < x.valid_to
            UNION ALL
            SELECT 'empty or reversed period', id FROM rc_ref WHERE NOT valid_from < valid_to
            UNION ALL
            SELECT 'two open versions', id FROM rc_ref WHERE valid_to = 'infinity'
             GROUP BY id HAVING count(*) > 1
            UNION ALL
            SELECT 'adjacent equal versions', x.id FROM rc_ref x JOIN rc_ref y
              ON x.id = y.id AND x.valid_to = y.valid_from
             AND ROW(x.name, x.amount) IS NOT DISTINCT FROM ROW(y.name, y.amount)""")
        if problems:
            raise Failure("rc_ref violates invariants: %s" % problems[:10], [], [], "", "")

        # the reference equals the model
        ref = db.rows("SELECT %s FROM rc_ref" % COLS)
        missing, extra = diff(expected, ref)
        if missing or extra:
            raise Failure("rc_ref (zl_ref) differs from the Python model", missing, extra,
                          "model", "rc_ref")

        # reference read queries against the model
        for t in self.probe_instants():
            got = db.rows("SELECT %s FROM rc_ref WHERE valid_from <= %%(t)s AND valid_to > %%(t)s"
                          % COLS, {"t": ts(t)})
            missing, extra = diff(as_of(expected, t), got)
            if missing or extra:
                raise Failure("reference as-of query at %s differs from the model" % fmt_hour(t),
                              missing, extra, "model", "rc_ref")

        if not self.zip:
            return

        # the zipper table equals the reference, and is healthy
        zipped = db.rows("SELECT %s FROM rc_zip" % COLS)
        missing, extra = diff(ref, zipped)
        if missing or extra:
            raise Failure("rc_zip differs from rc_ref", missing, extra, "rc_ref", "rc_zip")
        bad = db.all("SELECT * FROM zipper_lake.verify('rc_zip')")
        if bad:
            raise Failure("zipper_lake.verify('rc_zip') reports problems:\n    " +
                          "\n    ".join(map(str, bad)), [], [], "", "")
        if self.args.no_read_helpers:
            return

        # as_of / changes / current and the pruned plain-SQL predicates
        for t in self.probe_instants():
            want = as_of(ref, t)
            for label, sql in (
                    ("zipper_lake.as_of", "SELECT %s FROM zipper_lake.as_of(NULL::rc_zip, %%(t)s)"),
                    ("plain as-of predicate on rc_zip",
                     "SELECT %s FROM rc_zip WHERE valid_from <= %%(t)s AND valid_to > %%(t)s")):
                missing, extra = diff(want, db.rows(sql % COLS, {"t": ts(t)}))
                if missing or extra:
                    raise Failure("%s at %s differs from the reference" % (label, fmt_hour(t)),
                                  missing, extra, "rc_ref", label)
        for f, u in self.probe_windows():
            want = changes_in(ref, f, u)
            for label, sql in (
                    ("zipper_lake.changes",
                     "SELECT %s FROM zipper_lake.changes(NULL::rc_zip, %%(f)s, %%(u)s)"),
                    ("plain changes predicate on rc_zip",
                     "SELECT %s FROM rc_zip WHERE (valid_from >= %%(f)s AND valid_from < %%(u)s)"
                     " OR (valid_to >= %%(f)s AND valid_to < %%(u)s)")):
                missing, extra = diff(want, db.rows(sql % COLS, {"f": ts(f), "u": ts(u)}))
                if missing or extra:
                    raise Failure("%s over [%s, %s) differs from the reference"
                                  % (label, fmt_hour(f), fmt_hour(u)), missing, extra, "rc_ref", label)
        want = [r for r in ref if r[4] == INF]
        missing, extra = diff(want, db.rows("SELECT %s FROM zipper_lake.current(NULL::rc_zip)" % COLS))
        if missing or extra:
            raise Failure("zipper_lake.current differs from the reference", missing, extra,
                          "rc_ref", "zipper_lake.current")

    def probe_instants(self):
        rng, top = self.probe_rng, self.gen.wm + 2
        pts = [rng.randint(0, top) for _ in range(3)] + [rng.randint(0, top) + 0.5, -1, self.hours + 100]
        return pts

    def probe_windows(self):
        rng, top = self.probe_rng, self.gen.wm + 2
        out = []
        for _ in range(3):
            f = rng.randint(-1, top) + rng.choice([0, 0.5])
            out.append((f, f + rng.choice([0.5, 1, 1, 3, 12, 48])))
        return out

    # ---- reporting
    def report(self, bno, kind, changes, err, before):
        out = ["MISMATCH seed=%d batch=%d (%s)" % (self.seed, bno, kind)]
        if isinstance(err, Failure):
            what, missing, extra, exp_label, got_label = err.args
            out.append("  " + what)
            out += ["  only in %-14s %s" % (exp_label + ":", fmt_row(r)) for r in missing]
            out += ["  only in %-14s %s" % (got_label + ":", fmt_row(r)) for r in extra]
            keys = {r[0] for r in missing + extra}
        else:
            out.append("  error: %s" % str(err).strip())
            keys = set()
        shown = [c for c in changes if not keys or c.id in keys]
        out.append("  batch%s (times are hours after %s):" % (
            "" if len(shown) == len(changes) else
            ", %d of %d changes: those of the keys above" % (len(shown), len(changes)),
            BASE.isoformat()))
        for c in sorted(shown, key=lambda c: (c.id, c.hour, -1 if c.seq is None else c.seq)):
            out.append("    id=%s name=%s amount=%s t=%s op=%s seq=%s" %
                       (c.id, c.name, c.amount, fmt_hour(c.hour), c.op, c.seq))
        out.append("  model state before the batch%s:" % (", those keys" if keys else ""))
        for r in sorted(before.rows(), key=lambda r: (r[0], r[3])):
            if not keys or r[0] in keys:
                out.append("    " + fmt_row(r))
        rerun = "  rerun: %s %s" % (sys.argv[0], repro_args(self.args, self.seed))
        if len(out) > 150:      # big batches: the whole story goes to a file
            path = os.path.join(tempfile.gettempdir(), "random_compare-seed%d-batch%d.txt"
                                % (self.seed, bno))
            with open(path, "w") as f:
                f.write("\n".join(out + [rerun]) + "\n")
            out = out[:60] + ["  ... %d more lines in %s" % (len(out) - 60, path)]
        print("\n".join(out + [rerun]))

    # ---- main loop
    def run(self):
        args, rng, gen = self.args, self.rng, self.gen
        self.setup()
        for bno in range(1, args.batches + 1):
            before = self.model.copy()
            if bno > 1 and rng.random() < 0.1:
                rows, hour, deletes = gen.snapshot(self.model)
                kind = "snapshot at %s, deletes=%s" % (fmt_hour(hour), deletes)
                changes = snapshot_as_changes(self.model, rows, hour, deletes)
                gen.wm = max(gen.wm, hour)
                try:
                    self.apply_model(changes)
                    self.apply_snapshot(rows, hour, deletes)
                    self.check()
                except (Failure, psycopg2.Error) as err:
                    self.report(bno, kind, changes, err, before)
                    return False
                self.counts["snapshots"] += 1
                continue

            kind = gen.batch_kind()
            changes, has_op, has_seq = gen.changes(self.model, kind)
            gen.wm = max([gen.wm] + [c.hour for c in changes])
            try:
                how = self.load_changes(changes, has_op, has_seq)
                kind += ", %s%s%s" % (how, ", seq" if has_seq else "", "" if has_op else ", no op column")
                self.apply_model(changes)
                self.apply_changes(has_seq)
                self.check()
                if rng.random() < 0.08:                  # re-applying changes nothing
                    kind += ", re-applied"
                    state = self.model.rows()
                    self.apply_model(changes)
                    missing, extra = diff(state, self.model.rows())
                    # SPEC §1 says re-applying changes nothing.  That follows from
                    # the rules only while each (key, instant) has one change: with
                    # seq ties, e.g. delete@t then upsert@t, the first apply fills
                    # the gap up to the *old* next version, the second up to the
                    # new one.  So only such batches must be idempotent.
                    if (missing or extra) and not has_ties(changes):
                        raise Failure("re-applying the batch changed the model (SPEC says "
                                      "it is idempotent)", missing, extra, "before", "after")
                    self.apply_changes(has_seq)
                    self.check()
                    self.counts["re-applied"] += 1
            except (Failure, psycopg2.Error) as err:
                self.report(bno, kind, changes, err, before)
                return False
            self.counts["changes"] += len(changes)
            self.counts["seq batches"] += has_seq
        return True


def repro_args(args, seed):
    parts = ["--seed %d" % seed, "--keys %d" % args.keys, "--batches %d" % args.batches,
             "--batch-size %d" % args.batch_size, "--mode %s" % args.mode]
    if args.reference_only:
        parts.append("--reference-only")
    if args.no_read_helpers:
        parts.append("--no-read-helpers")
    return " ".join(parts)


def parse_seeds(text):
    """'5' -> seeds 1..5; '3,17,42' -> those; '10-20' -> that range."""
    if "," in text:
        return [int(s) for s in text.split(",") if s.strip()]
    if "-" in text:
        lo, hi = text.split("-", 1)
        return list(range(int(lo), int(hi) + 1))
    return list(range(1, int(text) + 1))


def main():
    p = argparse.ArgumentParser(description="randomized comparison of zipper_lake against a reference")
    p.add_argument("--seeds", help="count N (seeds 1..N), list a,b,c or range a-b (default 3; --scale 5)")
    p.add_argument("--seed", type=int, help="run exactly this one seed")
    p.add_argument("--keys", type=int, help="key space size (default 12; --scale 300)")
    p.add_argument("--batches", type=int, help="batches per seed (default 15; --scale 30)")
    p.add_argument("--batch-size", type=int, help="changes per batch (default 30; --scale 2000)")
    p.add_argument("--mode", choices=["inorder", "late", "mixed"], default="mixed")
    p.add_argument("--reference-only", action="store_true",
                   help="check zl_ref against the Python models only; no zipper_lake needed")
    p.add_argument("--no-read-helpers", action="store_true",
                   help="skip zipper_lake.as_of / changes / current comparisons")
    p.add_argument("--scale", action="store_true", help="large sizes (defaults above)")
    p.add_argument("--verbose", action="store_true", help="also print the model's event counts")
    args = p.parse_args()

    big = args.scale
    seeds = [args.seed] if args.seed is not None else parse_seeds(args.seeds or ("5" if big else "3"))
    args.keys = args.keys or (300 if big else 12)
    args.batches = args.batches or (30 if big else 15)
    args.batch_size = args.batch_size or (2000 if big else 30)

    db = Db()
    with open(os.path.join(HERE, "reference.sql")) as f:
        db.run(f.read())
    if not args.reference_only:
        db.run("CREATE EXTENSION IF NOT EXISTS zipper_lake")

    target = "zl_ref vs Python model" if args.reference_only else "zipper_lake vs zl_ref vs Python model"
    started = time.time()
    for seed in seeds:
        t0 = time.time()
        run = SeedRun(db, args, seed)
        if not run.run():
            sys.exit(1)
        ev = run.model.events
        print("seed %d ok: %d batches (%d snapshots, %d with seq, %d re-applied), %d changes, "
              "%d versions; %d no-ops, %d late, %d same-instant, %d merges, %d deletes; %.1fs"
              % (seed, args.batches, run.counts["snapshots"], run.counts["seq batches"],
                 run.counts["re-applied"], run.counts["changes"], len(run.model.rows()),
                 ev["noop"], ev["late"], ev["same_instant_replace"], ev["merge"], ev["delete"],
                 time.time() - t0))
        if args.verbose:
            print("  model events: %s" % dict(sorted(ev.items())))
            if run.stats:
                print("  zipper_lake stats: %s" % dict(sorted(run.stats.items())))
    print("all %d seeds passed (%s, mode %s, %d keys, %d batches x %d changes) in %.1fs"
          % (len(seeds), target, args.mode, args.keys, args.batches, args.batch_size,
             time.time() - started))


if __name__ == "__main__":
    main()
