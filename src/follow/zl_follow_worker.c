/*-------------------------------------------------------------------------
 *
 * zl_follow_worker.c
 *	  The background worker that keeps a zipper table following its
 *	  source, and what starts it.
 *
 * One worker per followed table, connected to the table's database as
 * the role that called follow() (so it can do no more than that role),
 * holding the session advisory lock (ZL_FOLLOW_LOCK_CLASS, table): a
 * second worker for the table, started by a race, finds it taken and
 * ends, and zipper_lake.followers shows the holder's pid.  Its loop:
 *
 *   1. in a transaction: read the follower's row (gone or not 'running':
 *      end); ask the source how far its WAL is flushed (upto); decode
 *      the slot's transactions up to upto, at most batch_changes
 *      messages (zl_follow_pgoutput.c), staging and applying them
 *      (zl_follow_stage.c); write the progress to the row and, through
 *      the replication origin of the session, to the commit record; commit.
 *   2. advance the source's slot to what was applied (all of upto when
 *      the batch read everything before it), so the source can recycle
 *      its WAL; a crash before this step only shows the same transactions
 *      again, which step 1 skips by their commit LSN.
 *   3. sleep batch_interval unless the batch was full.
 *
 * Errors: one of the connection, resource or lock classes (the source or
 * the network down, the slot busy) is written to the row and retried
 * after FOLLOW_RETRY_MS, for ever; any other (a column the source lacks,
 * a value the zipper column's type does not read, the key not covered
 * by the replica identity) is written to the row and stops the follower
 * (state 'stopped') until zipper_lake.resume().  Nothing is applied by a
 * failed batch, so nothing is lost: the slot still holds it.
 *
 * Starting: follow() and resume() start the worker when their
 * transaction ends (it waits for it); with shared_preload_libraries,
 * the resolver's round in each database (right after recovery, then
 * every minute; src/apply/zl_apply_resolver.c) starts the workers of
 * 'running' followers that have none, so following survives restarts of
 * either server.  The postmaster never restarts a worker itself: one
 * that died of a FATAL error (unfollow()'s pg_terminate_backend among
 * them) is started by that round if its follower is still 'running' --
 * a restart by the postmaster would come also after unfollow(), and
 * after a DROP DATABASE fail for ever to connect.
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "common/zl_guc.h"
#include "follow/zl_follow_internal.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "replication/origin.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/pg_lsn.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

PGDLLEXPORT void zipper_lake_follow_main(Datum main_arg);

#define FOLLOW_RETRY_MS			5000
/* an idle follower writes its row (how far the source's WAL is) this often */
#define FOLLOW_IDLE_RECORD_MS	1000

bool		zl_follow_preloaded = false;

/* what a worker is started with, in bgw_extra */
typedef struct FollowStart
{
	Oid			database;
	Oid			owner;
	TransactionId wait_for;		/* the transaction that started it */
} FollowStart;

/* register a worker for tbl; it waits for transaction wait_for to end */
void
zl_follow_start_worker(Oid tbl, Oid owner, TransactionId wait_for)
{
	BackgroundWorker bgw;
	FollowStart start = {MyDatabaseId, owner, wait_for};

	zl_bgworker_init(&bgw, "zipper_lake follower", "zipper_lake_follow_main",
					 BgWorkerStart_RecoveryFinished, BGW_NEVER_RESTART);
	snprintf(bgw.bgw_name, BGW_MAXLEN, "zipper_lake follower of table %u", tbl);
	bgw.bgw_main_arg = ObjectIdGetDatum(tbl);
	memcpy(bgw.bgw_extra, &start, sizeof(start));
	if (!RegisterDynamicBackgroundWorker(&bgw, NULL))
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("no background worker slot for the follower of table %u", tbl),
				 errdetail("Every one of max_worker_processes is in use."),
				 errhint("Raise max_worker_processes (one worker per followed table).")));
}

