/*-------------------------------------------------------------------------
 *
 * zl_register.c
 *	  SQL-callable pieces of registration.
 *
 * zipper_lake.register() checks the caller owns the table, validates every
 * option and writes the registration row with the metadata owner's
 * rights.  A
 * trigger on zipper_lake.registration places rows loaded before the
 * registration existed — after register() and equally when pg_restore
 * loads the registration after the table's data.
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "storage/zl_storage.h"
#include "catalog/zl_catalog.h"
#include "remote/zl_remote.h"
#include "write/zl_write.h"
#include "lifecycle/zl_lifecycle.h"

#include "access/relation.h"
#include "access/table.h"
#include "commands/trigger.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "catalog/namespace.h"
#include "catalog/pg_inherits.h"
#include "commands/defrem.h"
#include "catalog/partition.h"
#include "catalog/pg_type.h"
#include "optimizer/optimizer.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/date.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "partitioning/partdesc.h"
#include "utils/partcache.h"
#include "utils/timestamp.h"

PG_FUNCTION_INFO_V1(zipper_lake_register);
PG_FUNCTION_INFO_V1(zipper_lake_set_late_horizon);
PG_FUNCTION_INFO_V1(zipper_lake_set_track_columns);
PG_FUNCTION_INFO_V1(zipper_lake_set_history_format);
PG_FUNCTION_INFO_V1(zipper_lake_set_retention);
PG_FUNCTION_INFO_V1(zipper_lake_register_row);
PG_FUNCTION_INFO_V1(zipper_lake_place_unplaced_trigger);
PG_FUNCTION_INFO_V1(zipper_lake_storage_id);

static void
refuse_option(const char *message, const char *hint)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg_internal("%s", message),
			 errhint("%s", hint)));
}

/* a column of the table by name, or an error naming what it was meant to be */
static AttrNumber
registered_column(Relation rel, const char *name)
{
	AttrNumber	attnum = name ? get_attnum(RelationGetRelid(rel), name) : InvalidAttrNumber;

	if (attnum <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 name ? errmsg("column \"%s\" of table %s does not exist", name, zl_qualified_name(rel)) :
				 errmsg("a column name of table %s is null", zl_qualified_name(rel)),
				 errhint("Name existing columns for the key and the period.")));
	return attnum;
}

/*
 * A partition whose ancestors are partitioned by a period column would
 * have to move rows between partitions whenever a version is closed or
 * split: refuse it (apply_changes checks every row against the partition
 * constraint too, so a later ATTACH cannot corrupt it either).
 */
static void
refuse_period_partition_key(Relation rel, AttrNumber from_attnum, AttrNumber to_attnum)
{
	List	   *ancestors;
	ListCell   *lc;
	const char *period[2] = {get_attname(RelationGetRelid(rel), from_attnum, false),
							 get_attname(RelationGetRelid(rel), to_attnum, false)};

	if (!rel->rd_rel->relispartition)
		return;
	ancestors = get_partition_ancestors(RelationGetRelid(rel));
	foreach(lc, ancestors)
	{
		Relation	parent = relation_open(lfirst_oid(lc), AccessShareLock);
		PartitionKey key = RelationGetPartitionKey(parent);
		Bitmapset  *used = NULL;
		ListCell   *lc2 = list_head(key->partexprs);

		for (int i = 0; i < key->partnatts; i++)
		{
			if (key->partattrs[i] != 0)
				used = bms_add_member(used, key->partattrs[i] - FirstLowInvalidHeapAttributeNumber);
			else
			{
				pull_varattnos(lfirst(lc2), 1, &used);
				lc2 = lnext(key->partexprs, lc2);
			}
		}
		for (int p = 0; p < 2; p++)
		{
			AttrNumber	attnum = get_attnum(RelationGetRelid(parent), period[p]);

			if (attnum > 0 && bms_is_member(attnum - FirstLowInvalidHeapAttributeNumber, used))
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot register table %s: its %s %s is partitioned by period column \"%s\"",
								zl_qualified_name(rel),
								RelationGetRelid(parent) == get_partition_parent(RelationGetRelid(rel), true) ?
								"parent" : "ancestor",
								zl_qualified_name(parent), period[p]),
						 errdetail("Closing or splitting a version changes its period, which would move it to another partition."),
						 errhint("Partition the parent by key or other columns; zipper tables partition their versions by end date themselves.")));
		}
		relation_close(parent, AccessShareLock);
	}
}

