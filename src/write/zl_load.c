/*-------------------------------------------------------------------------
 *
 * zl_load.c
 *	  The checks of loaded versions: overlaps refused, equal neighbours merged.
 *
 * Versions loaded as given — rows of INSERT and COPY, and rows loaded
 * before the table was registered, when registration places them
 * (zl_write_load) — are not right by construction like those
 * apply_changes computes.  A loaded version [a, b) with values v stands
 * for "upsert v at a" and, unless a version of the key starts at b,
 * "delete at b" (README, "Change semantics").  So a flush checks them
 * before they are placed: one that overlaps another version of its key,
 * loaded with it or stored, is refused; adjacent versions of a key with
 * equal values, loaded or stored, become one.  The write state (zl_write.c)
 * hands its loaded rows to a load (zl_load_add) and, at the flush, has
 * them checked (zl_load_check), which hands what they leave back to it
 * (zl_write_place) before it places its rows.
 *
 * Checking loaded versions
 * ------------------------
 * Loaded rows go into a tuplesort by (key hash, valid_from).  At the
 * flush the sorted stream is read hash by hash, each key's versions in
 * start order (the keys of one hash, more than one only if hashes collide,
 * side by side, told apart by their equality), merged with the stored
 * versions of those keys in the same order (check_item).  A version that
 * starts before the latest end so far of its key overlaps
 * (ERRCODE_EXCLUSION_VIOLATION, naming the key and both periods; the
 * statement fails, so it changes nothing).  A run of adjacent versions
 * with equal values that holds a loaded one becomes one version: the
 * first's row with the last's end; the stored versions in it are masked
 * or their sub-group compacted, as apply_changes retires rows
 * (zl_compact.c).  Stored versions are found for a chunk of
 * up to ZL_CHECK_CHUNK_KEYS key hashes at a time: in the current partition
 * through the key directories (zl_keys.c), in history only in partitions
 * that can hold a version ending at or after the chunk's earliest start,
 * in sub-groups that start no later than its latest end.  They go into a
 * tuplesort of their own, merged with the chunk's loaded rows (buffered in
 * a tuplestore meanwhile).  If no sub-group can hold such a version (an
 * empty table, pg_restore), the loaded stream is checked on its own.
 *
 * Narrow loads
 * ------------
 * A load into a table that holds no sub-group yet (the initial load of a
 * history; the writer lock, which the write state takes with its first
 * row, keeps it so) has no stored version to meet, and usually comes in
 * start order (INSERT ... SELECT ... ORDER BY valid_from).  Such a load
 * begins narrow: each row's key and values are hashed (64-bit, by the
 * types' extended hash functions, which agree with the equality that
 * decides: zl_values_equal, key equality) and kept per key hash with the
 * end of the key's latest version; a row that starts at or after that end,
 * and if just at it, with values hashing otherwise, is handed to placement
 * at once (zl_write_load) -- no sort by key, no second pass.  The first row
 * that does not (out of start order, an overlap, possibly equal neighbours,
 * or more keys than fit work_mem) ends the narrow part: it and all later
 * rows go to the key sort, and at the flush the rows taken narrowly are
 * read back from placement into it (zl_write.c, check_in_full), so the
 * full check below decides, with its exact comparisons and errors.  A
 * table with a value or key column whose type has no such hash function
 * is always checked in full.
 *
 * Memory
 * ------
 * The sort of loaded rows is one of the flush's two main sorts
 * (zl_write.c, "Memory").  Besides it a check takes 7 MB at most: the
 * chunk's buffer, the sort of its stored versions and the sort of stored
 * versions merged away get ZL_SIDE_KB (1 MB) each and spill to temporary
 * files beyond that; a chunk's key hashes take a quarter of work_mem, 4 MB
 * at most; a narrow load's keys work_mem at most while the sort of rows to
 * place fills (its half of work_mem; so a narrow load holds up to 1.5x
 * work_mem), freed before the flush checks or writes.  Not counted: the
 * metadata of the sub-groups a load may touch
 * (some hundred bytes each, and their masks) and the key directories of
 * the current partition (8 bytes per open version, cached per backend as
 * for apply_changes, zl_keys.c).
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "storage/zl_storage.h"
#include "catalog/zl_catalog.h"
#include "write/zl_write_internal.h"

#include "access/htup_details.h"
#include "access/toast_internals.h"
#include "access/tupdesc.h"
#include "access/xact.h"
#include "catalog/pg_operator_d.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/tuplesort.h"
#include "utils/tuplestore.h"
#include "utils/typcache.h"

/*
 * Distinct key hashes whose stored versions a load looks up at once: a
 * quarter of work_mem of them, at most 4 MB (1M keys), at least 1024.
 */
#define ZL_CHECK_CHUNK_KEYS \
	Max(1024, Min((Size) work_mem * 1024 / 4, (Size) 4 * 1024 * 1024) / sizeof(uint32))

/* kinds of check items; stored ones sort first among equal starts */
#define ITEM_STORED				0
#define ITEM_LOADED				1

/*
 * Columns of the sort tuples of items: loaded or stored versions, sorted
 * by key hash and start, carrying the row as a bytea (zl_rowsort.c).
 */
#define ITEM_HASH				1
#define ITEM_FROM				2
#define ITEM_KIND				3
#define ITEM_SEQ				4	/* arrival, or stored location */
#define ITEM_TO					5
#define ITEM_ROW				6
#define ITEM_NATTS				6