/*
 * The resolver's round in this database: start the worker of each
 * 'running' follower that has none, and drop what followed a zipper
 * table that was dropped (a worker does that itself, unless the table
 * went in the middle of a batch, which stops it).  In a transaction, as
 * superuser.
 */
void
zl_follow_start_missing(void)
{
	Oid			nsp = get_namespace_oid("zipper_lake", true);
	Oid		   *tables;
	int			n;

	if (!OidIsValid(nsp) || !OidIsValid(get_relname_relid("follower", nsp)))
		return;
	tables = zl_follow_all(&n);
	for (int i = 0; i < n; i++)
	{
		ZLFollower *f = zl_follow_load(tables[i], true);

		if (f == NULL || zl_follow_worker_pid(f->tbl) != 0)
			continue;
		if (get_rel_name(f->tbl) == NULL)
			zl_follow_drop(f, false);
		else if (strcmp(f->state, "running") == 0)
			zl_follow_start_worker(f->tbl, f->owner, InvalidTransactionId);
	}
}

/*
 * The advisory lock that says who follows tbl: a worker holds it for its
 * session, not waiting (false: another has it); unfollow() waits for it
 * and holds it to its transaction's end.
 */
bool
zl_follow_lock(Oid tbl, bool session, bool dont_wait)
{
	LOCKTAG		tag;

	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, ZL_FOLLOW_LOCK_CLASS, tbl, 2);
	return LockAcquire(&tag, ExclusiveLock, session, dont_wait) != LOCKACQUIRE_NOT_AVAIL;
}

/* values travel as text: read back here exactly as the source wrote them */
static void
fix_text_settings(void)
{
	(void) set_config_option("DateStyle", "ISO", PGC_SUSET, PGC_S_SESSION, GUC_ACTION_SET, true, 0, false);
	(void) set_config_option("IntervalStyle", "postgres", PGC_SUSET, PGC_S_SESSION, GUC_ACTION_SET, true, 0, false);
	(void) set_config_option("extra_float_digits", "3", PGC_SUSET, PGC_S_SESSION, GUC_ACTION_SET, true, 0, false);
	(void) set_config_option("bytea_output", "hex", PGC_SUSET, PGC_S_SESSION, GUC_ACTION_SET, true, 0, false);
}

/* the worker's state between batches (TopMemoryContext) */
typedef struct Follower
{
	Oid			tbl;
	ZLSource   *source;
	ZLStage    *stage;
	TimestampTz recorded_at;
	bool		origin_set;
	XLogRecPtr	advanced_to;	/* the slot, as this process last advanced it */
} Follower;

/* errors a follower retries rather than stops at */
static bool
error_passes(int sqlerrcode)
{
	switch (ERRCODE_TO_CATEGORY(sqlerrcode))
	{
		case ERRCODE_CONNECTION_EXCEPTION:	/* 08: the source or network down */
		case ERRCODE_INSUFFICIENT_RESOURCES:	/* 53 */
		case ERRCODE_OPERATOR_INTERVENTION: /* 57: the source shutting down */
		case ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE:	/* 55: the slot busy */
		case ERRCODE_TRANSACTION_ROLLBACK:	/* 40: deadlock, serialization */
			return true;
	}
	return sqlerrcode == ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION;
}

static void
set_origin(Follower *w)
{
	RepOriginId origin = replorigin_by_name(zl_follow_origin_name(w->tbl), true);

	if (origin != InvalidRepOriginId)
	{
		replorigin_session_setup(origin);
		replorigin_session_origin = origin;
		w->origin_set = true;
	}
}

/*
 * One batch (steps 1 and 2 of the header).  Returns the milliseconds to
 * sleep before the next, or -1 when the follower ends.
 */
