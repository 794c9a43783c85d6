/*-------------------------------------------------------------------------
 *
 * zl_remote_xact.c
 *	  The caller's transaction on shards: one remote transaction a user
 *	  mapping, savepoints for subtransactions, two-phase commit.
 *
 * The first use of a shard in a transaction (zl_remote_shard) takes the
 * connection of the caller's user mapping of the shard's server (kept
 * across transactions while they end well) and starts a READ COMMITTED
 * transaction there.  The first write there (zl_remote_shard_for_write)
 * settles what earlier transactions left prepared there
 * (zl_remote_resolve.c) and logs the transaction's name in
 * zipper_lake.shard_transaction, in the caller's transaction.  Then:
 *
 *   pre-commit   PREPARE TRANSACTION on every shard written; a failure is
 *                an error, so the caller's transaction aborts; a shard
 *                only read is committed (a read-only caller, a standby's
 *                too, never writes the log);
 *   commit       COMMIT PREPARED on each (the log row, committed with the
 *                caller's transaction, is the decision);
 *   abort        ROLLBACK PREPARED, or the connection closed (which rolls
 *                back what was not prepared).
 *
 * What a crash or a lost shard leaves prepared is settled from the log
 * (zl_remote_resolve.c): prepared and logged, committed; prepared and not
 * logged, rolled back.  A failure after the commit is a warning: the
 * caller's transaction has committed, the shard's part is prepared and
 * will be committed.  Subtransactions map to savepoints zl_<level> on
 * each shard used in them; a shard first used in a subtransaction that
 * aborts is closed, one first written in it reads only again (its log row
 * goes with the subtransaction).
 *
 * PREPARE TRANSACTION of the caller's own transaction is refused when it
 * wrote on shards: their transactions would have no decision to follow.
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "common/zl_guc.h"
#include "remote/zl_remote_internal.h"

#include "access/relation.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/namespace.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/syscache.h"

struct ZLShard
{
	Oid			umid;			/* hash key: the user mapping */
	PGconn	   *conn;			/* NULL: not connected */
	char		server_name[NAMEDATALEN];
	bool		in_xact;		/* a remote transaction of this transaction */
	bool		prepared;
	bool		lost;			/* its connection broke in the transaction */
	bool		writes;			/* it writes: logged, and prepared at commit */
	int			write_level;	/* nest level whose write logged it */
	int			begin_level;	/* nest level whose work began it */
	int			depth;			/* nest level its savepoints reach */
	char		gid[200];
};

static HTAB *shards = NULL;

static void
forget_connection(ZLShard *shard)
{
	PQfinish(shard->conn);
	shard->conn = NULL;
	shard->in_xact = shard->prepared = shard->lost = shard->writes = false;
}

/* the connection broke with work of the transaction in it: it cannot commit */
static void
lose_connection(ZLShard *shard)
{
	PQfinish(shard->conn);
	shard->conn = NULL;
	shard->lost = true;
}

static void
refuse_lost(ZLShard *shard)
{
	ereport(ERROR,
			(errcode(ERRCODE_CONNECTION_FAILURE),
			 errmsg("connection to shard server \"%s\" was lost in this transaction", shard->server_name),
			 errdetail("What this transaction did on the shard is rolled back there."),
			 errhint("Roll back and retry when the shard is up; nothing of the transaction is committed.")));
}

/* run a command on a shard in the caller's statement, raising its error */
static void
shard_command(ZLShard *shard, const char *sql)
{
	PGresult   *res = zl_remote_exec(shard->conn, sql, 0, NULL, true, 0);

	if (!zl_remote_ok(res))
		zl_remote_raise(res, shard->conn, shard->server_name);
	PQclear(res);
}

/* log the remote transaction's name, in the caller's transaction */
static void
log_shard_transaction(ZLShard *shard)
{
	Datum		values[2] = {CStringGetTextDatum(shard->gid), ObjectIdGetDatum(shard->umid)};
	Oid			types[2] = {TEXTOID, OIDOID};

	zl_as_extension_owner(true);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute_with_args("INSERT INTO zipper_lake.shard_transaction (gid, umid) VALUES ($1, $2)",
							  2, types, values, NULL, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "logging the shard transaction failed");
	SPI_finish();
	zl_as_extension_owner(false);
}

