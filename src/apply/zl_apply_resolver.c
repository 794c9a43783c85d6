/*-------------------------------------------------------------------------
 *
 * zl_apply_resolver.c
 *	  Settling what applies in background workers (and, through
 *	  src/remote, transactions that used shards) left prepared.
 *
 * A batch applied in workers (zl_apply_workers.c) is decided by the
 * commit of its coordinator's transaction X; the other workers' prepared
 * transactions, "zipper_lake:X:w", follow it.  A crash can leave them
 * prepared, holding the locks of their leaves.  Each is settled by X
 * alone: COMMIT PREPARED if X committed, ROLLBACK PREPARED if X aborted
 * or never finished, nothing while X runs.  Three ways lead here:
 *
 *  - zipper_lake.resolve(), for its caller's prepared transactions (a
 *    superuser's: all of its database);
 *  - every call in workers, first, so that what an earlier call left does
 *    not block its workers;
 *  - with shared_preload_libraries = 'zipper_lake', the resolver: a
 *    background worker that, after recovery and every minute after,
 *    settles each database in a worker connected to it (COMMIT PREPARED
 *    must run in the database of the prepared transaction), the shards
 *    of its zipper parents too (zl_remote_resolve).
 *
 * X's status stays in the commit log as long as the prepared transactions
 * do: their own transaction ids, taken just after X, hold back VACUUM's
 * freeze horizon, and the commit log is truncated only behind it.
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "apply/zl_apply.h"
#include "apply/zl_apply_internal.h"
#include "remote/zl_remote.h"

#include "access/transam.h"
#include "access/twophase.h"
#include "access/xact.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"
#include "storage/procarray.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"

PG_FUNCTION_INFO_V1(zipper_lake_resolve);
PGDLLEXPORT void zipper_lake_resolver_main(Datum main_arg);
PGDLLEXPORT void zipper_lake_resolve_database_main(Datum main_arg);

#define RESOLVER_INTERVAL 60	/* seconds between the resolver's rounds */

zl_database_round_hook_type zl_resolver_database_hook = NULL;

/* a prepared transaction to finish (zl_try_in_subtransaction) */
typedef struct PreparedToFinish
{
	const char *gid;
	bool		commit;
} PreparedToFinish;

static void
finish_prepared_now(void *arg)
{
	PreparedToFinish *p = arg;

	FinishPreparedTransaction(p->gid, p->commit);
}

/*
 * COMMIT or ROLLBACK PREPARED gid; false if another backend (its worker,
 * another resolver) is finishing it or has finished it meanwhile.
 */
static bool
finish_prepared(const char *gid, bool commit)
{
	PreparedToFinish p = {gid, commit};

	return zl_try_in_subtransaction(finish_prepared_now, &p) == NULL;
}

/*
 * Settle the prepared transactions "zipper_lake:X:w" of this database
 * whose coordinator X is over: COMMIT PREPARED if X committed, ROLLBACK
 * PREPARED if not.  Those of other roles are left to them (or a
 * superuser).  Returns how many were settled.  Must run outside a
 * transaction block, like COMMIT PREPARED.
 */
int64
zl_apply_resolve(void)
{
	int64		settled = 0;
	char	  **gids;
	uint64		n;
	MemoryContext caller = CurrentMemoryContext;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute("SELECT gid FROM pg_catalog.pg_prepared_xacts"
					" WHERE database = pg_catalog.current_database()"
					" AND gid LIKE 'zipper_lake:%'"
					" AND (owner = CURRENT_USER OR (SELECT rolsuper FROM pg_catalog.pg_roles"
					" WHERE rolname = CURRENT_USER))",
					true, 0) != SPI_OK_SELECT)
		elog(ERROR, "reading pg_prepared_xacts failed");
	n = SPI_processed;
	gids = MemoryContextAlloc(caller, sizeof(char *) * Max(n, 1));
	for (uint64 i = 0; i < n; i++)
		gids[i] = MemoryContextStrdup(caller,
									  SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1));
	SPI_finish();
	for (uint64 i = 0; i < n; i++)
	{
		uint64		xid64;
		TransactionId coordinator;

		if (sscanf(gids[i], ZL_APPLY_GID_PREFIX UINT64_FORMAT ":", &xid64) != 1)
			continue;
		coordinator = XidFromFullTransactionId(FullTransactionIdFromU64(xid64));
		if (TransactionIdIsInProgress(coordinator))
			continue;			/* its call is still running */
		if (finish_prepared(gids[i], TransactionIdDidCommit(coordinator)))
			settled++;
	}
	return settled;
}

