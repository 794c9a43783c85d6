/*-------------------------------------------------------------------------
 *
 * zl_index_hidden.c
 *	  Which index entries name rows no snapshot sees: VACUUM's judge, and
 *	  btree's bottom-up deletion between VACUUMs.
 *
 * Writes enter every row they write into the table's indexes and never
 * take an entry out (zl_index_rows.c).  An entry is dead when the row it
 * names is hidden from every snapshot: a mask that every snapshot sees
 * covers its position -- for good, since TIDs are never given twice
 * (README "Row identifiers") -- or, for VACUUM, when no sub-group that
 * someone may still see owns its TID block (src/lifecycle/
 * zl_index_vacuum.c).  ZLDeadEntries holds the sub-groups to judge by,
 * read with zl_meta_load_subgroups_not_dead, and zl_index_entry_dead
 * judges one entry.
 *
 * A btree also removes dead entries itself before it splits a leaf page
 * (bottom-up deletion), when the entry going in is marked as one for a
 * row that may have replaced another -- as heap's UPDATEs mark theirs;
 * every write here marks its entries so (zl_index_rows.c), while such
 * passes pay off (below): a closed version's copy, an open version that
 * replaced one, a row moved by compaction.  The btree asks which of the
 * page's TIDs are dead (zl_index_delete_entries), holding the page
 * locked, where reading the
 * catalog is no place to be; so the answer comes from memory: the
 * sub-groups and masks every snapshot saw, read by a write before it
 * enters its rows (zl_index_hidden_rows_refresh), at most once a
 * transaction and only for a storage an index asked about since the last
 * read.  An older read knows fewer hidden rows, never a wrong one.  The
 * conflict horizon for standbys is the one the masks and catalog rows
 * were read by: every masking or deleting transaction came before it.
 *
 * A pass pays off when it frees room enough for the btree to keep the
 * page (a twenty-fourth of it; it asks for a sixteenth): where few keys
 * churn, their pages hold many dead entries; where changes spread over
 * many keys, a page gains about one a batch and
 * nearly every pass fails -- a sixth of an apply's time, measured on a
 * table of 4M versions with two indexes, before the split the btree makes
 * anyway.  So a backend marks its entries only while passes into that
 * index pay off, and after k failures in a row asks again only after 2^k
 * entries (zl_index_bottomup_hint; at most BOTTOMUP_MAX_WAIT).
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "storage/zl_storage.h"
#include "catalog/zl_catalog.h"
#include "write/zl_write.h"

#include "access/tableam.h"
#include "access/transam.h"
#include "miscadmin.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"

/*
 * A dead entry: before the first one goes, standbys whose queries could
 * still see its row cancel them (VACUUM's pass; a btree's own deletion
 * logs its horizon itself).  Heap's VACUUM gets the same from pruning the
 * rows first, which sub-groups, immutable, never are.
 */
static bool
entry_dead(ZLDeadEntries *d)
{
	if (d->conflict_rel != NULL && !d->conflict_logged)
	{
		zl_log_standby_conflict(d->conflict_rel, 0, d->conflict_horizon);
		d->conflict_logged = true;
	}
	return true;
}

/* IndexBulkDeleteCallback: is the entry of this TID dead? */
bool
zl_index_entry_dead(ItemPointer tid, void *state)
{
	ZLDeadEntries *d = state;
	int64		block = ItemPointerGetBlockNumber(tid);
	int			lo;

	if (block >= d->taken)
		return false;			/* taken since the sub-groups were read: a writer's */
	if (block < d->lo || (d->next >= 0 && block >= d->next))
		return false;			/* not among the sub-groups read */
	lo = zl_tid_block_candidate(d->starts, d->n, block);
	if (lo < 0 || zl_tid_position(&d->sgs[lo], tid) < 0)
		return d->unowned_dead && entry_dead(d);
	/* sub-groups own disjoint blocks; an updated catalog row leaves two versions */
	for (int i = lo; i >= 0 && d->sgs[i].first_tid_block == d->sgs[lo].first_tid_block; i--)
	{
		int64		position = zl_tid_position(&d->sgs[i], tid);

		if (position >= 0 && !ZL_ROW_MASKED(&d->sgs[i], position))
			return false;
	}
	return entry_dead(d);
}

/* the last transaction id before xid, as a full one */
FullTransactionId
zl_full_xid_before(TransactionId xid)
{
	FullTransactionId next = ReadNextFullTransactionId();
	uint32		epoch = EpochFromFullTransactionId(next);

	TransactionIdRetreat(xid);
	if (xid > XidFromFullTransactionId(next))
		epoch--;				/* before the last wraparound */
	return FullTransactionIdFromEpochAndXid(epoch, xid);
}

/* what bottom-up deletion knows of one storage's hidden rows */
typedef struct HiddenRows
{
	MemoryContext context;		/* NULL: nothing read yet */
	ZLTableStorage storage;
	LocalTransactionId read_in; /* the transaction that read them */
	TransactionId horizon;		/* every masking transaction precedes it */
	ZLDeadEntries d;
	bool		wanted;			/* an index asked about wanted_storage since */
	ZLTableStorage wanted_storage;
} HiddenRows;