/* the caller's transaction on the shard of a foreign table, begun */
ZLShard *
zl_remote_shard(Oid relid)
{
	ForeignTable *table = GetForeignTable(relid);
	UserMapping *mapping = GetUserMapping(GetUserId(), table->serverid);
	ZLShard    *shard;
	bool		found;
	int			level = GetCurrentTransactionNestLevel();

	if (shards == NULL)
	{
		HASHCTL		ctl = {.keysize = sizeof(Oid),.entrysize = sizeof(ZLShard),
		.hcxt = TopMemoryContext};

		shards = hash_create("zipper_lake shards", 8, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	shard = hash_search(shards, &mapping->umid, HASH_ENTER, &found);
	if (!found)
	{
		shard->conn = NULL;
		shard->in_xact = shard->prepared = shard->lost = false;
		strlcpy(shard->server_name, GetForeignServer(table->serverid)->servername, NAMEDATALEN);
	}
	if (shard->in_xact && (shard->lost || PQstatus(shard->conn) != CONNECTION_OK))
	{
		lose_connection(shard);
		refuse_lost(shard);
	}
	if (shard->conn != NULL && PQstatus(shard->conn) != CONNECTION_OK)
		forget_connection(shard);
	if (shard->conn == NULL)
		shard->conn = zl_remote_connect(mapping);
	if (!shard->in_xact)
	{
		shard_command(shard, "START TRANSACTION ISOLATION LEVEL READ COMMITTED");
		shard->in_xact = true;
		shard->writes = false;
		shard->begin_level = shard->depth = level;
	}
	while (shard->depth < level)
		shard_command(shard, psprintf("SAVEPOINT zl_%d", ++shard->depth));
	return shard;
}

/*
 * The caller's transaction on a shard, to write there: the first write
 * settles what earlier transactions left prepared there and logs this
 * transaction's name (prepared at commit, zl_remote_resolve.c).  A shard
 * only read is committed at pre-commit, unprepared and unlogged (which a
 * read-only transaction, a standby's too, can do).
 */
ZLShard *
zl_remote_shard_for_write(Oid relid)
{
	ZLShard    *shard = zl_remote_shard(relid);

	if (!shard->writes)
	{
		zl_remote_settle(shard->conn, shard->umid, shard->server_name, !IsolationUsesXactSnapshot());
		strlcpy(shard->gid, zl_remote_gid(GetTopFullTransactionId(), shard->umid),
				sizeof(shard->gid));
		log_shard_transaction(shard);
		shard->writes = true;
		shard->write_level = GetCurrentTransactionNestLevel();
	}
	return shard;
}

/* a query on a shard in the caller's transaction; its rows, or its error raised */
ZLRemoteRows *
zl_remote_query(ZLShard *shard, const char *sql, int nparams, const char *const *params)
{
	PGresult   *res = zl_remote_exec(shard->conn, sql, nparams, params, true, 0);

	if (!zl_remote_ok(res))
		zl_remote_raise(res, shard->conn, shard->server_name);
	return zl_remote_rows(res);
}

/* COPY ... FROM STDIN on a shard: begin, data (COPY text format), end */
void
zl_remote_copy_begin(ZLShard *shard, const char *sql)
{
	PGresult   *res = zl_remote_exec(shard->conn, sql, 0, NULL, true, 0);

	if (res == NULL || PQresultStatus(res) != PGRES_COPY_IN)
		zl_remote_raise(res, shard->conn, shard->server_name);
	PQclear(res);
}

void
zl_remote_copy_data(ZLShard *shard, const char *data, int len)
{
	CHECK_FOR_INTERRUPTS();
	if (PQputCopyData(shard->conn, data, len) != 1)
		zl_remote_raise(NULL, shard->conn, shard->server_name);
}

void
zl_remote_copy_end(ZLShard *shard)
{
	PGresult   *res;

	if (PQputCopyEnd(shard->conn, NULL) != 1)
		zl_remote_raise(NULL, shard->conn, shard->server_name);
	res = zl_remote_wait(shard->conn, true, 0);
	if (!zl_remote_ok(res))
		zl_remote_raise(res, shard->conn, shard->server_name);
	PQclear(res);
}

/*
 * A statement where relation relid lives, with text parameters: on its
 * shard, in the caller's transaction there (writes: one that writes),
 * when it is a shard's foreign table; else here.  Its rows as text.
 */
ZLRemoteRows *
zl_remote_query_where(Oid relid, bool writes, const char *sql, int nparams,
					  const char *const *params)
{
	MemoryContext caller = CurrentMemoryContext;
	Oid		   *types = palloc(sizeof(Oid) * Max(1, nparams));
	Datum	   *values = palloc(sizeof(Datum) * Max(1, nparams));
	char	   *nulls = palloc(Max(1, nparams));
	ZLRemoteRows *rows = palloc0(sizeof(ZLRemoteRows));
	TupleDesc	desc;
	int			nest;

	if (zl_remote_is_shard(relid))
		return zl_remote_query(writes ? zl_remote_shard_for_write(relid) : zl_remote_shard(relid),
							   sql, nparams, params);
	for (int i = 0; i < nparams; i++)
	{
		types[i] = TEXTOID;
		nulls[i] = params[i] == NULL ? 'n' : ' ';
		values[i] = params[i] == NULL ? (Datum) 0 : CStringGetTextDatum(params[i]);
	}
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute_with_args(sql, nparams, types, values, nulls, false, 0) < 0)
		elog(ERROR, "statement failed: %s", sql);
	MemoryContextSwitchTo(caller);	/* the rows outlive SPI */
	nest = zl_remote_fix_output();
	if (SPI_tuptable != NULL)
	{
		desc = SPI_tuptable->tupdesc;
		rows->nrows = (int) SPI_processed;
		rows->ncols = desc->natts;
		rows->names = palloc(sizeof(char *) * Max(1, desc->natts));
		rows->values = palloc(sizeof(char *) * Max(1, rows->nrows * desc->natts));
		for (int c = 0; c < desc->natts; c++)
			rows->names[c] = pstrdup(NameStr(TupleDescAttr(desc, c)->attname));
		for (int r = 0; r < rows->nrows; r++)
			for (int c = 0; c < desc->natts; c++)
				rows->values[r * desc->natts + c] = SPI_getvalue(SPI_tuptable->vals[r], desc, c + 1);
	}
	zl_remote_restore_output(nest);
	SPI_finish();
	return rows;
}

/*
 * A query on the shard of foreign table relid, in the caller's
 * transaction there; $1 is the shard's table (its name), params the rest.
 */
ZLRemoteRows *
zl_remote_call_rows(Oid relid, const char *sql, int nparams, const char *const *params)
{
	const char **all = palloc(sizeof(char *) * (nparams + 1));

	all[0] = zl_remote_table_name(relid);
	for (int i = 0; i < nparams; i++)
		all[i + 1] = params[i];
	return zl_remote_query(zl_remote_shard(relid), sql, nparams + 1, all);
}

/*
 * A function of the extension called on a zipper parent, called on the
 * zipper table of a shard instead: the same function, the shard's table
 * as the first argument, the other arguments as text, a relation's rows
 * staged on the shard (erase's keys).  Returns its result
 * in the function's result type (bigint or void).
 */
Datum
zl_remote_call(Oid relid, FunctionCallInfo fcinfo, bool *isnull)
{
	Oid			fn = fcinfo->flinfo->fn_oid;
	Oid			result_type;
	Oid		   *arg_types;
	int			nargs;
	StringInfoData sql;
	const char **params = palloc0(sizeof(char *) * Max(fcinfo->nargs, 1));
	char	  **stagings = palloc0(sizeof(char *) * Max(fcinfo->nargs, 1));
	ZLShard    *shard = zl_remote_shard_for_write(relid);
	ZLRemoteRows *rows;
	const char *result;
	Oid			input;
	Oid			ioparam;

	result_type = get_func_signature(fn, &arg_types, &nargs);
	initStringInfo(&sql);
	appendStringInfo(&sql, "SELECT %s.%s(%s::pg_catalog.regclass",
					 quote_identifier(get_namespace_name(get_func_namespace(fn))),
					 quote_identifier(get_func_name(fn)),
					 quote_literal_cstr(zl_remote_table_name(relid)));
	for (int i = 1; i < nargs; i++)
	{
		Oid			output;
		bool		varlena;

		if (!fcinfo->args[i].isnull && arg_types[i] == REGCLASSOID)
		{
			/* a relation (the keys to erase): its rows staged there */
			Oid			source = DatumGetObjectId(fcinfo->args[i].value);
			Relation	rel = relation_open(source, AccessShareLock);

			params[i] = stagings[i] = zl_remote_stage_create(shard, relid, source, i);
			(void) zl_remote_stage_rows(shard, stagings[i],
										zl_remote_columns(RelationGetDescr(rel), false),
										psprintf("SELECT * FROM %s",
												 quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
																			RelationGetRelationName(rel))),
										0, NULL, NULL);
			relation_close(rel, AccessShareLock);
		}
		else if (!fcinfo->args[i].isnull)
		{
			int			nest = zl_remote_fix_output();

			getTypeOutputInfo(arg_types[i], &output, &varlena);
			params[i] = OidOutputFunctionCall(output, fcinfo->args[i].value);
			zl_remote_restore_output(nest);
		}
		appendStringInfo(&sql, ", $%d::%s", i, format_type_be_qualified(arg_types[i]));
	}
	appendStringInfoString(&sql, ")::pg_catalog.text AS result");
	rows = zl_remote_query(shard, sql.data, nargs - 1, params + 1);
	for (int i = 1; i < nargs; i++)
		if (stagings[i] != NULL)
			zl_remote_stage_drop(shard, stagings[i]);
	result = rows->nrows == 1 ? zl_remote_value(rows, 0, "result") : NULL;
	*isnull = result == NULL || result_type == VOIDOID;
	if (*isnull)
		return (Datum) 0;
	getTypeInputInfo(result_type, &input, &ioparam);
	return OidInputFunctionCall(input, (char *) result, ioparam, -1);
}

