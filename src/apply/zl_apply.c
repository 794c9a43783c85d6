/*-------------------------------------------------------------------------
 *
 * zl_apply.c
 *	  apply_changes() and apply_snapshot(): event-time change batches.
 *
 * The contract is README "Change semantics": a key's history is the fold
 * of every change ever applied to it, whatever the batching (zl_fold.c
 * folds one key; zl_record.c keeps what the versions do not show).  These
 * files apply a batch with the patent's write path -- step 1 in
 * zl_apply_batch.c, steps 3 and 4 in zl_apply_lookup.c (and, for older
 * snapshots, zl_apply_conflict.c), the change record in zl_apply_record.c,
 * the rest here:
 *
 *  1. Read the batch (as the caller, so its privileges apply) with one
 *     query whose rows stream to a DestReceiver, convert and validate every
 *     change, and order the changes by key hash: held in memory while they
 *     fit work_mem, else in a tuplesort that spills ("The batch by key
 *     hash").
 *  2. Apply the sorted batch a chunk of keys at a time (apply_chunks):
 *     keys are independent, so each chunk is a batch of its own, and a
 *     chunk ends at the first new key hash once its keys, changes and
 *     stored versions use work_mem.  Within a chunk each key's changes are
 *     sorted by (change_time, seq, arrival); identical duplicates collapse,
 *     conflicting ones are an error.
 *  3. Under the table's writer lock, with the latest snapshot, find the
 *     open version of every key of the chunk: the key directories of the
 *     current partition's sub-groups (zl_keys.c) name the rows whose key
 *     hash is one of the chunk's, and only those rows are read.
 *     (apply_snapshot with deletes reads every open key of the chunk's
 *     hash range: the directories name those too, and a merge of their
 *     entries with the chunk's keys pairs each row with its batch key.)
 *  4. Only keys whose earliest change is at or before their open version's
 *     start (late changes, new or deleted keys) need history: scan just
 *     the partitions whose end date can hold a valid_to >= that change
 *     time, and keep versions ending at or after it.  The change record's
 *     segments of the chunk's hash range holding an instant at or after
 *     the chunk's earliest change give the keys' remembered instants (an
 *     in-order batch reads none).
 *  5. Fold each key's changes into its versions and remembered instants
 *     (zl_fold.c), in memory, and hand every version that is new or
 *     changed to the write state, which
 *     places it — closed versions into the history partition of their end
 *     date, open ones into the current partition's file groups with
 *     rollover — and, at the end of the batch, writes sorted sub-groups.
 *  6. Stored versions that did not survive unchanged are remembered (in a
 *     tuplesort) and retired once the whole batch is applied
 *     (retire_rows): masked (one append-only mask row per sub-group), or
 *     their sub-group compacted when it would be more than half masked.
 *     Writing no catalog row before then keeps the rows of all chunks
 *     pending together, so the batch writes full sub-groups.  The keys'
 *     new record entries wait the same way and become the record's newest
 *     piece (zl_apply_save_record), merged with older ones as they accumulate.
 *
 * Memory: the batch (held or sorted) takes work_mem, a chunk about
 * work_mem (a single key's changes are never split), the sort of retired
 * rows 1 MB, the write state its own sorts (zl_write.c): about twice
 * work_mem plus a constant, whatever the batch's size (README "Guarantees").
 *
 * Everything happens in the caller's transaction: an error anywhere, or a
 * rollback, leaves nothing visible.  Writers of a table serialize on its
 * writer lock, taken before reading the current versions; readers are
 * never blocked and see all of a batch or none of it.  A transaction whose
 * snapshot is older than the latest (REPEATABLE READ, SERIALIZABLE) fails
 * with a serialization failure, like heap's UPDATE, when a version of a
 * batch key where steps 3 and 4 look was written, masked or removed after
 * that snapshot (zl_apply_check_concurrent_changes).
 *
 * Counts returned: README "Counts" (zl_fold.c counts each change).
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "storage/zl_storage.h"
#include "catalog/zl_catalog.h"
#include "write/zl_write.h"
#include "apply/zl_apply.h"
#include "apply/zl_apply_internal.h"

#include "access/heaptoast.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/pg_operator_d.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"

PG_FUNCTION_INFO_V1(zipper_lake_apply_changes);
PG_FUNCTION_INFO_V1(zipper_lake_apply_snapshot);
PG_FUNCTION_INFO_V1(zipper_lake_apply_changes_v2);
PG_FUNCTION_INFO_V1(zipper_lake_apply_snapshot_v2);

/* ---------- comparisons ---------- */

static void
prepare_comparisons(ApplyContext *ac)
{
	ac->hasher = zl_key_hasher_create(ac->tupdesc, &ac->opts);
	ac->value_comparer = zl_value_comparer_create(ac->tupdesc, &ac->opts, false);
	ac->tracked_comparer = zl_value_comparer_create(ac->tupdesc, &ac->opts, true);
}

static void
key_table_insert_bucket(ApplyContext *ac, int keyindex)
{
	int			mask = ac->nbuckets - 1;
	uint32		hash = ac->keys[keyindex]->hash;
	int			b = hash & mask;

	while (ac->buckets[b].key != NULL)
		b = (b + 1) & mask;
	ac->buckets[b].hash = hash;
	ac->buckets[b].key = ac->keys[keyindex];
}

