/*-------------------------------------------------------------------------
 *
 * zl_apply_lookup.c
 *	  Applying changes: the stored versions of a chunk's keys.
 *
 * Steps 3 and 4 of zl_apply.c's design comment: under the writer lock,
 * the open versions of the chunk's keys are found through the key
 * directories of the current partition's sub-groups (or the merged key
 * index, for large chunks), and for keys whose changes reach into their
 * history, the versions of the partitions those changes can touch.
 * apply_snapshot with deletes also finds the open keys its image lacks.
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "storage/zl_storage.h"
#include "catalog/zl_catalog.h"
#include "apply/zl_apply_internal.h"
#include "common/zl_radixsort.h"

#include "executor/spi.h"
#include "miscadmin.h"

/* ---------- finding stored versions ---------- */

static void
add_version(KeyState *ks, int64 from, int64 to, Datum *values, bool *isnull,
			StoredVersion *stored)
{
	Version    *v;

	grow_array((void **) &ks->versions, &ks->maxversions, ks->nversions + 1, sizeof(Version));
	v = &ks->versions[ks->nversions++];
	v->from = from;
	v->to = to;
	v->values = values;
	v->isnull = isnull;
	v->stored = stored;
}

typedef struct CollectArg
{
	ApplyContext *ac;
	bool		current;
	Datum	   *probe;			/* row-shaped array: key slots filled per row */
	Datum	   *scratch;		/* a stored row's values, for a look only */
	bool	   *scratch_null;

	/* the key the merged index named for each position read (or NULL) */
	const int32 *hint_positions;	/* ascending */
	KeyState  **hint_keys;
	int			nhints;
	int			next_hint;
} CollectArg;

int
zl_apply_table_instant_cmp(const void *a, const void *b)
{
	const ZLTableInstant *ta = a;
	const ZLTableInstant *tb = b;

	if (zl_fold_precedes(ta->time, ta->has_seq, ta->seq, tb->time, tb->has_seq, tb->seq))
		return -1;
	return zl_fold_precedes(tb->time, tb->has_seq, tb->seq, ta->time, ta->has_seq, ta->seq);
}

/* the i-th table delete as a change of a key (values: a row holding the key) */
static void
add_key_table_delete(KeyState *ks, const ZLTableInstant *delete, Datum *values, bool *isnull)
{
	Change	   *c = palloc0(sizeof(Change));

	c->values = values;
	c->isnull = isnull;
	c->time = delete->time;
	c->has_seq = delete->has_seq;
	c->seq = delete->seq;
	c->op = OP_DELETE;
	c->missing_key = true;		/* counted only when it deletes something */
	zl_apply_add_change(ks, c);
	if (ks->nchanges == 1 || delete->time < ks->min_time)
		ks->min_time = delete->time;
}

/*
 * A key of the chunk the batch has no change of, met holding a version:
 * every table delete is a change of it.
 */
static KeyState *
add_missing_key_delete(ApplyContext *ac, HeapTuple tuple)
{
	int			natts = ac->tupdesc->natts;
	Datum	   *values = palloc(sizeof(Datum) * natts);
	bool	   *isnull = palloc(sizeof(bool) * natts);
	KeyState   *ks;

	heap_deform_tuple(heap_copytuple(tuple), ac->tupdesc, values, isnull);
	ks = zl_apply_key_lookup(ac, values, isnull, true);
	CHECK_FOR_INTERRUPTS();
	for (int i = 0; i < ac->ntable_deletes; i++)
		add_key_table_delete(ks, &ac->table_deletes[i], values, isnull);
	return ks;
}

/* the batch's keys: its truncates are changes of them too (not its image's deletes) */
void
zl_apply_add_truncates_to_batch_keys(ApplyContext *ac)
{
	for (int i = 0; i < ac->ntable_deletes; i++)
	{
		const ZLTableInstant *d = &ac->table_deletes[i];

		if (ac->delete_missing && !d->has_seq && d->time == ac->delete_time)
			continue;			/* the snapshot's: its image rows are these keys' changes */
		CHECK_FOR_INTERRUPTS();
		for (int k = 0; k < ac->nkeys; k++)
			add_key_table_delete(ac->keys[k], d, ac->keys[k]->values, ac->keys[k]->isnull);
	}
}

/*
 * Table deletes older than the newest change applied: a key of the chunk
 * the batch has no change of whose closed version holds such a time is
 * deleted there too (its open version, if any, was found in the current
 * partition).  One whose version ends there is folded too: a delete
 * without seq may have ended it, which the record must then keep (see
 * zl_fold.c instants_to_remember).
 */