/*
 * Apply computes key and period values itself: a generated column would
 * overwrite what it computed (a generated valid_to makes versions overlap).
 */
static void
refuse_generated_column(Relation rel, AttrNumber attnum, const char *role)
{
	Form_pg_attribute att = TupleDescAttr(RelationGetDescr(rel), attnum - 1);

	if (att->attgenerated)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("%s column \"%s\" of table %s is a generated column",
						role, NameStr(att->attname), zl_qualified_name(rel)),
				 errdetail("Key and period values come from the changes and from apply_changes, never from an expression."),
				 errhint("Register ordinary columns as key and period; other columns may be generated.")));
}

/*
 * A group span: a positive number of months (or years), or a positive
 * length in days and time — never both, so windows have one length.
 */
static void
check_span(const Interval *span)
{
	bool		ok = span->month != 0 ?
		span->month > 0 && span->day == 0 && span->time == 0 :
		(int64) span->day * USECS_PER_DAY + span->time > 0;

	if (!ok)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid group span \"%s\"",
						DatumGetCString(DirectFunctionCall1(interval_out,
															IntervalPGetDatum(span)))),
				 errhint("A group span is a positive number of months or years, or a positive length in days and time, not both.")));
}

/*
 * README "Tracked columns": names of value columns (not key, period or
 * generated ones), each once, at least one; as name[].
 */
static ArrayType *
checked_track_columns(Relation rel, const AttrNumber *key_attnums, int nkeys,
					  AttrNumber from_attnum, AttrNumber to_attnum, ArrayType *columns)
{
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	Datum	   *names;
	AttrNumber *attnums;

	deconstruct_array(columns, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
	if (n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("track_columns of table %s is empty", zl_qualified_name(rel)),
				 errdetail("With no tracked column no change could make a version."),
				 errhint("Name the columns whose changes make versions, or pass NULL for all.")));
	names = palloc(sizeof(Datum) * n);
	attnums = palloc(sizeof(AttrNumber) * n);
	for (int i = 0; i < n; i++)
	{
		char	   *name;
		bool		bad;

		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("track_columns of table %s names a null column", zl_qualified_name(rel)),
					 errdetail("Element %d is null.", i + 1),
					 errhint("List the names of the tracked columns.")));
		name = TextDatumGetCString(elems[i]);
		attnums[i] = get_attnum(RelationGetRelid(rel), name);
		bad = attnums[i] <= 0 || attnums[i] == from_attnum || attnums[i] == to_attnum ||
			TupleDescAttr(RelationGetDescr(rel), attnums[i] - 1)->attgenerated;
		for (int k = 0; k < nkeys && !bad; k++)
			bad = key_attnums[k] == attnums[i];
		for (int j = 0; j < i && !bad; j++)
			bad = attnums[j] == attnums[i];
		if (bad)
			ereport(ERROR,
					(errcode(attnums[i] <= 0 ? ERRCODE_UNDEFINED_COLUMN : ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("cannot track column \"%s\" of table %s", name, zl_qualified_name(rel)),
					 errdetail(attnums[i] <= 0 ? "The table has no such column." :
							   "Tracked columns are value columns, each named once: not key, period or generated columns."),
					 errhint("List value columns of the table.")));
		names[i] = DirectFunctionCall1(namein, CStringGetDatum(name));
	}
	return construct_array(names, n, NAMEOID, NAMEDATALEN, false, TYPALIGN_CHAR);
}

/* a history format (README "Storage formats"): 'columnar' or 'rows' */
static text *
checked_history_format(text *format)
{
	char	   *name = text_to_cstring(format);

	if (strcmp(name, "columnar") != 0 && strcmp(name, "rows") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid history_format \"%s\"", name),
				 errdetail("History is stored as 'columnar' (compressed, the default) or 'rows'."),
				 errhint("Pass 'columnar' or 'rows'.")));
	return format;
}

