/*-------------------------------------------------------------------------
 *
 * zl_tableam.c
 *	  The zipper_lake table access method: TableAmRoutine wiring.
 *
 * Callbacks are grouped as in heapam_handler.c.  Scans live in zl_scan.c,
 * writes in zl_write.c, pages in zl_storage.c.  Everything a zipper table
 * cannot do yet (UPDATE, DELETE, row locks)
 * raises ERRCODE_FEATURE_NOT_SUPPORTED with a hint.
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "storage/zl_storage.h"
#include "catalog/zl_catalog.h"
#include "write/zl_write.h"
#include "lifecycle/zl_lifecycle.h"
#include "access/zl_access_internal.h"

#include "access/heapam.h"
#include "access/heaptoast.h"
#include "access/multixact.h"
#include "access/relation.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "catalog/pg_class.h"
#include "catalog/pg_inherits.h"
#include "commands/defrem.h"
#include "catalog/pg_am_d.h"
#include "catalog/pg_namespace_d.h"
#include "catalog/storage.h"
#include "commands/vacuum.h"
#include "miscadmin.h"
#include "executor/tuptable.h"
#include "fmgr.h"
#include "nodes/plannodes.h"
#include "parser/parsetree.h"
#include "pgstat.h"
#include "storage/bufmgr.h"
#include "storage/proc.h"
#include "storage/smgr.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

PG_FUNCTION_INFO_V1(zipper_lake_tableam_handler);

static void
not_supported(const char *what, const char *hint)
{
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("zipper_lake tables do not support %s", what),
			 errhint("%s", hint)));
}

#define HINT_SCAN "Zipper tables are read by sequential scans pruned by their period columns."

/* ------------------------------------------------------------------------
 * Slot related callbacks
 * ------------------------------------------------------------------------
 */

static const TupleTableSlotOps *
zl_slot_callbacks(Relation relation)
{
	return &TTSOpsBufferHeapTuple;
}

/* ------------------------------------------------------------------------
 * Index, bitmap and TID access: zl_tidfetch.c
 * ------------------------------------------------------------------------
 */

static bool
zl_tuple_fetch_row_version(Relation relation, ItemPointer tid,
						   Snapshot snapshot, TupleTableSlot *slot)
{
	return zl_fetch_row_version(relation, tid, snapshot, slot);
}

/* TIDs outside every sub-group name no row: the fetch finds none */
static bool
zl_tuple_tid_valid(TableScanDesc scan, ItemPointer tid)
{
	return ItemPointerIsValid(tid);
}

/* versions are never updated in place: a row's TID is its latest */
static void
zl_tuple_get_latest_tid(TableScanDesc sscan, ItemPointer tid)
{
}

static bool
zl_tuple_satisfies_snapshot(Relation rel, TupleTableSlot *slot, Snapshot snapshot)
{
	not_supported("row visibility checks", HINT_SCAN);
	return false;
}

/*
 * Index entries an index may drop while it inserts: those of rows no
 * snapshot sees (src/write/zl_index_hidden.c).
 */
static TransactionId
zl_index_delete_tuples(Relation rel, TM_IndexDeleteOp *delstate)
{
	return zl_index_delete_entries(rel, delstate);
}

/* ------------------------------------------------------------------------
 * Manipulations of physical tuples
 * ------------------------------------------------------------------------
 */

/*
 * The executor enters an inserted row into the indexes under the TID the
 * insert gives it, but a row gets its TID only when its sub-group is
 * written (README "Row identifiers"), and writes enter their rows then
 * (src/write/zl_index_rows.c).  An INSERT's executor leaves that to them
 * (src/hooks/zl_executor.c); COPY and tuple routing into a partition get
 * a placeholder TID, which names no row.
 */
static void
set_inserted_tid(Relation relation, TupleTableSlot *slot)
{
	List	   *indexes = NIL;

	ItemPointerSetInvalid(&slot->tts_tid);
	if (!RelationGetForm(relation)->relhasindex ||
		zl_index_entries_left_to_writes(RelationGetRelid(relation)))
		return;
	indexes = RelationGetIndexList(relation);
	if (indexes != NIL)
		zl_index_placeholder_tid(relation, &slot->tts_tid);
	list_free(indexes);
}

