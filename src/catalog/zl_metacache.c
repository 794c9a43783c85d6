/*-------------------------------------------------------------------------
 *
 * zl_metacache.c
 *	  A per-backend cache of each storage's sub-group and mask rows,
 *	  filtered by the reader's snapshot.
 *
 * A point lookup on a table with hundreds of sub-groups would otherwise
 * read hundreds of catalog rows and mask arrays per query.  So each backend
 * keeps, per storage, every sub-group row and mask row that was physically
 * there when it looked — with the transaction ids that inserted and deleted
 * them — and decides per reader which of them its snapshot sees, the way
 * the heap decides for the catalog's own rows: a row counts when its
 * inserter committed and is not in the snapshot, and its deleter did not
 * (XidInMVCCSnapshot, then the commit log, whose answers are remembered).
 *
 * Completeness
 * ------------
 * A cached list is used only while the storage's metadata change counter
 * (zl_storage.c) still has the value read *before* the rows were read.
 * Writers bump it after writing rows and before committing.  So if a
 * snapshot sees a committed row the cache lacks, or a committed deletion
 * the cache missed, that writer committed before the snapshot was taken,
 * its bump came before that, and the counter a reader reads after taking
 * its snapshot differs: the list is read again.  Standbys replay the bump
 * (a generic WAL record) before the commit that makes the rows visible.
 *
 * Rows of the reader's own transaction (cmin/cmax would decide) are never
 * cached: a storage with such rows is read directly (zl_metaread.c) for
 * the rest of the transaction (the refusal is remembered, so it is not
 * tried again per scan), as are readers with non-MVCC snapshots.
 *
 * Masks
 * -----
 * Each cached sub-group keeps its mask rows and, built on first need, the
 * OR of all of them (most snapshots see them all): a reader gets a copy of
 * that, or ORs just the rows it sees.
 *
 * Rows are settled when read: outcomes of ended transactions looked up,
 * inserts committed before every running snapshot kept without an id,
 * rows dead to all left out.  An entry is read again after
 * ZL_METACACHE_MAX_XID_AGE transactions, so the ids it holds always
 * compare right, and before a transaction it saw running could fall out
 * of the commit log.  Entries are keyed by the catalog's OID too: a new
 * CREATE EXTENSION starts storage ids over.
 *
 * Memory
 * ------
 * Entries live in their own memory contexts; when the cache outgrows
 * ZL_METACACHE_BYTES the other entries go, and a storage whose rows alone
 * need more is not cached.  Readers get copies, so an entry can go at any
 * time.
 *
 *-------------------------------------------------------------------------
 */
#include "storage/zl_storage.h"
#include "catalog/zl_catalog_internal.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/transam.h"
#include "access/xact.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#define ZL_METACACHE_BYTES		((Size) 64 * 1024 * 1024)

/* lists of sub-groups read from the catalog, not the cache (EXPLAIN) */
static uint64 catalog_reads = 0;

/*
 * Transaction ids compare within 2^31 of each other: an entry is read
 * again long before the ids it holds could wrap around (a table nobody
 * changed for a billion transactions, in a backend that lived as long).
 */
#define ZL_METACACHE_MAX_XID_AGE	(UINT64CONST(1) << 30)

typedef enum XidState
{
	XID_UNKNOWN,
	XID_COMMITTED,
	XID_ABORTED,
	XID_NONE					/* frozen xmin, or no xmax */
} XidState;

/* who inserted and deleted a catalog row, as far as known */
typedef struct RowLife
{
	TransactionId xmin;
	TransactionId xmax;
	uint8		xmin_state;
	uint8		xmax_state;
} RowLife;

typedef struct CachedMask
{
	RowLife		life;
	int32	   *positions;
	int			npositions;
} CachedMask;

typedef struct CachedSubGroup
{
	RowLife		life;
	ZLSubGroup	sg;				/* without mask */
	CachedMask *masks;
	int			nmasks;
	int			maxmasks;
	uint8	   *all_masks;		/* OR of every mask row, once needed */
	int64		all_masked_rows;
} CachedSubGroup;

typedef struct StorageEntry
{
	ZLStorageKey key;			/* hash key */
	uint64		changes;		/* the counter read before the rows */
	FullTransactionId built;	/* the next transaction id then */
	bool		usable;			/* false: this storage could not be cached ... */
	LocalTransactionId refused_in;	/* ... in this transaction (its own rows) */
	bool		unsettled;		/* some row's transaction was running then ... */
	TransactionId oldest_unsettled; /* ... the oldest of them */
	MemoryContext context;
	CachedSubGroup *sgs;		/* by subgroup_id */
	int			nsgs;
	int64		rows;			/* of all of them, once asked for; else -1 */
} StorageEntry;

