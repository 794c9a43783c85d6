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
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#define MESSAGE_VALUE_BYTES	64	/* of a value in a message, at most */

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

/* a value's text for a message: "...", its first MESSAGE_VALUE_BYTES bytes at most */
char *
zl_describe_value_text(const char *text)
{
	int			len = strlen(text);

	if (len <= MESSAGE_VALUE_BYTES)
		return psprintf("\"%s\"", text);
	return psprintf("\"%.*s...\"", pg_mbcliplen(text, len, MESSAGE_VALUE_BYTES), text);
}

/*
 * In a PG_CATCH block, for a value that failed to convert to its column's
 * type: throw the error caught again with this detail (after its own, if
 * it has one) and hint (unless it has one), if it is a data exception or
 * an integrity violation (a domain's check); any other error as it is.
 * memory is where the caught error is copied (not ErrorContext); detail
 * may live in ErrorContext (made by an error context callback).  Nothing
 * but copying is done between catching and throwing.
 */
void
zl_rethrow_conversion_error(MemoryContext memory, const char *detail, const char *hint)
{
	ErrorData  *edata;
	int			class;
	char	   *added;

	MemoryContextSwitchTo(memory);
	edata = CopyErrorData();
	class = ERRCODE_TO_CATEGORY(edata->sqlerrcode);
	if (detail == NULL ||
		(class != ERRCODE_DATA_EXCEPTION && class != ERRCODE_INTEGRITY_CONSTRAINT_VIOLATION))
		PG_RE_THROW();
	added = pstrdup(detail);
	FlushErrorState();
	edata->detail = edata->detail == NULL ? added : psprintf("%s\n%s", edata->detail, added);
	if (edata->hint == NULL)
		edata->hint = pstrdup(hint);
	ReThrowError(edata);
}