/* the loaded rows of a write state, from its first load to its flush */
struct ZLLoad
{
	const ZLTableOptions *opts;
	uint64		storage_id;
	TupleDesc	tupdesc;
	ZLKeyHasher *hasher;
	MemoryContext context;		/* the load and its check */
	MemoryContext row_context;	/* one row's scratch memory */
	Datum	   *key_row;		/* row-shaped: key slots filled per row */
	ZLRowPayload payload;

	TupleDesc	item_desc;
	TupleTableSlot *item_slot;	/* virtual, to put */
	TupleTableSlot *item_read_slot; /* minimal, to read */
	Tuplesortstate *keysort;	/* loaded rows to check, by key hash */
	int64		arrival;
	int64		min_from;		/* of the loaded rows */
	int64		max_to;

	/* a narrow load ("Narrow loads" above) */
	bool		narrow;			/* rows are still taken narrowly */
	bool		took_narrow;	/* some were: placement holds them */
	int64		ntaken;			/* how many */
	MemoryContext narrow_context;	/* the keys' tables; gone with the narrow part */
	struct narrow_hash **narrow_parts;	/* key hash -> the key's latest version */
	int			narrow_part_bits;	/* 2^bits tables */
	int			nkeys;			/* hashed columns: key columns first */
	int			nhashed;
	AttrNumber *hashed_attnums;
	FmgrInfo   *hashed_proc;	/* extended (64-bit) hash functions */
	Oid		   *hashed_collation;
	Datum	   *row_values;		/* scratch, row-shaped */
	bool	   *row_nulls;
};

/* rows a narrow load took (zl_write.c: all its placement holds) */
int64
zl_load_taken(const ZLLoad *load)
{
	return load->ntaken;
}

/*
 * A key's latest version in a narrow load, by the 64-bit hash of the key:
 * 24 bytes.  32 bits of the values' hash are enough: it only tells values
 * apart, and equal values hash alike however many bits are kept.
 */
typedef struct NarrowKey
{
	uint64		key_hash;
	int64		last_to;
	uint32		last_values;
	char		status;			/* simplehash's */
} NarrowKey;

/*
 * A narrow load's keys live in up to 256 tables, by the top bits of the key
 * hash, created as needed: one per 64 kB of work_mem (a small work_mem gets
 * few, so that empty tables do not take its room).  Each grows (doubles) on
 * its own, so the room a growth needs besides the keys is one table's, not
 * all of them: the keys may fill nearly all of work_mem (narrow_budget;
 * 1M keys take 25-50 MB), counted as their memory context allocates it.
 * (A budget of half of work_mem made 1M-key loads at 64MB turn to the full
 * check after ~940k keys, and re-reading those rows cost more than the
 * narrow part saved: 4.3-6.5 s against 3.7-4.4 s for a third.)
 */
#define NARROW_MAX_PART_BITS	8
#define NARROW_PART_MEM			(64 * 1024)
#define NARROW_PART_INITIAL		16

/* a narrow load's keys */
#define narrow_budget()			((Size) work_mem * 1024)

/* open addressing on the key hash itself (lib/simplehash.h) */
#define SH_PREFIX narrow
#define SH_ELEMENT_TYPE NarrowKey
#define SH_KEY_TYPE uint64
#define SH_KEY key_hash
#define SH_HASH_KEY(tb, key) ((uint32) ((key) ^ ((key) >> 32)))
#define SH_EQUAL(tb, a, b) ((a) == (b))
#define SH_SCOPE static inline
#define SH_DECLARE
#define SH_DEFINE
#include "lib/simplehash.h"

/* ---------- loaded rows ---------- */

/* items by (hash, valid_from, kind, seq) */
static Tuplesortstate *
begin_item_sort(ZLLoad *load, int work_mem_kb)
{
	AttrNumber	attnums[4] = {ITEM_HASH, ITEM_FROM, ITEM_KIND, ITEM_SEQ};

	return zl_rowsort_begin(load->item_desc, 4, attnums, work_mem_kb);
}

/*
 * Hash a column consistently with the equality that decides for it (key
 * equality, zl_values_equal: the type cache's equality operator, under the
 * column's collation)?  Only if that operator belongs to the type's hash
 * operator family, whose extended hash function then agrees with it.
 */
static bool
add_hashed_column(ZLLoad *load, Form_pg_attribute att)
{
	TypeCacheEntry *tc = lookup_type_cache(att->atttypid,
										   TYPECACHE_EQ_OPR | TYPECACHE_HASH_OPFAMILY |
										   TYPECACHE_HASH_EXTENDED_PROC_FINFO);

	if (!OidIsValid(tc->eq_opr) || !OidIsValid(tc->hash_opf) ||
		!OidIsValid(tc->hash_extended_proc_finfo.fn_oid) ||
		!op_in_opfamily(tc->eq_opr, tc->hash_opf))
		return false;
	fmgr_info_copy(&load->hashed_proc[load->nhashed], &tc->hash_extended_proc_finfo,
				   CurrentMemoryContext);
	load->hashed_collation[load->nhashed] = att->attcollation;
	load->hashed_attnums[load->nhashed++] = att->attnum;
	return true;
}

