/*-------------------------------------------------------------------------
 *
 * zl_apply_record.c
 *	  Applying changes: the change record of the batch's keys.
 *
 * What the versions do not show (README "The change record";
 * catalog/zl_record.c keeps it): the table's head -- its newest change and
 * its instants of every key -- is read by the first chunk, the keys'
 * remembered instants from the record's segments of the chunk's hash
 * range, and the record entries the fold changed are written, with the
 * head, as the record's newest piece once the batch's rows are.
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "storage/zl_storage.h"
#include "catalog/zl_catalog.h"
#include "apply/zl_apply_internal.h"

/* ---------- the change record ---------- */

/*
 * What the table remembers besides its versions, read once per batch
 * under the writer lock: the newest change applied (late data, the
 * horizon) and the instants of every key (snapshots with deletes,
 * truncates).
 */
void
zl_apply_load_record_head(ApplyContext *ac)
{
	ac->head_loaded = true;
	ac->newest_change = PG_INT64_MIN;
	ac->table_instants.stored = NULL;
	ac->table_instants.nstored = 0;
	if (ac->record_on)
	{
		MemoryContext old = MemoryContextSwitchTo(ac->batch_context);

		(void) zl_meta_record_head(RelationGetRelid(ac->rel), ac->snapshot, &ac->newest_change,
								   &ac->table_instants.stored, &ac->table_instants.nstored);
		MemoryContextSwitchTo(old);
	}
	/* a zipper parent's leaf or shard: the parent's newest (zl_apply_leaves.c) */
	ac->newest_change = Max(ac->newest_change, ac->parent_newest);
	/* at the newest instant too: a version may end there (zl_apply_lookup.c) */
	ac->table_deletes_late = ac->ntable_deletes > 0 &&
		ac->table_deletes[0].time <= ac->newest_change;
}

/*
 * Changes the table no longer accepts: at or before its history cut
 * (README "Lifecycle"), or, with a late_horizon, older than the newest
 * change applied before the batch minus the horizon (README "Late data"):
 * a key's earliest change, or (ks NULL) the time of a snapshot with
 * deletes.
 */
void
zl_apply_check_horizon(ApplyContext *ac, KeyState *ks)
{
	int64		cutoff;
	int64		time = ks != NULL ? ks->min_time : ac->table_deletes[0].time;
	/* a leaf of a zipper parent: the parent's cut and horizon */
	const char *table = ac->parent != NULL ?
		RelationGetRelationName(zl_parent_relation(ac->parent)) : RelationGetRelationName(ac->rel);

	if (ks != NULL && ks->nchanges == 0)
		return;
	/* README "Lifecycle": history up to the cut was dropped */
	if (time <= ac->opts.history_cut)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 ks != NULL ?
				 errmsg("change for key %s at %s is before the history cut",
						describe_key_values(ac, ks->values, ks->isnull),
						time_text(ac, time)) :
				 errmsg("snapshot at %s is before the history cut", time_text(ac, time)),
				 errdetail("Zipper table \"%s\" dropped the history that ended at or before %s (zipper_lake.drop_history or its retention); it accepts changes after that.",
						   table, time_text(ac, ac->opts.history_cut)),
				 errhint("Drop the change; nothing was applied.")));
	if (ac->opts.late_horizon <= 0 || ac->newest_change == PG_INT64_MIN)
		return;
	cutoff = ac->newest_change - ac->opts.late_horizon;
	if (time < cutoff)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 ks != NULL ?
				 errmsg("change for key %s at %s is beyond the late horizon",
						describe_key_values(ac, ks->values, ks->isnull),
						time_text(ac, time)) :
				 errmsg("snapshot at %s is beyond the late horizon", time_text(ac, time)),
				 errdetail("Zipper table \"%s\" accepts changes from %s on (its newest change, %s, minus its late_horizon).",
						   table, time_text(ac, cutoff), time_text(ac, ac->newest_change)),
				 errhint("Drop the change, or widen the horizon with zipper_lake.set_late_horizon(); nothing was applied.")));
}

/* a record entry of a batch key: it replaces what older pieces said from its since on */
static void
collect_record_entry(void *arg, const ZLRecordEntry *e)
{
	ApplyContext *ac = arg;
	KeyState   *ks;
	int			kept = 0;

	if (bsearch(&e->hash, ac->hashes, ac->nhashes, sizeof(uint32), zl_key_hash_cmp) == NULL)
		return;
	ks = zl_apply_key_lookup(ac, e->key, NULL, false);
	if (ks == NULL || ks->nchanges == 0)
		return;
	for (int i = 0; i < ks->nrecord; i++)
		if (ks->record[i].time < e->since)
			ks->record[kept++] = ks->record[i];
	ks->nrecord = kept;
	for (int i = 0; i < e->ninstants; i++)
	{
		if (e->instants[i].time < ks->record_from)
			continue;
		grow_array((void **) &ks->record, &ks->maxrecord, ks->nrecord + 1,
				   sizeof(ZLRecordInstant));
		ks->record[ks->nrecord++] = *zl_record_copy_instants(ac->record_codec, &e->instants[i], 1);
	}
}

/*
 * The remembered instants of the chunk's keys at or after their earliest
 * change: only segments of the chunk's hash range holding such an instant
 * are read, so an in-order batch reads none.
 */
