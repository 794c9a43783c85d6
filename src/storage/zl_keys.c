/*-------------------------------------------------------------------------
 *
 * zl_keys.c
 *	  Key hashing, value equality and the key directories of sub-groups.
 *
 * apply_changes must find the stored versions of every key of a batch, a
 * load (INSERT, COPY) those of the keys it loads, and a key lookup (README
 * "Key access") the rows of a few keys.  Scanning sub-groups for them
 * costs as much as the table is big.  So every placed sub-group also
 * stores, in its metadata row, a key directory: the (key hash, row
 * position) pairs of its rows sorted by hash, immutable like the
 * sub-group — stored in 4 bytes a row, sorted by the backend that caches
 * it (zl_key_directory_build).  Readers keep the positions whose hash is
 * one of theirs and fetch just those rows (zl_scan.c, zl_subgroup_read.c),
 * comparing the real key to weed out collisions.
 *
 * Hashes use the key columns' default hash functions and collations,
 * combined in key order, so writer and reader agree.  Directories are
 * immutable, so each backend caches the ones it has read, each behind a
 * Bloom filter that lets a lookup pass over most sub-groups without
 * touching their directories.
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "common/zl_guc.h"
#include "storage/zl_storage_internal.h"
#include "common/zl_radixsort.h"
#include "common/zl_varint.h"

#include "access/htup_details.h"
#include "common/hashfn.h"
#include "miscadmin.h"
#include "port/pg_bitutils.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/lsyscache.h"
#include "utils/typcache.h"

struct ZLKeyHasher
{
	int			nkeys;
	AttrNumber	attnums[INDEX_MAX_KEYS];
	FmgrInfo	hash[INDEX_MAX_KEYS];
	FmgrInfo	eq[INDEX_MAX_KEYS];
	Oid			collation[INDEX_MAX_KEYS];
};


ZLKeyHasher *
zl_key_hasher_create(TupleDesc tupdesc, const ZLTableOptions *opts)
{
	ZLKeyHasher *h = palloc0(sizeof(ZLKeyHasher));

	h->nkeys = opts->nkeys;
	for (int i = 0; i < opts->nkeys; i++)
	{
		Form_pg_attribute att = TupleDescAttr(tupdesc, opts->key_attnums[i] - 1);
		TypeCacheEntry *tc = lookup_type_cache(att->atttypid,
											   TYPECACHE_HASH_PROC_FINFO |
											   TYPECACHE_EQ_OPR_FINFO);

		if (!OidIsValid(tc->hash_proc_finfo.fn_oid) || !OidIsValid(tc->eq_opr_finfo.fn_oid))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_FUNCTION),
					 errmsg("key column \"%s\" of type %s cannot be hashed",
							NameStr(att->attname), format_type_be(att->atttypid)),
					 errhint("Key columns need a type with hash and equality support.")));
		h->attnums[i] = att->attnum;
		fmgr_info_copy(&h->hash[i], &tc->hash_proc_finfo, CurrentMemoryContext);
		fmgr_info_copy(&h->eq[i], &tc->eq_opr_finfo, CurrentMemoryContext);
		h->collation[i] = att->attcollation;
	}
	return h;
}

/* hash of the key in a row-shaped array of datums (key slots only are read) */
uint32
zl_key_hash(const ZLKeyHasher *h, const Datum *values)
{
	uint32		hash = 0;

	for (int i = 0; i < h->nkeys; i++)
		hash = hash_combine(hash,
							DatumGetUInt32(FunctionCall1Coll((FmgrInfo *) &h->hash[i],
															 h->collation[i],
															 values[h->attnums[i] - 1])));
	return hash;
}

bool
zl_keys_equal(const ZLKeyHasher *h, const Datum *a, const Datum *b)
{
	for (int i = 0; i < h->nkeys; i++)
	{
		AttrNumber	attnum = h->attnums[i];

		if (!DatumGetBool(FunctionCall2Coll((FmgrInfo *) &h->eq[i], h->collation[i],
											a[attnum - 1], b[attnum - 1])))
			return false;
	}
	return true;
}

