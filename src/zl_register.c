/*-------------------------------------------------------------------------
 *
 * zl_register.c
 *	  SQL-callable pieces of registration.
 *
 * zipper_lake.register() (SQL) validates its arguments and calls
 * zipper_lake._register(), which checks that the caller owns the table
 * and writes the registration row with the metadata owner's rights.  A
 * trigger on zipper_lake.registration places rows loaded before the
 * registration existed — after register() and equally when pg_restore
 * loads the registration after the table's data.
 *
 *-------------------------------------------------------------------------
 */
#include "zipper_lake.h"

#include "access/relation.h"
#include "access/table.h"
#include "commands/trigger.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "catalog/namespace.h"
#include "catalog/pg_inherits.h"
#include "commands/defrem.h"
#include "utils/acl.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"

PG_FUNCTION_INFO_V1(zipper_lake_register_row);
PG_FUNCTION_INFO_V1(zipper_lake_place_unplaced_trigger);
PG_FUNCTION_INFO_V1(zipper_lake_storage_id);

/* open a relation and make sure it is a zipper table */
Relation
zl_open_zipper_table(Oid relid, LOCKMODE lockmode)
{
	Relation	rel = table_open(relid, lockmode);

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

Datum
zipper_lake_register_row(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	Relation	rel = zl_open_zipper_table(relid, ShareUpdateExclusiveLock);
	Datum		values[10];

	if (!pg_class_ownercheck(relid, GetUserId()))
		aclcheck_error(ACLCHECK_NOT_OWNER, OBJECT_TABLE, RelationGetRelationName(rel));

	for (int i = 0; i < 10; i++)
	{
		if (PG_ARGISNULL(i))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("registration argument %d is null", i + 1),
					 errhint("Pass a value for every option or leave it at its default.")));
		values[i] = PG_GETARG_DATUM(i);
	}
	/* writers of the table wait, then see the registration (zl_write.c) */
	(void) zl_write_lock_table(zl_storage_id(rel), false);
	zl_meta_insert_registration(values);
	/* cached registrations (zl_metadata.c) follow a commit or rollback */
	CacheInvalidateRelcache(rel);
	table_close(rel, NoLock);
	PG_RETURN_VOID();
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
	rel = zl_open_zipper_table(relid, ShareUpdateExclusiveLock);
	zl_write_place_unplaced(rel);
	table_close(rel, NoLock);
	return PointerGetDatum(newrow);
}

/* a zipper table the caller may read (inspect, verify) */
Relation
zl_open_readable_zipper_table(Oid relid)
{
	Relation	rel = zl_open_zipper_table(relid, AccessShareLock);
	AclResult	aclresult = pg_class_aclcheck(relid, GetUserId(), ACL_SELECT);

	if (aclresult != ACLCHECK_OK)
		aclcheck_error(aclresult, OBJECT_TABLE, RelationGetRelationName(rel));
	return rel;
}

/*
 * ALTER TABLE ... ALTER COLUMN ... TYPE (or COLLATE) on a registered key or
 * period column would change how keys hash and compare, or how periods
 * read, under rows already stored and placed: refuse it, on the table and
 * on every zipper table the command recurses to.  (Renames and drops are
 * caught after the fact by an event trigger in the install script.)
 */
void
zl_refuse_registered_column_retype(AlterTableStmt *stmt)
{
	Oid			relid = RangeVarGetRelid(stmt->relation, NoLock, true);
	List	   *relids;
	ListCell   *lc;

	if (!OidIsValid(relid))
		return;
	relids = stmt->relation->inh ? find_all_inheritors(relid, NoLock, NULL) : list_make1_oid(relid);
	foreach(lc, relids)
	{
		Relation	rel = try_relation_open(lfirst_oid(lc), NoLock);
		ZLTableOptions opts;
		ListCell   *lc2;

		if (rel == NULL)
			continue;
		if (!zl_is_zipper_relation(rel) || !zl_meta_load_options(rel, &opts, false))
		{
			relation_close(rel, NoLock);
			continue;
		}
		foreach(lc2, stmt->cmds)
		{
			AlterTableCmd *cmd = lfirst(lc2);
			AttrNumber	attnum;
			bool		registered = false;

			if (cmd->subtype != AT_AlterColumnType || cmd->name == NULL)
				continue;
			attnum = get_attnum(RelationGetRelid(rel), cmd->name);
			registered = attnum == opts.from_attnum || attnum == opts.to_attnum;
			for (int i = 0; i < opts.nkeys; i++)
				registered |= attnum == opts.key_attnums[i];
			if (registered)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot change the type of registered column \"%s\" of zipper table \"%s\"",
								cmd->name, RelationGetRelationName(rel)),
						 errdetail("Stored versions are placed and their keys hashed by the column's type and collation."),
						 errhint("Create a new zipper table with the new type and copy the rows with INSERT ... SELECT.")));
		}
		relation_close(rel, NoLock);
	}
}

Datum
zipper_lake_storage_id(PG_FUNCTION_ARGS)
{
	Relation	rel = zl_open_readable_zipper_table(PG_GETARG_OID(0));
	uint64		storage_id = zl_storage_id(rel);

	table_close(rel, AccessShareLock);
	PG_RETURN_INT64((int64) storage_id);
}
