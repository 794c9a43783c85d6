/*-------------------------------------------------------------------------
 *
 * zl_triggers.c
 *	  Row-level AFTER triggers are refused on zipper tables.
 *
 * The executor queues a row-level AFTER event with the row's TID and
 * fetches the row by that TID when the event fires.  A row inserted into a
 * zipper table has no TID yet: it is buffered with the rest of the
 * statement and gets its place only when its sorted sub-group is written
 * (README "Features and how they work", INSERT / COPY), so the trigger
 * would see no row at all (NEW is null).  Supporting them would take a
 * second copy of every row kept for the trigger queue under a made-up TID,
 * which deferred triggers would fetch after the flush when it means
 * nothing; foreign keys on top of that lock rows and check their
 * visibility, which immutable versions do not have; and apply_changes,
 * the way zipper tables are meant to change, fires no triggers at all.  So
 * they are refused when created, by every route: CREATE TRIGGER and
 * CREATE CONSTRAINT TRIGGER on the table, triggers of a partitioned table
 * cloned to a zipper partition (CREATE TRIGGER on the parent, CREATE TABLE
 * ... PARTITION OF, ATTACH PARTITION), and the triggers foreign keys
 * create.  All of them go through CreateTrigger, which calls the object
 * access hook (zl_ddl.c) for the new pg_trigger row: that is where they
 * are refused.
 *
 * BEFORE row triggers and statement triggers, also with transition tables
 * (whose rows are copied from the executor's slots, not fetched by TID),
 * work for INSERT and COPY.  A row-level AFTER INSERT trigger that exists
 * anyway (created by zipper_lake 0.1, which accepted them) makes INSERT and
 * COPY fail instead of firing without its row.
 *
 *-------------------------------------------------------------------------
 */
#include "catalog/zl_catalog.h"
#include "access/zl_access_internal.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/relation.h"
#include "access/table.h"
#include "catalog/pg_class.h"
#include "catalog/pg_constraint.h"
#include "catalog/pg_trigger.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"


#define HINT_TRIGGERS "Use a BEFORE row trigger, or an AFTER statement trigger with REFERENCING NEW TABLE to see the inserted rows."

/* a catalog row by its oid, as the running command left it; a copy or NULL */
static HeapTuple
catalog_row(Oid catalog, Oid oid_index, AttrNumber oid_attnum, Oid oid)
{
	ScanKeyData key;

	ScanKeyInit(&key, oid_attnum, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(oid));
	return zl_catalog_row_as_written(catalog, oid_index, 1, &key);
}