static long
follow_batch(Follower *w)
{
	ZLFollower *f;
	ZLDecoded	d;
	XLogRecPtr	upto;
	XLogRecPtr	caught_up;
	TimestampTz now = GetCurrentTimestamp();
	MemoryContext old;
	NameData	slot;			/* f's, which the transaction's memory takes along */
	bool		full;
	long		interval_ms;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	f = zl_follow_load(w->tbl, true);
	if (f == NULL || strcmp(f->state, "running") != 0)
	{
		PopActiveSnapshot();
		CommitTransactionCommand();
		return -1;
	}
	/* held to the batch's end: a DROP TABLE waits for it, or came before it */
	LockRelationOid(w->tbl, RowExclusiveLock);
	if (!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(w->tbl)))
	{
		/* the zipper table was dropped: so is what followed it */
		if (w->origin_set)
		{
			replorigin_session_reset();
			replorigin_session_origin = InvalidRepOriginId;
		}
		w->origin_set = false;
		zl_follow_drop(f, false);
		PopActiveSnapshot();
		CommitTransactionCommand();
		return -1;
	}
	if (!w->origin_set)
		set_origin(w);
	if (w->stage != NULL && !zl_stage_same(w->stage, zl_stage_begin(w->tbl, f->missing_columns)))
	{
		zl_stage_end(w->stage); /* ALTER TABLE or set_follow() since */
		w->stage = NULL;
	}
	old = MemoryContextSwitchTo(TopMemoryContext);
	if (w->source == NULL)
		w->source = zl_source_open(f->connection, f->owner);
	if (w->stage == NULL)
		w->stage = zl_stage_begin(w->tbl, f->missing_columns);
	MemoryContextSwitchTo(old);
	/* decoding keeps up to logical_decoding_work_mem of a transaction in memory */
	(void) set_config_option("logical_decoding_work_mem", GetConfigOption("work_mem", false, false),
							 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SET, true, 0, false);
	pgstat_report_activity(STATE_RUNNING, "zipper_lake follower: decoding the slot");
	upto = zl_source_wal_end(w->source);
	zl_pgoutput_batch(w->source, f, w->stage, upto, &d);
	pgstat_report_activity(STATE_RUNNING, "zipper_lake follower: applying a batch");
	(void) zl_stage_apply(w->stage);
	/*
	 * How far the slot was read: all of upto when the batch was not full;
	 * else to the last commit read -- applied, or skipped as applied before
	 * (after a crash between a commit and the slot's advance a full batch
	 * may hold only those, and must move the slot on all the same).
	 */
	caught_up = d.messages < f->batch_changes ? upto :
		Max(d.read_end_lsn, f->caught_up_lsn);
	if (d.transactions > 0 ||
		(caught_up > f->caught_up_lsn && (d.messages >= f->batch_changes ||
										  TimestampDifferenceExceeds(w->recorded_at, now,
																	 FOLLOW_IDLE_RECORD_MS))))
	{
		zl_follow_record_progress(w->tbl, d.transactions > 0 ? d.applied_lsn : InvalidXLogRecPtr,
								  d.commit_time, caught_up, upto, d.transactions, d.changes);
		w->recorded_at = now;
		if (d.transactions > 0 && w->origin_set)
		{
			replorigin_session_origin_lsn = d.end_lsn;
			replorigin_session_origin_timestamp = d.commit_time;
		}
	}
	else
		caught_up = f->caught_up_lsn;	/* not recorded: the slot stays */
	namestrcpy(&slot, f->slot);
	full = d.messages >= f->batch_changes;
	interval_ms = (long) f->batch_interval_ms;
	PopActiveSnapshot();
	CommitTransactionCommand();
	f = NULL;
	replorigin_session_origin_lsn = InvalidXLogRecPtr;
	replorigin_session_origin_timestamp = 0;

	/*
	 * The slot is advanced to what the row says was read: also when that
	 * is no further than before, the first time in this process (a crash
	 * may have come between the row's commit and the advance).
	 */
	if (caught_up > w->advanced_to && zipper_lake_follow_advance_slot)
	{
		char	   *lsn = DatumGetCString(DirectFunctionCall1(pg_lsn_out, LSNGetDatum(caught_up)));
		const char *params[2] = {NameStr(slot), lsn};

		pgstat_report_activity(STATE_RUNNING, "zipper_lake follower: advancing the slot");
		SetCurrentStatementStartTimestamp();
		StartTransactionCommand();
		PushActiveSnapshot(GetTransactionSnapshot());
		zl_source_command(w->source, "SELECT pg_catalog.pg_replication_slot_advance($1::name, $2::pg_lsn)",
						  2, params);
		w->advanced_to = caught_up;
		PopActiveSnapshot();
		CommitTransactionCommand();
	}
	pgstat_report_activity(STATE_IDLE, NULL);
	return full ? 0 : interval_ms;
}