static void
discover_missing_key(void *arg, const ZLSubGroup *sg, int32 position, HeapTuple tuple)
{
	CollectArg *ca = arg;
	ApplyContext *ac = ca->ac;
	bool		isnull;
	int64		from,
				to;

	zl_key_extract(ac->hasher, tuple, ac->tupdesc, ca->probe);
	if (!zl_apply_key_in_chunk(ac, ca->probe) || zl_apply_key_lookup(ac, ca->probe, NULL, false) != NULL)
		return;
	from = zl_datum_to_instant(heap_getattr(tuple, ac->opts.from_attnum, ac->tupdesc, &isnull),
							   ac->opts.period_type);
	to = zl_datum_to_instant(heap_getattr(tuple, ac->opts.to_attnum, ac->tupdesc, &isnull),
							 ac->opts.period_type);
	for (int i = 0; i < ac->ntable_deletes; i++)
		if (from <= ac->table_deletes[i].time && ac->table_deletes[i].time <= to)
		{
			(void) add_missing_key_delete(ac, tuple);
			break;
		}
}

/*
 * A key needs its history when its earliest change is at or before the
 * start of its open version (late changes), or it has none (new or
 * deleted keys); only versions ending at or after that change matter.
 */
bool
zl_apply_key_needs_history(const KeyState *ks)
{
	return ks->nchanges > 0 &&
		(!ks->has_current || ks->min_time <= ks->versions[0].from);
}

/*
 * Is a stored open row one the key's only change leaves as it is, with
 * nothing to remember?  The end-of-day case: an image row of an
 * apply_snapshot with deletes, later than every change the table holds,
 * equal to the key's open version.  The fold would count it unchanged,
 * keep the version and remember nothing of the key (the snapshot's
 * instant is the table's, README "The change record"); so it is counted
 * here, and neither the row is copied nor the key folded.  Anything else
 * (partial or seq'd changes, untracked columns, late snapshots, and
 * REPEATABLE READ, whose check of concurrent changes needs every key)
 * folds.
 */
static bool
snapshot_leaves_row(CollectArg *ca, KeyState *ks, HeapTuple tuple)
{
	ApplyContext *ac = ca->ac;
	Change	   *c = ks->changes[0];

	if (!ca->current || !ac->delete_missing || ac->ntable_deletes != 1 ||
		ks->nchanges != 1 || c->op != OP_UPSERT || c->has_seq || c->missing_key ||
		c->given != NULL || c->time != ac->delete_time ||
		c->time <= ac->newest_change || ac->opts.some_untracked ||
		IsolationUsesXactSnapshot())	/* every open key is checked there */
		return false;
	heap_deform_tuple(tuple, ac->tupdesc, ca->scratch, ca->scratch_null);
	if (zl_datum_to_instant(ca->scratch[ac->opts.to_attnum - 1], ac->opts.period_type) !=
		ac->opts.open_end ||
		zl_datum_to_instant(ca->scratch[ac->opts.from_attnum - 1], ac->opts.period_type) >=
		c->time)
		return false;
	return values_equal(ac, c->values, c->isnull, ca->scratch, ca->scratch_null);
}

/* hints whose keys are fetched ahead (twice as far: the keys themselves) */
#define HINTS_AHEAD		4

/*
 * The batch key the merged index named for the row at position, if the
 * row's key (in ca->probe) is that key: no hashing and no probe of the
 * key table for it.  NULL otherwise (no hint, or two keys sharing a hash).
 */
static KeyState *
hinted_key(CollectArg *ca, int32 position)
{
	KeyState   *ks;

	while (ca->next_hint < ca->nhints && ca->hint_positions[ca->next_hint] < position)
		ca->next_hint++;
	if (ca->next_hint >= ca->nhints || ca->hint_positions[ca->next_hint] != position)
		return NULL;
	ks = ca->hint_keys[ca->next_hint];

	/*
	 * Rows come in position order, their keys in no order: fetch the keys
	 * of the rows ahead, then their values, or each is a cache miss.
	 */
	if (ca->next_hint + 2 * HINTS_AHEAD < ca->nhints &&
		ca->hint_keys[ca->next_hint + 2 * HINTS_AHEAD] != NULL)
		ZL_PREFETCH(ca->hint_keys[ca->next_hint + 2 * HINTS_AHEAD]);
	if (ca->next_hint + HINTS_AHEAD < ca->nhints &&
		ca->hint_keys[ca->next_hint + HINTS_AHEAD] != NULL)
		ZL_PREFETCH(ca->hint_keys[ca->next_hint + HINTS_AHEAD]->values);
	return ks != NULL && zl_keys_equal(ca->ac->hasher, ks->values, ca->probe) ? ks : NULL;
}

