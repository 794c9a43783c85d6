/*-------------------------------------------------------------------------
 *
 * zl_index_rows.c
 *	  Index entries of a table's rows: what CREATE INDEX builds from and
 *	  what every write adds.
 *
 * A row gets its TID when its sub-group is written (README "Row
 * identifiers"), never when INSERT hands it over: rows wait in the write
 * state and are sorted before they are placed.  So the executor cannot
 * insert index entries for them, and writes do it themselves: every
 * sub-group written (by INSERT's flush, the apply functions, packing,
 * compaction, merges, relocation, rollover -- all of them go through
 * zl_write_placed) has its rows read back from its pages and entered into
 * every index of the table that takes inserts, under their TIDs, when the
 * write of all its sub-groups ends (ZLIndexEntries).  An
 * index entry of a row that a later write masks or moves stays until
 * VACUUM removes it; a reader never sees such a row through it, since
 * fetches check the sub-group and the mask under the reader's snapshot
 * (src/access/zl_tidfetch.c).
 *
 * Unique indexes check every entry as it goes in (UNIQUE_CHECK_YES), as
 * heap's inserts do: the index meets the entries of equal keys and asks
 * for their rows under a dirty snapshot, which reads the catalog -- so a
 * write's rows are entered once all its catalog rows are in (history
 * sub-groups' are inserted in batches), and every write
 * retires a row's old copy before it writes the new one: apply masks the
 * versions a batch replaces before it flushes (zl_apply.c, retire_rows),
 * a load those it merges (zl_load.c), and a sub-group rewritten by
 * compaction, packing, merges, relocation or erase is deleted as its rows
 * are handed to the write state (zl_rewrite_subgroup).  A version that
 * closes thus never conflicts with its own open row, nor a moved row with
 * its old copy.  Writers of a table hold its writer lock until they end,
 * so a conflicting writer in progress is rare (the index waits for it).
 *
 * INSERT hands its rows over without TIDs: the executor hook closes the
 * indexes the executor opened for the table and marks it as one whose
 * entries the writes make (zl_index_entries_by_writes); the flush at the
 * end of the statement enters them.  A path that enters them itself (COPY,
 * tuple routing into a partition) is given a placeholder TID for each row
 * (zl_index_placeholder_tid): one of a TID block taken from the table's
 * counter for no sub-group, so its entry names no row -- fetches pass it
 * by, VACUUM removes it -- and the row's own entries come with its flush.
 *
 * A btree's entries of a write go in sorted by key, all its sub-groups'
 * together (a tuplesort within work_mem): consecutive descents then meet
 * the pages the last one read, where entries in a sub-group's order (by
 * valid_from) would each land on a page of their own -- and the closed
 * copy of a version and the open version that replaced it, in two
 * sub-groups of an apply, mostly share their keys and go in one after the
 * other.  (So a unique violation shows once the whole write is on its
 * pages, and a large write reads some of them back from disk.)  Every
 * entry goes in as one whose row may have replaced another
 * (index_insert's indexUnchanged), as most do -- a closed version's
 * copy, an open version that replaced one, a moved row:
 * before a btree splits a full leaf page it then removes the entries of
 * rows no snapshot sees (bottom-up deletion, zl_index_hidden.c), as it
 * does for heap's UPDATEs, instead of leaving them all to VACUUM.
 *
 * The index being built by CREATE INDEX is left out while it builds: the
 * build flushes the transaction's pending rows first and indexes them
 * itself, with every other visible row.
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "storage/zl_storage.h"
#include "catalog/zl_catalog.h"
#include "write/zl_write.h"

#include "access/genam.h"
#include "access/xact.h"
#include "catalog/pg_am_d.h"
#include "catalog/pg_index.h"
#include "catalog/index.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/execnodes.h"
#include "utils/rel.h"
#include "utils/relcache.h"
#include "utils/tuplesort.h"

struct ZLIndexRows
{
	IndexInfo  *info;
	EState	   *estate;
	ExprContext *econtext;
	ExprState  *predicate;
	TupleTableSlot *slot;
};

/*
 * Tables whose running INSERT statements leave the index entries to the
 * writes (the executor hook closed the indexes it opened for them), with
 * the statement and its transaction nesting level.
 */
typedef struct EntriesByWrites
{
	Oid			relid;
	const void *statement;
	int			nest_level;
} EntriesByWrites;

static List *entries_by_writes = NIL;

/* the TID block placeholders are taken from, whose, and its next offset */
static ZLTableStorage placeholder_storage;
static int64 placeholder_block = -1;
static OffsetNumber placeholder_next = 0;

void
zl_index_entries_by_writes(Oid relid, const void *statement)
{
	MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
	EntriesByWrites *e = palloc(sizeof(EntriesByWrites));

	e->relid = relid;
	e->statement = statement;
	e->nest_level = GetCurrentTransactionNestLevel();
	entries_by_writes = lappend(entries_by_writes, e);
	MemoryContextSwitchTo(old);
}

