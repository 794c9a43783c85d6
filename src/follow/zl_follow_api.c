/*-------------------------------------------------------------------------
 *
 * zl_follow_api.c
 *	  zipper_lake.follow(), pause(), resume() and unfollow() (README
 *	  "Following a live source").
 *
 * follow() makes the first versions and the slot they continue from in
 * one step that no source transaction can cross:
 *
 *   1. it takes a SHARE lock on the source table (writers wait; readers
 *      do not), in a transaction of the source;
 *   2. creates the logical replication slot (pgoutput): every source
 *      transaction that changed the table committed before the lock, so
 *      before the slot's consistent point, and every later one commits
 *      after the lock is released, so it is in the slot's stream;
 *   3. reads the source's clock: the image time, after every change the
 *      image holds and before every change the slot streams;
 *   4. takes a snapshot of the source under the lock (for another
 *      server, a REPEATABLE READ transaction of a second connection, and
 *      the lock is released at once; for this database, the statement's
 *      own fresh snapshot, and the lock is held until follow() commits)
 *      and applies the table's rows as a snapshot at the image time
 *      (apply_snapshot with deletes: what the zipper table held and the
 *      source no longer has is closed then);
 *   5. writes the follower's row and a replication origin, and starts
 *      the worker (zl_follow_worker.c) when the transaction commits.
 *
 * A slot cannot be created in a transaction that has written, and its
 * creation cannot be undone, so follow() and unfollow() refuse to run in
 * a transaction block; if follow() fails after creating the slot, the
 * slot is dropped (at abort for this database; at once on another
 * server).  The publication is the source's owner's: PostgreSQL 15's
 * pgoutput fails on a publication created after the slot, so follow()
 * never creates one.
 *
 * Privileges: follow(), pause(), resume() and unfollow() are the zipper
 * table's owner's; following this database needs the REPLICATION
 * attribute (a slot decodes every table of the database) and SELECT on
 * the source; another server decides for itself who may create a slot
 * there, and a role that is not a superuser must give a password it asks
 * for (as dblink and postgres_fdw require).  The worker runs as the
 * caller.
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "catalog/zl_catalog.h"
#include "apply/zl_apply.h"
#include "follow/zl_follow_internal.h"

#include "access/table.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "replication/origin.h"
#include "replication/slot.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/pg_lsn.h"
#include "utils/regproc.h"
#include "utils/rel.h"
#include "utils/timestamp.h"

PG_FUNCTION_INFO_V1(zipper_lake_follow);
PG_FUNCTION_INFO_V1(zipper_lake_follow_pause);
PG_FUNCTION_INFO_V1(zipper_lake_follow_resume);
PG_FUNCTION_INFO_V1(zipper_lake_set_follow);
PG_FUNCTION_INFO_V1(zipper_lake_unfollow);
PG_FUNCTION_INFO_V1(zipper_lake_follow_connection_shown);

/*
 * What follow() created that its transaction's end settles: the slot
 * (on this database, or through conn on another server), dropped if the
 * transaction aborts; the connections, closed either way.  In
 * TopMemoryContext and libpq's memory, since the callback runs after the
 * function's memory is gone.
 */
static struct
{
	char	   *slot;			/* NULL: none yet */
	PGconn	   *conn;			/* the slot's server (NULL: this database) */
	PGconn	   *snapshot_conn;
}			pending;
static bool callback_registered = false;

static void
settle_pending(XactEvent event, void *arg)
{
	if (event != XACT_EVENT_ABORT && event != XACT_EVENT_COMMIT)
		return;
	if (event == XACT_EVENT_ABORT && pending.slot != NULL)
	{
		if (pending.conn == NULL)
		{
			if (SearchNamedReplicationSlot(pending.slot, true) != NULL)
				ReplicationSlotDrop(pending.slot, true);
		}
		else
		{
			const char *params[1] = {pending.slot};

			PQclear(PQexec(pending.conn, "ROLLBACK"));
			PQclear(PQexecParams(pending.conn, "SELECT pg_catalog.pg_drop_replication_slot($1)",
								 1, NULL, params, NULL, NULL, 0));
		}
	}
	if (pending.conn != NULL)
		PQfinish(pending.conn);
	if (pending.snapshot_conn != NULL)
		PQfinish(pending.snapshot_conn);
	if (pending.slot != NULL)
		pfree(pending.slot);
	memset(&pending, 0, sizeof(pending));
}

