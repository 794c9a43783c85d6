/*-------------------------------------------------------------------------
 *
 * zl_relation.c
 *	  Helpers about a zipper table as a relation.
 *
 * Recognizing and opening a relation as a zipper table (for writing, or
 * for reading with the caller's privileges), refusing what a zipper table
 * cannot do to its rows (UPDATE, DELETE, MERGE; row-level security in the
 * functions that read it directly), and reading a catalog row as the
 * running DDL command left it (for the object access hook of zl_ddl.c).
 * Naming a table, a key or a version in messages is common/zl_describe.c's.
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "catalog/zl_catalog.h"

#include <ctype.h>

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/relation.h"
#include "access/table.h"
#include "commands/defrem.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rls.h"
#include "utils/snapmgr.h"

/*
 * The access method's routine (access/zl_tableam.c), given at load by
 * zl_tableam_init(): relations whose relcache entry points to it are
 * zipper tables.  Catalog code compares with it without depending on the
 * layer that defines it.
 */
static const struct TableAmRoutine *zipper_routine = NULL;

void
zl_set_table_am(const struct TableAmRoutine *routine)
{
	zipper_routine = routine;
}

/* is this relation a zipper_lake table? */
bool
zl_is_zipper_relation(Relation rel)
{
	return zipper_routine != NULL && rel->rd_tableam == zipper_routine;
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
	Relation	rel = try_table_open(relid, lockmode);

	/* (after the lock: a relation dropped meanwhile names nothing either) */
	if (rel == NULL)
	{
		(void) zl_relation_arg_name(relid, "tbl");
		elog(ERROR, "could not open relation with OID %u", relid);
	}

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

static Relation check_readable(Relation rel);

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
	return check_readable(zl_open_zipper_table(relid, AccessShareLock));
}

/* the same for a zipper parent (zl_parent.c), checked on the parent */
Relation
zl_open_readable_parent(Oid relid)
{
	(void) zl_relation_arg_name(relid, "tbl");
	return check_readable(table_open(relid, AccessShareLock));
}

static Relation
check_readable(Relation rel)
{
	Oid			relid = RelationGetRelid(rel);

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

/*
 * The table a table rewrite rewrites, when rel is the transient relation it
 * fills; after the rewrite its file becomes the table's (VACUUM FULL,
 * ALTER TABLE forms that rewrite, SET ACCESS METHOD).  make_new_heap
 * records it in pg_class.relrewrite; while that row is being made
 * (relation_set_new_filenode) it is known by the name make_new_heap gives
 * the relation, "pg_temp_<oid>" in the table's schema, and by the lock the
 * rewrite holds on the table.  InvalidOid for any other relation.
 */
Oid
zl_rewritten_table(Relation rel)
{
	const char *name = RelationGetRelationName(rel);
	char	   *end;
	unsigned long oid;
	Relation	original;
	bool		rewritten;

	if (OidIsValid(rel->rd_rel->relrewrite))
		return rel->rd_rel->relrewrite;
	if (strncmp(name, "pg_temp_", 8) != 0 || !isdigit((unsigned char) name[8]))
		return InvalidOid;
	errno = 0;
	oid = strtoul(name + 8, &end, 10);
	if (errno != 0 || *end != '\0' || oid == InvalidOid || oid > PG_UINT32_MAX ||
		(Oid) oid == RelationGetRelid(rel) ||
		(original = try_relation_open((Oid) oid, NoLock)) == NULL)
		return InvalidOid;
	rewritten = RelationGetNamespace(original) == RelationGetNamespace(rel) &&
		CheckRelationLockedByMe(original, AccessExclusiveLock, true);
	relation_close(original, NoLock);
	return rewritten ? (Oid) oid : InvalidOid;
}