/* a late horizon: positive, in days and time (months have no fixed length) */
static Interval *
checked_horizon(Interval *horizon)
{
	if (horizon->month != 0 || horizon->day < 0 || horizon->time < 0 ||
		(horizon->day == 0 && horizon->time == 0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid late_horizon %s",
						DatumGetCString(DirectFunctionCall1(interval_out, IntervalPGetDatum(horizon)))),
				 errdetail("A late horizon is a positive span of days and time."),
				 errhint("Write it in days, e.g. '30 days' or '365 days'; NULL means no horizon.")));
	return horizon;
}

/*
 * The table to register, opened: the owner's, a zipper table, not yet
 * registered, and its writers locked out until the registration commits
 * (they then see it, zl_write.c).
 */
static Relation
open_table_to_register(FunctionCallInfo fcinfo)
{
	Relation	rel;
	char	   *table_name;
	ZLTableOptions existing;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("table to register must not be null"),
				 errhint("Pass the zipper table, e.g. zipper_lake.register('account', key => ARRAY['id']).")));
	table_name = zl_relation_arg_name(PG_GETARG_OID(0), "tbl");
	/* the owner first: nobody else may even queue for the table's lock */
	if (!pg_class_ownercheck(PG_GETARG_OID(0), GetUserId()))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("must be owner of table %s",
						quote_qualified_identifier(get_namespace_name(get_rel_namespace(PG_GETARG_OID(0))),
												   table_name)),
				 errhint("Only the owner of a table registers it.")));
	if (zl_is_partitioned_table(PG_GETARG_OID(0)))
		rel = table_open(PG_GETARG_OID(0), ShareUpdateExclusiveLock);	/* a parent */
	else
	{
		rel = zl_open_zipper_table(PG_GETARG_OID(0), ShareUpdateExclusiveLock);
		/* writers of the table wait, then see the registration (zl_write.c) */
		(void) zl_write_lock_table(zl_storage_id(rel), false);
	}
	if (zl_meta_load_options(rel, &existing, true))
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("table %s is already registered", zl_qualified_name(rel)),
				 errhint("A table is registered once, when it is created.")));
	return rel;
}

/*
 * The key (argument 1): distinct existing columns, none null.  Fills
 * key_attnums and *key_names (name[] of the columns) and *key_text (the
 * argument as given, for messages); returns the number of columns.
 */
static int
resolve_key_columns(FunctionCallInfo fcinfo, Relation rel, AttrNumber *key_attnums,
					ArrayType **key_names_out, char **key_text_out)
{
	ArrayType  *key_array;
	char	   *key_text;
	Datum	   *key_elems;
	bool	   *key_nulls;
	int16		elem_len;
	bool		elem_byval;
	char		elem_align;
	char	   *key_name;
	int			nkeys;
	Datum	   *key_names;

	if (PG_ARGISNULL(1) ||
		ArrayGetNItems(ARR_NDIM(PG_GETARG_ARRAYTYPE_P(1)), ARR_DIMS(PG_GETARG_ARRAYTYPE_P(1))) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("key of table %s is empty", zl_qualified_name(rel)),
				 errhint("Pass the business key columns, e.g. key => ARRAY['id'].")));
	key_array = PG_GETARG_ARRAYTYPE_P(1);
	key_text = OidOutputFunctionCall(F_ARRAY_OUT, PointerGetDatum(key_array));
	get_typlenbyvalalign(ARR_ELEMTYPE(key_array), &elem_len, &elem_byval, &elem_align);
	deconstruct_array(key_array, ARR_ELEMTYPE(key_array), elem_len, elem_byval, elem_align,
					  &key_elems, &key_nulls, &nkeys);
	if (nkeys > INDEX_MAX_KEYS)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("key of table %s has %d columns", zl_qualified_name(rel), nkeys),
				 errhint("A key has at most %d columns.", INDEX_MAX_KEYS)));
	key_names = palloc(sizeof(Datum) * nkeys);
	for (int i = 0; i < nkeys; i++)
	{
		if (key_nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("key of table %s names a null column", zl_qualified_name(rel)),
					 errdetail("Element %d of the key is null.", i + 1),
					 errhint("List the names of the key columns.")));
		/* text[] from register(), name[] from 0.1's _register() */
		key_name = ARR_ELEMTYPE(key_array) == NAMEOID ?
			pstrdup(NameStr(*DatumGetName(key_elems[i]))) : TextDatumGetCString(key_elems[i]);
		key_attnums[i] = registered_column(rel, key_name);
		key_names[i] = DirectFunctionCall1(namein, CStringGetDatum(key_name));
		for (int j = 0; j < i; j++)
			if (key_attnums[j] == key_attnums[i])
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("key of table %s names a column twice", zl_qualified_name(rel)),
						 errdetail("Key is %s.", key_text),
						 errhint("List each key column once.")));
	}
	*key_names_out = construct_array(key_names, nkeys, NAMEOID, NAMEDATALEN, false,
									 TYPALIGN_CHAR);
	*key_text_out = key_text;
	return nkeys;
}

