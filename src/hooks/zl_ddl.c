/*-------------------------------------------------------------------------
 *
 * zl_ddl.c
 *	  DDL on zipper tables: one path for every route.
 *
 * Three promises hold however a command reaches a zipper table:
 *
 *  - Its metadata goes with it.  Dropping a zipper table — DROP TABLE,
 *    DROP SCHEMA ... CASCADE, DROP OWNED, a cascade from a type — and
 *    converting one to another access method (ALTER TABLE ... SET ACCESS
 *    METHOD swaps the files, then drops the transient relation that now
 *    holds the zipper storage) all end in the drop of a relation that has
 *    a zipper_lake file.  object_access_hook sees each such drop (OAT_DROP,
 *    before the catalog rows go); the storage id in that file's metapage
 *    names the table it was registered for, whose registration, sub-groups,
 *    masks and free extents are deleted (zl_meta_forget_table).  TRUNCATE
 *    replaces a file: relation_set_new_filenode forgets the old storage.
 *
 *  - Row-level AFTER triggers are refused when created, by every route
 *    (zl_triggers.c): each new pg_trigger row is an OAT_POST_CREATE.
 *
 *  - Registered columns stay as registered.  The registration names the
 *    key and period columns, and stored versions are placed and hashed by
 *    their types and collations.  Dropping such a column (ALTER TABLE, a
 *    recursion from an inheritance parent, DROP TYPE / DOMAIN ... CASCADE)
 *    is an OAT_DROP of the column, refused at the end of the command
 *    unless the command drops the table too (a cascade may reach the
 *    column before its table); renaming or retyping it an
 *    OAT_POST_ALTER of the column, where the catalog row as the command
 *    just wrote it (read with SnapshotSelf) is compared with the relation
 *    cache's, which still holds the old one.  Either is refused.  Other
 *    changes of those columns (statistics, storage, defaults, comments)
 *    pass.
 *
 * The hook exists once the library is loaded.  A session that has not
 * touched a zipper table yet may not have loaded it, so the extension owns
 * an event trigger on ddl_command_start, enabled ALWAYS (also under
 * session_replication_role = replica), whose only job is to be a function
 * of this library: calling it loads the library, and with it the hook,
 * before the command runs (the same function at ddl_command_end refuses
 * registered columns the command dropped, and registers a partition
 * created in or attached to a zipper parent, README "Scaling out").  With
 * the trigger disabled, the hook still serves every session that has used
 * zipper_lake (preload the library to be sure: README "Upgrading"), and a
 * call on a zipper parent refuses a partition that is not a zipper table.
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "storage/zl_storage.h"
#include "catalog/zl_catalog.h"
#include "write/zl_write.h"
#include "access/zl_access.h"
#include "hooks/zl_hooks.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/relation.h"
#include "access/table.h"
#include "catalog/indexing.h"
#include "catalog/namespace.h"
#include "catalog/objectaccess.h"
#include "catalog/pg_attribute.h"
#include "catalog/pg_class.h"
#include "catalog/pg_trigger.h"
#include "access/xact.h"
#include "commands/event_trigger.h"
#include "fmgr.h"
#include "storage/smgr.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

PG_FUNCTION_INFO_V1(zipper_lake_load_hooks);

static object_access_hook_type prev_object_access_hook = NULL;

#define REGISTERED_COLUMN_DETAIL "Key and period columns are named in the registration, and stored versions are placed and their keys hashed by the column's type and collation."
#define REGISTERED_COLUMN_HINT "Keep the key and period columns as they are; add, change or drop other columns, or copy the rows into a new zipper table."

/* the extension's catalog exists (not during DROP EXTENSION ... CASCADE) */
static bool
metadata_present(void)
{
	Oid			schema = get_namespace_oid(ZL_SCHEMA, true);

	return OidIsValid(schema) && OidIsValid(get_relname_relid("storage", schema)) &&
		OidIsValid(get_relname_relid("registration", schema));
}

/*
 * Registered columns dropped by the running command.  A column may go
 * before its table in one command (DROP SCHEMA ... CASCADE of the table
 * and of its key's type: the dependency walk may reach the column first),
 * so the refusal waits for the end of the command (the event trigger) or,
 * at the latest, the commit; dropping the table meanwhile forgets it.
 */
typedef struct PendingColumnDrop
{
	Oid			relid;
	SubTransactionId subxid;
	char	   *relname;
	char	   *attname;
	bool		tracked;		/* tracked (README "Tracked columns"), not key or period */
} PendingColumnDrop;

