/*-------------------------------------------------------------------------
 *
 * zl_create.c
 *	  zipper_lake.create_table(): a zipper table derived from a source table.
 *
 * The new table has the source's columns (with their defaults and
 * comments) plus the two period columns, timestamptz NOT NULL, and is
 * registered with the source's primary key as key.  An unqualified name is
 * created where CREATE TABLE would create it (the first schema of the
 * caller's search_path); the statement names everything qualified, so
 * nothing of the caller's search_path is resolved while it runs.
 *
 * The options are register()'s: a NULL option means "register()'s
 * default", and register() is called with only the options given, so its
 * SQL signature is the one place where the defaults are written (README
 * "Reference").  With partitions => n the table is a zipper parent
 * (README "Scaling out"): partitioned BY HASH of the key, with n zipper
 * partitions <name>_0 .. <name>_<n-1>, which register() registers too.
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "catalog/zl_catalog.h"

#include "access/genam.h"
#include "access/relation.h"
#include "access/table.h"
#include "catalog/index.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "nodes/makefuncs.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/relcache.h"
#include "utils/varlena.h"

PG_FUNCTION_INFO_V1(zipper_lake_create_table);

/* register()'s options after tbl and key, in the order of its signature */
static const struct
{
	const char *name;
	Oid			type;
}			register_options[] = {
	{"valid_from", NAMEOID},
	{"valid_to", NAMEOID},
	{"partition_unit", TEXTOID},
	{"history_group_span", INTERVALOID},
	{"current_group_span", INTERVALOID},
	{"max_subgroups", INT4OID},
	{"open_end", TIMESTAMPTZOID},
	{"time_zone", TEXTOID},
	{"late_horizon", INTERVALOID},
	{"track_columns", TEXTARRAYOID},
	{"history_format", TEXTOID},
};

#define FIRST_OPTION_ARG 2
#define PARTITIONS_ARG (FIRST_OPTION_ARG + lengthof(register_options))
#define MAX_PARTITIONS 1024

/*
 * partitions => n: "PARTITION BY HASH (<key>)", and the n partitions
 * <name>_0 .. <name>_<n-1> made after the parent (README "Scaling out").
 */
static char *
partition_clause(FunctionCallInfo fcinfo, ArrayType *key)
{
	StringInfoData clause;
	Datum	   *names;
	int			nkeys;
	int			n = PG_GETARG_INT32(PARTITIONS_ARG);

	if (n < 1 || n > MAX_PARTITIONS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid number of partitions %d", n),
				 errdetail("A zipper parent has from 1 to %d hash partitions.", MAX_PARTITIONS),
				 errhint("Pass partitions => a number such as the cores or servers the table should spread over, or NULL for one table.")));
	deconstruct_array(key, TEXTOID, -1, false, TYPALIGN_INT, &names, NULL, &nkeys);
	initStringInfo(&clause);
	appendStringInfoString(&clause, " PARTITION BY HASH (");
	for (int k = 0; k < nkeys; k++)
		appendStringInfo(&clause, "%s%s", k > 0 ? ", " : "",
						 quote_identifier(TextDatumGetCString(names[k])));
	appendStringInfoChar(&clause, ')');
	return clause.data;
}

static void
create_partitions(FunctionCallInfo fcinfo, const char *schema, const char *name)
{
	int			n = PG_GETARG_INT32(PARTITIONS_ARG);
	StringInfoData sql;

	if (strlen(name) + 1 + snprintf(NULL, 0, "%d", n - 1) >= NAMEDATALEN)
		ereport(ERROR,
				(errcode(ERRCODE_NAME_TOO_LONG),
				 errmsg("table name \"%s\" is too long for its partitions' names", name),
				 errdetail("The partitions are named %s_0 to %s_%d.", name, name, n - 1),
				 errhint("Pass a name of at most %d bytes.",
						 (int) (NAMEDATALEN - 2 - snprintf(NULL, 0, "%d", n - 1)))));
	initStringInfo(&sql);
	for (int i = 0; i < n; i++)
	{
		resetStringInfo(&sql);
		appendStringInfo(&sql, "CREATE TABLE %s PARTITION OF %s"
						 " FOR VALUES WITH (MODULUS %d, REMAINDER %d) USING zipper_lake",
						 quote_qualified_identifier(schema, psprintf("%s_%d", name, i)),
						 quote_qualified_identifier(schema, name), n, i);
		if (SPI_execute(sql.data, false, 0) != SPI_OK_UTILITY)
			elog(ERROR, "creating a partition failed: %s", sql.data);
	}
}

