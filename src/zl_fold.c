/*-------------------------------------------------------------------------
 *
 * zl_fold.c
 *	  One key's history as the fold of every change ever applied to it.
 *
 * README "Change semantics": a key's history is the fold of its changes in
 * fold order (time; seq, changes without seq last; order of application).
 * Only the last change at an instant shapes the history there, and the
 * state after a change depends on that change alone (an upsert of v: v; a
 * delete: absent).  So a history is a list of *instants*, each with the
 * effect of the change that won it, held until the next instant; its
 * versions are the maximal runs of one value.
 *
 * The stored versions and the change record (zl_record.c) give that list
 * from the batch's earliest change of the key on: every version begins at
 * an instant (an upsert of its values) and, unless another version begins
 * where it ends, ends at one (a delete); the record adds the instants the
 * versions do not show (no-ops, deletes of an absent key, boundaries later
 * merged away) and the seq of instants a change with seq won; and
 * apply_snapshot with deletes gave every key an instant (ZLTableInstants)
 * whose effect is the key's state there.  An instant that is no boundary
 * has the effect the versions imply: inside a version, an upsert of its
 * values; in a gap, a delete.
 *
 * zl_fold_key merges a batch's changes of one key into that list, in fold
 * order, counting each (README "Counts"), then cuts the list into versions
 * again and says which instants the record must keep from the batch's
 * earliest change on: those that are no boundary and boundaries won by a
 * change with seq — never a table instant, which is remembered once for
 * the whole table.
 *
 * A change that a change applied before follows at its own instant (a
 * higher seq there) shapes nothing: it counts as unchanged, and is never
 * late, because the record keeps only the winner of an instant and cannot
 * tell a new such change from a re-applied one.
 *
 *-------------------------------------------------------------------------
 */
#include "zipper_lake.h"

/* what a change leaves: absent, or a version with these values */
typedef struct Effect
{
	bool		absent;
	Datum	   *values;
	bool	   *isnull;
} Effect;

static const Effect ABSENT = {true, NULL, NULL};

typedef struct Instant
{
	int64		time;
	bool		has_seq;
	int64		seq;
	Effect		effect;
	bool		old;			/* won by a change applied before the batch */
	bool		boundary;		/* a version begins or ends here */
} Instant;

typedef struct InstantList
{
	Instant    *items;
	int			n;
	int			max;
} InstantList;

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

static bool
effects_equal(const ZLValueComparer *comparer, Effect a, Effect b)
{
	if (a.absent || b.absent)
		return a.absent == b.absent;
	return a.values == b.values ||
		zl_values_equal(comparer, a.values, a.isnull, b.values, b.isnull);
}

static Effect
version_effect(const ZLFoldVersion *v)
{
	Effect		e = ABSENT;

	if (v != NULL)
	{
		e.absent = false;
		e.values = v->values;
		e.isnull = v->isnull;
	}
	return e;
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
	in->time = time;
	in->has_seq = has_seq;
	in->seq = seq;
	in->effect = effect;
	in->old = true;
	in->boundary = false;
	return in;
}