/* the key of a stored tuple into the key slots of a row-shaped array */
void
zl_key_extract(const ZLKeyHasher *h, HeapTuple tuple, TupleDesc tupdesc, Datum *values)
{
	bool		isnull;

	for (int i = 0; i < h->nkeys; i++)
		values[h->attnums[i] - 1] = heap_getattr(tuple, h->attnums[i], tupdesc, &isnull);
}

/* orders key hashes (qsort, bsearch) */
int
zl_key_hash_cmp(const void *a, const void *b)
{
	uint32		x = *(const uint32 *) a;
	uint32		y = *(const uint32 *) b;

	return x < y ? -1 : (x > y);
}

static inline int
dir_entry_cmp(const ZLKeyDirEntry *x, const ZLKeyDirEntry *y)
{
	if (x->hash != y->hash)
		return x->hash < y->hash ? -1 : 1;
	return x->position < y->position ? -1 : (x->position > y->position);
}

/* a sort of directory entries with the comparison inlined (every write builds one) */
#define ST_SORT sort_dir_entries
#define ST_ELEMENT_TYPE ZLKeyDirEntry
#define ST_COMPARE(a, b) dir_entry_cmp(a, b)
#define ST_SCOPE static
#define ST_DEFINE
#include "lib/sort_template.h"

/*
 * The stored form of a directory (version 2): what the writer knows before
 * sorting — the rows' key hashes in position order, 4 bytes a row — and
 * the ascending positions as runs of consecutive ones, which a columnar
 * sub-group (positions are ordinals) has one of and a page sub-group one
 * per page.  The sorted pairs carry no more information than that, so
 * nothing smaller holds all 32 bits of every hash; a reader sorts them
 * again once per backend (key_directory_decode).
 *
 *	 byte 0		 KEY_DIRECTORY_V2
 *	 varint		 n (rows), varint nruns, then per run: varint gap from the
 *				 previous run's end (the first from 0), varint length
 *	 n uint32	 hashes in position order (native byte order, unaligned)
 *	 [byte 0]	 padding when the length would be a multiple of 8
 *
 * Directories written before version 2 (earlier builds of 0.2) are the
 * sorted (hash, position) pairs themselves, 8 bytes each, with no header:
 * a multiple of 8 bytes long, which a version 2 directory never is.
 */
#define KEY_DIRECTORY_V2	2

/* one varint of a directory's header, at most 32 bits */
static const char *
directory_varint(const char *p, const char *end, uint32 *v)
{
	uint64		value;

	if (!zl_varint_get(&p, end, &value) || value > PG_UINT32_MAX)
		elog(ERROR, "zipper_lake key directory is corrupt");
	*v = (uint32) value;
	return p;
}

/*
 * The directory of n rows, given their key hashes and row positions in
 * ascending position order (the order a sub-group's rows are written in),
 * in its stored form.
 */
bytea *
zl_key_directory_build(const uint32 *hashes, const int32 *positions, int n)
{
	int			nruns = 0;
	bytea	   *dir;
	char	   *start;
	char	   *p;
	Size		len;

	for (int i = 0; i < n; i++)
	{
		Assert(i == 0 || positions[i - 1] < positions[i]);
		Assert(positions[i] >= 0);
		nruns += i == 0 || positions[i] != positions[i - 1] + 1;
	}
	/* at most 5 bytes a varint: header, two per run, hashes, padding */
	dir = palloc(VARHDRSZ + 1 + 5 * 2 + 10 * (Size) nruns + sizeof(uint32) * n + 1);
	start = p = VARDATA(dir);
	*p++ = KEY_DIRECTORY_V2;
	p = zl_varint_put(p, n);
	p = zl_varint_put(p, nruns);
	for (int i = 0, end = 0; i < n;)
	{
		int			run = i;

		while (++i < n && positions[i] == positions[i - 1] + 1)
			;
		p = zl_varint_put(p, positions[run] - end);
		p = zl_varint_put(p, i - run);
		end = positions[i - 1] + 1;
	}
	memcpy(p, hashes, sizeof(uint32) * n);
	p += sizeof(uint32) * n;
	if ((p - start) % sizeof(ZLKeyDirEntry) == 0)
		*p++ = 0;
	len = p - start;
	SET_VARSIZE(dir, VARHDRSZ + len);
	return dir;
}