/* the statement ended (ExecutorEnd) */
void
zl_index_entries_by_writes_end(const void *statement)
{
	ListCell   *lc;

	foreach(lc, entries_by_writes)
	{
		EntriesByWrites *e = lfirst(lc);

		if (e->statement == statement)
		{
			entries_by_writes = foreach_delete_current(entries_by_writes, lc);
			pfree(e);
		}
	}
}

/*
 * (Sub)transactions of this nesting level or deeper ended with an error,
 * or (1) the transaction ended.
 */
void
zl_index_entries_by_writes_forget(int nest_level)
{
	ListCell   *lc;

	if (nest_level <= 1)
		placeholder_block = -1;

	foreach(lc, entries_by_writes)
	{
		EntriesByWrites *e = lfirst(lc);

		if (e->nest_level >= nest_level)
		{
			entries_by_writes = foreach_delete_current(entries_by_writes, lc);
			pfree(e);
		}
	}
}

/*
 * May rows be inserted into the table, which has indexes?  Only if the
 * executor will not enter them itself, under TIDs they do not have yet.
 */
bool
zl_index_entries_left_to_writes(Oid relid)
{
	ListCell   *lc;

	foreach(lc, entries_by_writes)
		if (((EntriesByWrites *) lfirst(lc))->relid == relid)
			return true;
	return false;
}

/*
 * A placeholder TID for a row whose inserter enters index entries itself
 * (see the top of the file).  Blocks are never given twice, so no row
 * ever has one of these TIDs.
 */
void
zl_index_placeholder_tid(Relation rel, ItemPointer tid)
{
	ZLTableStorage storage = zl_table_storage(rel);

	/* also by storage id: a TRUNCATE of a table new in its transaction keeps its file */
	if (!ZL_SAME_TABLE_STORAGE(placeholder_storage, storage) || placeholder_block < 0 ||
		placeholder_next > MaxHeapTuplesPerPage)
	{
		placeholder_block = zl_storage_take_tid_blocks(rel, 1, zl_meta_tid_blocks_used);
		placeholder_storage = storage;
		placeholder_next = FirstOffsetNumber;
	}
	ItemPointerSet(tid, (BlockNumber) placeholder_block, placeholder_next++);
}

/* the index CREATE INDEX is building, left out of the writes' entries */
static Oid	index_building = InvalidOid;

void
zl_index_building(Oid indexoid)
{
	index_building = indexoid;
}

/* evaluate an index's columns and predicate on rows of its table */
ZLIndexRows *
zl_index_rows_begin(Relation table, IndexInfo *info)
{
	ZLIndexRows *r = palloc0(sizeof(ZLIndexRows));

	r->info = info;
	r->estate = CreateExecutorState();
	r->econtext = GetPerTupleExprContext(r->estate);
	r->slot = MakeSingleTupleTableSlot(RelationGetDescr(table), &TTSOpsHeapTuple);
	r->econtext->ecxt_scantuple = r->slot;
	r->predicate = ExecPrepareQual(info->ii_Predicate, r->estate);
	return r;
}

/*
 * The index columns of a row (its t_self the row's TID) into values and
 * isnull; false if the index's predicate leaves the row out.  They live
 * until the next row.
 */
bool
zl_index_rows_form(ZLIndexRows *r, HeapTuple tuple, Datum *values, bool *isnull)
{
	MemoryContextReset(r->econtext->ecxt_per_tuple_memory);
	ExecStoreHeapTuple(tuple, r->slot, false);
	if (r->predicate != NULL && !ExecQual(r->predicate, r->econtext))
		return false;
	FormIndexDatum(r->info, r->slot, r->estate, values, isnull);
	return true;
}

void
zl_index_rows_end(ZLIndexRows *r)
{
	ExecDropSingleTupleTableSlot(r->slot);
	FreeExecutorState(r->estate);
	/* the states were made in the executor state just freed */
	r->info->ii_ExpressionsState = NIL;
	r->info->ii_PredicateState = NULL;
	pfree(r);
}

/*
 * The entries of one write: the sub-groups it wrote, indexed when it ends,
 * and while they go in, the indexes that take them.
 */
struct ZLIndexEntries
{
	Relation	table;
	ZLSubGroup *subgroups;		/* written, in order; no pointers kept */
	int			nsubgroups;
	int			maxsubgroups;

	int			nindexes;
	Relation   *indexes;
	ZLIndexRows **rows;
	Tuplesortstate **sorts;		/* a btree's entries, sorted before they go in */
	ZLBottomUpOutlook **outlooks;	/* whether to ask for bottom-up passes */
	Datum		values[INDEX_MAX_KEYS];
	bool		isnull[INDEX_MAX_KEYS];
};

/* one entry into an index, checking a unique one */
static void
insert_entry(ZLIndexEntries *e, int i, ItemPointer tid)
{
	(void) index_insert(e->indexes[i], e->values, e->isnull, tid, e->table,
						e->indexes[i]->rd_index->indisunique ? UNIQUE_CHECK_YES : UNIQUE_CHECK_NO,
						zl_index_bottomup_hint(e->outlooks[i]), e->rows[i]->info);
}

