/*-------------------------------------------------------------------------
 *
 * zl_apply_conflict.c
 *	  Applying changes: serialization failures of older snapshots.
 *
 * A transaction whose snapshot is older than the latest (REPEATABLE READ,
 * SERIALIZABLE) fails, as heap's UPDATE does, when a version of a batch
 * key where the lookups looked was written, masked or removed after that
 * snapshot (the method: below).
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "storage/zl_storage.h"
#include "catalog/zl_catalog.h"
#include "apply/zl_apply_internal.h"

#include "utils/snapmgr.h"

/* ---------- a snapshot older than the latest: concurrent changes ---------- */

/*
 * In REPEATABLE READ and SERIALIZABLE the batch reads the latest committed
 * versions (it must build on them, README "Writers"), but like heap's
 * UPDATE it must not edit a key that changed after its transaction's
 * snapshot.  What changed is found from the catalog alone: the same
 * partitions' sub-groups and masks as the transaction's snapshot sees them
 * are compared with what the batch read.  Rows of sub-groups only the
 * latest snapshot sees were written since ("added"); positions masked
 * since, and rows of sub-groups deleted since, were taken away
 * ("removed").  Only those rows are read, and only those of the batch's
 * keys count.  A compaction moves rows of other keys into a new sub-group
 * unchanged: a key changed when its added and removed rows do not pair up
 * as the same versions.
 */
typedef struct ConcurrentRow
{
	KeyState   *ks;
	int64		from;
	int64		to;
	Datum	   *values;
	bool	   *isnull;
	bool		added;			/* visible now only, or to the snapshot only */
	bool		paired;
} ConcurrentRow;

typedef struct ConcurrentArg
{
	ApplyContext *ac;
	bool		added;
	Datum	   *probe;			/* row-shaped array: key slots filled per row */
	ConcurrentRow *rows;
	int			nrows;
	int			maxrows;
} ConcurrentArg;

static void
report_concurrent_change(ApplyContext *ac, const char *key)
{
	ereport(ERROR,
			(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
			 errmsg("could not serialize access due to concurrent update"),
			 errdetail("Key %s of zipper table \"%s\" was changed by a transaction that committed after this transaction's snapshot was taken.",
					   key, RelationGetRelationName(ac->rel)),
			 errhint("Retry the transaction: its new snapshot sees the other change.")));
}

/* an added or removed row: keep it if the batch reads its key's versions there */
static void
collect_concurrent_row(void *arg, const ZLSubGroup *sg, int32 position, HeapTuple tuple)
{
	ConcurrentArg *ca = arg;
	ApplyContext *ac = ca->ac;
	bool		current = sg->placed && sg->partition_end == ZL_CURRENT_PARTITION;
	KeyState   *ks;
	ConcurrentRow *row;

	zl_key_extract(ac->hasher, tuple, ac->tupdesc, ca->probe);
	ks = zl_apply_key_lookup(ac, ca->probe, NULL, false);
	if (ks == NULL || ks->nchanges == 0)
	{
		/*
		 * apply_snapshot with deletes edits every open key: one the snapshot
		 * saw open that is no longer (it would be found otherwise) changed.
		 */
		if (ac->ntable_deletes > 0 && current && zl_apply_key_in_chunk(ac, ca->probe))
			report_concurrent_change(ac, zl_describe_key(&ac->opts, ac->tupdesc, tuple));
		return;
	}
	if (!current && !zl_apply_key_needs_history(ks))
		return;

	grow_array((void **) &ca->rows, &ca->maxrows, ca->nrows + 1, sizeof(ConcurrentRow));
	row = &ca->rows[ca->nrows];
	row->ks = ks;
	row->values = palloc(sizeof(Datum) * ac->tupdesc->natts);
	row->isnull = palloc(sizeof(bool) * ac->tupdesc->natts);
	heap_deform_tuple(heap_copytuple(tuple), ac->tupdesc, row->values, row->isnull);
	row->from = zl_datum_to_instant(row->values[ac->opts.from_attnum - 1], ac->opts.period_type);
	row->to = zl_datum_to_instant(row->values[ac->opts.to_attnum - 1], ac->opts.period_type);
	if (!current && row->to < ks->min_time)
		return;					/* ends before the key's changes: not read */
	row->added = ca->added;
	row->paired = false;
	ca->nrows++;
}

/* rows masked now that the snapshot sees unmasked: read them as it does */
static void
collect_masked_since(ApplyContext *ac, const ZLSubGroup *now, const ZLSubGroup *then,
					 ConcurrentArg *arg)
{
	int64		nbytes = (zl_subgroup_positions(now) + 7) / 8;
	int32	   *positions = palloc(sizeof(int32) * (now->masked_rows - then->masked_rows));
	int			n = 0;

	for (int64 byte = 0; byte < nbytes; byte++)
	{
		uint8		since = now->mask[byte] & ~(then->mask != NULL ? then->mask[byte] : 0);

		for (int bit = 0; since != 0; bit++, since >>= 1)
			if (since & 1)
				positions[n++] = (int32) (byte * 8 + bit);
	}
	Assert(n == now->masked_rows - then->masked_rows);
	zl_read_subgroup_positions(ac->rel, then, positions, n, collect_concurrent_row, arg);
	pfree(positions);
}

static int
concurrent_row_cmp(const void *a, const void *b)
{
	const ConcurrentRow *ra = a;
	const ConcurrentRow *rb = b;

	if (ra->ks != rb->ks)
		return ra->ks < rb->ks ? -1 : 1;
	if (ra->from != rb->from)
		return ra->from < rb->from ? -1 : 1;
	return (int) ra->added - (int) rb->added;
}

