/*-------------------------------------------------------------------------
 *
 * zl_retention.c
 *	  Dropping history by end date (drop_history), and VACUUM's worker:
 *	  retention, compaction and merging.
 *
 * README "Lifecycle".  Versions live in end-date partitions (the date of
 * valid_to), so "every version that ended at or before the cut" is every
 * history partition whose valid_to range ends at or before it, plus the
 * rows of the one partition the cut falls into that ended by then.  The
 * first go in one catalog statement (zl_meta_drop_partitions: their
 * sub-group rows and masks deleted, their blocks free extents), without a
 * page of theirs being read; the rows of the boundary partition are read
 * and those that ended by the cut masked, as apply_changes retires rows.
 * The cost is the number of sub-groups, not of rows (test/bench).
 *
 * The cut is then remembered (registration.history_cut, only ever raised):
 * apply_changes refuses changes at or before it (zl_apply.c, like the late
 * horizon), a load refuses versions that ended by then (zl_write.c), and
 * the change record forgets its instants up to it at its next merge.
 * Versions crossing the cut stay, so pg_dump's rows load again.
 *
 * Retention
 * ---------
 * set_retention(tbl, keep) makes "drop_history(tbl, now() - keep)" the
 * job of VACUUM, manual or autovacuum, which calls the table access
 * method's relation_vacuum (zl_tableam.c).  That callback must not write
 * the catalog itself: lazy VACUUM runs with PROC_IN_VACUUM, whose
 * transaction id other backends leave out of their snapshots, so rows it
 * inserted or deleted would be judged by a transaction that looks
 * aborted to them (and hint-bitted so).  So VACUUM starts a dynamic
 * background worker (no shared_preload_libraries needed) that does the
 * drop in a transaction of its own, and waits for it; VACUUM VERBOSE
 * reports what went.  The worker gives up rather than wait for a lock
 * (a writer of the table, or DDL queued behind VACUUM's own lock): the next
 * VACUUM tries again.  Nor does it keep a writer waiting for long: when
 * one waits for the table, it stops moving sub-groups off the end of the
 * file after the one at hand and commits (zl_maintenance_gives_way).
 * Autovacuum visits a zipper table after enough rows were written (writes
 * count as inserts in pg_stat_user_tables).
 *
 * The same worker compacts: a sub-group more than an eighth of whose rows
 * are masked (replaced versions, late changes, a boundary partition) is
 * written again without them, as heap's VACUUM removes dead rows; writers
 * compact current sub-groups themselves only beyond half (zl_compact.c).
 * Then it merges runs of small neighbouring history file groups into one
 * (zl_merge.c), in the same transaction.  Where history is columnar and
 * zipper_lake.columnar_current is on, it also writes the current
 * partition's row sub-groups columnar ("A columnar current partition"
 * below).  Last, it moves sub-groups off the end of a mostly free file
 * (zl_relocate.c).  zipper_lake.maintenance_pause (superuser, for tests)
 * makes it wait before its commit.
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "common/zl_guc.h"
#include "storage/zl_storage.h"
#include "catalog/zl_catalog.h"
#include "write/zl_write.h"
#include "lifecycle/zl_lifecycle.h"

#include "access/relation.h"
#include "access/table.h"
#include "access/xact.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "storage/latch.h"
#include "storage/lmgr.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

PG_FUNCTION_INFO_V1(zipper_lake_drop_history);

PGDLLEXPORT void zipper_lake_maintenance_worker(Datum main_arg);

/* how long the worker waits for a lock before it gives up (see below) */
#define ZL_WORKER_LOCK_TIMEOUT	"10s"

/* ---------- dropping ---------- */

/* the rows of a boundary sub-group that ended by the cut */
typedef struct EndedRows
{
	const ZLTableOptions *opts;
	TupleDesc	desc;
	int64		cut;
	int32	   *positions;
	int			npositions;
	int			maxpositions;
} EndedRows;

