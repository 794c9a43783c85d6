/*-------------------------------------------------------------------------
 *
 * zl_planner_internal.h
 *	  What stays inside planner/.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZL_PLANNER_INTERNAL_H
#define ZL_PLANNER_INTERNAL_H

#include "access/zl_access.h"
#include "planner/zl_planner.h"

/* ---------- zl_clauses.c ---------- */

extern bool zl_is_scan_constant(Node *expr, Index rti);
extern Oid	zl_default_opfamily(Oid type, Oid am, Oid *input_type);

/* ---------- zl_chunkfilter.c ---------- */

extern List *zl_chunkfilter_extract(List *clauses, Index rti, TupleDesc desc, List **info);

/* ---------- zl_keyprobe.c ---------- */

typedef struct ZLKeyProbe ZLKeyProbe;
struct PlanState;
struct PlannerInfo;
struct RelOptInfo;
struct ExprContext;

extern List *zl_keyprobe_extract(List *clauses, Index rti, const ZLTableOptions *opts,
								 TupleDesc tupdesc, List **info, Bitmapset **outer);
extern List *zl_keyprobe_join_clauses(struct PlannerInfo *root, struct RelOptInfo *rel,
									  const ZLTableOptions *opts);
extern ZLKeyProbe *zl_keyprobe_init(List *terms, List *info, const ZLTableOptions *opts,
									TupleDesc tupdesc, struct PlanState *parent);
extern uint32 *zl_keyprobe_hashes(ZLKeyProbe *probe, struct ExprContext *econtext,
								  int *nhashes);

/* ---------- zl_customscan.c ---------- */

struct Path;

extern struct Path *zl_unfiltered_scan_path(struct PlannerInfo *root, struct RelOptInfo *rel,
											 bool partial, bool *columnar_history);
extern TupleTableSlot *zl_customscan_next_row(struct PlanState *node);
extern bool zl_customscan_next_batch(struct PlanState *node, ZLRowBatch *batch);

/* ---------- zl_aggregate_memo.c ---------- */

#define ZL_KEY_MEMO_BITS	10

typedef struct ZLKeyMemoEntry
{
	Datum		key;			/* normalized (zl_key_memo_normalize) */
	void	   *value;			/* NULL: an empty slot */
} ZLKeyMemoEntry;

/* keys already in a hash table whose equality is bitwise, and their entries */
typedef struct ZLKeyMemo
{
	uint64		mask;			/* the bits the type's equality compares */
	bool		is_bool;		/* bool: compared as zero or not */
	ZLKeyMemoEntry entries[1 << ZL_KEY_MEMO_BITS];
} ZLKeyMemo;

extern ZLKeyMemo *zl_key_memo_create(Oid type, Oid eqop);
extern void zl_key_memo_clear(ZLKeyMemo *memo);

/* the key as its equality sees it: equal keys, equal normalized datums */
static inline Datum
zl_key_memo_normalize(const ZLKeyMemo *memo, Datum key)
{
	if (memo->is_bool)
		return (Datum) (key != 0);
	return (Datum) ((uint64) key & memo->mask);
}

/* the slot of a normalized key (Fibonacci hashing) */
static inline ZLKeyMemoEntry *
zl_key_memo_slot(ZLKeyMemo *memo, Datum normalized)
{
	uint64		h = (uint64) normalized * UINT64CONST(0x9E3779B97F4A7C15);

	return &memo->entries[h >> (64 - ZL_KEY_MEMO_BITS)];
}

/* what was remembered for a (non-NULL) key, or NULL */
static inline void *
zl_key_memo_get(ZLKeyMemo *memo, Datum key)
{
	Datum		normalized = zl_key_memo_normalize(memo, key);
	ZLKeyMemoEntry *entry = zl_key_memo_slot(memo, normalized);

	return entry->value != NULL && entry->key == normalized ? entry->value : NULL;
}

/* remember value (not NULL) for a key the table holds */
static inline void
zl_key_memo_put(ZLKeyMemo *memo, Datum key, void *value)
{
	Datum		normalized = zl_key_memo_normalize(memo, key);
	ZLKeyMemoEntry *entry = zl_key_memo_slot(memo, normalized);

	entry->key = normalized;
	entry->value = value;
}

/* ---------- zl_aggregate_distinct.c ---------- */

typedef struct ZLDistinctInput ZLDistinctInput;

extern ZLDistinctInput *zl_distinct_create(Oid type, Oid eqop, Oid sortop, bool nulls_first,
										   Oid collation);
extern void zl_distinct_reset(ZLDistinctInput *d);
extern void zl_distinct_end(ZLDistinctInput *d);
extern void zl_distinct_add(ZLDistinctInput *d, Datum value, bool isnull);
extern void zl_distinct_add_rows(ZLDistinctInput *d, const Datum *values, const bool *nulls,
								 const uint32 *rows, uint32 nrows);
extern void zl_distinct_finish(ZLDistinctInput *d);
extern bool zl_distinct_next(ZLDistinctInput *d, Datum *value, bool *isnull);

/* ---------- zl_aggregate_group.c ---------- */

typedef struct ZLGroups ZLGroups;

extern ZLGroups *zl_groups_create(struct PlanState *parent, TupleDesc row_desc, int nkeys,
								  const Oid *eqops, const Oid *sortops, const bool *nulls_first,
								  Size entry_size, double groups);
extern MemoryContext zl_groups_state_memory(ZLGroups *g);
extern void *zl_groups_find(ZLGroups *g, const Datum *keys, const bool *nulls, bool *isnew);
extern bool zl_groups_find_known(ZLGroups *g, const Datum *keys, const bool *nulls,
								 const uint32 *rows, uint32 nrows, void **groups);
extern void zl_groups_spill(ZLGroups *g, const Datum *values, const bool *nulls);
extern void zl_groups_input_done(ZLGroups *g);
extern bool zl_groups_next_hashed(ZLGroups *g, TupleTableSlot **key, void **data);
extern bool zl_groups_next_spilled(ZLGroups *g, TupleTableSlot **row, bool *first_of_group);
extern void zl_groups_counts(ZLGroups *g, int64 *hashed, int64 *sorted, int64 *spilled_rows);
extern void zl_groups_reset(ZLGroups *g);
extern void zl_groups_end(ZLGroups *g);

#endif							/* ZL_PLANNER_INTERNAL_H */