/* sort directory entries by hash, ties by position */
static void
sort_entries(ZLKeyDirEntry *entries, int n)
{
	if (n >= ZL_RADIXSORT_MIN_ELEMENTS)
		zl_radix_sort(entries, n, sizeof(ZLKeyDirEntry), sizeof(uint32));
	else
		sort_dir_entries(entries, n);
}

/* the hash of stored row i (unaligned) */
static inline uint32
stored_hash(const char *hashes, uint32 i)
{
	uint32		hash;

	memcpy(&hash, hashes + sizeof(uint32) * i, sizeof(uint32));
	return hash;
}

/* a version 2 directory's header: its rows, runs and stored hashes */
typedef struct StoredDirectory
{
	uint32		n;
	uint32		nruns;
	uint32	   *runs;			/* per run: first position, length (palloc'd) */
	const char *hashes;			/* n, in position order, unaligned */
} StoredDirectory;

/* read the header of a directory's stored form; false: before version 2 (the pairs) */
static bool
read_stored_directory(const bytea *stored, StoredDirectory *sd)
{
	const char *p = VARDATA_ANY(stored);
	const char *end = p + VARSIZE_ANY_EXHDR(stored);
	uint32		total = 0;
	uint64		position = 0;	/* end of the runs so far */

	if ((end - p) % sizeof(ZLKeyDirEntry) == 0)
		return false;
	if (*p++ != KEY_DIRECTORY_V2)
		elog(ERROR, "zipper_lake key directory of unknown version %d", (uint8) p[-1]);
	p = directory_varint(p, end, &sd->n);
	p = directory_varint(p, end, &sd->nruns);
	if (sd->n > MaxAllocSize / sizeof(ZLKeyDirEntry) - 1 || sd->nruns > sd->n)
		elog(ERROR, "zipper_lake key directory is corrupt");
	sd->runs = palloc(sizeof(uint32) * 2 * Max(sd->nruns, 1));
	for (uint32 r = 0; r < sd->nruns; r++)
	{
		uint32		gap;

		p = directory_varint(p, end, &gap);
		p = directory_varint(p, end, &sd->runs[2 * r + 1]);
		position += gap;
		sd->runs[2 * r] = (uint32) position;
		position += sd->runs[2 * r + 1];
		total += sd->runs[2 * r + 1];
		if (total > sd->n || position > PG_INT32_MAX)
			elog(ERROR, "zipper_lake key directory is corrupt");
	}
	if (total != sd->n || end - p < (ptrdiff_t) (sizeof(uint32) * sd->n))
		elog(ERROR, "zipper_lake key directory is corrupt");
	sd->hashes = p;
	return true;
}

/*
 * A directory as readers use it — (hash, position) pairs sorted by hash,
 * ZL_KEY_DIRECTORY_ENTRIES — from its stored form, in the current memory
 * context.
 *
 * Hashes are uniform, so a counting sort by their top bits (one to two
 * rows a bucket) puts the pairs straight from the stored form into the
 * result, each a step or two from its place, and an insertion sort closes
 * the gaps: three passes, where a radix sort makes eight, and no memory
 * touched but the result's (on a new connection most of a first key
 * lookup's time goes to writing fresh memory).  Both keep equal hashes in
 * position order.  Keys whose hashes crowd a bucket (many versions of one
 * key are one hash and cost nothing; many distinct hashes sharing their
 * top bits are unlikely) make the insertion sort move far: past a budget
 * of moves a radix sort finishes the job.
 */