static void
collect_ended(void *arg, const ZLSubGroup *sg, int32 position, HeapTuple tuple)
{
	EndedRows  *er = arg;
	bool		isnull;
	Datum		valid_to = heap_getattr(tuple, er->opts->to_attnum, er->desc, &isnull);

	if (zl_datum_to_instant(valid_to, er->opts->period_type) > er->cut)
		return;
	if (er->npositions == er->maxpositions)
	{
		er->maxpositions = Max(64, er->maxpositions * 2);
		er->positions = er->positions == NULL ?
			palloc(sizeof(int32) * er->maxpositions) :
			repalloc(er->positions, sizeof(int32) * er->maxpositions);
	}
	er->positions[er->npositions++] = position;
}

/* how far a cut reaches into a sub-group (see the header comment) */
typedef enum CutReach
{
	CUT_MISSES,					/* current, unplaced, or nothing ended by it */
	CUT_WHOLE,					/* its whole partition ended by it */
	CUT_BOUNDARY				/* some of its rows may have ended by it */
} CutReach;

static CutReach
cut_reach(const ZLTableOptions *opts, const ZLSubGroup *sg, int64 cut)
{
	int64		lo,
				hi;

	if (!sg->placed || sg->partition_end == ZL_CURRENT_PARTITION)
		return CUT_MISSES;
	zl_partition_range(opts, sg->partition_end, &lo, &hi);
	if (hi <= cut)
		return CUT_WHOLE;
	/* every row ends after it starts: one starting after the cut stays */
	return lo <= cut && sg->first_start < cut ? CUT_BOUNDARY : CUT_MISSES;
}

/*
 * Remove every version of the table that ended at or before cut (an
 * instant before the open end) and remember the cut; returns how many
 * versions went.  The caller holds the writer lock.
 */
static int64
zl_drop_history(Relation rel, const ZLTableOptions *opts, int64 cut)
{
	uint64		storage_id = zl_storage_id(rel);
	Snapshot	snapshot;
	ZLSubGroup *sgs;
	int			nsgs;
	DateADT		last_whole = DATEVAL_NOBEGIN;
	int64		removed = 0;
	int64		whole_live;		/* rows not masked of the partitions dropped whole */

	Assert(cut < opts->open_end);
	CommandCounterIncrement();
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	sgs = zl_meta_load_subgroups(storage_id, snapshot, DATEVAL_NOBEGIN, &nsgs);	/* and masks */

	/* whole partitions first: their valid_to ranges grow with partition_end */
	for (int i = 0; i < nsgs; i++)
		if (cut_reach(opts, &sgs[i], cut) == CUT_WHOLE)
		{
			last_whole = Max(last_whole, sgs[i].partition_end);
			removed += sgs[i].row_count - sgs[i].masked_rows;
		}
	whole_live = removed;
	for (int i = 0; i < nsgs; i++)
	{
		EndedRows	er = {opts, RelationGetDescr(rel), cut};

		if (sgs[i].partition_end <= last_whole ||
			cut_reach(opts, &sgs[i], cut) != CUT_BOUNDARY)
			continue;
		zl_read_subgroup_rows(rel, &sgs[i], false, collect_ended, &er);
		if (er.npositions == 0)
			continue;
		/* a mask row each (at most ZL_MAX_SUBGROUP_ROWS positions) */
		zl_meta_insert_masks(rel, 1, &sgs[i].subgroup_id, &er.positions, &er.npositions);
		pfree(er.positions);
		removed += er.npositions;
	}
	UnregisterSnapshot(snapshot);

	if (last_whole != DATEVAL_NOBEGIN)
		(void) zl_meta_drop_partitions(rel, last_whole, whole_live);
	zl_meta_raise_history_cut(RelationGetRelid(rel), cut);
	/* cached registrations (the cut) follow the commit; so does this transaction's next load */
	CacheInvalidateRelcache(rel);
	zl_write_discard_relation(RelationGetRelid(rel));
	return removed;
}

/*
 * drop_history(tbl, ended_before): README "Lifecycle".  Owner only, like
 * VACUUM and TRUNCATE.
 */
