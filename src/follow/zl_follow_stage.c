/*-------------------------------------------------------------------------
 *
 * zl_follow_stage.c
 *	  A follower's changes staged in a temporary table, then applied with
 *	  apply_changes (or, for the initial image, apply_snapshot).
 *
 * The follower adds nothing to the fold: what it decodes becomes rows of
 * the temporary table pg_temp.zl_follow_stage — the zipper table's key
 * and value columns that the source has, with the zipper table's types,
 * and three of its own: zl_follow_time (the source transaction's commit
 * time, in the period's type), zl_follow_op (I, U, D or T) and
 * zl_follow_seq (the change's own LSN: the changes of one transaction
 * share its commit time, and at one instant the highest seq wins, so the
 * last change of a key in the transaction is the one that counts, and a
 * TRUNCATE followed by inserts leaves those rows).  A batch is one
 * apply_changes call over the table (README "Change semantics"), with
 * missing_columns as follow() was given; a value column the source lacks
 * is left out of the table, so that missing_columns decides it.  Values
 * arrive as text and are read by the zipper column's type's input
 * function into a row of the table (no statement a change), so a source
 * column of another type works where its text reads as the zipper
 * column's type, and fails the batch naming the column, key and time
 * where it does not.
 *
 * pgoutput leaves out a TOASTed value an UPDATE did not change
 * ('u'); the stage then applies what it holds and reads the value the
 * key holds now from the zipper table, which, with every earlier change
 * applied in commit order, is the value the source row still has.
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "storage/zl_storage.h"
#include "catalog/zl_catalog.h"
#include "apply/zl_apply.h"
#include "follow/zl_follow_internal.h"

#include "access/heapam.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "nodes/makefuncs.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/timestamp.h"

#define STAGE_TABLE "pg_temp.zl_follow_stage"

struct ZLStage
{
	Oid			tbl;
	char	   *table_name;		/* quoted, qualified */
	char	   *missing_columns;
	char	   *period_name;	/* valid_from, quoted */
	int			ncols;			/* the zipper table's key, then value columns */
	int			nkeys;
	char	  **names;
	char	  **types;			/* format_type_with_typemod */
	Oid		   *typids;
	int32	   *typmods;
	ZLKeyHasher *key_equality;	/* the zipper table's (zl_keys_equal) */
	AttrNumber *key_attnums;	/* [nkeys]: the table's attribute numbers */
	int			natts;
	int		   *source_col;		/* the source's column index, -1: it has none */
	Oid			period_type;
	char	   *time_zone;
	MemoryContext cxt;			/* where the stage lives */
	bool		created;		/* the table exists, for this mapping */
	Oid			relid;			/* the table */
	FmgrInfo   *inputs;			/* [ncols]: the column types' input functions */
	Oid		   *ioparams;
	int64		staged;
};

ZLStage *
zl_stage_begin(Oid tbl, const char *missing_columns)
{
	ZLStage    *stage = palloc0(sizeof(ZLStage));
	Relation	rel = zl_open_zipper_table(tbl, AccessShareLock);
	TupleDesc	desc = RelationGetDescr(rel);
	ZLTableOptions opts;
	int			n = 0;

	zl_load_registration(rel, &opts, false,
						 "A follower applies changes by the key and period columns named at registration.",
						 "Register it with zipper_lake.register().");
	stage->tbl = tbl;
	stage->table_name = zl_qualified_name(rel);
	stage->missing_columns = pstrdup(missing_columns);
	stage->period_name = pstrdup(quote_identifier(NameStr(TupleDescAttr(desc, opts.from_attnum - 1)->attname)));
	stage->period_type = opts.period_type;
	stage->time_zone = pstrdup(opts.time_zone);
	stage->cxt = CurrentMemoryContext;
	stage->names = palloc(sizeof(char *) * desc->natts);
	stage->types = palloc(sizeof(char *) * desc->natts);
	stage->typids = palloc(sizeof(Oid) * desc->natts);
	stage->typmods = palloc(sizeof(int32) * desc->natts);
	stage->key_equality = zl_key_hasher_create(desc, &opts);
	stage->key_attnums = palloc(sizeof(AttrNumber) * Max(opts.nkeys, 1));
	memcpy(stage->key_attnums, opts.key_attnums, sizeof(AttrNumber) * opts.nkeys);
	stage->natts = desc->natts;
	stage->source_col = palloc(sizeof(int) * desc->natts);
	for (int k = 0; k < opts.nkeys; k++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, opts.key_attnums[k] - 1);

		stage->names[n] = pstrdup(NameStr(att->attname));
		stage->typids[n] = att->atttypid;
		stage->typmods[n] = att->atttypmod;
		stage->types[n++] = format_type_with_typemod(att->atttypid, att->atttypmod);
	}
	stage->nkeys = n;
	for (int a = 0; a < desc->natts; a++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, a);
		bool		is_key = false;

		for (int k = 0; k < opts.nkeys; k++)
			is_key |= opts.key_attnums[k] == a + 1;
		if (att->attisdropped || att->attgenerated || is_key ||
			a + 1 == opts.from_attnum || a + 1 == opts.to_attnum)
			continue;
		stage->names[n] = pstrdup(NameStr(att->attname));
		stage->typids[n] = att->atttypid;
		stage->typmods[n] = att->atttypmod;
		stage->types[n++] = format_type_with_typemod(att->atttypid, att->atttypmod);
	}
	stage->ncols = n;
	for (int i = 0; i < n; i++)
		stage->source_col[i] = -2;	/* no mapping yet */
	stage->inputs = palloc0(sizeof(FmgrInfo) * Max(n, 1));
	stage->ioparams = palloc0(sizeof(Oid) * Max(n, 1));
	table_close(rel, AccessShareLock);
	return stage;
}

