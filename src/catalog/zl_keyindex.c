/*-------------------------------------------------------------------------
 *
 * zl_keyindex.c
 *	  One merged key index per storage, so that a probe does not cost a
 *	  look at every sub-group.
 *
 * A probe through the sub-groups' own key directories looks at one filter
 * block per sub-group (zl_keys.c): fine for one lookup, but the inner side
 * of a nested loop probes once per outer row, a session of lookups probes
 * as often, and a table with hundreds of sub-groups then spends its time
 * in those filters.  So the directories of all sub-groups are merged into
 * one index per storage, kept per backend: every (key hash, sub-group,
 * position) of the directories, bucketed by the hash's top 16 bits, so
 * that a probe reads a bucket of a few dozen hashes whatever the number
 * of sub-groups.  Scans that probe many times build it at once; single
 * probes once they have paid for it (zl_key_index_worth_building).
 *
 * The index covers the sub-groups it was built from; directories are
 * immutable, so it stays right for them.  A scan maps its own list of
 * sub-groups onto the index's: sub-groups gone since (compacted, or not
 * visible to the scan's snapshot) are ignored, and sub-groups written
 * since are probed through their own directories, until there are enough
 * of them to build the index again.  An index uses 12 bytes a row (and
 * 256 kB of buckets); a storage whose index would need more than
 * zipper_lake.key_cache_memory (ZL_KEY_CACHE_BYTES) is not indexed, and
 * building one drops the others when the total would exceed it.
 *
 * A storage has up to two indexes, one per scope: scans index every
 * sub-group they may read (ZL_KEY_INDEX_ALL), apply_changes the current
 * partition's (ZL_KEY_INDEX_CURRENT), where it finds the open version of
 * each key of a batch with one probe instead of a pass over every
 * directory.  The scopes keep the two users from replacing each other's
 * index.
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "common/zl_guc.h"
#include "storage/zl_storage.h"
#include "catalog/zl_catalog_internal.h"

#include "utils/hsearch.h"
#include "utils/memutils.h"

#define BUCKET_BITS				16
#define NBUCKETS				(1 << BUCKET_BITS)

struct ZLKeyIndex
{
	int			nsubgroups;
	int64	   *subgroup_ids;	/* of the sub-groups indexed, ascending */
	uint32	   *bucket_start;	/* NBUCKETS + 1 offsets into the entries */
	uint32	   *hashes;
	int32	   *ordinals;		/* into subgroup_ids */
	int32	   *positions;
};

typedef struct IndexKey
{
	ZLStorageKey storage;
	uint64		scope;			/* ZLKeyIndexScope; 64 bits: no padding to hash */
} IndexKey;

typedef struct IndexEntry
{
	IndexKey	key;			/* hash key */
	uint64		generation;		/* changes with every build */
	MemoryContext context;
	ZLKeyIndex *index;
	Size		bytes;
} IndexEntry;

/* sub-groups single probes of a storage looked at since its last build */
typedef struct ProbeDebt
{
	IndexKey	key;			/* hash key */
	int64		subgroups_probed;
	bool		looked;			/* zl_key_index_first_look asked */
} ProbeDebt;

static HTAB *indexes = NULL;
static HTAB *probe_debts = NULL;
static uint64 next_generation = 1;