static bytea *
key_directory_decode(const bytea *stored)
{
	StoredDirectory sd;
	bytea	   *dir;
	ZLKeyDirEntry *entries;

	/* before version 2: already the pairs */
	if (!read_stored_directory(stored, &sd))
	{
		Size		len = VARSIZE_ANY_EXHDR(stored);

		dir = palloc(VARHDRSZ + len);
		SET_VARSIZE(dir, VARHDRSZ + len);
		memcpy(VARDATA(dir), VARDATA_ANY(stored), len);
		return dir;
	}
	dir = palloc(VARHDRSZ + sizeof(ZLKeyDirEntry) * sd.n);
	SET_VARSIZE(dir, VARHDRSZ + sizeof(ZLKeyDirEntry) * sd.n);
	entries = (ZLKeyDirEntry *) VARDATA(dir);
	if (sd.n < ZL_RADIXSORT_MIN_ELEMENTS)
	{
		for (uint32 r = 0, i = 0; r < sd.nruns; r++)
			for (uint32 k = 0; k < sd.runs[2 * r + 1]; k++, i++)
			{
				entries[i].hash = stored_hash(sd.hashes, i);
				entries[i].position = (int32) (sd.runs[2 * r] + k);
			}
		sort_entries(entries, sd.n);
	}
	else
	{
		int			shift = 32 - pg_leftmost_one_pos32(sd.n);
		uint32		nbuckets = UINT64CONST(1) << (32 - shift);
		uint32	   *starts = palloc0(sizeof(uint32) * nbuckets);
		int64		budget = (int64) sd.n * 4;

		for (uint32 i = 0; i < sd.n; i++)
			starts[stored_hash(sd.hashes, i) >> shift]++;
		for (uint32 b = 0, sum = 0; b < nbuckets; b++)
		{
			uint32		count = starts[b];

			starts[b] = sum;
			sum += count;
		}
		for (uint32 r = 0, i = 0; r < sd.nruns; r++)
			for (uint32 k = 0; k < sd.runs[2 * r + 1]; k++, i++)
			{
				uint32		hash = stored_hash(sd.hashes, i);
				ZLKeyDirEntry *to = &entries[starts[hash >> shift]++];

				to->hash = hash;
				to->position = (int32) (sd.runs[2 * r] + k);
			}
		pfree(starts);

		for (uint32 i = 1; i < sd.n; i++)
		{
			ZLKeyDirEntry entry = entries[i];
			uint32		j = i;

			while (j > 0 && entries[j - 1].hash > entry.hash)
			{
				entries[j] = entries[j - 1];
				j--;
			}
			entries[j] = entry;
			if ((budget -= i - j) < 0)
			{
				sort_entries(entries, sd.n);
				break;
			}
		}
	}
	pfree(sd.runs);
	return dir;
}

/* ---------- equality of the value columns ---------- */

/*
 * Adjacent versions of a key whose value columns (all but the key and
 * period columns) are IS NOT DISTINCT FROM equal, by each type's default
 * equality, are one version (README, "Change semantics").  Types without
 * an equality operator compare by image.
 */
struct ZLValueComparer
{
	TupleDesc	tupdesc;
	int			ncols;
	AttrNumber *attnums;
	FmgrInfo   *eq;				/* fn_oid InvalidOid: compare images */
	Oid		   *collation;
};

