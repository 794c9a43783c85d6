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
#include "zipper_lake.h"

#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
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

/* the zipper table named by the row type of the first argument */
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
	rel = zl_open_readable_zipper_table(relid);
	zl_refuse_row_security(rel);
	if (!zl_meta_load_options(rel, opts, false))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table \"%s\" is not registered", RelationGetRelationName(rel)),
				 errdetail("The read helpers need the period columns named at registration."),
				 errhint("Register it with zipper_lake.register().")));
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

static Datum
return_bounded_rows(FunctionCallInfo fcinfo, Relation rel, const ZLTableOptions *opts,
					const ZLScanBounds *bounds)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	TableScanDesc scan;
	TupleTableSlot *slot;

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	slot = table_slot_create(rel, NULL);
	scan = table_beginscan(rel, GetActiveSnapshot(), 0, NULL);
	zl_scan_set_bounds(scan, opts, bounds);
	while (table_scan_getnextslot(scan, ForwardScanDirection, slot))
		tuplestore_puttupleslot(rsinfo->setResult, slot);
	table_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);
	table_close(rel, AccessShareLock);
	return (Datum) 0;
}

Datum
zipper_lake_as_of(PG_FUNCTION_ARGS)
{
	ZLTableOptions opts;
	Relation	rel = open_table_of_row_type(fcinfo, &opts);
	int64		at = time_arg(fcinfo, 1, &opts, "as_of time");
	ZLScanBounds b = zl_bounds_init(false);

	zl_bounds_narrow(&b, true, BTLessEqualStrategyNumber, at);
	zl_bounds_narrow(&b, false, BTGreaterStrategyNumber, at);
	return return_bounded_rows(fcinfo, rel, &opts, &b);
}

Datum
zipper_lake_current(PG_FUNCTION_ARGS)
{
	ZLTableOptions opts;
	Relation	rel = open_table_of_row_type(fcinfo, &opts);
	ZLScanBounds b = zl_bounds_init(false);

	zl_bounds_narrow(&b, false, BTEqualStrategyNumber, opts.open_end);
	return return_bounded_rows(fcinfo, rel, &opts, &b);
}

Datum
zipper_lake_changes(PG_FUNCTION_ARGS)
{
	ZLTableOptions opts;
	Relation	rel = open_table_of_row_type(fcinfo, &opts);
	int64		from = time_arg(fcinfo, 1, &opts, "start of the window");
	int64		to = time_arg(fcinfo, 2, &opts, "end of the window");
	ZLScanBounds b = zl_bounds_init(true);

	zl_bounds_narrow(&b, true, BTGreaterEqualStrategyNumber, from);
	zl_bounds_narrow(&b, true, BTLessStrategyNumber, to);
	zl_bounds_narrow(&b, false, BTGreaterEqualStrategyNumber, from);
	zl_bounds_narrow(&b, false, BTLessStrategyNumber, to);
	zl_bounds_narrow(&b, false, BTLessStrategyNumber, opts.open_end);	/* open versions have not ended */
	return return_bounded_rows(fcinfo, rel, &opts, &b);
}