/* can this load be narrow: every key and value column hashable so? */
static bool
prepare_narrow(ZLLoad *load)
{
	TupleDesc	tupdesc = load->tupdesc;

	load->hashed_attnums = palloc(sizeof(AttrNumber) * tupdesc->natts);
	load->hashed_proc = palloc0(sizeof(FmgrInfo) * tupdesc->natts);
	load->hashed_collation = palloc(sizeof(Oid) * tupdesc->natts);
	for (int i = 0; i < load->opts->nkeys; i++)
		if (!add_hashed_column(load, TupleDescAttr(tupdesc, load->opts->key_attnums[i] - 1)))
			return false;
	load->nkeys = load->nhashed;
	for (int i = 0; i < tupdesc->natts; i++)
		if (zl_is_value_column(load->opts, TupleDescAttr(tupdesc, i)) &&
			!add_hashed_column(load, TupleDescAttr(tupdesc, i)))
			return false;
	load->row_values = palloc(sizeof(Datum) * tupdesc->natts);
	load->row_nulls = palloc(sizeof(bool) * tupdesc->natts);
	load->narrow_context = AllocSetContextCreate(CurrentMemoryContext,
												 "zipper_lake narrow load keys",
												 ALLOCSET_DEFAULT_SIZES);
	while (load->narrow_part_bits < NARROW_MAX_PART_BITS &&
		   ((Size) NARROW_PART_MEM << (load->narrow_part_bits + 1)) <= narrow_budget())
		load->narrow_part_bits++;
	load->narrow_parts = MemoryContextAllocZero(load->narrow_context,
												sizeof(struct narrow_hash *) << load->narrow_part_bits);
	return true;
}

/* the narrow part of a load ends: its keys' tables go */
static void
end_narrow(ZLLoad *load)
{
	load->narrow = false;
	if (load->narrow_context != NULL)
		MemoryContextDelete(load->narrow_context);
	load->narrow_context = NULL;
	load->narrow_parts = NULL;
}

/* a 64-bit hash of the deformed row's hashed columns [first, last) (NULLs too) */
static uint64
hash_columns(ZLLoad *load, int first, int last)
{
	uint64		hash = 0;

	for (int i = first; i < last; i++)
	{
		int			col = load->hashed_attnums[i] - 1;
		uint64		h = load->row_nulls[col] ? UINT64CONST(0x9E3779B97F4A7C15) :
			DatumGetUInt64(FunctionCall2Coll(&load->hashed_proc[i], load->hashed_collation[i],
											 load->row_values[col], UInt64GetDatum(0)));

		hash = hash_combine64(hash, h);
	}
	return hash;
}

/*
 * Take a row narrowly: it comes in start order for its key (by the 64-bit
 * hash of the key), after the end of the key's latest version, and if just
 * after it, with values that hash otherwise.  Else the load stops being
 * narrow: the full check alone tells keys or values that hash alike apart,
 * reports overlaps and merges.
 */
static bool
take_narrow(ZLLoad *load, HeapTuple tuple, int64 valid_from, int64 valid_to)
{
	uint64		key_hash;
	uint32		values_hash;
	struct narrow_hash **part;
	NarrowKey  *nk;
	bool		found;

	heap_deform_tuple(tuple, load->tupdesc, load->row_values, load->row_nulls);
	key_hash = hash_columns(load, 0, load->nkeys);
	values_hash = (uint32) hash_columns(load, load->nkeys, load->nhashed);
	part = &load->narrow_parts[load->narrow_part_bits == 0 ? 0 :
							   key_hash >> (64 - load->narrow_part_bits)];
	if (*part == NULL)
		*part = narrow_create(load->narrow_context, NARROW_PART_INITIAL, NULL);
	nk = narrow_lookup(*part, key_hash);
	found = nk != NULL;
	if (!found)
	{
		/*
		 * Bounded memory: a load with more keys than fit narrow_budget is
		 * checked in full.  A new key that grows its table needs the
		 * doubled table besides the old one; past the budget that ends the
		 * narrow part, and so does a table grown early (simplehash doubles
		 * a table whose probes get long) or a new table, once this row is
		 * taken.
		 */
		if ((*part)->members >= (*part)->grow_threshold &&
			MemoryContextMemAllocated(load->narrow_context, false) +
			2 * (*part)->size * sizeof(NarrowKey) > narrow_budget())
		{
			end_narrow(load);
			return false;
		}
		nk = narrow_insert(*part, key_hash, &found);
	}
	if (found && (valid_from < nk->last_to ||
				  (valid_from == nk->last_to && values_hash == nk->last_values)))
	{
		end_narrow(load);
		return false;
	}
	nk->last_to = valid_to;
	nk->last_values = values_hash;
	if (MemoryContextMemAllocated(load->narrow_context, false) > narrow_budget())
		end_narrow(load);
	return true;
}

/*
 * A load of rows of a table with these options, stored under storage_id,
 * in this shape, with this key hasher, all of which must outlive it.  It
 * lives, with its check, in the current memory context: resetting that
 * context after zl_load_end frees it.  may_be_narrow: the table holds no
 * sub-group and its write state no other row ("Narrow loads" above).
 */
ZLLoad *
zl_load_begin(const ZLTableOptions *opts, uint64 storage_id, TupleDesc tupdesc,
			  ZLKeyHasher *hasher, bool may_be_narrow)
{
	ZLLoad	   *load = palloc0(sizeof(ZLLoad));
	TupleDesc	desc = CreateTemplateTupleDesc(ITEM_NATTS);

	load->opts = opts;
	load->storage_id = storage_id;
	load->tupdesc = tupdesc;
	load->hasher = hasher;
	load->context = CurrentMemoryContext;
	load->row_context = AllocSetContextCreate(CurrentMemoryContext, "zipper_lake load row",
											  ALLOCSET_DEFAULT_SIZES);
	load->key_row = palloc0(sizeof(Datum) * tupdesc->natts);
	load->payload.context = CurrentMemoryContext;

	/* the item tuple: (hash, valid_from, kind, seq, valid_to, row) */
	TupleDescInitEntry(desc, ITEM_HASH, "hash", INT8OID, -1, 0);
	TupleDescInitEntry(desc, ITEM_FROM, "valid_from", INT8OID, -1, 0);
	TupleDescInitEntry(desc, ITEM_KIND, "kind", INT4OID, -1, 0);
	TupleDescInitEntry(desc, ITEM_SEQ, "seq", INT8OID, -1, 0);
	TupleDescInitEntry(desc, ITEM_TO, "valid_to", INT8OID, -1, 0);
	TupleDescInitEntry(desc, ITEM_ROW, "row", BYTEAOID, -1, 0);
	load->item_desc = desc;
	zl_rowsort_slots(desc, &load->item_slot, &load->item_read_slot);

	load->keysort = begin_item_sort(load, ZL_MAIN_SORT_KB);
	load->min_from = PG_INT64_MAX;
	load->max_to = PG_INT64_MIN;
	load->narrow = may_be_narrow && prepare_narrow(load);
	return load;
}

