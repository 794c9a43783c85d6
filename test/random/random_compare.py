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
  * a Python model of README "Change semantics" kept in this file (two of them, see below).

After every batch:
  * the counts apply_changes / apply_snapshot return (changes, inserted,
    closed, deleted, unchanged, late; README "Change semantics") equal the
    counts of the reference and of the Python model;
  * rc_ref equals the Python model and satisfies the zipper invariants;
    rc_zip equals rc_ref row for row; zipper_lake.verify('rc_zip') returns
    no rows;
  * (unless --no-read-helpers) zipper_lake.as_of / changes / current, both
    inlined into a scan and as functions, a prepared as-of query run with a
    generic plan, and random WHERE clauses on the period columns (the pruned
    plain-SQL reads) return on rc_zip what the same reads return on rc_ref
    and what the Python model says.
With --reference-only the zipper table is not used at all: the reference is
checked against the Python models alone, which validates the reference before
the extension exists.

Table configurations
--------------------
Each seed runs one configuration of CONFIGS: period columns of type
timestamptz, timestamp or date; time_zone UTC, Asia/Shanghai, Europe/Berlin
(a DST change inside the run) or America/Havana (clocks going back to
midnight, so one local midnight happens twice); partition_unit day, month or
year; group spans down to an hour and max_subgroups down to 1 (many file
groups, rollover); open end 'infinity' or '9999-12-31'.  Seed s runs
CONFIGS[(s - 1) % len(CONFIGS)] unless --config names one, so every run of
len(CONFIGS) consecutive seeds covers them all.  The configuration is printed
with each seed and in the rerun command of a failure.  Timestamptz tables are
also read and written under a session TimeZone that changes from batch to
batch (none of the results may depend on it).

Time grid
---------
Times are whole "ticks" after the configuration's base time (an hour, or a
day for date columns), so equal instants, same-instant replacement and
changes exactly at a valid_from are frequent; the bases are chosen so that
local midnights, month or year ends and DST changes fall on the grid.  Read
probes also use half ticks and the special values -infinity, the open end
and (when the open end is finite) infinity.  Class Clock converts ticks to
SQL values and back.

Python models
-------------
VersionModel is a literal transcription of the table in README "Change semantics" on a sorted
list of versions (split / cut / fill the gap, then merge equal neighbours);
it also counts what each change does, by the definitions of README "Change
semantics" (see VersionModel.apply for the two points the README leaves
open).  TimelineModel is independent of that table: it stores, per key, the
state (a value or "absent") of every tick cell of the time grid, and a change
at t simply sets the state from t to the end of the run of equal cells that
contains t.  Because versions are always maximal runs (equal neighbours are
merged), "the version / gap containing t" is exactly "the run containing t",
so both models must agree; they are compared after every batch.

Random data
-----------
Everything comes from random.Random(seed), so a seed reproduces a run.
Values come from tiny domains including NULL (so no-ops and equal-neighbour
merges are frequent; a third of the values are copied from the key's
neighbouring versions), ops mix every upsert / delete spelling and case,
batches contain identical duplicates, some batches carry a seq column with
several changes for one (key, instant) ordered by seq, some have no op
column, some are views, some have their columns in another order, and some
are re-applied right away (which must change nothing, unless the batch has
seq ties: see has_ties).  --mode inorder keeps every batch at or after the
newest instant applied so far, late draws times from the whole past, mixed
(the default) mixes both within and across batches.  Snapshots are taken at
or after the newest applied instant (the classic end-of-day job), and may
contain identical duplicate rows.

Batches without seq never contain two different changes for the same key and
instant (the spec rejects those); batches with seq never repeat a seq for one
(key, instant) except in exact duplicates.

