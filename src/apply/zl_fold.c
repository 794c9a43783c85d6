/*-------------------------------------------------------------------------
 *
 * zl_fold.c
 *	  One key's history as the fold of every change ever applied to it.
 *
 * README "Change semantics": a key's history is the fold of its changes in
 * fold order (time; seq, changes without seq last; order of application).
 * Only the last change at an instant shapes the history there.  So a
 * history is a list of *instants*, each with the *effect* of what was
 * applied there: absent (a delete), or values — all of them (a full
 * upsert), or only some (a partial change, README "Partial changes",
 * which keeps the other columns from the state before it).  The *state*
 * after an instant is its effect over the state after the instant before;
 * the versions are the maximal runs of one state.
 *
 * The stored versions and the change record (zl_record.c) give that list
 * from the batch's earliest change of the key on: every version begins at
 * an instant and, unless another version begins where it ends, ends at one
 * (a delete); the record adds the instants the versions do not show
 * (no-ops, deletes of an absent key, boundaries later merged away), the
 * seq of instants a change with seq won and the columns a partial change
 * gave; and apply_snapshot with deletes gave every key an instant
 * (ZLTableInstants).  An instant's values are the version's that holds it
 * (in a gap: a delete) — exactly the state after it — and a partial one
 * keeps the columns it did not give from the instant before.
 *
 * zl_fold_key merges a batch's changes of one key into that list, in fold
 * order, counting each (README "Counts"), then cuts the list into versions
 * again and says which instants the record must keep from the batch's
 * earliest change on: those that are no boundary, boundaries won by a
 * change with seq, partial ones, ones whose untracked values differ from
 * their version's (README "Tracked columns") — never a plain table
 * instant, which is remembered once for the whole table.  Versions are the
 * maximal runs of equal *tracked* values; each shows the state after its
 * last instant.
 *
 * Changes at one instant merge column by column (merge_change): each
 * column holds the value of the last change there, in fold order, that
 * gave it, so the order in which batches bring them does not matter; the
 * record keeps, for columns another change gave than the instant's winner,
 * who gave them (givers).  A change that a change applied before follows
 * at its instant (a higher seq there) counts as unchanged and is never
 * late (the record cannot tell a new such change from a re-applied one),
 * but still gives the columns the later ones there do not.
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "storage/zl_storage.h"
#include "catalog/zl_catalog.h"
#include "apply/zl_apply_internal.h"

#include "miscadmin.h"

/* what was applied at an instant, or the state after it */
typedef struct Effect
{
	bool		absent;
	Datum	   *values;
	bool	   *isnull;
	const uint8 *given;			/* partial: a bit per column it gives; NULL: all */
} Effect;

static const Effect ABSENT = {true, NULL, NULL, NULL};

#define GIVEN(bits, col)	(((bits)[(col) >> 3] & (1 << ((col) & 7))) != 0)

typedef struct Instant
{
	int64		time;
	bool		has_seq;
	int64		seq;
	Effect		effect;			/* of every change at this instant, composed */
	ZLGiver    *givers;			/* per column, the change that gave it; NULL: the winner */
	Effect		base;			/* the first of a key's list, partial: what it kept */
	bool		has_base;
	Effect		state;			/* after this instant */
	bool		old;			/* won by a change applied before the batch */
	bool		recorded;		/* from the record (it knows seq and columns) */
	bool		table;			/* a table instant (its seq is the table's) */
	bool		boundary;		/* a version begins or ends here */
	int			run_last;		/* the last instant of its version (-1: absent) */
} Instant;

typedef struct InstantList
{
	Instant    *items;
	int			n;
	int			max;
} InstantList;

typedef struct Fold
{
	const ZLFoldContext *cx;
	InstantList list;
} Fold;

static ZLGiver *givers_from_record(const ZLFoldContext *cx, const struct Instant *in,
									const ZLRecordInstant *r);

bool
zl_fold_precedes(int64 time, bool has_seq, int64 seq,
				 int64 other_time, bool other_has_seq, int64 other_seq)
{
	if (time != other_time)
		return time < other_time;
	if (has_seq != other_has_seq)
		return has_seq;			/* changes with seq before those without */
	return has_seq && seq < other_seq;	/* equal: the later application follows */
}

