/*-------------------------------------------------------------------------
 *
 * zl_relation.c
 *	  Helpers about a zipper table as a relation.
 *
 * Recognizing and opening a relation as a zipper table (for writing, or
 * for reading with the caller's privileges), refusing what a zipper table
 * cannot do to its rows (UPDATE, DELETE, MERGE; row-level security in the
 * functions that read it directly), naming a table, a key or a version in
 * error messages, and reading a catalog row as the running DDL command
 * left it (for the object access hook of zl_ddl.c).  Every layer uses them; they use nothing of
 * the extension but the registration's attribute numbers.
 *
 *-------------------------------------------------------------------------
 */
#include "zipper_lake.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "commands/defrem.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rls.h"
#include "utils/snapmgr.h"

/* is this relation a zipper_lake table? */
bool
zl_is_zipper_relation(Relation rel)
{
	return rel->rd_tableam == &zl_table_am_routine;
}

/*
 * The name of a relation passed to a function as its regclass argument
 * (argument: the argument's name), or a clear error: a regclass written
 * as a number (0, or the OID of a dropped relation) names nothing, and
 * opening it would fail with an internal error.
 */
char *
zl_relation_arg_name(Oid relid, const char *argument)
{
	char	   *name = get_rel_name(relid);

	if (name == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", relid),
				 errdetail("Argument %s names no relation.", argument),
				 errhint("Pass the relation by name, e.g. 'public.account'; a number is taken as the OID of a relation.")));
	return name;
}

/* open the tbl argument of a function and make sure it is a zipper table */
Relation
zl_open_zipper_table(Oid relid, LOCKMODE lockmode)
{
	Relation	rel;

	(void) zl_relation_arg_name(relid, "tbl");
	rel = table_open(relid, lockmode);

	if (!zl_is_zipper_relation(rel))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("table \"%s\" does not use the zipper_lake access method",
						RelationGetRelationName(rel)),
				 errdetail("Its access method is %s.",
						   OidIsValid(rel->rd_rel->relam) ? get_am_name(rel->rd_rel->relam) : "none"),
				 errhint("Create it with CREATE TABLE ... USING zipper_lake, or with zipper_lake.create_table().")));
	return rel;
}

/*
 * A registered zipper table that its owner changes (options, drop_history,
 * erase: owner only, like VACUUM), opened with lockmode and its
 * registration loaded as writers load it; unregistered_hint says how to
 * register it.
 */
Relation
zl_open_owned_registered_table(Oid relid, LOCKMODE lockmode, ZLTableOptions *opts,
							   const char *unregistered_hint)
{
	Relation	rel;
	char	   *name = zl_relation_arg_name(relid, "tbl");

	if (!pg_class_ownercheck(relid, GetUserId()))
		aclcheck_error(ACLCHECK_NOT_OWNER, OBJECT_TABLE, name);
	rel = zl_open_zipper_table(relid, lockmode);
	zl_load_registration(rel, opts, true, NULL, unregistered_hint);
	return rel;
}

/*
 * The registration of a zipper table into opts (for_write: as writers
 * load it, see zl_meta_load_options), or an error saying the table is not
 * registered, with why that matters here (detail, may be NULL) and what
 * to do (hint).
 */
void
zl_load_registration(Relation rel, ZLTableOptions *opts, bool for_write, const char *detail,
					 const char *hint)
{
	if (!zl_meta_load_options(rel, opts, for_write))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table \"%s\" is not registered", RelationGetRelationName(rel)),
				 detail ? errdetail("%s", detail) : 0,
				 errhint("%s", hint)));
}

/*
 * A zipper table the caller may read (inspect, inspect_record, verify, the
 * read helpers): with SELECT on it, and no row-level security hiding rows
 * whose counts and times the metadata would show.  GetUserId() is the
 * caller here: these functions are not SECURITY DEFINER, and run as the
 * extension's owner only inside the catalog statements (zl_metadata.c),
 * after this check.
 */
Relation
zl_open_readable_zipper_table(Oid relid)
{
	Relation	rel = zl_open_zipper_table(relid, AccessShareLock);

	if (pg_class_aclcheck(relid, GetUserId(), ACL_SELECT) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for table %s", RelationGetRelationName(rel)),
				 errdetail("Role \"%s\" lacks SELECT on table %s.",
						   GetUserNameFromId(GetUserId(), false), zl_qualified_name(rel)),
				 errhint("The functions that show a zipper table's rows, metadata or change record need SELECT on the table itself.")));
	zl_refuse_row_security(rel);
	return rel;
}

/*
 * The helpers read the table directly, where row-level security policies
 * would not apply: refuse tables that have them in force.
 */
void
zl_refuse_row_security(Relation rel)
{
	if (check_enable_rls(RelationGetRelid(rel), InvalidOid, true) == RLS_ENABLED)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("zipper_lake functions do not support row-level security"),
				 errdetail("Table \"%s\" has row-level security enabled for this user.",
						   RelationGetRelationName(rel)),
				 errhint("Query the table with plain SQL on its period columns, which applies the policies.")));
}

/* UPDATE, DELETE and MERGE: the executor hook and the AM callbacks refuse them alike */
void
zl_refuse_row_change(Relation rel, CmdType command)
{
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("zipper_lake tables do not support %s",
					command == CMD_UPDATE ? "UPDATE" :
					command == CMD_DELETE ? "DELETE" : "MERGE"),
			 errdetail("Table \"%s\" keeps immutable versions.", RelationGetRelationName(rel)),
			 errhint(ZL_HINT_APPLY)));
}

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

/*
 * A catalog row as the running command left it: the object access hook
 * runs before the command's own changes are visible to catalog snapshots,
 * so read with SnapshotSelf.  A copy, or NULL.
 */
HeapTuple
zl_catalog_row_as_written(Oid catalog, Oid index, int nkeys, ScanKey keys)
{
	Relation	rel = table_open(catalog, AccessShareLock);
	SysScanDesc scan;
	HeapTuple	tuple;

	scan = systable_beginscan(rel, index, true, SnapshotSelf, nkeys, keys);
	tuple = systable_getnext(scan);
	if (tuple != NULL)
		tuple = heap_copytuple(tuple);
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return tuple;
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
