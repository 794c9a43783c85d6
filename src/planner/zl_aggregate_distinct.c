/*-------------------------------------------------------------------------
 *
 * zl_aggregate_distinct.c
 *	  The distinct inputs of an aggregate computed in the scan
 *	  (count(DISTINCT branch) in a ZipperAggregate, zl_aggregate.c).
 *
 * nodeAgg.c gives an aggregate with DISTINCT its distinct inputs in the
 * order of the DISTINCT clause's sort operator: it sorts every input and
 * skips those equal to the one before.  The result must be the same here
 * (sum(DISTINCT) of floats depends on the order of its inputs), but most
 * DISTINCT columns of history queries hold few values among many rows
 * (a branch, a status, a currency), so the inputs first go into a hash set
 * under the clause's equality operator and only the distinct values are
 * sorted at the end.  The set lives in its own memory; once that reaches
 * half of work_mem, the set's values and every later input go into a
 * tuplesort of datums given the other half, which spills to disk and is
 * read back skipping duplicates, as nodeAgg.c does -- one work_mem (as
 * nodeAgg.c gives each DISTINCT aggregate) whatever the number of distinct
 * values (README "Bounded memory").
 *
 * A bitwise equality (an integer, a date: zl_aggregate_memo.c) puts a memo
 * of values already in the set in front of it, so that a repeated value
 * costs no call of the hash and equality functions; it is forgotten when
 * the set spills or is emptied.
 *
 * NULL inputs are not in the set: the aggregates taken (zl_aggregate.c)
 * ignore them or are strict; whether one came is remembered, and a
 * non-strict one gets a single NULL where the sort order puts it.
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "storage/zl_storage.h"
#include "access/zl_access.h"
#include "planner/zl_planner_internal.h"

#include "miscadmin.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/sortsupport.h"
#include "utils/tuplesort.h"

typedef struct DistinctEntry
{
	Datum		value;
	uint32		hash;
	char		status;
} DistinctEntry;

#define SH_PREFIX distinctset
#define SH_ELEMENT_TYPE DistinctEntry
#define SH_KEY_TYPE Datum
#define SH_KEY value
#define SH_HASH_KEY(tb, key) distinct_hash((ZLDistinctInput *) (tb)->private_data, key)
#define SH_EQUAL(tb, a, b) distinct_equal((ZLDistinctInput *) (tb)->private_data, a, b)
#define SH_STORE_HASH
#define SH_GET_HASH(tb, a) (a)->hash
#define SH_SCOPE static inline
#define SH_DECLARE
#define SH_DEFINE
/* the functions SH_HASH_KEY and SH_EQUAL call, defined below */
static inline uint32 distinct_hash(ZLDistinctInput *d, Datum value);
static inline bool distinct_equal(ZLDistinctInput *d, Datum a, Datum b);
#include "lib/simplehash.h"

struct ZLDistinctInput
{
	Oid			type;
	int16		typlen;
	bool		typbyval;
	Oid			sortop;
	Oid			collation;
	bool		nulls_first;
	FmgrInfo	equal;			/* the DISTINCT clause's equality */
	FmgrInfo	hash;			/* a hash function for it; fn_oid 0: none */
	MemoryContext memory;		/* the set, its values, the sort */
	distinctset_hash *set;		/* NULL once spilled (or without hashing) */
	ZLKeyMemo  *memo;			/* bitwise equality: values in the set; or NULL */
	Tuplesortstate *sort;		/* else the inputs, sorted at the end */
	bool		saw_null;

	/* reading: the set's values sorted, or the sort */
	Datum	   *sorted;
	int			nsorted;
	int			next;
	bool		null_pending;	/* the NULL still to hand out */
	bool		have_last;		/* from the sort: the value handed out last */
	Datum		last;
};

static inline uint32
distinct_hash(ZLDistinctInput *d, Datum value)
{
	return DatumGetUInt32(FunctionCall1Coll(&d->hash, d->collation, value));
}

