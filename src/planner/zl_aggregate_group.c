/*-------------------------------------------------------------------------
 *
 * zl_aggregate_group.c
 *	  The groups of a grouped ZipperAggregate (GROUP BY branch computed
 *	  in the scan, zl_aggregate.c): a hash table of groups that freezes
 *	  at hash_mem, and a sort for the rows of the groups it could not take.
 *
 * The groups are found in a TupleHashTable (execGrouping.c, as nodeAgg.c
 * finds them) keyed by the grouping columns under the GROUP BY clause's
 * equality operators and their hash functions; each entry carries the
 * caller's per-group data (the aggregates' transition states), zeroed when
 * the group is new.  The table, its entries and the transition states
 * (their own memory, the aggregates' context) are counted together; once
 * they exceed their share of hash_mem the table freezes: a row of a group
 * it holds still finds it, a row of any other group is handed back
 * (zl_groups_find returns NULL) and the caller spills it -- its grouping
 * columns and the aggregates' inputs -- into a tuplesort ordered by the
 * grouping columns (the clause's sort operators and NULLS FIRST/LAST) and
 * then by a sequence number, so that a group's rows come back in the order
 * the scan gave them, as the Agg node gives them to a group (sum() of
 * floats depends on it).  The sort gets the rest of hash_mem and spills to
 * disk beyond it: one hash_mem whatever the number of groups, as nodeAgg.c
 * keeps a hashed aggregate (README "Bounded memory").
 *
 * A single key whose equality is bitwise (an integer, a date, a
 * timestamp: zl_aggregate_memo.c) has a memo in front of the table: the
 * key's group from the memo when it holds the key, else from the table
 * (and then remembered); the NULL key's group is remembered apart.  Only
 * groups the table holds are remembered, and the memo is forgotten with
 * the table, so it changes nothing but the time a row takes: a row of a
 * group the frozen table lacks still misses and is spilled.
 *
 * At the end the caller reads the table's groups (zl_groups_next_hashed),
 * then the sorted rows (zl_groups_next_spilled), told where each group
 * begins, and aggregates those one group at a time.
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "storage/zl_storage.h"
#include "access/zl_access.h"
#include "planner/zl_planner_internal.h"

#include "catalog/pg_operator.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "utils/memutils.h"
#include "utils/tuplesort.h"

/* a group's bytes in the table besides its key and the caller's data */
#define GROUP_OVERHEAD	(sizeof(TupleHashEntryData) + 2 * MAXIMUM_ALIGNOF + SizeofMinimalTupleHeader)

struct ZLGroups
{
	int			nkeys;
	AttrNumber *key_columns;	/* 1 .. nkeys */
	Size		entry_size;		/* the caller's data per group */
	size_t		table_limit;	/* freeze beyond these bytes */
	int			sort_kb;		/* the spill sort's work memory */

	MemoryContext table_memory; /* the hash table and its buckets */
	MemoryContext entry_memory; /* its groups' keys and the caller's data */
	MemoryContext state_memory; /* the caller's transition states */
	MemoryContext temp_memory;	/* hashing and comparing */
	TupleHashTable table;
	ZLKeyMemo  *memo;			/* single bitwise key: its groups; else NULL */
	void	   *null_group;		/* with the memo: the NULL key's, once found */
	TupleTableSlot *key_slot;	/* a row's key, looked up */
	TupleTableSlot *hash_slot;	/* a group's key, read back */
	bool		frozen;
	TupleHashIterator iterator;
	bool		iterating;
	int64		groups_hashed;

	/* the rows of the groups the frozen table lacks */
	TupleDesc	row_desc;		/* keys, the caller's columns, sequence */
	Oid		   *sortops;
	Oid		   *collations;
	bool	   *nulls_first;
	Tuplesortstate *sort;
	TupleTableSlot *spill_slot;
	int64		spilled_rows;
	int64		groups_sorted;
	TupleTableSlot *read_slot;	/* a sorted row */
	TupleTableSlot *group_slot; /* the first row of the current sorted group */
	bool		have_group;
	ExprState  *same_key;		/* read_slot's key = group_slot's */
	ExprContext *compare;
};