static void
settle_at_end(const char *slot, ZLSource *source, ZLSource *snapshot)
{
	if (!callback_registered)
		RegisterXactCallback(settle_pending, NULL);
	callback_registered = true;
	if (slot != NULL)
		pending.slot = MemoryContextStrdup(TopMemoryContext, slot);
	if (source != NULL)
		pending.conn = zl_source_conn(source);
	if (snapshot != NULL)
		pending.snapshot_conn = zl_source_conn(snapshot);
}

static void
refuse_in_transaction_block(const char *function)
{
	if (IsTransactionBlock())
		ereport(ERROR,
				(errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
				 errmsg("zipper_lake.%s() cannot run inside a transaction block", function),
				 errdetail("It creates or drops a replication slot, which cannot be undone."),
				 errhint("Call it as a statement of its own.")));
}

/* the zipper table tbl, its owner calling, registered */
static void
check_owned_table(Oid tbl, ZLTableOptions *opts)
{
	Relation	rel = zl_open_owned_registered_table(tbl, AccessShareLock, opts,
													 "Register it with zipper_lake.register() before following a source.");

	table_close(rel, AccessShareLock);
}

/* the text of argument n, NULL if SQL NULL */
static char *
text_arg(FunctionCallInfo fcinfo, int n)
{
	return PG_ARGISNULL(n) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(n));
}

static void
bad_argument(const char *argument, const char *detail, const char *hint)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid %s for following a source", argument),
			 errdetail("%s", detail),
			 errhint("%s", hint)));
}

/* the source table's column names, in order (zl_source_each_row) */
typedef struct ColumnNames
{
	List	   *names;
	MemoryContext cxt;
} ColumnNames;

static void
add_column_name(void *arg, char **values)
{
	ColumnNames *columns = arg;
	MemoryContext old = MemoryContextSwitchTo(columns->cxt);

	columns->names = lappend(columns->names, pstrdup(values[0]));
	MemoryContextSwitchTo(old);
}

/*
 * Check on the source what following needs: the table and its replica
 * identity covering the key, and the publication publishing every kind
 * of change of it without a row filter.  Returns the source's column
 * names (*natts of them); sets f->source_table and its parts.
 */