/* a stored row: keep it as a version of its key if that key needs it */
static void
collect_row(void *arg, const ZLSubGroup *sg, int32 position, HeapTuple tuple)
{
	CollectArg *ca = arg;
	ApplyContext *ac = ca->ac;
	int			natts = ac->tupdesc->natts;
	KeyState   *ks;
	int64		from,
				to;
	Datum	   *values;
	bool	   *nulls;
	StoredVersion *stored;

	zl_key_extract(ac->hasher, tuple, ac->tupdesc, ca->probe);
	ks = hinted_key(ca, position);
	if (ks == NULL)
		ks = zl_apply_key_lookup(ac, ca->probe, NULL, false);
	if (ks == NULL && ca->current && ac->ntable_deletes > 0 && zl_apply_key_in_chunk(ac, ca->probe))
		ks = add_missing_key_delete(ac, tuple);
	if (ks == NULL || ks->nchanges == 0)
		return;
	if (!ca->current && !zl_apply_key_needs_history(ks))
		return;
	if (snapshot_leaves_row(ca, ks, tuple))
	{
		ks->nchanges = 0;		/* nothing to fold */
		ac->counts.unchanged++;
		ac->batch_newest = Max(ac->batch_newest, ac->delete_time);
		return;
	}

	values = palloc(sizeof(Datum) * natts);
	nulls = palloc(sizeof(bool) * natts);
	heap_deform_tuple(heap_copytuple(tuple), ac->tupdesc, values, nulls);
	from = zl_datum_to_instant(values[ac->opts.from_attnum - 1], ac->opts.period_type);
	to = zl_datum_to_instant(values[ac->opts.to_attnum - 1], ac->opts.period_type);
	if (!ca->current && to < ks->min_time)
		return;

	stored = palloc0(sizeof(StoredVersion));
	stored->sg = sg;
	stored->position = position;
	grow_array((void **) &ac->stored, &ac->maxstored, ac->nstored + 1, sizeof(StoredVersion *));
	ac->stored[ac->nstored++] = stored;

	add_version(ks, from, to, values, nulls, stored);
	if (ca->current)
		ks->has_current = true;
}

/*
 * The rows of a sub-group whose key hash is one of the batch's (with
 * table deletes: in the chunk's hash range, every key of which the batch
 * needs): its key directory names their positions, and only those rows
 * are read.  Sub-groups without a directory (history written before 0.2)
 * are read whole.
 */
void
zl_apply_read_batch_key_rows(ApplyContext *ac, const ZLSubGroup *sg, ZLRowCallback callback,
					void *arg)
{
	if (ac->ntable_deletes > 0)	/* every open key of the chunk's range */
		zl_read_subgroup_key_range(ac->rel, sg, ac->chunk_lo, ac->chunk_hi, callback, arg);
	else
		zl_read_subgroup_keys(ac->rel, sg, ac->hashes, ac->nhashes, callback, arg);
}

/*
 * The hashes of the chunk's keys (all, or those needing history), sorted
 * and distinct; their number in *n.  Keys of a sorted batch come in hash
 * order, so the sort is mostly skipped.
 */
uint32 *
zl_apply_key_hashes(ApplyContext *ac, bool history_only, int *n)
{
	uint32	   *hashes = palloc(sizeof(uint32) * Max(ac->nkeys, 1));
	int			nall = 0;
	bool		sorted = true;

	*n = 0;
	for (int k = 0; k < ac->nkeys; k++)
		if (!history_only || zl_apply_key_needs_history(ac->keys[k]))
		{
			hashes[nall] = ac->keys[k]->hash;
			sorted &= nall == 0 || hashes[nall - 1] <= hashes[nall];
			nall++;
		}
	if (!history_only)
		ac->keys_in_hash_order = sorted && nall == ac->nkeys;
	if (!sorted && nall >= ZL_RADIXSORT_MIN_ELEMENTS)
		zl_radix_sort(hashes, nall, sizeof(uint32), sizeof(uint32));
	else if (!sorted)
		qsort(hashes, nall, sizeof(uint32), zl_key_hash_cmp);
	for (int k = 0; k < nall; k++)
		if (*n == 0 || hashes[*n - 1] != hashes[k])
			hashes[(*n)++] = hashes[k];
	return hashes;
}