/*
 * The period (arguments 2 and 3): two columns outside the key, both
 * timestamptz, timestamp or date of one precision, neither generated nor
 * (with the key columns) a partition key of an ancestor.  Returns their
 * type.
 */
static Oid
resolve_period_columns(FunctionCallInfo fcinfo, Relation rel, const AttrNumber *key_attnums,
					   int nkeys, const char *key_text, AttrNumber *from_out,
					   AttrNumber *to_out)
{
	const char *from_name,
			   *to_name;
	AttrNumber	from_attnum,
				to_attnum;
	Oid			from_type,
				to_type;
	int32		from_typmod,
				to_typmod;

	from_name = NameStr(*PG_GETARG_NAME(2));
	to_name = NameStr(*PG_GETARG_NAME(3));
	from_attnum = registered_column(rel, from_name);
	to_attnum = registered_column(rel, to_name);
	for (int i = 0; i <= nkeys; i++)
		if (from_attnum == to_attnum ||
			(i < nkeys && (key_attnums[i] == from_attnum || key_attnums[i] == to_attnum)))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("period columns of table %s must be two columns outside the key",
							zl_qualified_name(rel)),
					 errdetail("Key is %s, valid_from is %s, valid_to is %s.",
							   key_text, from_name, to_name),
					 errhint("Use distinct columns for valid_from and valid_to.")));
	from_type = get_atttype(RelationGetRelid(rel), from_attnum);
	to_type = get_atttype(RelationGetRelid(rel), to_attnum);
	if (from_type != to_type ||
		(from_type != TIMESTAMPTZOID && from_type != TIMESTAMPOID && from_type != DATEOID))
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("period columns of table %s have unsupported types", zl_qualified_name(rel)),
				 errdetail("Column %s is %s and column %s is %s.", from_name,
						   format_type_be(from_type), to_name, format_type_be(to_type)),
				 errhint("Both period columns must be timestamptz, both timestamp or both date.")));
	from_typmod = TupleDescAttr(RelationGetDescr(rel), from_attnum - 1)->atttypmod;
	to_typmod = TupleDescAttr(RelationGetDescr(rel), to_attnum - 1)->atttypmod;
	if (from_typmod != to_typmod)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("period columns of table %s have different precisions", zl_qualified_name(rel)),
				 errdetail("Column %s is %s and column %s is %s.",
						   from_name, format_type_with_typemod(from_type, from_typmod),
						   to_name, format_type_with_typemod(to_type, to_typmod)),
				 errhint("Give both period columns the same type and precision.")));
	refuse_generated_column(rel, from_attnum, "period");
	refuse_generated_column(rel, to_attnum, "period");
	for (int i = 0; i < nkeys; i++)
		refuse_generated_column(rel, key_attnums[i], "key");
	refuse_period_partition_key(rel, from_attnum, to_attnum);
	*from_out = from_attnum;
	*to_out = to_attnum;
	return from_type;
}