static int
instant_cmp(const void *a, const void *b)
{
	const Instant *ia = a;
	const Instant *ib = b;

	if (ia->time != ib->time)
		return ia->time < ib->time ? -1 : 1;
	return (int) ib->has_seq - (int) ia->has_seq;	/* the record's, with seq, first */
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

static bool
is_stored_table_instant(const ZLTableInstants *table, int64 t)
{
	int			lo = 0,
				hi = table->ntimes - 1;

	while (lo <= hi)
	{
		int			mid = (lo + hi) / 2;

		if (table->times[mid] == t)
			return true;
		if (table->times[mid] < t)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return false;
}

static bool
is_table_instant(const ZLTableInstants *table, int64 t)
{
	return t == table->batch_time || is_stored_table_instant(table, t);
}

/* the instants the stored versions, the record and the table's instants give */
static void
stored_instants(const ZLFoldKey *key, int64 open_end, const ZLTableInstants *table,
				InstantList *list)
{
	int			kept = 0;

	for (int i = 0; i < key->nversions; i++)
	{
		const ZLFoldVersion *v = &key->versions[i];

		push_instant(list, v->from, false, 0, version_effect(v));
		if (v->to != open_end && (i + 1 == key->nversions || key->versions[i + 1].from != v->to))
			push_instant(list, v->to, false, 0, ABSENT);
	}
	for (int i = 0; i < key->nrecord; i++)
	{
		const ZLRecordInstant *r = &key->record[i];

		push_instant(list, r->time, r->has_seq, r->seq,
					 version_effect(version_at(key, r->time)));
	}
	for (int i = 0; i < table->ntimes; i++)
		if (table->times[i] >= key->since)
			push_instant(list, table->times[i], false, 0,
						 version_effect(version_at(key, table->times[i])));

	/*
	 * One instant per time; the record's seq, sorted first, stays, except
	 * at a table instant: a change without seq won there, whatever the
	 * record said before.
	 */
	qsort(list->items, list->n, sizeof(Instant), instant_cmp);
	for (int i = 0; i < list->n; i++)
		if (kept == 0 || list->items[kept - 1].time != list->items[i].time)
			list->items[kept++] = list->items[i];
	list->n = kept;
	for (int i = 0; i < list->n; i++)
		if (list->items[i].has_seq && is_stored_table_instant(table, list->items[i].time))
		{
			list->items[i].has_seq = false;
			list->items[i].seq = 0;
		}
}

/* one change of the batch, in fold order: count it and merge it in */
static void
fold_change(const ZLValueComparer *comparer, InstantList *list, const Instant *newest,
			const ZLFoldChange *c, ZLFoldCounts *counts)
{
	int			p = find_instant(list, c->time);
	Instant    *at = p < list->n && list->items[p].time == c->time ? &list->items[p] : NULL;
	Effect		before = p > 0 ? list->items[p - 1].effect : ABSENT;
	Effect		held = at != NULL ? at->effect : before;
	Effect		effect = {c->is_delete, c->values, c->isnull};
	bool		opened = newest == NULL ||
		!zl_fold_precedes(c->time, c->has_seq, c->seq, newest->time, newest->has_seq, newest->seq);
	bool		identical;

	if (c->is_delete)
		effect = ABSENT;

	/* a change applied before follows it at its instant: it shapes nothing */
	if (at != NULL && at->old && c->has_seq && (!at->has_seq || c->seq < at->seq))
	{
		counts->unchanged++;
		return;
	}
	identical = at != NULL && at->old && at->has_seq == c->has_seq &&
		(!c->has_seq || at->seq == c->seq) && effects_equal(comparer, held, effect);

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
	else if (effects_equal(comparer, held, effect))
		counts->unchanged++;
	else
	{
		counts->inserted++;
		/* the version held ends, unless it began at this instant */
		counts->closed += !held.absent && opened && effects_equal(comparer, held, before);
	}
	if (!opened && !identical && !(c->missing_key && held.absent))
		counts->late++;

	if (at == NULL)
	{
		(void) push_instant(list, 0, false, 0, ABSENT);	/* make room */
		memmove(&list->items[p + 1], &list->items[p], sizeof(Instant) * (list->n - 1 - p));
		at = &list->items[p];
		at->time = c->time;
		at->boundary = false;
	}
	at->has_seq = c->has_seq;
	at->seq = c->seq;
	at->effect = effect;
	at->old = false;
}

static void
push_version(ZLFoldKey *key, int *max, int64 from, int64 to, Effect effect)
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
	v->values = effect.values;
	v->isnull = effect.isnull;
	v->stored = NULL;
}

/* the list cut into maximal runs of one value; stored versions kept as they are */
static void
cut_versions(const ZLValueComparer *comparer, int64 open_end, InstantList *list,
			 ZLFoldKey *key)
{
	Effect		state = ABSENT;
	int64		from = 0;
	int			max = 0;
	int			old = 0;

	key->result = NULL;
	key->nresult = 0;
	for (int i = 0; i < list->n; i++)
	{
		Instant    *in = &list->items[i];

		in->boundary = !effects_equal(comparer, state, in->effect);
		if (!in->boundary)
			continue;
		if (!state.absent)
			push_version(key, &max, from, in->time, state);
		state = in->effect;
		from = in->time;
	}
	if (!state.absent)
		push_version(key, &max, from, open_end, state);

	for (int i = 0; i < key->nresult; i++)
	{
		ZLFoldVersion *v = &key->result[i];

		while (old < key->nversions && key->versions[old].from < v->from)
			old++;
		if (old < key->nversions && key->versions[old].from == v->from &&
			key->versions[old].to == v->to &&
			effects_equal(comparer, version_effect(&key->versions[old]), version_effect(v)))
			*v = key->versions[old];
	}
}

/* what the record keeps of the key from its earliest change on */
static void
instants_to_remember(const ZLTableInstants *table, const InstantList *list, ZLFoldKey *key)
{
	int			first = find_instant(list, key->since);

	key->remember = palloc(sizeof(ZLRecordInstant) * Max(1, list->n - first));
	key->nremember = 0;
	for (int i = first; i < list->n; i++)
	{
		const Instant *in = &list->items[i];
		ZLRecordInstant *r;

		if (in->boundary && !in->has_seq)
			continue;			/* the versions show it */
		if (!in->has_seq && is_table_instant(table, in->time))
			continue;			/* the table remembers it */
		r = &key->remember[key->nremember++];
		r->time = in->time;
		r->has_seq = in->has_seq;
		r->seq = in->has_seq ? in->seq : 0;
		r->is_delete = in->effect.absent;
	}
	key->record_changed = key->nremember != key->nrecord;
	for (int i = 0; i < key->nremember && !key->record_changed; i++)
	{
		const ZLRecordInstant *a = &key->remember[i];
		const ZLRecordInstant *b = &key->record[i];

		key->record_changed = a->time != b->time || a->has_seq != b->has_seq ||
			a->seq != b->seq || a->is_delete != b->is_delete;
	}
}

void
zl_fold_key(const ZLValueComparer *comparer, int64 open_end, const ZLTableInstants *table,
			ZLFoldKey *key, ZLFoldCounts *counts)
{
	InstantList list = {NULL, 0, 0};
	Instant		newest;
	bool		have_newest;

	stored_instants(key, open_end, table, &list);
	have_newest = list.n > 0;
	if (have_newest)
		newest = list.items[list.n - 1];
	for (int i = 0; i < key->nchanges; i++)
		fold_change(comparer, &list, have_newest ? &newest : NULL, key->changes[i], counts);
	cut_versions(comparer, open_end, &list, key);
	instants_to_remember(table, &list, key);
	if (list.items != NULL)
		pfree(list.items);
}
