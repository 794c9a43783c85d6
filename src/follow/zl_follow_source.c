/*-------------------------------------------------------------------------
 *
 * zl_follow_source.c
 *	  A follower's source: this database, through SPI, or another server,
 *	  through a libpq connection of the extension's own.
 *
 * The follow layer asks its source few things: a row of a query (the
 * source table's columns, its replica identity, the WAL's end), every
 * row of a query without holding them all (the initial image, the
 * messages of the slot), and commands (creating, advancing, dropping the
 * slot).  Both kinds answer in text, as the source's output functions
 * write it: a remote connection is set up with DateStyle ISO,
 * IntervalStyle postgres, extra_float_digits 3, UTC and bytea as hex
 * (src/remote/zl_remote_conn.c), and the worker sets the same for its own
 * session, so that a value reads back here exactly.  A remote query's
 * rows arrive one at a time (libpq's single-row mode), so a large image
 * or batch is never held in memory; a local one is read through an SPI
 * cursor, a thousand rows at a time.
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "follow/zl_follow_internal.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/pg_lsn.h"

struct ZLSource
{
	PGconn	   *conn;			/* NULL: this database */
	char	   *name;			/* for messages: source "host=... password=********" */
};

#define LOCAL_FETCH 1000

/*
 * Logical decoding logs each look at a slot ("starting logical decoding
 * for slot"), at LOG, which outranks every level below FATAL in the
 * server log; a follower looks every batch_interval.  Statements on this
 * database run with log_min_messages = fatal (errors are the follower's
 * to report: zl_follow_worker.c writes them to the log as warnings).
 */
static int
quiet_begin(void)
{
	int			nest = NewGUCNestLevel();

	(void) set_config_option("log_min_messages", "fatal", PGC_SUSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	return nest;
}

static void
quiet_end(int nest)
{
	AtEOXact_GUC(true, nest);
}

ZLSource *
zl_source_open(const char *connection, Oid userid)
{
	ZLSource   *source = palloc0(sizeof(ZLSource));

	if (connection == NULL)
	{
		source->name = pstrdup("this database");
		return source;
	}
	source->conn = zl_remote_connect_string(connection, userid,
											"Nothing was applied; the follower retries while the source is down (README \"Following a live source\").");
	source->name = psprintf("source \"%s\"", zl_remote_connection_shown(connection));
	/* as quiet_begin() below, where the role may (superuser, GRANT SET ON PARAMETER) */
	PQclear(PQexec(source->conn, "SET log_min_messages = fatal"));
	return source;
}

void
zl_source_close(ZLSource *source)
{
	if (source->conn != NULL)
		PQfinish(source->conn);
	source->conn = NULL;
}

/* the libpq connection of another server's source (NULL: this database) */
PGconn *
zl_source_conn(ZLSource *source)
{
	return source->conn;
}

bool
zl_source_is_local(ZLSource *source)
{
	return source->conn == NULL;
}

char *
zl_source_name(ZLSource *source)
{
	return source->name;
}

static Oid *
text_types(int nparams)
{
	Oid		   *types = palloc(sizeof(Oid) * Max(nparams, 1));

	for (int i = 0; i < nparams; i++)
		types[i] = TEXTOID;
	return types;
}

static Datum *
text_values(int nparams, const char *const *params, char **nulls)
{
	Datum	   *values = palloc(sizeof(Datum) * Max(nparams, 1));

	*nulls = palloc(Max(nparams, 1) + 1);
	for (int i = 0; i < nparams; i++)
	{
		values[i] = params[i] ? CStringGetTextDatum(params[i]) : (Datum) 0;
		(*nulls)[i] = params[i] ? ' ' : 'n';
	}
	(*nulls)[nparams] = '\0';
	return values;
}

/* a remote result that is not what was asked for: raise it */
static void
check_remote(ZLSource *source, PGresult *res)
{
	if (!zl_remote_ok(res))
		zl_remote_raise_at(res, source->conn, source->name);
}

/*
 * Every row of a query (its first ncols columns, as text; NULL for SQL
 * NULL), one call of callback each; returns how many.  A callback runs in
 * a memory context emptied after it (a batch of any size takes the memory
 * of a row): what it keeps it allocates in a context of its own.
 */
int64
zl_source_each_row(ZLSource *source, const char *sql, int nparams, const char *const *params,
				   int ncols, ZLSourceRow callback, void *arg)
{
	MemoryContext caller = CurrentMemoryContext;
	MemoryContext rowcxt = AllocSetContextCreate(caller, "zipper_lake source rows",
												 ALLOCSET_DEFAULT_SIZES);
	MemoryContext callcxt = AllocSetContextCreate(caller, "zipper_lake source row",
												  ALLOCSET_DEFAULT_SIZES);
	char	  **values = palloc0(sizeof(char *) * ncols);
	int64		rows = 0;

	if (source->conn == NULL)
	{
		char	   *nulls;
		Datum	   *args = text_values(nparams, params, &nulls);
		Portal		portal;

		int			nest = quiet_begin();

		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "SPI_connect failed");
		portal = SPI_cursor_open_with_args(NULL, sql, nparams, text_types(nparams), args, nulls,
										   false, 0);
		for (;;)
		{
			uint64		n;
			char	  **fetched;
			MemoryContext spi;

			SPI_cursor_fetch(portal, true, LOCAL_FETCH);
			n = SPI_processed;
			if (n == 0)
				break;
			/*
			 * The rows as text first: a callback may run statements of its
			 * own (SPI nests), which must not meet this fetch's tuples.
			 */
			spi = MemoryContextSwitchTo(rowcxt);	/* SPI_getvalue's results too */
			fetched = palloc(sizeof(char *) * n * ncols);
			for (uint64 r = 0; r < n; r++)
				for (int c = 0; c < ncols; c++)
					fetched[r * ncols + c] = SPI_getvalue(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, c + 1);
			MemoryContextSwitchTo(spi);
			SPI_freetuptable(SPI_tuptable);
			for (uint64 r = 0; r < n; r++)
			{
				spi = MemoryContextSwitchTo(callcxt);
				memcpy(values, fetched + r * ncols, sizeof(char *) * ncols);
				callback(arg, values);
				MemoryContextSwitchTo(spi);
				MemoryContextReset(callcxt);
				rows++;
			}
			MemoryContextReset(rowcxt);
		}
		SPI_cursor_close(portal);
		SPI_finish();
		quiet_end(nest);
		MemoryContextSwitchTo(caller);
	}
	else
	{
		PGresult   *res;

		if (!PQsendQueryParams(source->conn, sql, nparams, NULL, params, NULL, NULL, 0) ||
			!PQsetSingleRowMode(source->conn))
			zl_remote_raise_at(NULL, source->conn, source->name);
		for (;;)
		{
			while (PQisBusy(source->conn))
			{
				int			rc = WaitLatchOrSocket(MyLatch,
												   WL_LATCH_SET | WL_SOCKET_READABLE | WL_EXIT_ON_PM_DEATH,
												   PQsocket(source->conn), -1, PG_WAIT_EXTENSION);

				if (rc & WL_LATCH_SET)
					ResetLatch(MyLatch);
				CHECK_FOR_INTERRUPTS();
				if ((rc & WL_SOCKET_READABLE) && !PQconsumeInput(source->conn))
					zl_remote_raise_at(NULL, source->conn, source->name);
			}
			res = PQgetResult(source->conn);
			if (res == NULL)
				break;
			if (PQresultStatus(res) == PGRES_SINGLE_TUPLE)
			{
				MemoryContextSwitchTo(rowcxt);
				for (int c = 0; c < ncols; c++)
					values[c] = PQgetisnull(res, 0, c) ? NULL : pstrdup(PQgetvalue(res, 0, c));
				PQclear(res);
				MemoryContextSwitchTo(callcxt);
				callback(arg, values);
				MemoryContextSwitchTo(caller);
				MemoryContextReset(callcxt);
				MemoryContextReset(rowcxt);
				rows++;
				continue;
			}
			if (PQresultStatus(res) != PGRES_TUPLES_OK)
			{
				/* read what follows, so that the connection can go on */
				PGresult   *next;

				while ((next = PQgetResult(source->conn)) != NULL)
					PQclear(next);
				zl_remote_raise_at(res, source->conn, source->name);
			}
			PQclear(res);
		}
	}
	MemoryContextDelete(rowcxt);
	MemoryContextDelete(callcxt);
	return rows;
}