static void
zl_tuple_insert(Relation relation, TupleTableSlot *slot, CommandId cid,
				int options, struct BulkInsertStateData *bistate)
{
	ZLWriteState *state = zl_write_state_get(relation);
	bool		should_free;
	HeapTuple	tuple = ExecFetchSlotHeapTuple(slot, true, &should_free);
	HeapTuple	stored = tuple;

	zl_refuse_after_row_triggers(relation);

	/* values too big for a page go to the table's TOAST relation (zl_toast_version) */
	if (HeapTupleHasExternal(tuple) || tuple->t_len > TOAST_TUPLE_THRESHOLD)
		stored = heap_toast_insert_or_update(relation, tuple, NULL, options | HEAP_INSERT_NO_LOGICAL);

	zl_write_load(state, stored);

	/* the row gets its TID when its sub-group is written */
	slot->tts_tableOid = RelationGetRelid(relation);
	set_inserted_tid(relation, slot);

	if (stored != tuple)
		heap_freetuple(stored);
	if (should_free)
		heap_freetuple(tuple);
}

static void
zl_multi_insert(Relation relation, TupleTableSlot **slots, int ntuples,
				CommandId cid, int options, struct BulkInsertStateData *bistate)
{
	for (int i = 0; i < ntuples; i++)
		zl_tuple_insert(relation, slots[i], cid, options, bistate);
}

static void
zl_tuple_insert_speculative(Relation relation, TupleTableSlot *slot,
							CommandId cid, int options,
							struct BulkInsertStateData *bistate, uint32 specToken)
{
	not_supported("INSERT ... ON CONFLICT", ZL_HINT_APPLY);
}

static void
zl_tuple_complete_speculative(Relation relation, TupleTableSlot *slot,
							  uint32 specToken, bool succeeded)
{
	not_supported("INSERT ... ON CONFLICT", ZL_HINT_APPLY);
}

static TM_Result
zl_tuple_delete(Relation relation, ItemPointer tid, CommandId cid,
				Snapshot snapshot, Snapshot crosscheck, bool wait,
				TM_FailureData *tmfd, bool changingPart)
{
	zl_refuse_row_change(relation, CMD_DELETE);
	return TM_Ok;
}

static TM_Result
zl_tuple_update(Relation relation, ItemPointer otid, TupleTableSlot *slot,
				CommandId cid, Snapshot snapshot, Snapshot crosscheck,
				bool wait, TM_FailureData *tmfd,
				LockTupleMode *lockmode, bool *update_indexes)
{
	zl_refuse_row_change(relation, CMD_UPDATE);
	return TM_Ok;
}

static TM_Result
zl_tuple_lock(Relation relation, ItemPointer tid, Snapshot snapshot,
			  TupleTableSlot *slot, CommandId cid, LockTupleMode mode,
			  LockWaitPolicy wait_policy, uint8 flags, TM_FailureData *tmfd)
{
	not_supported("row locks (SELECT ... FOR UPDATE/SHARE)",
				  "Versions are immutable; read them without a locking clause.");
	return TM_Ok;
}

static void
zl_finish_bulk_insert(Relation relation, int options)
{
	zl_write_flush_relation(RelationGetRelid(relation));
}

/* ------------------------------------------------------------------------
 * DDL related callbacks
 * ------------------------------------------------------------------------
 */

/* forget the metadata of the relation's present file, if it has one */
static void
forget_current_storage(Relation rel)
{
	SMgrRelation srel = RelationGetSmgr(rel);

	zl_write_discard_relation(RelationGetRelid(rel));
	if (smgrexists(srel, MAIN_FORKNUM) && smgrnblocks(srel, MAIN_FORKNUM) > 0)
	{
		/*
		 * The record describes the rows: it goes with them.  A file that
		 * holds none keeps it: a parallel pg_restore truncates each table
		 * it created before it loads the rows, while another worker may
		 * have restored the record already.
		 */
		if (zl_meta_forget_storage(zl_storage_id(rel)))
			zl_meta_record_forget(RelationGetRelid(rel));
	}
	else

		/*
		 * A new table: rows a drop left behind under a reused OID (a session
		 * that had not loaded the library, with the event trigger of
		 * zl_ddl.c disabled) must not become its registration.
		 */
		zl_meta_forget_table(RelationGetRelid(rel));
	if (rel->rd_amcache != NULL)
	{
		pfree(rel->rd_amcache);
		rel->rd_amcache = NULL;
	}
}

