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
 * change with seq, partial ones — never a plain table instant, which is
 * remembered once for the whole table.  Two changes at one instant
 * compose: the later one's columns over the earlier one's.
 *
 * A change that a change applied before follows at its own instant (a
 * higher seq there) shapes nothing: it counts as unchanged, and is never
 * late, because the record keeps only the winner of an instant and cannot
 * tell a new such change from a re-applied one.
 *
 *-------------------------------------------------------------------------
 */
#include "zipper_lake.h"

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
	const uint8 *own_given;		/* the columns the winner itself gave (NULL: all) */
	/* under a partial winner: what the changes before it there left */
	Effect		under;
	bool		has_under;
	bool		under_known;
	bool		has_under_last; /* the last of them in fold order: */
	bool		under_last_has_seq;
	int64		under_last_seq;
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

/* a later change at an instant over an earlier one there: one effect */
static Effect
compose(const ZLFoldContext *cx, Effect later, Effect earlier)
{
	Effect		e;
	uint8	   *given;
	int			nbytes = (cx->natts + 7) / 8;

	if (later.absent || later.given == NULL)
		return later;
	if (earlier.absent)
		return resolve(cx, later, ABSENT);	/* what it keeps is NULL */
	if (earlier.given == NULL)
		return resolve(cx, later, earlier);
	e = resolve(cx, later, earlier);
	given = palloc(nbytes);
	for (int i = 0; i < nbytes; i++)
		given[i] = later.given[i] | earlier.given[i];
	e.given = given;
	return e;
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
		bool		value_column = !att->attisdropped && !att->attgenerated &&
			att->attnum != cx->opts->from_attnum && att->attnum != cx->opts->to_attnum;

		for (int k = 0; k < cx->opts->nkeys && value_column; k++)
			value_column = cx->opts->key_attnums[k] != att->attnum;
		if (!value_column || ZL_TRACKED(cx->opts, att->attnum))
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
	in->own_given = effect.given;
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

/* the table instant at t that won it (the batch's follow the stored ones), or NULL */
static const ZLTableInstant *
table_instant_at(const ZLTableInstants *table, int64 t)
{
	const ZLTableInstant *found = NULL;
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
	for (int i = 0; i < table->nbatch; i++)
		if (table->batch[i].time == t &&
			(found == NULL || !zl_fold_precedes(table->batch[i].time, table->batch[i].has_seq,
												table->batch[i].seq, found->time,
												found->has_seq, found->seq)))
			found = &table->batch[i];
	return found;
}

/* the states of the instants from the p-th on */
static void
resolve_from(Fold *f, int p)
{
	for (int i = p; i < f->list.n; i++)
		f->list.items[i].state = resolve(f->cx, f->list.items[i].effect,
										 i > 0 ? f->list.items[i - 1].state : ABSENT);
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
		if (r->own_given != NULL)
			in->own_given = r->own_given;
		in->has_under_last = r->has_under_last;
		in->under_last_has_seq = r->under_last_has_seq;
		in->under_last_seq = r->under_last_seq;
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
	 * only when neither knows more.
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
	resolve_from(f, 0);
}

static bool given_equal(const ZLFoldContext *cx, const uint8 *a, const uint8 *b);

/*
 * A change that a partial winner applied before follows at its instant:
 * it goes under the winner, which keeps its own columns on top.  Of the
 * changes already under it the record knows their composition and the
 * last one in fold order: the change goes over that composition when it
 * follows that last one, else beneath it (exact unless it falls between
 * changes of different batches that are both under the winner).
 */
static void
compose_under(const ZLFoldContext *cx, Instant *at, const ZLFoldChange *c, Effect change)
{
	Effect		own = at->effect;

	own.given = at->own_given;
	if (!at->under_known)
	{
		int			nbytes = (cx->natts + 7) / 8;
		uint8	   *rest = palloc(nbytes);
		bool		any = false;

		for (int i = 0; i < nbytes; i++)
		{
			rest[i] = (at->effect.given != NULL ? at->effect.given[i] : 0xFF) & ~at->own_given[i];
			any |= rest[i] != 0;
		}
		at->under = at->effect;
		at->under.given = rest;
		at->has_under = any;
		at->under_known = true;
	}
	if (!at->has_under)
		at->under = change;
	else if (!at->has_under_last ||
			 zl_fold_precedes(at->time, at->under_last_has_seq, at->under_last_seq,
							  c->time, c->has_seq, c->seq))
		at->under = compose(cx, change, at->under);
	else
		at->under = compose(cx, at->under, change);
	if (!at->has_under_last ||
		zl_fold_precedes(at->time, at->under_last_has_seq, at->under_last_seq,
						 c->time, c->has_seq, c->seq))
	{
		at->has_under_last = true;
		at->under_last_has_seq = c->has_seq;
		at->under_last_seq = c->seq;
	}
	at->has_under = true;
	at->effect = compose(cx, own, at->under);
}

/* one change of the batch, in fold order: count it and merge it in */
static void
fold_change(Fold *f, const Instant *newest, const ZLFoldChange *c, ZLFoldCounts *counts)
{
	const ZLFoldContext *cx = f->cx;
	InstantList *list = &f->list;
	int			p = find_instant(list, c->time);
	Instant    *at = p < list->n && list->items[p].time == c->time ? &list->items[p] : NULL;
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
	 * partial one (which keeps the rest from it).
	 */
	if (at != NULL && at->old && c->has_seq && (!at->has_seq || c->seq < at->seq))
	{
		counts->unchanged++;
		if (at->own_given != NULL && !at->effect.absent)
		{
			compose_under(cx, at, c, effect);
			resolve_from(f, p);
		}
		return;
	}
	if (at != NULL)
		effect = compose(cx, effect, at->effect);
	after = resolve(cx, effect, before);
	unchanged = states_equal(cx, after, held);
	identical = unchanged && at != NULL && at->old && at->has_seq == c->has_seq &&
		(!c->has_seq || at->seq == c->seq) &&
		(c->is_delete || given_equal(cx, c->given, at->own_given));

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
	else
	{
		/* the change that held the instant is now the last one under c */
		at->has_under_last = true;
		at->under_last_has_seq = at->has_seq;
		at->under_last_seq = at->seq;
	}
	at->under_known = false;
	at->has_seq = c->has_seq;
	at->seq = c->seq;
	at->effect = effect;
	at->own_given = c->is_delete ? NULL : c->given;
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
	if (a == NULL || b == NULL)
		return a == b;
	return memcmp(a, b, (cx->natts + 7) / 8) == 0;
}

/* what the record keeps of the key from its earliest change on */
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
		bool		plain = in->effect.given == NULL && in->own_given == NULL && !own_untracked;
		const ZLTableInstant *ti;
		ZLRecordInstant *r;

		if (in->boundary && plain && !in->has_seq)
			continue;			/* the versions show it */
		if (plain && (ti = table_instant_at(cx->table, in->time)) != NULL &&
			ti->has_seq == in->has_seq && (!in->has_seq || ti->seq == in->seq))
			continue;			/* the table remembers it */
		r = &key->remember[key->nremember++];
		r->time = in->time;
		r->has_seq = in->has_seq;
		r->seq = in->has_seq ? in->seq : 0;
		r->is_delete = in->effect.absent;
		r->given = in->effect.absent ? NULL : in->effect.given;
		r->own_given = in->effect.absent || given_equal(cx, in->own_given, in->effect.given) ?
			NULL : in->own_given;
		r->has_under_last = r->own_given != NULL && in->has_under_last;
		r->under_last_has_seq = r->has_under_last && in->under_last_has_seq;
		r->under_last_seq = r->under_last_has_seq ? in->under_last_seq : 0;
		r->untracked = own_untracked ? untracked_of(cx, in->state) : NULL;
	}
	key->record_changed = key->nremember != key->nrecord;
	for (int i = 0; i < key->nremember && !key->record_changed; i++)
	{
		const ZLRecordInstant *a = &key->remember[i];
		const ZLRecordInstant *b = &key->record[i];

		key->record_changed = a->time != b->time || a->has_seq != b->has_seq ||
			a->seq != b->seq || a->is_delete != b->is_delete ||
			!given_equal(cx, a->given, b->given) || !given_equal(cx, a->own_given, b->own_given) ||
			a->has_under_last != b->has_under_last || a->under_last_has_seq != b->under_last_has_seq ||
			a->under_last_seq != b->under_last_seq ||
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
		fold_change(&f, have_newest ? &newest : NULL, key->changes[i], counts);
	cut_versions(&f, key);
	instants_to_remember(&f, key);
}