/*
 * The layout options (arguments 4 to 9): partition unit, group spans,
 * max_subgroups, open end and time zone.  Returns the open end.
 */
static TimestampTz
check_layout_options(FunctionCallInfo fcinfo)
{
	char	   *unit;
	TimestampTz open_end;
	char	   *time_zone;

	unit = text_to_cstring(PG_GETARG_TEXT_PP(4));
	if (strcmp(unit, "day") != 0 && strcmp(unit, "month") != 0 && strcmp(unit, "year") != 0)
		refuse_option(psprintf("invalid partition unit \"%s\"", unit),
					  "Use 'day', 'month' or 'year'.");
	check_span(PG_GETARG_INTERVAL_P(5));
	check_span(PG_GETARG_INTERVAL_P(6));
	if (PG_GETARG_INT32(7) < 1)
		refuse_option(psprintf("invalid max_subgroups %d", PG_GETARG_INT32(7)),
					  "A file group holds at least one sub-group.");
	open_end = PG_GETARG_TIMESTAMPTZ(8);
	if (TIMESTAMP_IS_NOBEGIN(open_end))
		refuse_option("invalid open end -infinity",
					  "Use 'infinity' or a far-future time such as '9999-12-31'.");
	time_zone = text_to_cstring(PG_GETARG_TEXT_PP(9));
	if (!zl_meta_time_zone_exists(time_zone))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid time zone \"%s\"", time_zone),
				 errdetail("%s is not in pg_timezone_names (abbreviations such as CEST are not time zones).",
						   time_zone),
				 errhint("Use a name from pg_timezone_names, such as 'UTC' or 'Asia/Shanghai'.")));
	return open_end;
}

/*
 * timestamp and date tables keep the open end as its wall-clock value
 * (in the session's zone) at UTC, so it reads the same in every session
 */
static TimestampTz
stored_open_end(TimestampTz open_end, Oid period_type, bool open_end_converted)
{
	if (period_type != TIMESTAMPTZOID && !TIMESTAMP_NOT_FINITE(open_end) &&
		!open_end_converted)
	{
		Timestamp	local = DatumGetTimestamp(DirectFunctionCall1(timestamptz_timestamp,
																  TimestampTzGetDatum(open_end)));

		if (period_type == DATEOID)
			local = DatumGetTimestamp(DirectFunctionCall1(date_timestamp,
														  DirectFunctionCall1(timestamp_date,
																			  TimestampGetDatum(local))));
		open_end = (TimestampTz) local;
	}
	return open_end;
}

/*
 * A zipper parent (README "Scaling out"): partitioned BY HASH of key
 * columns, its partitions zipper tables, each registered as the parent
 * is (one already registered the same way is kept).
 */
static void
register_leaves(Relation parent, ArrayType *key_names)
{
	Datum	   *elems;
	int			nkeys;
	char	  **names;
	PartitionDesc pd;

	deconstruct_array(key_names, NAMEOID, NAMEDATALEN, false, TYPALIGN_CHAR, &elems, NULL, &nkeys);
	names = palloc(sizeof(char *) * nkeys);
	for (int k = 0; k < nkeys; k++)
		names[k] = NameStr(*DatumGetName(elems[k]));
	zl_parent_check(parent, names, nkeys);
	pd = RelationGetPartitionDesc(parent, true);
	for (int i = 0; i < pd->nparts; i++)
	{
		Relation	leaf = table_open(pd->oids[i], ShareUpdateExclusiveLock);

		zl_parent_register_leaf(parent, leaf);
		table_close(leaf, NoLock);
	}
}

/*
 * zipper_lake.register(tbl, key, valid_from, valid_to, partition_unit,
 * history_group_span, current_group_span, max_subgroups, open_end,
 * time_zone): every check of a registration, then the registration row
 * (written with the metadata owner's rights, zl_metadata.c).  Only the
 * table's owner registers it.
 */