static char **
check_source(ZLSource *source, ZLFollower *f, const char *source_table, char **keys, int nkeys,
			 int *natts)
{
	const char *params[2];
	char	  **row;
	char	   *key_array;
	StringInfoData buf;
	char	  **names;
	ColumnNames columns;
	List	   *parts = stringToQualifiedNameList(source_table);

	/* the functions pin search_path: an unqualified name is public's, on either side */
	params[0] = list_length(parts) == 1 ?
		quote_qualified_identifier("public", strVal(linitial(parts))) : source_table;
	row = zl_source_row(source,
						"SELECT n.nspname, c.relname, c.relkind::text, c.oid::text FROM pg_catalog.pg_class c"
						" JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
						" WHERE c.oid = pg_catalog.to_regclass($1)", 1, params, 4);
	if (row == NULL || strcmp(row[2], "r") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("source table \"%s\" does not exist", source_table),
				 errdetail("No ordinary table of that name is on %s.", zl_source_name(source)),
				 errhint("Name a table of the source, schema-qualified where the search path does not find it.")));
	f->source_table = quote_qualified_identifier(row[0], row[1]);
	f->source_relid = atooid(row[3]);

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '{');
	for (int k = 0; k < nkeys; k++)
	{
		appendStringInfo(&buf, "%s\"", k > 0 ? "," : "");
		for (const char *c = keys[k]; *c; c++)
		{
			if (*c == '"' || *c == '\\')
				appendStringInfoChar(&buf, '\\');
			appendStringInfoChar(&buf, *c);
		}
		appendStringInfoChar(&buf, '"');
	}
	appendStringInfoChar(&buf, '}');
	key_array = buf.data;
	params[0] = f->source_table;
	params[1] = key_array;
	row = zl_source_row(source,
						"SELECT c.relreplident::text, k FROM pg_catalog.pg_class c,"
						" unnest($2::text[]) k WHERE c.oid = $1::regclass"
						" AND (c.relreplident = 'n' OR (c.relreplident <> 'f' AND k NOT IN"
						"  (SELECT a.attname FROM pg_catalog.pg_index i JOIN pg_catalog.pg_attribute a"
						"    ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)"
						"   WHERE i.indrelid = c.oid AND ((c.relreplident = 'd' AND i.indisprimary)"
						"    OR (c.relreplident = 'i' AND i.indisreplident)))))"
						" LIMIT 1", 2, params, 2);
	if (row != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("replica identity of source table %s does not cover key column \"%s\"",
						f->source_table, row[1]),
				 errdetail("A delete on the source would not say which key it deletes."),
				 errhint("On the source, make the key the primary key, or ALTER TABLE ... REPLICA IDENTITY USING INDEX (or FULL).")));

	params[0] = f->publication;
	params[1] = f->source_table;
	row = zl_source_row(source,
						"SELECT p.pubinsert AND p.pubupdate AND p.pubdelete AND p.pubtruncate,"
						" t.rowfilter IS NOT NULL"
						" FROM pg_catalog.pg_publication p JOIN pg_catalog.pg_publication_tables t"
						"  ON t.pubname = p.pubname"
						" WHERE p.pubname = $1 AND pg_catalog.quote_ident(t.schemaname) || '.' ||"
						"  pg_catalog.quote_ident(t.tablename) = $2", 2, params, 2);
	if (row == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("publication \"%s\" does not publish source table %s", f->publication,
						f->source_table),
				 errdetail("The follower reads the source table's changes through the publication, on %s.",
						   zl_source_name(source)),
				 errhint("On the source, as the table's owner: CREATE PUBLICATION %s FOR TABLE %s;",
						 quote_identifier(f->publication), f->source_table)));
	if (strcmp(row[0], "t") != 0 || strcmp(row[1], "f") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("publication \"%s\" does not publish every change of %s", f->publication,
						f->source_table),
				 errdetail("It leaves out some inserts, updates, deletes or truncates, or has a row filter."),
				 errhint("Publish insert, update, delete and truncate without a WHERE clause.")));

	params[0] = f->source_table;
	columns.names = NIL;
	columns.cxt = CurrentMemoryContext;
	zl_source_each_row(source, "SELECT attname FROM pg_catalog.pg_attribute WHERE attrelid = $1::regclass"
					   " AND attnum > 0 AND NOT attisdropped ORDER BY attnum", 1, params, 1,
					   add_column_name, &columns);
	*natts = list_length(columns.names);
	names = palloc(sizeof(char *) * Max(*natts, 1));
	for (int i = 0; i < *natts; i++)
		names[i] = list_nth(columns.names, i);
	return names;
}

/* a batch interval in milliseconds (0 or less: not one a follower takes) */
static int64
interval_ms(Interval *interval)
{
	if (interval->month != 0)
		return 0;
	return (interval->time + (int64) interval->day * USECS_PER_DAY) / 1000;
}

/* the options of a follower, checked */
static void
check_options(const ZLFollower *f)
{
	if (f->batch_changes <= 0)
		bad_argument("batch_changes", psprintf("batch_changes is %d.", f->batch_changes),
					 "Give a positive number of changes per batch.");
	if (f->batch_interval_ms <= 0)
		bad_argument("batch_interval", "batch_interval is not a positive interval of days or time.",
					 "Give a positive interval of days, hours, minutes or seconds (at least a millisecond).");
	if (f->missing_columns == NULL || (strcmp(f->missing_columns, "error") != 0 &&
									   strcmp(f->missing_columns, "null") != 0 &&
									   strcmp(f->missing_columns, "keep") != 0))
		bad_argument("missing_columns",
					 psprintf("missing_columns is %s.", f->missing_columns ? quote_literal_cstr(f->missing_columns) : "NULL"),
					 "Give 'error', 'null' or 'keep' (README \"Partial changes\").");
}