/*
 * zipper_lake.resolve(): settle what calls in background workers left
 * prepared after a crash; outside a transaction block, like COMMIT
 * PREPARED.
 */
Datum
zipper_lake_resolve(PG_FUNCTION_ARGS)
{
	if (IsTransactionBlock())
		ereport(ERROR,
				(errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
				 errmsg("zipper_lake.resolve() cannot run inside a transaction block"),
				 errdetail("It commits or rolls back prepared transactions, which cannot be undone."),
				 errhint("Call it as a statement of its own.")));
	PG_RETURN_INT64(zl_apply_resolve() + zl_remote_resolve());
}

/* ---------- the resolver: a background worker ---------- */

/* a worker in database dbid settles its prepared transactions, as superuser */
void
zipper_lake_resolve_database_main(Datum main_arg)
{
	int64		settled;

	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnectionByOid(DatumGetObjectId(main_arg), InvalidOid, 0);
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	settled = zl_apply_resolve();
	if (OidIsValid(get_extension_oid("zipper_lake", true)))
	{
		settled += zl_remote_resolve();
		if (zl_resolver_database_hook != NULL)
			zl_resolver_database_hook();
	}
	PopActiveSnapshot();
	CommitTransactionCommand();
	if (settled > 0)
		ereport(LOG,
				(errmsg("zipper_lake resolver: settled " INT64_FORMAT " prepared transactions of applies in workers",
						settled)));
	proc_exit(0);
}

static void
start_database_resolver(Oid dbid)
{
	BackgroundWorker bgw;
	BackgroundWorkerHandle *handle;

	zl_bgworker_init(&bgw, "zipper_lake resolver", "zipper_lake_resolve_database_main",
					 BgWorkerStart_RecoveryFinished, BGW_NEVER_RESTART);
	snprintf(bgw.bgw_name, BGW_MAXLEN, "zipper_lake resolver of database %u", dbid);
	bgw.bgw_main_arg = ObjectIdGetDatum(dbid);
	if (RegisterDynamicBackgroundWorker(&bgw, &handle))
		(void) WaitForBackgroundWorkerShutdown(handle);
	else
		ereport(LOG,
				(errmsg("zipper_lake resolver: no background worker slot for database %u", dbid)));
}

/*
 * The databases to look at: every one that takes connections, since
 * what a transaction left prepared on a shard is known only from the
 * database's own log (src/remote/zl_remote_resolve.c).
 */
static Oid *
databases_to_resolve(uint64 *n)
{
	Oid		   *databases;

	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute("SELECT d.oid FROM pg_catalog.pg_database d"
					" WHERE d.datallowconn AND NOT d.datistemplate", true, 0) != SPI_OK_SELECT)
		elog(ERROR, "reading pg_prepared_xacts failed");
	*n = SPI_processed;
	databases = MemoryContextAlloc(TopMemoryContext, sizeof(Oid) * Max(*n, 1));
	for (uint64 i = 0; i < *n; i++)
	{
		bool		isnull;

		databases[i] = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i],
													  SPI_tuptable->tupdesc, 1, &isnull));
	}
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	pgstat_report_activity(STATE_IDLE, NULL);
	return databases;
}

/*
 * The resolver: every minute (and first right after recovery), a worker
 * of its own for each database.  Connected to database postgres.
 */
void
zipper_lake_resolver_main(Datum main_arg)
{
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection("postgres", NULL, 0);
	for (;;)
	{
		uint64		n;
		Oid		   *databases = databases_to_resolve(&n);

		for (uint64 i = 0; i < n; i++)
			start_database_resolver(databases[i]);
		pfree(databases);
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 RESOLVER_INTERVAL * 1000L, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}

/* _PG_init, preloaded: the resolver starts after recovery */
void
zl_apply_resolver_init(void)
{
	BackgroundWorker bgw;

	if (!process_shared_preload_libraries_in_progress)
		return;
	zl_bgworker_init(&bgw, "zipper_lake resolver", "zipper_lake_resolver_main",
					 BgWorkerStart_RecoveryFinished, RESOLVER_INTERVAL);
	RegisterBackgroundWorker(&bgw);
}