static Datum
register_table(FunctionCallInfo fcinfo, bool open_end_converted)
{
	static const char *const argnames[] = {"tbl", "key", "valid_from", "valid_to",
		"partition_unit", "history_group_span", "current_group_span",
	"max_subgroups", "open_end", "time_zone"};
	Relation	rel;
	Datum		values[10];
	ArrayType  *key_names;
	char	   *key_text;
	int			nkeys;
	AttrNumber	key_attnums[INDEX_MAX_KEYS];
	AttrNumber	from_attnum,
				to_attnum;
	Oid			period_type;
	TimestampTz open_end;

	rel = open_table_to_register(fcinfo);
	nkeys = resolve_key_columns(fcinfo, rel, key_attnums, &key_names, &key_text);

	/* every other option must be given (defaults come from the SQL signature) */
	for (int i = 2; i < 10; i++)
		if (PG_ARGISNULL(i))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("registration option %s must not be null", argnames[i]),
					 errhint("Pass a value or leave the option at its default.")));

	period_type = resolve_period_columns(fcinfo, rel, key_attnums, nkeys, key_text,
										 &from_attnum, &to_attnum);
	open_end = stored_open_end(check_layout_options(fcinfo), period_type, open_end_converted);

	values[0] = ObjectIdGetDatum(RelationGetRelid(rel));
	values[1] = PointerGetDatum(key_names);
	values[2] = PG_GETARG_DATUM(2);
	values[3] = PG_GETARG_DATUM(3);
	values[4] = PG_GETARG_DATUM(4);
	values[5] = PG_GETARG_DATUM(5);
	values[6] = PG_GETARG_DATUM(6);
	values[7] = PG_GETARG_DATUM(7);
	values[8] = TimestampTzGetDatum(open_end);
	values[9] = PG_GETARG_DATUM(9);
	zl_meta_insert_registration(values);
	if (PG_NARGS() > 10 && !PG_ARGISNULL(10))
		zl_meta_set_late_horizon(RelationGetRelid(rel), checked_horizon(PG_GETARG_INTERVAL_P(10)));
	if (PG_NARGS() > 11 && !PG_ARGISNULL(11))
		zl_meta_set_track_columns(RelationGetRelid(rel),
								  checked_track_columns(rel, key_attnums, nkeys, from_attnum,
														to_attnum, PG_GETARG_ARRAYTYPE_P(11)));
	if (PG_NARGS() > 12 && !PG_ARGISNULL(12))
		zl_meta_set_history_format(RelationGetRelid(rel),
								   checked_history_format(PG_GETARG_TEXT_PP(12)));
	if (rel->rd_rel->relkind == RELKIND_PARTITIONED_TABLE)
		register_leaves(rel, key_names);
	/* cached registrations (zl_meta_registration.c) follow a commit or rollback */
	CacheInvalidateRelcache(rel);
	table_close(rel, NoLock);
	PG_RETURN_VOID();
}

/*
 * A registered table whose option (argument 1) its owner changes, opened
 * and locked: writers of the table wait for the change (its writer lock),
 * so a batch applies under one setting.  The caller sets the option, then
 * calls option_changed().
 */
static Relation
open_for_option(FunctionCallInfo fcinfo, const char *setter, const char *option,
				const char *null_means, ZLTableOptions *opts)
{
	Relation	rel;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("table must not be null"),
				 errhint("Pass the zipper table; a NULL %s %s.", option, null_means)));
	if (zl_is_partitioned_table(PG_GETARG_OID(0)))
	{
		/* a zipper parent: the option is set for it and every leaf at once */
		ZLParent   *parent;

		if (!pg_class_ownercheck(PG_GETARG_OID(0), GetUserId()))
			aclcheck_error(ACLCHECK_NOT_OWNER, OBJECT_TABLE, get_rel_name(PG_GETARG_OID(0)));
		parent = zl_parent_open(PG_GETARG_OID(0), ShareUpdateExclusiveLock);
		for (int i = 0; i < zl_parent_nleaves(parent); i++)
		{
			Relation	leaf;

			if (zl_parent_leaf_is_shard(parent, i))
				continue;		/* set on its server: option_changed */
			leaf = zl_open_zipper_table(zl_parent_leaf(parent, i), ShareUpdateExclusiveLock);
			(void) zl_write_lock_table(zl_storage_id(leaf), false);
			table_close(leaf, NoLock);
		}
		rel = zl_parent_relation(parent);
		zl_load_registration(rel, opts, true, NULL, "Register it with zipper_lake.register().");
		return rel;
	}
	rel = zl_open_owned_registered_table(PG_GETARG_OID(0), ShareUpdateExclusiveLock, opts,
										 psprintf("Register it with zipper_lake.register(), which takes %s too.",
												  option));
	zl_refuse_leaf_of_parent(rel, setter);
	(void) zl_write_lock_table(zl_storage_id(rel), false);
	return rel;
}