static inline bool
distinct_equal(ZLDistinctInput *d, Datum a, Datum b)
{
	return DatumGetBool(FunctionCall2Coll(&d->equal, d->collation, a, b));
}

/*
 * The distinct inputs of type type under the equality eqop, in the order
 * of sortop (NULL first or last as nulls_first says), for collation.
 */
ZLDistinctInput *
zl_distinct_create(Oid type, Oid eqop, Oid sortop, bool nulls_first, Oid collation)
{
	ZLDistinctInput *d = palloc0(sizeof(ZLDistinctInput));
	RegProcedure hashfn;

	d->memory = AllocSetContextCreate(CurrentMemoryContext, "zipper_lake distinct inputs",
									  ALLOCSET_DEFAULT_SIZES);
	d->type = type;
	get_typlenbyval(type, &d->typlen, &d->typbyval);
	d->sortop = sortop;
	d->collation = collation;
	d->nulls_first = nulls_first;
	/* the functions outlive resets of the set's memory */
	fmgr_info(get_opcode(eqop), &d->equal);
	if (get_op_hash_functions(eqop, &hashfn, NULL))
		fmgr_info(hashfn, &d->hash);
	d->memo = zl_key_memo_create(type, eqop);
	zl_distinct_reset(d);
	return d;
}

/* the sort of the inputs, in sort_kb of memory */
static Tuplesortstate *
begin_sort(ZLDistinctInput *d, int sort_kb)
{
	return tuplesort_begin_datum(d->type, d->sortop, d->collation, d->nulls_first,
								 sort_kb, NULL, TUPLESORT_NONE);
}

/* empty again (a rescan) */
void
zl_distinct_reset(ZLDistinctInput *d)
{
	MemoryContext old;

	if (d->sort != NULL)
		tuplesort_end(d->sort);
	MemoryContextReset(d->memory);
	d->sort = NULL;
	d->set = NULL;
	d->sorted = NULL;
	d->saw_null = false;
	if (d->memo != NULL)
		zl_key_memo_clear(d->memo);
	old = MemoryContextSwitchTo(d->memory);
	if (OidIsValid(d->hash.fn_oid))
		d->set = distinctset_create(d->memory, 64, d);
	else
		d->sort = begin_sort(d, work_mem);
	MemoryContextSwitchTo(old);
}

/* no longer needed: the sort's files and all memory go */
void
zl_distinct_end(ZLDistinctInput *d)
{
	if (d->sort != NULL)
		tuplesort_end(d->sort);
	d->sort = NULL;
	MemoryContextDelete(d->memory);
}

/* the set reached half of work_mem: its values, and all later inputs, go to a sort */
static void
spill(ZLDistinctInput *d)
{
	distinctset_iterator it;
	DistinctEntry *entry;
	MemoryContext old = MemoryContextSwitchTo(d->memory);

	/* the set's half of work_mem stays taken until the reset */
	d->sort = begin_sort(d, work_mem / 2);
	distinctset_start_iterate(d->set, &it);
	while ((entry = distinctset_iterate(d->set, &it)) != NULL)
		tuplesort_putdatum(d->sort, entry->value, false);
	MemoryContextSwitchTo(old);
	/* the table goes; the values copied for it stay until the reset */
	distinctset_destroy(d->set);
	d->set = NULL;
	if (d->memo != NULL)
		zl_key_memo_clear(d->memo);
}