static int
pointer_cmp(const void *a, const void *b)
{
	uintptr_t	x = (uintptr_t) *(void *const *) a;
	uintptr_t	y = (uintptr_t) *(void *const *) b;

	return x < y ? -1 : (x > y);
}

/*
 * A snapshot's view without the transaction's own changes: every command
 * of it counts as later than the view (the copy shares the original's
 * arrays, which must stay registered while it is used).
 */
static Snapshot
without_own_changes(Snapshot snapshot)
{
	Snapshot	copy = palloc(sizeof(SnapshotData));

	*copy = *snapshot;
	copy->curcid = FirstCommandId;
	copy->copied = false;
	copy->regd_count = 0;
	copy->active_count = 0;
	return copy;
}

/*
 * Fail if a key of the batch changed after the transaction's snapshot
 * (REPEATABLE READ, SERIALIZABLE); called under the writer lock, after
 * zl_apply_find_stored_versions read the latest state.  The partitions it
 * read are compared as the transaction's snapshot and the latest one see
 * them, both without the transaction's own changes: what lies between is
 * what others committed since.  (With them, a version the transaction
 * masked after a compaction others committed had moved it would be
 * missing from the moved copy and look taken away.)
 */
void
zl_apply_check_concurrent_changes(ApplyContext *ac)
{
	uint64		storage_id = zl_storage_id(ac->rel);
	Snapshot	snapshot = RegisterSnapshot(GetTransactionSnapshot());
	Snapshot	latest = RegisterSnapshot(GetLatestSnapshot());
	ConcurrentArg arg = {ac, true, palloc0(sizeof(Datum) * ac->tupdesc->natts)};
	ZLSubGroupFilter filter;
	ZLSubGroup *then;
	ZLSubGroup *now;
	int			nthen;
	int			nnow;
	bool		deleted_current = false;
	KeyState  **changed;
	int			nchanged = 0;

	/* the partitions the batch read, as both snapshots see them */
	filter.either = false;
	filter.min_partition = ac->history_partition;
	filter.max_partition = ZL_CURRENT_PARTITION;
	filter.from_lo = ZL_UNBOUNDED_LO;
	filter.from_hi = ZL_UNBOUNDED_HI;
	filter.from_min_partition = ac->history_partition;
	then = zl_meta_load_filtered_subgroups(storage_id, without_own_changes(snapshot), &filter,
										   &nthen);
	now = zl_meta_load_filtered_subgroups(storage_id, without_own_changes(latest), &filter,
										  &nnow);

	/* added: sub-groups only the latest snapshot sees; removed: masked since */
	zl_meta_load_key_directories(storage_id, latest, now, nnow, NULL);
	for (int i = 0; i < nnow; i++)
	{
		const ZLSubGroup *old = zl_meta_find_subgroup(then, nthen, now[i].subgroup_id);

		arg.added = (old == NULL);
		if (old == NULL)
			zl_apply_read_batch_key_rows(ac, &now[i], collect_concurrent_row, &arg);
		else if (now[i].masked_rows > old->masked_rows)
			collect_masked_since(ac, &now[i], old, &arg);
	}

	/* removed: sub-groups deleted since (compacted), read as the snapshot sees them */
	arg.added = false;
	for (int i = 0; i < nthen; i++)
		if (zl_meta_find_subgroup(now, nnow, then[i].subgroup_id) == NULL && then[i].placed &&
			then[i].partition_end == ZL_CURRENT_PARTITION)
			deleted_current = true;
	if (deleted_current)
		zl_meta_load_key_directories(storage_id, snapshot, then, nthen, NULL);
	for (int i = 0; i < nthen; i++)
		if (zl_meta_find_subgroup(now, nnow, then[i].subgroup_id) == NULL &&
			then[i].masked_rows < then[i].row_count)
			zl_apply_read_batch_key_rows(ac, &then[i], collect_concurrent_row, &arg);
	UnregisterSnapshot(latest);
	UnregisterSnapshot(snapshot);

	/* a key changed unless its added and removed rows are the same versions */
	qsort(arg.rows, arg.nrows, sizeof(ConcurrentRow), concurrent_row_cmp);
	changed = palloc(sizeof(KeyState *) * Max(arg.nrows, 1));
	for (int i = 0; i < arg.nrows; i++)
	{
		ConcurrentRow *r = &arg.rows[i];

		for (int j = i + 1; !r->paired && j < arg.nrows && arg.rows[j].ks == r->ks &&
			 arg.rows[j].from == r->from; j++)
		{
			ConcurrentRow *s = &arg.rows[j];

			if (!s->paired && s->added != r->added && s->to == r->to &&
				values_equal(ac, r->values, r->isnull, s->values, s->isnull))
				r->paired = s->paired = true;
		}
		if (!r->paired && (nchanged == 0 || changed[nchanged - 1] != r->ks))
			changed[nchanged++] = r->ks;
	}
	if (nchanged == 0)
		return;

	/* name the first changed key in the batch's order */
	qsort(changed, nchanged, sizeof(KeyState *), pointer_cmp);
	for (int k = 0; k < ac->nkeys; k++)
		if (bsearch(&ac->keys[k], changed, nchanged, sizeof(KeyState *), pointer_cmp))
			report_concurrent_change(ac, describe_key_values(ac, ac->keys[k]->values,
															 ac->keys[k]->isnull));
}