/* the zipper table whose rewrite made a transient relation in this transaction */
static Oid	rewrite_pending = InvalidOid;
static LocalTransactionId rewrite_pending_lxid = InvalidLocalTransactionId;

/*
 * The table a new file's storage is created for: the relation itself, or
 * for the transient relation a table rewrite fills (zl_rewritten_table),
 * the table it rewrites, whose file it becomes.  A zipper table rewritten
 * (VACUUM FULL, ALTER TABLE forms that rewrite) has its rows written
 * placed by its registration (catalog/zl_meta_registration.c,
 * registered_as); a table of another access method becoming a zipper
 * table (ALTER TABLE ... SET ACCESS METHOD zipper_lake) has them loaded
 * unplaced, as pg_restore loads them, until register() places them (README
 * "DDL") -- unless it has a row-level AFTER trigger, which a zipper table
 * cannot have.
 */
static Oid
storage_owner(Relation rel)
{
	Oid			rewritten = zl_rewritten_table(rel);
	Relation	original;

	if (!OidIsValid(rewritten))
		return RelationGetRelid(rel);
	original = relation_open(rewritten, NoLock);	/* locked by the command */
	if (zl_is_zipper_relation(original))
	{
		rewrite_pending = rewritten;
		rewrite_pending_lxid = MyProc->lxid;
	}
	else
		zl_refuse_conversion_triggers(original);
	relation_close(original, NoLock);
	return rewritten;
}

/*
 * Is rel a zipper table that a rewrite in this transaction is copying
 * (storage_owner)?  A rewriting ALTER TABLE (a type change, a volatile
 * default) reads it with the new columns already in its relation
 * descriptor and the old ones in its slot: the scan decodes columnar rows
 * by the slot's (zl_scan.c).  VACUUM FULL reads it by unchanged columns.
 */
bool
zl_rewrite_reads_old_rows(Relation rel)
{
	return rewrite_pending == RelationGetRelid(rel) && rewrite_pending_lxid == MyProc->lxid;
}

static void
zl_relation_set_new_filenode(Relation rel, const RelFileNode *newrnode,
							 char persistence, TransactionId *freezeXid,
							 MultiXactId *minmulti)
{
	SMgrRelation srel;

	if (persistence != RELPERSISTENCE_PERMANENT)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("zipper_lake tables cannot be %s",
						persistence == RELPERSISTENCE_TEMP ? "temporary" : "unlogged"),
				 errdetail("Their metadata lives in the extension's catalog tables."),
				 errhint("Create a permanent table.")));

	/* rows carry frozen headers: nothing for VACUUM to freeze */
	*freezeXid = InvalidTransactionId;
	*minmulti = InvalidMultiXactId;
	srel = RelationCreateStorage(*newrnode, persistence, true);

	/*
	 * pg_upgrade (README "Lifecycle") restores the schema before the
	 * extension's catalog has its rows, then puts the old cluster's files,
	 * metapage and catalog alike, in place of this one: it needs no storage.
	 */
	if (IsBinaryUpgrade)
	{
		zl_storage_init(rel, srel, MAIN_FORKNUM, 0);
		return;
	}

	/* TRUNCATE (or a rewrite) replaces a file: its metadata goes with it */
	forget_current_storage(rel);
	zl_storage_init(rel, srel, MAIN_FORKNUM, zl_meta_new_storage(storage_owner(rel)));
}

static void
zl_relation_nontransactional_truncate(Relation rel)
{
	forget_current_storage(rel);
	RelationTruncate(rel, 0);
	zl_storage_init(rel, RelationGetSmgr(rel), MAIN_FORKNUM,
					zl_meta_new_storage(RelationGetRelid(rel)));
}

/*
 * TID blocks the transaction that moves a table's file may take in the
 * new one (2^24: 4.9 billion rows): the old file's counter skips them.
 */
#define MOVED_FILE_TID_BLOCKS	((int64) 1 << 24)