/* a row of a current sub-group the merged key index names for a batch key */
typedef struct IndexHit
{
	int64		at;				/* list index << 32 | position */
	KeyState   *key;			/* the first batch key of the hash, if known */
} IndexHit;

/* key index hits in ascending order */
#define ST_SORT sort_hits
#define ST_ELEMENT_TYPE IndexHit
#define ST_COMPARE(a, b) ((a)->at < (b)->at ? -1 : (a)->at > (b)->at)
#define ST_SCOPE static
#define ST_DECLARE
#define ST_DEFINE
#include "lib/sort_template.h"

/* index hits in ascending order, by radix sort where that is quicker */
static void
sort_index_hits(IndexHit *hits, int n)
{
	if (n >= ZL_RADIXSORT_MIN_ELEMENTS)
		zl_radix_sort(hits, n, sizeof(IndexHit), sizeof(int64));	/* at >= 0 */
	else
		sort_hits(hits, n);
}

/* keys probed ahead of the one looked up (zl_key_index_prefetch) */
#define KEY_INDEX_AHEAD		4

/*
 * The rows of the chunk's keys in the current sub-groups the merged key
 * index covers, through one probe of it per key (zl_keyindex.c): sorted
 * by sub-group and position, with the key each was found for when the
 * chunk's keys are in hash order (they are, read from a batch sorted by
 * key hash), and their number.  NULL when there is no index to use; then
 * *in_index is NULL too.
 */
static IndexHit *
current_index_hits(ApplyContext *ac, bool **in_index, int *nhits)
{
	uint64		generation;
	int		   *map;
	ZLKeyIndex *index;
	IndexHit   *hits;
	int			maxhits = Max(ac->nhashes, 16);
	int			k = 0;

	*in_index = NULL;
	*nhits = 0;
	if (ac->ntable_deletes > 0 || ac->nhashes < ZL_APPLY_INDEX_KEYS)
		return NULL;
	index = zl_key_index_map(zl_storage_id(ac->rel), ZL_KEY_INDEX_CURRENT, ac->current,
							 ac->ncurrent, &generation, &map, in_index);
	if (index == NULL)
		return NULL;
	hits = palloc(sizeof(IndexHit) * maxhits);
	for (int h = 0; h < ac->nhashes; h++)
	{
		int			cursor = -1;
		int			ordinal;
		int32		position;
		KeyState   *key = NULL;

		if (ac->keys_in_hash_order)
		{
			while (ac->keys[k]->hash < ac->hashes[h])
				k++;
			key = ac->keys[k];
		}
		if (h + KEY_INDEX_AHEAD < ac->nhashes)
			zl_key_index_prefetch(index, ac->hashes[h + KEY_INDEX_AHEAD]);
		while ((ordinal = zl_key_index_find(index, ac->hashes[h], &cursor, &position)) >= 0)
		{
			if (map[ordinal] < 0)
				continue;		/* not in this snapshot's list */
			if (*nhits == maxhits)
			{
				maxhits *= 2;
				hits = repalloc(hits, sizeof(IndexHit) * maxhits);
			}
			hits[*nhits].at = ((int64) map[ordinal] << 32) | (uint32) position;
			hits[(*nhits)++].key = key;
		}
	}
	sort_index_hits(hits, *nhits);
	return hits;
}

/* read the rows named by hits[0 .. nhits - 1] (one sub-group's, ascending), each with its hint */
static void
read_hinted_rows(ApplyContext *ac, const ZLSubGroup *sg, const IndexHit *hits, int nhits,
				 CollectArg *arg)
{
	int32	   *positions = palloc(sizeof(int32) * Max(nhits, 1));
	KeyState  **keys = palloc(sizeof(KeyState *) * Max(nhits, 1));

	for (int k = 0; k < nhits; k++)
	{
		positions[k] = (int32) (uint32) hits[k].at;
		keys[k] = hits[k].key;
	}
	arg->hint_positions = positions;
	arg->hint_keys = keys;
	arg->nhints = nhits;
	arg->next_hint = 0;
	zl_read_subgroup_positions(ac->rel, sg, positions, nhits, collect_row, arg);
	arg->nhints = 0;
	pfree(positions);
	pfree(keys);
}