/* an item for a sort by key hash */
static void
put_item(ZLLoad *load, Tuplesortstate *sort, HeapTuple tuple, uint32 hash,
		 int64 valid_from, int64 valid_to, int kind, int64 seq)
{
	TupleTableSlot *slot = load->item_slot;

	ExecClearTuple(slot);
	memset(slot->tts_isnull, 0, sizeof(bool) * ITEM_NATTS);
	slot->tts_values[ITEM_HASH - 1] = Int64GetDatum((int64) hash);
	slot->tts_values[ITEM_FROM - 1] = Int64GetDatum(valid_from);
	slot->tts_values[ITEM_KIND - 1] = Int32GetDatum(kind);
	slot->tts_values[ITEM_SEQ - 1] = Int64GetDatum(seq);
	slot->tts_values[ITEM_TO - 1] = Int64GetDatum(valid_to);
	slot->tts_values[ITEM_ROW - 1] = zl_rowsort_payload(&load->payload, tuple);
	ExecStoreVirtualTuple(slot);
	if (sort == load->keysort)
		zl_rowsort_put_pending(sort, slot);
	else
		tuplesort_puttupleslot(sort, slot);
}

/*
 * Add one loaded row, valid from valid_from to valid_to (checked against
 * the rules of a version, zl_write_load); the sort copies it.
 */
bool
zl_load_add(ZLLoad *load, HeapTuple tuple, int64 valid_from, int64 valid_to)
{
	MemoryContext old;

	MemoryContextReset(load->row_context);
	old = MemoryContextSwitchTo(load->row_context);
	if (load->narrow && take_narrow(load, tuple, valid_from, valid_to))
	{
		MemoryContextSwitchTo(old);
		load->took_narrow = true;
		load->ntaken++;
		return true;			/* the caller places it */
	}
	zl_key_extract(load->hasher, tuple, load->tupdesc, load->key_row);
	put_item(load, load->keysort, tuple, zl_key_hash(load->hasher, load->key_row),
			 valid_from, valid_to, ITEM_LOADED, load->arrival++);
	MemoryContextSwitchTo(old);

	load->min_from = Min(load->min_from, valid_from);
	load->max_to = Max(load->max_to, valid_to);
	return false;
}

/* end the sort of the loaded rows (closing its files), if not checked yet */
void
zl_load_end(ZLLoad *load)
{
	if (load->keysort)
		tuplesort_end(load->keysort);
	load->keysort = NULL;
}

/* ---------- checking loaded versions ---------- */

/* one key's versions, in start order, as the check goes through them */
typedef struct KeyCheck
{
	Datum	   *key_row;		/* row-shaped: the key (in the group's memory) */

	/* the version of the key that ends latest so far */
	bool		have_last;
	int64		last_from;
	int64		last_to;
	bool		last_loaded;

	/* the run of adjacent versions with equal values being built */
	bool		in_run;
	int64		run_from;
	int64		run_to;
	bool		run_loaded;
	int			run_items;
	HeapTuple	run_head;		/* first version: its row is the run's */
	Datum	   *head_values;	/* deformed when first compared, else NULL */
	bool	   *head_nulls;
	int64	   *run_stored;		/* locations of the stored versions in it */
	int			nrun_stored;
	int			maxrun_stored;
	MemoryContext run_context;
} KeyCheck;

typedef struct LoadCheck
{
	ZLLoad	   *load;
	ZLWriteState *writer;		/* placement, compaction */
	Relation	rel;
	ZLValueComparer *values;
	ZLRowCheck *row_check;		/* merged versions: generated columns, constraints */

	/* sub-groups that may hold versions of loaded keys */
	ZLSubGroup *sgs;
	int			nsgs;
	Snapshot	snapshot;		/* that read them */
	bool		directories_loaded; /* those of the current sub-groups ... */
	uint64		directories_generation; /* ... while the cache is this one */

	/* stored versions merged away: sub-group index << 32 | position */
	Tuplesortstate *merged;

	/*
	 * Items come sorted by key hash, then start: the keys of one hash (one,
	 * unless hashes collide) are checked side by side.
	 */
	bool		in_group;
	int64		group_hash;
	KeyCheck  **group;			/* [0, ngroup) in use; kept for reuse */
	int			ngroup;
	int			maxgroup;
	MemoryContext group_context;	/* the keys of the group */
	MemoryContext item_context; /* one item */
	Datum	   *probe;			/* row-shaped: an item's key */
} LoadCheck;