void
zl_apply_find_record_instants(ApplyContext *ac)
{
	int64		from = PG_INT64_MAX;

	if (!ac->record_on)
		return;
	for (int k = 0; k < ac->nkeys; k++)
	{
		KeyState   *ks = ac->keys[k];

		/*
		 * README "Tracked columns": a version shows the untracked values of
		 * its last instant, so a change anywhere in it concerns every
		 * instant of it: the key's record is read from its start.
		 */
		qsort(ks->versions, ks->nversions, sizeof(Version), zl_apply_version_cmp);
		ks->record_from = ks->min_time;
		if (ac->opts.some_untracked && ks->nversions > 0)
			ks->record_from = Min(ks->min_time, ks->versions[0].from);
		if (ks->nchanges > 0)
			from = Min(from, ks->record_from);
	}
	if (from == PG_INT64_MAX)
		return;
	/* the keys now include those apply_snapshot found missing from its image */
	ac->hashes = zl_apply_key_hashes(ac, false, &ac->nhashes);
	zl_record_read(ac->record_codec, RelationGetRelid(ac->rel), ac->snapshot,
				   ac->chunk_lo, ac->chunk_hi, from, collect_record_entry, ac);
	for (int k = 0; k < ac->nkeys; k++)
	{
		KeyState   *ks = ac->keys[k];

		ks->record_newest = ks->nrecord > 0 ? ks->record[ks->nrecord - 1].time : PG_INT64_MIN;
	}
}

static int
key_hash_order(const void *a, const void *b)
{
	const KeyState *ka = *(KeyState *const *) a;
	const KeyState *kb = *(KeyState *const *) b;

	return ka->hash < kb->hash ? -1 : (ka->hash > kb->hash);
}

/*
 * Sort the chunk's keys by hash.  Those of the batch came in hash order
 * (the batch is sorted so); keys found only among stored rows (deletes of
 * keys an image lacks) follow in storage order: sort just those and merge.
 */
void
zl_apply_sort_keys_by_hash(ApplyContext *ac)
{
	int			sorted = 1;
	KeyState  **merged;
	int			a,
				b,
				n = 0;

	while (sorted < ac->nkeys && ac->keys[sorted - 1]->hash <= ac->keys[sorted]->hash)
		sorted++;
	if (sorted >= ac->nkeys)
		return;
	qsort(ac->keys + sorted, ac->nkeys - sorted, sizeof(KeyState *), key_hash_order);
	merged = palloc(sizeof(KeyState *) * ac->nkeys);
	for (a = 0, b = sorted; a < sorted || b < ac->nkeys;)
		merged[n++] = (b >= ac->nkeys ||
					   (a < sorted && ac->keys[a]->hash <= ac->keys[b]->hash)) ?
			ac->keys[a++] : ac->keys[b++];
	memcpy(ac->keys, merged, sizeof(KeyState *) * ac->nkeys);
	pfree(merged);
}

/*
 * The table instants after the batch: the stored ones and the batch's, one
 * per time — the one that follows in fold order (the batch's at equal
 * seq) — less those before forget_before.
 */
static void
save_table_instants(ApplyContext *ac, Oid relid, int64 forget_before)
{
	const ZLTableInstants *t = &ac->table_instants;
	ZLTableInstant *merged = palloc(sizeof(ZLTableInstant) * Max(1, t->nstored + t->nbatch));
	int			n = 0;
	int			i = 0,
				j = 0;

	while (i < t->nstored || j < t->nbatch)
	{
		const ZLTableInstant *next;

		if (j >= t->nbatch || (i < t->nstored && t->stored[i].time < t->batch[j].time))
			next = &t->stored[i++];
		else
			next = &t->batch[j++];
		if (next->time < forget_before)
			continue;
		if (n > 0 && merged[n - 1].time == next->time)
		{
			if (!zl_fold_precedes(next->time, next->has_seq, next->seq, merged[n - 1].time,
								  merged[n - 1].has_seq, merged[n - 1].seq))
				merged[n - 1] = *next;
		}
		else
			merged[n++] = *next;
	}
	zl_meta_record_save_head(relid, ac->batch_newest, merged, n);
}

/*
 * After the batch's rows: its record entries as the table's newest piece,
 * merged with older ones as they accumulate, and the newest change time
 * and (apply_snapshot with deletes) the snapshot's table-wide instant.
 */
void
zl_apply_save_record(ApplyContext *ac)
{
	Oid			relid = RelationGetRelid(ac->rel);

	int64		forget_before = PG_INT64_MIN;

	if (!ac->record_on)
		return;
	zl_record_writer_finish(ac->record_writer, relid);
	for (int i = 0; i < ac->ntable_deletes; i++)
		ac->batch_newest = Max(ac->batch_newest, ac->table_deletes[i].time);
	/* README "Late data": what no accepted change can reach any more */
	if (ac->opts.late_horizon > 0)
		forget_before = Max(ac->newest_change, ac->batch_newest) - ac->opts.late_horizon;
	/* README "Lifecycle": nor what the history cut refuses */
	if (ac->opts.history_cut != ZL_NO_HISTORY_CUT)
		forget_before = Max(forget_before, ac->opts.history_cut + 1);
	if (ac->batch_newest != PG_INT64_MIN)
		save_table_instants(ac, relid, forget_before);
	zl_record_merge(ac->record_codec, relid, forget_before);
}
