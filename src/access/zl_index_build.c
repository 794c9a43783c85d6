/*-------------------------------------------------------------------------
 *
 * zl_index_build.c
 *	  CREATE INDEX on a zipper table: building and validating an index.
 *
 * An index entry names a row by its TID (README "Row identifiers"), so an
 * index of any access method that fetches rows by TID works on a zipper
 * table: btree, hash, GiST, GIN, SP-GiST, with expressions and
 * predicates.  Refused: BRIN, which summarizes the table's blocks and
 * would need TID blocks that match them (chunk min/max skipping does its
 * job, README "Pruning"); exclusion constraints and deferrable unique
 * ones, which need the executor's checks of inserted rows (rows get their
 * TIDs only when written, src/write/zl_index_rows.c); a catalog of
 * version 0.1, whose TIDs name pages.  A unique index checks the rows
 * the build hands it (all live) and those each write enters
 * (src/write/zl_index_rows.c).
 *
 * The build reads, in TID order, every row that a snapshot taken after the
 * table was locked sees, and marks the index as one that older snapshots
 * must not use (indcheckxmin, through ii_BrokenHotChain): rows masked
 * before the build, which such a snapshot still sees, are not in it.
 * PostgreSQL sets indcheckxmin only on a new index's pg_index row, whose
 * xmin is the build's transaction; a rebuild (REINDEX, TRUNCATE's, a
 * rewrite's) keeps an older row, which older snapshots pass, so the build
 * updates the row itself (keep_older_snapshots_off).  The
 * build is serial (the planner hook gives index builds no workers,
 * src/planner/zl_indexpaths.c); a scan handed in (amcheck's) lends its
 * snapshot and is ended.  The table's pending rows are flushed first and
 * indexed by the build.  Writes then keep the index
 * (src/write/zl_index_rows.c).
 *
 * CREATE INDEX CONCURRENTLY: once the index takes inserts, writes enter
 * their rows; the build reads with the transaction's snapshot; the
 * validation reads the rows its reference snapshot sees, in TID order,
 * and enters those the index lacks, as heap does.
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "storage/zl_storage.h"
#include "catalog/zl_catalog.h"
#include "write/zl_write.h"
#include "access/zl_access_internal.h"

#include "access/genam.h"
#include "access/tableam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "catalog/indexing.h"
#include "catalog/pg_am_d.h"
#include "catalog/pg_index.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/tuplesort.h"

static void
refuse_index(Relation table, Relation index, IndexInfo *info)
{
	const char *what = NULL;
	const char *hint = NULL;

	if (index->rd_rel->relam == BRIN_AM_OID)
	{
		what = "BRIN indexes";
		hint = "Queries on the period columns and on columns with a chunk filter skip whole chunks by their min/max (README \"Pruning\").";
	}
	else if (info->ii_ExclusionOps != NULL)
	{
		what = "exclusion constraints";
		hint = "Versions of a key never overlap: zipper_lake checks that itself.";
	}
	else if (info->ii_Unique && !index->rd_index->indimmediate)
	{
		what = "deferrable unique constraints";
		hint = "Make the constraint NOT DEFERRABLE: writes check it as they enter their rows.";
	}
	if (what != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("zipper_lake tables do not support %s", what),
				 errdetail("Index \"%s\" was to be built on table \"%s\".",
						   RelationGetRelationName(index), RelationGetRelationName(table)),
				 errhint("%s", hint)));
}

/*
 * An index rebuilt in place keeps its pg_index row, so older snapshots
 * would use it: set indcheckxmin on a new version of the row, whose xmin
 * (this transaction) is then the index's usability horizon, as a new
 * index's is.
 */
static void
keep_older_snapshots_off(Relation index)
{
	Relation	pg_index = table_open(IndexRelationId, RowExclusiveLock);
	HeapTuple	tuple = SearchSysCacheCopy1(INDEXRELID, ObjectIdGetDatum(RelationGetRelid(index)));

	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for index %u", RelationGetRelid(index));
	if (!TransactionIdIsCurrentTransactionId(HeapTupleHeaderGetXmin(tuple->t_data)))
	{
		((Form_pg_index) GETSTRUCT(tuple))->indcheckxmin = true;
		CatalogTupleUpdate(pg_index, &tuple->t_self, tuple);
		/* REINDEX reads the row again once the build returns */
		CommandCounterIncrement();
	}
	heap_freetuple(tuple);
	table_close(pg_index, RowExclusiveLock);
}

/* every row a snapshot sees, in TID order */
static void
read_visible_rows(Relation table, Snapshot snapshot, ZLRowCallback callback, void *arg)
{
	ZLTidMap   *map = zl_tid_map_begin(table, snapshot);
	int			n;
	const ZLSubGroup *sgs = zl_tid_map_subgroups(map, &n);

	for (int i = 0; i < n; i++)
		zl_read_subgroup_rows(table, &sgs[i], false, callback, arg);
	zl_tid_map_end(map);
}