static List *pending_column_drops = NIL;	/* in TopTransactionContext */

static void
remember_column_drop(Relation rel, Form_pg_attribute att, bool tracked)
{
	MemoryContext old = MemoryContextSwitchTo(TopTransactionContext);
	PendingColumnDrop *drop = palloc(sizeof(PendingColumnDrop));

	drop->relid = RelationGetRelid(rel);
	drop->subxid = GetCurrentSubTransactionId();
	drop->relname = pstrdup(RelationGetRelationName(rel));
	drop->attname = pstrdup(NameStr(att->attname));
	drop->tracked = tracked;
	pending_column_drops = lappend(pending_column_drops, drop);
	MemoryContextSwitchTo(old);
}

static void
forget_pending_column_drops(Oid relid)
{
	ListCell   *lc;

	foreach(lc, pending_column_drops)
		if (((PendingColumnDrop *) lfirst(lc))->relid == relid)
			pending_column_drops = foreach_delete_current(pending_column_drops, lc);
}

static void
refuse_pending_column_drops(void)
{
	PendingColumnDrop *drop;

	if (pending_column_drops == NIL)
		return;
	drop = linitial(pending_column_drops);
	pending_column_drops = NIL;
	if (drop->tracked)
		ereport(ERROR,
				(errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
				 errmsg("cannot drop tracked column \"%s\" of zipper table \"%s\"",
						drop->attname, drop->relname),
				 errdetail("Its changes make the table's versions (track_columns)."),
				 errhint("Stop tracking it with zipper_lake.set_track_columns() first.")));
	ereport(ERROR,
			(errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
			 errmsg("cannot drop registered column \"%s\" of zipper table \"%s\"",
					drop->attname, drop->relname),
			 errdetail(REGISTERED_COLUMN_DETAIL),
			 errhint(REGISTERED_COLUMN_HINT)));
}

static void
ddl_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
		case XACT_EVENT_PARALLEL_PRE_COMMIT:
		case XACT_EVENT_PRE_PREPARE:
			refuse_pending_column_drops();
			break;
		default:
			pending_column_drops = NIL; /* memory went with the transaction */
			break;
	}
}

static void
ddl_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
					 SubTransactionId parentSubid, void *arg)
{
	ListCell   *lc;

	foreach(lc, pending_column_drops)
	{
		PendingColumnDrop *drop = lfirst(lc);

		if (drop->subxid != mySubid)
			continue;
		if (event == SUBXACT_EVENT_ABORT_SUB)
			pending_column_drops = foreach_delete_current(pending_column_drops, lc);
		else if (event == SUBXACT_EVENT_COMMIT_SUB)
			drop->subxid = parentSubid;
	}
}

/* is the table a zipper table (after a rewrite swapped its file)? */
static bool
still_zipper_table(Oid relid)
{
	Relation	rel = try_relation_open(relid, NoLock);
	bool		zipper;

	if (rel == NULL)
		return false;
	zipper = zl_is_zipper_relation(rel);
	relation_close(rel, NoLock);
	return zipper;
}

/* a zipper table is being dropped: forget the table its file belongs to */
static void
forget_dropped_relation(Oid relid)
{
	Relation	rel = try_relation_open(relid, NoLock);
	uint64		storage_id;

	if (rel == NULL)
		return;
	/* a zipper parent has a registration and nothing else */
	if (rel->rd_rel->relkind == RELKIND_PARTITIONED_TABLE && metadata_present())
		(void) zl_meta_forget_table(relid);
	if (!zl_is_zipper_relation(rel) || !metadata_present())
	{
		relation_close(rel, NoLock);
		return;
	}
	zl_write_discard_relation(relid);
	forget_pending_column_drops(relid);

	/*
	 * A table's own storages are found by its oid.  Only a relation that
	 * has none may hold another's file — the transient relation of a table
	 * rewrite, holding the table's old file after the swap — which its
	 * metapage names; a metapage that cannot be read names nothing (a
	 * damaged table must stay droppable).  A table that stopped being a
	 * zipper table (SET ACCESS METHOD) is forgotten; one rewritten (VACUUM
	 * FULL, ALTER TABLE) keeps its registration and new file, and only the
	 * old file's storage goes.
	 */
	if (!zl_meta_forget_table(relid) && zl_storage_try_id(rel, &storage_id))
	{
		Oid			owner = zl_meta_storage_owner(storage_id);

		if (OidIsValid(owner) && owner != relid)
		{
			if (still_zipper_table(owner))
				zl_meta_forget_storage(storage_id);
			else
				zl_meta_forget_table(owner);
		}
	}
	relation_close(rel, NoLock);
}