ZLValueComparer *
zl_value_comparer_create(TupleDesc tupdesc, const ZLTableOptions *opts, bool tracked_only)
{
	ZLValueComparer *c = palloc0(sizeof(ZLValueComparer));

	c->tupdesc = tupdesc;
	c->attnums = palloc(sizeof(AttrNumber) * tupdesc->natts);
	c->eq = palloc0(sizeof(FmgrInfo) * tupdesc->natts);
	c->collation = palloc0(sizeof(Oid) * tupdesc->natts);
	for (int i = 0; i < tupdesc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(tupdesc, i);
		TypeCacheEntry *tc;

		if (!zl_is_value_column(opts, att) || (tracked_only && !ZL_TRACKED(opts, att->attnum)))
			continue;
		tc = lookup_type_cache(att->atttypid, TYPECACHE_EQ_OPR_FINFO);
		if (OidIsValid(tc->eq_opr_finfo.fn_oid))
			fmgr_info_copy(&c->eq[c->ncols], &tc->eq_opr_finfo, CurrentMemoryContext);
		c->collation[c->ncols] = att->attcollation;
		c->attnums[c->ncols++] = att->attnum;
	}
	return c;
}

/* a varlena value that is TOASTed or compressed */
static inline bool
stored_elsewhere(Datum value)
{
	return VARATT_IS_EXTERNAL(DatumGetPointer(value)) ||
		VARATT_IS_COMPRESSED(DatumGetPointer(value));
}

/* are two rows (row-shaped arrays) equal in every value column? */
bool
zl_values_equal(const ZLValueComparer *c, const Datum *a, const bool *anull,
				const Datum *b, const bool *bnull)
{
	for (int i = 0; i < c->ncols; i++)
	{
		int			col = c->attnums[i] - 1;
		Form_pg_attribute att = TupleDescAttr(c->tupdesc, col);

		if (anull[col] || bnull[col])
		{
			if (anull[col] != bnull[col])
				return false;
			continue;
		}
		/*
		 * Identical images are equal under any opclass equality (it is
		 * reflexive), and comparing them first spares the common case of
		 * an unchanged value the equality function's work (numeric's
		 * detoasts a copy of each short varlena).  Not for TOASTed or
		 * compressed values, which the comparison would fetch twice.
		 */
		if ((att->attlen != -1 ||
			 (!stored_elsewhere(a[col]) && !stored_elsewhere(b[col]))) &&
			datum_image_eq(a[col], b[col], att->attbyval, att->attlen))
			continue;
		if (!OidIsValid(c->eq[i].fn_oid) ||
			!DatumGetBool(FunctionCall2Coll(&c->eq[i], c->collation[i], a[col], b[col])))
			return false;
	}
	return true;
}

/* ---------- a filter in front of each cached directory ---------- */

/*
 * A key probe of a table with hundreds of sub-groups would touch every
 * directory it binary-searches — cache misses that cost more than the rows
 * it reads.  So each cached directory gets a blocked Bloom filter: 512-bit
 * blocks, one per 64 rows (8 bits a row), a key setting three bits of the
 * block its hash picks.  A probe looks at one cache line per sub-group
 * and searches only the directories that may hold one of its keys (about
 * 2% of the others pass by chance).
 */
#define FILTER_BLOCK_WORDS		8	/* 512 bits */
#define FILTER_ROWS_PER_BLOCK	64
#define FILTER_MAX_PROBE_KEYS	64	/* more keys: search the directory */

struct ZLKeyFilter
{
	uint32		nblocks;
	uint64		words[FLEXIBLE_ARRAY_MEMBER];
};

static inline uint64 *
filter_block(const ZLKeyFilter *f, uint32 hash, uint32 *bits)
{
	uint32		mixed = murmurhash32(hash);

	bits[0] = mixed & 511;
	bits[1] = (mixed >> 9) & 511;
	bits[2] = (mixed >> 18) & 511;
	return (uint64 *) &f->words[(hash % f->nblocks) * FILTER_BLOCK_WORDS];
}