/* find the key of a row whose key hash is known; with create, add it when missing */
static KeyState *
key_lookup_hashed(ApplyContext *ac, Datum *values, bool *isnull, uint32 hash, bool create)
{
	int			mask = ac->nbuckets - 1;
	KeyState   *ks;

	for (int b = hash & mask; ac->buckets[b].key != NULL; b = (b + 1) & mask)
	{
		if (ac->buckets[b].hash != hash)
			continue;
		ks = ac->buckets[b].key;
		if (zl_keys_equal(ac->hasher, ks->values, values))
			return ks;
	}
	if (!create)
		return NULL;

	/* keep the table at most half full */
	if ((ac->nkeys + 1) * 2 > ac->nbuckets)
	{
		ac->nbuckets *= 2;
		pfree(ac->buckets);
		ac->buckets = palloc_extended(sizeof(KeyBucket) * ac->nbuckets,
									  MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
		for (int k = 0; k < ac->nkeys; k++)
			key_table_insert_bucket(ac, k);
	}
	ks = palloc0(sizeof(KeyState));
	ks->hash = hash;
	ks->values = values;
	ks->isnull = isnull;
	grow_array((void **) &ac->keys, &ac->maxkeys, ac->nkeys + 1, sizeof(KeyState *));
	ac->keys[ac->nkeys] = ks;
	key_table_insert_bucket(ac, ac->nkeys);
	ac->nkeys++;
	return ks;
}

/* find the key of a row; with create, add it when missing */
KeyState *
zl_apply_key_lookup(ApplyContext *ac, Datum *values, bool *isnull, bool create)
{
	return key_lookup_hashed(ac, values, isnull, zl_key_hash(ac->hasher, values), create);
}

/* ---------- folding the changes in ---------- */

/*
 * One key: its changes folded into its stored versions and remembered
 * instants (zl_fold.c); new versions go to the write state, the record
 * entry to the record writer.
 */
static void
fold_key(ApplyContext *ac, ZLWriteState *state, KeyState *ks)
{
	ZLFoldKey	fk;
	ZLFoldCounts counts = {0};
	ZLFoldChange *changes = palloc(sizeof(ZLFoldChange) * Max(1, ks->nchanges));
	ZLFoldChange **ordered = palloc(sizeof(ZLFoldChange *) * Max(1, ks->nchanges));

	for (int i = 0; i < ks->nchanges; i++)
	{
		Change	   *c = ks->changes[i];

		changes[i].time = c->time;
		changes[i].has_seq = c->has_seq;
		changes[i].seq = c->seq;
		changes[i].is_delete = c->op == OP_DELETE;
		changes[i].missing_key = c->missing_key;
		changes[i].values = c->values;
		changes[i].isnull = c->isnull;
		changes[i].given = c->given;
		ordered[i] = &changes[i];
	}
	memset(&fk, 0, sizeof(fk));
	fk.since = ac->record_on ? ks->record_from : ks->min_time;
	fk.versions = ks->versions;
	fk.nversions = ks->nversions;
	fk.record = ks->record;
	fk.nrecord = ks->nrecord;
	fk.changes = ordered;
	fk.nchanges = ks->nchanges;
	zl_fold_key(&ac->fold_context, &fk, &counts);

	ac->counts.inserted += counts.inserted;
	ac->counts.closed += counts.closed;
	ac->counts.deleted += counts.deleted;
	ac->counts.unchanged += counts.unchanged;
	ac->counts.late += counts.late;
	ac->batch_newest = Max(ac->batch_newest, ks->changes[ks->nchanges - 1]->time);

	for (int i = 0; i < fk.nresult; i++)
	{
		if (fk.result[i].stored != NULL)
			fk.result[i].stored->survives = true;
		else
			zl_apply_write_version(ac, state, &fk.result[i]);
	}
	if (fk.record_changed && ac->record_on)
	{
		ZLRecordEntry e;

		e.hash = ks->hash;
		e.key = ks->values;
		e.since = ks->record_from;
		e.overridden = ks->record_newest;
		e.ninstants = fk.nremember;
		e.instants = fk.remember;
		zl_record_writer_add(ac->record_writer, &e);
	}
}

/* ---------- writing the outcome ---------- */

void
zl_apply_write_version(ApplyContext *ac, ZLWriteState *state, Version *v)
{
	Datum	   *values = palloc(sizeof(Datum) * ac->tupdesc->natts);
	HeapTuple	tuple;

	memcpy(values, v->values, sizeof(Datum) * ac->tupdesc->natts);
	values[ac->opts.from_attnum - 1] = zl_instant_to_datum(v->from, ac->opts.period_type);
	values[ac->opts.to_attnum - 1] = zl_instant_to_datum(v->to, ac->opts.period_type);
	v->isnull[ac->opts.from_attnum - 1] = false;
	v->isnull[ac->opts.to_attnum - 1] = false;
	tuple = zl_row_check(ac->row_check, heap_form_tuple(ac->tupdesc, values, v->isnull),
						 values, v->isnull);
	if (tuple->t_len > TOAST_TUPLE_THRESHOLD)
		tuple = zl_toast_version(ac->rel, tuple);
	zl_write_place(state, tuple, v->from, v->to);
	heap_freetuple(tuple);
	pfree(values);
}

/* the index of a sub-group among those the batch retired rows of */
static int
touched_index(ApplyContext *ac, const ZLSubGroup *sg)
{
	MemoryContext old;

	/* the stored rows of a chunk come sub-group by sub-group: try the last first */
	if (ac->ntouched > 0 && ac->touched[ac->last_touched].subgroup_id == sg->subgroup_id)
		return ac->last_touched;
	for (int i = ac->ntouched - 1; i >= 0; i--)
		if (ac->touched[i].subgroup_id == sg->subgroup_id)
			return ac->last_touched = i;
	old = MemoryContextSwitchTo(ac->batch_context);
	grow_array((void **) &ac->touched, &ac->maxtouched, ac->ntouched + 1,
			   sizeof(TouchedSubGroup));
	if (ac->retired == NULL)
		ac->retired = tuplesort_begin_datum(INT8OID, Int8LessOperator, InvalidOid, false,
											ZL_RETIRED_SORT_KB, NULL, TUPLESORT_NONE);
	MemoryContextSwitchTo(old);
	ac->touched[ac->ntouched].subgroup_id = sg->subgroup_id;
	ac->touched[ac->ntouched].current = sg->partition_end == ZL_CURRENT_PARTITION;
	ac->touched[ac->ntouched].row_count = sg->row_count;
	ac->touched[ac->ntouched].masked_rows = sg->masked_rows;
	ac->last_touched = ac->ntouched;
	return ac->ntouched++;
}

/*
 * The stored versions of a chunk that did not survive are remembered; no
 * catalog row is written before the batch is applied (a writing statement
 * would flush the rows pending in the write state, chunk by chunk).
 */
static void
remember_retired(ApplyContext *ac)
{
	for (int i = 0; i < ac->nstored; i++)
	{
		StoredVersion *s = ac->stored[i];

		if (!s->survives)
		{
			int			index = touched_index(ac, s->sg);	/* begins the sort */

			tuplesort_putdatum(ac->retired,
							   Int64GetDatum(((int64) index << 32) | (uint32) s->position),
							   false);
		}
	}
}

/*
 * After the last chunk, retire the rows the batch replaced: one mask row
 * per sub-group lists them, unless the sub-group is in the current
 * partition and would be more than half masked: then it is compacted
 * (zl_compact.c), so the cost of a batch does not grow with history.
 * Masks are inserted together (in pieces of ZL_MASKS_PER_INSERT positions
 * at most), so that the rows the batch left pending are written once.
 */
static void
retire_rows(ApplyContext *ac)
{
	uint64		storage_id = zl_storage_id(ac->rel);
	ZLWriteState *state;
	Snapshot	snapshot;
	ZLSubGroup *current = NULL;
	int			ncurrent = 0;
	int64	   *mask_subgroups;
	int32	  **mask_positions;
	int		   *mask_counts;
	int			nmasks = 0;
	int64		pending = 0;
	int32	   *positions;
	int			npositions = 0;
	int			maxpositions = 1024;
	int			index = -1;
	Datum		d;
	bool		isnull;
	bool		more;

	if (ac->retired == NULL)
		return;
	state = zl_write_state_get(ac->rel);
	tuplesort_performsort(ac->retired);
	CommandCounterIncrement();
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	mask_subgroups = palloc(sizeof(int64) * ac->ntouched);
	mask_positions = palloc(sizeof(int32 *) * ac->ntouched);
	mask_counts = palloc(sizeof(int) * ac->ntouched);
	positions = palloc(sizeof(int32) * maxpositions);
	do
	{
		int64		item = 0;

		more = tuplesort_getdatum(ac->retired, true, &d, &isnull, NULL);
		if (more)
			item = DatumGetInt64(d);
		if (npositions > 0 && (!more || (int) (item >> 32) != index))
		{
			const TouchedSubGroup *t = &ac->touched[index];
			ZLSubGroup *sg = NULL;

			/* the current partition (masks and all) is read if one is compacted */
			if (t->current && zl_compaction_due(t->row_count, t->masked_rows, npositions))
			{
				if (current == NULL)
					current = zl_meta_load_subgroups(storage_id, snapshot, ZL_CURRENT_PARTITION,
													 &ncurrent);
				sg = zl_meta_find_subgroup(current, ncurrent, t->subgroup_id);
			}
			if (sg == NULL || !zl_compact_subgroup(ac->rel, state, sg, positions, npositions))
			{
				/* a copy of its own size: positions is the scratch buffer */
				mask_subgroups[nmasks] = t->subgroup_id;
				mask_positions[nmasks] = palloc(sizeof(int32) * npositions);
				memcpy(mask_positions[nmasks], positions, sizeof(int32) * npositions);
				mask_counts[nmasks++] = npositions;
				pending += npositions;
			}
			npositions = 0;
			if (pending >= ZL_MASKS_PER_INSERT || (!more && nmasks > 0))
			{
				zl_meta_insert_masks(ac->rel, nmasks, mask_subgroups, mask_positions, mask_counts);
				for (int i = 0; i < nmasks; i++)
					pfree(mask_positions[i]);
				nmasks = 0;
				pending = 0;
			}
		}
		if (more)
		{
			index = (int) (item >> 32);
			if (npositions == maxpositions)
			{
				maxpositions *= 2;
				positions = repalloc(positions, sizeof(int32) * maxpositions);
			}
			positions[npositions++] = (int32) (uint32) item;
		}
	} while (more);
	UnregisterSnapshot(snapshot);
	tuplesort_end(ac->retired);
	ac->retired = NULL;
}

static void
apply_batch(ApplyContext *ac)
{
	uint64		storage_id = zl_storage_id(ac->rel);
	ZLWriteState *state;
	MemoryContext old;

	zl_apply_add_truncates_to_batch_keys(ac);
	zl_apply_order_changes(ac);

	/*
	 * Serialize with other writers, then read what they committed (and
	 * what this transaction's earlier statements left pending).  Later
	 * chunks need not see the versions earlier ones wrote (other keys'),
	 * and no catalog row is written before the end of the batch (masks
	 * and compaction: retire_rows).
	 */
	if (!ac->later_chunk)
		zl_write_flush_relation(RelationGetRelid(ac->rel));
	zl_key_directory_cache_trim();	/* the chunk's directories stay till its end */
	(void) zl_write_lock_table(storage_id, false);
	CommandCounterIncrement();
	ac->snapshot = RegisterSnapshot(GetLatestSnapshot());
	if (!ac->head_loaded)
	{
		ZLTableOptions now;

		/* the history cut as the last writer left it (README "Lifecycle") */
		if (zl_meta_load_options(ac->rel, &now, true))
			ac->opts.history_cut = now.history_cut;
		zl_apply_load_record_head(ac);
		if (ac->ntable_deletes > 0)
			zl_apply_check_horizon(ac, NULL);	/* changes of every key */
	}
	for (int k = 0; k < ac->nkeys; k++)
		zl_apply_check_horizon(ac, ac->keys[k]);
	zl_apply_find_stored_versions(ac);
	zl_apply_find_record_instants(ac);
	UnregisterSnapshot(ac->snapshot);
	if (IsolationUsesXactSnapshot())
		zl_apply_check_concurrent_changes(ac);

	/* keys in hash order: the record's entries are written in that order */
	state = zl_write_state_get(ac->rel);
	zl_apply_sort_keys_by_hash(ac);
	for (int k = 0; k < ac->nkeys; k++)
	{
		KeyState   *ks = ac->keys[k];

		if (ks->nchanges == 0)
			continue;
		qsort(ks->versions, ks->nversions, sizeof(Version), zl_apply_version_cmp);
		old = MemoryContextSwitchTo(ac->key_context);
		fold_key(ac, state, ks);
		MemoryContextSwitchTo(old);
		MemoryContextReset(ac->key_context);
	}
	remember_retired(ac);
}

/* ---------- applying the sorted batch a chunk of keys at a time ---------- */

/* the per-key state of a chunk starts empty (its memory was reset) */
static void
chunk_begin(ApplyContext *ac)
{
	ac->keys = NULL;
	ac->nkeys = ac->maxkeys = 0;
	ac->nbuckets = 1024;
	ac->buckets = palloc0(sizeof(KeyBucket) * ac->nbuckets);
	ac->current = ac->history = NULL;
	ac->ncurrent = ac->nhistory = 0;
	ac->hashes = NULL;
	ac->nhashes = 0;
	ac->first_look = false;
	ac->stored = NULL;
	ac->nstored = ac->maxstored = 0;
}

/*
 * Keys are independent: the batch is applied as consecutive chunks of its
 * keys in hash order, each as a batch of its own (apply_batch), so that
 * the keys, changes and stored versions in memory at once stay within
 * work_mem (a chunk ends at the first new hash once work_mem is used,
 * counting the change each table delete -- a truncate -- will make of
 * each of its keys; changes held in memory count in the batch's work_mem
 * instead; the changes of one key are never split).  A chunk covers the hash range
 * from its first key to the next chunk's: apply_snapshot deletes the open
 * keys of that range missing from it.  Since it reads every open key of
 * the range, with deletes a chunk also covers at most a share of the hash
 * space that holds about work_mem of open rows, with the change each table
 * delete makes of each of them (hashes are uniform), so
 * an image much smaller than the table (or an empty one, allow_empty) is
 * still applied in bounded memory, as chunks with few or no image rows.
 */
/*
 * The open rows of the table (an estimate: committed state, no lock), for
 * apply_snapshot with deletes, which reads every open key of a chunk's
 * hash range whether the image has it or not.
 */
static int64
count_open_rows(ApplyContext *ac)
{
	Snapshot	snapshot = RegisterSnapshot(GetLatestSnapshot());
	int			nsgs;
	ZLSubGroup *sgs = zl_meta_load_subgroups(zl_storage_id(ac->rel), snapshot,
											 ZL_CURRENT_PARTITION, &nsgs);
	int64		rows = 0;

	UnregisterSnapshot(snapshot);
	for (int i = 0; i < nsgs; i++)
		rows += sgs[i].row_count - sgs[i].masked_rows;
	return rows;
}

static void
apply_chunks(ApplyContext *ac)
{
	Size		limit = (Size) work_mem * 1024;
	uint64		span = (uint64) PG_UINT32_MAX + 1;	/* hashes a chunk may cover */
	uint64		lo = 0;
	Size		truncate_bytes;	/* the changes a key gets of the table deletes */

	ac->batch_context = CurrentMemoryContext;
	if (ac->delete_missing)
	{
		ZLTableInstant snapshot = {ac->delete_time, false, 0};

		zl_apply_add_table_delete(ac, snapshot);
	}

	/*
	 * Key hashes are uniform: with changes of every key, a chunk covers a
	 * share of the hash space that holds about work_mem of open rows.
	 */
	truncate_bytes = (Size) ac->ntable_deletes * (sizeof(Change) + 2 * sizeof(void *));
	if (ac->ntable_deletes > 0)
	{
		int64		open_rows = count_open_rows(ac);
		int64		rows_per_chunk = Max(1, (int64) (limit / (ZL_OPEN_ROW_BYTES + truncate_bytes)));

		if (open_rows > rows_per_chunk)
			span = Max(1, (uint64) ((((uint64) PG_UINT32_MAX + 1) / open_rows) * rows_per_chunk));
	}
	if (ac->ntable_deletes > 1)
		qsort(ac->table_deletes, ac->ntable_deletes, sizeof(ZLTableInstant), zl_apply_table_instant_cmp);
	ac->table_instants.batch = ac->table_deletes;
	ac->table_instants.nbatch = ac->ntable_deletes;
	ac->fold_context.comparer = ac->value_comparer;
	ac->fold_context.tracked = ac->tracked_comparer;
	ac->fold_context.opts = &ac->opts;
	ac->fold_context.tupdesc = ac->tupdesc;
	ac->fold_context.open_end = ac->opts.open_end;
	ac->fold_context.table = &ac->table_instants;
	ac->fold_context.natts = ac->tupdesc->natts;
	if (ac->record_on)
		ac->record_writer = zl_record_writer_begin(ac->record_codec);
	/* packing would read sub-groups before retire_rows masks them */
	zl_write_hold_packing(RelationGetRelid(ac->rel), true);
	ac->chunk_context = AllocSetContextCreate(CurrentMemoryContext, "zipper_lake apply chunk",
											  ALLOCSET_DEFAULT_SIZES);
	ac->key_context = AllocSetContextCreate(CurrentMemoryContext, "zipper_lake apply key",
											ALLOCSET_DEFAULT_SIZES);
	do
	{
		MemoryContext old = MemoryContextSwitchTo(ac->chunk_context);
		uint64		range_end = Min(lo + span - 1, (uint64) PG_UINT32_MAX);
		uint64		hi = range_end;
		uint32		last = 0;
		uint32		hash;

		chunk_begin(ac);
		while (zl_apply_next_change_hash(ac, &hash))
		{
			Change	   *c;

			if (hash > range_end)
				break;			/* a later chunk's */
			if (ac->nkeys > 0 && hash != last &&
				MemoryContextMemAllocated(ac->chunk_context, true) +
				(Size) ac->nkeys * truncate_bytes >= limit)
			{
				hi = (uint64) hash - 1;
				break;
			}
			c = zl_apply_next_change(ac);
			zl_apply_add_change(key_lookup_hashed(ac, c->values, c->isnull, hash, true), c);
			last = hash;
		}
		ac->chunk_lo = (uint32) lo;
		ac->chunk_hi = (uint32) hi;
		elog(DEBUG2, "zipper_lake: chunk of %d keys, hashes %u..%u", ac->nkeys, ac->chunk_lo, ac->chunk_hi);
		apply_batch(ac);
		ac->later_chunk = true;
		lo = hi + 1;
		MemoryContextSwitchTo(old);
		MemoryContextReset(ac->chunk_context);
	} while (lo <= PG_UINT32_MAX);
	retire_rows(ac);
	zl_write_hold_packing(RelationGetRelid(ac->rel), false);
	zl_write_flush_relation(RelationGetRelid(ac->rel));
	zl_apply_drop_batch(ac);
	MemoryContextDelete(ac->chunk_context);
	MemoryContextDelete(ac->key_context);
	zl_apply_save_record(ac);
}

/* ---------- SQL entry points ---------- */

/*
 * The privileges applying needs on the zipper table: INSERT and UPDATE,
 * and SELECT (on the table, or on every column of it), since the counts
 * tell whether a change equals what a key holds — at any instant with a
 * late change, a column at a time with ignore_nulls — and heap's UPDATE
 * never lets a role compare a value it may not read.
 */
static void
check_apply_privileges(Relation rel)
{
	static const struct
	{
		AclMode		mode;
		const char *name;
	}			privileges[] = {{ACL_SELECT, "SELECT"}, {ACL_INSERT, "INSERT"}, {ACL_UPDATE, "UPDATE"}};
	Oid			relid = RelationGetRelid(rel);
	Oid			userid = GetUserId();
	AclMode		needed = ACL_SELECT | ACL_INSERT | ACL_UPDATE;
	AclMode		missing = needed & ~pg_class_aclmask(relid, userid, needed, ACLMASK_ALL);
	StringInfoData lacks;

	if ((missing & ACL_SELECT) &&
		pg_attribute_aclcheck_all(relid, userid, ACL_SELECT, ACLMASK_ALL) == ACLCHECK_OK)
		missing &= ~ACL_SELECT;
	if (missing == 0)
		return;
	initStringInfo(&lacks);
	for (int i = 0; i < lengthof(privileges); i++)
		if (missing & privileges[i].mode)
			appendStringInfo(&lacks, "%s%s", lacks.len > 0 ? ", " : "", privileges[i].name);
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("permission denied to apply changes to table \"%s\"",
					RelationGetRelationName(rel)),
			 errdetail("Role \"%s\" lacks %s on table %s.",
					   GetUserNameFromId(userid, false), lacks.data, zl_qualified_name(rel)),
			 errhint("Applying changes needs SELECT (on the table or every column), INSERT and UPDATE on the zipper table: the counts tell whether a change equals what the table holds.")));
}