Usage: see README.md in this directory.  Exit status 0 = all seeds passed,
1 = mismatch (seed, configuration, batch, its contents and the diff are
printed).
"""

import argparse
import calendar
import collections
import datetime
import math
import operator
import os
import random
import sys
import tempfile
import time
import zoneinfo

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
UTC = datetime.timezone.utc

# Special ticks, ordered like the SQL values they stand for: every finite tick
# < OPEN (the table's open end) < AFTER ('infinity' when the open end is finite).
NEG = -10 ** 12             # '-infinity'
OPEN = 10 ** 12             # the open end: valid_to of open versions
AFTER = 10 ** 12 + 1        # 'infinity' beyond a finite open end
FAR_END = datetime.datetime(9999, 12, 31)     # the finite open end used

UPSERT_OPS = ["I", "U", "c", "u", "r", "insert", "update", "upsert",
              "i", "C", "R", "INSERT", "Update", "UPSERT", None]
DELETE_OPS = ["D", "d", "delete", "DELETE", "Delete"]
NAMES = [None, "a", "b"]
AMOUNTS = [None, 1, 2]
COUNTS = ("changes", "inserted", "closed", "deleted", "unchanged", "late")

COLS = "id, name, amount, valid_from, valid_to"
TABLE_DDL = ("(id int, name text, amount int, "
             "valid_from %(t)s NOT NULL, valid_to %(t)s NOT NULL)")
# session time zones timestamptz tables are used under (odd offsets, DST)
SESSION_ZONES = ["UTC", "Asia/Shanghai", "Europe/Berlin", "America/Havana",
                 "Asia/Kathmandu", "Pacific/Chatham", "America/St_Johns"]


# --------------------------------------------------------------------------- configurations

Config = collections.namedtuple(
    "Config", "name period_type tick base time_zone partition_unit "
              "history_span current_span max_subgroups open_end")

H, DAY = datetime.timedelta(hours=1), datetime.timedelta(days=1)
CONFIGS = [
    # the defaults
    Config("utc-defaults", "timestamptz", H, datetime.datetime(2026, 3, 1),
           "UTC", "day", "1 day", "1 day", 32, "infinity"),
    # local midnight at 16:00 UTC; file groups of a few hours, rollover after 2
    Config("shanghai-small-groups", "timestamptz", H, datetime.datetime(2026, 3, 1, 12),
           "Asia/Shanghai", "day", "6 hours", "3 hours", 2, "infinity"),
    # tick 7 = 2026-03-29 01:00 UTC, clocks go 02:00 -> 03:00; tick 76 = the
    # local month end; a finite open end
    Config("berlin-dst-month", "timestamptz", H, datetime.datetime(2026, 3, 28, 18),
           "Europe/Berlin", "month", "1 day", "5 hours", 3, "9999-12-31"),
    # tick 8 = local midnight of 2026-11-01, tick 9 = clocks go 01:00 -> 00:00
    # (that midnight comes twice); one-hour history groups, no room for two
    # sub-groups in a current file group
    Config("havana-midnight-twice", "timestamptz", H, datetime.datetime(2026, 10, 31, 20),
           "America/Havana", "day", "1 hour", "1 day", 1, "infinity"),
    # wall-clock timestamps: 2026-03-29 02:00-03:00 exists although Berlin
    # skips it (timestamp tables ignore time_zone)
    Config("timestamp-wallclock", "timestamp", H, datetime.datetime(2026, 3, 28, 20),
           "Europe/Berlin", "day", "3 hours", "2 hours", 1, "9999-12-31"),
    # date periods: ticks are days; month partitions, ISO-week history groups
    Config("date-month", "date", DAY, datetime.datetime(2026, 1, 25),
           "Asia/Shanghai", "month", "7 days", "2 days", 1, "9999-12-31"),
    # date periods across a year end; month-long history groups
    Config("date-year", "date", DAY, datetime.datetime(2026, 11, 20),
           "UTC", "year", "1 mon", "1 day", 4, "infinity"),
]
CONFIG_BY_NAME = {c.name: c for c in CONFIGS}
WINDOW_ORIGIN = datetime.datetime(2000, 1, 3)   # README: fixed-length windows count from here


def parse_span(text):
    """'6 hours' -> timedelta, '1 mon' -> months (int)."""
    n, unit = text.split()
    if unit.startswith("mon"):
        return int(n)
    return datetime.timedelta(**{"hours" if unit.startswith("hour") else "days": int(n)})


def describe_config(cfg):
    return ("%s: %s periods, ticks of %s from %s, time_zone %s, partition_unit %s, "
            "group spans %s (history) / %s (current), max_subgroups %d, open end %s"
            % (cfg.name, cfg.period_type, "1 day" if cfg.tick == DAY else "1 hour",
               "%s%s" % (cfg.base, " UTC" if cfg.period_type == "timestamptz" else ""),
               cfg.time_zone, cfg.partition_unit, cfg.history_span,
               cfg.current_span, cfg.max_subgroups, cfg.open_end))


class Clock:
    """Ticks (the models' time grid) <-> SQL values, for one configuration.

    Timestamp and date values are compared as wall-clock values, timestamptz
    values as instants; extract(epoch FROM x) gives both as seconds, so one
    formula turns either back into ticks."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.tick_seconds = int(cfg.tick.total_seconds())
        self.base_epoch = calendar.timegm(cfg.base.timetuple())
        self.finite_open_end = cfg.open_end != "infinity"
        self.open_end_epoch = calendar.timegm(FAR_END.timetuple()) if self.finite_open_end else None
        self.usec = 1 / (self.tick_seconds * 10 ** 6)     # one microsecond in ticks

    def wall(self, t):
        """Tick -> naive datetime (UTC for timestamptz tables)."""
        if t == OPEN and self.finite_open_end:
            return FAR_END
        return self.cfg.base + self.cfg.tick * t

    def infinity(self, t):
        if t == NEG:
            return "-infinity"
        if t == AFTER or (t == OPEN and not self.finite_open_end):
            return "infinity"
        return None

    def value(self, t):
        """A value of the period columns' type at tick t, for change times and
        WHERE clauses (on date tables a fraction of a day is a timestamp)."""
        inf = self.infinity(t)
        if inf is not None:
            return inf
        w = self.wall(t)
        if self.cfg.period_type == "timestamptz":
            return w.replace(tzinfo=UTC)
        if self.cfg.period_type == "date" and w.time() == datetime.time(0):
            return w.date()
        return w

    def arg(self, t):
        """A timestamptz argument of the zipper_lake functions at tick t.
        Timestamp and date tables take its wall clock in the session's zone,
        which the driver keeps at UTC for them."""
        inf = self.infinity(t)
        return inf if inf is not None else self.wall(t).replace(tzinfo=UTC)

    def arg_tick(self, t):
        """The tick a function sees for arg(t): a date table casts it to a date."""
        if self.cfg.period_type == "date" and NEG < t < OPEN:
            return math.floor(t)
        return t

    def tick_of(self, epoch):
        """extract(epoch FROM value) -> tick."""
        if epoch is None:
            return None
        if epoch.is_infinite():
            return NEG if epoch < 0 else AFTER if self.finite_open_end else OPEN
        if epoch == self.open_end_epoch:
            return OPEN
        t = (epoch - self.base_epoch) / self.tick_seconds
        return int(t) if t == int(t) else float(t)

    def local(self, t):
        """The wall clock of tick t that the table cuts into dates and windows
        (README: only timestamptz values are seen in time_zone)."""
        w = self.wall(t)
        if self.cfg.period_type != "timestamptz":
            return w
        return w.replace(tzinfo=UTC).astimezone(zoneinfo.ZoneInfo(self.cfg.time_zone)).replace(tzinfo=None)

    def local_exists(self, w):
        """Whether the table's zone shows wall clock w at some instant (not in a DST gap)."""
        if self.cfg.period_type != "timestamptz":
            return True
        z = zoneinfo.ZoneInfo(self.cfg.time_zone)
        return w.replace(tzinfo=z).astimezone(UTC).astimezone(z).replace(tzinfo=None) == w

    def partition_of(self, valid_to):
        """README: the partition is the local date of valid_to, truncated to the
        partition unit; open versions are in the current partition ('infinity')."""
        if valid_to == OPEN:
            return "infinity"
        d = self.local(valid_to).date()
        if self.cfg.partition_unit != "day":
            d = d.replace(day=1, month=1 if self.cfg.partition_unit == "year" else d.month)
        return d.isoformat()

    def window_of(self, partition, valid_from):
        """README: the local start of the file-group window of valid_from: whole
        months counted from January of year 0, fixed lengths from Monday
        2000-01-03 00:00."""
        span = parse_span(self.cfg.current_span if partition == "infinity" else self.cfg.history_span)
        w = self.local(valid_from)
        if isinstance(span, int):
            m = (w.year * 12 + w.month - 1) // span * span
            return datetime.datetime(m // 12, m % 12 + 1, 1)
        return WINDOW_ORIGIN + (w - WINDOW_ORIGIN) // span * span

    def show(self, t):
        if t == OPEN:
            return "open end"
        if t in (NEG, AFTER):
            return self.infinity(t)
        near = round(t * 2) / 2
        if abs(t - near) > self.usec / 2:       # a microsecond off the grid
            return "t%g%+dus=%s" % (near, round((t - near) / self.usec),
                                    self.wall(t).strftime("%m-%d %H:%M:%S.%f"))
        fmt = "%Y-%m-%d" if self.cfg.tick == DAY and t == int(t) else "%m-%d %H:%M"
        return "t%g=%s" % (t, self.wall(t).strftime(fmt))


# --------------------------------------------------------------------------- models

def is_upsert(op):
    if op is None or op.lower() in ("i", "u", "c", "r", "insert", "update", "upsert"):
        return True
    if op.lower() in ("d", "delete"):
        return False
    raise ValueError("unknown op %r" % op)


# A change as generated and loaded into rc_changes.  tick is an int.
Change = collections.namedtuple("Change", "id name amount tick op seq")


def normalize_batch(changes):
    """README "Change semantics" batch preparation: collapse identical duplicates, order per key
    by (change_time, seq).  Returns [(id, tick, seq, upsert, vals)]."""
    rows = set()
    for c in changes:
        up = is_upsert(c.op)
        vals = (c.name, c.amount) if up else None   # a delete carries no value
        rows.add((c.id, c.tick, c.seq, up, vals))
    seen = collections.Counter((r[0], r[1], r[2]) for r in rows)
    bad = [k for k, n in seen.items() if n > 1]
    if bad:  # the generator must never do this; the engines would reject it
        raise AssertionError("generator produced conflicting changes for %r" % (bad[:3],))
    return sorted(rows, key=lambda r: (r[0], r[1], -1 if r[2] is None else r[2]))


class VersionModel:
    """Literal README "Change semantics": per key a sorted list of (valid_from, valid_to, vals)."""

    def __init__(self):
        self.keys = {}
        self.events = collections.Counter()     # what kinds of edits happened

    def copy(self):
        m = VersionModel()
        m.keys = {k: list(v) for k, v in self.keys.items()}
        return m

    def apply(self, key, t, upsert, vals):
        """Apply one change; return what it adds to the counts of README
        "Change semantics".  Where the README is not explicit this follows
        zipper_lake (and reference.sql): 'inserted' counts every upsert that
        is not a no-op, also when the new version merges with a neighbour at
        once; 'closed' counts an upsert inside an open version that begins
        before t, and a delete inside an open version (also at its start)."""
        counts = collections.Counter()
        vs = self.keys.setdefault(key, [])
        if vs and t < max(v[0] for v in vs):
            self.events["late"] += 1
            counts["late"] += 1
        inside = [v for v in vs if v[0] <= t < v[1]]
        assert len(inside) <= 1
        if upsert:
            if inside and inside[0][2] == vals:
                self.events["noop"] += 1
                counts["unchanged"] += 1
                return counts
            counts["inserted"] += 1
            if inside:
                a, b, w = inside[0]
                vs.remove(inside[0])
                if a < t:
                    vs.append((a, t, w))
                    self.events["split"] += 1
                    counts["closed"] += b == OPEN
                else:
                    self.events["same_instant_replace"] += 1
                vs.append((t, b, vals))
            else:
                n = min([v[0] for v in vs if v[0] > t], default=OPEN)
                vs.append((t, n, vals))
                self.events["gap_fill" if n != OPEN else "open_insert"] += 1
        else:
            if not inside:
                self.events["delete_in_gap"] += 1
                counts["unchanged"] += 1
                return counts
            a, b, w = inside[0]
            vs.remove(inside[0])
            if a < t:
                vs.append((a, t, w))
            self.events["delete"] += 1
            counts["deleted"] += 1
            counts["closed"] += b == OPEN
        vs.sort(key=lambda v: v[0])
        self._merge(vs)
        return counts

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
        return {k: v[2] for k, vs in self.keys.items() for v in vs if v[1] == OPEN}


ABSENT = object()


class TimelineModel:
    """Independent model: per key one state per tick cell (the last cell
    reaches to the open end); a change at t sets the run of equal cells
    containing t, from t on."""

    def __init__(self, ticks):
        self.ticks = ticks
        self.keys = {}

    def apply(self, key, t, upsert, vals):
        cells = self.keys.setdefault(key, [ABSENT] * self.ticks)
        old, end = cells[t], t + 1
        while end < self.ticks and cells[end] == old:
            end += 1
        cells[t:end] = [vals if upsert else ABSENT] * (end - t)

    def rows(self):
        out = []
        for k, cells in self.keys.items():
            i = 0
            while i < self.ticks:
                j = i + 1
                while j < self.ticks and cells[j] == cells[i]:
                    j += 1
                if cells[i] is not ABSENT:
                    out.append((k,) + cells[i] + (i, OPEN if j == self.ticks else j))
                i = j
        return sorted(out, key=sort_key)


def sort_key(row):
    """Total order on rows that may contain None."""
    return tuple((0, 0) if x is None else (1, x) for x in row)


def as_of(rows, t):
    return sorted((r for r in rows if r[3] <= t < r[4]), key=sort_key)


def changes_fn(rows, f, u):
    """zipper_lake.changes(): versions that began or ended in [f, u); an open
    version has not ended (matters when the open end is finite)."""
    return sorted((r for r in rows if f <= r[3] < u or (f <= r[4] < u and r[4] != OPEN)),
                  key=sort_key)


# Random WHERE clauses on the period columns: a list of OR-ed conjunctions
# of (column, operator, tick) atoms.
OPERATORS = {"<": operator.lt, "<=": operator.le, "=": operator.eq,
             ">=": operator.ge, ">": operator.gt}
PERIOD_INDEX = {"valid_from": 3, "valid_to": 4}


def predicate_holds(pred, row):
    return any(all(OPERATORS[op](row[PERIOD_INDEX[col]], t) for col, op, t in conj)
               for conj in pred)


def predicate_sql(pred, clock):
    """(SQL text with %s placeholders, parameters)."""
    params = []
    ors = []
    for conj in pred:
        ands = []
        for col, op, t in conj:
            ands.append("%s %s %%s" % (col, op))
            params.append(clock.value(t))
        ors.append("(" + " AND ".join(ands) + ")")
    return " OR ".join(ors), params


def predicate_text(pred, clock):
    return " OR ".join("(" + " AND ".join("%s %s %s" % (c, o, clock.show(t)) for c, o, t in conj) + ")"
                       for conj in pred)


# --------------------------------------------------------------------------- generation

class Generator:
    """Random batches for one seed.  Knows the current model so that it can
    copy neighbouring values (to provoke no-ops and merges)."""

    def __init__(self, rng, args, ticks):
        self.rng = rng
        self.args = args
        self.ticks = ticks
        self.window = 6                 # in-order batches cover [wm, wm + window]
        self.wm = 0                     # newest instant applied so far

    def tick(self, late):
        hi = min(self.ticks - 1, self.wm + self.window)
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
        first_at = {}                       # (id, tick) -> first change there
        used_seq = set()
        while len(out) < args.batch_size:
            if out and rng.random() < 0.08:                 # identical duplicate
                out.append(rng.choice(out))
                continue
            late = kind == "late" or (kind == "mixed" and rng.random() < 0.3)
            key = rng.randint(1, args.keys)
            t = self.tick(late)
            if has_seq and out and rng.random() < 0.25:     # a seq tie to break
                other = rng.choice(out)
                key, t = other.id, other.tick
            if has_op and rng.random() < 0.22:
                op = rng.choice(DELETE_OPS)
                name, amount = rng.choice(NAMES), rng.choice(AMOUNTS)
            else:
                op = rng.choice(UPSERT_OPS) if has_op else None
                name, amount = self.value(model, key, t)
            seq = None
            if has_seq:
                seq = rng.randint(1, 10 * args.batch_size)
                while seq in used_seq:
                    seq = rng.randint(1, 10 * args.batch_size)
                used_seq.add(seq)
            c = Change(key, name, amount, t, op, seq)
            if not has_seq and (key, t) in first_at:
                # without seq only an identical duplicate may share the instant
                c = first_at[(key, t)]
            first_at.setdefault((key, t), c)
            out.append(c)
        rng.shuffle(out)
        return out, has_op, has_seq

    def snapshot(self, model):
        """(rows, tick, deletes): the current image with random edits."""
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
        if rows and rng.random() < 0.3:                     # an identical duplicate
            rows.append(rng.choice(rows))
        rng.shuffle(rows)
        t = min(self.ticks - 1, self.wm + rng.randint(0, 3))
        return rows, t, rng.random() < 0.8


def has_ties(changes):
    """Whether a batch has two different changes for one (key, instant)."""
    slots = collections.Counter((r[0], r[1]) for r in normalize_batch(changes))
    return any(n > 1 for n in slots.values())


def snapshot_as_changes(model, rows, t, deletes):
    """apply_snapshot (README "Reference") in terms of "Change semantics": upserts for the rows, deletes for missing open keys."""
    out = [Change(r[0], r[1], r[2], t, "U", None) for r in rows]
    if deletes:
        present = {r[0] for r in rows}
        out += [Change(k, None, None, t, "D", None)
                for k in sorted(model.open_image()) if k not in present]
    return out


# --------------------------------------------------------------------------- database

class Failure(Exception):
    pass


class CountsFailure(Failure):
    pass


class Db:
    EPOCH_COLS = ("id, name, amount, extract(epoch FROM valid_from), "
                  "extract(epoch FROM valid_to)")

    def __init__(self):
        self.conn = psycopg2.connect("")        # libpq environment variables
        self.conn.autocommit = True
        self.cur = self.conn.cursor()
        self.cur.execute("SET client_min_messages = warning")
        self.clock = None

    def run(self, sql, params=None):
        self.cur.execute(sql, params)

    def all(self, sql, params=None):
        self.cur.execute(sql, params)
        return self.cur.fetchall()

    def one(self, sql, params=None):
        """The single row of a query as a dict."""
        res = self.all(sql, params)
        assert len(res) == 1, (sql, res)
        return dict(zip((d[0] for d in self.cur.description), res[0]))

    def rows(self, sql, params=None):
        """Rows of a query over (id, name, amount, valid_from, valid_to) as
        sorted tuples with ticks."""
        return self.ticked(self.all("SELECT %s FROM (%s) q" % (self.EPOCH_COLS, sql), params))

    def ticked(self, res):
        tick = self.clock.tick_of
        return sorted((r[:3] + (tick(r[3]), tick(r[4])) for r in res), key=sort_key)

    def drop(self, name):
        kind = self.all("SELECT relkind FROM pg_class WHERE oid = to_regclass(%s)", (name,))
        if kind:
            self.run("DROP %s %s CASCADE" % ("VIEW" if kind[0][0] == "v" else "TABLE", name))


def diff(expected, actual):
    e, a = collections.Counter(expected), collections.Counter(actual)
    missing = sorted((e - a).elements(), key=sort_key)
    extra = sorted((a - e).elements(), key=sort_key)
    return missing, extra


def fmt_counts(counts):
    return ", ".join("%s %s" % (k, counts.get(k)) for k in COUNTS)


def load_changes(db, clock, changes, has_op, has_seq, rng=None):
    """Load a batch into rc_changes (README "Change semantics": columns are
    matched by name); with rng, now and then with its columns in another
    order or as a view.  Returns "table" or "view"."""
    db.drop("rc_changes")
    db.drop("rc_changes_data")
    cols = [("id", "int"), ("name", "text"), ("amount", "int"),
            ("change_time", clock.cfg.period_type)]
    if has_op:
        cols.append(("op", "text"))
    if has_seq:
        cols.append(("seq", "int"))
    if rng and rng.random() < 0.2:
        rng.shuffle(cols)                   # columns are matched by name
    as_view = rng is not None and rng.random() < 0.1
    table = "rc_changes_data" if as_view else "rc_changes"
    db.run("CREATE TABLE %s (%s)" % (table, ", ".join("%s %s" % c for c in cols)))
    values = []
    for c in changes:
        d = {"id": c.id, "name": c.name, "amount": c.amount,
             "change_time": clock.value(c.tick), "op": c.op, "seq": c.seq}
        values.append(tuple(d[n] for n, _ in cols))
    psycopg2.extras.execute_values(
        db.cur, "INSERT INTO %s (%s) VALUES %%s" % (table, ", ".join(n for n, _ in cols)),
        values, page_size=1000)
    if as_view:
        db.run("CREATE VIEW rc_changes AS SELECT * FROM rc_changes_data")
    return "view" if as_view else "table"


def load_snapshot(db, rows):
    """Load an image (id, name, amount) into rc_snapshot."""
    db.drop("rc_snapshot")
    db.run("CREATE TABLE rc_snapshot (id int, name text, amount int)")
    if rows:
        psycopg2.extras.execute_values(db.cur, "INSERT INTO rc_snapshot VALUES %s", rows)


def create_zip_table(db, cfg, clock):
    """rc_zip: a zipper table registered with the configuration's options."""
    db.run("CREATE TABLE rc_zip " + TABLE_DDL % {"t": cfg.period_type} + " USING zipper_lake")
    db.run("SELECT zipper_lake.register('rc_zip', key => ARRAY['id'], "
           "partition_unit => %s, history_group_span => %s, current_group_span => %s, "
           "max_subgroups => %s, open_end => %s, time_zone => %s)",
           (cfg.partition_unit, cfg.history_span, cfg.current_span,
            cfg.max_subgroups, clock.arg(OPEN), cfg.time_zone))


def check_invariants(db, table):
    """A heap table kept by a reference holds a well-formed history: no
    overlapping, empty or doubly-open versions, no adjacent equal ones."""
    problems = db.all("""
        SELECT 'overlap', x.id FROM {t} x JOIN {t} y
          ON x.id = y.id AND x.ctid <> y.ctid
         AND x.valid_from < y.valid_to AND y.valid_from < x.valid_to
        UNION ALL
        SELECT 'empty or reversed period', id FROM {t} WHERE NOT valid_from < valid_to
        UNION ALL
        SELECT 'two open versions', id FROM {t} WHERE valid_to = %s
         GROUP BY id HAVING count(*) > 1
        UNION ALL
        SELECT 'adjacent equal versions', x.id FROM {t} x JOIN {t} y
          ON x.id = y.id AND x.valid_to = y.valid_from
         AND ROW(x.name, x.amount) IS NOT DISTINCT FROM ROW(y.name, y.amount)""".format(t=table),
                      (db.clock.value(OPEN),))
    if problems:
        raise Failure("%s violates invariants: %s" % (table, problems[:10]), [], [], "", "")


# --------------------------------------------------------------------------- one seed

class SeedRun:
    def __init__(self, db, args, seed):
        self.db, self.args, self.seed = db, args, seed
        self.cfg = CONFIG_BY_NAME[args.config] if args.config else CONFIGS[(seed - 1) % len(CONFIGS)]
        self.clock = db.clock = Clock(self.cfg)
        self.rng = random.Random(seed)          # data: same in every mode
        self.probe_rng = random.Random("probe-%d" % seed)   # reads, session zones
        self.ticks = args.batches * 6 + 24
        self.gen = Generator(self.rng, args, self.ticks)
        self.model = VersionModel()
        self.timeline = TimelineModel(self.ticks)
        self.zip = not args.reference_only
        self.counts = collections.Counter()     # what the run did
        self.stats = collections.Counter()      # summed apply_changes / apply_snapshot counts
        self.outcomes = []                      # the model's counts per change of the last batch
        self.layout_max = collections.Counter()  # --verbose: see layout()

    def fmt_row(self, r):
        return "(id=%s name=%s amount=%s [%s, %s))" % (
            r[0], r[1], r[2], self.clock.show(r[3]), self.clock.show(r[4]))

    # ---- setup
    def setup(self):
        db, cfg = self.db, self.cfg
        for name in ("rc_changes", "rc_changes_data", "rc_snapshot", "rc_ref", "rc_zip"):
            db.drop(name)
        db.run("DEALLOCATE ALL")
        db.run("SET TimeZone = 'UTC'")
        ddl = TABLE_DDL % {"t": cfg.period_type}
        db.run("CREATE TABLE rc_ref " + ddl)
        if self.zip:
            create_zip_table(db, cfg, self.clock)
            db.run("PREPARE rc_as_of(%s) AS SELECT %s FROM rc_zip "
                   "WHERE valid_from <= $1 AND valid_to > $1" % (cfg.period_type, Db.EPOCH_COLS))

    def session_zone(self):
        """Timestamptz tables: a random session TimeZone for this batch (the
        results must not depend on it).  Timestamp and date tables stay at UTC:
        function arguments are cast to them in the session's zone."""
        if self.cfg.period_type == "timestamptz":
            self.db.run("SET TimeZone = %s", (self.probe_rng.choice(SESSION_ZONES),))

    # ---- loading
    def load_changes(self, changes, has_op, has_seq):
        return load_changes(self.db, self.clock, changes, has_op, has_seq, self.rng)

    # ---- applying: each returns {engine: counts}
    def apply_changes(self, has_seq):
        db = self.db
        seq_arg = ", seq => 'seq'" if has_seq else ""
        got = {"zl_ref.apply_changes": db.one(
            "SELECT * FROM zl_ref.apply_changes('rc_ref', 'rc_changes', ARRAY['id']%s, "
            "open_end => %%s)" % seq_arg, (self.clock.arg(OPEN),))}
        if self.zip:
            got["zipper_lake.apply_changes"] = db.one(
                "SELECT * FROM zipper_lake.apply_changes('rc_zip', 'rc_changes'%s)" % seq_arg)
        return got

    def apply_snapshot(self, rows, t, deletes):
        db = self.db
        load_snapshot(db, rows)
        got = {"zl_ref.apply_snapshot": db.one(
            "SELECT * FROM zl_ref.apply_snapshot('rc_ref', 'rc_snapshot', ARRAY['id'], %s, %s, "
            "open_end => %s)", (self.clock.arg(t), deletes, self.clock.arg(OPEN)))}
        if self.zip:
            got["zipper_lake.apply_snapshot"] = db.one(
                "SELECT * FROM zipper_lake.apply_snapshot('rc_zip', 'rc_snapshot', %s, "
                "deletes => %s)", (self.clock.arg(t), deletes))
        return got

    def apply_model(self, changes, read=None):
        """Apply a batch to both models; return the counts README "Change
        semantics" defines: read = rows read (default: every change)."""
        batch = normalize_batch(changes)
        counts = collections.Counter(changes=len(changes) if read is None else read,
                                     unchanged=len(changes) - len(batch))  # duplicates
        self.outcomes = []
        for key, t, seq, up, vals in batch:
            c = self.model.apply(key, t, up, vals)
            self.outcomes.append((key, t, seq, up, c))
            counts.update(c)
            self.timeline.apply(key, t, up, vals)
        return {k: counts[k] for k in COUNTS}

    # ---- checks
    def check_counts(self, expected, got):
        for engine, counts in got.items():     # the reference first
            if counts != expected:
                raise CountsFailure("%s returned counts that differ from the model's:\n"
                              "    got       %s\n    model     %s"
                              % (engine, fmt_counts(counts), fmt_counts(expected)),
                              [], [], "", "")
            if engine.startswith("zipper_lake"):
                self.stats.update(counts)

    def check(self):
        db = self.db
        expected = self.model.rows()

        # the two Python models agree
        missing, extra = diff(self.timeline.rows(), expected)
        if missing or extra:
            raise Failure("VersionModel differs from TimelineModel (bug in the test's models)",
                          missing, extra, "timeline", "version model")

        # the reference's invariants
        check_invariants(db, "rc_ref")

        # the reference equals the model
        ref = db.rows("SELECT %s FROM rc_ref" % COLS)
        missing, extra = diff(expected, ref)
        if missing or extra:
            raise Failure("rc_ref (zl_ref) differs from the Python model", missing, extra,
                          "model", "rc_ref")

        if self.zip:
            # the zipper table equals the reference, and is healthy
            zipped = db.rows("SELECT %s FROM rc_zip" % COLS)
            missing, extra = diff(ref, zipped)
            if missing or extra:
                raise Failure("rc_zip differs from rc_ref", missing, extra, "rc_ref", "rc_zip")
            bad = db.all("SELECT * FROM zipper_lake.verify('rc_zip')")
            if bad:
                raise Failure("zipper_lake.verify('rc_zip') reports problems:\n    " +
                              "\n    ".join(map(str, bad)), [], [], "", "")
            self.check_placement()
        if not self.args.no_read_helpers:
            self.check_reads(ref)

    def compare(self, label, want, got, want_label="rc_ref"):
        missing, extra = diff(want, got)
        if missing or extra:
            raise Failure("%s differs from %s" % (label, want_label), missing, extra,
                          want_label, "this read")

    def check_reads(self, ref):
        """The same reads on rc_ref, in the model (on ref's rows) and on rc_zip."""
        db, clock, rng = self.db, self.clock, self.probe_rng

        # random WHERE clauses on the period columns: plain SQL, pruned on rc_zip
        for pred in self.probe_predicates():
            where, params = predicate_sql(pred, clock)
            label = "WHERE %s" % predicate_text(pred, clock)
            want = db.rows("SELECT %s FROM rc_ref WHERE %s" % (COLS, where), params)
            self.compare(label + " on rc_ref", [r for r in ref if predicate_holds(pred, r)], want,
                         "the model")
            if self.zip:
                self.compare(label + " on rc_zip", want,
                             db.rows("SELECT %s FROM rc_zip WHERE %s" % (COLS, where), params))
        if not self.zip:
            return

        # the read helpers, inlined into a scan and as functions (a sub-select
        # argument keeps the function form; timestamp and date tables always
        # run the function), and a prepared as-of query with a generic plan
        forms = [("", "%s")]
        if self.cfg.period_type == "timestamptz":
            forms.append((" (function)", "(SELECT %s::timestamptz)"))
        for t in self.probe_instants():
            want = as_of(ref, clock.arg_tick(t))
            for form, arg in forms:
                self.compare("zipper_lake.as_of%s at %s" % (form, clock.show(t)), want, db.rows(
                    "SELECT %s FROM zipper_lake.as_of(NULL::rc_zip, %s)" % (COLS, arg),
                    (clock.arg(t),)))
        t = clock.arg_tick(rng.choice(self.probe_instants()))
        db.run("SET plan_cache_mode = force_generic_plan")
        got = db.ticked(db.all("EXECUTE rc_as_of(%s)", (clock.value(t),)))
        db.run("RESET plan_cache_mode")
        self.compare("prepared as-of query (generic plan) at %s" % clock.show(t), as_of(ref, t), got)

        for f, u in self.probe_windows():
            want = changes_fn(ref, clock.arg_tick(f), clock.arg_tick(u))
            for form, arg in forms:
                self.compare("zipper_lake.changes%s over [%s, %s)" % (form, clock.show(f), clock.show(u)),
                             want, db.rows("SELECT %s FROM zipper_lake.changes(NULL::rc_zip, %s, %%s)"
                                           % (COLS, arg), (clock.arg(f), clock.arg(u))))

        want = [r for r in ref if r[4] == OPEN]
        self.compare("zipper_lake.current", want,
                     db.rows("SELECT %s FROM zipper_lake.current(NULL::rc_zip)" % COLS))

    def probe_instants(self):
        rng, top = self.probe_rng, self.gen.wm + 2
        specials = [NEG, OPEN] + ([AFTER] if self.clock.finite_open_end else [])
        return [rng.randint(0, top) for _ in range(3)] + \
            [rng.randint(0, top) + 0.5, rng.choice([-1, self.ticks + 100] + specials)]

    def probe_windows(self):
        rng, top = self.probe_rng, self.gen.wm + 2
        out = []
        for _ in range(3):
            f = rng.randint(-1, top) + rng.choice([0, 0.5])
            out.append((f, f + rng.choice([0.5, 1, 1, 3, 12, 48])))
        ends = [OPEN] + ([AFTER] if self.clock.finite_open_end else [])
        out.append((rng.choice([NEG, rng.randint(0, top)]), rng.choice(ends)))
        return out

    def probe_predicates(self):
        """The as-of, changes and current shapes plus random conjunctions /
        disjunctions of bounds at ticks, half ticks, a microsecond off a tick
        (off-by-one in bounds), beyond the grid and at the special values."""
        rng, top = self.probe_rng, self.gen.wm + 2
        specials = [NEG, OPEN] + ([AFTER] if self.clock.finite_open_end else [])
        ticks = lambda: rng.choice([rng.randint(-1, top), rng.randint(0, top) + 0.5,
                                    rng.randint(0, top) + rng.choice([-1, 1]) * self.clock.usec,
                                    self.ticks + 100, rng.choice(specials)])
        atom = lambda: (rng.choice(["valid_from", "valid_to"]), rng.choice(list(OPERATORS)), ticks())
        t, f = rng.randint(0, top), rng.randint(0, top)
        u = f + rng.choice([1, 3, 12])
        preds = [[[("valid_from", "<=", t), ("valid_to", ">", t)]],                 # as of t
                 [[("valid_from", ">=", f), ("valid_from", "<", u)],                # changes
                  [("valid_to", ">=", f), ("valid_to", "<", u)]],
                 [[("valid_to", "=", OPEN)]]]                                      # current
        for _ in range(4):
            preds.append([[atom() for _ in range(rng.randint(1, 3))]
                          for _ in range(rng.choice([1, 1, 2]))])
        return preds

    def check_placement(self):
        """Every row lies in the partition and file-group window the README
        defines, computed here with Python's zoneinfo.  (verify() checks
        placement with zipper_lake's own time functions, so a wrong zone, unit
        or window origin there would go unnoticed.)  A row's sub-group is the
        one whose blocks hold its ctid."""
        clock = self.clock
        zone = self.cfg.time_zone if self.cfg.period_type == "timestamptz" else "UTC"
        res = self.db.all("""
            SELECT r.id, extract(epoch FROM r.valid_from), extract(epoch FROM r.valid_to),
                   s.sub_group, s.partition_end::text, s.window_start AT TIME ZONE %s
            FROM (SELECT (ctid::text::point)[0] AS block, * FROM rc_zip) r
            LEFT JOIN zipper_lake.inspect('rc_zip') s
              ON r.block >= s.first_block AND r.block < s.first_block + s.blocks""", (zone,))
        for key, f, t, sub_group, partition, window in res:
            f, t = clock.tick_of(f), clock.tick_of(t)
            row = "row id=%s [%s, %s) in sub-group %s" % (key, clock.show(f), clock.show(t), sub_group)
            if partition != clock.partition_of(t):
                raise Failure("%s is in partition %s, the README says %s"
                              % (row, partition, clock.partition_of(t)), [], [], "", "")
            want = clock.window_of(partition, f)
            if clock.local_exists(want) and window != want:   # a DST gap start: skipped
                raise Failure("%s has window start %s (local), the README says %s"
                              % (row, window, want), [], [], "", "")

    def check_pruned(self):
        """The plain as-of query must be a ZipperScan, or the reads above would
        not test pruning at all."""
        plan = "\n".join(r[0] for r in self.db.all(
            "EXPLAIN SELECT * FROM rc_zip WHERE valid_from <= %s AND valid_to > %s",
            (self.clock.value(1), self.clock.value(1))))
        if "ZipperScan" not in plan or "Zipper Bounds" not in plan:
            raise Failure("the plain as-of query on rc_zip is not a pruned ZipperScan:\n" + plan,
                          [], [], "", "")

    def layout(self):
        """What the table looks like now (--verbose, after every batch): does
        the configuration make the partitions, file groups and rollovers it is
        meant to?  (Compaction removes sub-groups, so rollovers do not stay.)"""
        return self.db.one("""
            SELECT count(DISTINCT partition_end) FILTER (WHERE partition_end <> 'infinity') AS history_partitions,
                   count(DISTINCT file_group) AS file_groups,
                   count(*) AS sub_groups,
                   (SELECT count(*) FROM (SELECT 1 FROM zipper_lake.inspect('rc_zip')
                                          WHERE partition_end = 'infinity'
                                          GROUP BY window_start HAVING count(DISTINCT file_group) > 1) w)
                     AS current_windows_rolled_over
            FROM zipper_lake.inspect('rc_zip')""")

    def track_layout(self):
        if self.args.verbose and self.zip:
            for k, v in self.layout().items():
                self.layout_max[k] = max(self.layout_max[k], v)

    # ---- reporting
    def report(self, bno, kind, changes, err, before):
        clock = self.clock
        out = ["MISMATCH seed=%d batch=%d (%s)" % (self.seed, bno, kind),
               "  config %s" % describe_config(self.cfg)]
        if isinstance(err, Failure):
            what, missing, extra, exp_label, got_label = err.args
            out.append("  " + what)
            out += ["  only in %-14s %s" % (exp_label + ":", self.fmt_row(r)) for r in missing]
            out += ["  only in %-14s %s" % (got_label + ":", self.fmt_row(r)) for r in extra]
            keys = {r[0] for r in missing + extra}
        else:
            out.append("  error: %s" % str(err).strip())
            keys = set()
        shown = [c for c in changes if not keys or c.id in keys]
        out.append("  batch%s:" % (
            "" if len(shown) == len(changes) else
            ", %d of %d changes: those of the keys above" % (len(shown), len(changes))))
        for c in sorted(shown, key=lambda c: (c.id, c.tick, -1 if c.seq is None else c.seq)):
            out.append("    id=%s name=%s amount=%s t=%s op=%s seq=%s" %
                       (c.id, c.name, c.amount, clock.show(c.tick), c.op, c.seq))
        if isinstance(err, CountsFailure):
            out.append("  the model's counts per change, after collapsing duplicates:")
            for key, t, seq, up, c in self.outcomes:
                out.append("    id=%s t=%s seq=%s %s: %s" % (key, clock.show(t), seq,
                           "upsert" if up else "delete", ", ".join(sorted(c.elements()))))
        out.append("  model state before the batch%s:" % (", those keys" if keys else ""))
        for r in sorted(before.rows(), key=lambda r: (r[0], r[3])):
            if not keys or r[0] in keys:
                out.append("    " + self.fmt_row(r))
        rerun = "  rerun: %s %s" % (sys.argv[0], repro_args(self.args, self.seed, self.cfg))
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
            self.session_zone()
            if bno > 1 and rng.random() < 0.1:
                rows, t, deletes = gen.snapshot(self.model)
                kind = "snapshot at %s, deletes=%s" % (self.clock.show(t), deletes)
                changes = snapshot_as_changes(self.model, rows, t, deletes)
                gen.wm = max(gen.wm, t)
                try:
                    expected = self.apply_model(changes, read=len(rows))
                    self.check_counts(expected, self.apply_snapshot(rows, t, deletes))
                    self.check()
                except (Failure, psycopg2.Error) as err:
                    self.report(bno, kind, changes, err, before)
                    return False
                self.counts["snapshots"] += 1
                self.track_layout()
                continue

            kind = gen.batch_kind()
            changes, has_op, has_seq = gen.changes(self.model, kind)
            gen.wm = max([gen.wm] + [c.tick for c in changes])
            try:
                how = self.load_changes(changes, has_op, has_seq)
                kind += ", %s%s%s" % (how, ", seq" if has_seq else "", "" if has_op else ", no op column")
                expected = self.apply_model(changes)
                self.check_counts(expected, self.apply_changes(has_seq))
                self.check()
                if rng.random() < 0.08:                  # re-applying changes nothing
                    kind += ", re-applied"
                    state = self.model.rows()
                    expected = self.apply_model(changes)
                    missing, extra = diff(state, self.model.rows())
                    # README "Change semantics" says re-applying changes nothing.  That follows from
                    # the rules only while each (key, instant) has one change: with
                    # seq ties, e.g. delete@t then upsert@t, the first apply fills
                    # the gap up to the *old* next version, the second up to the
                    # new one.  So only such batches must be idempotent.
                    if (missing or extra) and not has_ties(changes):
                        raise Failure("re-applying the batch changed the model (README says "
                                      "it is idempotent)", missing, extra, "before", "after")
                    self.check_counts(expected, self.apply_changes(has_seq))
                    self.check()
                    self.counts["re-applied"] += 1
                if bno == 1 and self.zip:
                    self.check_pruned()
            except (Failure, psycopg2.Error) as err:
                self.report(bno, kind, changes, err, before)
                return False
            self.counts["changes"] += len(changes)
            self.counts["seq batches"] += has_seq
            self.track_layout()
        return True


def repro_args(args, seed, cfg):
    parts = ["--seed %d" % seed, "--config %s" % cfg.name, "--keys %d" % args.keys,
             "--batches %d" % args.batches, "--batch-size %d" % args.batch_size,
             "--mode %s" % args.mode]
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


DEFAULT_SEEDS = 4 * len(CONFIGS)        # CI: every configuration four times


def main():
    p = argparse.ArgumentParser(description="randomized comparison of zipper_lake against a reference")
    p.add_argument("--seeds", help="count N (seeds 1..N), list a,b,c or range a-b "
                                   "(default %d: each configuration %d times)"
                                   % (DEFAULT_SEEDS, DEFAULT_SEEDS // len(CONFIGS)))
    p.add_argument("--seed", type=int, help="run exactly this one seed")
    p.add_argument("--config", choices=sorted(CONFIG_BY_NAME),
                   help="table configuration for every seed (default: seed s runs "
                        "configuration (s - 1) mod %d, in the order of CONFIGS)" % len(CONFIGS))
    p.add_argument("--list-configs", action="store_true", help="print the configurations and exit")
    p.add_argument("--keys", type=int, help="key space size (default 12 x scale)")
    p.add_argument("--batches", type=int, help="batches per seed (default 15)")
    p.add_argument("--batch-size", type=int, help="changes per batch (default 30 x scale)")
    p.add_argument("--scale", type=int, nargs="?", const=25, default=1, metavar="F",
                   help="multiply the default key space and batch size by F "
                        "(same changes per key and batch, more rows; --scale alone: 25)")
    p.add_argument("--mode", choices=["inorder", "late", "mixed"], default="mixed")
    p.add_argument("--reference-only", action="store_true",
                   help="check zl_ref against the Python models only; no zipper_lake needed")
    p.add_argument("--no-read-helpers", action="store_true",
                   help="skip the read comparisons (WHERE clauses, as_of, changes, current)")
    p.add_argument("--verbose", action="store_true",
                   help="also print the model's events and the summed counts per seed")
    args = p.parse_args()
    if args.list_configs:
        for i, cfg in enumerate(CONFIGS):
            print("%d  %s" % (i + 1, describe_config(cfg)))
        return

    seeds = [args.seed] if args.seed is not None else parse_seeds(args.seeds or str(DEFAULT_SEEDS))
    args.keys = args.keys or 12 * args.scale
    args.batches = args.batches or 15
    args.batch_size = args.batch_size or 30 * args.scale

    db = Db()
    with open(os.path.join(HERE, "reference.sql")) as f:
        db.run(f.read())
    if not args.reference_only:
        db.run("CREATE EXTENSION IF NOT EXISTS zipper_lake")

    target = "zl_ref vs Python model" if args.reference_only else "zipper_lake vs zl_ref vs Python model"
    started = time.time()
    configs = collections.Counter()
    for seed in seeds:
        t0 = time.time()
        run = SeedRun(db, args, seed)
        try:
            ok = run.run()
        except Exception:
            print("seed %d, config %s: unexpected error; rerun: %s %s"
                  % (seed, run.cfg.name, sys.argv[0], repro_args(args, seed, run.cfg)))
            raise
        if not ok:
            sys.exit(1)
        configs[run.cfg.name] += 1
        ev = run.model.events
        print("seed %d ok [%s]: %d batches (%d snapshots, %d with seq, %d re-applied), %d changes, "
              "%d versions; %d no-ops, %d late, %d same-instant, %d merges, %d deletes; %.1fs"
              % (seed, run.cfg.name, args.batches, run.counts["snapshots"],
                 run.counts["seq batches"], run.counts["re-applied"], run.counts["changes"],
                 len(run.model.rows()), ev["noop"], ev["late"], ev["same_instant_replace"],
                 ev["merge"], ev["delete"], time.time() - t0))
        if args.verbose:
            print("  model events: %s" % dict(sorted(ev.items())))
            if run.stats:
                print("  summed counts: %s" % fmt_counts(run.stats))
                print("  layout, most after any batch: %s; newest change %s" % (
                    ", ".join("%s %s" % (k.replace("_", " "), v) for k, v in run.layout_max.items()),
                    run.clock.show(run.gen.wm)))
    print("all %d seeds passed (%s, mode %s, %d keys, %d batches x %d changes; %d of %d "
          "configurations) in %.1fs"
          % (len(seeds), target, args.mode, args.keys, args.batches, args.batch_size,
             len(configs), len(CONFIGS), time.time() - started))


if __name__ == "__main__":
    main()