/* one row of the source table into the image (zl_source_each_row) */
typedef struct Image
{
	ZLStage    *stage;
	TimestampTz time;
	int64		rows;
} Image;

static void
image_row(void *arg, char **values)
{
	Image	   *image = arg;

	zl_stage_change(image->stage, 'I', values, NULL, NULL, image->time, 0);
	image->rows++;
}

/* SELECT every column of the source table, in its order */
static char *
image_query(const ZLFollower *f, char **names, int natts)
{
	StringInfoData sql;

	initStringInfo(&sql);
	appendStringInfoString(&sql, "SELECT ");
	for (int a = 0; a < natts; a++)
		appendStringInfo(&sql, "%s%s", a > 0 ? ", " : "", quote_identifier(names[a]));
	appendStringInfo(&sql, " FROM ONLY %s", f->source_table);
	return sql.data;
}

/* a follower's slot to drop, on its source (zl_follow_drop) */
typedef struct SlotToDrop
{
	const ZLFollower *f;
	ZLSource   *source;
} SlotToDrop;

/*
 * Drop the slot.  The session a terminated worker had on the source ends
 * a moment after the worker, holding the slot till then: wait for that
 * (5 s at most) before dropping it.
 */
static void
drop_slot(void *arg)
{
	SlotToDrop *d = arg;
	const char *params[1] = {d->f->slot};

	d->source = zl_source_open(d->f->connection, d->f->owner);
	zl_source_command(d->source,
					  psprintf("DO $zl$BEGIN FOR i IN 1 .. 100 LOOP"
							   " EXIT WHEN NOT EXISTS (SELECT FROM pg_catalog.pg_replication_slots"
							   " WHERE slot_name = %s AND active);"
							   " PERFORM pg_catalog.pg_sleep(0.05); END LOOP; END$zl$",
							   quote_literal_cstr(d->f->slot)), 0, NULL);
	zl_source_command(d->source, "SELECT pg_catalog.pg_drop_replication_slot(slot_name)"
					  " FROM pg_catalog.pg_replication_slots WHERE slot_name = $1", 1, params);
}

/*
 * Steps 1 to 4 of the header on another server: the slot, the image
 * time, the image staged.  Returns the slot's consistent point.
 */
