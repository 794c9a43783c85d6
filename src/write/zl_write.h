/*-------------------------------------------------------------------------
 *
 * zl_write.h
 *	  The write layer: the write state, compaction, merging, free space, row checks.
 *
 * What the layers above use of the write state of a table (zl_write.c),
 * compaction (zl_compact.c), merging of small file groups (zl_merge.c),
 * free space (zl_freespace.c) and the checks of rows against the table's
 * constraints (zl_rowcheck.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZL_WRITE_H
#define ZL_WRITE_H

#include "storage/zl_storage.h"

#include "access/transam.h"

/*
 * A new history file group takes consecutive uncovered base windows while
 * it holds fewer rows than this (zl_place.c, "File-group windows"); VACUUM
 * merges those holding less than half of it (zl_merge.c).
 */
#define ZL_FILL_ROWS			(32 * 1024)

/* ---------- zl_write.c ---------- */

typedef struct ZLWriteState ZLWriteState;

extern ZLWriteState *zl_write_state_get(Relation rel);
extern void zl_write_state_reuse_below(ZLWriteState *state, BlockNumber below);
extern void zl_write_state_fit_free_extents(ZLWriteState *state, double rows_per_block);
extern void zl_write_load(ZLWriteState *state, HeapTuple tuple);
extern void zl_write_place(ZLWriteState *state, HeapTuple tuple, int64 valid_from,
						   int64 valid_to);
extern HeapTuple zl_toast_version(Relation rel, HeapTuple tuple);
extern void zl_write_hold_packing(Oid relid, bool hold);
extern void zl_write_set_current_columnar(ZLWriteState *state, bool on);
extern char zl_write_state_history_format(const ZLWriteState *state);
extern void zl_write_flush_relation(Oid relid);
extern void zl_write_flush_all(void);
extern void zl_write_flush_indexed(void);
extern void zl_write_discard_relation(Oid relid);
extern void zl_write_place_unplaced(Relation rel);
extern void zl_write_register_callbacks(void);

/* ---------- zl_compact.c ---------- */

extern bool zl_compaction_due(int64 row_count, int64 masked_rows, int64 ndropped);
extern bool zl_compact_subgroup(Relation rel, ZLWriteState *state, const ZLSubGroup *sg,
								const int32 *dropped, int ndropped);
extern void zl_rewrite_subgroup(Relation rel, ZLWriteState *state, const ZLSubGroup *sg,
								const int32 *dropped, int ndropped);

/* ---------- zl_merge.c ---------- */

extern bool zl_merge_due(const ZLSubGroup *sgs, int nsgs);
extern int	zl_merge_file_groups(Relation rel, int *subgroups_before);

/* ---------- zl_freespace.c ---------- */

extern int64 zl_free_space_truncate(Relation rel);
extern bool zl_free_space_worth_truncating(Relation rel, BlockNumber tail_blocks);
extern void zl_free_space_below(Relation rel, uint64 storage_id, BlockNumber below,
								BlockNumber *largest, BlockNumber *total);
extern int64 zl_free_space_reclaim(Relation rel);
extern int64 zl_free_space_wipe(Relation rel, BufferAccessStrategy strategy, bool *complete);
extern void zl_log_standby_conflict(Relation rel, BlockNumber block, FullTransactionId freed_by);

/* ---------- zl_rowcheck.c ---------- */

typedef struct ZLAssignment ZLAssignment;
typedef struct ZLRowCheck ZLRowCheck;

extern ZLAssignment *zl_assignment_create(int ncols);
extern bool zl_assignment_add(ZLAssignment *a, int col, Oid source_type,
							  int32 source_typmod, Oid target_type, int32 target_typmod);
extern void zl_assignment_apply(ZLAssignment *a, Datum *values, bool *isnull,
								MemoryContext memory_context);
extern int	zl_assignment_converting(const ZLAssignment *a);
extern void zl_assignment_end(ZLAssignment *a);
extern ZLRowCheck *zl_row_check_begin(Relation rel, const ZLTableOptions *opts);
extern HeapTuple zl_row_check(ZLRowCheck *rc, HeapTuple tuple, const Datum *values,
							  const bool *isnull);
extern void zl_row_check_end(ZLRowCheck *rc);

/* ---------- zl_index_hidden.c ---------- */

/* the sub-groups index entries are judged by (zl_index_entry_dead) */
typedef struct ZLDeadEntries
{
	int64		taken;			/* TID blocks from here on are left alone */
	int64		lo;				/* the range of TID blocks judged: from lo */
	int64		next;			/* to before next (-1: to the end) */
	ZLSubGroup *sgs;			/* still there for someone, by first_tid_block */
	int64	   *starts;			/* their first_tid_blocks (zl_tid_block_starts) */
	int			n;
	bool		unowned_dead;	/* an entry of a block no sub-group owns is dead */
	Relation	conflict_rel;	/* not NULL: log a standby conflict first */
	FullTransactionId conflict_horizon; /* every hiding transaction precedes it */
	bool		conflict_logged;
} ZLDeadEntries;

struct TM_IndexDeleteOp;

/* a table's storage for good: relation, file and storage id */
typedef struct ZLTableStorage
{
	Oid			relid;
	Oid			relfilenode;
	uint64		storage_id;
} ZLTableStorage;

#define ZL_SAME_TABLE_STORAGE(a, b)	(memcmp(&(a), &(b), sizeof(ZLTableStorage)) == 0)

extern ZLTableStorage zl_table_storage(Relation rel);

extern bool zl_index_entry_dead(ItemPointer tid, void *state);
extern FullTransactionId zl_full_xid_before(TransactionId xid);
extern void zl_index_hidden_rows_refresh(Relation rel);
extern TransactionId zl_index_delete_entries(Relation rel, struct TM_IndexDeleteOp *delstate);
typedef struct ZLBottomUpOutlook ZLBottomUpOutlook;
extern ZLBottomUpOutlook *zl_index_bottomup_outlook(Relation index);
extern bool zl_index_bottomup_hint(ZLBottomUpOutlook *outlook);

/* ---------- zl_index_rows.c ---------- */

struct IndexInfo;
typedef struct ZLIndexRows ZLIndexRows;

extern ZLIndexRows *zl_index_rows_begin(Relation table, struct IndexInfo *info);
extern bool zl_index_rows_form(ZLIndexRows *r, HeapTuple tuple, Datum *values, bool *isnull);
extern void zl_index_rows_end(ZLIndexRows *r);
extern void zl_index_building(Oid indexoid);
extern void zl_index_entries_by_writes(Oid relid, const void *statement);
extern void zl_index_entries_by_writes_end(const void *statement);
extern void zl_index_entries_by_writes_forget(int nest_level);
extern bool zl_index_entries_left_to_writes(Oid relid);
extern void zl_index_placeholder_tid(Relation rel, ItemPointer tid);
typedef struct ZLIndexEntries ZLIndexEntries;
extern ZLIndexEntries *zl_index_entries_begin(Relation table);
extern void zl_index_entries_add(ZLIndexEntries *entries, const ZLSubGroup *sg);
extern void zl_index_entries_end(ZLIndexEntries *entries);

#endif							/* ZL_WRITE_H */