Datum
zipper_lake_drop_history(PG_FUNCTION_ARGS)
{
	Oid			relid;
	Relation	rel;
	ZLTableOptions opts;
	int64		cut;
	int64		removed;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", PG_ARGISNULL(0) ? "table" : "ended_before"),
				 errhint("Pass the zipper table and the time up to which its history goes.")));
	relid = PG_GETARG_OID(0);
	if (zl_is_partitioned_table(relid))
	{
		/* every leaf, then the parent's cut, which leaves created later take */
		removed = zl_parent_call_per_leaf(fcinfo, zipper_lake_drop_history);
		rel = table_open(relid, NoLock);
		zl_load_registration(rel, &opts, true, NULL, "Register it with zipper_lake.register().");
		zl_meta_raise_history_cut(relid, zl_timestamptz_to_instant(&opts, PG_GETARG_TIMESTAMPTZ(1)));
		table_close(rel, NoLock);
		PG_RETURN_INT64(removed);
	}
	rel = zl_open_owned_registered_table(relid, RowExclusiveLock, &opts,
										 "Register it with zipper_lake.register().");
	if (!zl_parent_calling())
		zl_refuse_leaf_of_parent(rel, "drop_history");
	cut = zl_timestamptz_to_instant(&opts, PG_GETARG_TIMESTAMPTZ(1));
	if (!zl_instant_is_finite(cut) || cut >= opts.open_end)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("ended_before must be a finite time before the open end"),
				 errdetail("Got %s for zipper table \"%s\", whose open end is %s.",
						   zl_instant_to_cstring(cut, opts.period_type),
						   RelationGetRelationName(rel),
						   zl_instant_to_cstring(opts.open_end, opts.period_type)),
				 errhint("Open versions are current, not history: pass the time up to which history goes.")));

	/* this transaction's pending rows first, then no other writer */
	zl_write_flush_relation(relid);
	(void) zl_write_lock_table(zl_storage_id(rel), false);
	removed = zl_drop_history(rel, &opts, cut);
	table_close(rel, NoLock);
	PG_RETURN_INT64(removed);
}

/* ---------- VACUUM's worker: retention, compaction, merging ---------- */

/* what VACUUM hands its worker */
typedef struct MaintenanceTask
{
	Oid			database;
	Oid			relid;
	bool		drop;			/* drop history up to cut (retention) */
	int64		cut;
	bool		compact;		/* compact sub-groups with many masked rows */
	bool		relocate;		/* move sub-groups off the end of the file (zl_relocate.c) */
	int			relocate_min_blocks;	/* VACUUM's zipper_lake.relocate_min_blocks */
	bool		columnar_current;	/* and write current row sub-groups columnar */
	bool		merge;			/* merge small neighbouring file groups */
	int			pause_ms;		/* zipper_lake.maintenance_pause: wait before the commit */
} MaintenanceTask;

/*
 * The time a retention of keep cuts at when it is now: now - keep, or
 * false where that is no usable cut: outside the range of timestamptz or
 * within a day of its start (where converting it into the table's time
 * zone could fail), or after now (keep is positive, but a period of mixed
 * signs stored by hand might reach forward).  set_retention refuses such
 * a period; VACUUM, which must never fail on a stored one, drops nothing.
 */
bool
zl_retention_cut_time(TimestampTz now, const Interval *keep, TimestampTz *cut)
{
	return zl_timestamptz_minus_interval(now, keep, cut) &&
		*cut >= MIN_TIMESTAMP + USECS_PER_DAY && *cut <= now;
}

/*
 * The cut the table's retention asks for now (an instant), or false
 * without one; a stored period that gives no usable cut is reported and
 * drops nothing.
 */
static bool
retention_cut(Relation rel, const ZLTableOptions *opts, int elevel, int64 *cut)
{
	TimestampTz cut_time;

	if (!opts->has_retention)
		return false;
	if (!zl_retention_cut_time(GetCurrentTimestamp(), &opts->retention, &cut_time))
	{
		ereport(elevel == INFO ? WARNING : LOG,
				(errmsg("zipper_lake table \"%s\": retention %s gives no time to cut at",
						RelationGetRelationName(rel),
						DatumGetCString(DirectFunctionCall1(interval_out,
															IntervalPGetDatum(&opts->retention)))),
				 errdetail("Now minus the period is outside the range of timestamps; no history is dropped."),
				 errhint("Set a shorter period with zipper_lake.set_retention().")));
		return false;
	}
	*cut = Min(zl_timestamptz_to_instant(opts, cut_time), opts->open_end - 1);
	return true;
}