/* compare two items by (hash, valid_from, kind, seq) */
static int
item_cmp(TupleTableSlot *a, TupleTableSlot *b)
{
	for (AttrNumber col = ITEM_HASH; col <= ITEM_SEQ; col++)
	{
		bool		isnull;
		int64		x = col == ITEM_KIND ? DatumGetInt32(slot_getattr(a, col, &isnull)) :
			zl_rowsort_int8(a, col);
		int64		y = col == ITEM_KIND ? DatumGetInt32(slot_getattr(b, col, &isnull)) :
			zl_rowsort_int8(b, col);

		if (x != y)
			return x < y ? -1 : 1;
	}
	return 0;
}

static char *
period_text(LoadCheck *lc, int64 from, int64 to)
{
	Oid			type = lc->load->opts->period_type;

	return psprintf("[%s, %s)", zl_instant_to_cstring(from, type),
					zl_instant_to_cstring(to, type));
}

static void
report_overlap(LoadCheck *lc, KeyCheck *kc, HeapTuple row, int64 from, int64 to,
			   bool loaded)
{
	char	   *earlier = period_text(lc, kc->last_from, kc->last_to);
	char	   *later = period_text(lc, from, to);

	ereport(ERROR,
			(errcode(ERRCODE_EXCLUSION_VIOLATION),
			 errmsg("overlapping versions of key %s in zipper table \"%s\"",
					zl_describe_key(lc->load->opts, lc->load->tupdesc, row),
					RelationGetRelationName(lc->rel)),
			 loaded && kc->last_loaded ?
			 errdetail("Versions %s and %s being loaded overlap.", earlier, later) :
			 errdetail("Version %s being loaded overlaps the stored version %s.",
					   loaded ? later : earlier, loaded ? earlier : later),
			 errhint("A key has at most one version at any time: correct or leave out one of the two. Change stored versions with zipper_lake.apply_changes().")));
}

/* hand a finished run to placement, retiring the stored versions in it */
static void
end_run(LoadCheck *lc, KeyCheck *kc)
{
	ZLLoad	   *load = lc->load;
	HeapTuple	row = kc->run_head;
	MemoryContext old;

	if (!kc->in_run)
		return;
	kc->in_run = false;
	if (!kc->run_loaded)
		return;					/* stored versions only: nothing changes */

	old = MemoryContextSwitchTo(lc->item_context);
	if (kc->run_items > 1)
	{
		int			col = load->opts->to_attnum;
		Datum		to = zl_instant_to_datum(kc->run_to, load->opts->period_type);
		bool		isnull = false;

		row = heap_modify_tuple_by_cols(row, load->tupdesc, 1, &col, &to, &isnull);
		/* a new period: its generated columns and constraints (zl_rowcheck.c) */
		row = zl_row_check(lc->row_check, row, NULL, NULL);
	}
	/* the rows were checked when added or stored: only place the run */
	zl_write_place(lc->writer, row, kc->run_from, kc->run_to);
	MemoryContextSwitchTo(old);

	if (kc->nrun_stored > 0 && lc->merged == NULL)
	{
		old = MemoryContextSwitchTo(load->context);
		lc->merged = tuplesort_begin_datum(INT8OID, Int8LessOperator, InvalidOid, false,
										   ZL_SIDE_KB, NULL, TUPLESORT_NONE);
		MemoryContextSwitchTo(old);
	}
	for (int i = 0; i < kc->nrun_stored; i++)
		tuplesort_putdatum(lc->merged, Int64GetDatum(kc->run_stored[i]), false);
}

static void
start_run(KeyCheck *kc, HeapTuple row, int64 from, int64 to, bool loaded, int64 seq)
{
	MemoryContext old;

	MemoryContextReset(kc->run_context);
	old = MemoryContextSwitchTo(kc->run_context);
	kc->in_run = true;
	kc->run_from = from;
	kc->run_to = to;
	kc->run_loaded = loaded;
	kc->run_items = 1;
	kc->run_head = heap_copytuple(row);
	kc->head_values = NULL;
	kc->nrun_stored = 0;
	kc->maxrun_stored = 4;
	kc->run_stored = palloc(sizeof(int64) * kc->maxrun_stored);
	if (!loaded)
		kc->run_stored[kc->nrun_stored++] = seq;
	MemoryContextSwitchTo(old);
}

/* the keys of a hash are done */
static void
end_group(LoadCheck *lc)
{
	for (int i = 0; i < lc->ngroup; i++)
		end_run(lc, lc->group[i]);
	lc->ngroup = 0;
	lc->in_group = false;
	MemoryContextReset(lc->group_context);
}

/* the check of the key in lc->probe, among the keys of the current hash */
static KeyCheck *
key_check_for(LoadCheck *lc)
{
	ZLLoad	   *load = lc->load;
	KeyCheck   *kc;
	MemoryContext old;

	for (int i = 0; i < lc->ngroup; i++)
		if (zl_keys_equal(load->hasher, lc->group[i]->key_row, lc->probe))
			return lc->group[i];

	if (lc->ngroup == lc->maxgroup)
	{
		old = MemoryContextSwitchTo(load->context);
		lc->maxgroup = Max(4, lc->maxgroup * 2);
		lc->group = lc->group ? repalloc(lc->group, sizeof(KeyCheck *) * lc->maxgroup) :
			palloc(sizeof(KeyCheck *) * lc->maxgroup);
		for (int i = lc->ngroup; i < lc->maxgroup; i++)
		{
			lc->group[i] = palloc0(sizeof(KeyCheck));
			lc->group[i]->run_context = AllocSetContextCreate(load->context,
															  "zipper_lake load run",
															  ALLOCSET_SMALL_SIZES);
			lc->group[i]->key_row = palloc0(sizeof(Datum) * load->tupdesc->natts);
		}
		MemoryContextSwitchTo(old);
	}
	kc = lc->group[lc->ngroup++];
	kc->have_last = false;
	kc->in_run = false;
	for (int i = 0; i < load->opts->nkeys; i++)
	{
		int			col = load->opts->key_attnums[i] - 1;
		Form_pg_attribute att = TupleDescAttr(load->tupdesc, col);

		old = MemoryContextSwitchTo(lc->group_context);
		kc->key_row[col] = datumCopy(lc->probe[col], att->attbyval, att->attlen);
		MemoryContextSwitchTo(old);
	}
	return kc;
}