static void
enter_row(void *arg, const ZLSubGroup *sg, int32 position, HeapTuple tuple)
{
	ZLIndexEntries *e = arg;

	CHECK_FOR_INTERRUPTS();
	for (int i = 0; i < e->nindexes; i++)
	{
		if (!zl_index_rows_form(e->rows[i], tuple, e->values, e->isnull))
			continue;
		if (e->sorts[i] != NULL)
			tuplesort_putindextuplevalues(e->sorts[i], e->indexes[i], &tuple->t_self,
										  e->values, e->isnull);
		else
			insert_entry(e, i, &tuple->t_self);
	}
}

/* a btree's entries of the write, in key order: descents meet the pages the last one read */
static void
enter_sorted(ZLIndexEntries *e, int i)
{
	IndexTuple	itup;

	tuplesort_performsort(e->sorts[i]);
	while ((itup = tuplesort_getindextuple(e->sorts[i], true)) != NULL)
	{
		CHECK_FOR_INTERRUPTS();
		index_deform_tuple(itup, RelationGetDescr(e->indexes[i]), e->values, e->isnull);
		insert_entry(e, i, &itup->t_tid);
	}
	tuplesort_end(e->sorts[i]);
}

/* open the table's indexes that take inserts, but the one being built */
static void
open_indexes(ZLIndexEntries *e)
{
	List	   *oids = RelationGetIndexList(e->table);
	int			n = list_length(oids);
	ListCell   *lc;

	e->indexes = palloc(sizeof(Relation) * Max(n, 1));
	e->rows = palloc(sizeof(ZLIndexRows *) * Max(n, 1));
	e->sorts = palloc0(sizeof(Tuplesortstate *) * Max(n, 1));
	e->outlooks = palloc(sizeof(ZLBottomUpOutlook *) * Max(n, 1));
	foreach(lc, oids)
	{
		Relation	index;
		IndexInfo  *info;

		if (lfirst_oid(lc) == index_building)
			continue;
		index = index_open(lfirst_oid(lc), RowExclusiveLock);
		info = BuildIndexInfo(index);
		if (!info->ii_ReadyForInserts)
		{
			index_close(index, RowExclusiveLock);
			continue;
		}
		e->indexes[e->nindexes] = index;
		e->outlooks[e->nindexes] = zl_index_bottomup_outlook(index);
		/* a btree's sort gets its share of work_mem among the indexes */
		if (index->rd_rel->relam == BTREE_AM_OID)
			e->sorts[e->nindexes] = tuplesort_begin_index_btree(e->table, index, false, false,
																Max(work_mem / n, 64),
																NULL, TUPLESORT_NONE);
		e->rows[e->nindexes++] = zl_index_rows_begin(e->table, info);
	}
	list_free(oids);
}

/*
 * The entries of a write of sub-groups (zl_write_placed): NULL when the
 * table has no index.
 */
ZLIndexEntries *
zl_index_entries_begin(Relation table)
{
	ZLIndexEntries *e;

	if (!RelationGetForm(table)->relhasindex)
		return NULL;
	e = palloc0(sizeof(ZLIndexEntries));
	e->table = table;
	return e;
}

/* a sub-group the write wrote (its TIDs set), to be indexed when it ends */
void
zl_index_entries_add(ZLIndexEntries *e, const ZLSubGroup *sg)
{
	if (e == NULL || sg->first_tid_block < 0 || sg->row_count == 0)
		return;
	if (e->nsubgroups == e->maxsubgroups)
	{
		e->maxsubgroups = Max(8, e->maxsubgroups * 2);
		e->subgroups = e->subgroups == NULL ?
			palloc(sizeof(ZLSubGroup) * e->maxsubgroups) :
			repalloc(e->subgroups, sizeof(ZLSubGroup) * e->maxsubgroups);
	}
	e->subgroups[e->nsubgroups] = *sg;
	e->subgroups[e->nsubgroups].key_directory = NULL;
	e->subgroups[e->nsubgroups].key_filter = NULL;
	e->subgroups[e->nsubgroups].mask = NULL;
	e->nsubgroups++;
}

/*
 * The write ended, every catalog row of it in: enter the rows of its
 * sub-groups into the table's indexes that take inserts (masks, if any,
 * are not in: every row gets its entry).
 */
void
zl_index_entries_end(ZLIndexEntries *e)
{
	if (e == NULL)
		return;
	if (e->nsubgroups > 0)
		open_indexes(e);
	if (e->nindexes > 0)
	{
		zl_index_hidden_rows_refresh(e->table);	/* before any page is locked */
		for (int s = 0; s < e->nsubgroups; s++)
			zl_read_subgroup_rows(e->table, &e->subgroups[s], true, enter_row, e);
	}
	for (int i = 0; i < e->nindexes; i++)
	{
		if (e->sorts[i] != NULL)
			enter_sorted(e, i);
		zl_index_rows_end(e->rows[i]);
		index_close(e->indexes[i], RowExclusiveLock);
	}
	if (e->indexes != NULL)
	{
		pfree(e->indexes);
		pfree(e->rows);
		pfree(e->sorts);
		pfree(e->outlooks);
	}
	if (e->subgroups != NULL)
		pfree(e->subgroups);
	pfree(e);
}