static void
zl_relation_copy_data(Relation rel, const RelFileNode *newrnode)
{
	SMgrRelation dstrel;

	/* the copy keeps the metapage, hence the storage id and its metadata */
	zl_write_flush_relation(RelationGetRelid(rel));
	FlushRelationBuffers(rel);
	dstrel = RelationCreateStorage(*newrnode, rel->rd_rel->relpersistence, true);
	RelationCopyStorage(RelationGetSmgr(rel), dstrel, MAIN_FORKNUM,
						rel->rd_rel->relpersistence);

	/*
	 * If the move rolls back, the old file is the table again, but the
	 * index entries of rows the transaction wrote into the new one stay
	 * (the indexes did not move with it): the old file's counter, not
	 * transactional, goes past the TIDs the new file may give, so that no
	 * TID is ever given twice (README "Row identifiers").
	 */
	(void) zl_storage_take_tid_blocks(rel, MOVED_FILE_TID_BLOCKS, zl_meta_tid_blocks_used);
	RelationDropStorage(rel);
	smgrclose(dstrel);
}

static void
zl_relation_copy_for_cluster(Relation OldTable, Relation NewTable,
							 Relation OldIndex, bool use_sort,
							 TransactionId OldestXmin,
							 TransactionId *xid_cutoff,
							 MultiXactId *multi_cutoff,
							 double *num_tuples, double *tups_vacuumed,
							 double *tups_recently_dead)
{
	ZLWriteState *state;
	Snapshot	snapshot;
	TableScanDesc scan;
	TupleTableSlot *slot;

	/*
	 * VACUUM FULL (README "DDL"): the rows the table holds now, written
	 * again into the new file as a load writes them, placed by the table's
	 * registration (storage_owner); masked rows, deleted sub-groups and
	 * free space stay behind.  Every run is written columnar, the current
	 * partition's too, as VACUUM writes it: a columnar sub-group holds its
	 * values whole, so the new file refers to no TOAST value (cluster.c
	 * swaps TOAST by content, and values toasted into the new TOAST table
	 * could not be read before the swap).  Rows pass untoasted; the old
	 * TOAST values their row sub-groups refer to are read at the flush.
	 * CLUSTER does the same: rows keep the order placement gives them (end
	 * date, file group, valid_from), which queries by time rely on, not the
	 * index's.
	 */
	if (OldIndex != NULL)
		ereport(NOTICE,
				(errmsg("CLUSTER rewrites zipper table \"%s\" as VACUUM FULL does",
						RelationGetRelationName(OldTable)),
				 errdetail("Rows keep their order by end-date partition and valid_from, not that of index \"%s\".",
						   RelationGetRelationName(OldIndex))));
	state = zl_write_state_get(NewTable);
	if (zl_write_state_history_format(state) != ZL_FORMAT_COLUMNAR)
		not_supported("VACUUM FULL of a table whose history is written in rows",
					  "Run zipper_lake.set_history_format(tbl, 'columnar') first, or plain VACUUM.");
	zl_write_set_current_columnar(state, true);
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	scan = table_beginscan(OldTable, snapshot, 0, NULL);
	slot = table_slot_create(OldTable, NULL);
	while (table_scan_getnextslot(scan, ForwardScanDirection, slot))
	{
		HeapTuple	tuple;

		CHECK_FOR_INTERRUPTS();
		/* every column, those added with a default since the row was written too */
		slot_getallattrs(slot);
		tuple = heap_form_tuple(RelationGetDescr(OldTable), slot->tts_values, slot->tts_isnull);
		zl_write_load(state, tuple);
		heap_freetuple(tuple);
		*num_tuples += 1;
	}
	ExecDropSingleTupleTableSlot(slot);
	table_endscan(scan);
	UnregisterSnapshot(snapshot);
	zl_write_flush_relation(RelationGetRelid(NewTable));
	zl_write_set_current_columnar(state, false);

	/* rows carry frozen headers (zl_relation_set_new_filenode) */
	*xid_cutoff = InvalidTransactionId;
	*multi_cutoff = InvalidMultiXactId;
	*tups_vacuumed = 0;
	*tups_recently_dead = 0;
}

/*
 * VACUUM removes nothing row by row: masked rows go when their sub-group
 * is rewritten, and the blocks of deleted sub-groups are written again by
 * later writers (zl_freespace.c).  It wipes what erase() left (zl_scrub.c),
 * gives the blocks at the end of the file that nothing refers to back to
 * the file system (unless TRUNCATE false), has a worker drop history past
 * the table's retention, compact sub-groups with many masked rows and
 * merge small neighbouring history file groups and move sub-groups off the
 * end of a file that is mostly free (zl_retention.c, zl_merge.c,
 * zl_relocate.c; VACUUM itself must not write the catalog), reports what
 * there is and keeps pg_class statistics current.
 */
