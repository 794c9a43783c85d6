/*-------------------------------------------------------------------------
 *
 * zl_follow_catalog.c
 *	  The rows of zipper_lake.follower: read and written as the
 *	  extension's owner, since the table (its connection strings may hold
 *	  passwords) is nobody else's to read; users see it through the view
 *	  zipper_lake.followers, the password hidden.
 *
 * A row is written in the transaction that applies a batch (progress:
 * the commit LSN and time of the last source transaction applied, how
 * far the slot was read), so the progress and the history it stands for
 * commit together.
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "follow/zl_follow_internal.h"

#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/pg_lsn.h"
#include "utils/timestamp.h"

/* the names follow() gives what it creates for table tbl of this database */
char *
zl_follow_slot_name(Oid tbl)
{
	return psprintf("zipper_lake_follow_%u_%u", MyDatabaseId, tbl);
}

char *
zl_follow_origin_name(Oid tbl)
{
	return psprintf("zipper_lake_follow_%u", tbl);
}

static void
begin_as_owner(void)
{
	zl_as_extension_owner(true);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
}

static void
end_as_owner(void)
{
	SPI_finish();
	zl_as_extension_owner(false);
}

static char *
column_text(int c, MemoryContext cxt)
{
	char	   *v = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, c);

	return v ? MemoryContextStrdup(cxt, v) : NULL;
}

static XLogRecPtr
lsn_of(const char *text)
{
	return DatumGetLSN(DirectFunctionCall1(pg_lsn_in, CStringGetDatum(text)));
}

ZLFollower *
zl_follow_load(Oid tbl, bool missing_ok)
{
	MemoryContext caller = CurrentMemoryContext;
	Oid			types[1] = {OIDOID};
	Datum		args[1] = {ObjectIdGetDatum(tbl)};
	ZLFollower *f = NULL;

	begin_as_owner();
	if (SPI_execute_with_args("SELECT owner, source_table, connection, publication, slot,"
							  " batch_changes,"
							  " (extract(epoch FROM batch_interval) * 1000)::bigint,"
							  " missing_columns, state, applied_lsn, caught_up_lsn, source_relid"
							  " FROM zipper_lake.follower WHERE tbl = $1",
							  1, types, args, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "reading zipper_lake.follower failed");
	if (SPI_processed == 1)
	{
		f = MemoryContextAllocZero(caller, sizeof(ZLFollower));
		f->tbl = tbl;
		f->owner = atooid(column_text(1, caller));
		f->source_table = column_text(2, caller);
		f->connection = column_text(3, caller);
		f->publication = column_text(4, caller);
		f->slot = column_text(5, caller);
		f->batch_changes = atoi(column_text(6, caller));
		f->batch_interval_ms = strtoi64(column_text(7, caller), NULL, 10);
		f->missing_columns = column_text(8, caller);
		f->state = column_text(9, caller);
		f->applied_lsn = lsn_of(column_text(10, caller));
		f->caught_up_lsn = lsn_of(column_text(11, caller));
		f->source_relid = atooid(column_text(12, caller));
	}
	end_as_owner();
	if (f == NULL)
	{
		if (!missing_ok)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("table \"%s\" does not follow a source", get_rel_name(tbl) ? get_rel_name(tbl) : "?"),
					 errdetail("zipper_lake.followers has no row for it."),
					 errhint("Start following with zipper_lake.follow().")));
		return NULL;
	}
	return f;
}

/* the tables of this database that follow a source */
Oid *
zl_follow_all(int *n)
{
	MemoryContext caller = CurrentMemoryContext;
	Oid		   *tables;

	begin_as_owner();
	if (SPI_execute("SELECT tbl FROM zipper_lake.follower ORDER BY tbl",
					true, 0) != SPI_OK_SELECT)
		elog(ERROR, "reading zipper_lake.follower failed");
	*n = (int) SPI_processed;
	tables = MemoryContextAlloc(caller, sizeof(Oid) * Max(*n, 1));
	for (int i = 0; i < *n; i++)
	{
		bool		isnull;

		tables[i] = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull));
	}
	end_as_owner();
	return tables;
}

static void
execute(const char *sql, int nargs, Oid *types, Datum *args, const char *nulls, int expect)
{
	begin_as_owner();
	if (SPI_execute_with_args(sql, nargs, types, args, nulls, false, 0) != expect)
		elog(ERROR, "writing zipper_lake.follower failed");
	end_as_owner();
}

void
zl_follow_insert(const ZLFollower *f, TimestampTz image_time, XLogRecPtr source_lsn)
{
	Oid			types[13] = {OIDOID, OIDOID, TEXTOID, TEXTOID, NAMEOID, NAMEOID,
	INT4OID, INT8OID, TEXTOID, TIMESTAMPTZOID, TEXTOID, TEXTOID, OIDOID};
	Datum		args[13];
	char		nulls[14] = "             ";
	char	   *lsn = DatumGetCString(DirectFunctionCall1(pg_lsn_out, LSNGetDatum(source_lsn)));

	args[0] = ObjectIdGetDatum(f->tbl);
	args[1] = ObjectIdGetDatum(f->owner);
	args[2] = CStringGetTextDatum(f->source_table);
	if (f->connection)
		args[3] = CStringGetTextDatum(f->connection);
	else
		nulls[3] = 'n';
	args[4] = DirectFunctionCall1(namein, CStringGetDatum(f->publication));
	args[5] = DirectFunctionCall1(namein, CStringGetDatum(f->slot));
	args[6] = Int32GetDatum(f->batch_changes);
	args[7] = Int64GetDatum(f->batch_interval_ms);
	args[8] = CStringGetTextDatum(f->missing_columns);
	args[9] = TimestampTzGetDatum(image_time);
	args[10] = CStringGetTextDatum(lsn);
	args[11] = CStringGetTextDatum(f->state);
	args[12] = ObjectIdGetDatum(f->source_relid);
	execute("INSERT INTO zipper_lake.follower (tbl, owner, source_table, connection, publication,"
			" slot, batch_changes, batch_interval, missing_columns, image_time,"
			" applied_lsn, caught_up_lsn, source_lsn, checked_at, state, source_relid)"
			" VALUES ($1, $2, $3, $4, $5, $6, $7, $8::float8 * interval '1 millisecond', $9, $10,"
			" '0/0', $11::pg_lsn, $11::pg_lsn, now(), $12, $13)",
			13, types, args, nulls, SPI_OK_INSERT);
}