/*
 * States (complete values) compared on the tracked columns: what makes a
 * version (README "Tracked columns"; all value columns unless registered
 * otherwise) — or on every value column (fully).
 */
static bool
compare_states(const ZLValueComparer *comparer, Effect a, Effect b)
{
	if (a.absent || b.absent)
		return a.absent == b.absent;
	return a.values == b.values ||
		zl_values_equal(comparer, a.values, a.isnull, b.values, b.isnull);
}

#define states_equal(cx, a, b)		compare_states((cx)->tracked, a, b)
#define states_fully_equal(cx, a, b) compare_states((cx)->comparer, a, b)

static Effect
version_effect(const ZLFoldVersion *v, const uint8 *given)
{
	Effect		e = ABSENT;

	if (v != NULL)
	{
		e.absent = false;
		e.values = v->values;
		e.isnull = v->isnull;
		e.given = given;
	}
	return e;
}

/* the state an effect leaves after the state prev */
static Effect
resolve(const ZLFoldContext *cx, Effect effect, Effect prev)
{
	Effect		state = effect;

	if (effect.absent || effect.given == NULL)
	{
		state.given = NULL;
		return state;
	}
	state.values = palloc(sizeof(Datum) * cx->natts);
	state.isnull = palloc(sizeof(bool) * cx->natts);
	state.given = NULL;
	for (int col = 0; col < cx->natts; col++)
	{
		bool		from_effect = GIVEN(effect.given, col);

		state.values[col] = from_effect ? effect.values[col] : prev.absent ? (Datum) 0 : prev.values[col];
		state.isnull[col] = from_effect ? effect.isnull[col] : prev.absent ? true : prev.isnull[col];
	}
	return state;
}


/* a version's values with the untracked ones an instant inside it left */
static Effect
with_untracked(const ZLFoldContext *cx, Effect e, const ZLUntrackedValues *u)
{
	Datum	   *values = palloc(sizeof(Datum) * cx->natts);
	bool	   *isnull = palloc(sizeof(bool) * cx->natts);

	memcpy(values, e.values, sizeof(Datum) * cx->natts);
	memcpy(isnull, e.isnull, sizeof(bool) * cx->natts);
	for (int i = 0; i < u->n; i++)
		if (u->attnums[i] >= 1 && u->attnums[i] <= cx->natts &&
			!ZL_TRACKED(cx->opts, u->attnums[i]))
		{
			values[u->attnums[i] - 1] = u->values[i];
			isnull[u->attnums[i] - 1] = u->isnull[i];
		}
	e.values = values;
	e.isnull = isnull;
	return e;
}

/* the untracked values of a state */
static const ZLUntrackedValues *
untracked_of(const ZLFoldContext *cx, Effect state)
{
	ZLUntrackedValues *u = palloc(sizeof(ZLUntrackedValues));

	u->n = 0;
	u->attnums = palloc(sizeof(AttrNumber) * cx->natts);
	u->values = palloc(sizeof(Datum) * cx->natts);
	u->isnull = palloc(sizeof(bool) * cx->natts);
	for (int col = 0; col < cx->natts; col++)
	{
		Form_pg_attribute att = TupleDescAttr(cx->tupdesc, col);

		if (!zl_is_value_column(cx->opts, att) || ZL_TRACKED(cx->opts, att->attnum))
			continue;
		u->attnums[u->n] = att->attnum;
		u->values[u->n] = state.values[col];
		u->isnull[u->n] = state.isnull[col];
		u->n++;
	}
	return u;
}

/* the stored version holding t, or NULL (a gap) */
static const ZLFoldVersion *
version_at(const ZLFoldKey *key, int64 t)
{
	int			lo = 0,
				hi = key->nversions - 1;

	while (lo <= hi)
	{
		int			mid = (lo + hi) / 2;
		const ZLFoldVersion *v = &key->versions[mid];

		if (t < v->from)
			hi = mid - 1;
		else if (t >= v->to)
			lo = mid + 1;
		else
			return v;
	}
	return NULL;
}