static XLogRecPtr
take_remote_image(ZLSource *source, ZLFollower *f, char **names, int natts, Image *image)
{
	const char *params[1] = {f->slot};
	char	  **row;
	ZLSource   *snapshot;
	char	   *lock = psprintf("LOCK TABLE ONLY %s IN SHARE MODE", f->source_table);

	settle_at_end(NULL, source, NULL);
	zl_source_command(source, "BEGIN", 0, NULL);
	zl_source_command(source, lock, 0, NULL);
	row = zl_source_row(source, "SELECT lsn::text, pg_catalog.clock_timestamp()::text"
						" FROM pg_catalog.pg_create_logical_replication_slot($1::name, 'pgoutput')",
						1, params, 2);
	settle_at_end(f->slot, NULL, NULL);
	image->time = DatumGetTimestampTz(DirectFunctionCall3(timestamptz_in, CStringGetDatum(row[1]),
														  ObjectIdGetDatum(InvalidOid),
														  Int32GetDatum(-1)));
	snapshot = zl_source_open(f->connection, GetUserId());
	settle_at_end(NULL, NULL, snapshot);
	zl_source_command(snapshot, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", 0, NULL);
	(void) zl_source_row(snapshot, "SELECT 1", 0, NULL, 1);
	zl_source_command(source, "COMMIT", 0, NULL);
	zl_stage_columns(image->stage, natts, names, psprintf("source table %s", f->source_table));
	zl_source_each_row(snapshot, image_query(f, names, natts), 0, NULL, natts, image_row, image);
	zl_source_command(snapshot, "COMMIT", 0, NULL);
	return DatumGetLSN(DirectFunctionCall1(pg_lsn_in, CStringGetDatum(row[0])));
}

/*
 * Steps 1 to 4 of the header on this database: the lock, held until
 * follow() commits; the slot; the image through a snapshot taken after
 * both.  Returns the slot's consistent point.
 */
static XLogRecPtr
take_local_image(ZLSource *source, ZLFollower *f, char **names, int natts, Image *image)
{
	const char *params[1] = {f->slot};
	char	  **row;

	LockRelationOid(RangeVarGetRelid(makeRangeVarFromNameList(stringToQualifiedNameList(f->source_table)),
									 NoLock, false), ShareLock);
	row = zl_source_row(source, "SELECT lsn::text, pg_catalog.clock_timestamp()::text"
						" FROM pg_catalog.pg_create_logical_replication_slot($1::name, 'pgoutput')",
						1, params, 2);
	settle_at_end(f->slot, NULL, NULL);
	image->time = DatumGetTimestampTz(DirectFunctionCall3(timestamptz_in, CStringGetDatum(row[1]),
														  ObjectIdGetDatum(InvalidOid),
														  Int32GetDatum(-1)));
	zl_stage_columns(image->stage, natts, names, psprintf("source table %s", f->source_table));
	zl_source_each_row(source, image_query(f, names, natts), 0, NULL, natts, image_row, image);
	return DatumGetLSN(DirectFunctionCall1(pg_lsn_in, CStringGetDatum(row[0])));
}

/* what following this database asks of the caller, before anything is done */
static void
check_local_caller(const char *source_table)
{
	Oid			source;

	if (!has_rolreplication(GetUserId()))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to follow a table of this database"),
				 errdetail("Role \"%s\" lacks the REPLICATION attribute, which creating a replication slot needs.",
						   GetUserNameFromId(GetUserId(), false)),
				 errhint("A superuser can ALTER ROLE %s REPLICATION.",
						 quote_identifier(GetUserNameFromId(GetUserId(), false)))));
	if (IsolationUsesXactSnapshot())
		ereport(ERROR,
				(errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
				 errmsg("zipper_lake.follow() of a table of this database needs READ COMMITTED"),
				 errdetail("The image must be read with a snapshot taken after the source table is locked."),
				 errhint("SET default_transaction_isolation = 'read committed' for the call.")));
	source = RangeVarGetRelid(makeRangeVarFromNameList(stringToQualifiedNameList(source_table)),
							  NoLock, true);
	if (OidIsValid(source) && pg_class_aclcheck(source, GetUserId(), ACL_SELECT) != ACLCHECK_OK)
		aclcheck_error(ACLCHECK_NO_PRIV, OBJECT_TABLE, get_rel_name(source));
}

/* the zipper table's key column names */
static char **
key_names(Oid tbl, const ZLTableOptions *opts)
{
	char	  **keys = palloc(sizeof(char *) * opts->nkeys);

	for (int k = 0; k < opts->nkeys; k++)
		keys[k] = get_attname(tbl, opts->key_attnums[k], false);
	return keys;
}

/*
 * zipper_lake.follow(tbl, source_table, connection, publication,
 * batch_changes, batch_interval, missing_columns)
 *   -> (image_time, image_rows, slot)
 */