/*
 * Every open row of the chunk's hash range in a sub-group (apply_snapshot
 * with deletes), each with the batch key of its hash as its hint: the
 * directory's entries and the chunk's keys (key_hashes, one per key) are
 * both in hash order, so one merge pairs them, and collect_row does not
 * look each row's key up in the key table -- a random access a row, a
 * fifth of an end-of-day snapshot's time.  Rows of keys not in the batch
 * (to delete) have no hint.
 */
static void
read_key_range_hinted(ApplyContext *ac, const ZLSubGroup *sg, const uint32 *key_hashes,
					  CollectArg *arg)
{
	const ZLKeyDirEntry *entries;
	int			n = zl_key_directory_range_entries(sg->key_directory, ac->chunk_lo,
												   ac->chunk_hi, &entries);
	IndexHit   *hits = palloc(sizeof(IndexHit) * Max(n, 1));
	int			k = 0;

	for (int e = 0; e < n; e++)
	{
		while (k < ac->nkeys && key_hashes[k] < entries[e].hash)
			k++;
		hits[e].at = (uint32) entries[e].position;
		hits[e].key = k < ac->nkeys && key_hashes[k] == entries[e].hash ? ac->keys[k] : NULL;
	}
	sort_index_hits(hits, n);
	if (n > 0)
		read_hinted_rows(ac, sg, hits, n, arg);
	pfree(hits);
}

/*
 * The backend's first look at a table, for a chunk of many keys (a new
 * connection's nightly batch): each sub-group's directory, unless cached,
 * is matched against the hashes in its stored form
 * (zl_meta_match_key_directories) and the rows it names are read --
 * the current partition's for every key, then the history's for the keys
 * that need it.  Decoding every directory (and building the merged index
 * of the current partition from them) would cost this chunk several times
 * as much; the next chunk or batch does, and then they pay for themselves.
 */
static void
match_directories(ApplyContext *ac, const ZLSubGroup *sgs, int n, const uint32 *hashes,
				  int nhashes, CollectArg *arg)
{
	int32	  **positions = palloc(sizeof(int32 *) * Max(n, 1));
	int		   *npositions = palloc(sizeof(int) * Max(n, 1));
	bool	   *skip = palloc(sizeof(bool) * Max(n, 1));

	/* in the history, the current partition's are read already */
	for (int i = 0; i < n; i++)
		skip[i] = sgs[i].masked_rows >= sgs[i].row_count ||
			(!arg->current && sgs[i].partition_end == ZL_CURRENT_PARTITION);
	elog(DEBUG1, "zipper_lake: %d keys matched in the stored key directories of \"%s\"%s",
		 nhashes, RelationGetRelationName(ac->rel), arg->current ? "" : ", history");
	zl_meta_match_key_directories(zl_storage_id(ac->rel), ac->snapshot, sgs, n, skip,
								  hashes, nhashes, positions, npositions);
	for (int i = 0; i < n; i++)
	{
		if (skip[i])
			continue;
		if (npositions[i] < 0)	/* no directory */
			zl_read_subgroup_rows(ac->rel, &sgs[i], false, collect_row, arg);
		else if (npositions[i] > 0)
			zl_read_subgroup_positions(ac->rel, &sgs[i], positions[i], npositions[i],
									   collect_row, arg);
		if (positions[i] != NULL)
			pfree(positions[i]);
	}
	pfree(positions);
	pfree(npositions);
	pfree(skip);
}

/*
 * The open versions of the batch's keys, from the current partition's
 * sub-groups: for a chunk of many keys, the merged index of the current
 * partition names their rows (on the backend's first look, the stored
 * directories do: match_directories); sub-groups it does not
 * cover (written since it was built), and every sub-group for a few keys
 * or with table deletes (every key in the chunk's hash range), go through
 * their own directories.
 */