/* one input */
void
zl_distinct_add(ZLDistinctInput *d, Datum value, bool isnull)
{
	bool		found;
	DistinctEntry *entry;

	if (isnull)
	{
		d->saw_null = true;
		return;
	}
	if (d->set == NULL)
	{
		tuplesort_putdatum(d->sort, value, false);
		return;
	}
	if (d->memo != NULL && zl_key_memo_get(d->memo, value) != NULL)
		return;
	entry = distinctset_insert(d->set, value, &found);
	/* the memo knows the value from now on (any non-NULL pointer will do) */
	if (d->memo != NULL)
		zl_key_memo_put(d->memo, value, d);
	if (found)
		return;
	if (!d->typbyval)
	{
		/* kept in the set's memory (the caller's is reset every row) */
		MemoryContext old = MemoryContextSwitchTo(d->memory);

		entry->value = datumCopy(value, false, d->typlen);
		MemoryContextSwitchTo(old);
	}
	if (MemoryContextMemAllocated(d->memory, true) > (Size) work_mem * 1024 / 2)
		spill(d);
}

/* the inputs values[rows[k]] / nulls[rows[k]] of a batch of rows, in order */
void
zl_distinct_add_rows(ZLDistinctInput *d, const Datum *values, const bool *nulls,
					 const uint32 *rows, uint32 nrows)
{
	for (uint32 k = 0; k < nrows; k++)
	{
		uint32		r = rows[k];

		/* the memo's values, most of a column with few, skipped in this loop */
		if (d->memo != NULL && d->set != NULL && !nulls[r] &&
			zl_key_memo_get(d->memo, values[r]) != NULL)
			continue;
		zl_distinct_add(d, values[r], nulls[r]);
	}
}

static int
compare_sorted(const void *a, const void *b, void *arg)
{
	return ApplySortComparator(*(const Datum *) a, false, *(const Datum *) b, false,
							   (SortSupport) arg);
}

/* no more inputs: hand them out with zl_distinct_next */
void
zl_distinct_finish(ZLDistinctInput *d)
{
	MemoryContext old = MemoryContextSwitchTo(d->memory);

	d->null_pending = d->saw_null;
	d->have_last = false;
	d->next = 0;
	if (d->set != NULL)
	{
		SortSupportData ssup = {0};
		distinctset_iterator it;
		DistinctEntry *entry;

		ssup.ssup_cxt = d->memory;
		ssup.ssup_collation = d->collation;
		ssup.ssup_nulls_first = d->nulls_first;
		PrepareSortSupportFromOrderingOp(d->sortop, &ssup);
		d->sorted = palloc(sizeof(Datum) * Max(d->set->members, 1));
		d->nsorted = 0;
		distinctset_start_iterate(d->set, &it);
		while ((entry = distinctset_iterate(d->set, &it)) != NULL)
			d->sorted[d->nsorted++] = entry->value;
		qsort_arg(d->sorted, d->nsorted, sizeof(Datum), compare_sorted, &ssup);
	}
	else
		tuplesort_performsort(d->sort);
	MemoryContextSwitchTo(old);
}

/* the next distinct input in order (*isnull: the NULL); false when done */
bool
zl_distinct_next(ZLDistinctInput *d, Datum *value, bool *isnull)
{
	*isnull = false;
	if (d->null_pending && d->nulls_first)
	{
		d->null_pending = false;
		*isnull = true;
		return true;
	}
	if (d->set != NULL && d->next < d->nsorted)
	{
		*value = d->sorted[d->next++];
		return true;
	}
	if (d->set == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(d->memory);
		bool		null;
		bool		found = false;

		/*
		 * Values come copied (into the set's memory, not the caller's, whose
		 * resets must not free the one kept); those equal to the one handed
		 * out before are skipped.
		 */
		while (tuplesort_getdatum(d->sort, true, value, &null, NULL))
		{
			if (d->have_last && distinct_equal(d, d->last, *value))
			{
				if (!d->typbyval)
					pfree(DatumGetPointer(*value));
				continue;
			}
			if (d->have_last && !d->typbyval)
				pfree(DatumGetPointer(d->last));
			d->last = *value;
			d->have_last = true;
			found = true;
			break;
		}
		MemoryContextSwitchTo(old);
		if (found)
			return true;
	}
	if (d->null_pending)
	{
		d->null_pending = false;
		*isnull = true;
		return true;
	}
	return false;
}