static HiddenRows hidden;

/*
 * A table's storage, for good: storage ids start over with a new CREATE
 * EXTENSION, and a TRUNCATE of a table new in its transaction keeps its
 * file; relation OIDs do not come back so soon.
 */
ZLTableStorage
zl_table_storage(Relation rel)
{
	ZLTableStorage key;

	memset(&key, 0, sizeof(key));	/* compared with memcmp */
	key.relid = RelationGetRelid(rel);
	key.relfilenode = rel->rd_node.relNode;
	key.storage_id = zl_storage_id(rel);
	return key;
}

/*
 * Is a read of the storage's hidden rows due: did an index ask about it
 * since they were last read in another transaction (a transaction's own
 * masks are never seen by every snapshot)?
 */
static bool
due_for(const ZLTableStorage *key)
{
	return hidden.wanted && ZL_SAME_TABLE_STORAGE(hidden.wanted_storage, *key) &&
		(hidden.context == NULL || !ZL_SAME_TABLE_STORAGE(hidden.storage, *key) ||
		 hidden.read_in != MyProc->lxid);
}

/*
 * Before a write enters its rows into the table's indexes (no buffer
 * locked), when due: read the sub-groups and masks every snapshot sees,
 * as many as fit work_mem, from the first TID block on.  A writer holding
 * the table's writer lock, whose own sub-groups' catalog rows are all in
 * (its entries go in when the write ends, zl_index_rows.c), knows every TID block taken
 * so far to be settled: one that no sub-group read owns then names rows
 * no snapshot sees (of a sub-group deleted for good, or of a write rolled
 * back), as VACUUM judges them.
 */