/*
 * Open the zipper table and the relation of changes (its argument named
 * source_argument) for applying; with leaves, the leaf-th leaf of a
 * zipper parent, whose privileges were checked on the parent, as INSERT
 * into a partitioned table checks them (zl_apply_leaves.c).
 */
static void
apply_begin(ApplyContext *ac, ZLApplyLeaves *leaves, int leaf, Oid relid, Oid source_relid,
			const char *source_argument)
{
	memset(ac, 0, sizeof(*ac));
	if (leaves != NULL)
	{
		check_apply_privileges(zl_parent_relation(leaves->parent));
		zl_refuse_row_security(zl_parent_relation(leaves->parent));
		relid = zl_parent_leaf(leaves->parent, leaf);
		ac->parent = leaves->parent;
		ac->leaf = leaf;
		ac->parent_newest = leaves->newest;
	}
	else
		ac->parent_newest = zl_apply_shard_parent_newest();
	ac->rel = zl_open_zipper_table(relid, RowExclusiveLock);
	ac->tupdesc = RelationGetDescr(ac->rel);
	if (leaves == NULL)
		ac->shard_rows = zl_apply_shard_rows(ac->tupdesc);
	ac->source_name = zl_relation_arg_name(source_relid, source_argument);
	if (leaves == NULL)
		check_apply_privileges(ac->rel);
	else
		zl_parent_route_rows_of(leaves->parent, ac->tupdesc);
	zl_refuse_row_security(ac->rel);
	zl_load_registration(ac->rel, &ac->opts, true,
						 "Changes are placed by the key and period columns named at registration.",
						 "Register it with zipper_lake.register().");
	prepare_comparisons(ac);
	ac->row_check = zl_row_check_begin(ac->rel, &ac->opts);
	ac->batch_newest = PG_INT64_MIN;
	ac->record_on = zl_meta_record_exists();
	if (ac->record_on)
		ac->record_codec = zl_record_codec_create(ac->tupdesc, &ac->opts, ac->hasher);
}