/*
 * A loaded row merged into the run before it is not written: the TOAST
 * values it was given when inserted belong to nobody else (every row
 * inserted is toasted afresh), so they go with it, or erase could never
 * find them (README "Lifecycle").
 */
static void
drop_toast_values(LoadCheck *lc, const Datum *values, const bool *nulls)
{
	TupleDesc	tupdesc = lc->load->tupdesc;

	for (int i = 0; i < tupdesc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(tupdesc, i);

		if (!att->attisdropped && att->attlen == -1 && !nulls[i] &&
			VARATT_IS_EXTERNAL_ONDISK(DatumGetPointer(values[i])))
			toast_delete_datum(lc->rel, values[i], false);
	}
}

/*
 * One version, loaded or stored, in (key hash, valid_from) order: refuse
 * an overlap with an earlier one of its key, extend the key's run of
 * equal versions or start a new one.
 */
static void
check_item(LoadCheck *lc, TupleTableSlot *slot)
{
	ZLLoad	   *load = lc->load;
	bool		isnull;
	int64		hash = zl_rowsort_int8(slot, ITEM_HASH);
	int64		from = zl_rowsort_int8(slot, ITEM_FROM);
	int64		to = zl_rowsort_int8(slot, ITEM_TO);
	bool		loaded = DatumGetInt32(slot_getattr(slot, ITEM_KIND, &isnull)) == ITEM_LOADED;
	int64		seq = zl_rowsort_int8(slot, ITEM_SEQ);
	bool		extended = false;
	HeapTuple	row;
	KeyCheck   *kc;
	MemoryContext old;

	CHECK_FOR_INTERRUPTS();
	if (lc->in_group && hash != lc->group_hash)
		end_group(lc);
	lc->in_group = true;
	lc->group_hash = hash;

	MemoryContextReset(lc->item_context);
	old = MemoryContextSwitchTo(lc->item_context);
	row = zl_rowsort_row_copy(slot, ITEM_ROW);
	zl_key_extract(load->hasher, row, load->tupdesc, lc->probe);
	kc = key_check_for(lc);

	/* stored versions that overlap each other are not this load's doing */
	if (kc->have_last && from < kc->last_to && (loaded || kc->last_loaded))
		report_overlap(lc, kc, row, from, to, loaded);

	if (kc->in_run && kc->run_to == from)
	{
		TupleDesc	tupdesc = load->tupdesc;
		Datum	   *values = palloc(sizeof(Datum) * tupdesc->natts);
		bool	   *nulls = palloc(sizeof(bool) * tupdesc->natts);

		if (kc->head_values == NULL)
		{
			MemoryContextSwitchTo(kc->run_context);
			kc->head_values = palloc(sizeof(Datum) * tupdesc->natts);
			kc->head_nulls = palloc(sizeof(bool) * tupdesc->natts);
			heap_deform_tuple(kc->run_head, tupdesc, kc->head_values, kc->head_nulls);
			MemoryContextSwitchTo(lc->item_context);
		}
		heap_deform_tuple(row, tupdesc, values, nulls);
		if (zl_values_equal(lc->values, kc->head_values, kc->head_nulls, values, nulls))
		{
			kc->run_to = to;
			kc->run_loaded |= loaded;
			kc->run_items++;
			if (loaded)
				drop_toast_values(lc, values, nulls);
			else
			{
				if (kc->nrun_stored == kc->maxrun_stored)
				{
					kc->maxrun_stored *= 2;
					kc->run_stored = repalloc(kc->run_stored,
											  sizeof(int64) * kc->maxrun_stored);
				}
				kc->run_stored[kc->nrun_stored++] = seq;
			}
			extended = true;
		}
	}
	if (!extended)
	{
		end_run(lc, kc);
		start_run(kc, row, from, to, loaded, seq);
	}
	MemoryContextSwitchTo(old);

	if (!kc->have_last || to > kc->last_to)
	{
		kc->have_last = true;
		kc->last_from = from;
		kc->last_to = to;
		kc->last_loaded = loaded;
	}
}

/*
 * Check loaded items (from the key sort, or a chunk of them buffered)
 * merged with the stored items of their keys (a sort, or none).
 */
static void
check_streams(LoadCheck *lc, Tuplesortstate *loaded_sort, Tuplestorestate *loaded_buffer,
			  TupleTableSlot *loaded_slot, Tuplesortstate *stored_sort,
			  TupleTableSlot *stored_slot)
{
	bool		have_loaded,
				have_stored;

#define NEXT_LOADED() (loaded_sort ? \
	tuplesort_gettupleslot(loaded_sort, true, false, loaded_slot, NULL) : \
	tuplestore_gettupleslot(loaded_buffer, true, false, loaded_slot))
#define NEXT_STORED() (stored_sort != NULL && \
	tuplesort_gettupleslot(stored_sort, true, false, stored_slot, NULL))

	have_loaded = NEXT_LOADED();
	have_stored = NEXT_STORED();
	while (have_loaded || have_stored)
	{
		if (have_loaded && (!have_stored || item_cmp(loaded_slot, stored_slot) < 0))
		{
			check_item(lc, loaded_slot);
			have_loaded = NEXT_LOADED();
		}
		else
		{
			check_item(lc, stored_slot);
			have_stored = NEXT_STORED();
		}
	}
	end_group(lc);