/* ---------- the end of the caller's (sub)transaction ---------- */

/* the shards used in this transaction, each in turn (NULL: done) */
static ZLShard *
next_shard(HASH_SEQ_STATUS *status, bool *started)
{
	ZLShard    *shard;

	if (shards == NULL)
		return NULL;
	if (!*started)
	{
		hash_seq_init(status, shards);
		*started = true;
	}
	while ((shard = hash_seq_search(status)) != NULL)
		if (shard->in_xact)
			return shard;
	return NULL;
}

/* does a shard of this transaction write? */
static bool
shard_writes(void)
{
	HASH_SEQ_STATUS status;
	bool		started = false;
	ZLShard    *shard;

	while ((shard = next_shard(&status, &started)) != NULL)
		if (shard->writes)
		{
			hash_seq_term(&status);
			return true;
		}
	return false;
}

/*
 * Refuse to TRUNCATE a postgres_fdw table on a server this transaction
 * wrote on over the extension's own connection (with the caller's user
 * mapping): postgres_fdw truncates over a connection of its own, which
 * would wait for the locks those writes hold until the end of time.
 */
void
zl_remote_refuse_truncate_after_writes(Oid relid)
{
	ZLShard    *shard;
	UserMapping *mapping;

	if (!shard_writes() || !zl_remote_is_shard(relid))
		return;
	mapping = GetUserMapping(GetUserId(), GetForeignTable(relid)->serverid);
	shard = hash_search(shards, &mapping->umid, HASH_FIND, NULL);
	if (shard == NULL || !shard->in_xact || !shard->writes)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("cannot truncate shard \"%s\" in the transaction that applied to it", get_rel_name(relid)),
			 errdetail("postgres_fdw truncates it over a connection of its own, which would wait for ever for "
					   "what zipper_lake's calls in this transaction hold on server \"%s\".",
					   shard->server_name),
			 errhint("Commit the apply first, then truncate in the next transaction.")));
}