/* apply the batch read (apply_chunks), close the table, add the counts to *total */
static void
apply_end(ApplyContext *ac, ApplyCounts *total)
{
	apply_chunks(ac);
	zl_row_check_end(ac->row_check);
	table_close(ac->rel, NoLock);
	zl_apply_add_counts(total, &ac->counts);
}

ZLMissingColumns
zl_apply_parse_missing_columns(const char *mode)
{
	if (mode == NULL || strcmp(mode, "error") == 0)
		return MISSING_ERROR;
	if (strcmp(mode, "null") == 0)
		return MISSING_NULL;
	if (strcmp(mode, "keep") == 0)
		return MISSING_KEEP;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid missing_columns \"%s\"", mode),
			 errdetail("A value column the changes lack is an error, NULL, or kept from what the key holds."),
			 errhint("Pass 'error', 'null' or 'keep'.")));
	return MISSING_ERROR;		/* keep compiler quiet */
}

/* the name of a missing_columns mode, as zl_apply_parse_missing_columns reads it */
const char *
zl_apply_missing_columns_name(ZLMissingColumns mode)
{
	return mode == MISSING_NULL ? "null" : mode == MISSING_KEEP ? "keep" : "error";
}

/* ignore_nulls and missing_columns, at argno and argno + 1 (0.2 only) */
static void
partial_options(FunctionCallInfo fcinfo, ZLApplyCall *call, int argno)
{
	char	   *mode;

	call->missing_columns = MISSING_ERROR;
	if (PG_NARGS() <= argno + 1)
		return;
	call->ignore_nulls = !PG_ARGISNULL(argno) && PG_GETARG_BOOL(argno);
	mode = PG_ARGISNULL(argno + 1) ? "error" : text_to_cstring(PG_GETARG_TEXT_PP(argno + 1));
	call->missing_columns = zl_apply_parse_missing_columns(mode);
}