#undef NEXT_LOADED
#undef NEXT_STORED
}

/* can a sub-group hold versions of loaded keys between from and to? */
static bool
may_hold(LoadCheck *lc, const ZLSubGroup *sg, int64 from, int64 to)
{
	if (!sg->placed || sg->masked_rows >= sg->row_count)
		return false;
	if (sg->partition_end == ZL_CURRENT_PARTITION)
		return true;
	return sg->partition_end >= zl_partition_of(lc->load->opts, from) &&
		sg->first_start <= to;
}

/* stored rows of the keys of a chunk */
typedef struct CollectArg
{
	LoadCheck  *lc;
	Tuplesortstate *sort;
	const uint32 *hashes;		/* ascending, distinct */
	int			nhashes;
	int64		min_from;
	int64		max_to;
} CollectArg;

static void
collect_stored(void *arg, const ZLSubGroup *sg, int32 position, HeapTuple tuple)
{
	CollectArg *ca = arg;
	LoadCheck  *lc = ca->lc;
	ZLLoad	   *load = lc->load;
	const ZLTableOptions *opts = load->opts;
	uint32		hash;
	bool		isnull;
	int64		from,
				to;
	MemoryContext old;

	MemoryContextReset(load->row_context);
	old = MemoryContextSwitchTo(load->row_context);
	zl_key_extract(load->hasher, tuple, load->tupdesc, load->key_row);
	hash = zl_key_hash(load->hasher, load->key_row);
	from = zl_datum_to_instant(heap_getattr(tuple, opts->from_attnum, load->tupdesc, &isnull),
							   opts->period_type);
	to = zl_datum_to_instant(heap_getattr(tuple, opts->to_attnum, load->tupdesc, &isnull),
							 opts->period_type);
	if (to >= ca->min_from && from <= ca->max_to &&
		bsearch(&hash, ca->hashes, ca->nhashes, sizeof(uint32), zl_key_hash_cmp) != NULL)
		put_item(load, ca->sort, tuple, hash, from, to, ITEM_STORED,
				 ((int64) (sg - lc->sgs) << 32) | (uint32) position);
	MemoryContextSwitchTo(old);
}

/* the key directories of the sub-groups, held until the cache is emptied */
static void
load_directories(LoadCheck *lc)
{
	zl_key_directory_cache_trim();
	zl_meta_load_key_directories(lc->load->storage_id, lc->snapshot, lc->sgs, lc->nsgs, NULL);
	lc->directories_loaded = true;
	lc->directories_generation = zl_key_directory_cache_generation();
}

/* the stored versions of a chunk's keys that may touch its versions, sorted */
static Tuplesortstate *
find_stored(LoadCheck *lc, const uint32 *hashes, int nhashes, int64 min_from, int64 max_to)
{
	CollectArg	arg = {lc, NULL, hashes, nhashes, min_from, max_to};

	/*
	 * The constraints and generated columns of the chunk before may have
	 * run key lookups, which empty the directory cache when it is full:
	 * then the directories are read again.
	 */
	if (lc->directories_loaded &&
		lc->directories_generation != zl_key_directory_cache_generation())
		load_directories(lc);
	arg.sort = begin_item_sort(lc->load, ZL_SIDE_KB);
	for (int i = 0; i < lc->nsgs; i++)
	{
		ZLSubGroup *sg = &lc->sgs[i];

		/* current sub-groups through their key directories */
		if (may_hold(lc, sg, min_from, max_to))
			zl_read_subgroup_keys(lc->rel, sg, hashes, nhashes, collect_stored, &arg);
	}
	tuplesort_performsort(arg.sort);
	return arg.sort;
}

/*
 * Check the sorted loaded rows chunk by chunk: up to ZL_CHECK_CHUNK_KEYS
 * key hashes, all rows of each, buffered while the stored versions of
 * those keys are found and sorted.
 */
static void
check_chunks(LoadCheck *lc)
{
	ZLLoad	   *load = lc->load;
	TupleTableSlot *slot = load->item_read_slot;
	TupleTableSlot *buffer_slot = MakeSingleTupleTableSlot(load->item_desc,
														   &TTSOpsMinimalTuple);
	TupleTableSlot *stored_slot = MakeSingleTupleTableSlot(load->item_desc,
														   &TTSOpsMinimalTuple);
	Tuplestorestate *buffer = tuplestore_begin_heap(false, false, ZL_SIDE_KB);
	int			max_hashes = ZL_CHECK_CHUNK_KEYS;
	uint32	   *hashes = palloc(sizeof(uint32) * max_hashes);
	bool		have;

	have = tuplesort_gettupleslot(load->keysort, true, false, slot, NULL);
	while (have)
	{
		int			nhashes = 0;
		int64		min_from = PG_INT64_MAX;
		int64		max_to = PG_INT64_MIN;
		Tuplesortstate *stored;

		tuplestore_clear(buffer);
		while (have)
		{
			uint32		hash = (uint32) zl_rowsort_int8(slot, ITEM_HASH);

			if (nhashes == 0 || hashes[nhashes - 1] != hash)
			{
				if (nhashes == max_hashes)
					break;
				hashes[nhashes++] = hash;
			}
			min_from = Min(min_from, zl_rowsort_int8(slot, ITEM_FROM));
			max_to = Max(max_to, zl_rowsort_int8(slot, ITEM_TO));
			tuplestore_puttupleslot(buffer, slot);
			have = tuplesort_gettupleslot(load->keysort, true, false, slot, NULL);
		}
		stored = find_stored(lc, hashes, nhashes, min_from, max_to);
		check_streams(lc, NULL, buffer, buffer_slot, stored, stored_slot);
		tuplesort_end(stored);
	}
	tuplestore_end(buffer);
	pfree(hashes);
}