/* does any history sub-group hold a live version that may have ended by cut? */
static bool
history_due(const ZLTableOptions *opts, const ZLSubGroup *sgs, int nsgs, int64 cut)
{
	for (int i = 0; i < nsgs; i++)
		if (sgs[i].row_count > sgs[i].masked_rows &&
			cut_reach(opts, &sgs[i], cut) != CUT_MISSES)
			return true;
	return false;
}

/*
 * A sub-group more than an eighth of whose rows are masked (versions
 * apply_changes replaced, late changes, drop_history's boundary) is worth
 * writing again without them: scans and probes stop stepping over them,
 * as heap's VACUUM removes dead rows.  Writers compact only beyond half
 * (zl_compact.c), which keeps a batch's cost from growing with the masks.
 *
 * A columnar current partition
 * ----------------------------
 * Where history is columnar and VACUUM's session has
 * zipper_lake.columnar_current on (the default; its chunks in lz4, which
 * apply's look-up of a few open versions decompresses about as fast as it
 * reads row pages: run_compression), the current partition
 * is a columnar base plus a row-format delta: apply and loads write open
 * versions in rows (zl_write_internal.h, run_is_columnar), and VACUUM
 * writes every current row sub-group again columnar.  Every reader of the current partition
 * reads both formats (storage/zl_subgroup_read.c, access/zl_scan.c).  So
 * that the base does not grow a sub-group per VACUUM, the rewrite takes
 * in, newest first, the columnar current sub-groups holding no more live
 * rows than it has gathered so far (the binary counter of packing,
 * write/zl_compact.c): a sub-group's rows are written again about log2
 * times before it is full.
 */
#define ZL_VACUUM_COMPACT_SHARE	8

static inline bool
in_current_partition(const ZLSubGroup *sg)
{
	return sg->placed && sg->partition_end == ZL_CURRENT_PARTITION;
}

static bool
worth_compacting(const ZLSubGroup *sg, bool columnar_current)
{
	return sg->placed &&
		(sg->masked_rows * ZL_VACUUM_COMPACT_SHARE > sg->row_count ||
		 (columnar_current && in_current_partition(sg) && sg->format == ZL_FORMAT_ROWS));
}

/*
 * Masked rows that VACUUM's worker would still compact away: pgstat's dead
 * rows after a VACUUM, none once the worker compacted, those it left when
 * it gave way or could not start (autovacuum then comes back for them).
 */
int64
zl_maintenance_masked_left(const ZLSubGroup *sgs, int nsgs)
{
	int64		rows = 0;

	for (int i = 0; i < nsgs; i++)
		if (worth_compacting(&sgs[i], false))
			rows += sgs[i].masked_rows;
	return rows;
}

/*
 * Which sub-groups to write again (chosen[i]): those worth compacting,
 * and in each window of the current partition whose row sub-groups are
 * written columnar, the small columnar ones those rows take in (see above;
 * rows of different windows never share a sub-group).
 */
static bool *
choose_compacted(const ZLSubGroup *sgs, int nsgs, bool columnar_current)
{
	bool	   *chosen = palloc0(sizeof(bool) * Max(nsgs, 1));

	for (int i = 0; i < nsgs; i++)
		chosen[i] = worth_compacting(&sgs[i], columnar_current);
	if (!columnar_current)
		return chosen;
	for (int w = 0; w < nsgs; w++)
	{
		int64		gathered = 0;
		bool		first = true;

		/* once per window: at its first chosen current sub-group */
		if (!chosen[w] || !in_current_partition(&sgs[w]))
			continue;
		for (int i = 0; i < w && first; i++)
			first = !(chosen[i] && in_current_partition(&sgs[i]) &&
					  sgs[i].window_start == sgs[w].window_start);
		if (!first)
			continue;
		for (int i = 0; i < nsgs; i++)
			if (chosen[i] && in_current_partition(&sgs[i]) &&
				sgs[i].window_start == sgs[w].window_start)
				gathered += sgs[i].row_count - sgs[i].masked_rows;
		/* the catalog gives sub-groups in creation order: newest last */
		for (int i = nsgs - 1; i >= 0; i--)
		{
			int64		live = sgs[i].row_count - sgs[i].masked_rows;

			if (chosen[i] || !in_current_partition(&sgs[i]) ||
				sgs[i].window_start != sgs[w].window_start)
				continue;
			if (live > gathered)
				break;
			chosen[i] = true;
			gathered += live;
		}
	}
	return chosen;
}