/* a name argument into *name; false if NULL */
static bool
name_arg(FunctionCallInfo fcinfo, int argno, NameData *name)
{
	if (PG_ARGISNULL(argno))
		return false;
	namestrcpy(name, NameStr(*PG_GETARG_NAME(argno)));
	return true;
}

/* what a call reads into the batch of one table (or leaf): the changes, or the image */
static void
read_call_batch(ApplyContext *ac, const ZLApplyCall *call)
{
	int64		snapshot_time;

	ac->ignore_nulls = call->ignore_nulls;
	ac->missing_columns = call->missing_columns;
	if (!call->snapshot)
	{
		zl_apply_read_batch(ac, call->source_relid, NameStr(call->time_column),
							call->has_op ? NameStr(call->op_column) : NULL,
							call->has_seq ? NameStr(call->seq_column) : NULL, 0);
		return;
	}
	/* snapshot_time arrives as timestamptz: take it in the column's terms */
	snapshot_time = zl_instant_to_precision(&ac->opts,
											zl_timestamptz_to_instant(&ac->opts, call->snapshot_time));
	zl_apply_check_snapshot_time(ac, snapshot_time);
	ac->image = true;
	ac->delete_missing = call->deletes;
	ac->delete_time = snapshot_time;
	zl_apply_read_batch(ac, call->source_relid, NULL, NULL, NULL, snapshot_time);
	/* the whole image: every pass of a zipper parent reads all of it */
	if (ac->rows_seen == 0)
		zl_apply_refuse_empty_image(call, &ac->opts);
}