/*
 * cached registrations (zl_meta_registration.c) follow a commit or
 * rollback: the table's, or a zipper parent's and its leaves'; a
 * parent's shards get the same setter call (fcinfo's) on their servers
 */
static void
option_changed(Relation rel, FunctionCallInfo fcinfo)
{
	CacheInvalidateRelcache(rel);
	if (rel->rd_rel->relkind == RELKIND_PARTITIONED_TABLE)
	{
		PartitionDesc pd = RelationGetPartitionDesc(rel, true);

		for (int i = 0; i < pd->nparts; i++)
		{
			bool		isnull;

			if (zl_remote_is_shard(pd->oids[i]))
				(void) zl_remote_call(pd->oids[i], fcinfo, &isnull);
			else
				CacheInvalidateRelcacheByRelid(pd->oids[i]);
		}
	}
	table_close(rel, NoLock);
}

/* set_late_horizon(tbl, late_horizon): README "Late data" */
Datum
zipper_lake_set_late_horizon(PG_FUNCTION_ARGS)
{
	ZLTableOptions opts;
	Relation	rel = open_for_option(fcinfo, "set_late_horizon", "late_horizon", "removes the horizon", &opts);

	zl_meta_set_late_horizon(RelationGetRelid(rel),
							 PG_ARGISNULL(1) ? NULL : checked_horizon(PG_GETARG_INTERVAL_P(1)));
	option_changed(rel, fcinfo);
	PG_RETURN_VOID();
}

/*
 * set_track_columns(tbl, columns): README "Tracked columns".  Versions
 * already stored stay as they are; changes applied from now on fold with
 * the new set.
 */
Datum
zipper_lake_set_track_columns(PG_FUNCTION_ARGS)
{
	ZLTableOptions opts;
	Relation	rel = open_for_option(fcinfo, "set_track_columns", "track_columns", "tracks every value column", &opts);

	zl_meta_set_track_columns(RelationGetRelid(rel),
							  PG_ARGISNULL(1) ? NULL :
							  checked_track_columns(rel, opts.key_attnums, opts.nkeys,
													opts.from_attnum, opts.to_attnum,
													PG_GETARG_ARRAYTYPE_P(1)));
	option_changed(rel, fcinfo);
	PG_RETURN_VOID();
}

/*
 * set_history_format(tbl, format): README "Storage formats".  Sub-groups
 * already written keep their format; history written from now on takes
 * the new one.
 */
Datum
zipper_lake_set_history_format(PG_FUNCTION_ARGS)
{
	ZLTableOptions opts;
	Relation	rel;

	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("history_format must not be null"),
				 errhint("Pass 'columnar' or 'rows'.")));
	rel = open_for_option(fcinfo, "set_history_format", "history_format", "is not allowed", &opts);
	zl_meta_set_history_format(RelationGetRelid(rel),
							   checked_history_format(PG_GETARG_TEXT_PP(1)));
	option_changed(rel, fcinfo);
	PG_RETURN_VOID();
}

Datum
zipper_lake_register(PG_FUNCTION_ARGS)
{
	return register_table(fcinfo, false);
}

/*
 * zipper_lake._register() of the 0.1 install script, which converted the
 * open end itself: kept so a 0.1 installation works with this library
 * until ALTER EXTENSION UPDATE replaces it.
 */
Datum
zipper_lake_register_row(PG_FUNCTION_ARGS)
{
	return register_table(fcinfo, true);
}