void
zl_follow_set_options(const ZLFollower *f)
{
	Oid			types[4] = {OIDOID, INT4OID, INT8OID, TEXTOID};
	Datum		args[4] = {ObjectIdGetDatum(f->tbl), Int32GetDatum(f->batch_changes),
	Int64GetDatum(f->batch_interval_ms), CStringGetTextDatum(f->missing_columns)};

	execute("UPDATE zipper_lake.follower SET batch_changes = $2,"
			" batch_interval = $3::float8 * interval '1 millisecond', missing_columns = $4"
			" WHERE tbl = $1", 4, types, args, NULL, SPI_OK_UPDATE);
}

void
zl_follow_set_state(Oid tbl, const char *state)
{
	Oid			types[2] = {OIDOID, TEXTOID};
	Datum		args[2] = {ObjectIdGetDatum(tbl), CStringGetTextDatum(state)};

	execute("UPDATE zipper_lake.follower SET state = $2,"
			" last_error = CASE WHEN $2 = 'running' THEN NULL ELSE last_error END"
			" WHERE tbl = $1", 2, types, args, NULL, SPI_OK_UPDATE);
}

/*
 * A batch's progress, in its transaction: applied_lsn and commit_time
 * only when it applied a transaction (InvalidXLogRecPtr: keep).
 */
void
zl_follow_record_progress(Oid tbl, XLogRecPtr applied_lsn, TimestampTz commit_time,
						  XLogRecPtr caught_up_lsn, XLogRecPtr source_lsn, int64 transactions,
						  int64 changes)
{
	Oid			types[7] = {OIDOID, TEXTOID, TIMESTAMPTZOID, TEXTOID, TEXTOID, INT8OID, INT8OID};
	Datum		args[7];
	char		nulls[8] = "       ";

	args[0] = ObjectIdGetDatum(tbl);
	if (applied_lsn != InvalidXLogRecPtr)
	{
		args[1] = DirectFunctionCall1(pg_lsn_out, LSNGetDatum(applied_lsn));
		args[1] = CStringGetTextDatum(DatumGetCString(args[1]));
		args[2] = TimestampTzGetDatum(commit_time);
	}
	else
		nulls[1] = nulls[2] = 'n';
	args[3] = CStringGetTextDatum(DatumGetCString(DirectFunctionCall1(pg_lsn_out, LSNGetDatum(caught_up_lsn))));
	args[4] = CStringGetTextDatum(DatumGetCString(DirectFunctionCall1(pg_lsn_out, LSNGetDatum(source_lsn))));
	args[5] = Int64GetDatum(transactions);
	args[6] = Int64GetDatum(changes);
	execute("UPDATE zipper_lake.follower SET"
			" applied_lsn = COALESCE($2::pg_lsn, applied_lsn),"
			" applied_commit_time = COALESCE($3, applied_commit_time),"
			" caught_up_lsn = GREATEST(caught_up_lsn, $4::pg_lsn),"
			" source_lsn = $5::pg_lsn, checked_at = now(),"
			" transactions_applied = transactions_applied + $6,"
			" changes_applied = changes_applied + $7,"
			" last_error = NULL, last_error_time = NULL"
			" WHERE tbl = $1", 7, types, args, nulls, SPI_OK_UPDATE);
}

/* an error of the worker, in a transaction of its own; stop: state 'stopped' */
void
zl_follow_record_error(Oid tbl, const char *message, bool stop)
{
	Oid			types[3] = {OIDOID, TEXTOID, BOOLOID};
	Datum		args[3] = {ObjectIdGetDatum(tbl), CStringGetTextDatum(message), BoolGetDatum(stop)};

	execute("UPDATE zipper_lake.follower SET last_error = $2, last_error_time = now(),"
			" state = CASE WHEN $3 AND state = 'running' THEN 'stopped' ELSE state END"
			" WHERE tbl = $1", 3, types, args, NULL, SPI_OK_UPDATE);
}

void
zl_follow_delete(Oid tbl)
{
	Oid			types[1] = {OIDOID};
	Datum		args[1] = {ObjectIdGetDatum(tbl)};

	execute("DELETE FROM zipper_lake.follower WHERE tbl = $1", 1, types, args, NULL, SPI_OK_DELETE);
}

/* the process of the worker following tbl (zipper_lake.followers says it), 0: none */
int
zl_follow_worker_pid(Oid tbl)
{
	Oid			types[1] = {OIDOID};
	Datum		args[1] = {ObjectIdGetDatum(tbl)};
	int			pid = 0;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute_with_args("SELECT worker_pid FROM zipper_lake.followers WHERE tbl = $1",
							  1, types, args, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "reading zipper_lake.followers failed");
	if (SPI_processed == 1)
	{
		bool		isnull;
		Datum		value = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);

		pid = isnull ? 0 : DatumGetInt32(value);
	}
	SPI_finish();
	return pid;
}