static void
prepare_shards(void)
{
	HASH_SEQ_STATUS status;
	bool		started = false;
	ZLShard    *shard;

	/*
	 * The log rows, and with them this transaction's id, reach disk first:
	 * after a crash the id is known to be over (not reused, nor taken for
	 * one still running), which is what settles the shards.  Flushed up to
	 * the end of this backend's last record, as a commit is: the insert
	 * position may lie past a page header no record has reached yet, which
	 * no flush can satisfy ("xlog flush request ... is not satisfied").
	 */
	if (shard_writes() && XactLastRecEnd != InvalidXLogRecPtr)
		XLogFlush(XactLastRecEnd);
	while ((shard = next_shard(&status, &started)) != NULL)
	{
		if (shard->lost)
			refuse_lost(shard);
		if (!shard->writes)
		{
			shard_command(shard, "COMMIT");	/* only read: nothing to decide */
			shard->in_xact = false;
			continue;
		}
		shard_command(shard, psprintf("PREPARE TRANSACTION %s", quote_literal_cstr(shard->gid)));
		shard->prepared = true;
	}
}

/*
 * After the caller's commit (commit) or abort: finish each shard's
 * transaction, never throwing; what cannot be finished now stays
 * prepared for the resolver.
 */
static void
finish_shards(bool commit)
{
	HASH_SEQ_STATUS status;
	bool		started = false;
	ZLShard    *shard;

	while ((shard = next_shard(&status, &started)) != NULL)
	{
		bool		finished = false;

		if (shard->prepared && !shard->lost && PQstatus(shard->conn) == CONNECTION_OK)
			finished = zl_remote_finish_prepared(shard->conn, shard->gid, commit);
		if (shard->prepared && !finished)
			ereport(WARNING,
					(errmsg("prepared transaction %s on shard server \"%s\" is not %s yet",
							shard->gid, shard->server_name, commit ? "committed" : "rolled back"),
					 errdetail("The shard could not be reached; %s.",
							   commit ? "this transaction has committed, and so will the shard's part" :
							   "nothing of this transaction is committed"),
					 errhint("zipper_lake.resolve() (or the resolver, when preloaded) finishes it once the shard is up.")));
		if (commit && finished)
			shard->in_xact = shard->prepared = false;	/* the connection stays */
		else
			forget_connection(shard);
	}
}