/*
 * Place a table's unplaced rows.  The trigger fires as the catalog's owner
 * (the registration row is written as it), but placing runs the table's
 * own code -- index expressions, constraints, generated columns -- so it
 * runs as the table's owner, restricted, as VACUUM runs it.
 */
static void
place_as_owner(Relation rel)
{
	Oid			save_userid;
	int			save_sec_context;
	int			save_nestlevel;

	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	SetUserIdAndSecContext(rel->rd_rel->relowner, save_sec_context | SECURITY_RESTRICTED_OPERATION);
	save_nestlevel = NewGUCNestLevel();
	zl_write_place_unplaced(rel);
	AtEOXact_GUC(false, save_nestlevel);
	SetUserIdAndSecContext(save_userid, save_sec_context);
}

Datum
zipper_lake_place_unplaced_trigger(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	HeapTuple	newrow;
	bool		isnull;
	Oid			relid;
	Relation	rel;

	if (!CALLED_AS_TRIGGER(fcinfo) || !TRIGGER_FIRED_FOR_ROW(trigdata->tg_event) ||
		!TRIGGER_FIRED_BY_INSERT(trigdata->tg_event))
		elog(ERROR, "zipper_lake._place_unplaced must be an AFTER INSERT row trigger");

	if (RelationGetNamespace(trigdata->tg_relation) != get_namespace_oid(ZL_SCHEMA, false) ||
		strcmp(RelationGetRelationName(trigdata->tg_relation), "registration") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("zipper_lake._place_unplaced() only serves zipper_lake.registration"),
				 errhint("It is an internal trigger function of the extension.")));
	newrow = trigdata->tg_trigtuple;
	relid = DatumGetObjectId(heap_getattr(newrow, 1, trigdata->tg_relation->rd_att, &isnull));
	if (zl_is_partitioned_table(relid))
		return PointerGetDatum(newrow); /* a zipper parent: its leaves hold the rows */
	rel = zl_open_zipper_table(relid, ShareUpdateExclusiveLock);
	place_as_owner(rel);
	table_close(rel, NoLock);
	return PointerGetDatum(newrow);
}

Datum
zipper_lake_storage_id(PG_FUNCTION_ARGS)
{
	Relation	rel = zl_open_readable_zipper_table(PG_GETARG_OID(0));
	uint64		storage_id = zl_storage_id(rel);

	table_close(rel, AccessShareLock);
	PG_RETURN_INT64((int64) storage_id);
}

/*
 * set_retention(tbl, keep): README "Lifecycle".  VACUUM drops the history
 * that ended more than keep ago (zl_retention.c); NULL keeps it forever.
 */
Datum
zipper_lake_set_retention(PG_FUNCTION_ARGS)
{
	ZLTableOptions opts;
	Relation	rel = open_for_option(fcinfo, "set_retention", "keep", "keeps history forever", &opts);
	Interval   *keep = PG_ARGISNULL(1) ? NULL : PG_GETARG_INTERVAL_P(1);
	TimestampTz cut;

	if (keep != NULL &&
		(keep->month < 0 || keep->day < 0 || keep->time < 0 ||
		 (keep->month == 0 && keep->day == 0 && keep->time == 0)))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid retention %s",
						DatumGetCString(DirectFunctionCall1(interval_out, IntervalPGetDatum(keep)))),
				 errdetail("Table \"%s\" would keep no history.", RelationGetRelationName(rel)),
				 errhint("Pass a positive period, e.g. interval '7 years', or NULL to keep history forever.")));
	if (keep != NULL && !zl_retention_cut_time(GetCurrentTimestamp(), keep, &cut))
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("retention %s reaches beyond the earliest time",
						DatumGetCString(DirectFunctionCall1(interval_out, IntervalPGetDatum(keep)))),
				 errdetail("Table \"%s\" would drop history that ended before a time earlier than timestamps can hold.",
						   RelationGetRelationName(rel)),
				 errhint("Pass a shorter period, or NULL to keep history forever.")));
	zl_meta_set_retention(RelationGetRelid(rel), keep);
	option_changed(rel, fcinfo);
	PG_RETURN_VOID();
}
