/*-------------------------------------------------------------------------
 *
 * zl_remote_stage.c
 *	  Staging a relation's rows on a shard.
 *
 * The extension's functions take relations (the changes, the image, the
 * keys to erase); called on a shard they need those rows there.  They are
 * copied, a row at a time, into a staging table in the caller's
 * transaction on the shard: an unlogged table (a prepared transaction may
 * not touch temporary ones) in the schema of the shard's table, created
 * and dropped in that transaction, so that no other session ever sees it.
 * The remote role needs CREATE on that schema (README "Scaling out").
 *
 * Values travel in COPY's text format, produced by the types' output
 * functions here and read by their input functions there, both with
 * DateStyle, IntervalStyle and extra_float_digits fixed
 * (zl_remote_fix_output), so a type must exist on the shard under the
 * same name.
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "remote/zl_remote_internal.h"

#include "access/relation.h"
#include "access/xact.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/rel.h"

/* append a value to a line of COPY's text format */
static void
append_copy_value(StringInfo line, const char *value)
{
	if (value == NULL)
	{
		appendStringInfoString(line, "\\N");
		return;
	}
	for (const char *c = value; *c; c++)
	{
		switch (*c)
		{
			case '\\':
				appendStringInfoString(line, "\\\\");
				break;
			case '\t':
				appendStringInfoString(line, "\\t");
				break;
			case '\n':
				appendStringInfoString(line, "\\n");
				break;
			case '\r':
				appendStringInfoString(line, "\\r");
				break;
			default:
				appendStringInfoChar(line, *c);
		}
	}
}

/* a relation's columns, quoted, with their types or without */
char *
zl_remote_columns(TupleDesc desc, bool with_types)
{
	StringInfoData columns;

	initStringInfo(&columns);
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (att->attisdropped)
			continue;
		appendStringInfo(&columns, "%s%s", columns.len > 0 ? ", " : "",
						 quote_identifier(NameStr(att->attname)));
		if (with_types)
			appendStringInfo(&columns, " %s",
							 format_type_extended(att->atttypid, att->atttypmod,
												  FORMAT_TYPE_TYPEMOD_GIVEN | FORMAT_TYPE_FORCE_QUALIFY));
	}
	return columns.data;
}

/*
 * Create a staging table for the rows of relation relid on the shard of
 * foreign table shard_relid, in the schema of its zipper table; returns
 * its qualified name.  n tells apart the stagings of one transaction.
 */
char *
zl_remote_stage_create(ZLShard *shard, Oid shard_relid, Oid relid, int n)
{
	Relation	rel = relation_open(relid, AccessShareLock);
	char	   *staging = psprintf("%s.%s", zl_remote_schema_name(shard_relid),
								   quote_identifier(psprintf("zl_stage_" UINT64_FORMAT "_%d_%d",
															 U64FromFullTransactionId(GetTopFullTransactionId()),
															 MyProcPid, n)));

	(void) zl_remote_query(shard, psprintf("CREATE UNLOGGED TABLE %s (%s)", staging,
										   zl_remote_columns(RelationGetDescr(rel), true)),
						   0, NULL);
	relation_close(rel, AccessShareLock);
	return staging;
}

void
zl_remote_stage_drop(ZLShard *shard, const char *staging)
{
	(void) zl_remote_query(shard, psprintf("DROP TABLE %s", staging), 0, NULL);
}

/*
 * Copy the rows of a query into a staging table: the query's columns
 * from the skip+1-th on are the staging table's; take (NULL: every row)
 * decides for each row, and may read the first skip columns.  Returns how
 * many rows the query gave.  Memory: one row at a time.
 */
int64
zl_remote_stage_rows(ZLShard *shard, const char *staging, const char *columns, const char *query,
					 int skip, ZLStageFilter take, void *arg)
{
	int64		read = 0;
	Portal		portal;
	StringInfoData line;
	MemoryContext row_memory = AllocSetContextCreate(CurrentMemoryContext, "zipper_lake staged row",
													 ALLOCSET_DEFAULT_SIZES);

	int			nest;

	zl_remote_copy_begin(shard, psprintf("COPY %s (%s) FROM STDIN", staging, columns));
	initStringInfo(&line);
	nest = zl_remote_fix_output();
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	portal = SPI_cursor_open_with_args(NULL, query, 0, NULL, NULL, NULL, true, 0);
	for (;;)
	{
		SPI_cursor_fetch(portal, true, 1000);
		if (SPI_processed == 0)
			break;
		for (uint64 r = 0; r < SPI_processed; r++)
		{
			HeapTuple	tuple = SPI_tuptable->vals[r];
			TupleDesc	desc = SPI_tuptable->tupdesc;
			MemoryContext old = MemoryContextSwitchTo(row_memory);

			read++;
			if (take == NULL || take(tuple, desc, arg))
			{
				resetStringInfo(&line);
				for (int c = skip + 1; c <= desc->natts; c++)
				{
					if (c > skip + 1)
						appendStringInfoChar(&line, '\t');
					append_copy_value(&line, SPI_getvalue(tuple, desc, c));
				}
				appendStringInfoChar(&line, '\n');
				zl_remote_copy_data(shard, line.data, line.len);
			}
			MemoryContextSwitchTo(old);
			MemoryContextReset(row_memory);
		}
		SPI_freetuptable(SPI_tuptable);
	}
	SPI_cursor_close(portal);
	SPI_finish();
	zl_remote_restore_output(nest);
	zl_remote_copy_end(shard);
	MemoryContextDelete(row_memory);
	return read;
}