typedef struct BuildState
{
	Relation	index;
	ZLIndexRows *rows;
	IndexBuildCallback callback;
	void	   *callback_state;
	double		reltuples;
	Datum		values[INDEX_MAX_KEYS];
	bool		isnull[INDEX_MAX_KEYS];
} BuildState;

static void
build_row(void *arg, const ZLSubGroup *sg, int32 position, HeapTuple tuple)
{
	BuildState *b = arg;

	CHECK_FOR_INTERRUPTS();
	b->reltuples += 1;
	if (zl_index_rows_form(b->rows, tuple, b->values, b->isnull))
		b->callback(b->index, &tuple->t_self, b->values, b->isnull, true, b->callback_state);
}

double
zl_index_build_range_scan(Relation table, Relation index, IndexInfo *info,
						  bool allow_sync, bool anyvisible, bool progress,
						  BlockNumber start_blockno, BlockNumber numblocks,
						  IndexBuildCallback callback, void *callback_state,
						  TableScanDesc scan)
{
	BuildState	b;
	Snapshot	snapshot;

	refuse_index(table, index, info);
	if (scan != NULL && scan->rs_parallel != NULL)
		elog(ERROR, "zipper_lake index builds are serial");

	memset(&b, 0, sizeof(b));
	b.index = index;
	b.callback = callback;
	b.callback_state = callback_state;
	b.rows = zl_index_rows_begin(table, info);

	/*
	 * Concurrent builds read with their transaction's snapshot, as heap's; a
	 * caller's scan (amcheck's heapallindexed) with its own if MVCC.
	 */
	if (scan != NULL && IsMVCCSnapshot(scan->rs_snapshot))
		snapshot = RegisterSnapshot(scan->rs_snapshot);
	else
		snapshot = RegisterSnapshot(info->ii_Concurrent ? GetTransactionSnapshot() :
									GetLatestSnapshot());
	zl_index_building(RelationGetRelid(index));
	PG_TRY();
	{
		read_visible_rows(table, snapshot, build_row, &b);
	}
	PG_FINALLY();
	{
		zl_index_building(InvalidOid);
	}
	PG_END_TRY();
	UnregisterSnapshot(snapshot);
	zl_index_rows_end(b.rows);
	if (scan != NULL)
		table_endscan(scan);	/* the build ends the scan it is given, as heap's */

	/*
	 * Rows masked before now are not in the index: older snapshots keep off
	 * it.  Not so for a concurrent build (older snapshots end before the
	 * index is used) nor for a caller's scan (amcheck builds no index).
	 */
	info->ii_BrokenHotChain = true;
	if (!info->ii_Concurrent && scan == NULL)
		keep_older_snapshots_off(index);
	return b.reltuples;
}

typedef struct ValidateState
{
	Relation	table;
	Relation	index;
	IndexInfo  *info;
	ZLIndexRows *rows;
	ValidateIndexState *state;
	bool		sorted_done;
	ItemPointerData sorted_tid;	/* the index's next TID, in order */
	Datum		values[INDEX_MAX_KEYS];
	bool		isnull[INDEX_MAX_KEYS];
} ValidateState;

/* the index's first TID not before tid, in sorted_tid (false: none left) */
static bool
advance_sorted(ValidateState *v, ItemPointer tid)
{
	while (!v->sorted_done && ItemPointerCompare(&v->sorted_tid, tid) < 0)
	{
		Datum		encoded;
		bool		isnull;

		if (!tuplesort_getdatum(v->state->tuplesort, true, &encoded, &isnull, NULL))
		{
			v->sorted_done = true;
			break;
		}
		Assert(!isnull);
		itemptr_decode(&v->sorted_tid, DatumGetInt64(encoded));
	}
	return !v->sorted_done;
}

static void
validate_row(void *arg, const ZLSubGroup *sg, int32 position, HeapTuple tuple)
{
	ValidateState *v = arg;

	CHECK_FOR_INTERRUPTS();
	v->state->htups += 1;
	if (advance_sorted(v, &tuple->t_self) && ItemPointerEquals(&v->sorted_tid, &tuple->t_self))
		return;
	if (!zl_index_rows_form(v->rows, tuple, v->values, v->isnull))
		return;
	(void) index_insert(v->index, v->values, v->isnull, &tuple->t_self, v->table,
						v->info->ii_Unique ? UNIQUE_CHECK_YES : UNIQUE_CHECK_NO, false, v->info);
	v->state->tups_inserted += 1;
}

void
zl_index_validate_scan(Relation table, Relation index, IndexInfo *info,
					   Snapshot snapshot, ValidateIndexState *state)
{
	ValidateState v;

	refuse_index(table, index, info);
	memset(&v, 0, sizeof(v));
	v.table = table;
	v.index = index;
	v.state = state;
	v.info = info;
	ItemPointerSet(&v.sorted_tid, 0, 0);	/* before every TID */
	v.rows = zl_index_rows_begin(table, info);
	read_visible_rows(table, snapshot, validate_row, &v);
	zl_index_rows_end(v.rows);
}