/* an empty image, unless allow_empty: an error */
void
zl_apply_refuse_empty_image(const ZLApplyCall *call, const ZLTableOptions *opts)
{
	if (call->allow_empty)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("snapshot \"%s\" is empty", zl_relation_arg_name(call->source_relid, "snapshot")),
			 call->deletes ?
			 errdetail("Applied with deletes, an empty image would delete every key of zipper table \"%s\" at %s.",
					   get_rel_name(call->relid),
					   zl_instant_to_cstring(zl_instant_to_precision(opts,
																	 zl_timestamptz_to_instant(opts, call->snapshot_time)),
											 opts->period_type)) :
			 errdetail("An empty image changes nothing in zipper table \"%s\".",
					   get_rel_name(call->relid)),
			 errhint("Pass allow_empty => true if the source really is empty; nothing was applied.")));
}

/*
 * Apply a call's batch to its table, or to the leaves first, first + step,
 * ... of a zipper parent, one after another, adding the counts to *total.
 */
void
zl_apply_call_leaves(const ZLApplyCall *call, ZLApplyLeaves *leaves, int first, int step,
					 ApplyCounts *total)
{
	if (call->events)
	{
		zl_events_apply_leaves(call, leaves, first, step, total);
		return;
	}
	for (int leaf = first; leaf < zl_apply_leaves_count(leaves); leaf += step)
	{
		ApplyContext ac;
		MemoryContext pass = AllocSetContextCreate(CurrentMemoryContext, "zipper_lake apply pass",
												   ALLOCSET_DEFAULT_SIZES);
		MemoryContext old = MemoryContextSwitchTo(pass);

		if (leaves != NULL && zl_parent_leaf_is_shard(leaves->parent, leaf))
		{
			/* a shard (zl_apply_remote.c); an empty image, in the parent's terms */
			if (zl_apply_remote_pass(call, leaves, leaf, total) == 0 && call->snapshot &&
				!call->allow_empty)
			{
				ZLTableOptions opts;

				zl_load_registration(zl_parent_relation(leaves->parent), &opts, false, NULL, NULL);
				zl_apply_refuse_empty_image(call, &opts);
			}
		}
		else
		{
			apply_begin(&ac, leaves, leaf, call->relid, call->source_relid,
						call->snapshot ? "snapshot" : "changes");
			read_call_batch(&ac, call);
			apply_end(&ac, total);
		}
		MemoryContextSwitchTo(old);
		MemoryContextDelete(pass);
	}
}

