/*-------------------------------------------------------------------------
 *
 * zl_copy_history.c
 *	  copy_history(): a zipper table's whole history into another one.
 *
 * copy_history(source, target) copies every version and the change
 * record of a zipper table into an empty zipper table registered the same
 * way; either may be a shard (a postgres_fdw foreign table over a zipper
 * table on another server, src/remote).  It is how a leaf of a zipper
 * parent moves to a new server (README "Scaling out"): the target then
 * answers every read and folds every later change exactly as the source
 * would, late ones included.
 *
 *  - The versions travel as rows (INSERT, which loads versions as they
 *    are; into a shard through a staging table there), the record as it
 *    is stored: its head (newest change, the table's instants) and its
 *    segments, encoded entries and all, read with _record_rows() and
 *    written with _record_put() on the target's server.  A copied piece
 *    keeps its id; the target's sequence moves past it, so later pieces
 *    follow.
 *  - The source is locked against writers (EXCLUSIVE) for the copy, on
 *    its server for a shard, the target too; everything is in the caller's
 *    transaction, shards' parts by two-phase commit.
 *  - Values travel as text with fixed DateStyle and IntervalStyle
 *    (zl_remote_fix_output); a segment at a time is in memory.
 *
 * Privileges: SELECT on the source (as reading it), ownership of the
 * target (as register()); on a shard, its user mapping's role needs the
 * same there.
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "catalog/zl_catalog.h"
#include "remote/zl_remote.h"

#include "access/table.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

PG_FUNCTION_INFO_V1(zipper_lake_record_rows);
PG_FUNCTION_INFO_V1(zipper_lake_record_put);
PG_FUNCTION_INFO_V1(zipper_lake_copy_history);

/* the record's rows travel as these ten text values */
#define RECORD_PUT_SQL \
	"SELECT zipper_lake._record_put($1::pg_catalog.regclass, $2::pg_catalog.int8," \
	" $3::pg_catalog.int4, $4::pg_catalog.int8, $5::pg_catalog.int8, $6::pg_catalog.timestamptz," \
	" $7::pg_catalog.int8, $8::pg_catalog.bytea, $9::pg_catalog.timestamptz[], $10::pg_catalog.int8[])"
#define RECORD_COLUMNS 9

/* _record_rows(tbl): the record of a zipper table, as stored */
Datum
zipper_lake_record_rows(PG_FUNCTION_ARGS)
{
	Relation	rel = zl_open_readable_zipper_table(PG_GETARG_OID(0));

	InitMaterializedSRF(fcinfo, 0);
	if (zl_meta_record_exists())
		zl_meta_record_export(RelationGetRelid(rel), (ReturnSetInfo *) fcinfo->resultinfo);
	table_close(rel, AccessShareLock);
	return (Datum) 0;
}

/* _record_put's arguments by number, and those a segment and a head need */
static const char *const record_put_args[] = {
	"tbl", "piece", "segment", "hash_lo", "hash_hi", "newest", "instants", "entries",
	"table_instants", "table_seqs"
};
static const int segment_args[] = {0, 1, 2, 3, 4, 5, 6, 7};
static const int head_args[] = {0, 5, 8, 9};

/* refuse a NULL among the arguments the row needs (the function is not STRICT: piece may be NULL) */
static void
record_put_require(FunctionCallInfo fcinfo, const int *args, int nargs)
{
	for (int i = 0; i < nargs; i++)
		if (PG_ARGISNULL(args[i]))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("_record_put needs a non-NULL %s", record_put_args[args[i]]),
					 errdetail("A %s of the change record was given with %s NULL.",
							   PG_ARGISNULL(1) ? "head (piece NULL)" : "segment",
							   record_put_args[args[i]]),
					 errhint("Pass a row as zipper_lake._record_rows() returns it.")));
}

/*
 * _record_put(tbl, piece, segment, hash_lo, hash_hi, newest, instants,
 * entries, table_instants, table_seqs): a row of another table's record
 * (_record_rows) into this one's; piece NULL: the head.  The owner's.
 */