static ZLKeyFilter *
key_filter_build(const bytea *dir)
{
	const ZLKeyDirEntry *entries = ZL_KEY_DIRECTORY_ENTRIES(dir);
	int			n = ZL_KEY_DIRECTORY_SIZE(dir);
	uint32		nblocks = Max(1, (n + FILTER_ROWS_PER_BLOCK - 1) / FILTER_ROWS_PER_BLOCK);
	ZLKeyFilter *f = palloc0(offsetof(ZLKeyFilter, words) +
							 sizeof(uint64) * FILTER_BLOCK_WORDS * nblocks);

	f->nblocks = nblocks;
	for (int e = 0; e < n; e++)
	{
		uint32		bits[3];
		uint64	   *block = filter_block(f, entries[e].hash, bits);

		for (int b = 0; b < 3; b++)
			block[bits[b] >> 6] |= UINT64CONST(1) << (bits[b] & 63);
	}
	return f;
}

/* ask for the filter's blocks of the hashes ahead of zl_key_filter_may_hold */
void
zl_key_filter_prefetch(const ZLKeyFilter *f, const uint32 *hashes, int nhashes)
{
	if (f == NULL || nhashes > FILTER_MAX_PROBE_KEYS)
		return;
	for (int h = 0; h < nhashes; h++)
	{
		uint32		bits[3];

		ZL_PREFETCH(filter_block(f, hashes[h], bits) + (bits[0] >> 6));
	}
}

/* may a directory behind the filter hold one of the hashes?  (NULL: yes) */
bool
zl_key_filter_may_hold(const ZLKeyFilter *f, const uint32 *hashes, int nhashes)
{
	if (f == NULL || nhashes > FILTER_MAX_PROBE_KEYS)
		return true;
	for (int h = 0; h < nhashes; h++)
	{
		uint32		bits[3];
		uint64	   *block = filter_block(f, hashes[h], bits);

		if ((block[bits[0] >> 6] & (UINT64CONST(1) << (bits[0] & 63))) &&
			(block[bits[1] >> 6] & (UINT64CONST(1) << (bits[1] & 63))) &&
			(block[bits[2] >> 6] & (UINT64CONST(1) << (bits[2] & 63))))
			return true;
	}
	return false;
}

/* ---------- a per-backend cache of directories ---------- */

/*
 * Directories never change, so each backend keeps those it has read, keyed
 * by the metadata catalog's OID (new with every CREATE EXTENSION, which
 * restarts the id sequence) and the sub-group id (never reused within
 * one).  Pointers handed out stay valid until the cache is trimmed, which
 * its users do where they hold none (apply before each chunk, a load
 * before its check, a scan before it loads directories); a scan that keeps
 * them across probes compares zl_key_directory_cache_generation() first.
 * The cache is emptied at such a point once it holds more than
 * zipper_lake.key_cache_memory (ZL_KEY_CACHE_BYTES).
 */
typedef struct DirCacheKey
{
	Oid			catalog;
	int64		subgroup_id;
} DirCacheKey;

typedef struct DirCacheEntry
{
	DirCacheKey key;
	bytea	   *directory;
	ZLKeyFilter *filter;
} DirCacheEntry;

static HTAB *dir_cache = NULL;
static MemoryContext dir_cache_context = NULL;
static uint64 dir_cache_generation = 0;	/* counts the cache's resets */

/* changes whenever pointers handed out before stop being valid */
uint64
zl_key_directory_cache_generation(void)
{
	return dir_cache_generation;
}