Datum
zipper_lake_follow(PG_FUNCTION_ARGS)
{
	Oid			tbl = PG_GETARG_OID(0);
	char	   *source_table = text_arg(fcinfo, 1);
	ZLFollower	f = {0};
	ZLTableOptions opts;
	ZLSource   *source;
	Image		image = {0};
	char	  **names;
	int			natts;
	XLogRecPtr	start_lsn;
	TupleDesc	desc;
	Datum		values[3];
	bool		nulls[3] = {false, false, false};
	RepOriginId origin;

	refuse_in_transaction_block("follow");
	if (PG_ARGISNULL(0) || source_table == NULL)
		bad_argument("arguments", "tbl and source_table must not be NULL.",
					 "Name the zipper table and the table it follows.");
	check_owned_table(tbl, &opts);
	if (opts.period_type == DATEOID)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("a zipper table with date periods cannot follow a source"),
				 errdetail("Table \"%s\" has date periods: the source's changes of the day follow() runs would share the image's instant, where the image, applied without seq, wins.",
						   get_rel_name(tbl)),
				 errhint("Follow with a zipper table whose periods are timestamptz or timestamp; load daily images with apply_snapshot (pg_cron: README \"Following a live source\").")));
	if (zl_follow_load(tbl, true) != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("table \"%s\" already follows a source", get_rel_name(tbl)),
				 errdetail("zipper_lake.followers has a row for it."),
				 errhint("Call zipper_lake.unfollow() first to follow another source.")));
	f.tbl = tbl;
	f.owner = GetUserId();
	f.connection = text_arg(fcinfo, 2);
	f.publication = PG_ARGISNULL(3) ? NULL : pstrdup(NameStr(*PG_GETARG_NAME(3)));
	f.batch_changes = PG_ARGISNULL(4) ? 0 : PG_GETARG_INT32(4);
	f.missing_columns = text_arg(fcinfo, 6);
	f.state = "running";
	f.slot = zl_follow_slot_name(tbl);
	if (f.publication == NULL)
		bad_argument("publication", "publication is NULL.",
					 "On the source, as the table's owner: CREATE PUBLICATION name FOR TABLE the_table; then name it here.");
	if (PG_ARGISNULL(5))
		bad_argument("batch_interval", "batch_interval is NULL.", "Give a positive interval.");
	f.batch_interval_ms = interval_ms(PG_GETARG_INTERVAL_P(5));
	check_options(&f);
	if (!zl_follow_preloaded)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("following a source needs zipper_lake in shared_preload_libraries"),
				 errdetail("The follower must start again by itself after a restart of this server."),
				 errhint("Add zipper_lake to shared_preload_libraries and restart the server (README \"Following a live source\").")));
	if (f.connection == NULL)
		check_local_caller(list_length(stringToQualifiedNameList(source_table)) == 1 ?
						   psprintf("public.%s", source_table) : source_table);

	source = zl_source_open(f.connection, GetUserId());
	names = check_source(source, &f, source_table, key_names(tbl, &opts), opts.nkeys, &natts);
	if (f.connection == NULL &&
		RangeVarGetRelid(makeRangeVarFromNameList(stringToQualifiedNameList(f.source_table)), NoLock, false) == tbl)
		bad_argument("source_table", "The source table is the zipper table itself.",
					 "Name the table whose history the zipper table keeps.");
	image.stage = zl_stage_begin(tbl, f.missing_columns);
	if (f.connection == NULL)
		start_lsn = take_local_image(source, &f, names, natts, &image);
	else
		start_lsn = take_remote_image(source, &f, names, natts, &image);
	(void) zl_stage_apply_image(image.stage, image.time);
	zl_stage_end(image.stage);

	origin = replorigin_by_name(zl_follow_origin_name(tbl), true);
	if (origin != InvalidRepOriginId)
		replorigin_drop_by_name(zl_follow_origin_name(tbl), true, false);	/* left by a crash */
	(void) replorigin_create(zl_follow_origin_name(tbl));
	zl_follow_insert(&f, image.time, start_lsn);
	zl_follow_start_worker(tbl, f.owner, GetTopTransactionId());

	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	values[0] = TimestampTzGetDatum(image.time);
	values[1] = Int64GetDatum(image.rows);
	values[2] = DirectFunctionCall1(namein, CStringGetDatum(f.slot));
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc), values, nulls)));
}

/* the follower of tbl, its zipper table's owner calling */
static ZLFollower *
owned_follower(Oid tbl)
{
	if (!pg_class_ownercheck(tbl, GetUserId()))
		aclcheck_error(ACLCHECK_NOT_OWNER, OBJECT_TABLE, get_rel_name(tbl));
	return zl_follow_load(tbl, false);
}

/* zipper_lake.pause(tbl): the worker ends at its next batch; the slot keeps the rest */
Datum
zipper_lake_follow_pause(PG_FUNCTION_ARGS)
{
	ZLFollower *f = owned_follower(PG_GETARG_OID(0));

	if (strcmp(f->state, "paused") != 0)
		zl_follow_set_state(f->tbl, "paused");
	PG_RETURN_VOID();
}

