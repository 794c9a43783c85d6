/*-------------------------------------------------------------------------
 *
 * zl_remote_resolve.c
 *	  Settling what transactions left prepared on shards.
 *
 * A transaction that used shards (zl_remote_xact.c) prepares one
 * transaction on each and logs its name in zipper_lake.shard_transaction
 * in its own transaction: the log row is visible exactly when the
 * caller's transaction committed.  So a transaction of this database
 * prepared on a shard and no longer running here is settled by the log:
 * logged, COMMIT PREPARED; not logged, ROLLBACK PREPARED.
 *
 * The order matters.  The log rows are read first; the shard's prepared
 * transactions are listed after, so a logged one missing there was
 * committed (its PREPARE preceded the log row's commit) and its row can
 * go.  For each prepared one, "not running here" is checked before the
 * log is read again with the latest snapshot, so a commit that finished
 * in between is seen.  "Not running" is exact after a crash too: the
 * caller's transaction id reached disk before its shards prepared
 * (zl_remote_xact.c), so recovery counts it as over and never hands it
 * out again.
 *
 * Three ways lead here: the first use of a shard in a transaction (for
 * that shard and user mapping); zipper_lake.resolve(), for every shard
 * of a registered zipper parent and every user mapping the caller may
 * use (a superuser: all); and the resolver background worker, when
 * preloaded, in every database each minute (zl_apply_resolver.c).
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "remote/zl_remote_internal.h"

#include "access/transam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/procarray.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"

/* the logged names of a user mapping's shard transactions, as of now */
static List *
logged_gids(Oid umid)
{
	Datum		values[1] = {ObjectIdGetDatum(umid)};
	Oid			types[1] = {OIDOID};
	List	   *gids = NIL;
	MemoryContext caller = CurrentMemoryContext;

	zl_as_extension_owner(true);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute_snapshot(SPI_prepare("SELECT gid FROM zipper_lake.shard_transaction WHERE umid = $1",
										 1, types),
							 values, NULL, GetLatestSnapshot(), InvalidSnapshot,
							 true, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "reading zipper_lake.shard_transaction failed");
	for (uint64 i = 0; i < SPI_processed; i++)
		gids = lappend(gids, MemoryContextStrdup(caller, SPI_getvalue(SPI_tuptable->vals[i],
																	  SPI_tuptable->tupdesc, 1)));
	SPI_finish();
	zl_as_extension_owner(false);
	return gids;
}

static void
forget_logged(const char *gid)
{
	Datum		values[1] = {CStringGetTextDatum(gid)};
	Oid			types[1] = {TEXTOID};

	zl_as_extension_owner(true);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute_snapshot(SPI_prepare("DELETE FROM zipper_lake.shard_transaction WHERE gid = $1",
										 1, types),
							 values, NULL, GetLatestSnapshot(), InvalidSnapshot,
							 false, false, 0) != SPI_OK_DELETE)
		elog(ERROR, "updating zipper_lake.shard_transaction failed");
	SPI_finish();
	zl_as_extension_owner(false);
}

static bool
gid_in(List *gids, const char *gid)
{
	ListCell   *lc;

	foreach(lc, gids)
		if (strcmp(lfirst(lc), gid) == 0)
			return true;
	return false;
}

/* this database's transactions prepared on the shard through user mapping umid */
static List *
prepared_gids(PGconn *conn, Oid umid, const char *server_name)
{
	char	   *prefix = zl_remote_gid_prefix();
	char	   *suffix = psprintf(":%u", umid);
	const char *params[1] = {prefix};
	PGresult   *res = zl_remote_exec(conn,
									 "SELECT gid FROM pg_catalog.pg_prepared_xacts"
									 " WHERE database = pg_catalog.current_database()"
									 " AND owner = CURRENT_USER"
									 " AND pg_catalog.starts_with(gid, $1)",
									 1, params, true, 0);
	ZLRemoteRows *rows;
	List	   *gids = NIL;

	if (!zl_remote_ok(res))
		zl_remote_raise(res, conn, server_name);
	rows = zl_remote_rows(res);
	for (int r = 0; r < rows->nrows; r++)
	{
		const char *gid = rows->values[r];
		size_t		len = strlen(gid);

		if (len > strlen(suffix) && strcmp(gid + len - strlen(suffix), suffix) == 0)
			gids = lappend(gids, pstrdup(gid));
	}
	return gids;
}