static Instant *
push_instant(InstantList *list, int64 time, bool has_seq, int64 seq, Effect effect)
{
	Instant    *in;

	if (list->n == list->max)
	{
		list->max = Max(16, list->max * 2);
		list->items = list->items == NULL ? palloc(sizeof(Instant) * list->max) :
			repalloc(list->items, sizeof(Instant) * list->max);
	}
	in = &list->items[list->n++];
	memset(in, 0, sizeof(Instant));
	in->time = time;
	in->has_seq = has_seq;
	in->seq = seq;
	in->effect = effect;
	in->givers = NULL;
	in->old = true;
	return in;
}

/* at one time: the record's, then the table's, then what versions show */
static int
instant_rank(const Instant *in)
{
	return in->recorded ? 0 : in->table ? 1 : 2;
}

static int
instant_cmp(const void *a, const void *b)
{
	const Instant *ia = a;
	const Instant *ib = b;

	if (ia->time != ib->time)
		return ia->time < ib->time ? -1 : 1;
	return instant_rank(ia) - instant_rank(ib);
}

/* the first instant at or after t */
static int
find_instant(const InstantList *list, int64 t)
{
	int			lo = 0,
				hi = list->n;

	while (lo < hi)
	{
		int			mid = (lo + hi) / 2;

		if (list->items[mid].time < t)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/*
 * The table instant at t that won it (the batch's follow the stored ones),
 * or NULL.  Both lists are in fold order: the batch's last one at t is
 * its latest there.
 */
static const ZLTableInstant *
table_instant_at(const ZLTableInstants *table, int64 t)
{
	const ZLTableInstant *found = NULL;
	const ZLTableInstant *latest_in_batch = NULL;
	int			lo = 0,
				hi = table->nstored - 1;

	while (lo <= hi && found == NULL)
	{
		int			mid = (lo + hi) / 2;

		if (table->stored[mid].time == t)
			found = &table->stored[mid];
		else if (table->stored[mid].time < t)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	/* the first one of the batch past t */
	lo = 0;
	hi = table->nbatch;
	while (lo < hi)
	{
		int			mid = (lo + hi) / 2;

		if (table->batch[mid].time <= t)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo > 0 && table->batch[lo - 1].time == t)
		latest_in_batch = &table->batch[lo - 1];
	if (latest_in_batch != NULL &&
		(found == NULL || !zl_fold_precedes(latest_in_batch->time, latest_in_batch->has_seq,
											latest_in_batch->seq, found->time,
											found->has_seq, found->seq)))
		found = latest_in_batch;
	return found;
}

/*
 * The state before the p-th instant.  Before the first one nothing is
 * loaded, so it is absent — unless that one is a partial change of the
 * stored history before the batch's changes (read from the start of its
 * version, README "Tracked columns"): what it kept is in its version's
 * values (its base).  A change of the batch never meets a base: the
 * version before one at or after its time would have been read.
 */
static Effect
state_before(const Fold *f, int p)
{
	if (p > 0)
		return f->list.items[p - 1].state;
	if (p < f->list.n && f->list.items[p].has_base)
		return f->list.items[p].base;
	return ABSENT;
}

/* the states of the instants from the p-th on */
static void
resolve_from(Fold *f, int p)
{
	for (int i = p; i < f->list.n; i++)
		f->list.items[i].state = resolve(f->cx, f->list.items[i].effect, state_before(f, i));
}

/* the instants the stored versions, the record and the table's instants give */
static void
stored_instants(Fold *f, const ZLFoldKey *key)
{
	const ZLFoldContext *cx = f->cx;
	InstantList *list = &f->list;
	int			kept = 0;
	bool		ordered = true;

	/* room for everything (most keys: one version and a change or two) */
	list->max = 2 * key->nversions + key->nrecord + cx->table->nstored + key->nchanges + 1;
	list->items = palloc(sizeof(Instant) * list->max);
	for (int i = 0; i < key->nversions; i++)
	{
		const ZLFoldVersion *v = &key->versions[i];

		push_instant(list, v->from, false, 0, version_effect(v, NULL));
		if (v->to != cx->open_end && (i + 1 == key->nversions || key->versions[i + 1].from != v->to))
			push_instant(list, v->to, false, 0, ABSENT);
	}
	for (int i = 0; i < key->nrecord; i++)
	{
		const ZLRecordInstant *r = &key->record[i];
		Effect		e = version_effect(version_at(key, r->time), r->given);

		Instant    *in;

		if (!e.absent && r->untracked != NULL)
			e = with_untracked(cx, e, r->untracked);
		in = push_instant(list, r->time, r->has_seq, r->seq, e);
		in->recorded = true;
		if (r->ngivers > 0)
			in->givers = givers_from_record(cx, in, r);
	}
	for (int i = 0; i < cx->table->nstored; i++)
	{
		const ZLTableInstant *ti = &cx->table->stored[i];

		if (ti->time >= key->since)
			push_instant(list, ti->time, ti->has_seq, ti->seq,
						 version_effect(version_at(key, ti->time), NULL))->table = true;
	}

	/*
	 * One instant per time: the record's, sorted first, unless a table
	 * instant there follows it in fold order (a truncate or snapshot
	 * applied after it, with a later seq or none); what versions show
	 * only when neither knows more.  A boundary a change without seq won
	 * where the table has an instant with seq is in the record (a change
	 * without seq follows every one with seq), so a table instant beside
	 * a boundary alone won it.
	 */
	for (int i = 1; i < list->n && ordered; i++)
		ordered = list->items[i - 1].time < list->items[i].time;
	if (!ordered)
		qsort(list->items, list->n, sizeof(Instant), instant_cmp);
	for (int i = 0; i < list->n; i++)
	{
		Instant    *in = &list->items[i];
		Instant    *cur = kept > 0 ? &list->items[kept - 1] : NULL;

		if (cur == NULL || cur->time != in->time)
			list->items[kept++] = *in;
		else if (in->table && (!cur->recorded ||
							   zl_fold_precedes(cur->time, cur->has_seq, cur->seq,
												in->time, in->has_seq, in->seq)))
			*cur = *in;
	}
	list->n = kept;
	if (list->n > 0 && list->items[0].effect.given != NULL && !list->items[0].effect.absent)
	{
		list->items[0].base = list->items[0].effect;
		list->items[0].base.given = NULL;
		list->items[0].has_base = true;
	}
	resolve_from(f, 0);
}

static bool given_equal(const ZLFoldContext *cx, const uint8 *a, const uint8 *b);

/*
 * Several changes at one instant (README "Partial changes"): each column
 * holds the value of the last change there, in fold order, that gave it
 * (a full upsert or a delete gives every column; a delete's are NULL);
 * the instant is absent when its last change is a delete.  So a change
 * can be merged in whatever the order of arrival, knowing per column who
 * gave it (givers; NULL: the instant's winner gave every column it has).
 */
static ZLGiver
giver_of(const Instant *at, int col)
{
	ZLGiver		g = {false, false, 0, false};

	if (at->givers != NULL)
		return at->givers[col];
	if (at->effect.absent || at->effect.given == NULL || GIVEN(at->effect.given, col))
	{
		g.set = true;
		g.has_seq = at->has_seq;
		g.seq = at->seq;
	}
	return g;
}

/* the givers a record entry names (those not named: its winner) */
static ZLGiver *
givers_from_record(const ZLFoldContext *cx, const Instant *in, const ZLRecordInstant *r)
{
	ZLGiver    *g = palloc(sizeof(ZLGiver) * cx->natts);

	for (int col = 0; col < cx->natts; col++)
	{
		g[col].set = in->effect.absent || in->effect.given == NULL || GIVEN(in->effect.given, col);
		g[col].has_seq = in->has_seq;
		g[col].seq = in->seq;
		g[col].earlier = false;
	}
	for (int i = 0; i < r->ngivers; i++)
		if (r->giver_attnums[i] >= 1 && r->giver_attnums[i] <= cx->natts)
			g[r->giver_attnums[i] - 1] = r->givers[i];
	return g;
}

/* change c merged into the instant at (an effect of the state before it) */
static void
merge_change(const ZLFoldContext *cx, Instant *at, const ZLFoldChange *c)
{
	int			nbytes = (cx->natts + 7) / 8;
	ZLGiver    *g = palloc(sizeof(ZLGiver) * cx->natts);
	Datum	   *values = palloc(sizeof(Datum) * cx->natts);
	bool	   *isnull = palloc(sizeof(bool) * cx->natts);
	uint8	   *given = palloc0(nbytes);
	bool		all = true;
	bool		c_last = !zl_fold_precedes(c->time, c->has_seq, c->seq,
										   at->time, at->has_seq, at->seq);
	bool		same_giver = true;

	for (int col = 0; col < cx->natts; col++)
	{
		bool		c_gives = c->is_delete || c->given == NULL || GIVEN(c->given, col);

		g[col] = giver_of(at, col);
		values[col] = at->effect.absent || at->effect.values == NULL ? (Datum) 0 : at->effect.values[col];
		isnull[col] = at->effect.absent || at->effect.values == NULL ? true : at->effect.isnull[col];
		if (c_gives && (!g[col].set ||
						zl_fold_precedes(c->time, g[col].has_seq, g[col].seq,
										 c->time, c->has_seq, c->seq) ||
						(g[col].has_seq == c->has_seq && g[col].seq == c->seq)))
		{
			values[col] = c->is_delete ? (Datum) 0 : c->values[col];
			isnull[col] = c->is_delete ? true : c->isnull[col];
			g[col].set = true;
			g[col].has_seq = c->has_seq;
			g[col].seq = c->seq;
			g[col].earlier = false;
		}
		else if (c_last && g[col].set)
			g[col].earlier = true;	/* c is the winner now, this column not its */
		if (g[col].set)
			given[col >> 3] |= 1 << (col & 7);
		else
			all = false;
	}
	if (c_last)
	{
		at->effect.absent = c->is_delete;
		at->has_seq = c->has_seq;
		at->seq = c->seq;
	}
	for (int col = 0; col < cx->natts && same_giver; col++)
		same_giver = !g[col].set ||
			(g[col].has_seq == at->has_seq && g[col].seq == at->seq && !g[col].earlier);
	at->effect.values = values;
	at->effect.isnull = isnull;
	at->effect.given = all || at->effect.absent ? NULL : given;
	at->givers = same_giver ? NULL : g;
}

/* the columns the instant's winner gave itself, NULL: all */
static const uint8 *
winner_columns(const ZLFoldContext *cx, const Instant *at)
{
	uint8	   *own;

	if (at->givers == NULL)
		return at->effect.given;
	own = palloc0((cx->natts + 7) / 8);
	for (int col = 0; col < cx->natts; col++)
		if (at->givers[col].set && at->givers[col].has_seq == at->has_seq &&
			at->givers[col].seq == at->seq && !at->givers[col].earlier)
			own[col >> 3] |= 1 << (col & 7);
	return own;
}

/* one change of the batch, in fold order: count it and merge it in */
static void
fold_change(Fold *f, const Instant *newest, const ZLFoldChange *c, ZLFoldCounts *counts)
{
	const ZLFoldContext *cx = f->cx;
	InstantList *list = &f->list;
	int			p = find_instant(list, c->time);
	Instant    *at = p < list->n && list->items[p].time == c->time ? &list->items[p] : NULL;
	bool		existed = at != NULL;
	Effect		before = p > 0 ? list->items[p - 1].state : ABSENT;
	Effect		held = at != NULL ? at->state : before;
	Effect		effect = {c->is_delete, c->values, c->isnull, c->given};
	Effect		after;
	bool		opened = newest == NULL ||
		!zl_fold_precedes(c->time, c->has_seq, c->seq, newest->time, newest->has_seq, newest->seq);
	bool		unchanged;
	bool		identical;

	if (c->is_delete)
		effect = ABSENT;

	/*
	 * A change applied before follows it at its instant: it is counted
	 * unchanged and never late, and shapes the instant only under a
	 * partial one (which keeps the rest from it).  A truncate's delete
	 * (missing_key) so deletes nothing: it counts nowhere.
	 */
	if (at != NULL && at->old && c->has_seq && (!at->has_seq || c->seq < at->seq))
	{
		if (!c->missing_key)
			counts->unchanged++;
		merge_change(cx, at, c);
		resolve_from(f, p);
		return;
	}
	identical = at != NULL && at->old && at->has_seq == c->has_seq &&
		(!c->has_seq || at->seq == c->seq) &&
		(c->is_delete || given_equal(cx, c->given, winner_columns(cx, at)));
	if (at != NULL)
	{
		Instant		merged = *at;

		merge_change(cx, &merged, c);
		effect = merged.effect;
	}
	after = resolve(cx, effect, before);
	unchanged = states_equal(cx, after, held);
	/* identical: untracked values too */
	identical = identical && states_fully_equal(cx, after, held);

	if (c->is_delete)
	{
		if (held.absent)
		{
			if (!c->missing_key)
				counts->unchanged++;
		}
		else
		{
			counts->deleted++;
			counts->closed += opened;
		}
	}
	else if (unchanged)
		counts->unchanged++;
	else
	{
		counts->inserted++;
		/* the version held ends, unless it began at this instant */
		counts->closed += !held.absent && opened && states_equal(cx, held, before);
	}
	if (!opened && !identical && !(c->missing_key && held.absent))
		counts->late++;

	if (at == NULL)
	{
		(void) push_instant(list, 0, false, 0, ABSENT);	/* make room */
		memmove(&list->items[p + 1], &list->items[p], sizeof(Instant) * (list->n - 1 - p));
		at = &list->items[p];
		memset(at, 0, sizeof(Instant));
		at->time = c->time;
	}
	if (existed)
		merge_change(cx, at, c);
	else
	{
		at->effect = effect;
		at->has_seq = c->has_seq;
		at->seq = c->seq;
		at->givers = NULL;
	}
	at->old = false;
	resolve_from(f, p);
}

static void
push_version(ZLFoldKey *key, int *max, int64 from, int64 to, Effect state)
{
	ZLFoldVersion *v;

	if (key->nresult == *max)
	{
		*max = Max(4, *max * 2);
		key->result = key->result == NULL ? palloc(sizeof(ZLFoldVersion) * *max) :
			repalloc(key->result, sizeof(ZLFoldVersion) * *max);
	}
	v = &key->result[key->nresult++];
	v->from = from;
	v->to = to;
	v->values = state.values;
	v->isnull = state.isnull;
	v->stored = NULL;
}

/* the list cut into maximal runs of one state; stored versions kept as they are */
static void
cut_versions(Fold *f, ZLFoldKey *key)
{
	const ZLFoldContext *cx = f->cx;
	Effect		state = ABSENT;
	int64		from = 0;
	int			max = 0;
	int			old = 0;

	int			run_start = -1;

	key->result = NULL;
	key->nresult = 0;
	for (int i = 0; i <= f->list.n; i++)
	{
		Instant    *in = i < f->list.n ? &f->list.items[i] : NULL;

		if (in != NULL)
		{
			in->boundary = !states_equal(cx, state, in->state);
			in->run_last = -1;
			if (!in->boundary)
				continue;
		}
		/* a run ends: its version shows its last instant's state */
		if (!state.absent)
		{
			for (int j = run_start; j < i; j++)
				f->list.items[j].run_last = i - 1;
			push_version(key, &max, from, in != NULL ? in->time : cx->open_end,
						 f->list.items[i - 1].state);
		}
		if (in == NULL)
			break;
		state = in->state;
		from = in->time;
		run_start = i;
	}

	for (int i = 0; i < key->nresult; i++)
	{
		ZLFoldVersion *v = &key->result[i];

		while (old < key->nversions && key->versions[old].from < v->from)
			old++;
		if (old < key->nversions && key->versions[old].from == v->from &&
			key->versions[old].to == v->to &&
			states_fully_equal(cx, version_effect(&key->versions[old], NULL), version_effect(v, NULL)))
			*v = key->versions[old];
	}
}

static bool
given_equal(const ZLFoldContext *cx, const uint8 *a, const uint8 *b)
{
	/* NULL: every column; bits past the columns do not count */
	for (int col = 0; col < cx->natts; col++)
		if ((a == NULL || GIVEN(a, col)) != (b == NULL || GIVEN(b, col)))
			return false;
	return true;
}

/* the columns an instant's winner did not give itself, and who did */
static void
record_givers(const ZLFoldContext *cx, const Instant *in, ZLRecordInstant *r)
{
	AttrNumber *attnums;
	ZLGiver    *givers;

	r->ngivers = 0;
	r->giver_attnums = NULL;
	r->givers = NULL;
	if (in->givers == NULL)
		return;
	attnums = palloc(sizeof(AttrNumber) * cx->natts);
	givers = palloc(sizeof(ZLGiver) * cx->natts);
	for (int col = 0; col < cx->natts; col++)
		if (in->givers[col].set &&
			(in->givers[col].has_seq != in->has_seq || in->givers[col].seq != in->seq ||
			 in->givers[col].earlier))
		{
			attnums[r->ngivers] = col + 1;
			givers[r->ngivers++] = in->givers[col];
		}
	r->giver_attnums = attnums;
	r->givers = givers;
}

/*
 * What the record keeps of the key from its earliest change on.  A plain
 * boundary without seq is left to the versions, unless the table has an
 * instant with seq there: then only the record tells that a change without
 * seq, not the table's, won it.
 */
static void
instants_to_remember(Fold *f, ZLFoldKey *key)
{
	const ZLFoldContext *cx = f->cx;
	int			first = find_instant(&f->list, key->since);

	key->remember = palloc(sizeof(ZLRecordInstant) * Max(1, f->list.n - first));
	key->nremember = 0;
	for (int i = first; i < f->list.n; i++)
	{
		const Instant *in = &f->list.items[i];
		bool		own_untracked = in->run_last >= 0 && in->run_last != i &&
			!states_fully_equal(cx, in->state, f->list.items[in->run_last].state);
		bool		plain = in->effect.given == NULL && in->givers == NULL && !own_untracked;
		const ZLTableInstant *ti;
		ZLRecordInstant *r;

		CHECK_FOR_INTERRUPTS();
		ti = table_instant_at(cx->table, in->time);
		if (in->boundary && plain && !in->has_seq && (ti == NULL || !ti->has_seq))
			continue;			/* the versions show it */
		if (plain && ti != NULL &&
			ti->has_seq == in->has_seq && (!in->has_seq || ti->seq == in->seq))
			continue;			/* the table remembers it */
		r = &key->remember[key->nremember++];
		r->time = in->time;
		r->has_seq = in->has_seq;
		r->seq = in->has_seq ? in->seq : 0;
		r->is_delete = in->effect.absent;
		r->given = in->effect.absent ? NULL : in->effect.given;
		record_givers(cx, in, r);
		r->untracked = own_untracked ? untracked_of(cx, in->state) : NULL;
	}
	key->record_changed = key->nremember != key->nrecord;
	for (int i = 0; i < key->nremember && !key->record_changed; i++)
	{
		const ZLRecordInstant *a = &key->remember[i];
		const ZLRecordInstant *b = &key->record[i];

		key->record_changed = a->time != b->time || a->has_seq != b->has_seq ||
			a->seq != b->seq || a->is_delete != b->is_delete ||
			!given_equal(cx, a->given, b->given) || a->ngivers > 0 || b->ngivers > 0 ||
			a->untracked != NULL || b->untracked != NULL;	/* rewritten */
	}
}

void
zl_fold_key(const ZLFoldContext *cx, ZLFoldKey *key, ZLFoldCounts *counts)
{
	Fold		f = {cx, {NULL, 0, 0}};
	Instant		newest;
	bool		have_newest;

	stored_instants(&f, key);
	have_newest = f.list.n > 0;
	if (have_newest)
		newest = f.list.items[f.list.n - 1];
	for (int i = 0; i < key->nchanges; i++)
	{
		CHECK_FOR_INTERRUPTS();
		fold_change(&f, have_newest ? &newest : NULL, key->changes[i], counts);
	}
	cut_versions(&f, key);
	instants_to_remember(&f, key);
}