/*
 * Do two stages of one table take the same columns, types and
 * missing_columns?  (A worker keeps its stage while they do: ALTER TABLE
 * on the zipper table, or set_follow(), makes a new one.)
 */
bool
zl_stage_same(ZLStage *a, ZLStage *b)
{
	if (a->ncols != b->ncols || strcmp(a->missing_columns, b->missing_columns) != 0 ||
		a->period_type != b->period_type || strcmp(a->time_zone, b->time_zone) != 0)
		return false;
	for (int i = 0; i < a->ncols; i++)
		if (strcmp(a->names[i], b->names[i]) != 0 || strcmp(a->types[i], b->types[i]) != 0)
			return false;
	return true;
}

int
zl_stage_key_count(ZLStage *stage)
{
	return stage->nkeys;
}

/*
 * Do two rows of the source (values by its column index) name the same
 * key of the zipper table?  Read as its key columns' types and compared as
 * the table compares keys (zl_keys_equal: a numeric key 2 and 2.0 are
 * one), not as the texts pgoutput sends.
 */
bool
zl_stage_same_key(ZLStage *stage, char **a, char **b)
{
	Datum	   *va = palloc0(sizeof(Datum) * stage->natts);
	Datum	   *vb = palloc0(sizeof(Datum) * stage->natts);

	for (int k = 0; k < stage->nkeys; k++)
	{
		int			c = stage->source_col[k];
		int			slot = stage->key_attnums[k] - 1;

		if (a[c] == NULL || b[c] == NULL)
			return false;
		va[slot] = InputFunctionCall(&stage->inputs[k], a[c], stage->ioparams[k], stage->typmods[k]);
		vb[slot] = InputFunctionCall(&stage->inputs[k], b[c], stage->ioparams[k], stage->typmods[k]);
	}
	return zl_keys_equal(stage->key_equality, va, vb);
}

/* the source's column index of the zipper table's i-th column (keys first), -1: none */
int
zl_stage_source_column(ZLStage *stage, int i)
{
	return stage->source_col[i];
}

static void
spi_exec(const char *sql, int expect)
{
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute(sql, false, 0) != expect)
		elog(ERROR, "staging statement failed: %s", sql);
	SPI_finish();
}

/* drop the table if this session has it (no notice when it has no temporary schema) */
static void
drop_stage(void)
{
	if (OidIsValid(RangeVarGetRelid(makeRangeVar("pg_temp", "zl_follow_stage", -1), NoLock, true)))
		spi_exec("DROP TABLE " STAGE_TABLE, SPI_OK_UTILITY);
}

/*
 * (Re)create the table for the present mapping, and look up the input
 * functions its rows are read with.
 */
static void
create_stage(ZLStage *stage)
{
	StringInfoData create;

	initStringInfo(&create);
	drop_stage();
	appendStringInfo(&create, "CREATE TEMPORARY TABLE zl_follow_stage ("
					 "zl_follow_time %s, zl_follow_op text, zl_follow_seq bigint",
					 format_type_be(stage->period_type));
	for (int i = 0; i < stage->ncols; i++)
	{
		Oid			input;

		if (stage->source_col[i] < 0)
			continue;
		appendStringInfo(&create, ", %s %s", quote_identifier(stage->names[i]), stage->types[i]);
		getTypeInputInfo(stage->typids[i], &input, &stage->ioparams[i]);
		fmgr_info_cxt(input, &stage->inputs[i], stage->cxt);
	}
	appendStringInfoString(&create, ")");
	spi_exec(create.data, SPI_OK_UTILITY);
	stage->relid = RangeVarGetRelid(makeRangeVar("pg_temp", "zl_follow_stage", -1), NoLock, false);
	stage->created = true;
}

