/*-------------------------------------------------------------------------
 *
 * zl_apply_leaves.c
 *	  Applying a batch to a zipper parent, leaf by leaf.
 *
 * A zipper parent (README "Scaling out", src/catalog/zl_parent.c) is a
 * hash-partitioned table whose leaves are zipper tables, each holding
 * every version of the keys that hash to it.  apply_changes,
 * apply_snapshot and apply_events called on the parent apply the batch
 * one leaf after another, in the caller's transaction: each pass reads the
 * whole batch (so memory stays what one table's batch takes) and takes
 * the changes of its leaf's keys (zl_apply_route_change); a table-wide
 * change (a truncate, a snapshot's deletes) reaches every leaf.  The
 * counts add up to what one table holding all keys would return: a change
 * is counted by the pass that applies it, a change of no key (a truncate,
 * an ignored -U) by the first pass.  All leaves commit or none.
 *
 * What is per table holds for the parent as a whole: the history cut and
 * retention are the same in every leaf's registration (the setters and
 * drop_history go to every leaf), and the late horizon counts from the
 * newest change applied to any leaf.  That newest change is read once,
 * after the writer locks of all leaves are taken in partition order (two
 * calls on one parent never wait for each other crosswise), so no writer
 * can move it during the call.  A shard's leaf (zl_apply_remote.c) is
 * locked on its own server by its pass; its newest change is read through
 * the caller's transaction there, so writers of one parent are to go
 * through one server (README "Scaling out").
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "storage/zl_storage.h"
#include "catalog/zl_catalog.h"
#include "write/zl_write.h"
#include "apply/zl_apply_internal.h"

#include "access/table.h"
#include "access/xact.h"
#include "funcapi.h"
#include "utils/snapmgr.h"

/*
 * Lock the leaves first, first + step, ... of a zipper parent for writing,
 * in partition order: ROW EXCLUSIVE and the writer lock, after this
 * transaction's pending rows of each are written.
 */
void
zl_apply_lock_leaves(ZLParent *parent, int first, int step)
{
	for (int i = first; i < zl_parent_nleaves(parent); i += step)
	{
		Relation	leaf;

		if (zl_parent_leaf_is_shard(parent, i))
			continue;			/* locked on its server by its pass */
		leaf = zl_open_zipper_table(zl_parent_leaf(parent, i), RowExclusiveLock);

		zl_write_flush_relation(RelationGetRelid(leaf));
		(void) zl_write_lock_table(zl_storage_id(leaf), false);
		table_close(leaf, NoLock);
	}
}

/*
 * The leaves of a zipper parent, those to apply (first, first + step, ...)
 * locked for writing, with the newest change of any leaf; NULL when relid
 * is not a partitioned table.  The privileges are checked on the parent,
 * as for INSERT into it (zl_apply.c).
 */
ZLApplyLeaves *
zl_apply_leaves_begin(Oid relid, int first, int step)
{
	ZLApplyLeaves *leaves;
	Snapshot	snapshot;
	bool		record_on = zl_meta_record_exists();

	if (!zl_is_partitioned_table(relid))
		return NULL;
	leaves = palloc0(sizeof(ZLApplyLeaves));
	leaves->parent = zl_parent_open(relid, RowExclusiveLock);
	leaves->newest = PG_INT64_MIN;
	zl_apply_lock_leaves(leaves->parent, first, step);
	if (!record_on)
		return leaves;
	CommandCounterIncrement();
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	for (int i = 0; i < zl_parent_nleaves(leaves->parent); i++)
	{
		int64		newest;
		ZLTableInstant *instants;
		int			ninstants;

		if (zl_parent_leaf_is_shard(leaves->parent, i))
			leaves->newest = Max(leaves->newest,
								 zl_apply_remote_newest(zl_parent_leaf(leaves->parent, i)));
		else if (zl_meta_record_head(zl_parent_leaf(leaves->parent, i), snapshot, &newest,
									 &instants, &ninstants))
			leaves->newest = Max(leaves->newest, newest);
	}
	UnregisterSnapshot(snapshot);
	return leaves;
}

int
zl_apply_leaves_count(ZLApplyLeaves *leaves)
{
	return leaves == NULL ? 1 : zl_parent_nleaves(leaves->parent);
}

void
zl_apply_leaves_end(ZLApplyLeaves *leaves)
{
	if (leaves != NULL)
		zl_parent_close(leaves->parent);
}

/*
 * Does the pass of ac take change c, and does it count it (*counted)?  A
 * change of no key (a truncate, an ignored -U) is counted by the first
 * pass only; a truncate is taken by every pass.  A change whose key no
 * partition takes is an error, as INSERT's.
 */
bool
zl_apply_route_change(ApplyContext *ac, Change *c, bool *counted)
{
	int			leaf;

	ac->rows_seen++;
	*counted = true;
	if (ac->shard_rows != NULL)
		return zl_apply_shard_takes(ac->shard_rows, c, counted);
	if (ac->parent == NULL)
		return true;
	if (c->op == OP_TRUNCATE || c->op == OP_IGNORE)
	{
		*counted = ac->leaf == 0;
		return c->op == OP_TRUNCATE || *counted;
	}
	leaf = zl_parent_leaf_of(ac->parent, c->values, c->isnull);
	if (leaf < 0)
		ereport(ERROR,
				(errcode(ERRCODE_CHECK_VIOLATION),
				 errmsg("no partition of zipper table \"%s\" takes key %s",
						RelationGetRelationName(zl_parent_relation(ac->parent)),
						describe_key_values(ac, c->values, c->isnull)),
				 errdetail("The change's partition key %s has no partition.",
						   zl_parent_key_text(ac->parent)),
				 errhint("Create the missing hash partition; nothing was applied.")));
	return leaf == ac->leaf;
}

void
zl_apply_add_counts(ApplyCounts *total, const ApplyCounts *counts)
{
	total->changes += counts->changes;
	total->inserted += counts->inserted;
	total->closed += counts->closed;
	total->deleted += counts->deleted;
	total->unchanged += counts->unchanged;
	total->late += counts->late;
	total->skipped = Max(total->skipped, counts->skipped);
}

/* the one row the apply functions return (skipped: apply_events only) */
Datum
zl_apply_result(FunctionCallInfo fcinfo, const ApplyCounts *counts)
{
	TupleDesc	tupdesc;
	Datum		values[7];
	bool		nulls[7] = {0};

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	values[0] = Int64GetDatum(counts->changes);
	values[1] = Int64GetDatum(counts->inserted);
	values[2] = Int64GetDatum(counts->closed);
	values[3] = Int64GetDatum(counts->deleted);
	values[4] = Int64GetDatum(counts->unchanged);
	values[5] = Int64GetDatum(counts->late);
	values[6] = Int64GetDatum(counts->skipped);
	return HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(tupdesc), values, nulls));
}