static void
dir_cache_create(void)
{
	HASHCTL		ctl;

	if (dir_cache_context == NULL)
		dir_cache_context = AllocSetContextCreate(TopMemoryContext,
												  "zipper_lake key directories",
												  ALLOCSET_DEFAULT_SIZES);
	else
		MemoryContextReset(dir_cache_context);
	dir_cache_generation++;
	ctl.keysize = sizeof(DirCacheKey);
	ctl.entrysize = sizeof(DirCacheEntry);
	ctl.hcxt = dir_cache_context;
	dir_cache = hash_create("zipper_lake key directories", 256, &ctl,
							HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
}

/* empty the cache if it outgrew its bound: every pointer handed out goes */
void
zl_key_directory_cache_trim(void)
{
	if (dir_cache == NULL ||
		MemoryContextMemAllocated(dir_cache_context, true) >= ZL_KEY_CACHE_BYTES)
		dir_cache_create();
}

bytea *
zl_key_directory_cached(Oid catalog, int64 subgroup_id, const ZLKeyFilter **filter)
{
	DirCacheKey key;
	DirCacheEntry *entry;

	if (dir_cache == NULL)
		dir_cache_create();
	memset(&key, 0, sizeof(key));
	key.catalog = catalog;
	key.subgroup_id = subgroup_id;
	entry = hash_search(dir_cache, &key, HASH_FIND, NULL);
	*filter = entry ? entry->filter : NULL;
	return entry ? entry->directory : NULL;
}

bytea *
zl_key_directory_remember(Oid catalog, int64 subgroup_id, const bytea *stored,
						  const ZLKeyFilter **filter)
{
	DirCacheKey key;
	DirCacheEntry *entry;
	MemoryContext old;
	bytea	   *copy;
	ZLKeyFilter *built;

	if (dir_cache == NULL)
		dir_cache_create();
	old = MemoryContextSwitchTo(dir_cache_context);
	copy = key_directory_decode(stored);	/* may fail: before entering */
	built = key_filter_build(copy);

	memset(&key, 0, sizeof(key));
	key.catalog = catalog;
	key.subgroup_id = subgroup_id;
	entry = hash_search(dir_cache, &key, HASH_ENTER, NULL);
	entry->directory = copy;
	entry->filter = built;
	MemoryContextSwitchTo(old);
	*filter = built;
	return copy;
}

/* first index in entries[lo, hi) whose hash is >= hash */
static int
lower_bound(const ZLKeyDirEntry *entries, int lo, int hi, uint32 hash)
{
	while (lo < hi)
	{
		int			mid = lo + (hi - lo) / 2;

		if (entries[mid].hash < hash)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/*
 * The entries of a directory whose hash lies in [lo, hi], in hash order:
 * their number, and in *range the first of them (in the directory).
 */
int
zl_key_directory_range_entries(const bytea *dir, uint32 lo, uint32 hi,
							   const ZLKeyDirEntry **range)
{
	const ZLKeyDirEntry *entries = ZL_KEY_DIRECTORY_ENTRIES(dir);
	int			n = ZL_KEY_DIRECTORY_SIZE(dir);
	int			first = lower_bound(entries, 0, n, lo);
	int			end = first;

	while (end < n && entries[end].hash <= hi)
		end++;
	*range = entries + first;
	return end - first;
}

/* positions in a directory whose hash lies in [lo, hi] */
int32 *
zl_key_directory_range(const bytea *dir, uint32 lo, uint32 hi, int *npositions)
{
	const ZLKeyDirEntry *entries;
	int32	   *found;

	*npositions = zl_key_directory_range_entries(dir, lo, hi, &entries);
	found = palloc(sizeof(int32) * Max(*npositions, 1));
	for (int e = 0; e < *npositions; e++)
		found[e] = entries[e].position;
	return found;
}

/* add a position to a growing array */
static void
add_position(int32 **found, int *nfound, int *maxfound, int32 position)
{
	if (*nfound == *maxfound)
	{
		*maxfound = Max(16, *maxfound * 2);
		*found = *found ? repalloc(*found, sizeof(int32) * *maxfound)
			: palloc(sizeof(int32) * *maxfound);
	}
	(*found)[(*nfound)++] = position;
}

/*
 * Positions in a directory whose hash is one of the given ones (sorted,
 * distinct).  Both sides are sorted by hash: few hashes are looked up by
 * binary search, many are merged with the directory in one pass.  The
 * merge steps without branching on which side is behind (a batch of 10k
 * keys merged with a sub-group of 17k rows meets a hash every 100 steps;
 * the rest is the comparison, which branches would mispredict half the
 * time).
 */
int32 *
zl_key_directory_probe(const bytea *dir, const uint32 *hashes, int nhashes,
					   int *npositions)
{
	const ZLKeyDirEntry *entries = ZL_KEY_DIRECTORY_ENTRIES(dir);
	int			n = ZL_KEY_DIRECTORY_SIZE(dir);
	int32	   *found = NULL;
	int			nfound = 0,
				maxfound = 0;
	int			e = 0;
	int			h = 0;

	if ((int64) nhashes * 16 < n)
	{
		for (; h < nhashes && e < n; h++)
			for (e = lower_bound(entries, e, n, hashes[h]);
				 e < n && entries[e].hash == hashes[h]; e++)
				add_position(&found, &nfound, &maxfound, entries[e].position);
		*npositions = nfound;
		return found;
	}
	while (h < nhashes && e < n)
	{
		uint32		wanted = hashes[h];
		uint32		stored = entries[e].hash;

		if (unlikely(wanted == stored))
		{
			for (; e < n && entries[e].hash == wanted; e++)
				add_position(&found, &nfound, &maxfound, entries[e].position);
			h++;
			continue;
		}
		h += wanted < stored;
		e += stored < wanted;
	}
	*npositions = nfound;
	return found;
}

/* zl_key_directory_probe's positions, ascending */
int32 *
zl_key_directory_probe_ascending(const bytea *dir, const uint32 *hashes, int nhashes,
								 int *npositions)
{
	int32	   *positions = zl_key_directory_probe(dir, hashes, nhashes, npositions);

	if (*npositions > 1)
		qsort(positions, *npositions, sizeof(int32), zl_position_cmp);
	return positions;
}

/* is hash one of hashes[] (sorted)? */
static bool
hash_listed(const uint32 *hashes, int nhashes, uint32 hash)
{
	int			lo = 0,
				hi = nhashes;

	while (lo < hi)
	{
		int			mid = lo + (hi - lo) / 2;

		if (hashes[mid] < hash)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < nhashes && hashes[lo] == hash;
}

/*
 * The positions, ascending, of a directory's rows whose key hash is one of
 * hashes[] (sorted, distinct), read from its stored form: one pass over
 * its hashes (in position order), each tested against a bitmap of the
 * probed hashes' top bits -- about a sixteenth of its bits set -- before a
 * search.  For a directory looked at once: decoding it sorts every row
 * into fresh memory, several times the cost.  stored has a 4-byte header
 * (zl_meta_match_key_directories copies it out of its catalog row).
 */
int32 *
zl_key_directory_match_stored(const bytea *stored, const uint32 *hashes, int nhashes,
							   int *npositions)
{
	StoredDirectory sd;
	int			bits;
	uint64	   *bitmap;
	int32	   *found = NULL;
	int			nfound = 0,
				maxfound = 0;

	*npositions = 0;
	if (!read_stored_directory(stored, &sd))	/* before version 2: the sorted pairs */
		return zl_key_directory_probe_ascending(stored, hashes, nhashes, npositions);
	bits = Min(24, Max(10, pg_leftmost_one_pos32(Max(nhashes, 1)) + 5));
	bitmap = palloc0(sizeof(uint64) * (((Size) 1 << bits) / 64));
	for (int h = 0; h < nhashes; h++)
	{
		uint32		top = hashes[h] >> (32 - bits);

		bitmap[top / 64] |= UINT64CONST(1) << (top % 64);
	}
	for (uint32 r = 0, i = 0; r < sd.nruns; r++)
	{
		CHECK_FOR_INTERRUPTS();
		for (uint32 k = 0; k < sd.runs[2 * r + 1]; k++, i++)
		{
			uint32		hash = stored_hash(sd.hashes, i);
			uint32		top = hash >> (32 - bits);

			if ((bitmap[top / 64] & (UINT64CONST(1) << (top % 64))) != 0 &&
				hash_listed(hashes, nhashes, hash))
				add_position(&found, &nfound, &maxfound, (int32) (sd.runs[2 * r] + k));
		}
	}
	pfree(bitmap);
	pfree(sd.runs);
	*npositions = nfound;
	return found;
}