/*
 * Groups keyed by the first nkeys columns of row_desc (their collations
 * set there), compared by eqops, sorted by sortops; the rest of row_desc
 * are the columns the caller spills with a row.  entry_size: the caller's
 * data per group; groups: the planner's estimate of their number.
 */
ZLGroups *
zl_groups_create(PlanState *parent, TupleDesc row_desc, int nkeys, const Oid *eqops,
				 const Oid *sortops, const bool *nulls_first, Size entry_size, double groups)
{
	ZLGroups   *g = palloc0(sizeof(ZLGroups));
	TupleDesc	key_desc = CreateTemplateTupleDesc(nkeys);
	Oid		   *eqfuncs;
	FmgrInfo   *hashfuncs;
	size_t		hash_mem = get_hash_memory_limit();
	double		max_buckets;
	int			natts = row_desc->natts;

	g->nkeys = nkeys;
	g->entry_size = entry_size;
	g->key_columns = palloc(sizeof(AttrNumber) * nkeys);
	g->sortops = palloc(sizeof(Oid) * (nkeys + 1));
	g->collations = palloc(sizeof(Oid) * (nkeys + 1));
	g->nulls_first = palloc(sizeof(bool) * (nkeys + 1));
	for (int i = 0; i < nkeys; i++)
	{
		Form_pg_attribute att = TupleDescAttr(row_desc, i);

		g->key_columns[i] = i + 1;
		g->sortops[i] = sortops[i];
		g->collations[i] = att->attcollation;
		g->nulls_first[i] = nulls_first[i];
		TupleDescInitEntry(key_desc, i + 1, NULL, att->atttypid, att->atttypmod, 0);
		TupleDescInitEntryCollation(key_desc, i + 1, att->attcollation);
	}

	/* the sort gets a quarter of hash_mem (64kB at least), the table the rest */
	g->sort_kb = Max(64, (int) (hash_mem / 4 / 1024));
	g->table_limit = Max(hash_mem - (size_t) g->sort_kb * 1024, hash_mem / 2);

	g->table_memory = AllocSetContextCreate(CurrentMemoryContext, "zipper_lake group table",
											ALLOCSET_DEFAULT_SIZES);
	g->entry_memory = AllocSetContextCreate(CurrentMemoryContext, "zipper_lake groups",
											ALLOCSET_DEFAULT_SIZES);
	g->state_memory = AllocSetContextCreate(CurrentMemoryContext, "zipper_lake group states",
											ALLOCSET_DEFAULT_SIZES);
	g->temp_memory = AllocSetContextCreate(CurrentMemoryContext, "zipper_lake group lookup",
										   ALLOCSET_SMALL_SIZES);

	/* as many buckets as groups expected, as long as they fit the limit */
	max_buckets = (double) g->table_limit / (GROUP_OVERHEAD + entry_size + 16 * nkeys);
	execTuplesHashPrepare(nkeys, eqops, &eqfuncs, &hashfuncs);
	g->table = BuildTupleHashTableExt(parent, key_desc, nkeys, g->key_columns, eqfuncs,
									  hashfuncs, g->collations,
									  (long) Max(Min(groups, max_buckets), 256), entry_size,
									  g->table_memory, g->entry_memory, g->temp_memory, false);
	g->key_slot = MakeSingleTupleTableSlot(key_desc, &TTSOpsVirtual);
	g->hash_slot = MakeSingleTupleTableSlot(key_desc, &TTSOpsMinimalTuple);

	/* the spilled rows: the caller's columns and a sequence number */
	g->row_desc = CreateTemplateTupleDesc(natts + 1);
	for (int i = 0; i < natts; i++)
		TupleDescCopyEntry(g->row_desc, i + 1, row_desc, i + 1);
	TupleDescInitEntry(g->row_desc, natts + 1, NULL, INT8OID, -1, 0);
	g->sortops[nkeys] = Int8LessOperator;
	g->collations[nkeys] = InvalidOid;
	g->nulls_first[nkeys] = false;
	g->spill_slot = MakeSingleTupleTableSlot(g->row_desc, &TTSOpsVirtual);
	g->read_slot = MakeSingleTupleTableSlot(g->row_desc, &TTSOpsMinimalTuple);
	g->group_slot = MakeSingleTupleTableSlot(g->row_desc, &TTSOpsMinimalTuple);
	g->same_key = execTuplesMatchPrepare(g->row_desc, nkeys, g->key_columns, eqops,
										 g->collations, parent);
	g->compare = CreateExprContext(parent->state);
	if (nkeys == 1)
		g->memo = zl_key_memo_create(TupleDescAttr(row_desc, 0)->atttypid, eqops[0]);
	return g;
}