/* is the transaction that named gid still running here? */
static bool
still_running(const char *gid)
{
	uint64		fxid;

	if (sscanf(gid + strlen(zl_remote_gid_prefix()), UINT64_FORMAT ":", &fxid) != 1)
		return true;			/* not ours to judge */
	return TransactionIdIsInProgress(XidFromFullTransactionId(FullTransactionIdFromU64(fxid)));
}

/*
 * Settle what this database's transactions left prepared on one shard
 * (connection conn, user mapping umid); with delete_logged, forget the log
 * rows of what is settled.  Returns how many prepared transactions were
 * finished.  Errors of the shard are raised.
 */
int64
zl_remote_settle(PGconn *conn, Oid umid, const char *server_name, bool delete_logged)
{
	List	   *logged = logged_gids(umid);
	List	   *prepared = prepared_gids(conn, umid, server_name);
	ListCell   *lc;
	int64		settled = 0;

	foreach(lc, prepared)
	{
		const char *gid = lfirst(lc);
		bool		commit;

		if (still_running(gid))
			continue;
		commit = gid_in(logged_gids(umid), gid);
		if (!zl_remote_finish_prepared(conn, gid, commit))
			continue;
		settled++;
		if (commit && delete_logged)
			forget_logged(gid);
	}
	foreach(lc, logged)
		if (delete_logged && !gid_in(prepared, lfirst(lc)))
			forget_logged(lfirst(lc));	/* committed before we looked */
	return settled;
}

/* a user mapping's shard to settle (zl_try_in_subtransaction) */
typedef struct MappingToSettle
{
	UserMapping *mapping;
	PGconn	   *conn;
	int64		settled;
} MappingToSettle;

static void
settle_mapping_now(void *arg)
{
	MappingToSettle *m = arg;

	m->conn = zl_remote_connect(m->mapping);
	m->settled = zl_remote_settle(m->conn, m->mapping->umid,
								  GetForeignServer(m->mapping->serverid)->servername, true);
}

/* settle one user mapping's shard; a shard that cannot be reached is a warning */
static int64
settle_mapping(Oid umid)
{
	MappingToSettle m = {zl_remote_mapping_by_id(umid), NULL, 0};
	ErrorData  *error;

	if (m.mapping == NULL)
		return 0;
	error = zl_try_in_subtransaction(settle_mapping_now, &m);
	if (error != NULL)
		ereport(WARNING,
				(errmsg("could not settle prepared transactions on shard server \"%s\"",
						GetForeignServer(m.mapping->serverid)->servername),
				 errdetail_internal("%s", error->message),
				 errhint("Call zipper_lake.resolve() again when the shard is up.")));
	PQfinish(m.conn);
	return m.settled;
}

/*
 * Settle what this database's transactions left prepared on the shards
 * of registered zipper parents, through every user mapping of the caller
 * (a superuser: every user mapping), and through those the log names.
 */
int64
zl_remote_resolve(void)
{
	List	   *mappings = NIL;
	ListCell   *lc;
	int64		settled = 0;
	MemoryContext caller = CurrentMemoryContext;

	if (!OidIsValid(get_relname_relid("shard_transaction", get_namespace_oid("zipper_lake", true))))
		return 0;				/* before ALTER EXTENSION UPDATE */
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute("SELECT DISTINCT um.umid FROM pg_catalog.pg_user_mappings um"
					" JOIN pg_catalog.pg_foreign_table ft ON ft.ftserver = um.srvid"
					" JOIN pg_catalog.pg_inherits i ON i.inhrelid = ft.ftrelid"
					" JOIN zipper_lake.registration r ON r.tbl = i.inhparent"
					" WHERE um.umuser IN (0, pg_catalog.to_regrole(CURRENT_USER))"
					" OR (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = CURRENT_USER)",
					true, 0) != SPI_OK_SELECT)
		elog(ERROR, "reading the user mappings of shards failed");
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;
		Oid			umid = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i],
														  SPI_tuptable->tupdesc, 1, &isnull));
		MemoryContext old = MemoryContextSwitchTo(caller);

		mappings = lappend_oid(mappings, umid);
		MemoryContextSwitchTo(old);
	}
	SPI_finish();
	foreach(lc, mappings)
		settled += settle_mapping(lfirst_oid(lc));
	return settled;
}
