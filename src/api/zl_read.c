/*-------------------------------------------------------------------------
 *
 * zl_read.c
 *	  The read helpers: as_of(), current() and changes().
 *
 * Each takes NULL::table to name the table and fix the result row type,
 * turns its arguments into pruning bounds (zl_prune.c) and returns the
 * rows of one bounded scan of the table.  The caller needs SELECT on the
 * table, as for a plain SELECT.  Masked rows are never returned.
 *
 *   as_of(t, T)       valid_from <= T AND valid_to > T
 *   current(t)        valid_to = open end
 *   changes(t, A, B)  versions that began or ended in [A, B):
 *                     valid_from in [A, B) OR valid_to in [A, B), where an
 *                     open version has not ended
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "catalog/zl_catalog.h"
#include "remote/zl_remote.h"
#include "access/zl_access.h"

#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/tupconvert.h"
#include "executor/tuptable.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "parser/parse_type.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rls.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

PG_FUNCTION_INFO_V1(zipper_lake_as_of);
PG_FUNCTION_INFO_V1(zipper_lake_current);
PG_FUNCTION_INFO_V1(zipper_lake_changes);
PG_FUNCTION_INFO_V1(zipper_lake_time_arg);

/*
 * The zipper table (or zipper parent, README "Scaling out") named by the
 * row type of the first argument.
 */
static Relation
open_table_of_row_type(FunctionCallInfo fcinfo, ZLTableOptions *opts)
{
	Oid			typid = get_fn_expr_argtype(fcinfo->flinfo, 0);
	Oid			relid = OidIsValid(typid) ? typeidTypeRelid(typid) : InvalidOid;
	Relation	rel;

	if (!OidIsValid(relid))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("first argument must be a row of a zipper table"),
				 errdetail("The argument has type %s.",
						   OidIsValid(typid) ? format_type_be(typid) : "unknown"),
				 errhint("Pass NULL::table_name.")));
	rel = zl_is_partitioned_table(relid) ? zl_open_readable_parent(relid) :
		zl_open_readable_zipper_table(relid);
	zl_load_registration(rel, opts, false,
						 "The read helpers need the period columns named at registration.",
						 "Register it with zipper_lake.register().");
	return rel;
}

static void
refuse_null_time(FunctionCallInfo fcinfo, int argno, const char *name)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", name),
				 errhint("Pass a point in time, such as now().")));
}

static int64
time_arg(FunctionCallInfo fcinfo, int argno, const ZLTableOptions *opts, const char *name)
{
	refuse_null_time(fcinfo, argno, name);
	return zl_timestamptz_to_instant(opts, PG_GETARG_TIMESTAMPTZ(argno));
}

/* zipper_lake._time_arg(t, what): t, or the helpers' error when t is NULL */
Datum
zipper_lake_time_arg(PG_FUNCTION_ARGS)
{
	refuse_null_time(fcinfo, 0, PG_ARGISNULL(1) ? "time" : text_to_cstring(PG_GETARG_TEXT_PP(1)));
	PG_RETURN_DATUM(PG_GETARG_DATUM(0));
}

/* the rows of one zipper table within bounds into the result, as rows of desc */
static void
put_bounded_rows(ReturnSetInfo *rsinfo, Relation rel, const ZLTableOptions *opts,
				 const ZLScanBounds *bounds, TupleDesc desc)
{
	TableScanDesc scan;
	TupleTableSlot *slot = table_slot_create(rel, NULL);
	TupleConversionMap *map = convert_tuples_by_name(RelationGetDescr(rel), desc);
	TupleTableSlot *converted = map ? MakeSingleTupleTableSlot(desc, &TTSOpsVirtual) : NULL;

	scan = table_beginscan(rel, GetActiveSnapshot(), 0, NULL);
	zl_scan_set_bounds(scan, opts, bounds);
	while (table_scan_getnextslot(scan, ForwardScanDirection, slot))
		tuplestore_puttupleslot(rsinfo->setResult,
								map ? execute_attr_map_slot(map->attrMap, slot, converted) : slot);
	table_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);
	if (converted)
		ExecDropSingleTupleTableSlot(converted);
}