/*
 * zipper_lake.set_follow(tbl, batch_changes, batch_interval,
 * missing_columns): NULL keeps an option; the worker reads its row every
 * batch.
 */
Datum
zipper_lake_set_follow(PG_FUNCTION_ARGS)
{
	ZLFollower *f;

	/* not STRICT: NULL options keep theirs, but the table is needed */
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("table must not be null"),
				 errdetail("Argument tbl of set_follow is null."),
				 errhint("Pass the zipper table that follows a source.")));
	f = owned_follower(PG_GETARG_OID(0));

	if (!PG_ARGISNULL(1))
		f->batch_changes = PG_GETARG_INT32(1);
	if (!PG_ARGISNULL(2))
		f->batch_interval_ms = interval_ms(PG_GETARG_INTERVAL_P(2));
	if (!PG_ARGISNULL(3))
		f->missing_columns = text_arg(fcinfo, 3);
	check_options(f);
	zl_follow_set_options(f);
	PG_RETURN_VOID();
}

/* zipper_lake.resume(tbl): running again, from the last transaction applied */
Datum
zipper_lake_follow_resume(PG_FUNCTION_ARGS)
{
	ZLFollower *f = owned_follower(PG_GETARG_OID(0));

	zl_follow_set_state(f->tbl, "running");
	zl_follow_start_worker(f->tbl, f->owner, GetTopTransactionId());
	PG_RETURN_VOID();
}

/*
 * Drop what follows f: its slot (on another server where it can be
 * reached; else a warning says how to drop it there), its replication
 * origin, its row.  Its worker must have ended.
 */
void
zl_follow_drop(const ZLFollower *f, bool warn_unreachable)
{
	SlotToDrop	d = {f, NULL};
	bool		dropped = true;

	/* this database's slot is dropped or the error stands; another server may be away */
	if (f->connection == NULL)
		drop_slot(&d);
	else
		dropped = zl_try_in_subtransaction(drop_slot, &d) == NULL;
	if (d.source != NULL)
		zl_source_close(d.source);
	if (!dropped)
		ereport(warn_unreachable ? WARNING : LOG,
				(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
				 errmsg("could not drop replication slot \"%s\" on source \"%s\"", f->slot,
						zl_remote_connection_shown(f->connection)),
				 errdetail("The slot holds back the source's WAL until it is dropped."),
				 errhint("On the source: SELECT pg_drop_replication_slot('%s');", f->slot)));
	replorigin_drop_by_name(zl_follow_origin_name(f->tbl), true, false);
	zl_follow_delete(f->tbl);
}

/* zipper_lake.unfollow(tbl): the worker stopped, what it used dropped, the history kept */
Datum
zipper_lake_unfollow(PG_FUNCTION_ARGS)
{
	ZLFollower *f;
	int			pid;

	refuse_in_transaction_block("unfollow");
	f = owned_follower(PG_GETARG_OID(0));
	pid = zl_follow_worker_pid(f->tbl);
	if (pid != 0)
	{
		Datum		args[1] = {Int32GetDatum(pid)};
		Oid			types[1] = {INT4OID};

		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "SPI_connect failed");
		(void) SPI_execute_with_args("SELECT pg_catalog.pg_terminate_backend($1, 30000)", 1, types, args,
									 NULL, false, 0);
		SPI_finish();
	}
	/* wait for it to be gone; a worker starting now finds the lock taken and ends */
	(void) zl_follow_lock(f->tbl, false, false);
	zl_follow_drop(f, true);
	PG_RETURN_VOID();
}

/* zipper_lake._follow_connection_shown(connection): the password hidden */
Datum
zipper_lake_follow_connection_shown(PG_FUNCTION_ARGS)
{
	char	   *shown = zl_remote_connection_shown(text_to_cstring(PG_GETARG_TEXT_PP(0)));

	if (shown == NULL)
		PG_RETURN_NULL();
	PG_RETURN_TEXT_P(cstring_to_text(shown));
}

/* _PG_init: the resolver's rounds start the followers' workers */
void
zl_follow_init(void)
{
	zl_follow_preloaded = process_shared_preload_libraries_in_progress;
	zl_resolver_database_hook = zl_follow_start_missing;
}