Datum
zipper_lake_record_put(PG_FUNCTION_ARGS)
{
	Relation	rel;

	if (PG_ARGISNULL(1))
		record_put_require(fcinfo, head_args, lengthof(head_args));
	else
		record_put_require(fcinfo, segment_args, lengthof(segment_args));
	rel = zl_open_zipper_table(PG_GETARG_OID(0), ShareUpdateExclusiveLock);
	if (!pg_class_ownercheck(RelationGetRelid(rel), GetUserId()))
		aclcheck_error(ACLCHECK_NOT_OWNER, OBJECT_TABLE, RelationGetRelationName(rel));
	if (!PG_ARGISNULL(1))
		zl_meta_record_copy_segment(RelationGetRelid(rel), PG_GETARG_INT64(1), PG_GETARG_INT32(2),
									PG_GETARG_INT64(3), PG_GETARG_INT64(4), PG_GETARG_INT64(5),
									PG_GETARG_INT64(6), PG_GETARG_BYTEA_PP(7));
	else
	{
		Datum	   *times;
		Datum	   *seqs;
		bool	   *seq_nulls;
		int			ntimes,
					nseqs;
		ZLTableInstant *instants;

		deconstruct_array(PG_GETARG_ARRAYTYPE_P(8), TIMESTAMPTZOID, sizeof(int64), true,
						  TYPALIGN_DOUBLE, &times, NULL, &ntimes);
		deconstruct_array(PG_GETARG_ARRAYTYPE_P(9), INT8OID, sizeof(int64), true,
						  TYPALIGN_DOUBLE, &seqs, &seq_nulls, &nseqs);
		if (nseqs != ntimes)
			elog(ERROR, "the table's instants and seqs differ in number");
		instants = palloc(sizeof(ZLTableInstant) * Max(1, ntimes));
		for (int i = 0; i < ntimes; i++)
		{
			instants[i].time = DatumGetInt64(times[i]);
			instants[i].has_seq = !seq_nulls[i];
			instants[i].seq = seq_nulls[i] ? 0 : DatumGetInt64(seqs[i]);
		}
		zl_meta_record_save_head(RelationGetRelid(rel), PG_GETARG_INT64(5), instants, ntimes);
	}
	table_close(rel, NoLock);
	PG_RETURN_VOID();
}

/* one end of a copy: a zipper table here, or a shard */
typedef struct HistoryEnd
{
	Oid			relid;
	ZLShard    *shard;			/* NULL: here */
	bool		writes;			/* the target */
	char	   *here;			/* the relation here, qualified */
	char	   *name;			/* the zipper table, qualified (a shard's: there) */
} HistoryEnd;

/* run a statement where an end lives, with text parameters; its rows as text */
static ZLRemoteRows *
end_query(HistoryEnd *end, const char *sql, int nparams, const char **params)
{
	return zl_remote_query_where(end->relid, end->writes, sql, nparams, params);
}

/*
 * An end of the copy: a zipper table here (not a parent), or a shard;
 * the source needs SELECT, the target ownership; both registered.
 */
static HistoryEnd
open_end(Oid relid, bool target)
{
	HistoryEnd	end = {relid, NULL, target, NULL, NULL};
	const char *role = target ? "target" : "source";

	end.here = quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
										  get_rel_name(relid));
	end.name = zl_remote_where_name(relid);
	if (target && !pg_class_ownercheck(relid, GetUserId()))
		aclcheck_error(ACLCHECK_NOT_OWNER, get_rel_relkind(relid) == RELKIND_FOREIGN_TABLE ?
					   OBJECT_FOREIGN_TABLE : OBJECT_TABLE, get_rel_name(relid));
	if (zl_remote_is_shard(relid))
	{
		if (!target && pg_class_aclcheck(relid, GetUserId(), ACL_SELECT) != ACLCHECK_OK)
			aclcheck_error(ACLCHECK_NO_PRIV, OBJECT_FOREIGN_TABLE, get_rel_name(relid));
		end.shard = target ? zl_remote_shard_for_write(relid) : zl_remote_shard(relid);
		return end;
	}
	if (zl_is_partitioned_table(relid))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("copy_history() copies one zipper table, not zipper parent \"%s\"",
						get_rel_name(relid)),
				 errdetail("The %s is partitioned.", role),
				 errhint("Copy leaf by leaf.")));
	table_close(target ? zl_open_zipper_table(relid, AccessShareLock) :
				zl_open_readable_zipper_table(relid), AccessShareLock);
	return end;
}

/* the registration of an end, as text; NULL: none */
static char *
registration_of(HistoryEnd *end)
{
	return end->shard ? zl_shard_registration_text(end->relid) :
		zl_meta_registration_text(end->relid);
}

/* lock an end against writers; the target must hold neither versions nor record */
static void
lock_end(HistoryEnd *end, bool target)
{
	const char *params[1] = {end->name};
	ZLRemoteRows *rows;

	if (end->shard != NULL)
		(void) zl_remote_query(end->shard, psprintf("LOCK TABLE %s IN EXCLUSIVE MODE", end->name),
							   0, NULL);
	else
		LockRelationOid(end->relid, ExclusiveLock);
	if (!target)
		return;
	rows = end_query(end, psprintf("SELECT NOT EXISTS (SELECT FROM %s) AND NOT EXISTS"
								   " (SELECT FROM zipper_lake._record_rows($1::pg_catalog.regclass))"
								   " AS empty", end->name), 1, params);
	if (strcmp(zl_remote_value(rows, 0, "empty"), "t") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("target %s of copy_history() is not empty", end->here),
				 errdetail("It holds versions or a change record."),
				 errhint("Copy into a new zipper table registered as the source is; nothing was copied.")));
}