/* a backend-lifetime hash table of entries keyed by IndexKey */
static HTAB *
storage_table(const char *name, Size entrysize)
{
	HASHCTL		ctl;

	ctl.keysize = sizeof(IndexKey);
	ctl.entrysize = entrysize;
	ctl.hcxt = TopMemoryContext;
	return hash_create(name, 16, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
}

static IndexKey
index_key(uint64 storage_id, ZLKeyIndexScope scope)
{
	IndexKey	key;

	memset(&key, 0, sizeof(key));
	key.storage = zl_meta_storage_key(storage_id);
	key.scope = (uint64) scope;
	return key;
}

static IndexEntry *
find_entry(uint64 storage_id, ZLKeyIndexScope scope)
{
	IndexKey	key = index_key(storage_id, scope);

	if (indexes == NULL)
		return NULL;
	return hash_search(indexes, &key, HASH_FIND, NULL);
}

/* the storage's index of a scope and its generation, if there is one */
static ZLKeyIndex *
zl_key_index_get(uint64 storage_id, ZLKeyIndexScope scope, uint64 *generation)
{
	IndexEntry *entry = find_entry(storage_id, scope);

	if (entry == NULL)
		return NULL;
	*generation = entry->generation;
	return entry->index;
}

/* is an index handed out with this generation still the storage's? */
bool
zl_key_index_current(uint64 storage_id, ZLKeyIndexScope scope, uint64 generation)
{
	IndexEntry *entry = find_entry(storage_id, scope);

	return entry != NULL && entry->generation == generation;
}

static void
drop_entry(IndexEntry *entry)
{
	MemoryContextDelete(entry->context);
	(void) hash_search(indexes, &entry->key, HASH_REMOVE, NULL);
}

/* the bytes of an index of that many rows and sub-groups */
static Size
index_bytes(uint64 rows, int nsubgroups)
{
	return rows * (sizeof(uint32) + 2 * sizeof(int32)) +
		(NBUCKETS + 1) * sizeof(uint32) + nsubgroups * sizeof(int64);
}

/* would an index of that many rows and sub-groups be built? */
bool
zl_key_index_fits(uint64 rows, int nsubgroups)
{
	/* entries are counted in uint32 and probes step through them in an int */
	return index_bytes(rows, nsubgroups) <= ZL_KEY_CACHE_BYTES && rows <= PG_INT32_MAX;
}

/*
 * Build the storage's index from sub-groups (sorted by id) whose key
 * directories are loaded; those without one are left out.  NULL when it
 * would be too big (the old index is dropped all the same: it would only
 * grow staler).
 */
ZLKeyIndex *
zl_key_index_build(uint64 storage_id, ZLKeyIndexScope scope, const ZLSubGroup *sgs, int n,
				   uint64 *generation)
{
	IndexEntry *entry;
	ZLKeyIndex *index;
	MemoryContext context;
	MemoryContext old;
	uint64		nentries = 0;
	Size		bytes;
	uint32	   *fill;

	for (int i = 0; i < n; i++)
		if (sgs[i].key_directory != NULL)
			nentries += ZL_KEY_DIRECTORY_SIZE(sgs[i].key_directory);
	bytes = index_bytes(nentries, n);

	if (indexes == NULL)
		indexes = storage_table("zipper_lake key indexes", sizeof(IndexEntry));
	/* the storage's old index goes, also when no new one fits */
	if ((entry = find_entry(storage_id, scope)) != NULL)
		drop_entry(entry);
	if (!zl_key_index_fits(nentries, n))
		return NULL;
	{
		HASH_SEQ_STATUS status;
		Size		total = bytes;

		hash_seq_init(&status, indexes);
		while ((entry = hash_seq_search(&status)) != NULL)
		{
			if (total + entry->bytes > ZL_KEY_CACHE_BYTES)
				drop_entry(entry);
			else
				total += entry->bytes;
		}
	}

	context = AllocSetContextCreate(TopMemoryContext, "zipper_lake key index",
									ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(context);
	index = palloc0(sizeof(ZLKeyIndex));
	index->subgroup_ids = palloc(sizeof(int64) * Max(n, 1));
	index->bucket_start = palloc0(sizeof(uint32) * (NBUCKETS + 1));
	index->hashes = MemoryContextAllocHuge(context, sizeof(uint32) * Max(nentries, 1));
	index->ordinals = MemoryContextAllocHuge(context, sizeof(int32) * Max(nentries, 1));
	index->positions = MemoryContextAllocHuge(context, sizeof(int32) * Max(nentries, 1));

	/* a counting sort by bucket: count, sum up, scatter */
	for (int i = 0; i < n; i++)
	{
		const bytea *dir = sgs[i].key_directory;

		if (dir == NULL)
			continue;
		for (int e = 0; e < ZL_KEY_DIRECTORY_SIZE(dir); e++)
			index->bucket_start[(ZL_KEY_DIRECTORY_ENTRIES(dir)[e].hash >> (32 - BUCKET_BITS)) + 1]++;
	}
	for (int b = 0; b < NBUCKETS; b++)
		index->bucket_start[b + 1] += index->bucket_start[b];
	fill = palloc(sizeof(uint32) * NBUCKETS);
	memcpy(fill, index->bucket_start, sizeof(uint32) * NBUCKETS);
	for (int i = 0; i < n; i++)
	{
		const bytea *dir = sgs[i].key_directory;
		int			ordinal;

		if (dir == NULL)
			continue;
		ordinal = index->nsubgroups++;
		index->subgroup_ids[ordinal] = sgs[i].subgroup_id;
		for (int e = 0; e < ZL_KEY_DIRECTORY_SIZE(dir); e++)
		{
			const ZLKeyDirEntry *de = &ZL_KEY_DIRECTORY_ENTRIES(dir)[e];
			uint32		at = fill[de->hash >> (32 - BUCKET_BITS)]++;

			index->hashes[at] = de->hash;
			index->ordinals[at] = ordinal;
			index->positions[at] = de->position;
		}
	}
	pfree(fill);
	MemoryContextSwitchTo(old);

	{
		IndexKey	key = index_key(storage_id, scope);

		entry = hash_search(indexes, &key, HASH_ENTER, NULL);
	}
	entry->context = context;
	entry->index = index;
	entry->bytes = bytes;
	entry->generation = next_generation++;
	*generation = entry->generation;
	return index;
}

/*
 * Map a list of sub-groups (ascending by id) onto an index: *map (per index
 * ordinal: the list index, or -1 for a sub-group not in the list) and
 * *in_index (per list index), in the current memory context.  Returns how
 * many sub-groups of the list with a loaded key directory it lacks.
 */
static int
map_onto(const ZLKeyIndex *index, const ZLSubGroup *sgs, int n, int **map, bool **in_index)
{
	int			missing = 0;

	*map = palloc(sizeof(int) * Max(index->nsubgroups, 1));
	*in_index = palloc0(sizeof(bool) * Max(n, 1));
	/* both lists ascend by sub-group id: merge them */
	for (int o = 0, i = 0; o < index->nsubgroups || i < n;)
	{
		if (i < n && (o >= index->nsubgroups || sgs[i].subgroup_id < index->subgroup_ids[o]))
			missing += sgs[i++].key_directory != NULL;
		else if (i >= n || index->subgroup_ids[o] < sgs[i].subgroup_id)
			(*map)[o++] = -1;
		else
		{
			(*map)[o++] = i;
			(*in_index)[i++] = true;
		}
	}
	return missing;
}

/*
 * Map a list of sub-groups (ascending by id, key directories loaded) onto
 * the storage's index of a scope, building the index when there is none or
 * more than ZL_KEY_INDEX_MISSING of the list's sub-groups with a key
 * directory are missing from it.  Returns the index (NULL: too big,
 * nothing mapped, *map and *in_index NULL) with its generation, *map and
 * *in_index (map_onto).
 * Sub-groups not in the index are left to their own directories.
 */
ZLKeyIndex *
zl_key_index_map(uint64 storage_id, ZLKeyIndexScope scope, const ZLSubGroup *sgs, int n,
				 uint64 *generation, int **map, bool **in_index)
{
	ZLKeyIndex *index = zl_key_index_get(storage_id, scope, generation);

	if (index != NULL)
	{
		if (map_onto(index, sgs, n, map, in_index) <= ZL_KEY_INDEX_MISSING(n))
			return index;
		pfree(*map);
		pfree(*in_index);
	}
	*map = NULL;				/* not mapped, unless built now */
	*in_index = NULL;
	index = zl_key_index_build(storage_id, scope, sgs, n, generation);
	if (index != NULL)
		(void) map_onto(index, sgs, n, map, in_index);
	return index;
}

/*
 * The same onto the index the storage has, built from other lists: no
 * directory need be loaded, nothing is built (NULL: no index, *map and
 * *in_index NULL).  The caller
 * loads the directories of the sub-groups outside it, and builds the index
 * again (zl_key_index_build) if too many of them have one.
 */
ZLKeyIndex *
zl_key_index_map_existing(uint64 storage_id, ZLKeyIndexScope scope, const ZLSubGroup *sgs,
						  int n, uint64 *generation, int **map, bool **in_index)
{
	ZLKeyIndex *index = zl_key_index_get(storage_id, scope, generation);

	*map = NULL;
	*in_index = NULL;
	if (index != NULL)
		(void) map_onto(index, sgs, n, map, in_index);
	return index;
}

/* the storage's probe debt of a scope, made (nothing owed) if it has none */
static ProbeDebt *
probe_debt(uint64 storage_id, ZLKeyIndexScope scope)
{
	IndexKey	key = index_key(storage_id, scope);
	ProbeDebt  *debt;
	bool		found;

	if (probe_debts == NULL)
		probe_debts = storage_table("zipper_lake key probe debts", sizeof(ProbeDebt));
	debt = hash_search(probe_debts, &key, HASH_ENTER, &found);
	if (!found)
	{
		debt->subgroups_probed = 0;
		debt->looked = false;
	}
	return debt;
}

/*
 * Is it time a scan probing one key at a time had the index built (or
 * built again)?  Without it, or past what it covers, such scans look at
 * each sub-group's filter and directory, about what building costs per
 * row (a cache miss or two each); so a backend builds the index once its
 * single probes of a storage have looked at as many sub-groups outside
 * an index as the index would hold rows (index_rows) -- at most about
 * twice what the better of the two ways costs, like renting skis until
 * their price is paid.  Each call adds the sub-groups one probe looked at
 * outside the index; a true answer starts the count again.
 */
bool
zl_key_index_worth_building(uint64 storage_id, ZLKeyIndexScope scope, int probed,
							int64 index_rows)
{
	ProbeDebt  *debt = probe_debt(storage_id, scope);

	debt->subgroups_probed += probed;
	if (debt->subgroups_probed < index_rows)
		return false;
	debt->subgroups_probed = 0;
	return true;
}

/* has the storage an index of the scope in this backend? */
bool
zl_key_index_exists(uint64 storage_id, ZLKeyIndexScope scope)
{
	return find_entry(storage_id, scope) != NULL;
}

/*
 * Is this the backend's first look at the storage for the scope?  (Asked
 * by a first apply of many keys, which reads the directories in their
 * stored form rather than build an index a single batch would not pay
 * back: the next one builds it.)
 */
bool
zl_key_index_first_look(uint64 storage_id, ZLKeyIndexScope scope)
{
	ProbeDebt  *debt = probe_debt(storage_id, scope);

	if (debt->looked)
		return false;
	debt->looked = true;
	return true;
}

/*
 * Ask for the entries of a key hash's bucket before probing it: a batch
 * probes its keys in hash order, a few buckets apart, each probe missing
 * the cache in the three arrays.
 */
void
zl_key_index_prefetch(const ZLKeyIndex *index, uint32 hash)
{
	uint32		e = index->bucket_start[hash >> (32 - BUCKET_BITS)];

	ZL_PREFETCH(&index->hashes[e]);
	ZL_PREFETCH(&index->ordinals[e]);
	ZL_PREFETCH(&index->positions[e]);
}

/*
 * The next row of a key hash: its sub-group's ordinal (into the index's
 * subgroup_ids) and *position, or -1 when there is none left.
 * *cursor starts at -1.
 */
int
zl_key_index_find(const ZLKeyIndex *index, uint32 hash, int *cursor, int32 *position)
{
	uint32		bucket = hash >> (32 - BUCKET_BITS);
	uint32		e = *cursor < 0 ? index->bucket_start[bucket] : (uint32) *cursor + 1;

	for (; e < index->bucket_start[bucket + 1]; e++)
		if (index->hashes[e] == hash)
		{
			*cursor = (int) e;
			*position = index->positions[e];
			return index->ordinals[e];
		}
	*cursor = (int) e;
	return -1;
}