/*
 * Retire the stored versions that loaded ones were merged with, one
 * sub-group at a time: compacted, or listed in mask rows inserted a batch
 * at a time.
 */
static void
retire_merged(LoadCheck *lc)
{
	int			maxpositions = 1024;
	int32	   *positions = palloc(sizeof(int32) * maxpositions);
	int			npositions = 0;
	int64		current = -1;
	int			nmasks = 0;
	int			batch_positions = 0;
	int64	   *mask_ids = palloc(sizeof(int64) * 1024);
	int32	  **mask_positions = palloc(sizeof(int32 *) * 1024);
	int		   *mask_counts = palloc(sizeof(int) * 1024);
	Datum		value;
	bool		isnull;
	bool		more;

	if (lc->merged == NULL)
		return;
	tuplesort_performsort(lc->merged);
	do
	{
		int64		location = 0;

		more = tuplesort_getdatum(lc->merged, true, &value, &isnull, NULL);
		if (more)
			location = DatumGetInt64(value);
		if (npositions > 0 && (!more || (location >> 32) != current))
		{
			const ZLSubGroup *sg = &lc->sgs[current];

			if (!zl_compact_subgroup(lc->rel, lc->writer, sg, positions, npositions))
			{
				mask_ids[nmasks] = sg->subgroup_id;
				mask_positions[nmasks] = palloc(sizeof(int32) * npositions);
				memcpy(mask_positions[nmasks], positions, sizeof(int32) * npositions);
				mask_counts[nmasks++] = npositions;
				batch_positions += npositions;
			}
			if (nmasks > 0 && (!more || nmasks == 1024 || batch_positions >= 65536))
			{
				zl_meta_insert_masks(lc->rel, nmasks, mask_ids,
									 mask_positions, mask_counts);
				for (int i = 0; i < nmasks; i++)
					pfree(mask_positions[i]);
				nmasks = 0;
				batch_positions = 0;
			}
			npositions = 0;
		}
		if (more)
		{
			if (npositions == maxpositions)
			{
				maxpositions *= 2;
				positions = repalloc_huge(positions, sizeof(int32) * maxpositions);
			}
			current = location >> 32;
			positions[npositions++] = (int32) (location & 0xFFFFFFFF);
		}
	} while (more);
	tuplesort_end(lc->merged);
	lc->merged = NULL;
}

/*
 * Check the loaded rows of a flush of rel and hand what they leave to the
 * writer's placement (see the header comment); stored versions merged away
 * are retired, compacted sub-groups written again through the writer too.
 * Then the load holds no rows any more.
 */
bool
zl_load_check(ZLLoad *load, Relation rel, ZLWriteState *writer)
{
	LoadCheck	lc;
	Snapshot	snapshot;
	bool		stored = false;
	bool		current = false;
	MemoryContext old;

	/*
	 * Rows taken narrowly are placed already; if the load stopped being
	 * narrow, or the table got sub-groups after all (another write state
	 * of this transaction, in a subtransaction, may have flushed), they
	 * need the full check with the others.
	 */
	if (load->took_narrow)
	{
		bool		stayed_narrow;

		load->took_narrow = false;
		CommandCounterIncrement();
		stayed_narrow = load->narrow && !zl_meta_has_subgroups(load->storage_id);
		end_narrow(load);		/* its keys are not kept while the flush goes on */
		return stayed_narrow;
	}
	old = MemoryContextSwitchTo(load->context);

	memset(&lc, 0, sizeof(lc));
	lc.load = load;
	lc.writer = writer;
	lc.rel = rel;
	lc.values = zl_value_comparer_create(load->tupdesc, load->opts, false);
	lc.row_check = zl_row_check_begin(rel, load->opts);
	lc.probe = palloc0(sizeof(Datum) * load->tupdesc->natts);
	lc.group_context = AllocSetContextCreate(load->context, "zipper_lake load keys",
											 ALLOCSET_DEFAULT_SIZES);
	lc.item_context = AllocSetContextCreate(load->context, "zipper_lake load item",
											ALLOCSET_DEFAULT_SIZES);

	/* what earlier statements and committed writers stored */
	CommandCounterIncrement();
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	lc.sgs = zl_meta_load_subgroups(load->storage_id, snapshot,
									zl_partition_of(load->opts, load->min_from), &lc.nsgs);
	for (int i = 0; i < lc.nsgs; i++)
	{
		if (may_hold(&lc, &lc.sgs[i], load->min_from, load->max_to))
		{
			stored = true;
			current |= lc.sgs[i].partition_end == ZL_CURRENT_PARTITION;
		}
	}
	lc.snapshot = snapshot;
	if (current)
		load_directories(&lc);

	zl_rowsort_perform_pending(load->keysort);
	if (stored)
		check_chunks(&lc);
	else
		check_streams(&lc, load->keysort, NULL, load->item_read_slot, NULL, NULL);
	UnregisterSnapshot(snapshot);
	tuplesort_end(load->keysort);
	load->keysort = NULL;
	retire_merged(&lc);
	zl_row_check_end(lc.row_check);
	MemoryContextSwitchTo(old);
	return true;
}