/* the versions of the source into the target: INSERT loads them as they are */
static int64
copy_versions(HistoryEnd *source, HistoryEnd *target)
{
	Relation	rel = table_open(source->relid, AccessShareLock);
	char	   *columns = zl_remote_columns(RelationGetDescr(rel), false);
	char	   *select = psprintf("SELECT %s FROM %s", columns, source->here);

	char	   *staging = NULL;
	ZLRemoteRows *rows;

	table_close(rel, AccessShareLock);
	if (target->shard != NULL)
	{
		/* the rows first reach the target's server */
		staging = zl_remote_stage_create(target->shard, target->relid, source->relid, 0);
		(void) zl_remote_stage_rows(target->shard, staging, columns, select, 0, NULL, NULL);
		select = psprintf("SELECT %s FROM %s", columns, staging);
	}
	rows = end_query(target, psprintf("WITH copied AS (INSERT INTO %s (%s) %s RETURNING 1)"
									  " SELECT count(*) AS copied FROM copied",
									  target->name, columns, select), 0, NULL);
	if (staging != NULL)
		zl_remote_stage_drop(target->shard, staging);
	return pg_strtoint64(zl_remote_value(rows, 0, "copied"));
}

/* a row of the source's record (RECORD_COLUMNS values) into the target's */
static void
put_record_row(HistoryEnd *target, char **row)
{
	const char *params[1 + RECORD_COLUMNS];

	params[0] = target->name;
	for (int c = 0; c < RECORD_COLUMNS; c++)
		params[1 + c] = row[c];
	(void) end_query(target, RECORD_PUT_SQL, 1 + RECORD_COLUMNS, params);
}

/* a local source's record, a few rows at a time, into the target's */
static void
copy_local_record(HistoryEnd *source, HistoryEnd *target)
{
	Oid			types[1] = {REGCLASSOID};
	Datum		values[1] = {ObjectIdGetDatum(source->relid)};
	Portal		portal;
	int			nest = zl_remote_fix_output();

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	portal = SPI_cursor_open_with_args(NULL, "SELECT * FROM zipper_lake._record_rows($1)", 1, types,
									   values, NULL, true, 0);
	for (;;)
	{
		SPITupleTable *rows;
		uint64		n;

		SPI_cursor_fetch(portal, true, 8);
		if (SPI_processed == 0)
			break;
		rows = SPI_tuptable;
		n = SPI_processed;
		for (uint64 r = 0; r < n; r++)
		{
			char	   *row[RECORD_COLUMNS];

			for (int c = 0; c < RECORD_COLUMNS; c++)
				row[c] = SPI_getvalue(rows->vals[r], rows->tupdesc, c + 1);
			put_record_row(target, row);
		}
		SPI_freetuptable(rows);
	}
	SPI_cursor_close(portal);
	SPI_finish();
	zl_remote_restore_output(nest);
}

/* the source's record, a few rows at a time, into the target's */
static void
copy_record(HistoryEnd *source, HistoryEnd *target)
{
	const char *params[1] = {source->name};

	if (source->shard != NULL)
	{
		(void) zl_remote_query(source->shard, "DECLARE zl_record_rows NO SCROLL CURSOR FOR"
							   " SELECT * FROM zipper_lake._record_rows($1::pg_catalog.regclass)",
							   1, params);
		for (;;)
		{
			ZLRemoteRows *rows = zl_remote_query(source->shard, "FETCH 8 FROM zl_record_rows", 0, NULL);

			if (rows->nrows == 0)
				break;
			for (int r = 0; r < rows->nrows; r++)
				put_record_row(target, &rows->values[r * rows->ncols]);
		}
		(void) zl_remote_query(source->shard, "CLOSE zl_record_rows", 0, NULL);
		return;
	}
	copy_local_record(source, target);
}

/*
 * copy_history(source, target): every version and the change record of a
 * zipper table (or shard) into an empty one registered the same way;
 * returns the versions copied.
 */
Datum
zipper_lake_copy_history(PG_FUNCTION_ARGS)
{
	HistoryEnd	source;
	HistoryEnd	target;
	char	   *source_registration;
	char	   *target_registration;
	int64		copied;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("source and target must not be null"),
				 errdetail("Argument %s is null.", PG_ARGISNULL(0) ? "source" : "target"),
				 errhint("Pass two zipper tables (or shards) registered the same way.")));
	if (PG_GETARG_OID(0) == PG_GETARG_OID(1))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("copy_history() copies a table into another one"),
				 errdetail("Source and target are both \"%s\".", get_rel_name(PG_GETARG_OID(0))),
				 errhint("Pass a new, empty target.")));
	source = open_end(PG_GETARG_OID(0), false);
	target = open_end(PG_GETARG_OID(1), true);
	source_registration = registration_of(&source);
	target_registration = registration_of(&target);
	if (source_registration == NULL || target_registration == NULL ||
		strcmp(source_registration, target_registration) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("%s and %s are not registered the same way", source.here, target.here),
				 errdetail("%s", source_registration == NULL ? "The source is not registered." :
						   target_registration == NULL ? "The target is not registered." :
						   "Their key, period columns, options or history cut differ."),
				 errhint("Register the target with the source's options; nothing was copied.")));
	lock_end(&source, false);
	lock_end(&target, true);
	copied = copy_versions(&source, &target);
	copy_record(&source, &target);
	PG_RETURN_INT64(copied);
}