static void
refuse_missing(ZLStage *stage, const char *column, const char *what, const char *hint)
{
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_COLUMN),
			 errmsg("column \"%s\" of zipper table %s is missing from %s", column,
					stage->table_name, what),
			 errdetail("The follower stops; nothing after the last transaction applied is lost."),
			 errhint("%s", hint)));
}

/*
 * The source's columns (a relation message's, or the image's): map the
 * zipper table's onto them by name.  A key column the source lacks stops
 * the follower; a value column, as missing_columns says.  A new mapping
 * applies what was staged under the old one first.
 */
void
zl_stage_columns(ZLStage *stage, int natts, char **names, const char *what)
{
	bool		same = stage->created;
	int		   *cols = palloc(sizeof(int) * stage->ncols);

	for (int i = 0; i < stage->ncols; i++)
	{
		cols[i] = -1;
		for (int a = 0; a < natts; a++)
			if (names[a] != NULL && strcmp(names[a], stage->names[i]) == 0)
				cols[i] = a;
		if (cols[i] < 0 && i < stage->nkeys)
			refuse_missing(stage, stage->names[i], what,
						   "A key column must come from the source; add it there, or unfollow.");
		if (cols[i] < 0 && strcmp(stage->missing_columns, "error") == 0)
			refuse_missing(stage, stage->names[i], what,
						   "Add the column to the source, drop it from the zipper table, or follow with missing_columns => 'null' or 'keep'; then call zipper_lake.resume().");
		same &= (cols[i] < 0) == (stage->source_col[i] < 0);
	}
	memcpy(stage->source_col, cols, sizeof(int) * stage->ncols);
	if (same)
		return;
	(void) zl_stage_apply(stage);
	create_stage(stage);
}

/*
 * The value the key of a row (values by the source's column index) holds
 * now for column i (an unchanged TOASTed value pgoutput left out): what is
 * staged is applied first.
 */
static char *
held_value(ZLStage *stage, int i, char **values)
{
	StringInfoData sql;
	const char **params = palloc(sizeof(char *) * stage->nkeys);
	Oid		   *types = palloc(sizeof(Oid) * stage->nkeys);
	Datum	   *args = palloc(sizeof(Datum) * stage->nkeys);
	char	   *result = NULL;
	MemoryContext caller = CurrentMemoryContext;

	(void) zl_stage_apply(stage);
	initStringInfo(&sql);
	appendStringInfo(&sql, "SELECT %s::text FROM %s WHERE ", quote_identifier(stage->names[i]),
					 stage->table_name);
	for (int k = 0; k < stage->nkeys; k++)
	{
		params[k] = values[stage->source_col[k]];
		types[k] = TEXTOID;
		args[k] = CStringGetTextDatum(params[k]);
		appendStringInfo(&sql, "%s%s = $%d::%s", k > 0 ? " AND " : "",
						 quote_identifier(stage->names[k]), k + 1, stage->types[k]);
	}
	appendStringInfo(&sql, " ORDER BY %s DESC LIMIT 1", stage->period_name);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute_with_args(sql.data, stage->nkeys, types, args, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "reading the value a key holds failed");
	if (SPI_processed == 1)
	{
		char	   *value = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);

		result = value ? MemoryContextStrdup(caller, value) : NULL;
	}
	SPI_finish();
	return result;
}

/* what a change being staged is, for the context of an error */
typedef struct StagingChange
{
	ZLStage    *stage;
	char	  **values;
	char		op;
	TimestampTz time;
	const char *column;			/* being read, or NULL */
} StagingChange;

static void
staging_context(void *arg)
{
	StagingChange *c = arg;
	StringInfoData key;

	initStringInfo(&key);
	for (int k = 0; c->op != 'T' && k < c->stage->nkeys; k++)
		appendStringInfo(&key, "%s%s=%s", k > 0 ? ", " : "", c->stage->names[k],
						 c->values[c->stage->source_col[k]] ? c->values[c->stage->source_col[k]] : "NULL");
	errcontext("change %c of key (%s) committed on the source at %s, into %s%s%s", c->op, key.data,
			   timestamptz_to_str(c->time), c->stage->table_name, c->column ? " column " : "",
			   c->column ? quote_identifier(c->column) : "");
}