/*
 * Compact the sub-groups worth it, writing the current partition columnar
 * when asked (and history is columnar); returns how many.
 */
static int
compact_subgroups(Relation rel, bool columnar_current)
{
	Snapshot	snapshot;
	ZLSubGroup *sgs;
	int			nsgs;
	int			compacted = 0;
	ZLWriteState *state = zl_write_state_get(rel);
	bool	   *chosen;

	columnar_current &= zl_write_state_history_format(state) == ZL_FORMAT_COLUMNAR;

	CommandCounterIncrement();
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	sgs = zl_meta_load_subgroups(zl_storage_id(rel), snapshot, DATEVAL_NOBEGIN, &nsgs);
	chosen = choose_compacted(sgs, nsgs, columnar_current);
	zl_write_set_current_columnar(state, columnar_current);
	for (int i = 0; i < nsgs; i++)
		if (chosen[i])
		{
			CHECK_FOR_INTERRUPTS();
			zl_rewrite_subgroup(rel, state, &sgs[i], NULL, 0);
			compacted++;
		}
	UnregisterSnapshot(snapshot);
	zl_write_flush_relation(RelationGetRelid(rel));
	zl_write_set_current_columnar(state, false);
	return compacted;
}

static int64
masked_rows(const ZLSubGroup *sgs, int nsgs)
{
	int64		masked = 0;

	for (int i = 0; i < nsgs; i++)
		masked += sgs[i].masked_rows;
	return masked;
}

/*
 * VACUUM's part (zl_tableam.c): if the table's retention makes history due,
 * or sub-groups hold many masked rows, have a worker drop or compact
 * them, wait for it and report.  *sgs (with masks) are the sub-groups
 * VACUUM sees; after a worker ran, those it left.
 */