/* is attnum a key or period column of a registered zipper table? */
static bool
registered_column(Relation rel, AttrNumber attnum, ZLTableOptions *opts)
{
	if (!zl_is_zipper_relation(rel) || !metadata_present() ||
		!zl_meta_load_options(rel, opts, false))
		return false;
	if (attnum == opts->from_attnum || attnum == opts->to_attnum)
		return true;
	for (int i = 0; i < opts->nkeys; i++)
		if (opts->key_attnums[i] == attnum)
			return true;
	return false;
}

static HeapTuple
attribute_as_written(Oid relid, AttrNumber attnum)
{
	ScanKeyData keys[2];

	ScanKeyInit(&keys[0], Anum_pg_attribute_attrelid, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(relid));
	ScanKeyInit(&keys[1], Anum_pg_attribute_attnum, BTEqualStrategyNumber,
				F_INT2EQ, Int16GetDatum(attnum));
	return zl_catalog_row_as_written(AttributeRelationId, AttributeRelidNumIndexId, 2, keys);
}

static void
refuse_registered_column_change(Relation rel, Form_pg_attribute old, const char *change)
{
	ereport(ERROR,
			(errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
			 errmsg("cannot %s registered column \"%s\" of zipper table \"%s\"",
					change, NameStr(old->attname), RelationGetRelationName(rel)),
			 errdetail(REGISTERED_COLUMN_DETAIL),
			 errhint(REGISTERED_COLUMN_HINT)));
}

/*
 * README "Tracked columns": a tracked column cannot be dropped while
 * tracked; a renamed one stays tracked under its new name.
 */
static void
check_tracked_column_change(Relation rel, const ZLTableOptions *opts, AttrNumber attnum,
							bool dropped)
{
	Form_pg_attribute old = TupleDescAttr(RelationGetDescr(rel), attnum - 1);
	HeapTuple	tuple;
	Form_pg_attribute now;
	Datum	   *names;
	int			n = 0;

	if (dropped)
	{
		remember_column_drop(rel, old, true);
		return;
	}
	tuple = attribute_as_written(RelationGetRelid(rel), attnum);
	now = tuple ? (Form_pg_attribute) GETSTRUCT(tuple) : NULL;
	if (now == NULL || strcmp(NameStr(now->attname), NameStr(old->attname)) == 0)
		return;
	names = palloc(sizeof(Datum) * RelationGetDescr(rel)->natts);
	for (int i = 0; i < RelationGetDescr(rel)->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(RelationGetDescr(rel), i);

		if (!att->attisdropped && ZL_TRACKED(opts, att->attnum))
			names[n++] = NameGetDatum(att->attnum == attnum ? &now->attname : &att->attname);
	}
	zl_meta_set_track_columns(RelationGetRelid(rel),
							  construct_array(names, n, NAMEOID, NAMEDATALEN, false, TYPALIGN_CHAR));
	CacheInvalidateRelcache(rel);
}

/* a column of a relation is dropped (subid > 0) or altered */
static void
check_column_change(Oid relid, AttrNumber attnum, bool dropped)
{
	Relation	rel = try_relation_open(relid, NoLock);
	ZLTableOptions opts;
	Form_pg_attribute old;

	if (rel == NULL)
		return;
	if (!registered_column(rel, attnum, &opts))
	{
		if (zl_is_zipper_relation(rel) && metadata_present() &&
			zl_meta_load_options(rel, &opts, false) && opts.some_untracked &&
			ZL_TRACKED(&opts, attnum))
			check_tracked_column_change(rel, &opts, attnum, dropped);
		relation_close(rel, NoLock);
		return;
	}
	old = TupleDescAttr(RelationGetDescr(rel), attnum - 1);
	if (dropped)
		remember_column_drop(rel, old, false);
	else
	{
		HeapTuple	tuple = attribute_as_written(relid, attnum);
		Form_pg_attribute now = tuple ? (Form_pg_attribute) GETSTRUCT(tuple) : NULL;

		if (now == NULL || now->attisdropped)
			refuse_registered_column_change(rel, old, "drop");
		if (strcmp(NameStr(now->attname), NameStr(old->attname)) != 0)
			refuse_registered_column_change(rel, old, "rename");
		if (now->atttypid != old->atttypid || now->atttypmod != old->atttypmod ||
			now->attcollation != old->attcollation)
			refuse_registered_column_change(rel, old, "change the type or collation of");
		heap_freetuple(tuple);
	}
	relation_close(rel, NoLock);
}