static void
find_current_versions(ApplyContext *ac, CollectArg *arg)
{
	uint64		storage_id = zl_storage_id(ac->rel);
	bool	   *in_index;
	IndexHit   *hits;
	int			nhits;
	int			h = 0;
	uint32	   *key_hashes = NULL;

	ac->hashes = zl_apply_key_hashes(ac, false, &ac->nhashes);
	if (ac->ntable_deletes == 0 && ac->nhashes >= ZL_APPLY_INDEX_KEYS &&
		!zl_key_index_exists(storage_id, ZL_KEY_INDEX_CURRENT) &&
		zl_key_index_first_look(storage_id, ZL_KEY_INDEX_CURRENT))
	{
		ac->first_look = true;
		match_directories(ac, ac->current, ac->ncurrent, ac->hashes, ac->nhashes, arg);
		return;
	}
	zl_meta_load_key_directories(storage_id, ac->snapshot, ac->current, ac->ncurrent, NULL);
	hits = current_index_hits(ac, &in_index, &nhits);
	if (ac->ntable_deletes > 0 && ac->keys_in_hash_order)
	{
		key_hashes = palloc(sizeof(uint32) * Max(ac->nkeys, 1));
		for (int k = 0; k < ac->nkeys; k++)
			key_hashes[k] = ac->keys[k]->hash;
	}

	for (int i = 0; i < ac->ncurrent; i++)
	{
		const ZLSubGroup *sg = &ac->current[i];

		if (in_index != NULL && in_index[i])
		{
			int			first = h;

			while (h < nhits && (int) (hits[h].at >> 32) == i)
				h++;
			if (h > first && sg->masked_rows < sg->row_count)
				read_hinted_rows(ac, sg, hits + first, h - first, arg);
		}
		else if (sg->masked_rows >= sg->row_count)
			continue;
		else if (key_hashes != NULL && sg->key_directory != NULL)
			read_key_range_hinted(ac, sg, key_hashes, arg);
		else
			zl_apply_read_batch_key_rows(ac, sg, collect_row, arg);
	}
	if (key_hashes != NULL)
		pfree(key_hashes);
}

void
zl_apply_find_stored_versions(ApplyContext *ac)
{
	uint64		storage_id = zl_storage_id(ac->rel);
	CollectArg	arg = {ac, true, palloc0(sizeof(Datum) * ac->tupdesc->natts),
		palloc(sizeof(Datum) * ac->tupdesc->natts), palloc(sizeof(bool) * ac->tupdesc->natts)};
	int64		history_from = PG_INT64_MAX;
	uint32	   *history_hashes;
	int			nhistory_hashes;

	/*
	 * Read directly, not through the backend's cache: every batch changes
	 * the table, so a cache would read all of its metadata again each time.
	 */
	ac->current = zl_meta_load_subgroups(storage_id, ac->snapshot, ZL_CURRENT_PARTITION,
										 &ac->ncurrent);
	for (int i = 0; i < ac->ncurrent; i++)
		if (!ac->current[i].placed)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("zipper table \"%s\" has unplaced rows",
							RelationGetRelationName(ac->rel)),
					 errhint("Rows loaded before registration are placed when the table is registered.")));
	find_current_versions(ac, &arg);

	/* keys whose changes reach back to or before their open version */
	for (int k = 0; k < ac->nkeys; k++)
		if (zl_apply_key_needs_history(ac->keys[k]))
			history_from = Min(history_from, ac->keys[k]->min_time);
	if (ac->table_deletes_late)
		history_from = Min(history_from, ac->table_deletes[0].time);
	ac->history_partition = ZL_CURRENT_PARTITION;
	if (history_from == PG_INT64_MAX)
		return;

	/* history: only partitions that can hold a valid_to >= history_from */
	ac->history_partition = zl_partition_of(&ac->opts, history_from);
	ac->history = zl_meta_load_subgroups(storage_id, ac->snapshot, ac->history_partition,
										 &ac->nhistory);
	arg.current = false;
	if (ac->table_deletes_late)
		for (int i = 0; i < ac->nhistory; i++)
		{
			const ZLSubGroup *sg = &ac->history[i];

			if (sg->partition_end != ZL_CURRENT_PARTITION && sg->masked_rows < sg->row_count &&
				sg->first_start <= ac->table_deletes[ac->ntable_deletes - 1].time)
				zl_read_subgroup_rows(ac->rel, sg, false, discover_missing_key, &arg);
		}
	history_hashes = zl_apply_key_hashes(ac, true, &nhistory_hashes);
	if (ac->first_look && ac->ntable_deletes == 0)
	{
		match_directories(ac, ac->history, ac->nhistory, history_hashes, nhistory_hashes, &arg);
		return;
	}
	zl_meta_load_key_directories(storage_id, ac->snapshot, ac->history, ac->nhistory, NULL);
	for (int i = 0; i < ac->nhistory; i++)
	{
		const ZLSubGroup *sg = &ac->history[i];

		if (sg->partition_end == ZL_CURRENT_PARTITION || sg->masked_rows >= sg->row_count)
			continue;
		/* only the keys that need history (with table deletes: the chunk's range) */
		if (ac->ntable_deletes > 0)
			zl_apply_read_batch_key_rows(ac, sg, collect_row, &arg);
		else
			zl_read_subgroup_keys(ac->rel, sg, history_hashes, nhistory_hashes, collect_row, &arg);
	}
}