/* the memory the caller's transition states go in (their aggregate context) */
MemoryContext
zl_groups_state_memory(ZLGroups *g)
{
	return g->state_memory;
}

static size_t
table_bytes(ZLGroups *g)
{
	return MemoryContextMemAllocated(g->table_memory, true) +
		MemoryContextMemAllocated(g->entry_memory, true) +
		MemoryContextMemAllocated(g->state_memory, true);
}

/*
 * The data of the group of a row whose key is keys/nulls (isnew: just
 * made, zeroed); NULL when the table is frozen and lacks the group.
 */
void *
zl_groups_find(ZLGroups *g, const Datum *keys, const bool *nulls, bool *isnew)
{
	TupleTableSlot *slot = g->key_slot;
	TupleHashEntry entry;
	void	   *known = NULL;

	if (g->memo != NULL)
		known = nulls[0] ? g->null_group : zl_key_memo_get(g->memo, keys[0]);
	if (known != NULL)
	{
		*isnew = false;
		return known;
	}
	ExecClearTuple(slot);
	memcpy(slot->tts_values, keys, sizeof(Datum) * g->nkeys);
	memcpy(slot->tts_isnull, nulls, sizeof(bool) * g->nkeys);
	ExecStoreVirtualTuple(slot);
	entry = LookupTupleHashEntry(g->table, slot, g->frozen ? NULL : isnew, NULL);
	MemoryContextReset(g->temp_memory);
	if (entry == NULL)
	{
		*isnew = false;
		return NULL;
	}
	if (!g->frozen && *isnew)
	{
		entry->additional = MemoryContextAllocZero(g->entry_memory, g->entry_size);
		g->groups_hashed++;
		/* nodeAgg.c's test, after each new group (the caller fills it in later) */
		if (table_bytes(g) > g->table_limit)
			g->frozen = true;
	}
	else
		*isnew = false;
	if (g->memo != NULL)
	{
		/* the entry is in the table, and stays there until the reset */
		if (nulls[0])
			g->null_group = entry->additional;
		else
			zl_key_memo_put(g->memo, keys[0], entry->additional);
	}
	return entry->additional;
}

/*
 * The groups the memo knows of a batch's rows (a single key: the values
 * and nulls of its column at rows[0 .. nrows-1]) into groups[], NULL where
 * it does not know them (then zl_groups_find); false without a memo.  One
 * tight loop, so that the rows' slots are read while others are compared.
 */
bool
zl_groups_find_known(ZLGroups *g, const Datum *keys, const bool *nulls, const uint32 *rows,
					 uint32 nrows, void **groups)
{
	if (g->memo == NULL)
		return false;
	for (uint32 i = 0; i < nrows; i++)
	{
		uint32		r = rows[i];

		groups[i] = nulls[r] ? g->null_group : zl_key_memo_get(g->memo, keys[r]);
	}
	return true;
}

/* a row of a group the frozen table lacks: the row_desc columns given */
void
zl_groups_spill(ZLGroups *g, const Datum *values, const bool *nulls)
{
	TupleTableSlot *slot = g->spill_slot;
	int			natts = g->row_desc->natts - 1;

	if (g->sort == NULL)
	{
		AttrNumber *columns = palloc(sizeof(AttrNumber) * (g->nkeys + 1));

		for (int i = 0; i < g->nkeys; i++)
			columns[i] = i + 1;
		columns[g->nkeys] = natts + 1;
		g->sort = tuplesort_begin_heap(g->row_desc, g->nkeys + 1, columns, g->sortops,
									   g->collations, g->nulls_first, g->sort_kb, NULL,
									   TUPLESORT_NONE);
	}
	ExecClearTuple(slot);
	memcpy(slot->tts_values, values, sizeof(Datum) * natts);
	memcpy(slot->tts_isnull, nulls, sizeof(bool) * natts);
	slot->tts_values[natts] = Int64GetDatum(g->spilled_rows++);
	slot->tts_isnull[natts] = false;
	ExecStoreVirtualTuple(slot);
	tuplesort_puttupleslot(g->sort, slot);
}