/* the source's primary key columns, in key order, as a text[] */
static ArrayType *
primary_key_of(Relation source)
{
	Oid			index_oid = RelationGetPrimaryKeyIndex(source);
	Relation	index;
	Datum	   *names;
	int			nkeys;

	if (!OidIsValid(index_oid))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TABLE_DEFINITION),
				 errmsg("source table %s has no primary key", zl_qualified_name(source)),
				 errhint("Add a primary key to the source, or create the table yourself and call zipper_lake.register().")));
	index = index_open(index_oid, AccessShareLock);
	nkeys = index->rd_index->indnkeyatts;
	names = palloc(sizeof(Datum) * nkeys);
	for (int i = 0; i < nkeys; i++)
		names[i] = CStringGetTextDatum(get_attname(RelationGetRelid(source),
												   index->rd_index->indkey.values[i], false));
	index_close(index, AccessShareLock);
	return construct_array(names, nkeys, TEXTOID, -1, false, TYPALIGN_INT);
}

Datum
zipper_lake_create_table(PG_FUNCTION_ARGS)
{
	RangeVar   *target;
	Oid			namespace;
	Relation	source;
	const char *period[2];
	char	   *source_name;
	ArrayType  *key;
	StringInfoData sql;
	Datum		values[2 + lengthof(register_options)];
	Oid			types[2 + lengthof(register_options)];
	int			nparams = 0;
	Oid			created;
	bool		partitioned = PG_NARGS() > PARTITIONS_ARG && !PG_ARGISNULL(PARTITIONS_ARG);

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", PG_ARGISNULL(1) ? "source table" : "table name"),
				 errhint("Pass the new table's name and the source table, e.g. zipper_lake.create_table('account_hist', 'account').")));

	target = makeRangeVarFromNameList(textToQualifiedNameList(PG_GETARG_TEXT_PP(0)));
	namespace = RangeVarGetCreationNamespace(target);

	(void) zl_relation_arg_name(PG_GETARG_OID(1), "source");
	source = relation_open(PG_GETARG_OID(1), AccessShareLock);
	source_name = zl_qualified_name(source);
	key = primary_key_of(source);
	for (int p = 0; p < 2; p++)
	{
		period[p] = PG_ARGISNULL(FIRST_OPTION_ARG + p) ? register_options[p].name :
			NameStr(*PG_GETARG_NAME(FIRST_OPTION_ARG + p));
		if (get_attnum(RelationGetRelid(source), period[p]) != InvalidAttrNumber)
			ereport(ERROR,
					(errcode(ERRCODE_DUPLICATE_COLUMN),
					 errmsg("source table %s already has a column named %s",
							source_name, period[p]),
					 errhint("Pass other period column names with valid_from => and valid_to =>.")));
	}
	relation_close(source, AccessShareLock);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	initStringInfo(&sql);
	appendStringInfo(&sql,
					 "CREATE TABLE %s (LIKE %s INCLUDING DEFAULTS INCLUDING COMMENTS,"
					 " %s pg_catalog.timestamptz NOT NULL, %s pg_catalog.timestamptz NOT NULL)%s",
					 quote_qualified_identifier(get_namespace_name(namespace), target->relname),
					 source_name, quote_identifier(period[0]), quote_identifier(period[1]),
					 partitioned ? partition_clause(fcinfo, key) : " USING zipper_lake");
	if (SPI_execute(sql.data, false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "creating the zipper table failed: %s", sql.data);
	if (partitioned)
		create_partitions(fcinfo, get_namespace_name(namespace), target->relname);
	CommandCounterIncrement();
	created = get_relname_relid(target->relname, namespace);

	/* register() with the options given; the others take its defaults */
	resetStringInfo(&sql);
	appendStringInfoString(&sql, "SELECT zipper_lake.register($1, $2");
	values[nparams] = ObjectIdGetDatum(created);
	types[nparams++] = REGCLASSOID;
	values[nparams] = PointerGetDatum(key);
	types[nparams++] = TEXTARRAYOID;
	for (int i = 0; i < lengthof(register_options); i++)
	{
		if (PG_ARGISNULL(FIRST_OPTION_ARG + i))
			continue;
		values[nparams] = PG_GETARG_DATUM(FIRST_OPTION_ARG + i);
		types[nparams++] = register_options[i].type;
		appendStringInfo(&sql, ", %s => $%d", register_options[i].name, nparams);
	}
	appendStringInfoChar(&sql, ')');
	if (SPI_execute_with_args(sql.data, nparams, types, values, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "registering the zipper table failed: %s", sql.data);
	SPI_finish();
	PG_RETURN_OID(created);
}
