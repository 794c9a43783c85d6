/*-------------------------------------------------------------------------
 *
 * zl_describe.c
 *	  Naming a table, a column, a key or a version in messages, and which
 *	  columns of a registered table are its key or its values.
 *
 * Every layer reports errors about keys and versions; these use nothing
 * of the extension but the registration's attribute numbers and the
 * instants of zl_time.c.
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"

#include "access/htup_details.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

/* "public.acct": how messages name the table */
char *
zl_qualified_name(Relation rel)
{
	return quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
									  RelationGetRelationName(rel));
}

/* "(id, region)=(7, eu)" for error details */
char *
zl_describe_key(const ZLTableOptions *opts, TupleDesc tupdesc, HeapTuple tuple)
{
	StringInfoData names;
	StringInfoData values;

	initStringInfo(&names);
	initStringInfo(&values);
	for (int i = 0; i < opts->nkeys; i++)
	{
		AttrNumber	attnum = opts->key_attnums[i];
		Form_pg_attribute att = TupleDescAttr(tupdesc, attnum - 1);
		bool		isnull;
		Datum		d = heap_getattr(tuple, attnum, tupdesc, &isnull);

		if (i > 0)
		{
			appendStringInfoString(&names, ", ");
			appendStringInfoString(&values, ", ");
		}
		appendStringInfoString(&names, quote_identifier(NameStr(att->attname)));
		if (isnull)
			appendStringInfoString(&values, "null");
		else
		{
			Oid			outfunc;
			bool		varlena;

			getTypeOutputInfo(att->atttypid, &outfunc, &varlena);
			appendStringInfoString(&values, OidOutputFunctionCall(outfunc, d));
		}
	}
	return psprintf("(%s)=(%s)", names.data, values.data);
}

/* the name of a column by number */
const char *
zl_attname(TupleDesc tupdesc, AttrNumber attnum)
{
	return NameStr(TupleDescAttr(tupdesc, attnum - 1)->attname);
}

/* "key (id)=(7), valid_from ..., valid_to ..." for error details */
char *
zl_describe_version(const ZLTableOptions *opts, TupleDesc tupdesc, HeapTuple tuple)
{
	AttrNumber	period[2] = {opts->from_attnum, opts->to_attnum};
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfo(&buf, "key %s", zl_describe_key(opts, tupdesc, tuple));
	for (int i = 0; i < 2; i++)
	{
		bool		isnull;
		Datum		d = heap_getattr(tuple, period[i], tupdesc, &isnull);

		appendStringInfo(&buf, ", %s %s", zl_attname(tupdesc, period[i]),
						 isnull ? "null" :
						 zl_instant_to_cstring(zl_datum_to_instant(d, opts->period_type),
											   opts->period_type));
	}
	return buf.data;
}

/* is attnum one of the registered key's columns? */
bool
zl_is_key_column(const ZLTableOptions *opts, AttrNumber attnum)
{
	for (int k = 0; k < opts->nkeys; k++)
		if (opts->key_attnums[k] == attnum)
			return true;
	return false;
}

/*
 * A value column: what changes give and versions compare — not dropped,
 * generated (computed from the others), key or period.
 */
bool
zl_is_value_column(const ZLTableOptions *opts, Form_pg_attribute att)
{
	return !att->attisdropped && !att->attgenerated && !zl_is_key_column(opts, att->attnum) &&
		att->attnum != opts->from_attnum && att->attnum != opts->to_attnum;
}