/* the first row of a query, kept (zl_source_row) */
typedef struct FirstRow
{
	int			ncols;
	char	  **values;
	MemoryContext cxt;
} FirstRow;

static void
keep_first_row(void *arg, char **values)
{
	FirstRow   *first = arg;

	if (first->values != NULL)
		return;
	first->values = MemoryContextAlloc(first->cxt, sizeof(char *) * first->ncols);
	for (int c = 0; c < first->ncols; c++)
		first->values[c] = values[c] ? MemoryContextStrdup(first->cxt, values[c]) : NULL;
}

/*
 * The first row of a query, its first ncols values as text (NULL: no
 * row); for queries of one row.
 */
char **
zl_source_row(ZLSource *source, const char *sql, int nparams, const char *const *params, int ncols)
{
	FirstRow	first = {ncols, NULL, CurrentMemoryContext};

	zl_source_each_row(source, sql, nparams, params, ncols, keep_first_row, &first);
	return first.values;
}

/* a statement whose result does not matter, only that it worked */
void
zl_source_command(ZLSource *source, const char *sql, int nparams, const char *const *params)
{
	if (source->conn == NULL)
	{
		char	   *nulls;
		Datum	   *args = text_values(nparams, params, &nulls);
		int			nest = quiet_begin();

		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "SPI_connect failed");
		if (SPI_execute_with_args(sql, nparams, text_types(nparams), args, nulls, false, 0) < 0)
			elog(ERROR, "statement failed on %s: %s", source->name, sql);
		SPI_finish();
		quiet_end(nest);
		return;
	}
	{
		PGresult   *res = zl_remote_exec(source->conn, sql, nparams, params, true, 0);

		check_remote(source, res);
		PQclear(res);
	}
}

/*
 * Where the source's WAL is flushed to: what logical decoding reads up to
 * (a record past it would be read on a later look, not this one).
 */
XLogRecPtr
zl_source_wal_end(ZLSource *source)
{
	char	  **row = zl_source_row(source, "SELECT pg_catalog.pg_current_wal_flush_lsn()", 0, NULL, 1);

	return DatumGetLSN(DirectFunctionCall1(pg_lsn_in, CStringGetDatum(row[0])));
}