static void
zl_object_access(ObjectAccessType access, Oid classId, Oid objectId, int subId,
				 void *arg)
{
	if (prev_object_access_hook)
		prev_object_access_hook(access, classId, objectId, subId, arg);

	if (access == OAT_POST_CREATE && classId == TriggerRelationId)
		zl_refuse_new_trigger(objectId);
	if (classId != RelationRelationId)
		return;
	if (access == OAT_DROP && subId == 0)
		forget_dropped_relation(objectId);
	else if ((access == OAT_DROP || access == OAT_POST_ALTER) && subId > 0)
		check_column_change(objectId, (AttrNumber) subId, access == OAT_DROP);
}

void
zl_ddl_init(void)
{
	prev_object_access_hook = object_access_hook;
	object_access_hook = zl_object_access;
	RegisterXactCallback(ddl_xact_callback, NULL);
	RegisterSubXactCallback(ddl_subxact_callback, NULL);
}

/*
 * A partition created in or attached to a registered zipper parent
 * (README "Scaling out"): it must be a zipper table, and is registered as
 * the parent is (or must be registered so already).  PostgreSQL 15 makes
 * a partition created without USING a heap table: refused here, at the
 * end of its command, never left as a silent heap leaf.
 */
static void
register_new_partition(Oid parent_relid, Oid partition_relid)
{
	Relation	parent;
	Relation	partition;
	ZLTableOptions opts;

	if (!OidIsValid(parent_relid) || !OidIsValid(partition_relid) ||
		get_rel_relkind(parent_relid) != RELKIND_PARTITIONED_TABLE || !metadata_present())
		return;
	parent = table_open(parent_relid, AccessShareLock);
	if (!zl_meta_load_options(parent, &opts, true))
	{
		table_close(parent, AccessShareLock);
		return;
	}
	partition = table_open(partition_relid, ShareUpdateExclusiveLock);
	zl_parent_check(parent, NULL, 0);
	zl_parent_register_leaf(parent, partition);
	table_close(partition, NoLock);
	table_close(parent, AccessShareLock);
}

/* the partitions a CREATE TABLE ... PARTITION OF or ATTACH PARTITION made */
static void
register_new_partitions(Node *parsetree)
{
	if (IsA(parsetree, CreateStmt) || IsA(parsetree, CreateForeignTableStmt))
	{
		/* a foreign partition too: zl_parent_check refuses it */
		CreateStmt *stmt = IsA(parsetree, CreateStmt) ? (CreateStmt *) parsetree :
		&((CreateForeignTableStmt *) parsetree)->base;

		if (stmt->partbound != NULL && list_length(stmt->inhRelations) == 1)
			register_new_partition(RangeVarGetRelid(linitial_node(RangeVar, stmt->inhRelations),
													NoLock, true),
								   RangeVarGetRelid(stmt->relation, NoLock, true));
	}
	else if (IsA(parsetree, AlterTableStmt))
	{
		AlterTableStmt *stmt = (AlterTableStmt *) parsetree;
		ListCell   *lc;

		foreach(lc, stmt->cmds)
		{
			AlterTableCmd *cmd = lfirst_node(AlterTableCmd, lc);

			if (cmd->subtype == AT_AttachPartition)
				register_new_partition(RangeVarGetRelid(stmt->relation, NoLock, true),
									   RangeVarGetRelid(((PartitionCmd *) cmd->def)->name,
														NoLock, true));
		}
	}
}

/*
 * zipper_lake._load_hooks(): the event trigger.  At ddl_command_start its
 * work is done by being called: the library, and with it the hook above,
 * is loaded before the command runs.  At ddl_command_end it refuses the
 * registered columns the command dropped without their table.
 */
Datum
zipper_lake_load_hooks(PG_FUNCTION_ARGS)
{
	if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_EVENT_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("zipper_lake._load_hooks() must be called as an event trigger"),
				 errhint("It is an internal function of the extension.")));
	/* at the end of a command: registered columns it dropped, table kept */
	if (strcmp(((EventTriggerData *) fcinfo->context)->event, "ddl_command_end") == 0)
	{
		refuse_pending_column_drops();
		register_new_partitions(((EventTriggerData *) fcinfo->context)->parsetree);
	}
	PG_RETURN_VOID();
}