void
zl_index_hidden_rows_refresh(Relation rel)
{
	ZLTableStorage key;
	MemoryContext context;
	MemoryContext old;
	TransactionId oldest_xmin;
	bool		settled;
	ZLDeadEntries d;

	if (!hidden.wanted)
		return;
	key = zl_table_storage(rel);
	if (!due_for(&key))
		return;

	/* nothing is known until the read succeeds (it may fail: a lock, a cancel) */
	if (hidden.context != NULL)
		MemoryContextDelete(hidden.context);
	hidden.context = NULL;

	settled = zl_write_lock_held(key.storage_id);
	oldest_xmin = GetOldestNonRemovableTransactionId(rel);
	memset(&d, 0, sizeof(d));
	context = AllocSetContextCreate(CurrentMemoryContext, "zipper_lake hidden rows",
									ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(context);
	d.sgs = zl_meta_load_subgroups_not_dead(key.storage_id, oldest_xmin, 0,
											(Size) work_mem * 1024, &d.n, &d.next);
	d.starts = zl_tid_block_starts(d.sgs, d.n);
	MemoryContextSwitchTo(old);
	d.taken = settled ? zl_storage_next_tid_block(rel, zl_meta_tid_blocks_used) : PG_INT64_MAX;
	d.unowned_dead = settled;
	d.conflict_rel = NULL;		/* the btree logs the horizon returned */

	/* read: kept for later transactions too */
	MemoryContextSetParent(context, TopMemoryContext);
	hidden.context = context;
	hidden.d = d;
	hidden.storage = key;
	hidden.read_in = MyProc->lxid;
	hidden.horizon = oldest_xmin;
	TransactionIdRetreat(hidden.horizon);
	hidden.wanted = false;
}

/*
 * Whether bottom-up passes into an index paid off lately, in this backend:
 * after k failures in a row, the next 2^k entries go in unmarked.
 */
struct ZLBottomUpOutlook
{
	Oid			index;			/* hash key */
	int			failures;		/* passes in a row that did not free enough */
	int64		unmarked_left;	/* entries still to go in unmarked */
};

#define BOTTOMUP_MAX_WAIT	4096

/*
 * Outlooks a backend keeps, at most: the indexes written past that share
 * one, so a backend that writes into ever new indexes keeps no more.
 */
#define BOTTOMUP_MAX_OUTLOOKS	1024

static ZLBottomUpOutlook shared_outlook;
static HTAB *outlooks;

/*
 * The outlook of an index, for a writer to keep while it enters a
 * write's rows (entries of the table stay put: dynahash never moves them,
 * and none is ever removed).
 */
ZLBottomUpOutlook *
zl_index_bottomup_outlook(Relation index)
{
	Oid			indexid = RelationGetRelid(index);
	bool		found;
	ZLBottomUpOutlook *o;

	if (outlooks == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(Oid);
		ctl.entrysize = sizeof(ZLBottomUpOutlook);
		outlooks = hash_create("zipper_lake bottom-up outlooks", 16, &ctl,
							   HASH_ELEM | HASH_BLOBS);
	}
	o = hash_search(outlooks, &indexid, HASH_FIND, &found);
	if (found)
		return o;
	if (hash_get_num_entries(outlooks) >= BOTTOMUP_MAX_OUTLOOKS)
		return &shared_outlook;
	o = hash_search(outlooks, &indexid, HASH_ENTER, &found);
	o->failures = o->unmarked_left = 0;
	return o;
}

/*
 * Should an entry going into this index ask for a bottom-up pass if its
 * page is full (index_insert's indexUnchanged)?  Yes until passes into
 * the index fail; then again after a wait that doubles with each failure.
 */
bool
zl_index_bottomup_hint(ZLBottomUpOutlook *o)
{
	if (o->unmarked_left == 0)
		return true;
	o->unmarked_left--;
	return false;
}

/* a pass into the index freed the space asked for, or did not */
static void
bottomup_outcome(Relation index, bool paid_off)
{
	ZLBottomUpOutlook *o = zl_index_bottomup_outlook(index);

	if (paid_off)
		o->failures = 0;
	else
		o->failures = Min(o->failures + 1, 30);
	o->unmarked_left = o->failures == 0 ? 0 :
		Min((int64) 1 << o->failures, BOTTOMUP_MAX_WAIT);
}

/*
 * Entries a bottom-up pass judges at most: a page of a column with few
 * values is all posting lists, a thousand TIDs or more, asked about at
 * every insert that finds it full (heap's bottom-up deletion similarly
 * visits a few table blocks at most).
 */
#define MAX_JUDGED		256

/*
 * Is the i-th entry of a deletion worth judging in this pass?  Every entry
 * of a simple deletion; of a bottom-up one (whose TIDs come in page order),
 * the promising ones first, then those of posting lists (entries of one
 * index tuple), where btree marks at most one promising: a deduplicated
 * key's masked and moved copies.
 */
static bool
worth_judging(const TM_IndexDeleteOp *delstate, int i, int pass)
{
	const TM_IndexStatus *status = &delstate->status[delstate->deltids[i].id];
	const TM_IndexStatus *before = i > 0 ? &delstate->status[delstate->deltids[i - 1].id] : NULL;
	const TM_IndexStatus *after = i + 1 < delstate->ndeltids ?
		&delstate->status[delstate->deltids[i + 1].id] : NULL;

	if (!delstate->bottomup)
		return true;
	if (pass == 0)
		return status->promising;
	return !status->promising &&
		((before != NULL && before->idxoffnum == status->idxoffnum) ||
		 (after != NULL && after->idxoffnum == status->idxoffnum));
}

/*
 * The table AM's index_delete_tuples: which entries of an index page name
 * rows no snapshot sees, as far as the last read of the storage tells
 * (nothing if it was not read: the next write reads it).  A bottom-up
 * pass hands every TID of the page and marks the duplicates promising (a
 * row's masked copy, its closed copy and its new open version share their
 * key): those are judged first, then, if they did not free the space the
 * pass asks for, the rest of posting lists (worth_judging), MAX_JUDGED
 * at most -- not every TID of the page, which a full page asks about
 * again and again.  Entries the index knows to be deletable stay so.
 * Returns the conflict horizon for standbys, InvalidTransactionId when
 * nothing is deletable.
 */
TransactionId
zl_index_delete_entries(Relation rel, TM_IndexDeleteOp *delstate)
{
	ZLTableStorage key = zl_table_storage(rel);
	bool		usable = hidden.context != NULL && ZL_SAME_TABLE_STORAGE(hidden.storage, key);
	bool		known = false;
	bool		found = false;
	int			freed = 0;
	int			judged = 0;

	if (!usable || hidden.read_in != MyProc->lxid)
	{
		hidden.wanted = true;
		hidden.wanted_storage = key;
	}
	/* bottom-up: promising entries first, then posting lists' if need be */
	for (int pass = 0; pass < (delstate->bottomup ? 2 : 1); pass++)
	{
		if (pass == 1 && freed >= delstate->bottomupfreespace)
			break;
		for (int i = 0; i < delstate->ndeltids; i++)
		{
			TM_IndexStatus *status = &delstate->status[delstate->deltids[i].id];

			if (status->knowndeletable)
			{
				if (pass == 0)
				{
					known = true;
					freed += status->freespace;
				}
				continue;
			}
			if (!usable || !worth_judging(delstate, i, pass) ||
				(delstate->bottomup && judged++ >= MAX_JUDGED))
				continue;
			if (zl_index_entry_dead(&delstate->deltids[i].tid, &hidden.d))
			{
				status->knowndeletable = found = true;
				freed += status->freespace;
			}
		}
	}
	/* the btree keeps a page that has a twenty-fourth of it free, not a sixteenth */
	if (delstate->bottomup && usable)
		bottomup_outcome(delstate->irel, freed >= delstate->bottomupfreespace * 2 / 3);
	if (known)
	{
		/* entries the index found dead itself: a horizon of now covers them */
		TransactionId horizon = GetOldestNonRemovableTransactionId(rel);

		TransactionIdRetreat(horizon);
		return horizon;
	}
	return found ? hidden.horizon : InvalidTransactionId;
}