static void
zl_relation_vacuum(Relation rel, struct VacuumParams *params,
				   BufferAccessStrategy bstrategy)
{
	ZLSubGroup *sgs;
	ZLFreeExtent *extents;
	int			nsgs,
				nextents;
	int64		rows = 0,
				masked = 0,
				reachable_blocks = 0,
				free_blocks = 0;
	BlockNumber nblocks;
	int64		truncated = 0;
	Snapshot	snapshot;
	int			elevel = (params->options & VACOPT_VERBOSE) ? INFO : DEBUG2;

	/* README "Lifecycle": erased bytes wiped (zl_scrub.c) */
	zl_scrub_vacuum(rel, params, bstrategy, elevel);
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	sgs = zl_meta_load_subgroups(zl_storage_id(rel), snapshot, DATEVAL_NOBEGIN, &nsgs);
	UnregisterSnapshot(snapshot);

	/* README "Lifecycle": retention, compaction and moves off the end, by a worker */
	zl_maintenance_vacuum(rel, &sgs, &nsgs, elevel);	/* then the sub-groups after it */

	/* after the worker, which may have given up the end of the file (zl_relocate.c) */
	if (params->truncate != VACOPTVALUE_DISABLED)
		truncated = zl_free_space_truncate(rel);
	if (truncated != 0)
		ereport((params->options & VACOPT_VERBOSE) ? INFO : DEBUG2,
				truncated > 0 ?
				errmsg("zipper_lake table \"%s\": truncated " INT64_FORMAT " unreferenced blocks at the end of the file",
					   RelationGetRelationName(rel), truncated) :
				errmsg("zipper_lake table \"%s\": did not truncate the end of the file: the table is in use",
					   RelationGetRelationName(rel)));

	snapshot = RegisterSnapshot(GetLatestSnapshot());
	extents = zl_meta_load_free_extents(zl_storage_id(rel), snapshot, &nextents);
	UnregisterSnapshot(snapshot);
	/* after the snapshot: every block it knows of is in the file */
	nblocks = RelationGetNumberOfBlocks(rel);
	for (int i = 0; i < nsgs; i++)
	{
		rows += sgs[i].row_count;
		masked += sgs[i].masked_rows;
		reachable_blocks += sgs[i].blocks;
	}
	for (int i = 0; i < nextents; i++)
		free_blocks += extents[i].blocks;

	/* index entries of rows no snapshot sees any more (zl_index_vacuum.c) */
	zl_index_vacuum(rel, bstrategy, rows - masked, elevel);

	ereport((params->options & VACOPT_VERBOSE) ? INFO : DEBUG2,
			(errmsg("zipper_lake table \"%s\": %d sub-groups, " INT64_FORMAT " live rows, " INT64_FORMAT " masked rows",
					RelationGetRelationName(rel), nsgs, rows - masked, masked),
			 errdetail("%u blocks: the metapage, " INT64_FORMAT " in visible sub-groups, " INT64_FORMAT " of deleted sub-groups (written again once no snapshot can see those), " INT64_FORMAT " written by transactions that aborted or are in progress (zipper_lake.reclaim() makes those of aborted ones reusable).",
					   nblocks, reachable_blocks, free_blocks,
					   (int64) nblocks - 1 - reachable_blocks - free_blocks)));

	if (zl_meta_record_exists())
	{
		int64		pieces,
					instants,
					bytes;

		zl_meta_record_size(RelationGetRelid(rel), &pieces, &instants, &bytes);
		if (pieces > 0)
			ereport((params->options & VACOPT_VERBOSE) ? INFO : DEBUG2,
					(errmsg("zipper_lake table \"%s\": change record of " INT64_FORMAT " instants in " INT64_FORMAT " bytes (" INT64_FORMAT " pieces)",
							RelationGetRelationName(rel), instants, bytes, pieces)));
	}

	vac_update_relstats(rel, nblocks, (double) (rows - masked), 0,
						RelationGetIndexList(rel) != NIL,
						InvalidTransactionId, InvalidMultiXactId,
						NULL, NULL, false);

	/*
	 * pgstat's count of rows written and hidden starts over (autovacuum
	 * would come back at every nap otherwise); dead are the masked rows
	 * left for a later VACUUM to compact (README "Lifecycle").
	 */
	pgstat_report_vacuum(RelationGetRelid(rel), rel->rd_rel->relisshared,
						 rows - masked, zl_maintenance_masked_left(sgs, nsgs));
}