void
zl_maintenance_vacuum(Relation rel, ZLSubGroup **sgs_inout, int *nsgs_inout, int elevel)
{
	const ZLSubGroup *sgs = *sgs_inout;
	int			nsgs = *nsgs_inout;
	ZLTableOptions opts;
	BackgroundWorker worker = {0};
	BackgroundWorkerHandle *handle;
	MaintenanceTask task = {0};
	BgwHandleStatus status = BGWH_NOT_YET_STARTED;
	pid_t		pid;
	ZLSubGroup *after;
	int			nafter;
	Snapshot	snapshot;
	bool		zone_known;

	if (!zl_meta_load_options_any_zone(rel, &opts, false, &zone_known))
		return;
	if (!zone_known)
	{
		/* every read of the table fails on it; VACUUM must not */
		ereport(elevel == INFO ? WARNING : LOG,
				(errmsg("zipper_lake table \"%s\": unknown time zone \"%s\": no retention or compaction",
						RelationGetRelationName(rel), opts.time_zone),
				 errhint("Time zones of zipper tables are full names from pg_timezone_names.")));
		return;
	}
	task.drop = retention_cut(rel, &opts, elevel, &task.cut) && history_due(&opts, sgs, nsgs, task.cut);
	task.columnar_current = zipper_lake_columnar_current &&
		opts.history_format == ZL_FORMAT_COLUMNAR;
	for (int i = 0; i < nsgs && !task.compact; i++)
		task.compact = worth_compacting(&sgs[i], task.columnar_current);
	task.merge = zl_merge_due(sgs, nsgs);
	task.relocate_min_blocks = zipper_lake_relocate_min_blocks;
	task.relocate = zl_relocation_due(rel, sgs, nsgs, task.relocate_min_blocks);
	if (!task.drop && !task.compact && !task.merge && !task.relocate)
		return;
	task.pause_ms = zipper_lake_maintenance_pause;

	task.database = MyDatabaseId;
	task.relid = RelationGetRelid(rel);
	zl_bgworker_init(&worker, "zipper_lake maintenance", "zipper_lake_maintenance_worker",
					 BgWorkerStart_RecoveryFinished, BGW_NEVER_RESTART);
	snprintf(worker.bgw_name, BGW_MAXLEN, "zipper_lake maintenance of %s",
			 RelationGetRelationName(rel));
	memcpy(worker.bgw_extra, &task, sizeof(task));

	if (!RegisterDynamicBackgroundWorker(&worker, &handle) ||
		(status = WaitForBackgroundWorkerStartup(handle, &pid)) == BGWH_POSTMASTER_DIED ||
		status == BGWH_NOT_YET_STARTED)
	{
		ereport(elevel == INFO ? WARNING : LOG,
				(errmsg("zipper_lake table \"%s\": could not start a maintenance worker",
						RelationGetRelationName(rel)),
				 errdetail("History due to retention or compaction stays until the next VACUUM."),
				 errhint("Raise max_worker_processes, or call zipper_lake.drop_history().")));
		return;
	}
	/* (a worker quick enough may have stopped before it was seen started) */
	if (status == BGWH_STARTED && WaitForBackgroundWorkerShutdown(handle) != BGWH_STOPPED)
		return;

	snapshot = RegisterSnapshot(GetLatestSnapshot());
	after = zl_meta_load_subgroups(zl_storage_id(rel), snapshot, DATEVAL_NOBEGIN, &nafter);
	UnregisterSnapshot(snapshot);
	if (task.drop)
	{
		int64		live_before = 0,
					live_after = 0;

		for (int i = 0; i < nsgs; i++)
			live_before += sgs[i].row_count - sgs[i].masked_rows;
		for (int i = 0; i < nafter; i++)
			live_after += after[i].row_count - after[i].masked_rows;
		ereport(elevel,
				(errmsg("zipper_lake table \"%s\": retention dropped " INT64_FORMAT " versions",
						RelationGetRelationName(rel), live_before - live_after)));
	}
	if (task.compact)
		ereport(elevel,
				(errmsg("zipper_lake table \"%s\": compacted sub-groups: " INT64_FORMAT " masked rows before, " INT64_FORMAT " after",
						RelationGetRelationName(rel), masked_rows(sgs, nsgs), masked_rows(after, nafter))));
	if (task.merge)
		ereport(elevel,
				(errmsg("zipper_lake table \"%s\": merged small history file groups: %d sub-groups before, %d after",
						RelationGetRelationName(rel), nsgs, nafter)));
	if (task.relocate)
		ereport(elevel,
				(errmsg("zipper_lake table \"%s\": moved sub-groups off the end of the file: %s now",
						RelationGetRelationName(rel),
						zl_relocation_due(rel, after, nafter, task.relocate_min_blocks) ? "more to move or give up" : "done")));
	*sgs_inout = after;
	*nsgs_inout = nafter;
}

/*
 * zipper_lake.maintenance_pause: wait, with the work done and not
 * committed, so that tests can crash the server or run other sessions
 * meanwhile (wait event Extension); also once after the first of several
 * moves (zl_maintenance_gives_way).
 */
static void
pause_before_commit(int pause_ms)
{
	TimestampTz until = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), pause_ms);

	for (;;)
	{
		long		left = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), until);

		CHECK_FOR_INTERRUPTS();
		if (left <= 0)
			break;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 left, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}

static int	pause_after_first_ms;	/* zipper_lake.maintenance_pause, once */

/*
 * Does a writer wait for the table while the worker moves sub-groups off
 * the end of the file?  Then the worker stops moving (having moved one at
 * least, so a stream of writers cannot starve it) and commits what it
 * did: a batch waits for one sub-group's move, not for all of them.
 * Compaction and merging, which retire masked rows, are not cut short.
 */
bool
zl_maintenance_gives_way(Relation rel)
{
	/* tests: hold the worker after its first move, for a writer to queue */
	if (pause_after_first_ms > 0)
	{
		pause_before_commit(pause_after_first_ms);
		pause_after_first_ms = 0;
	}
	if (!zl_write_lock_has_waiters(zl_storage_id(rel)))
		return false;
	ereport(LOG,
			(errmsg("zipper_lake table \"%s\": maintenance gave way to a waiting writer",
					RelationGetRelationName(rel)),
			 errhint("The next VACUUM goes on.")));
	return true;
}