/*
 * The commit time as a value of the period's type: timestamptz, or
 * timestamp in the table's time zone (follow() refuses date periods).
 */
static Datum
period_value(ZLStage *stage, TimestampTz time)
{
	if (stage->period_type == TIMESTAMPTZOID)
		return TimestampTzGetDatum(time);
	return DirectFunctionCall2(timestamptz_zone, CStringGetTextDatum(stage->time_zone),
							   TimestampTzGetDatum(time));
}

/*
 * Stage a change: op I, U, D or T, values by the source's column index
 * (unchanged[i]: pgoutput left the i-th out, and the key of the row
 * held_by -- the old row of an update that changed the key, else values
 * -- holds it), at the commit time with seq.  A delete needs only the
 * key; a truncate nothing.  A row of the temporary table, each value read
 * by its column type's input function.
 */
void
zl_stage_change(ZLStage *stage, char op, char **values, bool *unchanged, char **held_by,
				TimestampTz time, XLogRecPtr seq)
{
	Datum	   *row = palloc(sizeof(Datum) * (stage->ncols + 3));
	bool	   *nulls = palloc0(sizeof(bool) * (stage->ncols + 3));
	char		opname[2] = {op, '\0'};
	StagingChange change = {stage, values, op, time, NULL};
	ErrorContextCallback context = {error_context_stack, staging_context, &change};
	int			n = 3;
	Relation	rel;

	error_context_stack = &context;
	row[0] = period_value(stage, time);
	row[1] = CStringGetTextDatum(opname);
	row[2] = Int64GetDatum((int64) seq);
	for (int i = 0; i < stage->ncols; i++)
	{
		int			c = stage->source_col[i];
		char	   *text;

		if (c < 0)
			continue;
		if (op == 'T' || (op == 'D' && i >= stage->nkeys))
			text = NULL;
		else if (unchanged != NULL && unchanged[c])
			text = held_value(stage, i, held_by != NULL ? held_by : values);
		else
			text = values[c];
		change.column = stage->names[i];
		nulls[n] = text == NULL;
		row[n++] = text == NULL ? (Datum) 0 :
			InputFunctionCall(&stage->inputs[i], text, stage->ioparams[i], stage->typmods[i]);
		change.column = NULL;
	}
	rel = table_open(stage->relid, RowExclusiveLock);
	simple_heap_insert(rel, heap_form_tuple(RelationGetDescr(rel), row, nulls));
	table_close(rel, NoLock);
	stage->staged++;
	error_context_stack = context.previous;
}

/* run an apply function over the table (args: $1 the zipper table's oid, $2 missing_columns) */
static int64
apply_staged(ZLStage *stage, const char *sql)
{
	Oid			types[2] = {OIDOID, TEXTOID};
	Datum		args[2] = {ObjectIdGetDatum(stage->tbl), CStringGetTextDatum(stage->missing_columns)};
	int64		changes = stage->staged;

	zl_apply_by_follower = true;
	PG_TRY();
	{
		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "SPI_connect failed");
		if (SPI_execute_with_args(sql, 2, types, args, NULL, false, 0) != SPI_OK_SELECT)
			elog(ERROR, "applying the staged changes failed");
		SPI_finish();
	}
	PG_FINALLY();
	{
		zl_apply_by_follower = false;
	}
	PG_END_TRY();
	spi_exec("TRUNCATE " STAGE_TABLE, SPI_OK_UTILITY);
	stage->staged = 0;
	return changes;
}

/* apply what is staged; returns how many changes */
int64
zl_stage_apply(ZLStage *stage)
{
	if (stage->staged == 0)
		return 0;
	return apply_staged(stage,
						"SELECT * FROM zipper_lake.apply_changes($1::regclass, '" STAGE_TABLE "'::regclass,"
						" 'zl_follow_time', 'zl_follow_op', 'zl_follow_seq', false, $2)");
}

/*
 * Apply what is staged as the image at time: every key absent from it
 * is deleted then (an empty image too: the source table was empty).
 */
int64
zl_stage_apply_image(ZLStage *stage, TimestampTz time)
{
	char	   *at = DatumGetCString(DirectFunctionCall1(timestamptz_out, TimestampTzGetDatum(time)));

	if (!stage->created)
		create_stage(stage);
	return apply_staged(stage,
						psprintf("SELECT * FROM zipper_lake.apply_snapshot($1::regclass, '" STAGE_TABLE "'::regclass,"
								 " %s::timestamptz, true, true, false, $2)", quote_literal_cstr(at)));
}

void
zl_stage_end(ZLStage *stage)
{
	if (stage->created)
		drop_stage();
	stage->created = false;
}