/* a trigger was just created (zl_ddl.c): refuse a row-level AFTER one */
void
zl_refuse_new_trigger(Oid trigger_oid)
{
	HeapTuple	tuple = catalog_row(TriggerRelationId, TriggerOidIndexId,
									Anum_pg_trigger_oid, trigger_oid);
	Form_pg_trigger trigger;
	Relation	rel;
	bool		zipper;
	char	   *relname;
	char	   *conname = NULL;
	char		contype = 0;

	if (!HeapTupleIsValid(tuple))
		return;
	trigger = (Form_pg_trigger) GETSTRUCT(tuple);
	if (!TRIGGER_FOR_ROW(trigger->tgtype) || !TRIGGER_FOR_AFTER(trigger->tgtype) ||
		get_rel_relkind(trigger->tgrelid) != RELKIND_RELATION)
		return;

	/* the command creating the trigger holds a lock on the table */
	rel = relation_open(trigger->tgrelid, NoLock);
	zipper = zl_is_zipper_relation(rel);
	relname = pstrdup(RelationGetRelationName(rel));
	relation_close(rel, NoLock);
	if (!zipper)
		return;

	if (OidIsValid(trigger->tgconstraint))
	{
		HeapTuple	con = catalog_row(ConstraintRelationId, ConstraintOidIndexId,
									  Anum_pg_constraint_oid, trigger->tgconstraint);

		if (HeapTupleIsValid(con))
		{
			conname = pstrdup(NameStr(((Form_pg_constraint) GETSTRUCT(con))->conname));
			contype = ((Form_pg_constraint) GETSTRUCT(con))->contype;
		}
	}

	if (contype == CONSTRAINT_FOREIGN)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("zipper_lake tables do not support foreign keys"),
				 errdetail("Foreign key constraint \"%s\" would check rows of zipper table \"%s\" with row-level AFTER triggers.",
						   conname, relname),
				 errhint("Check references before loading or applying the rows; a zipper table can neither reference nor be referenced by a foreign key.")));
	if (OidIsValid(trigger->tgparentid))
	{
		HeapTuple	parent = catalog_row(TriggerRelationId, TriggerOidIndexId,
										 Anum_pg_trigger_oid, trigger->tgparentid);
		Oid			parent_relid = HeapTupleIsValid(parent) ?
			((Form_pg_trigger) GETSTRUCT(parent))->tgrelid : InvalidOid;

		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("zipper_lake tables do not support row-level AFTER triggers"),
				 errdetail("Trigger \"%s\" of partitioned table \"%s\" would be cloned to its partition \"%s\", a zipper table.",
						   NameStr(trigger->tgname),
						   OidIsValid(parent_relid) ? get_rel_name(parent_relid) : "?",
						   relname),
				 errhint(HINT_TRIGGERS)));
	}
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("zipper_lake tables do not support row-level AFTER triggers"),
			 errdetail("%s \"%s\" on zipper table \"%s\" would fire after each row; rows get their place in the table only when the statement's sub-groups are written.",
					   contype == CONSTRAINT_TRIGGER ? "Constraint trigger" : "Trigger",
					   NameStr(trigger->tgname), relname),
			 errhint(HINT_TRIGGERS)));
}

/*
 * INSERT and COPY: refuse a table with a row-level AFTER INSERT trigger
 * created before they were refused, rather than fire it without its row.
 */
void
zl_refuse_after_row_triggers(Relation rel)
{
	TriggerDesc *trigdesc = rel->trigdesc;

	if (trigdesc == NULL || !trigdesc->trig_insert_after_row)
		return;
	for (int i = 0; i < trigdesc->numtriggers; i++)
	{
		Trigger    *trigger = &trigdesc->triggers[i];

		if (TRIGGER_TYPE_MATCHES(trigger->tgtype, TRIGGER_TYPE_ROW, TRIGGER_TYPE_AFTER,
								 TRIGGER_TYPE_INSERT))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("zipper_lake tables do not support row-level AFTER triggers"),
					 errdetail("Zipper table \"%s\" has row-level AFTER INSERT trigger \"%s\", created before such triggers were refused.",
							   RelationGetRelationName(rel), trigger->tgname),
					 errhint("Drop the trigger (for a foreign key: the constraint). " HINT_TRIGGERS)));
	}
}

/*
 * A table becoming a zipper table (ALTER TABLE ... SET ACCESS METHOD
 * zipper_lake, zl_tableam.c) must not bring a row-level AFTER trigger of
 * any event along: none could be created on it.
 */
void
zl_refuse_conversion_triggers(Relation rel)
{
	TriggerDesc *trigdesc = rel->trigdesc;

	for (int i = 0; trigdesc != NULL && i < trigdesc->numtriggers; i++)
	{
		Trigger    *trigger = &trigdesc->triggers[i];

		if (TRIGGER_FOR_ROW(trigger->tgtype) && TRIGGER_FOR_AFTER(trigger->tgtype))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("table \"%s\" with a row-level AFTER trigger cannot become a zipper table",
							RelationGetRelationName(rel)),
					 errdetail("Trigger \"%s\" is a row-level AFTER trigger; zipper tables do not support them.",
							   trigger->tgname),
					 errhint("Drop the trigger (for a foreign key: the constraint) first. " HINT_TRIGGERS)));
	}
}