/* the worker's work, under the table's writer lock, as the table's owner */
static void
maintain(Relation rel, ZLTableOptions *opts, const MaintenanceTask *task)
{
	Oid			save_userid;
	int			save_sec_context;

	pause_after_first_ms = task->pause_ms;
	/* as VACUUM does: the owner's rights, no user code with more */
	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	SetUserIdAndSecContext(rel->rd_rel->relowner,
						   save_sec_context | SECURITY_RESTRICTED_OPERATION);
	if (task->drop && opts->has_retention && task->cut < opts->open_end)
	{
		int64		dropped = zl_drop_history(rel, opts, task->cut);

		ereport(LOG,
				(errmsg("zipper_lake retention of table \"%s\": dropped " INT64_FORMAT " versions that ended at or before %s",
						RelationGetRelationName(rel), dropped,
						zl_instant_to_cstring(task->cut, opts->period_type))));
	}
	if (task->compact)
	{
		int			compacted = compact_subgroups(rel, task->columnar_current);

		ereport(LOG,
				(errmsg("zipper_lake table \"%s\": compacted %d sub-groups",
						RelationGetRelationName(rel), compacted)));
	}
	if (task->merge)
	{
		int			subgroups = 0;
		int			merged = zl_merge_file_groups(rel, &subgroups);

		ereport(LOG,
				(errmsg("zipper_lake table \"%s\": merged %d small history file groups (%d sub-groups)",
						RelationGetRelationName(rel), merged, subgroups)));
	}
	if (task->relocate && !zl_write_lock_has_waiters(zl_storage_id(rel)))
	{
		/* the end an earlier move left, once no snapshot sees it; then more moves */
		int64		released = zl_free_space_reclaim(rel);
		int64		moved = zl_relocate_tail(rel, task->relocate_min_blocks);

		if (released > 0 || moved > 0)
			ereport(LOG,
					(errmsg("zipper_lake table \"%s\": gave up " INT64_FORMAT " free blocks at the end of the file and moved sub-groups of " INT64_FORMAT " blocks off it",
							RelationGetRelationName(rel), released, moved)));
	}
	if (task->pause_ms > 0)
		pause_before_commit(task->pause_ms);
	SetUserIdAndSecContext(save_userid, save_sec_context);
}

/*
 * The worker: connects to the table's database as the bootstrap superuser
 * (the table's owner may not log in), works as the table's owner, in a
 * read-committed, read-write transaction of its own, and never waits long
 * for a lock: it takes the table's locks conditionally and every other
 * lock under a lock_timeout, since the VACUUM waiting for it is invisible
 * to the deadlock detector.  Fast shutdown and pg_terminate_backend end it
 * like a backend (die: at the next CHECK_FOR_INTERRUPTS).
 */
void
zipper_lake_maintenance_worker(Datum main_arg)
{
	MaintenanceTask task;
	Relation	rel;
	ZLTableOptions opts;

	memcpy(&task, MyBgworkerEntry->bgw_extra, sizeof(task));
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnectionByOid(task.database, InvalidOid,
											  BGWORKER_BYPASS_ALLOWCONN);
	SetConfigOption("lock_timeout", ZL_WORKER_LOCK_TIMEOUT, PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("default_transaction_read_only", "off", PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("default_transaction_isolation", "read committed", PGC_SUSET, PGC_S_OVERRIDE);

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, "zipper_lake maintenance");

	if (!ConditionalLockRelationOid(task.relid, RowExclusiveLock))
		ereport(LOG,
				(errmsg("zipper_lake maintenance of table %u postponed: the table is locked", task.relid)));
	else if ((rel = try_relation_open(task.relid, NoLock)) != NULL)
	{
		if (!zl_is_zipper_relation(rel) || !zl_meta_load_options(rel, &opts, true))
			;					/* no longer a registered zipper table */
		else if (!zl_write_lock_table(zl_storage_id(rel), true))
			ereport(LOG,
					(errmsg("zipper_lake maintenance of table \"%s\" postponed: a writer holds it",
							RelationGetRelationName(rel))));
		else
			maintain(rel, &opts, &task);
		relation_close(rel, NoLock);
	}

	PopActiveSnapshot();
	CommitTransactionCommand();
	pgstat_report_activity(STATE_IDLE, NULL);
}