/* ------------------------------------------------------------------------
 * Miscellaneous callbacks
 * ------------------------------------------------------------------------
 */

static bool
zl_relation_needs_toast_table(Relation rel)
{
	return true;
}

static Oid
zl_relation_toast_am(Relation rel)
{
	return HEAP_TABLE_AM_OID;
}

static void
zl_relation_estimate_size(Relation rel, int32 *attr_widths,
						  BlockNumber *pages, double *tuples,
						  double *allvisfrac)
{
	table_block_relation_estimate_size(rel, attr_widths, pages, tuples,
									   allvisfrac,
									   SizeofHeapTupleHeader + sizeof(ItemIdData),
									   BLCKSZ - SizeOfPageHeaderData);
	*allvisfrac = 0;
}

/* ------------------------------------------------------------------------
 * Definition of the zipper_lake table access method
 * ------------------------------------------------------------------------
 */

static const TableAmRoutine zl_table_am_routine = {
	.type = T_TableAmRoutine,

	.slot_callbacks = zl_slot_callbacks,

	.scan_begin = zl_scan_begin,
	.scan_end = zl_scan_end,
	.scan_rescan = zl_scan_rescan,
	.scan_getnextslot = zl_scan_getnextslot,

	.scan_set_tidrange = zl_scan_set_tidrange,
	.scan_getnextslot_tidrange = zl_scan_getnextslot_tidrange,

	.parallelscan_estimate = zl_parallelscan_estimate,
	.parallelscan_initialize = zl_parallelscan_initialize,
	.parallelscan_reinitialize = zl_parallelscan_reinitialize,

	.index_fetch_begin = zl_index_fetch_begin,
	.index_fetch_reset = zl_index_fetch_reset,
	.index_fetch_end = zl_index_fetch_end,
	.index_fetch_tuple = zl_index_fetch_tuple,

	.tuple_insert = zl_tuple_insert,
	.tuple_insert_speculative = zl_tuple_insert_speculative,
	.tuple_complete_speculative = zl_tuple_complete_speculative,
	.multi_insert = zl_multi_insert,
	.tuple_delete = zl_tuple_delete,
	.tuple_update = zl_tuple_update,
	.tuple_lock = zl_tuple_lock,
	.finish_bulk_insert = zl_finish_bulk_insert,

	.tuple_fetch_row_version = zl_tuple_fetch_row_version,
	.tuple_get_latest_tid = zl_tuple_get_latest_tid,
	.tuple_tid_valid = zl_tuple_tid_valid,
	.tuple_satisfies_snapshot = zl_tuple_satisfies_snapshot,
	.index_delete_tuples = zl_index_delete_tuples,

	.relation_set_new_filenode = zl_relation_set_new_filenode,
	.relation_nontransactional_truncate = zl_relation_nontransactional_truncate,
	.relation_copy_data = zl_relation_copy_data,
	.relation_copy_for_cluster = zl_relation_copy_for_cluster,
	.relation_vacuum = zl_relation_vacuum,
	.scan_analyze_next_block = zl_scan_analyze_next_block,
	.scan_analyze_next_tuple = zl_scan_analyze_next_tuple,
	.index_build_range_scan = zl_index_build_range_scan,
	.index_validate_scan = zl_index_validate_scan,

	.relation_size = table_block_relation_size,
	.relation_needs_toast_table = zl_relation_needs_toast_table,
	.relation_toast_am = zl_relation_toast_am,
	.relation_fetch_toast_slice = NULL,

	.relation_estimate_size = zl_relation_estimate_size,

	.scan_bitmap_next_block = zl_scan_bitmap_next_block,
	.scan_bitmap_next_tuple = zl_scan_bitmap_next_tuple,
	.scan_sample_next_block = zl_scan_sample_next_block,
	.scan_sample_next_tuple = zl_scan_sample_next_tuple
};

Datum
zipper_lake_tableam_handler(PG_FUNCTION_ARGS)
{
	PG_RETURN_POINTER(&zl_table_am_routine);
}

/* tell the catalog layer which relations are ours (zl_is_zipper_relation) */
void
zl_tableam_init(void)
{
	zl_set_table_am(&zl_table_am_routine);
}