/*
 * An error as the followers view shows it: its message, detail and the
 * change it was staging (zl_follow_stage.c's context), if any.
 */
static char *
error_text(ErrorData *error)
{
	StringInfoData text;
	const char *change = error->context ? strstr(error->context, "change ") : NULL;

	initStringInfo(&text);
	appendStringInfoString(&text, error->message);
	if (error->detail)
		appendStringInfo(&text, " (%s)", error->detail);
	if (change != NULL)
	{
		const char *end = strchr(change, '\n');

		appendStringInfo(&text, "; %.*s", end ? (int) (end - change) : (int) strlen(change), change);
	}
	return text.data;
}

/* a batch failed: write why, and say how long to wait (-1: stop) */
static long
batch_failed(Follower *w, MemoryContext cxt)
{
	ErrorData  *error;
	bool		passes;
	long		wait = FOLLOW_RETRY_MS;

	MemoryContextSwitchTo(cxt);
	error = CopyErrorData();
	FlushErrorState();
	AbortCurrentTransaction();
	/* the staging table went with the transaction; a connection may be mid-query */
	w->stage = NULL;
	if (w->source != NULL)
		zl_source_close(w->source);
	w->source = NULL;
	passes = error_passes(error->sqlerrcode);
	ereport(WARNING,
			(errmsg("zipper_lake follower of table %u: %s", w->tbl, error->message),
			 error->detail ? errdetail_internal("%s", error->detail) : 0,
			 errhint(passes ? "It retries." : "It stops until zipper_lake.resume().")));
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	zl_follow_record_error(w->tbl, error_text(error), !passes);
	PopActiveSnapshot();
	CommitTransactionCommand();
	FreeErrorData(error);
	return passes ? wait : -1;
}

void
zipper_lake_follow_main(Datum main_arg)
{
	Follower	w = {0};
	FollowStart start;
	MemoryContext loop_cxt;

	memcpy(&start, MyBgworkerEntry->bgw_extra, sizeof(start));
	w.tbl = DatumGetObjectId(main_arg);
	pqsignal(SIGTERM, die);
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnectionByOid(start.database, start.owner, 0);
	fix_text_settings();
	loop_cxt = AllocSetContextCreate(TopMemoryContext, "zipper_lake follower", ALLOCSET_DEFAULT_SIZES);

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	if (TransactionIdIsValid(start.wait_for))
		XactLockTableWait(start.wait_for, NULL, NULL, XLTW_None);
	CommitTransactionCommand();
	if (!zl_follow_lock(w.tbl, true, true))
		proc_exit(0);			/* another worker follows it */
	pgstat_report_appname("zipper_lake follower");

	for (;;)
	{
		long		wait;

		MemoryContextReset(loop_cxt);
		MemoryContextSwitchTo(loop_cxt);
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		PG_TRY();
		{
			wait = follow_batch(&w);
		}
		PG_CATCH();
		{
			wait = batch_failed(&w, loop_cxt);
		}
		PG_END_TRY();
		if (wait < 0)
			break;
		if (wait > 0)
		{
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, wait,
							 PG_WAIT_EXTENSION);
			ResetLatch(MyLatch);
		}
		CHECK_FOR_INTERRUPTS();
	}
	if (w.source != NULL)
		zl_source_close(w.source);
	proc_exit(0);
}
