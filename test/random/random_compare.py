#!/usr/bin/env python3
"""
test/random/random_compare.py — randomized comparison test for zipper_lake.

What it checks
--------------
For each seed, a stream of random change batches (and now and then a snapshot)
is applied to

  * rc_zip  — a zipper_lake table, through zipper_lake.apply_changes /
              zipper_lake.apply_snapshot;
  * rc_fold — an ordinary heap table, through the PL/pgSQL reference
              implementation of the fold in fold_reference.sql
              (zl_fold.apply_changes / zl_fold.apply_snapshot): the history
              of a key is the fold of every change ever applied to it
              (README.md in this directory, "The fold");
  * FoldModel — the same contract in Python, formulated differently.

After every batch:
  * the counts apply_changes / apply_snapshot return (changes, inserted,
    closed, deleted, unchanged, late; README "Counts of the fold" in this
    directory) equal the counts of the reference and of the Python model;
  * rc_fold equals the Python model and satisfies the zipper invariants;
    rc_zip equals rc_fold row for row; zipper_lake.verify('rc_zip') returns
    no rows; a batch applied again at once changes nothing;
  * (unless --no-read-helpers) zipper_lake.as_of / changes / current, both
    inlined into a scan and as functions, a prepared as-of query run with a
    generic plan, and random WHERE clauses on the period columns (the pruned
    plain-SQL reads) return on rc_zip what the same reads return on rc_fold
    and what the Python model says;
  * in half the seeds rc_zip has btree, hash, GiST, GIN and partial indexes
    (created, reindexed and dropped at random points): reads through them
    with enable_seqscan off return what they return on rc_fold, EXPLAIN
    shows they use the indexes, amcheck finds the btrees clean, VACUUM
    leaves one entry per row, and a snapshot held across a batch and a
    VACUUM still reads through them what it saw ("indexes" below).
In a quarter of the seeds (--partitions N forces it), rc_zip is a zipper
parent: a table PARTITION BY HASH (id) whose partitions are zipper tables,
registered as a whole; the apply functions, reads, read helpers, verify and
erase take the parent, and everything above must come out exactly as for
one zipper table ("zipper parents" below).
With --reference-only the zipper table is not used at all: the reference is
checked against the Python model alone, which validates the reference before
the extension exists.

--mode batching is another test of the fold (see "the fold (--mode
batching)" below): one stream applied in differently cut batches.

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
with each seed and in the rerun command of a failure.  Independently, seed s
registers the tables with track_columns from TRACKINGS (README "Tracked
columns"; --track forces one).  Timestamptz tables are
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

Python model
------------
FoldModel keeps every change applied (a log), computes the state after
each change in fold order and a key's history from the state after the last
change of each instant (see its docstring); fold_reference.sql folds the log
step by step into versions instead, so the two are independent opinions.

Random data
-----------
Everything comes from random.Random(seed), so a seed reproduces a run.
Values come from tiny domains including NULL (so no-ops and equal-neighbour
merges are frequent; a third of the values are copied from the key's
neighbouring versions), ops mix every upsert / delete spelling and case,
one batch in four with an op column has a truncate or two (op T: a
delete of every key, at an instant no other change of the batch has; half
of them at an instant an earlier batch changed a key at, and now and then
a change lands at an earlier truncate's instant, so that changes with and
without seq meet truncates with and without seq there, in either order),
batches contain identical duplicates, some batches carry a seq column with
several changes for one (key, instant) ordered by seq, some have no op
column, some are views, some have their columns in another order, and some
are re-applied right away (which must change nothing).  --mode inorder keeps
every batch at or after the newest instant applied so far, late draws times
from the whole past, mixed (the default) mixes both within and across
batches; a change of a later batch at the instant of an earlier one is a
correction of it.  Snapshots are taken at or after the newest applied
instant (the classic end-of-day job), and may contain identical duplicate
rows.  Every batch and snapshot has an Encoding: applied with ignore_nulls,
and/or with a value column missing and missing_columns 'keep' or 'null';
partial changes (README "Change semantics", "Partial changes") hold KEEP
for the columns they keep (README "Partial changes" in this directory).

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
import re
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
TRUNCATE_OPS = ["T", "t", "truncate", "TRUNCATE"]     # a delete of every key
NAMES = [None, "a", "b"]
AMOUNTS = [None, 1, 2]
COUNTS = ("changes", "inserted", "closed", "deleted", "unchanged", "late")

COLS = "id, name, amount, valid_from, valid_to"
AGGREGATES = ("count(*), count(amount), sum(amount), min(amount), max(amount), avg(amount), "
              "min(name), max(name), min(valid_from), max(valid_to)")
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

def is_truncate(op):
    return op is not None and op.lower() in ("t", "truncate")


def is_upsert(op):
    if op is None or op.lower() in ("i", "u", "c", "r", "insert", "update", "upsert"):
        return True
    if op.lower() in ("d", "delete", "t", "truncate"):
        return False
    raise ValueError("unknown op %r" % op)


class Keep:
    """The value of a column a partial change does not give (README "Change
    semantics", "Partial changes"): the change keeps what the key holds."""

    def __repr__(self):
        return "keep"

    __str__ = __repr__


KEEP = Keep()
VALUE_COLS = ("name", "amount")

# Tracked columns (README "Tracked columns"): seed s registers rc_zip and
# rc_fold with track_columns TRACKINGS[(s - 1) % 3] unless --track names one
# ("all": NULL, every value column).  3 is prime to the 7 configurations, so
# any 21 consecutive seeds run every configuration under every tracking.
TRACKINGS = ["all", "amount", "name"]


def track_columns(tracking):
    """The track_columns argument of a tracking: None (all) or a list."""
    return None if tracking == "all" else [tracking]


def tracking_of(args, seed):
    """The tracking of a seed (seed 0: the examples of README "Batching
    test", which track every column)."""
    if not seed:
        return "all"
    return args.track or TRACKINGS[(seed - 1) % len(TRACKINGS)]

# A change as generated: name and amount are values or KEEP (a partial
# change).  tick is an int.  How it is loaded into rc_changes (a NULL with
# ignore_nulls, or a column the changes lack) is its batch's Encoding.
Change = collections.namedtuple("Change", "id name amount tick op seq")

# How a batch (or a snapshot's image) is loaded and applied: ignore_nulls,
# the value columns the relation lacks, and missing_columns ('keep' or
# 'null' when some are; None: not passed, or passed anyway with nothing
# missing).
Encoding = collections.namedtuple("Encoding", "ignore_nulls missing missing_columns")
PLAIN = Encoding(False, (), None)

# Every encoding a batch can have, with its weight when one is drawn for a
# batch of the default modes (README "Partial changes" in this directory).
ENCODINGS = [
    (PLAIN, 60),
    (Encoding(True, (), None), 12),
    (Encoding(False, ("name",), "keep"), 5),
    (Encoding(False, ("amount",), "keep"), 5),
    (Encoding(True, ("name",), "keep"), 3),
    (Encoding(True, ("amount",), "keep"), 3),
    (Encoding(False, ("name", "amount"), "keep"), 1),
    (Encoding(False, ("name",), "null"), 3),
    (Encoding(False, ("amount",), "null"), 3),
    (Encoding(False, (), "keep"), 1),       # nothing missing: no effect
    (Encoding(False, (), "null"), 1),
    (Encoding(False, (), "error"), 1),
]


def fits(c, enc):
    """Whether change c is loaded faithfully with encoding enc: a column the
    relation lacks is KEEP ('keep') or NULL ('null'); with ignore_nulls a
    column it has is KEEP exactly when NULL is loaded.  A delete carries no
    value and fits every encoding."""
    if not is_upsert(c.op):
        return True
    for col in VALUE_COLS:
        v = getattr(c, col)
        if col in enc.missing:
            if (v is not KEEP) if enc.missing_columns == "keep" else (v is not None):
                return False
        elif (v is KEEP) != (enc.ignore_nulls and v in (None, KEEP)):
            return False
    return True


def encode(rng, name, amount, enc, keep_rate=0.3):
    """The values (name, amount) of a new upsert made to fit enc: columns the
    relation lacks are KEEP or NULL, with ignore_nulls a NULL is KEEP and a
    value is KEEP now and then (keep_rate)."""
    out = []
    for col, v in zip(VALUE_COLS, (name, amount)):
        if col in enc.missing:
            v = KEEP if enc.missing_columns == "keep" else None
        elif enc.ignore_nulls and (v is None or rng.random() < keep_rate):
            v = KEEP
        out.append(v)
    return tuple(out)


def encoding_args(enc):
    """The options of apply_changes / apply_snapshot for an encoding."""
    return "%s%s" % (", ignore_nulls => true" if enc.ignore_nulls else "",
                     ", missing_columns => '%s'" % enc.missing_columns if enc.missing_columns else "")


def describe_encoding(enc):
    parts = (["ignore_nulls"] if enc.ignore_nulls else []) + \
        (["%smissing_columns => '%s'" % ("without %s, " % " and ".join(enc.missing) if enc.missing
                                          else "(nothing missing) ", enc.missing_columns)]
         if enc.missing_columns else [])
    return ", ".join(parts)


def normalize_batch(changes):
    """README "Change semantics" batch preparation: collapse identical duplicates, order per key
    by (change_time, seq).  Returns [(id, tick, seq, upsert, vals)], vals
    holding KEEP for the columns a partial change keeps."""
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


ABSENT = object()


def fold_position(t, seq):
    """A change's place in fold order, applications aside: time, then seq
    (changes without seq after all changes with seq)."""
    return (t, (1, 0) if seq is None else (0, seq))


# One change of a key as the fold sees it; snapshot_delete: the delete a
# snapshot with deletes makes of a key missing from its image, or a truncate
# of every key.
FoldChange = collections.namedtuple("FoldChange", "t seq app upsert vals snapshot_delete")


def state_after(c, held):
    """The state after change c when the key holds held (ABSENT or values):
    an upsert's given columns over what is held (NULL when absent; a full
    change gives every column), a delete: absent."""
    if not c.upsert:
        return ABSENT
    if held is ABSENT:
        held = (None,) * len(c.vals)
    return tuple(h if v is KEEP else v for v, h in zip(c.vals, held))


class FoldModel:
    """README "The fold" in Python: the third opinion on fold_reference.sql.

    fold_reference.sql folds step by step (a state machine that ends and
    begins versions, drops empty ones and takes back the version that ended
    at t when one with its values begins at t).  This model computes the
    state after every change in fold order (state_after: a full change's
    values, a partial change's given columns over the state before it, a
    delete: absent) and takes a key's history as the state after the last
    change of each instant, held until its next instant, cut into maximal
    runs of one value.  Its counts (README "Counts of the fold") are computed
    from the states before and after each change and after the last change
    before its instant, where the reference looks at its running state.

    With tracked columns (track: a tracking of TRACKINGS; README "Tracked
    columns") "one value" means equal tracked values: the instants are as
    before, a version is a maximal run of instants whose states have equal
    tracked values and shows the state after its last instant (so also that
    instant's untracked values), and a step that leaves the tracked values
    as held is a no-op for the counts (whatever it does to the others)."""

    def __init__(self, track="all"):
        cols = track_columns(track)
        self.track = None if cols is None else [VALUE_COLS.index(c) for c in cols]
        self.log = {}           # key -> [(tick, seq, upsert, vals, app)]; distinct within an app
        # (app, tick, seq, keys of the image) of snapshots with deletes, and
        # (app, tick, seq, None) of truncates: deletes of every key
        self.table_deletes = []
        self.apps = 0
        self.outcomes = []      # what each change of the last application did

    def keys(self):
        return set(self.log)

    def changes_of(self, key):
        """The key's changes in fold order, with the deletes of the snapshots
        whose image lacks it and of the truncates."""
        out = [FoldChange(t, seq, app, up, vals, False)
               for t, seq, up, vals, app in self.log.get(key, ())]
        out += [FoldChange(t, seq, app, False, None, True)
                for app, t, seq, image in self.table_deletes if image is None or key not in image]
        return sorted(out, key=lambda c: fold_position(c.t, c.seq) + (c.app,))

    def tracked(self, state):
        """The tracked values of a state (ABSENT stays ABSENT)."""
        if state is ABSENT or self.track is None:
            return state
        return tuple(state[i] for i in self.track)

    def same_tracked(self, a, b):
        return self.tracked(a) == self.tracked(b)

    @staticmethod
    def states(cs):
        """The state after each change of cs (in fold order)."""
        out, held = [], ABSENT
        for c in cs:
            held = state_after(c, held)
            out.append(held)
        return out

    def history(self, key):
        """[(valid_from, valid_to, vals)] of one key."""
        cs = self.changes_of(key)
        last = {}
        for c, s in zip(cs, self.states(cs)):
            last[c.t] = s                       # fold order: the last one stays
        out, state, since = [], ABSENT, None
        for t in sorted(last):
            s = last[t]
            if self.same_tracked(s, state):
                state = s                       # the run goes on; it shows its last instant
            else:
                if state is not ABSENT:
                    out.append((since, t, state))
                state, since = s, t
        if state is not ABSENT:
            out.append((since, OPEN, state))
        return out

    def rows(self):
        return sorted(((k,) + vals + (f, u) for k in self.keys() for f, u, vals in self.history(k)),
                      key=sort_key)

    def erase(self, keys):
        """README "Lifecycle": the keys start again from "absent", like keys
        never seen (missing from every snapshot's image)."""
        for k in keys:
            self.log.pop(k, None)
            for _, _, _, image in self.table_deletes:
                if image is not None:
                    image.discard(k)

    def value_at(self, key, t):
        for f, u, vals in self.history(key):
            if f <= t < u:
                return vals
        return None

    def open_image(self):
        """{key: values} of the keys that hold an open version."""
        return {k: h[-1][2] for k, h in ((k, self.history(k)) for k in self.keys())
                if h and h[-1][1] == OPEN}

    def apply(self, changes, read=None, snapshot=None):
        """One application: changes as read (identical duplicates included),
        snapshot = (tick, deletes) for apply_snapshot (changes: its image as
        upserts).  Returns the counts; self.outcomes says change by change."""
        truncates = sorted({(c.tick, c.seq) for c in changes if is_truncate(c.op)},
                           key=lambda ts: fold_position(*ts))
        batch = normalize_batch([c for c in changes if not is_truncate(c.op)])
        deletes = snapshot is not None and snapshot[1]
        # the keys this application changes (a snapshot with deletes, a truncate: every key)
        touched = {r[0] for r in batch} | (self.keys() if deletes or truncates else set())
        before = {k: self.changes_of(k) for k in touched}
        self.apps += 1
        app = self.apps
        for k, t, seq, up, vals in batch:
            self.log.setdefault(k, []).append((t, seq, up, vals, app))
        if deletes:
            self.table_deletes.append((app, snapshot[0], None, {r[0] for r in batch}))
        self.table_deletes += [(app, t, seq, None) for t, seq in truncates]
        counts = collections.Counter(changes=len(changes) if read is None else read,
                                     unchanged=len(changes) - len(truncates) - len(batch))
        self.outcomes = []
        for key in sorted(touched):
            old = before[key]
            newest = max((fold_position(c.t, c.seq) for c in old), default=None)
            cs = self.changes_of(key)
            states = self.states(cs)
            for i, c in enumerate(cs):
                if c.app != app:
                    continue
                held = states[i - 1] if i else ABSENT
                if c.snapshot_delete and held is ABSENT:
                    continue                    # a missing key that was absent anyway
                earlier = [j for j in range(i) if cs[j].t < c.t]
                at_instant = states[earlier[-1]] if earlier else ABSENT
                opened = newest is None or not fold_position(c.t, c.seq) < newest
                did = collections.Counter()
                if any(x.t == c.t and x.app < app for x in cs[i + 1:]):
                    # a change applied before follows it at its instant:
                    # unchanged, never late (README "Counts of the fold"; if
                    # that one is partial, this one still shapes the instant);
                    # a truncate's delete so deletes nothing and counts nowhere
                    if c.snapshot_delete:
                        continue
                    did["unchanged"] += 1
                    counts.update(did)
                    self.outcomes.append((key, c, did))
                    continue
                if self.same_tracked(held, states[i]) if c.upsert else (held is ABSENT):
                    did["unchanged"] += 1
                elif c.upsert:
                    did["inserted"] += 1
                    # the open version ends, unless it began at t
                    did["closed"] += (held is not ABSENT and opened and
                                      self.same_tracked(held, at_instant))
                else:
                    did["deleted"] += 1
                    did["closed"] += opened
                # identical (with the same columns kept) to the change
                # applied before that held its instant, the last one there
                held_before = [x for x in old if x.t == c.t]
                if not opened and not (
                        held_before and held_before[-1].seq == c.seq and
                        held_before[-1].upsert == c.upsert and
                        (not c.upsert or held_before[-1].vals == c.vals)):
                    did["late"] += 1
                counts.update(did)
                self.outcomes.append((key, c, did))
        return {k: counts[k] for k in COUNTS}


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
    """Random batches for one seed.  Knows the current model (a FoldModel) so
    that it can copy neighbouring values (to provoke no-ops and merges)."""

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
        vs = model.history(key)
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

    def encoding(self):
        """How the next batch or image is loaded (README "Partial changes"
        in this directory)."""
        return self.rng.choices([e for e, _ in ENCODINGS], [w for _, w in ENCODINGS])[0]

    def earlier_instant(self, model, late, truncates):
        """The instant of a change of an earlier batch (truncates: of an
        earlier truncate), if the batch may reach it, else None."""
        if truncates:
            ticks = [t for _, t, _, image in model.table_deletes if image is None]
        else:
            log = model.log.get(self.rng.choice(sorted(model.log))) if model.log else None
            ticks = [entry[0] for entry in log or ()]
        ticks = [t for t in ticks if late or t >= self.wm]
        return self.rng.choice(ticks) if ticks else None

    def fresh_seq(self, used):
        """A seq no change of the batch has (used: those taken)."""
        seq = self.rng.randint(1, 10 * self.args.batch_size)
        while seq in used:
            seq = self.rng.randint(1, 10 * self.args.batch_size)
        used.add(seq)
        return seq

    def changes(self, model, kind, truncates=False):
        """One batch: (changes, has_op, has_seq, encoding); with truncates,
        now and then a truncate or two among them (at instants no other
        change of the batch has)."""
        rng, args = self.rng, self.args
        has_seq = rng.random() < 0.3
        has_op = rng.random() >= 0.07
        enc = self.encoding()
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
            elif truncates and rng.random() < 0.15:         # at an earlier truncate
                t = self.earlier_instant(model, late, True)
                t = self.tick(late) if t is None else t
            if has_op and rng.random() < 0.22:
                op = rng.choice(DELETE_OPS)
                name, amount = rng.choice(NAMES), rng.choice(AMOUNTS)
            else:
                op = rng.choice(UPSERT_OPS) if has_op else None
                name, amount = encode(rng, *self.value(model, key, t), enc)
            seq = self.fresh_seq(used_seq) if has_seq else None
            c = Change(key, name, amount, t, op, seq)
            if not has_seq and (key, t) in first_at:
                # without seq only an identical duplicate may share the instant
                c = first_at[(key, t)]
            first_at.setdefault((key, t), c)
            out.append(c)
        if truncates and has_op and rng.random() < 0.3:
            taken = {c.tick for c in out}
            for _ in range(rng.randint(1, 2)):
                late = kind == "late" or (kind == "mixed" and rng.random() < 0.5)
                t = self.earlier_instant(model, late, False) if rng.random() < 0.5 else None
                t = self.tick(late) if t is None else t
                if t in taken:
                    continue
                taken.add(t)
                seq = self.fresh_seq(used_seq) if has_seq else None
                out.append(Change(None, None, None, t, rng.choice(TRUNCATE_OPS), seq))
        rng.shuffle(out)
        return out, has_op, has_seq, enc

    def snapshot(self, model):
        """(rows, tick, deletes, encoding): the current image with random
        edits."""
        rng = self.rng
        enc = self.encoding()
        rows = []
        for key, vals in sorted(model.open_image().items()):
            r = rng.random()
            if r < 0.15:
                continue                                    # key vanishes
            if r < 0.35:
                vals = (rng.choice(NAMES), rng.choice(AMOUNTS))
            rows.append((key,) + encode(rng, *vals, enc))
        present = {r[0] for r in rows}
        for key in range(1, self.args.keys + 1):            # keys (re)appearing
            if key not in present and rng.random() < 0.1:
                rows.append((key,) + encode(rng, rng.choice(NAMES), rng.choice(AMOUNTS), enc))
        if rows and rng.random() < 0.3:                     # an identical duplicate
            rows.append(rng.choice(rows))
        rng.shuffle(rows)
        t = min(self.ticks - 1, self.wm + rng.randint(0, 3))
        return rows, t, rng.random() < 0.8, enc


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
        # every notice (a list keeps the last 50 only: a parent's VACUUM
        # (VERBOSE) reports more, each leaf its indexes)
        self.conn.notices = collections.deque()
        self.cur = self.conn.cursor()
        self.cur.execute("SET client_min_messages = warning")
        self.clock = None
        self._second = None

    def second(self):
        """Another session (made once), with this one's clock."""
        if self._second is None:
            self._second = Db()
        self._second.clock = self.clock
        return self._second

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


def describe_failure(err, fmt_row):
    """Report lines for a Failure (what, and the rows only one side has) or
    a database error."""
    if not isinstance(err, Failure):
        return ["  error: %s" % str(err).strip()]
    what, missing, extra, exp_label, got_label = err.args
    return (["  " + what] +
            ["  only in %-14s %s" % (exp_label + ":", fmt_row(r)) for r in missing] +
            ["  only in %-14s %s" % (got_label + ":", fmt_row(r)) for r in extra])


def counts_failure(cls, engine, got, want, want_label):
    """The failure (of class cls) of an engine whose counts are not want_label's."""
    return cls("%s returned counts that differ from the %s's:\n    got       %s\n    %-9s %s"
               % (engine, want_label, fmt_counts(got), want_label, fmt_counts(want)), [], [], "", "")


def outcome_lines(clock, outcomes):
    """Report lines: what the fold model says each change of the last
    application did (FoldModel.outcomes)."""
    return ["    id=%s t=%s seq=%s %s%s: %s" % (
        key, clock.show(c.t), c.seq, "upsert %s" % (c.vals,) if c.upsert else "delete",
        " (snapshot's delete of a missing key)" if c.snapshot_delete else "",
        ", ".join(sorted(did.elements())) or "nothing") for key, c, did in outcomes]


def check_reapplied(before, model, counts):
    """README "The fold": re-applying the last application changes nothing.
    before: the model's rows before it, counts: the model's counts of it."""
    missing, extra = diff(before, model.rows())
    if missing or extra or any(counts[k] for k in ("inserted", "closed", "deleted", "late")):
        raise Failure("re-applying the last application changed the model's history "
                      "or counted something (%s)" % fmt_counts(counts),
                      missing, extra, "before", "after")


def load_changes(db, clock, changes, has_op, has_seq, rng=None, enc=PLAIN):
    """Load a batch into rc_changes (README "Change semantics": columns are
    matched by name) as enc says (the changes fit it: a KEEP is a NULL, or
    in a column rc_changes lacks); with rng, now and then with its columns
    in another order or as a view.  Returns "table" or "view"."""
    db.drop("rc_changes")
    db.drop("rc_changes_data")
    assert all(fits(c, enc) for c in changes), (enc, changes)
    cols = [("id", "int")] + [c for c in (("name", "text"), ("amount", "int"))
                              if c[0] not in enc.missing] + \
        [("change_time", clock.cfg.period_type)]
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
        d = {"id": c.id, "name": None if c.name is KEEP else c.name,
             "amount": None if c.amount is KEEP else c.amount,
             "change_time": clock.value(c.tick), "op": c.op, "seq": c.seq}
        values.append(tuple(d[n] for n, _ in cols))
    psycopg2.extras.execute_values(
        db.cur, "INSERT INTO %s (%s) VALUES %%s" % (table, ", ".join(n for n, _ in cols)),
        values, page_size=1000)
    if as_view:
        db.run("CREATE VIEW rc_changes AS SELECT * FROM rc_changes_data")
    return "view" if as_view else "table"


def load_snapshot(db, rows, enc=PLAIN):
    """Load an image [(id, name, amount)] into rc_snapshot as enc says (see
    load_changes)."""
    db.drop("rc_snapshot")
    assert all(fits(Change(r[0], r[1], r[2], 0, "U", None), enc) for r in rows), (enc, rows)
    cols = [("id", "int")] + [c for c in (("name", "text"), ("amount", "int"))
                              if c[0] not in enc.missing]
    db.run("CREATE TABLE rc_snapshot (%s)" % ", ".join("%s %s" % c for c in cols))
    index = {"id": 0, "name": 1, "amount": 2}
    if rows:
        psycopg2.extras.execute_values(
            db.cur, "INSERT INTO rc_snapshot (%s) VALUES %%s" % ", ".join(n for n, _ in cols),
            [tuple(None if r[index[n]] is KEEP else r[index[n]] for n, _ in cols) for r in rows])


# --------------------------------------------------------------------------- zipper parents
#
# README "Zipper parents" in this directory: rc_zip may be a zipper parent, a
# table PARTITION BY HASH (id) whose partitions rc_zip_0 .. rc_zip_<n-1> are
# zipper tables, registered as a whole.  The apply functions, the read
# helpers, verify and erase take the parent, and every comparison with the
# reference is the same as for one zipper table; the checks that look into
# a table's storage (placement, layout) look into each leaf, and every row
# must lie in the leaf its key hashes to.  On a parent the apply functions
# run now and then in background workers (README "Scaling out",
# zipper_lake.apply_workers; apply_workers_of).  Seed s (s > 0) runs on a parent
# of 3 partitions when s % 4 == 0 (2 when s % 8 == 0) unless --partitions
# says how many (0: never).  4 is prime to the 7 configurations, so the 28
# seeds of CI have 7 parents, one per configuration, under every tracking,
# with indexes and without.

# A parent's layout: n leaves, made by zipper_lake.create_table(...,
# partitions => n) ("create_table") or by CREATE TABLE ... PARTITION BY
# HASH with leaves added before and after register() ("partition_of");
# moduli: (modulus, remainder) of each leaf.
Parent = collections.namedtuple("Parent", "n ddl moduli")


def partitions_of(args, seed):
    """How many partitions seed s's rc_zip has (0: it is one zipper table)."""
    if args.partitions is not None:
        return args.partitions
    if seed and seed % 4 == 0:
        return 2 if seed % 8 == 0 else 3
    return 0


def parent_of(args, seed, cfg):
    """The Parent seed s's rc_zip is, or None.  create_table makes
    timestamptz periods only: it makes the timestamptz parents of the
    seeds with s // 4 even; the others are made by PARTITION OF, whose
    leaves take hash moduli n (n <= 2) or, with n >= 3, mixed ones: n - 2
    leaves of modulus n - 1 and two of modulus 2(n - 1) sharing the last
    remainder of n - 1 (rows are routed by the greatest modulus)."""
    n = partitions_of(args, seed)
    if not n:
        return None
    if cfg.period_type == "timestamptz" and (seed // 4) % 2 == 0:
        return Parent(n, "create_table", tuple((n, r) for r in range(n)))
    if n < 3:
        return Parent(n, "partition_of", tuple((n, r) for r in range(n)))
    m = n - 1
    return Parent(n, "partition_of", tuple((m, r) for r in range(n - 2)) + ((2 * m, m - 1), (2 * m, 2 * m - 1)))


def parent_label(run):
    """For a seed's line: ", parent of n (how made; applications in
    workers)", or nothing."""
    parent = run.parent
    if parent is None:
        return ""
    return ", parent of %d (%s; %d applications in workers)" % (
        parent.n, "create_table" if parent.ddl == "create_table" else
        "PARTITION OF, moduli " + ",".join(str(m) for m, _ in parent.moduli),
        run.counts["applications in workers"])


def describe_parent(parent):
    if parent is None:
        return "one zipper table"
    return "a zipper parent of %d partitions (%s; hash moduli %s)" % (
        parent.n, "zipper_lake.create_table(..., partitions => %d)" % parent.n
        if parent.ddl == "create_table" else "CREATE TABLE ... PARTITION OF, leaves before "
        "and after register()", ", ".join("%d/%d" % (r, m) for m, r in parent.moduli))


def apply_workers_of(args, parent, rng):
    """zipper_lake.apply_workers for one application on a parent (README
    "Scaling out": with 2 or more, apply_changes and apply_snapshot, each a
    statement of its own here, run in that many background workers, at
    most one a leaf, under two-phase commit): --apply-workers, or else half
    the time 0 (leaf by leaf in the caller's transaction) and otherwise 2
    to n, when the server's max_prepared_transactions allows (args.max_prepared)."""
    draw = rng.random(), rng.random()       # the same draws whatever the outcome
    if args.apply_workers is not None:
        return args.apply_workers
    top = min(parent.n, args.max_prepared)
    if top < 2 or draw[0] < 0.5:
        return 0
    return 2 + int(draw[1] * (top - 1))


REGISTER_OPTIONS = ("partition_unit => %s, history_group_span => %s, current_group_span => %s, "
                    "max_subgroups => %s, open_end => %s, time_zone => %s, "
                    "track_columns => %s::text[]")


def create_zip_table(db, cfg, clock, track, parent=None):
    """rc_zip: a zipper table (or, with parent, a zipper parent) registered
    with the configuration's options and the tracking's track_columns.
    A parent's leaves are rc_zip_0 .. rc_zip_<n-1>: by create_table, or
    (PARTITION OF) the first n - 2 made before register(), the one before
    last after it by CREATE TABLE ... PARTITION OF and the last by CREATE
    TABLE ... USING zipper_lake and ATTACH PARTITION (each registered with
    the parent's options when it joins)."""
    options = (cfg.partition_unit, cfg.history_span, cfg.current_span,
               cfg.max_subgroups, clock.arg(OPEN), cfg.time_zone, track_columns(track))
    if parent is None:
        db.run("CREATE TABLE rc_zip " + TABLE_DDL % {"t": cfg.period_type} + " USING zipper_lake")
        db.run("SELECT zipper_lake.register('rc_zip', key => ARRAY['id'], " + REGISTER_OPTIONS + ")",
               options)
        return
    if parent.ddl == "create_table":
        db.run("CREATE TABLE rc_source (id int PRIMARY KEY, name text, amount int)")
        db.run("SELECT zipper_lake.create_table('rc_zip', 'rc_source', " + REGISTER_OPTIONS +
               ", partitions => %s)", options + (parent.n,))
    else:
        db.run("CREATE TABLE rc_zip " + TABLE_DDL % {"t": cfg.period_type} + " PARTITION BY HASH (id)")
        bound = "FOR VALUES WITH (modulus %d, remainder %d)"
        for i, mr in enumerate(parent.moduli):
            if i == parent.n - 2:
                db.run("SELECT zipper_lake.register('rc_zip', key => ARRAY['id'], " +
                       REGISTER_OPTIONS + ")", options)
            if i < parent.n - 1:
                db.run("CREATE TABLE rc_zip_%d PARTITION OF rc_zip %s USING zipper_lake" % (i, bound % mr))
            else:
                db.run("CREATE TABLE rc_zip_%d (LIKE rc_zip) USING zipper_lake" % i)
                db.run("ALTER TABLE rc_zip ATTACH PARTITION rc_zip_%d %s" % (i, bound % mr))
        if parent.n == 1:
            db.run("SELECT zipper_lake.register('rc_zip', key => ARRAY['id'], " + REGISTER_OPTIONS + ")",
                   options)
    check_leaves(db, parent)


def leaves_of(db):
    """The leaves of rc_zip when it is a parent, [(name, modulus, remainder)]
    in the order of their names (none: rc_zip is one zipper table)."""
    out = []
    for name, bound in db.all("SELECT c.oid::regclass::text, pg_get_expr(c.relpartbound, c.oid) "
                              "FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
                              "WHERE i.inhparent = to_regclass('rc_zip')"):
        m = re.fullmatch(r"FOR VALUES WITH \(modulus (\d+), remainder (\d+)\)", bound)
        out.append((name, int(m.group(1)), int(m.group(2))))
    return sorted(out, key=lambda leaf: (len(leaf[0]), leaf[0]))


def check_leaves(db, parent):
    """A new parent: its leaves are rc_zip_0 .. with the moduli meant, and
    each is registered with the parent's options."""
    leaves = leaves_of(db)
    want = [("rc_zip_%d" % i, m, r) for i, (m, r) in enumerate(parent.moduli)]
    if leaves != want:
        raise Failure("the parent rc_zip has the leaves %s, not %s" % (leaves, want), [], [], "", "")
    differ = db.all("SELECT r.tbl::text FROM zipper_lake.registration r, zipper_lake.registration p "
                    "WHERE p.tbl = 'rc_zip'::regclass AND r.tbl IN (SELECT inhrelid FROM pg_inherits "
                    "WHERE inhparent = p.tbl) AND (to_jsonb(r) - 'tbl') IS DISTINCT FROM (to_jsonb(p) - 'tbl')")
    registered = db.one("SELECT count(*) AS n FROM zipper_lake.registration r JOIN pg_inherits i "
                        "ON i.inhrelid = r.tbl WHERE i.inhparent = 'rc_zip'::regclass")["n"]
    if differ or registered != parent.n:
        raise Failure("of the %d leaves of rc_zip %d are registered, %s with other options than "
                      "the parent" % (parent.n, registered, differ or "none"), [], [], "", "")


def create_fold_table(db, cfg, clock, track):
    """rc_fold: a heap table kept by zl_fold, tracking as rc_zip."""
    db.run("CREATE TABLE rc_fold " + TABLE_DDL % {"t": cfg.period_type})
    db.run("SELECT zl_fold.register('rc_fold', ARRAY['id'], %s, %s::text[])",
           (clock.arg(OPEN), track_columns(track)))


def check_invariants(db, table, track="all"):
    """A heap table kept by a reference holds a well-formed history: no
    overlapping, empty or doubly-open versions, no adjacent ones with equal
    tracked values."""
    cols = track_columns(track) or VALUE_COLS
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
         AND ROW({x}) IS NOT DISTINCT FROM ROW({y})""".format(
             t=table, x=", ".join("x." + c for c in cols), y=", ".join("y." + c for c in cols)),
                      (db.clock.value(OPEN),))
    if problems:
        raise Failure("%s violates invariants: %s" % (table, problems[:10]), [], [], "", "")


# --------------------------------------------------------------------------- indexes
#
# README "Indexes": btree, hash, GiST and GIN indexes on a zipper table serve
# index and bitmap scans, every write keeps them and VACUUM removes entries of
# hidden rows.  Half the seeds (seed s when (s - 1) // 7 is even, so every
# configuration and tracking both ways; --indexes on|off forces it) give
# rc_zip some of the indexes below, each created (now and then CONCURRENTLY)
# before the first batch or between two batches, now and then REINDEXed or
# dropped (and maybe created again later).  Every check then reads rc_zip
# through them with enable_seqscan off, with enable_bitmapscan on and off, and
# compares with the same query on rc_fold, and runs amcheck's
# bt_index_check(index, heapallindexed => true) on the btrees.  The index plan
# and the reads come from their own random.Random, so a seed's data are the
# same with indexes or without.

RANGE_TYPES = {"timestamptz": "tstzrange", "timestamp": "tsrange", "date": "daterange"}
# one index of each kind at a time, named rc_zip_ix_<kind>; each kind has
# reads written for it, that no other kind serves
INDEX_KINDS = ("amount", "name", "id", "period", "array", "current")
BTREE_KINDS = ("amount", "current")
# (a parent's index rc_zip_ix_<kind> has one on each leaf rc_zip_<i>, which
# create_index names rc_zip_<i>_ix_<kind>)
INDEX_USE = re.compile(r"(?:Index Scan(?: Backward)? using|Bitmap Index Scan on) rc_zip(?:_\d+)?_ix_(\w+)")
# VACUUM (VERBOSE)'s report of an index pass (src/lifecycle/zl_index_vacuum.c)
INDEX_ENTRIES = re.compile(r'index "rc_zip(?:_\d+)?_ix_(\w+)" now has (\d+) entries')

# A read through the indexes: kind (the index it is written for; the first
# read of a kind in index_reads is one its index can always serve), sql (with
# {t}: rc_zip or rc_fold; shape "rows": what follows SELECT <COLS> FROM,
# otherwise the whole query), params, shape ("rows"; "ordered": its first
# column is the ORDER BY, compared in order, the rows as a multiset unless
# there is a LIMIT; "cursor": an ordered query run through a SCROLL cursor,
# forward and back).
IndexRead = collections.namedtuple("IndexRead", "kind sql params shape limit", defaults=(None,))


def open_literal(cfg):
    """The table's open end as a constant of the period type, written
    so that it does not depend on the session's TimeZone (it goes into a
    partial index's predicate and the reads that must imply it)."""
    if cfg.open_end == "infinity":
        text = "infinity"
    else:
        text = {"timestamptz": "9999-12-31 00:00:00+00", "timestamp": "9999-12-31 00:00:00",
                "date": "9999-12-31"}[cfg.period_type]
    return "'%s'::%s" % (text, cfg.period_type)


def index_variants(kind, cfg):
    """What follows USING in CREATE INDEX for an index of this kind."""
    period = "%s(valid_from, valid_to)" % RANGE_TYPES[cfg.period_type]
    return {
        "amount": ["btree (amount)", "btree (amount DESC)", "btree (amount, name)"],
        "name": ["hash (name)"],
        "id": ["hash (id)"],
        "period": ["gist (%s)" % period, "gist (%s) INCLUDE (amount)" % period],
        "array": ["gin ((ARRAY[id, amount]))", "gin ((ARRAY[id, amount])) WITH (fastupdate = off)"],
        "current": ["btree (valid_from) WHERE valid_to = %s" % open_literal(cfg),
                    "btree (valid_from, id) WHERE valid_to = %s" % open_literal(cfg)],
    }[kind]


def indexes_of(args, seed):
    """Whether seed s gives rc_zip indexes: --indexes, or (s - 1) // 7 even."""
    if args.indexes:
        return args.indexes == "on"
    return ((seed - 1) // len(CONFIGS)) % 2 == 0


# --------------------------------------------------------------------------- one seed

class SeedRun:
    """One seed of --mode inorder / late / mixed: random batches and
    snapshots applied to rc_zip, to rc_fold through zl_fold and to a
    FoldModel, compared after every application."""

    def __init__(self, db, args, seed):
        self.db, self.args, self.seed = db, args, seed
        self.cfg = CONFIG_BY_NAME[args.config] if args.config else CONFIGS[(seed - 1) % len(CONFIGS)]
        self.clock = db.clock = Clock(self.cfg)
        self.rng = random.Random(seed)          # data: same in every mode
        self.probe_rng = random.Random("probe-%d" % seed)   # reads, session zones
        self.ticks = args.batches * 6 + 24
        self.gen = Generator(self.rng, args, self.ticks)
        self.track = tracking_of(args, seed)
        self.model = FoldModel(self.track)
        self.zip = not args.reference_only
        # README "Zipper parents" in this directory: rc_zip a parent or not
        self.parent = parent_of(args, seed, self.cfg) if self.zip else None
        self.leaves = []                # a parent's leaves (setup), else none
        self.workers_rng = random.Random("workers-%d" % seed)    # apply_workers
        self.workers = 0                # zipper_lake.apply_workers of the last application
        self.counts = collections.Counter()     # what the run did
        self.stats = collections.Counter()      # the model's counts, summed over the run
        self.layout_max = collections.Counter()  # --verbose: see layout()
        self.life_rng = random.Random("life-%d" % seed)     # erase, VACUUM
        # indexes ("indexes" above): their own random numbers, so that the
        # data are the same with them or without
        self.index_rng = random.Random("index-%d" % seed)
        self.with_indexes = self.zip and indexes_of(args, seed)
        self.indexes = {}               # kind -> its definition, of the indexes rc_zip has now
        self.index_due = collections.defaultdict(list)      # batch number -> kinds to create before it
        self.index_log = []             # what was done to the indexes, for a report
        self.index_checked = set()      # kinds read through at least once
        self.index_seen = set()         # (kind, enable_bitmapscan) of the plans that read an index
        self.held = None                # rows a second session's held snapshot read (hold_snapshot)
        if self.with_indexes:
            self.plan_indexes()

    def fmt_row(self, r):
        return "(id=%s name=%s amount=%s [%s, %s))" % (
            r[0], r[1], r[2], self.clock.show(r[3]), self.clock.show(r[4]))

    # ---- setup
    def setup(self):
        db, cfg = self.db, self.cfg
        for name in ("rc_changes", "rc_changes_data", "rc_snapshot", "rc_fold", "rc_zip", "rc_source"):
            db.drop(name)
        db.run("DEALLOCATE ALL")
        db.run("SET TimeZone = 'UTC'")
        create_fold_table(db, cfg, self.clock, self.track)
        if self.zip:
            create_zip_table(db, cfg, self.clock, self.track, self.parent)
            self.leaves = leaves_of(db)
            if self.parent:
                db.run("SET zipper_lake.apply_workers = 0")
                self.workers = 0
            db.run("PREPARE rc_as_of(%s) AS SELECT %s FROM rc_zip "
                   "WHERE valid_from <= $1 AND valid_to > $1" % (cfg.period_type, Db.EPOCH_COLS))

    def choose_workers(self):
        """A parent: zipper_lake.apply_workers for the next application
        (apply_workers_of)."""
        if not self.parent:
            return
        k = apply_workers_of(self.args, self.parent, self.workers_rng)
        if k != self.workers:
            self.db.run("SET zipper_lake.apply_workers = %d" % k)
            self.workers = k
        self.counts["applications in workers"] += k >= 2 and self.parent.n >= 2

    def storages(self):
        """The zipper tables that hold rc_zip's rows: rc_zip, or a parent's
        leaves."""
        return [leaf[0] for leaf in self.leaves] or ["rc_zip"]

    def session_zone(self):
        """Timestamptz tables: a random session TimeZone for this batch (the
        results must not depend on it).  Timestamp and date tables stay at UTC:
        function arguments are cast to them in the session's zone."""
        if self.cfg.period_type == "timestamptz":
            self.db.run("SET TimeZone = %s", (self.probe_rng.choice(SESSION_ZONES),))

    # ---- loading
    def load_changes(self, changes, has_op, has_seq, enc):
        return load_changes(self.db, self.clock, changes, has_op, has_seq, self.rng, enc)

    # ---- applying: each returns {engine: counts}
    def apply_changes(self, has_seq, enc):
        db = self.db
        args = (", seq => 'seq'" if has_seq else "") + encoding_args(enc)
        got = {"zl_fold.apply_changes": db.one(
            "SELECT * FROM zl_fold.apply_changes('rc_fold', 'rc_changes'%s)" % args)}
        if self.zip:
            self.choose_workers()
            got["zipper_lake.apply_changes"] = db.one(
                "SELECT * FROM zipper_lake.apply_changes('rc_zip', 'rc_changes'%s)" % args)
        return got

    def apply_snapshot(self, rows, t, deletes, enc):
        db = self.db
        load_snapshot(db, rows, enc)
        got = {"zl_fold.apply_snapshot": db.one(
            "SELECT * FROM zl_fold.apply_snapshot('rc_fold', 'rc_snapshot', %%s, %%s%s)"
            % encoding_args(enc), (self.clock.arg(t), deletes))}
        if self.zip:
            self.choose_workers()
            # an empty image (every key deleted, say by a truncate) must say so
            got["zipper_lake.apply_snapshot"] = db.one(
                "SELECT * FROM zipper_lake.apply_snapshot('rc_zip', 'rc_snapshot', %%s, "
                "deletes => %%s%s%s)" % (encoding_args(enc), "" if rows else ", allow_empty => true"),
                (self.clock.arg(t), deletes))
        return got

    def apply_model(self, changes, read=None, snapshot=None):
        """Apply a batch (or a snapshot's image as upserts, snapshot = (tick,
        deletes)) to the model; return its counts."""
        counts = self.model.apply(changes, read, snapshot)
        self.stats.update(counts)
        return counts

    # ---- checks
    def check_counts(self, expected, got):
        for engine, counts in got.items():     # the reference first
            if counts != expected:
                raise counts_failure(CountsFailure, engine, counts, expected, "model")

    def check(self):
        db = self.db
        expected = self.model.rows()

        # the reference's invariants
        check_invariants(db, "rc_fold", self.track)

        # the reference equals the model
        ref = db.rows("SELECT %s FROM rc_fold" % COLS)
        missing, extra = diff(expected, ref)
        if missing or extra:
            raise Failure("rc_fold (zl_fold) differs from the Python fold model", missing, extra,
                          "model", "rc_fold")

        if self.zip:
            # the zipper table equals the reference, and is healthy
            zipped = db.rows("SELECT %s FROM rc_zip" % COLS)
            missing, extra = diff(ref, zipped)
            if missing or extra:
                raise Failure("rc_zip differs from rc_fold (the fold)", missing, extra,
                              "rc_fold", "rc_zip")
            bad = db.all("SELECT * FROM zipper_lake.verify('rc_zip')")
            if bad:
                raise Failure("zipper_lake.verify('rc_zip') reports problems:\n    " +
                              "\n    ".join(map(str, bad)), [], [], "", "")
            self.check_placement()
        if not self.args.no_read_helpers:
            self.check_reads(ref)
        if self.with_indexes:
            self.check_indexes()

    def compare(self, label, want, got, want_label="rc_fold"):
        missing, extra = diff(want, got)
        if missing or extra:
            raise Failure("%s differs from %s" % (label, want_label), missing, extra,
                          want_label, "this read")

    def check_reads(self, ref):
        """The same reads on rc_fold, in the model (on ref's rows) and on rc_zip."""
        db, clock, rng = self.db, self.clock, self.probe_rng

        # random WHERE clauses on the period columns: plain SQL, pruned on rc_zip
        for pred in self.probe_predicates():
            where, params = predicate_sql(pred, clock)
            label = "WHERE %s" % predicate_text(pred, clock)
            want = db.rows("SELECT %s FROM rc_fold WHERE %s" % (COLS, where), params)
            self.compare(label + " on rc_fold", [r for r in ref if predicate_holds(pred, r)], want,
                         "the model")
            if self.zip:
                self.compare(label + " on rc_zip", want,
                             db.rows("SELECT %s FROM rc_zip WHERE %s" % (COLS, where), params))
        if not self.zip:
            return

        # aggregates of the same reads, also grouped: on rc_zip computed in
        # the scan where its bounds are all the WHERE clause (README
        # "Aggregates in the scan"), on rc_fold by the executor's Agg node
        for pred in self.probe_predicates():
            where, params = predicate_sql(pred, clock)
            query = "SELECT %s FROM rc_zip WHERE %s" % (AGGREGATES, where)
            self.compare("aggregates WHERE %s" % predicate_text(pred, clock),
                         db.all("SELECT %s FROM rc_fold WHERE %s" % (AGGREGATES, where), params),
                         db.all(query, params))
            self.counts["aggregates in the scan"] += any(
                "ZipperAggregate" in line[0] for line in db.all("EXPLAIN " + query, params))
            # grouped by name (NULL a group of its own), by amount and
            # valid_from (keys the memo of bitwise keys takes), the groups in
            # any order; DISTINCT of those (the memo in front of the set)
            for select, group in (("name, " + AGGREGATES, " GROUP BY name"),
                                  ("amount, " + AGGREGATES, " GROUP BY amount"),
                                  ("valid_from, count(*), sum(amount)", " GROUP BY valid_from"),
                                  ("count(DISTINCT amount), count(DISTINCT valid_from), count(*)", "")):
                query = "SELECT %s FROM rc_zip WHERE %s%s" % (select, where, group)
                self.compare("aggregates%s WHERE %s" % (group, predicate_text(pred, clock)),
                             db.all("SELECT %s FROM rc_fold WHERE %s%s" % (select, where, group), params),
                             db.all(query, params))
                self.counts["aggregates in the scan"] += any(
                    "ZipperAggregate" in line[0] for line in db.all("EXPLAIN " + query, params))

        self.check_key_probes(ref)

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

    def check_key_probes(self, ref):
        """README "Key access": every key's history (and an absent key's),
        some under a random predicate's bounds, a few keys at once, and keys
        of a small outer relation through a parameterized nested loop.  Every
        key is probed at every step, so the session's single probes soon pay
        for the merged key index; later steps then find older sub-groups in
        it and newer ones (also those of a batch just applied) through their
        own directories."""
        db, clock, rng = self.db, self.clock, self.probe_rng
        keys = sorted({r[0] for r in ref}) + [-1]
        for k in keys:
            self.compare("WHERE id = %d" % k, [r for r in ref if r[0] == k],
                         db.rows("SELECT %s FROM rc_zip WHERE id = %%s" % COLS, (k,)))
        for k in rng.sample(keys, min(4, len(keys))):
            pred = rng.choice(self.probe_predicates())
            where, params = predicate_sql(pred, clock)
            self.compare("WHERE id = %d AND (%s)" % (k, predicate_text(pred, clock)),
                         [r for r in ref if r[0] == k and predicate_holds(pred, r)],
                         db.rows("SELECT %s FROM rc_zip WHERE id = %%s AND (%s)" % (COLS, where),
                                 [k] + params))
        some = rng.sample(keys, min(3, len(keys)))
        self.compare("WHERE id = ANY (%s)" % some, [r for r in ref if r[0] in some],
                     db.rows("SELECT %s FROM rc_zip WHERE id = ANY (%%s)" % COLS, (some,)))
        db.run("SET enable_hashjoin = off")
        db.run("SET enable_mergejoin = off")
        nested = ", ".join("(%d)" % k for k in some)
        self.compare("nested loop over the keys %s" % some, [r for r in ref if r[0] in some],
                     db.rows("SELECT %s FROM (VALUES %s) o(k) JOIN rc_zip ON id = o.k"
                             % (COLS, nested)))
        db.run("RESET enable_hashjoin")
        db.run("RESET enable_mergejoin")
        plan = db.all("EXPLAIN (VERBOSE, COSTS OFF) SELECT * FROM rc_zip WHERE id = %s", (keys[0],))
        self.counts["merged key index"] += any(
            line[0].strip().startswith("Sub-groups in Merged Key Index:") and
            not line[0].strip().endswith(": 0") for line in plan)

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
        one that owns its ctid's TID block (README "Row identifiers").  A
        parent's rows are checked in each leaf, and each must lie in the
        leaf its key hashes to (README "Zipper parents" in this directory)."""
        if self.leaves:
            wrong = self.db.all(
                "SELECT r.tableoid::regclass::text, r.id, b.m, b.r FROM rc_zip r "
                "JOIN (VALUES %s) b(leaf, m, r) ON b.leaf = r.tableoid "
                "WHERE NOT satisfies_hash_partition('rc_zip'::regclass, b.m, b.r, r.id)"
                % ", ".join("('%s'::regclass, %d, %d)" % leaf for leaf in self.leaves))
            if wrong:
                raise Failure("rows of rc_zip lie in leaves their keys do not hash to (leaf, id, "
                              "modulus, remainder): %s" % wrong[:10], [], [], "", "")
        for table in self.storages():
            self.check_placement_in(table)

    def check_placement_in(self, table):
        """check_placement in one zipper table."""
        clock = self.clock
        zone = self.cfg.time_zone if self.cfg.period_type == "timestamptz" else "UTC"
        res = self.db.all("""
            SELECT r.id, extract(epoch FROM r.valid_from), extract(epoch FROM r.valid_to),
                   s.sub_group, s.partition_end::text, s.window_start AT TIME ZONE %s,
                   g.window_end AT TIME ZONE %s
            FROM (SELECT (ctid::text::point)[0] AS block, * FROM {t}) r
            LEFT JOIN zipper_lake.subgroup g
              ON g.storage_id = zipper_lake._storage_id('{t}') AND r.block >= g.first_tid_block
             AND r.block < g.first_tid_block + greatest(CASE g.format WHEN 'c'
                           THEN (g.row_count + 290) / 291 ELSE g.blocks END, 1)
            LEFT JOIN zipper_lake.inspect('{t}') s ON s.sub_group = g.subgroup_id""".format(t=table),
                           (zone, zone))
        for key, f, t, sub_group, partition, window, window_end in res:
            f, t = clock.tick_of(f), clock.tick_of(t)
            row = "row id=%s [%s, %s) in sub-group %s%s" % (
                key, clock.show(f), clock.show(t), sub_group, " of " + table if self.leaves else "")
            if partition != clock.partition_of(t):
                raise Failure("%s is in partition %s, the README says %s"
                              % (row, partition, clock.partition_of(t)), [], [], "", "")
            want = clock.window_of(partition, f)
            if not clock.local_exists(want):   # a DST gap start: skipped
                continue
            # a history file group's window is whole base windows (README
            # "Storage"): [window_start, window_end) holds the row's
            if window_end is not None and not (window <= want < window_end):
                raise Failure("%s is in the window [%s, %s) (local), the README says in %s's"
                              % (row, window, window_end, want), [], [], "", "")
            if window_end is None and window != want:
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
        meant to?  (Compaction removes sub-groups, so rollovers do not stay.)
        A parent: the most of any leaf."""
        out = collections.Counter()
        for table in self.storages():
            for k, v in self.db.one("""
                SELECT count(DISTINCT partition_end) FILTER (WHERE partition_end <> 'infinity') AS history_partitions,
                       count(DISTINCT file_group) AS file_groups,
                       count(*) AS sub_groups,
                       (SELECT count(*) FROM (SELECT 1 FROM zipper_lake.inspect('{t}')
                                              WHERE partition_end = 'infinity'
                                              GROUP BY window_start HAVING count(DISTINCT file_group) > 1) w)
                         AS current_windows_rolled_over
                FROM zipper_lake.inspect('{t}')""".format(t=table)).items():
                out[k] = max(out[k], v)
        return out

    def track_layout(self):
        if self.args.verbose and self.zip:
            for k, v in self.layout().items():
                self.layout_max[k] = max(self.layout_max[k], v)

    # ---- indexes (README "Indexes")
    def plan_indexes(self):
        """Which kinds of index this seed creates, and before which batch
        (the first: on the empty table; a later one: between two batches)."""
        rng = self.index_rng
        kinds = [k for k in INDEX_KINDS if rng.random() < 0.75]
        while len(kinds) < 2:
            kinds = sorted(set(kinds) | {rng.choice(INDEX_KINDS)}, key=INDEX_KINDS.index)
        for kind in kinds:
            bno = 1 if rng.random() < 0.4 else rng.randint(2, max(2, self.args.batches))
            self.index_due[bno].append(kind)

    def index_sql(self, sql, bno):
        self.db.run(sql)
        self.index_log.append("before batch %d: %s" % (bno, sql))

    def create_index(self, kind, bno):
        """A parent's index is never made CONCURRENTLY (PostgreSQL cannot),
        and the index it makes on each leaf rc_zip_<i> is renamed
        rc_zip_<i>_ix_<kind>, for INDEX_USE, INDEX_ENTRIES and amcheck."""
        rng = self.index_rng
        definition = rng.choice(index_variants(kind, self.cfg))
        concurrently = rng.random() < 0.35 and not self.leaves
        self.index_sql("CREATE INDEX %src_zip_ix_%s ON rc_zip USING %s"
                       % ("CONCURRENTLY " if concurrently else "", kind, definition), bno)
        if self.leaves:
            for index, table in self.db.all(
                    "SELECT i.inhrelid::regclass::text, x.indrelid::regclass::text FROM pg_inherits i "
                    "JOIN pg_index x ON x.indexrelid = i.inhrelid "
                    "WHERE i.inhparent = 'rc_zip_ix_%s'::regclass" % kind):
                self.db.run("ALTER INDEX %s RENAME TO %s_ix_%s" % (index, table, kind))
            self.index_log.append("  (its index on each leaf rc_zip_<i> renamed rc_zip_<i>_ix_%s)" % kind)
        self.indexes[kind] = definition
        self.counts["indexes created"] += 1
        self.counts["created concurrently"] += concurrently

    def btrees(self, kind):
        """The btree indexes bt_index_check checks for an index kind: rc_zip's,
        or its index on each leaf of a parent."""
        return ["%s_ix_%s" % (table, kind) for table in self.storages()]

    def index_step(self, bno):
        """Before batch bno: create the indexes due; now and then REINDEX one
        index or the table (CONCURRENTLY or not), or drop an index
        (CONCURRENTLY or not; it may come back before a later batch).  What
        changed is read through at once.  False after reporting a failure."""
        rng = self.index_rng
        if not self.with_indexes:
            return True
        before, apps = self.model.rows(), self.model.apps
        kind = "index step before batch %d" % bno
        try:
            changed = False
            for k in self.index_due.pop(bno, []):
                if k not in self.indexes:
                    self.create_index(k, bno)
                    changed = True
            if bno > 1 and self.indexes:
                r = rng.random()
                if r < 0.08:
                    concurrently = "CONCURRENTLY " if rng.random() < 0.5 else ""
                    if rng.random() < 0.5:
                        self.index_sql("REINDEX TABLE %src_zip" % concurrently, bno)
                    else:
                        self.index_sql("REINDEX INDEX %src_zip_ix_%s"
                                       % (concurrently, rng.choice(sorted(self.indexes))), bno)
                    self.counts["reindexes"] += 1
                    changed = True
                elif r < 0.12:
                    k = rng.choice(sorted(self.indexes))
                    concurrently = rng.random() < 0.5 and not self.leaves     # not a parent's
                    self.index_sql("DROP INDEX %src_zip_ix_%s"
                                   % ("CONCURRENTLY " if concurrently else "", k), bno)
                    del self.indexes[k]
                    self.counts["indexes dropped"] += 1
                    if bno < self.args.batches and rng.random() < 0.6:
                        self.index_due[rng.randint(bno + 1, self.args.batches)].append(k)
            if changed and bno > 1:
                self.check_indexes()
            if bno > 1 and self.indexes and rng.random() < 0.15:
                kind = "a snapshot taken before batch %d" % bno
                self.hold_snapshot()
        except (Failure, psycopg2.Error) as err:
            self.report(bno, kind, [], err, before, apps)
            return False
        return True

    def hold_snapshot(self):
        """A second session begins a REPEATABLE READ transaction and reads
        rc_zip: what the model holds now.  It keeps that snapshot across
        the next batch and a VACUUM (release_snapshot); no index DDL, nor
        VACUUM FULL, runs meanwhile (they would wait for it)."""
        db2 = self.db.second()
        db2.run("BEGIN ISOLATION LEVEL REPEATABLE READ")
        self.held = db2.rows("SELECT %s FROM rc_zip" % COLS)
        self.compare("rc_zip read in a second session's new REPEATABLE READ snapshot",
                     self.model.rows(), self.held, "the model")
        self.counts["snapshots held"] += 1

    def release_snapshot(self, bno):
        """After batch bno, when a second session holds a snapshot taken
        before it: VACUUM (moving sub-groups off the end too), which must
        keep the index entries of every row that snapshot sees; in that
        session rc_zip still reads as it did, the reads through the indexes
        (sampled_reads; enable_seqscan off) return what the same reads
        return without index paths, and bt_index_check finds
        the btrees clean under the old snapshot; then it ends, and after
        another VACUUM rc_zip still equals rc_fold, verify() is clean, the
        reads through the indexes agree (check_indexes) and each index has
        an entry per row (check_index_entries).  False after reporting a
        failure."""
        if self.held is None:
            return True
        rows0, self.held = self.held, None
        db, db2 = self.db, self.db.second()
        before, apps = self.model.rows(), self.model.apps
        settings = ("enable_seqscan", "enable_indexscan", "enable_bitmapscan",
                    "enable_hashjoin", "enable_mergejoin")
        try:
            # TRUNCATE false: cutting the file's end would wait 5 s for
            # the lock the other session holds (as on heap tables), then give up
            db.run("SET zipper_lake.relocate_min_blocks = 1")
            db.run("VACUUM (TRUNCATE false) rc_zip")
            db.run("RESET zipper_lake.relocate_min_blocks")
            db2.run("SET enable_indexscan = off")
            db2.run("SET enable_bitmapscan = off")
            self.compare("rc_zip read again in the snapshot held since before batch %d" % bno,
                         rows0, db2.rows("SELECT %s FROM rc_zip" % COLS), "its first read")
            reads = self.sampled_reads(cursors=False)
            want = [self.read_index(r, "rc_zip", db2) for r, _ in reads]
            db2.run("RESET enable_indexscan")
            for setting in ("enable_seqscan", "enable_hashjoin", "enable_mergejoin"):
                db2.run("SET %s = off" % setting)
            used = 0
            for (read, bitmap), w in zip(reads, want):
                db2.run("SET enable_bitmapscan = %s" % ("on" if bitmap else "off"))
                sql = read.sql.format(t="rc_zip")
                label = ("in the snapshot held since before batch %d, read through the indexes "
                         "(enable_seqscan off, enable_bitmapscan %s): %s"
                         % (bno, "on" if bitmap else "off", db2.cur.mogrify(sql, read.params).decode()))
                self.compare_index_read(read, label, w, self.read_index(read, "rc_zip", db2))
                if read.shape == "rows":
                    sql = "SELECT %s FROM %s" % (COLS, sql)
                used += bool(INDEX_USE.search("\n".join(
                    r[0] for r in db2.all("EXPLAIN (COSTS OFF) " + sql, read.params))))
                self.counts["held snapshot reads"] += 1
            # an index built (or rebuilt) while a transaction older than
            # the held snapshot ran -- another session's on the cluster --
            # is one that snapshot must not use (indcheckxmin): the planner
            # leaves it out and amcheck refuses to check it
            fenced = {r[0] for r in db2.all(
                "SELECT indexrelid::regclass::text FROM pg_index WHERE indrelid = 'rc_zip'::regclass "
                "AND indcheckxmin AND xmin::text::bigint >= "
                "pg_snapshot_xmin(pg_current_snapshot())::text::bigint % 4294967296")}
            if not used and not fenced:
                raise Failure("no read in the held snapshot used an index", [], [], "", "")
            for kind in BTREE_KINDS:
                for index in self.btrees(kind) if kind in self.indexes else []:
                    if index in fenced:
                        self.counts["held snapshot amchecks of fenced indexes"] += 1
                        continue
                    try:
                        db2.run("SELECT bt_index_check('%s', true)" % index)
                    except psycopg2.Error as err:
                        raise Failure("in the snapshot held since before batch %d, bt_index_check("
                                      "'%s', heapallindexed => true): %s"
                                      % (bno, index, str(err).strip()), [], [], "", "")
            db2.run("COMMIT")
            for setting in settings:
                db2.run("RESET %s" % setting)
            # now no snapshot sees the rows the batch hid: the next VACUUM
            # removes their entries
            db.conn.notices.clear()
            db.run("VACUUM (VERBOSE) rc_zip")
            notices = list(db.conn.notices)
            self.compare("rc_zip after VACUUM", db.rows("SELECT %s FROM rc_fold" % COLS),
                         db.rows("SELECT %s FROM rc_zip" % COLS))
            bad = db.all("SELECT * FROM zipper_lake.verify('rc_zip')")
            if bad:
                raise Failure("zipper_lake.verify('rc_zip') reports problems:\n    " +
                              "\n    ".join(map(str, bad)), [], [], "", "")
            self.check_indexes()
            self.check_index_entries(notices)
        except (Failure, psycopg2.Error) as err:
            try:
                db2.run("ROLLBACK")
            except psycopg2.Error:
                pass
            self.report(bno, "VACUUM while a second session held a snapshot taken before the batch",
                        [], err, before, apps)
            return False
        return True

    def index_reads(self):
        """Reads written for the indexes rc_zip has now, with random
        constants: values of amount, name and id, instants (ticks, half
        ticks, the special values) and periods."""
        rng, clock, cfg = self.index_rng, self.clock, self.cfg
        top, typ = self.gen.wm + 2, cfg.period_type
        date = typ == "date"
        specials = [NEG, OPEN] + ([AFTER] if clock.finite_open_end else [])
        cols = COLS

        def instant():
            r = rng.random()
            if r < 0.1:
                return rng.choice(specials)
            if r < 0.3 and not date:
                return rng.randint(0, top) + 0.5
            return rng.randint(-1, top)

        def period():
            f, u = sorted((instant(), instant()))
            return clock.value(f), clock.value(u)

        t = instant()
        asof = "valid_from <= %%s::%s AND valid_to > %%s::%s" % (typ, typ)
        out = []
        if "amount" in self.indexes:
            x = rng.choice([1, 2, 2, 3])
            op = rng.choice(["<", "<=", ">", ">=", "<>"])
            out += [IndexRead("amount", "{t} WHERE amount = %s", [x], "rows"),
                    IndexRead("amount", "{t} WHERE amount %s %%s" % op, [rng.choice([0, 1, 2, 3])], "rows"),
                    rng.choice([IndexRead("amount", "{t} WHERE amount IS NULL", [], "rows"),
                                IndexRead("amount", "{t} WHERE amount IS NOT NULL", [], "rows"),
                                IndexRead("amount", "{t} WHERE amount = ANY (%s)",
                                          [rng.choice([[1, 2], [2, 5], [1]])], "rows"),
                                IndexRead("amount", "{t} WHERE amount BETWEEN %s AND %s",
                                          sorted([rng.randint(0, 3), rng.randint(0, 3)]), "rows")]),
                    # as of t, through the value's index
                    IndexRead("amount", "{t} WHERE amount = %%s AND %s" % asof,
                              [x, clock.value(t), clock.value(t)], "rows"),
                    # a nested loop probing the index once per outer row (a rescan)
                    IndexRead("amount", "(VALUES (1), (2), (%s)) v(a) JOIN {t} ON amount = v.a",
                              [rng.choice([1, 2, 3])], "rows")]
            order = rng.choice(["", " DESC", " DESC NULLS LAST", " NULLS FIRST"])
            limit = rng.choice([None, None, rng.randint(1, 2 * self.args.keys)])
            where = rng.choice(["", " WHERE amount IS NOT NULL", " WHERE amount >= 2"])
            sql = "SELECT amount, id, valid_from, valid_to FROM {t}%s ORDER BY amount%s" % (where, order)
            out.append(IndexRead("amount", sql + (" LIMIT %d" % limit if limit else ""), [], "ordered", limit))
            if rng.random() < 0.3:
                out.append(IndexRead("amount", sql, [], "cursor"))
        if "name" in self.indexes:
            name = rng.choice(["a", "b", "b", "c"])
            out += [IndexRead("name", "{t} WHERE name = %s", [name], "rows"),
                    IndexRead("name", "{t} WHERE name = %%s AND valid_to = %s" % open_literal(cfg),
                              [rng.choice(["a", "b"])], "rows")]
        if "id" in self.indexes:
            keys = list(range(1, self.args.keys + 1))
            some = rng.sample(keys, min(3, len(keys)))
            out += [IndexRead("id", "{t} WHERE id = %s", [rng.choice(keys + [-1])], "rows"),
                    IndexRead("id", "{t} WHERE id = %%s AND %s" % asof,
                              [rng.choice(keys), clock.value(t), clock.value(t)], "rows"),
                    IndexRead("id", "(VALUES %s) v(k) JOIN {t} ON id = v.k"
                              % ", ".join("(%d)" % k for k in some), [], "rows")]
        if "period" in self.indexes:
            rng_fn = RANGE_TYPES[typ]
            p = "%s(valid_from, valid_to)" % rng_fn
            f, u = period()
            out += [IndexRead("period", "{t} WHERE %s @> %%s::%s" % (p, typ), [clock.value(t)], "rows"),
                    IndexRead("period", "{t} WHERE %s && %s(%%s::%s, %%s::%s)" % (p, rng_fn, typ, typ),
                              [f, u], "rows"),
                    IndexRead("period", "{t} WHERE %s %s %s(%%s::%s, %%s::%s)"
                              % (p, rng.choice(["<@", "@>", "&<", "&>", "-|-"]), rng_fn, typ, typ),
                              list(period()), "rows")]
        if "array" in self.indexes:
            vals = lambda n: [rng.randint(1, max(3, self.args.keys)) for _ in range(n)]
            out += [IndexRead("array", "{t} WHERE ARRAY[id, amount] @> %s::int[]",
                              [vals(rng.choice([1, 1, 2]))], "rows"),
                    IndexRead("array", "{t} WHERE ARRAY[id, amount] %s %%s::int[]" % rng.choice(["&&", "<@", "="]),
                              [vals(rng.choice([1, 2, 3, 5]))], "rows")]
        if "current" in self.indexes:
            f, u = sorted((rng.randint(-1, top), rng.randint(-1, top)))
            cur = "valid_to = %s" % open_literal(cfg)
            out += [IndexRead("current", "{t} WHERE %s AND valid_from %s %%s::%s"
                              % (cur, rng.choice(["<", "<=", ">=", ">"]), typ), [clock.value(instant())], "rows"),
                    IndexRead("current", "{t} WHERE %s AND valid_from >= %%s::%s AND valid_from < %%s::%s"
                              % (cur, typ, typ), [clock.value(f), clock.value(u)], "rows")]
        return out

    def read_index(self, read, table, db=None):
        """The result of a read on a table (in the session db), in the form
        its shape compares."""
        db = db or self.db
        if read.shape == "rows":
            return db.rows("SELECT %s FROM %s" % (COLS, read.sql.format(t=table)), read.params)
        sql = read.sql.format(t=table)
        if read.shape == "ordered" or table != "rc_zip":
            return db.all(sql, read.params)
        db.run("BEGIN")
        try:
            db.run("DECLARE rc_ix_cursor SCROLL CURSOR FOR " + sql, read.params)
            forward = db.all("FETCH ALL FROM rc_ix_cursor")
            backward = db.all("FETCH BACKWARD ALL FROM rc_ix_cursor")
        finally:
            db.run("ROLLBACK")
        # ties may come back in another order (PostgreSQL's btree returns a
        # posting list's TIDs in ascending order also when it scans backward,
        # on heap tables too): the order column and the rows must agree
        if [r[0] for r in backward[::-1]] != [r[0] for r in forward] or \
                collections.Counter(backward) != collections.Counter(forward):
            plan = "\n      ".join(r[0] for r in db.all("EXPLAIN (COSTS OFF) " + sql, read.params))
            missing, extra = diff(forward, backward)
            raise Failure("a SCROLL cursor over rc_zip (enable_bitmapscan %s) read back other rows "
                          "than forward (%d rows forward, %d back): %s\n    plan:\n      %s\n"
                          "    only forward  %s\n    only backward %s"
                          % (db.one("SHOW enable_bitmapscan")["enable_bitmapscan"], len(forward),
                             len(backward), sql, plan, missing, extra), [], [], "", "")
        return forward

    def compare_index_read(self, read, label, want, got):
        if read.shape == "rows":
            return self.compare(label, want, got)
        if [r[0] for r in want] != [r[0] for r in got] or (
                read.limit is None and collections.Counter(want) != collections.Counter(got)):
            raise Failure("%s differs from rc_fold (first column: the order):\n    rc_fold %s\n    rc_zip  %s"
                          % (label, want, got), [], [], "", "")

    def note_plan(self, read, bitmap):
        """EXPLAIN a read until the plans of its kind used an index, in
        either setting of enable_bitmapscan."""
        if (read.kind, bitmap) in self.index_seen or (read.kind == "array" and not bitmap):
            return
        sql = read.sql.format(t="rc_zip")
        if read.shape == "rows":
            sql = "SELECT %s FROM %s" % (COLS, sql)
        plan = "\n".join(r[0] for r in self.db.all("EXPLAIN (COSTS OFF) " + sql, read.params))
        self.counts["index explains"] += 1
        for kind in INDEX_USE.findall(plan):
            self.index_seen.add((kind, bitmap))

    def sampled_reads(self, cursors=True):
        """Two of the reads of each kind (index_reads), each with
        enable_bitmapscan on or off, the two of a kind one each way:
        [(read, bitmap)].  self.primary_reads: the first read of each kind,
        which its index can always serve."""
        rng = self.index_rng
        by_kind = collections.defaultdict(list)
        for read in self.index_reads():
            if cursors or read.shape != "cursor":
                by_kind[read.kind].append(read)
        self.primary_reads = {kind: reads[0] for kind, reads in by_kind.items()}
        out = []
        for kind in sorted(by_kind):
            first = rng.random() < 0.5
            out += [(read, first if i == 0 else not first)
                    for i, read in enumerate(rng.sample(by_kind[kind], min(2, len(by_kind[kind]))))]
        return out

    def check_indexes(self):
        """Reads written for the indexes rc_zip has now (sampled_reads),
        with enable_seqscan off and enable_bitmapscan on or off, return
        what they return on rc_fold; bt_index_check(heapallindexed) finds
        every btree clean."""
        if not self.indexes:
            return
        db = self.db
        reads = self.sampled_reads()
        want = [self.read_index(r, "rc_fold") for r, _ in reads]
        try:
            db.run("SET enable_seqscan = off")
            db.run("SET enable_hashjoin = off")
            db.run("SET enable_mergejoin = off")
            for (read, bitmap), w in zip(reads, want):
                db.run("SET enable_bitmapscan = %s" % ("on" if bitmap else "off"))
                label = "read through the indexes (enable_seqscan off, enable_bitmapscan %s): %s" % (
                    "on" if bitmap else "off",
                    db.cur.mogrify(read.sql.format(t="rc_zip"), read.params).decode())
                self.compare_index_read(read, label, w, self.read_index(read, "rc_zip"))
                self.note_plan(read, bitmap)
                self.counts["index reads"] += 1
            # an index whose sampled reads it could not serve (amount <> x,
            # say) is seen used by its first read -- with bitmap scans on,
            # by a bitmap scan: a tiny table's plan may otherwise read all of
            # another index (GIN, which has no index scans, then goes unseen)
            for kind, read in sorted(self.primary_reads.items()):
                for bitmap in (True, False):
                    if (kind, bitmap) not in self.index_seen:
                        db.run("SET enable_bitmapscan = %s" % ("on" if bitmap else "off"))
                        db.run("SET enable_indexscan = %s" % ("off" if bitmap else "on"))
                        self.note_plan(read, bitmap)
        finally:
            for setting in ("enable_seqscan", "enable_hashjoin", "enable_mergejoin", "enable_bitmapscan",
                            "enable_indexscan"):
                db.run("RESET %s" % setting)
        self.index_checked |= set(self.indexes)
        for kind in BTREE_KINDS:
            for index in self.btrees(kind) if kind in self.indexes else []:
                try:
                    db.run("SELECT bt_index_check('%s', true)" % index)
                except psycopg2.Error as err:
                    raise Failure("bt_index_check('%s', heapallindexed => true) on %s: %s"
                                  % (index, self.indexes[kind], str(err).strip()), [], [], "", "")
                self.counts["amchecks"] += 1

    def check_index_entries(self, notices, again=True):
        """After a VACUUM: every btree, hash and GiST index has exactly one
        entry per row it covers (rc_zip equals rc_fold by now): VACUUM
        removed the entries of hidden rows (README "Indexes") and no write
        entered a row twice.  GIN's count is an estimate: not checked.
        Fewer entries always fail.  More may be entries another session's
        snapshot keeps (VACUUM's horizon is the cluster's: a snapshot in any
        database counts): if some other session has one, only fewer fail;
        if none has, one more VACUUM must remove them (a snapshot may have
        ended since)."""
        db = self.db
        if any("index entries of hidden rows not removed" in n for n in notices):
            raise Failure("VACUUM skipped the index pass (no writer holds the table):\n    " +
                          "    ".join(notices), [], [], "", "")
        # a parent: the sum over its leaves, each of which must report
        entries, reports = {}, collections.Counter()
        for m in (INDEX_ENTRIES.search(n) for n in notices):
            if m:
                entries[m.group(1)] = entries.get(m.group(1), 0) + int(m.group(2))
                reports[m.group(1)] += 1
        entries = {k: v for k, v in entries.items() if reports[k] == len(self.storages())}
        rows = db.one("SELECT count(*) AS amount, count(name) AS name, count(id) AS id, "
                      "count(*) AS period, count(*) FILTER (WHERE valid_to = %s) AS current "
                      "FROM rc_fold" % open_literal(self.cfg))
        bad = [k for k in sorted(set(self.indexes) - {"array"}) if entries.get(k) != rows[k]]
        if bad and all(entries.get(k) is not None and entries[k] > rows[k] for k in bad):
            others = db.one("SELECT (SELECT count(*) FROM pg_stat_activity WHERE pid <> pg_backend_pid() "
                            "AND backend_xmin IS NOT NULL) + (SELECT count(*) FROM pg_prepared_xacts) AS n")["n"]
            if others:
                self.counts["index entry counts held back"] += 1
                return
            if again:
                db.conn.notices.clear()
                db.run("VACUUM (VERBOSE) rc_zip")
                return self.check_index_entries(list(db.conn.notices), again=False)
        if bad:
            k = bad[0]
            raise Failure("after VACUUM rc_zip_ix_%s (%s) has %s entries%s, rc_fold %d rows it would "
                          "cover (hash: non-NULL keys; the partial index: open versions)%s; "
                          "VACUUM said:\n    %s" % (k, self.indexes[k], entries.get(k),
                                                     " (its leaves' indexes together)" if self.leaves else "",
                                                     rows[k],
                                                     "" if again else " (the second VACUUM, no other "
                                                     "session holding a snapshot)",
                                                     "    ".join(n for n in notices if "zipper_lake" in n)),
                          [], [], "", "")
        self.counts["index entry counts"] += 1

    def check_index_use(self):
        """Every index read through was used by a plan, with
        enable_bitmapscan on and off (GIN, which has no index scans, with
        it on), or the comparisons above would not test it."""
        unused = sorted((k, b) for k in self.index_checked for b in (True, False)
                        if (k, b) not in self.index_seen and (b or k != "array"))
        if unused:
            raise Failure("no plan read through %s (with enable_seqscan off)" % ", ".join(
                "rc_zip_ix_%s with enable_bitmapscan %s" % (k, "on" if b else "off") for k, b in unused),
                [], [], "", "")

    # ---- reporting
    def report(self, bno, kind, changes, err, before, apps):
        """before: the model's rows before the batch, apps: the applications
        before it."""
        clock = self.clock
        out = ["MISMATCH seed=%d batch=%d (%s)" % (self.seed, bno, kind),
               "  config %s" % describe_config(self.cfg),
               "  track_columns %s" % track_columns(self.track),
               "  rc_zip: %s" % describe_parent(self.parent)]
        if self.parent:
            out.append("  zipper_lake.apply_workers of the last application: %d" % self.workers)
        out += describe_failure(err, self.fmt_row)
        keys = {r[0] for r in err.args[1] + err.args[2]} if isinstance(err, Failure) else set()
        shown = [c for c in changes if not keys or c.id in keys or is_truncate(c.op)]
        out.append("  batch%s:" % (
            "" if len(shown) == len(changes) else
            ", %d of %d changes: those of the keys above" % (len(shown), len(changes))))
        for c in sorted(shown, key=lambda c: (c.id is not None, c.id or 0, c.tick,
                                              -1 if c.seq is None else c.seq)):
            out.append("    id=%s name=%s amount=%s t=%s op=%s seq=%s" %
                       (c.id, c.name, c.amount, clock.show(c.tick), c.op, c.seq))
        if isinstance(err, CountsFailure):
            out.append("  what the model says each change of it did:")
            out += outcome_lines(clock, self.model.outcomes)
        out.append("  model state before the batch%s:" % (", those keys" if keys else ""))
        for r in sorted(before, key=lambda r: (r[0], r[3])):
            if not keys or r[0] in keys:
                out.append("    " + self.fmt_row(r))
        out.append("  changes applied before the batch%s, in fold order (application number):"
                   % (", those keys" if keys else ""))
        for key in sorted(k for k in self.model.keys() if not keys or k in keys):
            for c in self.model.changes_of(key):
                if c.app <= apps:
                    out.append("    id=%s t=%s seq=%s %s (%d)" % (
                        key, clock.show(c.t), c.seq, "upsert %s" % (c.vals,) if c.upsert else
                        "delete" + (" (snapshot's, of a missing key)" if c.snapshot_delete else ""),
                        c.app))
        if self.with_indexes:
            out.append("  indexes of rc_zip now: %s" % (", ".join(
                "rc_zip_ix_%s USING %s" % kv for kv in sorted(self.indexes.items())) or "none"))
            out += ["    " + line for line in self.index_log]
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
            if not self.index_step(bno):
                return False
            before, apps = self.model.rows(), self.model.apps
            self.session_zone()
            if bno > 1 and rng.random() < 0.1:
                rows, t, deletes, enc = gen.snapshot(self.model)
                kind = "snapshot at %s, deletes=%s%s (the batch: its image)" % (
                    self.clock.show(t), deletes, ", " + describe_encoding(enc) if enc != PLAIN else "")
                changes = [Change(r[0], r[1], r[2], t, "U", None) for r in rows]
                gen.wm = max(gen.wm, t)
                try:
                    expected = self.apply_model(changes, len(rows), (t, deletes))
                    self.check_counts(expected, self.apply_snapshot(rows, t, deletes, enc))
                    self.check()
                except (Failure, psycopg2.Error) as err:
                    self.report(bno, kind, changes, err, before, apps)
                    return False
                self.counts["snapshots"] += 1
                self.counts["partial snapshots"] += any(KEEP in r[1:] for r in rows)
                self.track_layout()
                if not self.release_snapshot(bno):
                    return False
                continue

            kind = gen.batch_kind()
            changes, has_op, has_seq, enc = gen.changes(self.model, kind, truncates=True)
            gen.wm = max([gen.wm] + [c.tick for c in changes])
            try:
                how = self.load_changes(changes, has_op, has_seq, enc)
                kind += ", %s%s%s%s" % (how, ", seq" if has_seq else "", "" if has_op else ", no op column",
                                        ", " + describe_encoding(enc) if enc != PLAIN else "")
                expected = self.apply_model(changes)
                self.check_counts(expected, self.apply_changes(has_seq, enc))
                self.check()
                if rng.random() < 0.08:                  # re-applying changes nothing
                    kind += ", re-applied"
                    before, apps = self.model.rows(), self.model.apps
                    expected = self.apply_model(changes)
                    check_reapplied(before, self.model, expected)
                    self.check_counts(expected, self.apply_changes(has_seq, enc))
                    self.check()
                    self.counts["re-applied"] += 1
                if bno == 1 and self.zip:
                    self.check_pruned()
            except (Failure, psycopg2.Error) as err:
                self.report(bno, kind, changes, err, before, apps)
                return False
            self.counts["changes"] += len(changes)
            self.counts["seq batches"] += has_seq
            self.counts["truncates"] += sum(is_truncate(c.op) for c in changes)
            self.counts["partial changes"] += sum(KEEP in (c.name, c.amount) for c in changes
                                                  if is_upsert(c.op))
            self.track_layout()
            if not self.release_snapshot(bno):
                return False
            if self.zip and not self.lifecycle(bno):
                return False
        if self.with_indexes:
            try:
                self.check_index_use()
            except Failure as err:
                self.report(args.batches, "the plans of the reads through the indexes", [], err,
                            self.model.rows(), self.model.apps)
                return False
        return True

    def lifecycle(self, bno):
        """Now and then (README "Lifecycle"): erase a few keys -- from
        rc_zip, from the reference's log and from the model -- and VACUUM
        rc_zip (which compacts sub-groups with many masked rows, may write the
        current partition columnar, which later batches then read, and moves
        sub-groups off the end of a mostly free file); the tables
        must still agree, and later batches fold the erased keys from
        "absent"."""
        rng, db = self.life_rng, self.db
        before, apps = self.model.rows(), self.model.apps
        kind = None
        try:
            if rng.random() < 0.15 and self.model.keys():
                keys = rng.sample(sorted(self.model.keys()), min(len(self.model.keys()), rng.randint(1, 3)))
                kind = "erase of keys %s" % keys
                db.drop("rc_erase")
                db.run("CREATE TABLE rc_erase (id int)")
                db.run("INSERT INTO rc_erase SELECT unnest(%s::int[])", (keys,))
                db.run("SELECT zl_fold.erase('rc_fold', 'rc_erase')")
                db.run("SELECT zipper_lake.erase('rc_zip', 'rc_erase')")
                self.model.erase(keys)
                self.check()
                self.counts["erases"] += 1
            if rng.random() < 0.15:
                kind = "VACUUM (compacts masked rows, may write the current partition columnar, moves sub-groups off the end of the file)"
                # now and then writing the current partition columnar (README "Storage formats")
                db.run("SET zipper_lake.columnar_current = %s" % ("on" if rng.random() < 0.7 else "off"))
                # small tables too: any free block is worth a move here
                db.run("SET zipper_lake.relocate_min_blocks = 1")
                notices = None
                if rng.random() < 0.25:
                    # the whole table written again into a new file (README "DDL")
                    if "amount" in self.indexes and self.index_rng.random() < 0.5:
                        # or, with a btree to cluster on, CLUSTER (indexes rebuilt)
                        kind = "CLUSTER rc_zip USING rc_zip_ix_amount (every version written again)"
                        db.run("CLUSTER rc_zip USING rc_zip_ix_amount")
                        self.counts["clusters"] += 1
                    else:
                        kind = "VACUUM FULL (every version written again, placed, columnar)"
                        db.run("VACUUM FULL rc_zip")
                    self.counts["vacuum fulls"] += 1
                else:
                    # with indexes VERBOSE: how many entries each has after it
                    db.conn.notices.clear()
                    db.run("VACUUM (VERBOSE) rc_zip" if self.indexes else "VACUUM rc_zip")
                    notices = list(db.conn.notices)
                db.run("RESET zipper_lake.columnar_current")
                db.run("RESET zipper_lake.relocate_min_blocks")
                self.check()
                if self.indexes and notices is not None:
                    self.check_index_entries(notices)
                self.counts["vacuums"] += 1
                # later batches then meet columnar open versions (README "Storage formats")
                for table in self.storages():
                    self.counts["columnar current"] += db.one(
                        "SELECT count(*) AS n FROM zipper_lake.inspect('%s') "
                        "WHERE partition_end = 'infinity' AND format = 'columnar'" % table)["n"]
        except (Failure, psycopg2.Error) as err:
            self.report(bno, kind, [], err, before, apps)
            return False
        return True


# --------------------------------------------------------------------------- the fold (--mode batching)
#
# README "The fold" in this directory: the history a zipper table holds
# whatever the batching.  fold_reference.sql (schema zl_fold) keeps every
# change in a log and folds it; FoldModel above is the same contract in Python,
# formulated differently.  FoldRun applies one random stream (a) in as few
# applications as it allows and (b) cut into random pieces applied in a random
# order, and checks zl_fold against the model after every application, and
# both runs against the fold of the stream (with --check-zipper zipper_lake
# too).

# A snapshot in a stream: its tick, its image [(id, name, amount)] (KEEP:
# a column a row keeps), deletes, and how it is loaded and applied (an
# Encoding the rows fit: a snapshot is one application whatever the plan).
StreamSnapshot = collections.namedtuple("StreamSnapshot", "tick rows deletes enc")

# One application of a plan: a batch of changes (as loaded: identical
# duplicates included; has_seq: with a seq column) or a snapshot; again: a
# re-application of the entry before, which must change nothing; enc: how
# the batch is loaded and applied (every change fits it).
App = collections.namedtuple("App", "changes snapshot has_seq again enc", defaults=(PLAIN,))


def chain_slots(item, keys):
    """The (key, instant)s where a stream item is a change without seq: there
    its order against the other such changes is the order of application, so
    a plan must keep their order of the stream (a snapshot with deletes is
    such a change of every key)."""
    if isinstance(item, StreamSnapshot):
        ks = range(1, keys + 1) if item.deletes else {r[0] for r in item.rows}
        return {(k, item.tick) for k in ks}
    return {(item.id, item.tick)} if item.seq is None else set()


def fold_stream(rng, args, ticks, track):
    """One random stream for --mode batching: (items, model), model being
    the fold of the items applied one by one in stream order (the history
    every plan must end with).  The stream's time goes on from 0 to ticks;
    a quarter of the changes are late, a quarter of the fresh ones have a
    seq; besides fresh changes there are changes repeated exactly, changes at
    the instant of an earlier one ordered by a new seq, changes without seq
    at an instant that already has one (corrections: the later one wins),
    and snapshots (now or late) with and without deletes.  Values are often
    the key's value at t (no-ops) or one it had before (returns).  A
    quarter of the upserts are partial (they give one column or none, the
    rest KEEP); a snapshot draws its Encoding and its rows fit it."""
    model = FoldModel(track)
    items, seqless = [], []         # seqless: chain slots so far, for corrections
    seqs = collections.defaultdict(set)
    kinds = collections.Counter()

    def fresh_seq(key, t):
        seq = rng.randint(1, 999)
        while seq in seqs[(key, t)]:
            seq = rng.randint(1, 999)
        seqs[(key, t)].add(seq)
        return seq

    def values(key, t):
        r = rng.random()
        if r < 0.3 and model.value_at(key, t) is not None:
            return model.value_at(key, t)
        if r < 0.5 and model.history(key):
            return rng.choice(model.history(key))[2]
        return rng.choice(NAMES), rng.choice(AMOUNTS)

    def given(name, amount):
        """A new upsert: full, or partial (one column given, or none)."""
        r = rng.random()
        return ((name, amount) if r < 0.75 else (name, KEEP) if r < 0.87 else
                (KEEP, amount) if r < 0.98 else (KEEP, KEEP))

    nchanges = 0
    while nchanges < args.batch_size:
        now = nchanges * (ticks - 4) // args.batch_size
        plain = [it for it in items if isinstance(it, Change)]
        r = rng.random()
        if r < 0.06 and plain:
            t = now if rng.random() < 0.7 else rng.randint(0, now)
            enc = rng.choices([e for e, _ in ENCODINGS], [w for _, w in ENCODINGS])[0]
            rows = []
            for key in range(1, args.keys + 1):
                v, x = model.value_at(key, t), rng.random()
                if v is None and x < 0.15:
                    rows.append((key,) + encode(rng, rng.choice(NAMES), rng.choice(AMOUNTS), enc))
                elif v is not None and x >= 0.15:
                    rows.append((key,) + encode(
                        rng, *(v if x >= 0.4 else (rng.choice(NAMES), rng.choice(AMOUNTS))), enc))
            if not rows:            # zipper_lake refuses an empty image
                rows.append((rng.randint(1, args.keys),) +
                            encode(rng, rng.choice(NAMES), rng.choice(AMOUNTS), enc))
            item = StreamSnapshot(t, rows, rng.random() < 0.6, enc)
            kinds["partial snapshots"] += any(KEEP in r[1:] for r in rows)
            model.apply([Change(k, n, a, t, "U", None) for k, n, a in rows], read=len(rows),
                        snapshot=(t, item.deletes))
            kinds["snapshots"] += 1
        else:
            if r < 0.14 and plain:
                item = rng.choice(plain)
                kinds["repeated"] += 1
            else:
                if r < 0.26 and plain:
                    other = rng.choice(plain)
                    key, t, seq = other.id, other.tick, fresh_seq(other.id, other.tick)
                    kinds["same instant with seq"] += 1
                elif r < 0.36 and seqless:
                    key, t = rng.choice(seqless)
                    seq = None
                    kinds["corrections"] += 1
                else:
                    key = rng.randint(1, args.keys)
                    t = rng.randint(0, now) if rng.random() < 0.25 else min(ticks - 1, now + rng.randint(0, 3))
                    seq = fresh_seq(key, t) if rng.random() < 0.25 else None
                if rng.random() < 0.2:
                    op, (name, amount) = rng.choice(DELETE_OPS), (rng.choice(NAMES), rng.choice(AMOUNTS))
                else:
                    op, (name, amount) = rng.choice(UPSERT_OPS), given(*values(key, t))
                    kinds["partial"] += KEEP in (name, amount)
                item = Change(key, name, amount, t, op, seq)
            model.apply([item])
            nchanges += 1
        items.append(item)
        seqless += sorted(chain_slots(item, args.keys) - set(seqless))
    return items, model, kinds


def fold_plan_levels(items, keys):
    """Plan (a): as few applications as the stream allows: level n holds the
    items that are the n-th of a chain slot they share with earlier items;
    one batch of the changes of each level, then its snapshots one by one."""
    level, last = [], {}
    for it in items:
        lv = max([last[s] + 1 for s in chain_slots(it, keys) if s in last], default=0)
        level.append(lv)
        for s in chain_slots(it, keys):
            last[s] = lv
    groups = []
    for lv in range(max(level, default=-1) + 1):
        changes = [it for it, l in zip(items, level) if l == lv and isinstance(it, Change)]
        if changes:
            groups.append(changes)
        groups += [it for it, l in zip(items, level) if l == lv and isinstance(it, StreamSnapshot)]
    return groups


def fold_plan_random(rng, items, keys, max_pieces):
    """Plan (b): the items in a random order that keeps every chain slot's
    order (from the stream's own order to any), cut into up to max_pieces
    pieces (and wherever a piece would hold two changes of one chain slot,
    and around every snapshot), the pieces applied in a random order that
    keeps the chain slots' order again."""
    n = len(items)
    preds, last = [set() for _ in items], {}
    for i, it in enumerate(items):
        for s in chain_slots(it, keys):
            if s in last:
                preds[i].add(last[s])
            last[s] = i
    spread = rng.choice([0, 3, 10, n])
    rank = [i + rng.uniform(0, spread) for i in range(n)]
    order, done = [], set()
    while len(order) < n:
        i = min((i for i in range(n) if i not in done and preds[i] <= done), key=lambda i: rank[i])
        order.append(i)
        done.add(i)

    cuts = set(rng.sample(range(1, n), min(n - 1, rng.randint(1, max_pieces - 1)))) if n > 1 else set()
    pieces, cur, cur_slots = [], [], set()
    for pos, i in enumerate(order):
        slots = chain_slots(items[i], keys)
        if cur and (pos in cuts or isinstance(items[i], StreamSnapshot) or slots & cur_slots):
            pieces.append(cur)
            cur, cur_slots = [], set()
        cur.append(i)
        cur_slots |= slots
        if isinstance(items[i], StreamSnapshot):
            pieces.append(cur)
            cur, cur_slots = [], set()
    if cur:
        pieces.append(cur)

    piece_of = {i: p for p, piece in enumerate(pieces) for i in piece}
    piece_preds = [{piece_of[q] for i in piece for q in preds[i]} for piece in pieces]
    groups, done = [], set()
    while len(groups) < len(pieces):
        p = rng.choice([p for p in range(len(pieces)) if p not in done and piece_preds[p] <= done])
        done.add(p)
        first = items[pieces[p][0]]
        groups.append(first if isinstance(first, StreamSnapshot) else [items[i] for i in pieces[p]])
    return groups


def split_encodings(rng, changes):
    """Cut a group of changes into batches that each fit one Encoding
    [(encoding, changes)], in a random order (the group holds no two
    changes of one chain slot, so any order gives the same fold): each time
    an encoding drawn by its weight times the square of the number of the
    changes left that fit it."""
    rest, out = list(changes), []
    while rest:
        cands = [(e, w * len(f) ** 2, f) for e, w in ENCODINGS
                 for f in [[c for c in rest if fits(c, e)]] if f]
        enc, _, batch = rng.choices(cands, [w for _, w, _ in cands])[0]
        out.append((enc, batch))
        rest = [c for c in rest if not fits(c, enc)]
    rng.shuffle(out)
    return out


def fold_plan(rng, groups, reapply):
    """Plan entries for groups of items: a group of changes cut into batches
    of one encoding each (split_encodings), identical duplicate rows now and
    then, a seq column when a change has a seq (and sometimes without), and
    with reapply, now and then the same entry again."""
    plan = []
    for g in groups:
        if isinstance(g, StreamSnapshot):
            rows = list(g.rows)
            if rng.random() < 0.2:
                rows.append(rng.choice(rows))
            rng.shuffle(rows)
            apps = [App(None, g._replace(rows=rows), False, False, g.enc)]
        else:
            apps = []
            for enc, batch in split_encodings(rng, g):
                changes = list(batch)
                if rng.random() < 0.2:
                    changes.append(rng.choice(changes))
                rng.shuffle(changes)
                apps.append(App(changes, None, any(c.seq is not None for c in changes) or
                                rng.random() < 0.2, False, enc))
        for app in apps:
            plan.append(app)
            if reapply and rng.random() < 0.1:
                plan.append(app._replace(again=True))
    return plan


def fold_model_apply(model, app):
    if app.snapshot:
        s = app.snapshot
        return model.apply([Change(k, n, a, s.tick, "U", None) for k, n, a in s.rows],
                           read=len(s.rows), snapshot=(s.tick, s.deletes))
    return model.apply(app.changes)


class ZipperDiffers(Failure):
    pass


# README "Batching test": the example every fold must give exactly (ticks are
# days from 2024-01-01), with the counts of README "Counts of the fold".
EXAMPLE_CONFIG = Config("example", "timestamptz", DAY, datetime.datetime(2024, 1, 1),
                        "UTC", "day", "1 day", "1 day", 32, "infinity")
EXAMPLE_PLAN = [
    App([Change(1, None, None, 1, "d", None)], None, False, False),
    App([Change(1, "a", None, 0, "c", None), Change(2, "a", None, 0, "c", None),
         Change(2, "a", None, 2, "u", None), Change(3, "a", None, 0, "c", None),
         Change(3, "a", None, 2, "c", None)], None, False, False),
    App([Change(2, "b", None, 1, "u", None), Change(3, None, None, 1, "d", None)], None, False, False)]
EXAMPLE_ROWS = [(1, "a", None, 0, 1),
                (2, "a", None, 0, 1), (2, "b", None, 1, 2), (2, "a", None, 2, OPEN),
                (3, "a", None, 0, 1), (3, "a", None, 2, OPEN)]
EXAMPLE_COUNTS = [(1, 0, 0, 0, 1, 0), (5, 3, 0, 0, 2, 1), (2, 1, 0, 1, 0, 2)]

# README "Batching test": the partial example (README "Partial changes" in
# the top README, name = b, amount = a, and more).
IGNORE_NULLS = Encoding(True, (), None)
PARTIAL_EXAMPLE_PLAN = [
    App([Change(1, "x", 1, 0, "I", None), Change(2, "x", 1, 0, "I", None)], None, False, False),
    App([Change(1, KEEP, 2, 2, "U", None), Change(2, KEEP, 2, 2, "U", None)], None, False, False,
        IGNORE_NULLS),
    App([Change(1, "y", 5, 1, "U", None), Change(2, "y", 5, 1, "U", None)], None, False, False),
    App([Change(3, "z", KEEP, 0, "U", 2), Change(3, KEEP, 7, 0, "U", 1)], None, True, False,
        IGNORE_NULLS),
    App([Change(1, "w", KEEP, 3, "U", None)], None, False, False,
        Encoding(False, ("amount",), "keep")),
    App([Change(2, None, 9, 3, "U", None)], None, False, False,
        Encoding(False, ("name",), "null")),
    App([Change(1, None, None, 1, "D", None)], None, False, False),
    App(None, StreamSnapshot(4, [(2, KEEP, 4)], False, IGNORE_NULLS), False, False, IGNORE_NULLS)]
PARTIAL_EXAMPLE_ROWS = [(1, "x", 1, 0, 1), (1, None, 2, 2, 3), (1, "w", 2, 3, OPEN),
                        (2, "x", 1, 0, 1), (2, "y", 5, 1, 2), (2, "y", 2, 2, 3),
                        (2, None, 9, 3, 4), (2, None, 4, 4, OPEN),
                        (3, "z", 7, 0, OPEN)]
PARTIAL_EXAMPLE_COUNTS = [(2, 2, 0, 0, 0, 0), (2, 2, 2, 0, 0, 0), (2, 2, 0, 0, 0, 2),
                          (2, 2, 0, 0, 0, 0), (1, 1, 1, 0, 0, 0), (1, 1, 1, 0, 0, 0),
                          (1, 0, 0, 1, 0, 1), (1, 1, 1, 0, 0, 0)]
EXAMPLES = [("example", EXAMPLE_PLAN, EXAMPLE_ROWS, EXAMPLE_COUNTS),
            ("partial example", PARTIAL_EXAMPLE_PLAN, PARTIAL_EXAMPLE_ROWS, PARTIAL_EXAMPLE_COUNTS)]


class FoldRun:
    """One seed of --mode batching (README "Batching test")."""

    def __init__(self, db, args, seed, cfg=None):
        self.db, self.args, self.seed = db, args, seed
        self.cfg = cfg or (CONFIG_BY_NAME[args.config] if args.config
                           else CONFIGS[(seed - 1) % len(CONFIGS)])
        self.clock = db.clock = Clock(self.cfg)
        self.rng = random.Random(seed)
        self.zip = args.check_zipper
        self.track = tracking_of(args, seed)
        # README "Zipper parents" in this directory
        self.parent = parent_of(args, seed, self.cfg) if self.zip else None
        self.workers_rng = random.Random("workers-%d" % seed)    # apply_workers
        self.workers = 0
        self.counts = collections.Counter()     # what the run did
        self.stats = collections.Counter()      # summed counts of plan (b)

    def fmt_row(self, r):
        return "(id=%s name=%s amount=%s [%s, %s))" % (
            r[0], r[1], r[2], self.clock.show(r[3]), self.clock.show(r[4]))

    def setup(self, fold=True):
        db = self.db
        for name in ("rc_changes", "rc_changes_data", "rc_snapshot", "rc_fold", "rc_zip", "rc_source"):
            db.drop(name)
        db.run("SET TimeZone = 'UTC'")
        if fold:
            create_fold_table(db, self.cfg, self.clock, self.track)
        if self.zip:
            create_zip_table(db, self.cfg, self.clock, self.track, self.parent)
            if self.parent:
                db.run("SET zipper_lake.apply_workers = 0")
                self.workers = 0

    def choose_workers(self):
        """As SeedRun.choose_workers (replays of the shrinking draw anew)."""
        if self.parent:
            k = apply_workers_of(self.args, self.parent, self.workers_rng)
            if k != self.workers:
                self.db.run("SET zipper_lake.apply_workers = %d" % k)
                self.workers = k
            self.counts["applications in workers"] += k >= 2 and self.parent.n >= 2

    def apply(self, app, fold=True):
        """Apply one plan entry to rc_fold and (--check-zipper) rc_zip:
        {engine: counts}."""
        db, clock, got = self.db, self.clock, {}
        opts = encoding_args(app.enc)
        if app.snapshot:
            s = app.snapshot
            load_snapshot(db, s.rows, app.enc)
            if fold:
                got["zl_fold.apply_snapshot"] = db.one(
                    "SELECT * FROM zl_fold.apply_snapshot('rc_fold', 'rc_snapshot', %%s, %%s%s)"
                    % opts, (clock.arg(s.tick), s.deletes))
            if self.zip:
                self.choose_workers()
                got["zipper_lake.apply_snapshot"] = db.one(
                    "SELECT * FROM zipper_lake.apply_snapshot('rc_zip', 'rc_snapshot', %%s, "
                    "deletes => %%s%s)" % opts, (clock.arg(s.tick), s.deletes))
            return got
        load_changes(db, clock, app.changes, True, app.has_seq, enc=app.enc)
        seq_arg = (", seq => 'seq'" if app.has_seq else "") + opts
        if fold:
            got["zl_fold.apply_changes"] = db.one(
                "SELECT * FROM zl_fold.apply_changes('rc_fold', 'rc_changes'%s)" % seq_arg)
        if self.zip:
            self.choose_workers()
            got["zipper_lake.apply_changes"] = db.one(
                "SELECT * FROM zipper_lake.apply_changes('rc_zip', 'rc_changes'%s)" % seq_arg)
        return got

    def zipper_difference(self, model, want, got):
        """How rc_zip differs from the fold after an application: "history",
        "counts" or None."""
        zipped = self.db.rows("SELECT %s FROM rc_zip" % COLS)
        missing, extra = diff(model.rows(), zipped)
        if missing or extra:
            return ZipperDiffers("rc_zip differs from the fold", missing, extra, "the fold", "rc_zip")
        for engine, counts in got.items():
            if engine.startswith("zipper_lake") and counts != want:
                return counts_failure(ZipperDiffers, engine, counts, want, "fold")
        return None

    def run_plan(self, label, plan, expected):
        """Apply a plan from empty tables, checking after every entry.
        Returns the model, or None after reporting a failure."""
        self.setup()
        model = FoldModel(self.track)
        for no, app in enumerate(plan, 1):
            before = model.rows()
            try:
                want = fold_model_apply(model, app)
                got = self.apply(app)
                for engine, counts in got.items():
                    if engine.startswith("zl_fold") and counts != want:
                        raise counts_failure(CountsFailure, engine, counts, want, "model")
                if app.again:
                    check_reapplied(before, model, want)
                ref = self.db.rows("SELECT %s FROM rc_fold" % COLS)
                missing, extra = diff(model.rows(), ref)
                if missing or extra:
                    raise Failure("rc_fold (zl_fold) differs from the Python fold model",
                                  missing, extra, "model", "rc_fold")
                check_invariants(self.db, "rc_fold", self.track)
                if no == len(plan):
                    missing, extra = diff(expected, model.rows())
                    if missing or extra:
                        raise Failure("plan %s ends with another history than the fold of the "
                                      "stream (not batch-independent)" % label,
                                      missing, extra, "the stream", "plan " + label)
                if self.zip:
                    err = self.zipper_difference(model, want, got)
                    if err:
                        raise err
            except (Failure, psycopg2.Error) as err:
                self.report(label, plan, no, err, model)
                return None
            if label == "b":
                self.stats.update(want)
            self.counts["applications " + label] += 1
            self.counts["options " + label] += app.enc != PLAIN
            self.counts["re-applied"] += app.again
        return model

    def run(self):
        args = self.args
        items, model, kinds = fold_stream(self.rng, args, 24, self.track)
        self.counts.update(kinds)
        self.items = items
        expected = model.rows()
        plan_a = fold_plan(self.rng, fold_plan_levels(items, args.keys), False)
        plan_b = fold_plan(self.rng, fold_plan_random(self.rng, items, args.keys, args.batches), True)
        return (self.run_plan("a", plan_a, expected) is not None and
                self.run_plan("b", plan_b, expected) is not None)

    def run_example(self, label, plan, rows, counts):
        """An example of README "Batching test" (EXAMPLES): exact history and
        counts."""
        self.items = []
        self.setup()
        model = FoldModel(self.track)
        for no, (app, want_counts) in enumerate(zip(plan, counts), 1):
            want = fold_model_apply(model, app)
            if tuple(want[k] for k in COUNTS) != want_counts:
                raise AssertionError("the fold model counts %s for batch b%d of the %s, "
                                     "README says %s" % (fmt_counts(want), no - 1, label, want_counts))
        if model.rows() != sorted(rows, key=sort_key):
            raise AssertionError("the fold model gives %s for the %s" % (model.rows(), label))
        return self.run_plan(label, plan, rows) is not None

    # ---- zipper_lake: the smallest plan that still shows the difference
    def zipper_fails(self, plan, kind):
        """Replay plan on a new rc_zip only; whether it differs from the fold
        in the same way (kind: "history", "counts" or "error")."""
        self.setup(fold=False)
        model = FoldModel(self.track)
        for app in plan:
            want = fold_model_apply(model, app)
            try:
                got = self.apply(app, fold=False)
            except psycopg2.Error:
                return kind == "error"
            self.zip_counts = next(iter(got.values()))
            err = self.zipper_difference(model, want, got)
            if err:
                return kind == ("history" if err.args[1] or err.args[2] else "counts")
        return False

    def shrink(self, plan, kind, budget=60):
        """Drop applications, then changes and image rows, one at a time as
        long as the difference stays (and the time budget lasts); load an
        application without partial options when its changes allow it."""
        deadline, trials = time.time() + budget, 0
        progress = True
        while progress and time.time() < deadline:
            progress = False
            for i in reversed(range(len(plan))):
                if len(plan) > 1 and i < len(plan) and time.time() < deadline:
                    trials += 1
                    if self.zipper_fails(plan[:i] + plan[i + 1:], kind):
                        plan, progress = plan[:i] + plan[i + 1:], True
            for i in reversed(range(len(plan))):
                app = plan[i]
                if app.has_seq and all(c.seq is None for c in app.changes):
                    cand = app._replace(has_seq=False)      # a seq column of NULLs
                    trials += 1
                    if self.zipper_fails(plan[:i] + [cand] + plan[i + 1:], kind):
                        plan, app, progress = plan[:i] + [cand] + plan[i + 1:], cand, True
                elems = app.changes if app.changes is not None else app.snapshot.rows
                changes = app.changes or [Change(r[0], r[1], r[2], 0, "U", None) for r in elems]
                if app.enc != PLAIN and all(fits(c, PLAIN) for c in changes):
                    cand = app._replace(enc=PLAIN)
                    if app.snapshot:
                        cand = cand._replace(snapshot=app.snapshot._replace(enc=PLAIN))
                    trials += 1
                    if self.zipper_fails(plan[:i] + [cand] + plan[i + 1:], kind):
                        plan, app, progress = plan[:i] + [cand] + plan[i + 1:], cand, True
                for j in reversed(range(len(elems))):
                    if len(elems) == 1 or time.time() >= deadline:
                        break
                    rest = elems[:j] + elems[j + 1:]
                    cand = (app._replace(changes=rest) if app.changes is not None
                            else app._replace(snapshot=app.snapshot._replace(rows=rest)))
                    trials += 1
                    if self.zipper_fails(plan[:i] + [cand] + plan[i + 1:], kind):
                        plan, app, elems, progress = plan[:i] + [cand] + plan[i + 1:], cand, rest, True
        return plan, trials

    # ---- reporting
    def fmt_app(self, no, app):
        clock = self.clock
        enc = app.enc
        cols = [c for c in VALUE_COLS if c not in enc.missing]
        how = "%s%s" % (", " + describe_encoding(enc) if enc != PLAIN else "",
                        " (keep: NULL)" if enc.ignore_nulls else "")
        vals = lambda r: "".join(", %s" % v for col, v in zip(VALUE_COLS, r) if col in cols)
        if app.snapshot:
            s = app.snapshot
            return ["  %d. apply_snapshot at %s, deletes => %s%s: (id%s) = %s"
                    % (no, clock.show(s.tick), "true" if s.deletes else "false", how,
                       "".join(", " + c for c in cols),
                       ", ".join("(%s%s)" % (r[0], vals(r[1:])) for r in s.rows))]
        out = ["  %d. apply_changes%s%s%s: (id%s, change_time, op%s) ="
               % (no, " (seq column)" if app.has_seq else "",
                  " again" if app.again else "", how, "".join(", " + c for c in cols),
                  ", seq" if app.has_seq else "")]
        for c in app.changes:
            out.append("       (%s%s, %s, %s%s)"
                       % (c.id, vals((c.name, c.amount)), clock.show(c.tick), c.op,
                          ", %s" % c.seq if app.has_seq else ""))
        return out

    def report(self, label, plan, no, err, model):
        out = ["MISMATCH --mode batching seed=%d plan (%s), application %d of %d"
               % (self.seed, label, no, len(plan)),
               "  config %s" % describe_config(self.cfg),
               "  track_columns %s" % track_columns(self.track)]
        if self.zip:
            out.append("  rc_zip: %s" % describe_parent(self.parent))
        if self.parent:
            out.append("  zipper_lake.apply_workers of the application: %d" % self.workers)
        out += describe_failure(err, self.fmt_row)
        out.append("  the application:")
        out += self.fmt_app(no, plan[no - 1])
        if isinstance(err, CountsFailure):
            out.append("  what the model says each change of it did:")
            out += outcome_lines(self.clock, model.outcomes)
        rerun = "  rerun: %s %s" % (sys.argv[0], "--mode batching --seeds 0%s%s" % (
            " --check-zipper" if self.zip else "",
            " --partitions %d" % self.parent.n if self.parent else "") if self.cfg is EXAMPLE_CONFIG
            else repro_args(self.args, self.seed, self.cfg))
        whole = ["the plan:"] + [l for i, a in enumerate(plan, 1) for l in self.fmt_app(i, a)]
        if isinstance(err, ZipperDiffers):
            kind = "history" if err.args[1] or err.args[2] else "counts"
            small, trials = self.shrink(plan[:no], kind)
            out.append("  a smallest plan that shows it (%s; %d replays):" % (kind, trials))
            for i, a in enumerate(small, 1):
                out += ["  " + l for l in self.fmt_app(i, a)]
            model = FoldModel(self.track)
            for a in small:
                want = fold_model_apply(model, a)
            self.zipper_fails(small, kind)
            in_time = lambda rows: "; ".join(self.fmt_row(r) for r in sorted(rows, key=lambda r: (r[0], r[3])))
            out.append("    the fold:    " + in_time(model.rows()))
            out.append("    zipper_lake: " + in_time(self.db.rows("SELECT %s FROM rc_zip" % COLS)))
            if kind == "counts":
                out.append("    counts of the last application: fold %s; zipper_lake %s"
                           % (fmt_counts(want), fmt_counts(self.zip_counts)))
        path = os.path.join(tempfile.gettempdir(), "random_compare-batching-seed%d.txt" % self.seed)
        with open(path, "w") as f:
            f.write("\n".join(out + whole + ["the stream:"] + ["  %s" % (it,) for it in self.items]
                              + [rerun]) + "\n")
        if len(out) > 80:
            out = out[:60] + ["  ... %d more lines" % (len(out) - 60)]
        print("\n".join(out + ["  the whole plan and the stream: %s" % path, rerun]))


def repro_args(args, seed, cfg):
    parts = ["--seed %d" % seed, "--config %s" % cfg.name, "--track %s" % tracking_of(args, seed),
             "--keys %d" % args.keys,
             "--batches %d" % args.batches, "--batch-size %d" % args.batch_size,
             "--mode %s" % args.mode]
    if args.reference_only:
        parts.append("--reference-only")
    if args.no_read_helpers:
        parts.append("--no-read-helpers")
    if args.check_zipper:
        parts.append("--check-zipper")
    if args.mode != "batching" and not args.reference_only:
        parts.append("--indexes %s" % ("on" if indexes_of(args, seed) else "off"))
    if (args.mode != "batching" and not args.reference_only) or args.check_zipper:
        parts.append("--partitions %d" % partitions_of(args, seed))
        if args.apply_workers is not None:
            parts.append("--apply-workers %d" % args.apply_workers)
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


def run_seed(run, args, seed):
    """run.run(); on an unexpected error, name the seed and how to rerun it."""
    try:
        return run.run()
    except Exception:
        print("seed %d, config %s: unexpected error; rerun: %s %s"
              % (seed, run.cfg.name, sys.argv[0], repro_args(args, seed, run.cfg)))
        raise


def main_batching(db, args, seeds):
    """--mode batching: the example, then one stream per seed.  Exit status."""
    target = "zl_fold vs Python fold model" + (" vs zipper_lake" if args.check_zipper else "")
    started = time.time()
    if args.seed is None:           # a rerun of one seed skips them
        for example in EXAMPLES:
            if not FoldRun(db, args, 0, EXAMPLE_CONFIG).run_example(*example):
                return 1
            print("%s ok: the fold of README \"Batching test\"" % example[0])
    for seed in seeds:
        t0 = time.time()
        run = FoldRun(db, args, seed)
        if not run_seed(run, args, seed):
            return 1
        c, st = run.counts, run.stats
        print("seed %d ok [%s, track %s%s]: %d changes (%d partial, %d repeated, %d same-instant with seq, "
              "%d corrections), %d snapshots (%d partial); (a) %d applications, (b) %d (%d "
              "re-applied, %d with partial options): %d late, %d unchanged, %d inserted, "
              "%d deleted, %d closed; %.1fs"
              % (seed, run.cfg.name, run.track, parent_label(run), args.batch_size, c["partial"], c["repeated"],
                 c["same instant with seq"], c["corrections"], c["snapshots"],
                 c["partial snapshots"], c["applications a"], c["applications b"],
                 c["re-applied"], c["options b"], st["late"], st["unchanged"], st["inserted"],
                 st["deleted"], st["closed"], time.time() - t0))
    print("all %d seeds passed (%s, %d keys, streams of %d changes, plan (b) in up to %d pieces) "
          "in %.1fs" % (len(seeds), target, args.keys, args.batch_size, args.batches,
                        time.time() - started))
    return 0


def main():
    p = argparse.ArgumentParser(description="randomized comparison of zipper_lake against a reference")
    p.add_argument("--seeds", help="count N (seeds 1..N), list a,b,c or range a-b "
                                   "(default %d: each configuration %d times; batching: %d)"
                                   % (DEFAULT_SEEDS, DEFAULT_SEEDS // len(CONFIGS), len(CONFIGS)))
    p.add_argument("--seed", type=int, help="run exactly this one seed")
    p.add_argument("--config", choices=sorted(CONFIG_BY_NAME),
                   help="table configuration for every seed (default: seed s runs "
                        "configuration (s - 1) mod %d, in the order of CONFIGS)" % len(CONFIGS))
    p.add_argument("--track", choices=TRACKINGS,
                   help="track_columns of rc_zip and rc_fold: all (NULL), amount or name "
                        "(default: seed s tracks %s[(s - 1) %%%% 3])" % "/".join(TRACKINGS))
    p.add_argument("--list-configs", action="store_true", help="print the configurations and exit")
    p.add_argument("--keys", type=int, help="key space size (default 12 x scale; batching: 6 x scale)")
    p.add_argument("--batches", type=int, help="batches per seed (default 15; batching: the most "
                                                "pieces plan (b) cuts the stream into, default 8)")
    p.add_argument("--batch-size", type=int, help="changes per batch (default 30 x scale; "
                                                  "batching: changes in the stream, default 60 x scale)")
    p.add_argument("--scale", type=int, nargs="?", const=25, default=1, metavar="F",
                   help="multiply the default key space and batch size by F "
                        "(same changes per key and batch, more rows; --scale alone: 25)")
    p.add_argument("--mode", choices=["inorder", "late", "mixed", "batching"], default="mixed",
                   help="how late change times may be (default mixed); batching: the fold test "
                        "of fold_reference.sql against the Python fold model, a stream applied "
                        "in one batch and in random pieces")
    p.add_argument("--check-zipper", action="store_true",
                   help="batching: check zipper_lake against the fold too")
    p.add_argument("--reference-only", action="store_true",
                   help="check zl_fold against the Python fold model only; no zipper_lake needed")
    p.add_argument("--no-read-helpers", action="store_true",
                   help="skip the read comparisons (WHERE clauses, as_of, changes, current)")
    p.add_argument("--indexes", choices=["on", "off"],
                   help="give rc_zip indexes and read through them (default: seed s does "
                        "when (s - 1) // %d is even)" % len(CONFIGS))
    p.add_argument("--partitions", type=int, metavar="N",
                   help="make rc_zip a zipper parent of N hash partitions that are zipper "
                        "tables, 0: one zipper table (default: seed s makes a parent of 3 "
                        "when s %% 4 == 0, of 2 when s %% 8 == 0)")
    p.add_argument("--apply-workers", type=int, metavar="N",
                   help="zipper_lake.apply_workers for every application on a zipper parent "
                        "(default: half of them 0, the others 2 to the partitions, at most "
                        "max_prepared_transactions)")
    p.add_argument("--verbose", action="store_true",
                   help="also print the largest table layout per seed")
    args = p.parse_args()
    if args.list_configs:
        for i, cfg in enumerate(CONFIGS):
            print("%d  %s" % (i + 1, describe_config(cfg)))
        return

    batching = args.mode == "batching"
    seeds = [args.seed] if args.seed is not None else parse_seeds(
        args.seeds or str(len(CONFIGS) if batching else DEFAULT_SEEDS))
    args.keys = args.keys or (6 if batching else 12) * args.scale
    args.batches = args.batches or (8 if batching else 15)
    args.batch_size = args.batch_size or (60 if batching else 30) * args.scale
    if args.check_zipper and not batching:
        p.error("--check-zipper goes with --mode batching")
    if args.partitions is not None and not 0 <= args.partitions <= 1024:
        p.error("--partitions is from 0 (one zipper table) to 1024")
    if args.apply_workers is not None and not 0 <= args.apply_workers <= 64:
        p.error("--apply-workers is from 0 to 64")

    db = Db()
    args.max_prepared = int(db.one("SHOW max_prepared_transactions")["max_prepared_transactions"])
    with open(os.path.join(HERE, "reference.sql")) as f:
        db.run(f.read())
    with open(os.path.join(HERE, "fold_reference.sql")) as f:
        db.run(f.read())
    if (not args.reference_only and not batching) or args.check_zipper:
        db.run("CREATE EXTENSION IF NOT EXISTS zipper_lake")
    if not args.reference_only and not batching:
        db.run("CREATE EXTENSION IF NOT EXISTS amcheck")     # bt_index_check
    if batching:
        sys.exit(main_batching(db, args, seeds))

    target = ("zl_fold vs Python fold model" if args.reference_only
              else "zipper_lake vs zl_fold vs Python fold model")
    started = time.time()
    configs = collections.Counter()
    parents = 0
    for seed in seeds:
        t0 = time.time()
        run = SeedRun(db, args, seed)
        if not run_seed(run, args, seed):
            sys.exit(1)
        configs[run.cfg.name] += 1
        parents += run.parent is not None
        st = run.stats
        print("seed %d ok [%s, track %s%s]: %d batches (%d snapshots, %d partial; %d with seq, %d re-applied; "
              "%d erases, %d vacuums (%d FULL; %d columnar current sub-groups after them); %d aggregates in the scan, %d steps probing keys through the merged index), "
              "%d changes (%d partial, %d truncates), %d versions; %d late, %d unchanged, %d inserted, "
              "%d deleted, %d closed; %.1fs"
              % (seed, run.cfg.name, run.track, parent_label(run), args.batches, run.counts["snapshots"],
                 run.counts["partial snapshots"], run.counts["seq batches"],
                 run.counts["re-applied"], run.counts["erases"], run.counts["vacuums"],
                 run.counts["vacuum fulls"], run.counts["columnar current"], run.counts["aggregates in the scan"], run.counts["merged key index"],
                 run.counts["changes"], run.counts["partial changes"], run.counts["truncates"],
                 len(run.model.rows()), st["late"], st["unchanged"], st["inserted"],
                 st["deleted"], st["closed"], time.time() - t0))
        if run.with_indexes:
            c = run.counts
            print("  indexes %s: %d created (%d concurrently), %d reindexes, %d dropped, %d CLUSTERs; "
                  "%d reads through them, %d plans explained, %d amchecks, entries counted after %d VACUUMs "
                  "(%d more held back by other sessions' snapshots); "
                  "%d snapshots held across a batch and a VACUUM, %d reads through the indexes in them"
                  % (",".join(sorted(run.index_checked)), c["indexes created"], c["created concurrently"],
                     c["reindexes"], c["indexes dropped"], c["clusters"], c["index reads"], c["index explains"],
                     c["amchecks"], c["index entry counts"], c["index entry counts held back"],
                     c["snapshots held"], c["held snapshot reads"]))
        if args.verbose and run.zip:
            print("  layout, most after any batch: %s; newest change %s" % (
                ", ".join("%s %s" % (k.replace("_", " "), v) for k, v in run.layout_max.items()),
                run.clock.show(run.gen.wm)))
    print("all %d seeds passed (%s, mode %s, %d keys, %d batches x %d changes; %d of %d "
          "configurations; %d on zipper parents) in %.1fs"
          % (len(seeds), target, args.mode, args.keys, args.batches, args.batch_size,
             len(configs), len(CONFIGS), parents, time.time() - started))


if __name__ == "__main__":
    main()