static HTAB *cache = NULL;
static MemoryContext cache_context = NULL;

/* ---------- visibility ---------- */

static XidState
hint_state(TransactionId xid, bool committed, bool invalid)
{
	if (!TransactionIdIsValid(xid))
		return XID_NONE;
	return committed ? XID_COMMITTED : invalid ? XID_ABORTED : XID_UNKNOWN;
}

/* did xid commit before the snapshot?  (remembers what the commit log said) */
static bool
xid_done_before(TransactionId xid, uint8 *state, Snapshot snapshot)
{
	if (*state == XID_ABORTED)
		return false;
	if (XidInMVCCSnapshot(xid, snapshot))
		return false;
	if (*state == XID_UNKNOWN)
		/* not in the snapshot: it ended before it, one way or the other */
		*state = TransactionIdDidCommit(xid) ? XID_COMMITTED : XID_ABORTED;
	return *state == XID_COMMITTED;
}

static bool
row_visible(RowLife *life, Snapshot snapshot)
{
	if (life->xmin_state != XID_NONE && !xid_done_before(life->xmin, &life->xmin_state, snapshot))
		return false;
	return life->xmax_state == XID_NONE ||
		!xid_done_before(life->xmax, &life->xmax_state, snapshot);
}

/*
 * The life of a row as its header tells; false when the cache cannot
 * decide for it (the reader's own transaction, a locker rather than a
 * deleter).
 */
static bool
row_life(HeapTupleHeader header, RowLife *life)
{
	uint16		infomask = header->t_infomask;

	life->xmin = HeapTupleHeaderGetRawXmin(header);
	if (HeapTupleHeaderXminFrozen(header))
		life->xmin_state = XID_NONE;
	else
		life->xmin_state = hint_state(life->xmin, HeapTupleHeaderXminCommitted(header),
									  HeapTupleHeaderXminInvalid(header));
	if ((infomask & HEAP_XMAX_INVALID) != 0)
	{
		life->xmax = InvalidTransactionId;
		life->xmax_state = XID_NONE;
	}
	else
	{
		if ((infomask & HEAP_XMAX_IS_MULTI) != 0 || HEAP_XMAX_IS_LOCKED_ONLY(infomask))
			return false;
		life->xmax = HeapTupleHeaderGetRawXmax(header);
		life->xmax_state = hint_state(life->xmax, (infomask & HEAP_XMAX_COMMITTED) != 0, false);
	}
	return !(life->xmin_state != XID_NONE && TransactionIdIsCurrentTransactionId(life->xmin)) &&
		!(life->xmax_state != XID_NONE && TransactionIdIsCurrentTransactionId(life->xmax));
}

/* ---------- building an entry ---------- */

/* resolve an unknown state of a transaction that has ended */
static void
settle(TransactionId xid, uint8 *state)
{
	if (*state == XID_UNKNOWN && !TransactionIdIsInProgress(xid))
		*state = TransactionIdDidCommit(xid) ? XID_COMMITTED : XID_ABORTED;
}

/*
 * Settle what can be known of a row now, for every later snapshot: its
 * transactions' outcomes (the commit log may be truncated before the
 * entry is read again), an insert committed before every running snapshot
 * (visible to all: no id kept to compare), a delete that aborted (none).
 * False when the row is dead to every snapshot (inserted by a transaction
 * that aborted, deleted by one that committed before every running
 * snapshot): it is left out, and so is its TOAST, which VACUUM may have
 * removed first.  A transaction still running is noted in the entry.
 */
static bool
settle_row(StorageEntry *entry, RowLife *life, TransactionId horizon)
{
	if (life->xmin_state != XID_NONE)
	{
		settle(life->xmin, &life->xmin_state);
		if (life->xmin_state == XID_ABORTED)
			return false;
		if (life->xmin_state == XID_COMMITTED && TransactionIdPrecedes(life->xmin, horizon))
			life->xmin_state = XID_NONE;
	}
	if (life->xmax_state != XID_NONE)
	{
		settle(life->xmax, &life->xmax_state);
		if (life->xmax_state == XID_ABORTED)
			life->xmax_state = XID_NONE;
		else if (life->xmax_state == XID_COMMITTED && TransactionIdPrecedes(life->xmax, horizon))
			return false;
	}
	if (life->xmin_state == XID_UNKNOWN || life->xmax_state == XID_UNKNOWN)
	{
		TransactionId running = life->xmin_state == XID_UNKNOWN ? life->xmin : life->xmax;

		if (!entry->unsettled || TransactionIdPrecedes(running, entry->oldest_unsettled))
			entry->oldest_unsettled = running;
		entry->unsettled = true;
	}
	return true;
}