/* every row is in: sort the spilled ones */
void
zl_groups_input_done(ZLGroups *g)
{
	if (g->sort != NULL)
		tuplesort_performsort(g->sort);
	g->have_group = false;
	g->iterating = false;
}

/*
 * The table's next group: its key (valid until the next call) and data;
 * false after the last.
 */
bool
zl_groups_next_hashed(ZLGroups *g, TupleTableSlot **key, void **data)
{
	TupleHashEntry entry;

	if (!g->iterating)
	{
		InitTupleHashIterator(g->table, &g->iterator);
		g->iterating = true;
	}
	entry = ScanTupleHashTable(g->table, &g->iterator);
	if (entry == NULL)
		return false;
	ExecStoreMinimalTuple(entry->firstTuple, g->hash_slot, false);
	slot_getallattrs(g->hash_slot);
	*key = g->hash_slot;
	*data = entry->additional;
	return true;
}

/*
 * The next spilled row in order (valid until the next call; its columns as
 * given to zl_groups_spill), and whether it begins a group; false after
 * the last.
 */
bool
zl_groups_next_spilled(ZLGroups *g, TupleTableSlot **row, bool *first_of_group)
{
	if (g->sort == NULL || !tuplesort_gettupleslot(g->sort, true, false, g->read_slot, NULL))
		return false;
	slot_getallattrs(g->read_slot);
	*first_of_group = true;
	if (g->have_group)
	{
		g->compare->ecxt_outertuple = g->read_slot;
		g->compare->ecxt_innertuple = g->group_slot;
		*first_of_group = !ExecQualAndReset(g->same_key, g->compare);
	}
	if (*first_of_group)
	{
		ExecCopySlot(g->group_slot, g->read_slot);
		g->have_group = true;
		g->groups_sorted++;
	}
	*row = g->read_slot;
	return true;
}

/* groups in the table, groups and rows sorted (EXPLAIN ANALYZE) */
void
zl_groups_counts(ZLGroups *g, int64 *hashed, int64 *sorted, int64 *spilled_rows)
{
	*hashed = g->groups_hashed;
	*sorted = g->groups_sorted;
	*spilled_rows = g->spilled_rows;
}

/* empty again, for a rescan; the counts stay (EXPLAIN ANALYZE sums them) */
void
zl_groups_reset(ZLGroups *g)
{
	if (g->sort != NULL)
		tuplesort_end(g->sort);
	g->sort = NULL;
	ExecClearTuple(g->read_slot);
	ExecClearTuple(g->group_slot);
	ExecClearTuple(g->hash_slot);
	ResetTupleHashTable(g->table);
	if (g->memo != NULL)
		zl_key_memo_clear(g->memo);
	g->null_group = NULL;
	MemoryContextReset(g->entry_memory);
	MemoryContextReset(g->state_memory);
	g->frozen = false;
	g->have_group = false;
	g->iterating = false;
}

void
zl_groups_end(ZLGroups *g)
{
	if (g->sort != NULL)
		tuplesort_end(g->sort);
	g->sort = NULL;
	ExecDropSingleTupleTableSlot(g->key_slot);
	ExecDropSingleTupleTableSlot(g->hash_slot);
	ExecDropSingleTupleTableSlot(g->spill_slot);
	ExecDropSingleTupleTableSlot(g->read_slot);
	ExecDropSingleTupleTableSlot(g->group_slot);
	MemoryContextDelete(g->table_memory);
	MemoryContextDelete(g->entry_memory);
	MemoryContextDelete(g->state_memory);
	MemoryContextDelete(g->temp_memory);
}