/*
 * The rows of a shard of a zipper parent: the same helper called on its
 * server with the same time arguments, each column taken by name.
 */
static void
put_shard_rows(FunctionCallInfo fcinfo, Oid shard, const char *name, int ntimes)
{
	StringInfoData sql;
	const char *params[ZL_HELPER_MAX_TIMES];
	int			nest = zl_remote_fix_output();

	initStringInfo(&sql);
	appendStringInfo(&sql, "SELECT * FROM zipper_lake.%s(NULL::%s", name, zl_remote_table_name(shard));
	for (int i = 1; i <= ntimes; i++)
	{
		params[i - 1] = DatumGetCString(DirectFunctionCall1(timestamptz_out, PG_GETARG_DATUM(i)));
		appendStringInfo(&sql, ", $%d::pg_catalog.timestamptz", i);
	}
	appendStringInfoChar(&sql, ')');
	zl_remote_restore_output(nest);
	zl_remote_put_rows((ReturnSetInfo *) fcinfo->resultinfo,
					   zl_remote_query(zl_remote_shard(shard), sql.data, ntimes, params),
					   NULL, (Datum) 0);
}

/*
 * The rows within bounds: of the table, or of each leaf of a zipper
 * parent (registered as the parent is, so the bounds hold for each), a
 * shard's from its server.
 */
static Datum
return_bounded_rows(FunctionCallInfo fcinfo, Relation rel, const ZLTableOptions *opts,
					const ZLScanBounds *bounds, const ZLReadHelper *helper)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	if (rel->rd_rel->relkind == RELKIND_PARTITIONED_TABLE)
	{
		ZLParent   *parent = zl_parent_open(RelationGetRelid(rel), AccessShareLock);

		for (int i = 0; i < zl_parent_nleaves(parent); i++)
		{
			Relation	leaf;
			ZLTableOptions leaf_opts;

			if (zl_parent_leaf_is_shard(parent, i))
			{
				put_shard_rows(fcinfo, zl_parent_leaf(parent, i), helper->name, helper->ntimes);
				continue;
			}
			leaf = zl_open_zipper_table(zl_parent_leaf(parent, i), AccessShareLock);

			zl_load_registration(leaf, &leaf_opts, false, NULL,
								 "Register the parent again with zipper_lake.register(); it registers every partition.");
			put_bounded_rows(rsinfo, leaf, &leaf_opts, bounds, RelationGetDescr(rel));
			table_close(leaf, AccessShareLock);
		}
		zl_parent_close(parent);
	}
	else
		put_bounded_rows(rsinfo, rel, opts, bounds, RelationGetDescr(rel));
	table_close(rel, AccessShareLock);
	return (Datum) 0;
}

/* the function form: its time arguments (1-based) read, bounds built, rows returned */
static Datum
read_helper_rows(FunctionCallInfo fcinfo, const char *name)
{
	const ZLReadHelper *helper = zl_read_helper(name);
	ZLTableOptions opts;
	Relation	rel = open_table_of_row_type(fcinfo, &opts);
	int64		times[1 + ZL_HELPER_MAX_TIMES];
	ZLScanBounds bounds = zl_bounds_init(helper->either);

	for (int i = 1; i <= helper->ntimes; i++)
		times[i] = time_arg(fcinfo, i, &opts, helper->time_names[i - 1]);
	for (int i = 0; i < helper->nterms; i++)
	{
		const ZLHelperTerm *term = &helper->terms[i];

		zl_bounds_narrow(&bounds, term->on_valid_from, term->strategy,
						 term->value == ZL_TERM_OPEN_END ? opts.open_end : times[term->value]);
	}
	return return_bounded_rows(fcinfo, rel, &opts, &bounds, helper);
}

Datum
zipper_lake_as_of(PG_FUNCTION_ARGS)
{
	return read_helper_rows(fcinfo, "as_of");
}

Datum
zipper_lake_current(PG_FUNCTION_ARGS)
{
	return read_helper_rows(fcinfo, "current");
}

Datum
zipper_lake_changes(PG_FUNCTION_ARGS)
{
	return read_helper_rows(fcinfo, "changes");
}