bool		zl_apply_by_follower = false;

/*
 * A table that follows a live source takes changes from its follower
 * only: a batch of other changes would mix another source's times into
 * the source's history (README "Following a live source").
 */
static void
refuse_followed(Oid relid)
{
	Oid			nsp = get_namespace_oid("zipper_lake", true);
	Oid			types[1] = {OIDOID};
	Datum		args[1] = {ObjectIdGetDatum(relid)};
	bool		followed;

	if (zl_apply_by_follower || !OidIsValid(get_relname_relid("follower", nsp)))
		return;
	zl_as_extension_owner(true);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute_with_args("SELECT 1 FROM zipper_lake.follower WHERE tbl = $1", 1, types, args,
							  NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "reading zipper_lake.follower failed");
	followed = SPI_processed > 0;
	SPI_finish();
	zl_as_extension_owner(false);
	if (followed)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table \"%s\" follows a live source", get_rel_name(relid)),
				 errdetail("Only its follower applies changes to it, each at its source transaction's commit time."),
				 errhint("Call zipper_lake.unfollow() first to apply batches of your own.")));
}

/*
 * Apply a call: to its table, or to a zipper parent's leaves, one after
 * another or, with zipper_lake.apply_workers, in background workers
 * (zl_apply_workers.c).
 */
Datum
zl_apply_call(FunctionCallInfo fcinfo, const ZLApplyCall *call)
{
	ApplyCounts total = {0};
	ZLApplyLeaves *leaves;

	refuse_followed(call->relid);

	if (zl_apply_in_workers(call, &total))
		return zl_apply_result(fcinfo, &total);
	leaves = zl_apply_leaves_begin(call->relid, 0, 1);
	zl_apply_call_leaves(call, leaves, 0, 1, &total);
	zl_apply_leaves_end(leaves);
	return zl_apply_result(fcinfo, &total);
}

/*
 * The SQL entry points.  The install script of 0.1 binds apply_changes and
 * apply_snapshot to the first two symbols; 0.2's script binds them to the
 * _v2 ones.  A 0.1 installation running this library keeps 0.1's meaning
 * until ALTER EXTENSION UPDATE: its op argument defaults to 'op', which
 * must not become a required column, and its apply_snapshot has no
 * allow_empty, so an empty image is applied.
 */
static Datum
apply_changes(FunctionCallInfo fcinfo, bool op_defaults_to_op)
{
	ZLApplyCall call = {0};

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("table, changes and change_time must not be null"),
				 errdetail("Argument %s is null.", PG_ARGISNULL(0) ? "tbl" : PG_ARGISNULL(1) ? "changes" : "change_time"),
				 errhint("Pass the zipper table, the relation holding the changes and its change-time column.")));
	call.relid = PG_GETARG_OID(0);
	call.source_relid = PG_GETARG_OID(1);
	(void) name_arg(fcinfo, 2, &call.time_column);
	call.has_op = name_arg(fcinfo, 3, &call.op_column);
	call.has_seq = name_arg(fcinfo, 4, &call.seq_column);
	if (op_defaults_to_op && call.has_op && strcmp(NameStr(call.op_column), "op") == 0)
		call.has_op = false;
	partial_options(fcinfo, &call, 5);
	return zl_apply_call(fcinfo, &call);
}