static int
cached_subgroup_cmp(const void *a, const void *b)
{
	int64		x = ((const CachedSubGroup *) a)->sg.subgroup_id;
	int64		y = ((const CachedSubGroup *) b)->sg.subgroup_id;

	return x < y ? -1 : (x > y);
}

static CachedSubGroup *
find_cached(StorageEntry *entry, int64 subgroup_id)
{
	int			lo = 0,
				hi = entry->nsgs - 1;

	while (lo <= hi)
	{
		int			mid = (lo + hi) / 2;

		if (entry->sgs[mid].sg.subgroup_id == subgroup_id)
			return &entry->sgs[mid];
		if (entry->sgs[mid].sg.subgroup_id < subgroup_id)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return NULL;
}

/*
 * Read every sub-group and mask row of the storage that is physically
 * there (SnapshotAny), into the entry's context.  False when some row
 * cannot be cached.
 */
static bool
read_rows(StorageEntry *entry)
{
	const ZLCatalog *cat = zl_meta_catalog();
	int			max = 0;
	ZLMetaRowReader *reader;
	HeapTuple	tuple;
	TransactionId horizon;

	reader = zl_meta_row_reader_begin(cat->subgroup, cat->subgroup_pkey, entry->key.storage_id,
									  SnapshotAny);
	horizon = GetOldestNonRemovableTransactionId(zl_meta_row_reader_relation(reader));
	while ((tuple = zl_meta_row_reader_next(reader)) != NULL)
	{
		CachedSubGroup *c;
		RowLife		life;

		if (!row_life(tuple->t_data, &life))
		{
			zl_meta_row_reader_end(reader);
			return false;
		}
		if (!settle_row(entry, &life, horizon))
			continue;
		if (entry->nsgs == max)
		{
			max = Max(64, max * 2);
			entry->sgs = entry->sgs == NULL ? palloc(sizeof(CachedSubGroup) * max) :
				repalloc(entry->sgs, sizeof(CachedSubGroup) * max);
		}
		c = &entry->sgs[entry->nsgs++];
		memset(c, 0, sizeof(CachedSubGroup));
		c->life = life;
		zl_meta_row_subgroup(reader, &c->sg);
	}
	zl_meta_row_reader_end(reader);

	/*
	 * By id (the index's order, unless system indexes are ignored).  Two
	 * rows of one sub-group (an UPDATE by hand) are not cached.
	 */
	for (int i = 1; i < entry->nsgs; i++)
		if (entry->sgs[i - 1].sg.subgroup_id >= entry->sgs[i].sg.subgroup_id)
		{
			qsort(entry->sgs, entry->nsgs, sizeof(CachedSubGroup), cached_subgroup_cmp);
			break;
		}
	for (int i = 1; i < entry->nsgs; i++)
		if (entry->sgs[i - 1].sg.subgroup_id == entry->sgs[i].sg.subgroup_id)
			return false;

	reader = zl_meta_row_reader_begin(cat->mask, cat->mask_index, entry->key.storage_id,
									  SnapshotAny);
	while ((tuple = zl_meta_row_reader_next(reader)) != NULL)
	{
		CachedSubGroup *c;
		CachedMask *m;
		RowLife		life;
		int64		subgroup_id;

		if (!row_life(tuple->t_data, &life))
		{
			zl_meta_row_reader_end(reader);
			return false;
		}
		if (!settle_row(entry, &life, horizon))
			continue;
		zl_meta_row_mask(reader, &subgroup_id, NULL, NULL);
		if ((c = find_cached(entry, subgroup_id)) == NULL)
			continue;			/* of a sub-group whose row is gone */
		if (c->nmasks == c->maxmasks)
		{
			c->maxmasks = Max(4, c->maxmasks * 2);
			c->masks = c->masks == NULL ? palloc(sizeof(CachedMask) * c->maxmasks) :
				repalloc(c->masks, sizeof(CachedMask) * c->maxmasks);
		}
		m = &c->masks[c->nmasks++];
		m->life = life;
		zl_meta_row_mask(reader, &subgroup_id, &m->positions, &m->npositions);
	}
	zl_meta_row_reader_end(reader);
	return true;
}

static void
drop_entry(StorageEntry *entry)
{
	MemoryContextDelete(entry->context);
	(void) hash_search(cache, &entry->key, HASH_REMOVE, NULL);
}

/* make room: every other entry goes when the cache is full */
static void
trim_cache(const StorageEntry *keep)
{
	HASH_SEQ_STATUS status;
	StorageEntry *entry;

	if (MemoryContextMemAllocated(cache_context, true) < ZL_METACACHE_BYTES)
		return;
	hash_seq_init(&status, cache);
	while ((entry = hash_seq_search(&status)) != NULL)
		if (entry != keep)
			drop_entry(entry);
}


/*
 * The storage's entry, current for a reader that took its snapshot before
 * this call, or NULL when it cannot be cached.
 */
static StorageEntry *
current_entry(Relation rel)
{
	ZLStorageKey key = zl_meta_storage_key(zl_storage_id(rel));
	uint64		changes = zl_storage_metadata_changes(rel);
	StorageEntry *entry;
	bool		found;
	MemoryContext old;
	bool		complete;

	if (cache == NULL)
	{
		HASHCTL		ctl;

		cache_context = AllocSetContextCreate(TopMemoryContext, "zipper_lake metadata cache",
											  ALLOCSET_SMALL_SIZES);
		ctl.keysize = sizeof(ZLStorageKey);
		ctl.entrysize = sizeof(StorageEntry);
		ctl.hcxt = cache_context;
		cache = hash_create("zipper_lake metadata cache", 16, &ctl,
							HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	entry = hash_search(cache, &key, HASH_FIND, NULL);
	if (entry != NULL && entry->changes == changes &&
		U64FromFullTransactionId(ReadNextFullTransactionId()) -
		U64FromFullTransactionId(entry->built) < ZL_METACACHE_MAX_XID_AGE &&
		!(entry->unsettled &&
		  TransactionIdPrecedes(entry->oldest_unsettled, ShmemVariableCache->oldestClogXid)))
	{
		if (entry->usable)
			return entry;
		/* refused: too big, or for rows of this transaction (not tried again in it) */
		if (entry->refused_in == InvalidLocalTransactionId || entry->refused_in == MyProc->lxid)
			return NULL;
	}
	if (entry != NULL)
		drop_entry(entry);

	entry = hash_search(cache, &key, HASH_ENTER, &found);
	entry->changes = changes;
	entry->built = ReadNextFullTransactionId();
	entry->usable = true;
	entry->unsettled = false;
	entry->sgs = NULL;
	entry->nsgs = 0;
	entry->rows = -1;
	entry->context = AllocSetContextCreate(cache_context, "zipper_lake storage metadata",
										   ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(entry->context);
	catalog_reads++;
	PG_TRY();
	{
		complete = read_rows(entry);
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(old);
		drop_entry(entry);
		PG_RE_THROW();
	}
	PG_END_TRY();
	MemoryContextSwitchTo(old);
	if (!complete || MemoryContextMemAllocated(entry->context, true) > ZL_METACACHE_BYTES / 2)
	{
		/* remember the refusal (until the next change), not the rows */
		MemoryContextReset(entry->context);
		entry->sgs = NULL;
		entry->nsgs = 0;
		entry->usable = false;
		entry->refused_in = complete ? InvalidLocalTransactionId : MyProc->lxid;
		return NULL;
	}
	trim_cache(entry);
	return entry;
}

/*
 * Forget what the backend cached of a storage: verify() checks the catalog
 * as stored, even where someone edited it by hand (which bumps no counter).
 */
void
zl_meta_cache_forget(uint64 storage_id)
{
	StorageEntry *entry;
	ZLStorageKey key = zl_meta_storage_key(storage_id);

	if (cache != NULL &&
		(entry = hash_search(cache, &key, HASH_FIND, NULL)) != NULL)
		drop_entry(entry);
}

/* ---------- readers ---------- */

static bool
cache_usable(Snapshot snapshot)
{
	return snapshot != InvalidSnapshot && IsMVCCSnapshot(snapshot);
}

/* the OR of the cached sub-group's masks its snapshot sees, into sg (a copy) */
static void
copy_masks(StorageEntry *entry, CachedSubGroup *c, Snapshot snapshot, ZLSubGroup *sg)
{
	Size		bytes = (zl_subgroup_positions(&c->sg) + 7) / 8;
	bool		all = true;

	sg->mask = NULL;
	sg->masked_rows = 0;
	if (c->nmasks == 0)
		return;
	for (int m = 0; m < c->nmasks; m++)
		all &= row_visible(&c->masks[m].life, snapshot);
	if (all && c->all_masks == NULL)
	{
		ZLSubGroup	built = c->sg;

		built.mask = NULL;
		built.masked_rows = 0;
		for (int m = 0; m < c->nmasks; m++)
			zl_meta_or_mask(&built, c->masks[m].positions, c->masks[m].npositions,
							entry->context);
		c->all_masks = built.mask;
		c->all_masked_rows = built.masked_rows;
	}
	if (all)
	{
		sg->mask = palloc(bytes);
		memcpy(sg->mask, c->all_masks, bytes);
		sg->masked_rows = c->all_masked_rows;
		return;
	}
	for (int m = 0; m < c->nmasks; m++)
		if (row_visible(&c->masks[m].life, snapshot))
			zl_meta_or_mask(sg, c->masks[m].positions, c->masks[m].npositions,
							CurrentMemoryContext);
}

/*
 * zl_meta_load_filtered_subgroups (filter given) or zl_meta_load_subgroups
 * (min_partition) through the cache, masks included unless with_masks is
 * false (zl_meta_cached_masks adds them later).  Falls back to reading the
 * catalog when the storage cannot be cached.
 */
ZLSubGroup *
zl_meta_cached_subgroups(Relation rel, Snapshot snapshot, const ZLSubGroupFilter *filter,
						 DateADT min_partition, bool with_masks, int *nsubgroups)
{
	StorageEntry *entry = cache_usable(snapshot) ? current_entry(rel) : NULL;
	ZLSubGroup *sgs;
	int			n = 0;

	if (entry == NULL)
	{
		uint64		storage_id = zl_storage_id(rel);

		catalog_reads++;
		return filter != NULL ?
			zl_meta_load_filtered_subgroups(storage_id, snapshot, filter, nsubgroups) :
			zl_meta_load_subgroups(storage_id, snapshot, min_partition, nsubgroups);
	}
	sgs = palloc(sizeof(ZLSubGroup) * Max(entry->nsgs, 1));
	for (int i = 0; i < entry->nsgs; i++)
	{
		CachedSubGroup *c = &entry->sgs[i];

		if (!zl_meta_subgroup_passes(&c->sg, filter, min_partition) ||
			!row_visible(&c->life, snapshot))
			continue;
		sgs[n] = c->sg;
		if (with_masks)
			copy_masks(entry, c, snapshot, &sgs[n]);
		n++;
	}
	*nsubgroups = n;
	return sgs;
}

/*
 * How many times this backend read sub-group rows from the catalog for
 * zl_meta_cached_subgroups (to fill the cache, or past it): a reader
 * compares the count before and after its call to tell where its list
 * came from.
 */
uint64
zl_meta_cache_catalog_reads(void)
{
	return catalog_reads;
}

/*
 * The rows of every sub-group cached for a storage, whichever snapshots
 * see them: about what a merged key index of it would hold
 * (zl_keyindex.c), to decide whether to build one.  -1 when the storage
 * cannot be cached.
 */
int64
zl_meta_cached_rows(Relation rel, Snapshot snapshot)
{
	StorageEntry *entry = cache_usable(snapshot) ? current_entry(rel) : NULL;

	if (entry == NULL)
		return -1;
	if (entry->rows < 0)
	{
		entry->rows = 0;
		for (int i = 0; i < entry->nsgs; i++)
			entry->rows += entry->sgs[i].sg.row_count;
	}
	return entry->rows;
}

/* the masks of sub-groups loaded without them (with_masks false) */
void
zl_meta_cached_masks(Relation rel, Snapshot snapshot, ZLSubGroup *sgs, int n)
{
	StorageEntry *entry = cache_usable(snapshot) ? current_entry(rel) : NULL;

	if (entry == NULL)
	{
		zl_meta_load_masks(zl_storage_id(rel), snapshot, sgs, n);
		return;
	}
	for (int i = 0; i < n; i++)
	{
		CachedSubGroup *c = find_cached(entry, sgs[i].subgroup_id);

		if (c != NULL)
			copy_masks(entry, c, snapshot, &sgs[i]);
	}
}