/*
 * zipper_lake.apply_prepared_pause, for tests of crashes between the two
 * phases: the caller waits once its shards' transactions are prepared,
 * and again after its own commit, before it commits them.
 */
static void
pause_between_phases(void)
{
	HASH_SEQ_STATUS status;
	bool		started = false;

	if (zipper_lake_apply_prepared_pause <= 0 || next_shard(&status, &started) == NULL)
		return;
	hash_seq_term(&status);
	(void) WaitLatch(NULL, WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, zipper_lake_apply_prepared_pause,
					 PG_WAIT_EXTENSION);
}

static void
shards_xact_callback(XactEvent event, void *arg)
{

	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
			prepare_shards();
			pause_between_phases();
			break;
		case XACT_EVENT_COMMIT:
			pause_between_phases();
			finish_shards(true);
			break;
		case XACT_EVENT_ABORT:
			finish_shards(false);
			break;
		case XACT_EVENT_PRE_PREPARE:
			if (shard_writes())
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot prepare a transaction that used shards of a zipper parent"),
						 errdetail("The shards' transactions are prepared and decided by this transaction's commit."),
						 errhint("Commit the transaction instead.")));
			prepare_shards();	/* only read: each is committed */
			break;
		default:
			break;
	}
}

static void
shards_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
						SubTransactionId parentSubid, void *arg)
{
	HASH_SEQ_STATUS status;
	bool		started = false;
	ZLShard    *shard;
	int			level = GetCurrentTransactionNestLevel();

	if (event != SUBXACT_EVENT_COMMIT_SUB && event != SUBXACT_EVENT_ABORT_SUB)
		return;
	while ((shard = next_shard(&status, &started)) != NULL)
	{
		if (shard->depth < level || shard->lost)
			continue;
		if (event == SUBXACT_EVENT_ABORT_SUB && shard->begin_level == level)
			forget_connection(shard);	/* begun here: its log row is gone too */
		else if (event == SUBXACT_EVENT_ABORT_SUB)
		{
			PGresult   *res = zl_remote_exec(shard->conn,
											 psprintf("ROLLBACK TO SAVEPOINT zl_%d; RELEASE SAVEPOINT zl_%d",
													  level, level), 0, NULL, false,
											 ZL_SHARD_FINISH_TIMEOUT_MS);

			/* a first write here goes, its log row too, with the savepoint */
			if (shard->writes && shard->write_level >= level)
				shard->writes = false;

			if (!zl_remote_ok(res))
				lose_connection(shard); /* the whole transaction cannot commit */
			PQclear(res);
		}
		else if (shard->begin_level < level)
			shard_command(shard, psprintf("RELEASE SAVEPOINT zl_%d", level));
		if (shard->conn != NULL)
		{
			shard->depth = level - 1;
			shard->begin_level = Min(shard->begin_level, level - 1);
			shard->write_level = Min(shard->write_level, level - 1);
		}
	}
}

void
zl_remote_init(void)
{
	RegisterXactCallback(shards_xact_callback, NULL);
	RegisterSubXactCallback(shards_subxact_callback, NULL);
}