static Datum
apply_snapshot(FunctionCallInfo fcinfo, bool allow_empty)
{
	ZLApplyCall call = {0};

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2) || PG_ARGISNULL(3))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("table, snapshot, snapshot_time and deletes must not be null"),
				 errdetail("Argument %s is null.", PG_ARGISNULL(0) ? "tbl" : PG_ARGISNULL(1) ? "snapshot" :
						   PG_ARGISNULL(2) ? "snapshot_time" : "deletes"),
				 errhint("Pass the zipper table, the relation holding the image and the time it was taken.")));
	call.relid = PG_GETARG_OID(0);
	call.source_relid = PG_GETARG_OID(1);
	call.snapshot = true;
	call.snapshot_time = PG_GETARG_TIMESTAMPTZ(2);
	call.deletes = PG_GETARG_BOOL(3);
	call.allow_empty = allow_empty;
	partial_options(fcinfo, &call, 5);
	return zl_apply_call(fcinfo, &call);
}

/* 0.1: apply_changes(tbl, changes, change_time, op DEFAULT 'op', seq) */
Datum
zipper_lake_apply_changes(PG_FUNCTION_ARGS)
{
	return apply_changes(fcinfo, true);
}

/* 0.1: apply_snapshot(tbl, snapshot, snapshot_time, deletes) */
Datum
zipper_lake_apply_snapshot(PG_FUNCTION_ARGS)
{
	return apply_snapshot(fcinfo, true);
}

/* 0.2: apply_changes(tbl, changes, change_time, op DEFAULT NULL, seq) */
Datum
zipper_lake_apply_changes_v2(PG_FUNCTION_ARGS)
{
	return apply_changes(fcinfo, false);
}

/* 0.2: apply_snapshot(tbl, snapshot, snapshot_time, deletes, allow_empty) */
Datum
zipper_lake_apply_snapshot_v2(PG_FUNCTION_ARGS)
{
	return apply_snapshot(fcinfo, !PG_ARGISNULL(4) && PG_GETARG_BOOL(4));
}

/* ---------- a batch from another source of changes (zl_events.c) ---------- */

/*
 * The changes of a batch can come from elsewhere than a relation of typed
 * rows: zl_apply_batch_begin() opens the table as apply_changes does, the
 * source adds its changes one by one (row-shaped values, already of the
 * columns' types; given: the columns a partial change gives, NULL for
 * all), and zl_apply_batch_finish() applies them and returns the counts.
 */
ZLApplyBatch *
zl_apply_batch_begin(ZLApplyLeaves *leaves, int leaf, Oid relid, Oid source_relid,
					 const char *source_argument, bool ignore_nulls,
					 ZLMissingColumns missing_columns)
{
	ApplyContext *ac = palloc(sizeof(ApplyContext));

	apply_begin(ac, leaves, leaf, relid, source_relid, source_argument);
	ac->ignore_nulls = ignore_nulls;
	ac->missing_columns = missing_columns;
	ac->batch_context = CurrentMemoryContext;
	zl_apply_begin_batch(ac);
	return ac;
}

Relation
zl_apply_batch_relation(ZLApplyBatch *ac, const ZLTableOptions **opts)
{
	*opts = &ac->opts;
	return ac->rel;
}

/* missing_columns for a change that lacks columns of the table */
bool
zl_apply_batch_keeps_missing(ZLApplyBatch *ac, const char *column, const char *change)
{
	if (ac->missing_columns == MISSING_ERROR)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" is missing from %s", column, change),
				 errdetail("Zipper table \"%s\" needs every value column in every change.",
						   RelationGetRelationName(ac->rel)),
				 errhint("Pass missing_columns => 'null' or 'keep'; nothing was applied.")));
	return ac->missing_columns == MISSING_KEEP;
}

void
zl_apply_batch_add(ZLApplyBatch *ac, const ZLBatchChange *bc)
{
	int			ncols = ac->tupdesc->natts;
	Change	   *c = palloc0(sizeof(Change));

	c->values = palloc(sizeof(Datum) * (ncols + 3));
	c->isnull = palloc(sizeof(bool) * (ncols + 3));
	memcpy(c->values, bc->values, sizeof(Datum) * ncols);
	memcpy(c->isnull, bc->isnull, sizeof(bool) * ncols);
	c->time = zl_instant_to_precision(&ac->opts, zl_timestamptz_to_instant(&ac->opts, bc->time));
	c->op = bc->op == 'u' ? OP_UPSERT : bc->op == 'd' ? OP_DELETE : OP_TRUNCATE;
	c->has_seq = bc->has_seq;
	c->seq = bc->seq;
	c->arrival = (uint32) ac->counts.changes;
	zl_apply_check_change(ac, c, false, "change time");
	if (c->op == OP_UPSERT)
	{
		c->given = zl_apply_given_columns(ac, c);
		if (bc->given != NULL)
		{
			int			nbytes = (ncols + 7) / 8;

			if (c->given == NULL)
			{
				c->given = palloc(nbytes);
				memset(c->given, 0xFF, nbytes);
			}
			for (int i = 0; i < nbytes; i++)
				c->given[i] &= bc->given[i];
			/* every column given: a full upsert */
			for (int col = 0; col < ncols && c->given != NULL; col++)
				if ((c->given[col >> 3] & (1 << (col & 7))) == 0)
					break;
				else if (col == ncols - 1)
					c->given = NULL;
		}
	}
	zl_apply_take_change(ac, c, ac->batch_context);
}

void
zl_apply_batch_finish(ZLApplyBatch *ac, ApplyCounts *total)
{
	zl_apply_end_batch(ac);
	apply_end(ac, total);
}

int
zl_apply_version_cmp(const void *a, const void *b)
{
	const Version *va = a;
	const Version *vb = b;

	return va->from < vb->from ? -1 : (va->from > vb->from ? 1 : 0);
}
