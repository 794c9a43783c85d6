/*-------------------------------------------------------------------------
 *
 * zl_storage.c
 *	  Pages of a zipper table: the metapage and immutable sub-group pages.
 *
 * Layout of the main fork
 * -----------------------
 * Block 0 is the metapage: magic number, format version and the storage
 * id that keys every metadata row of this relfilenode (zl_metadata.c).  A
 * new relfilenode (CREATE, TRUNCATE, VACUUM FULL) gets a new storage id,
 * so metadata of an old file can never be applied to a new one.  It also
 * counts the changes of the storage's sub-group and mask rows: every
 * writer adds one after writing them and before it commits, which lets a
 * reader tell whether a cached list of them is still complete
 * (zl_metacache.c).  The counter is WAL-logged as a generic record, so
 * standbys replay it before the commit that makes the rows visible.
 *
 * Every other block belongs to at most one sub-group: a contiguous run of
 * blocks written by one writer and never modified while any snapshot can
 * see that sub-group.  Runs are appended at the end of the file, or
 * written into the blocks of a deleted sub-group that no snapshot can see
 * any more (zl_freespace.c); a page counter tells how many blocks a run
 * will take before it is written.  Pages use the standard layout
 * (PageInit).  In a row sub-group rows are stored as heap tuples behind
 * line pointers, with a frozen header: visibility is decided by the
 * sub-group's metadata row, never by the tuple, and scans can hand out
 * pinned tuples without copying them.  A columnar sub-group's pages hold
 * a byte stream after their header instead (zl_columnar_write.c).
 *
 * WAL
 * ---
 * A page is built in local memory, then appended through shared buffers
 * and logged as a full-page image (log_newpage_buffer) in one critical
 * section.  Recovery and standbys therefore replay exactly the pages the
 * primary wrote; the metadata rows that make them reachable are ordinary
 * heap WAL.  Pages written by a transaction that aborts stay in the file
 * but are unreachable: no committed metadata row points at them.
 *
 * Writers of one table are serialized by zl_write_lock_table(), so a
 * writer's appended pages are consecutive; the page writer checks that it
 * is so, and that a run written into free blocks stays within them.
 *
 *-------------------------------------------------------------------------
 */
#include "storage/zl_storage_internal.h"

#include "storage/lmgr.h"
#include "storage/lock.h"

#include "access/htup_details.h"
#include "access/transam.h"
#include "access/generic_xlog.h"
#include "access/xloginsert.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/bufpage.h"
#include "storage/lmgr.h"
#include "storage/smgr.h"
#include "utils/memutils.h"

typedef struct ZLMetaPageData
{
	uint32		magic;
	uint32		format_version;
	uint64		storage_id;
	uint64		metadata_changes;	/* zero on metapages written before 0.2 */
	uint64		scrub_requests; /* erases so far (zl_erase.c) */
	uint64		scrubbed;		/* of those, wiped by VACUUM (zl_scrub.c) */
	uint64		next_tid_block; /* TID blocks given so far; 0: none, or not
								 * counted yet (zl_storage_take_tid_blocks) */
} ZLMetaPageData;

struct ZLPageWriter
{
	Relation	rel;			/* NULL: a page counter, nothing is written */
	PGAlignedBlock page;		/* page being filled */
	bool		page_has_rows;
	BlockNumber first_block;	/* first block of this run */
	BlockNumber next_block;		/* block the current page will get */
	BlockNumber end_block;		/* free blocks end here; Invalid: append */
};

/*
 * Write the metapage of a new (empty) fork directly through smgr; used
 * while the relfilenode is not yet the relation's, like btbuildempty().
 */
void
zl_storage_init(Relation rel, SMgrRelation srel, ForkNumber fork, uint64 storage_id)
{
	PGAlignedBlock buf;
	Page		page = (Page) buf.data;
	ZLMetaPageData *meta;
	bool		needs_wal = RelationNeedsWAL(rel) || fork == INIT_FORKNUM;

	PageInit(page, BLCKSZ, 0);
	meta = (ZLMetaPageData *) PageGetContents(page);
	meta->magic = ZL_MAGIC;
	meta->format_version = ZL_FORMAT_VERSION;
	meta->storage_id = storage_id;
	((PageHeader) page)->pd_lower += sizeof(ZLMetaPageData);

	if (needs_wal)
		log_newpage(&srel->smgr_rnode.node, fork, ZL_METAPAGE_BLKNO, page, true);
	PageSetChecksumInplace(page, ZL_METAPAGE_BLKNO);
	smgrextend(srel, fork, ZL_METAPAGE_BLKNO, buf.data, true);

	/*
	 * The page bypassed shared buffers, so a checkpoint cannot flush it:
	 * sync it now, or a crash after the next checkpoint could lose it.
	 */
	if (needs_wal)
		smgrimmedsync(srel, fork);
}

typedef enum ZLMetaPageState
{
	ZL_META_OK,
	ZL_META_MISSING,
	ZL_META_BAD_MAGIC,
	ZL_META_OTHER_FORMAT
} ZLMetaPageState;

static ZLMetaPageState
read_metapage(Relation rel, ZLMetaPageData *meta)
{
	Buffer		buffer;

	if (RelationGetNumberOfBlocks(rel) == 0)
		return ZL_META_MISSING;
	buffer = ReadBuffer(rel, ZL_METAPAGE_BLKNO);
	LockBuffer(buffer, BUFFER_LOCK_SHARE);
	memcpy(meta, PageGetContents(BufferGetPage(buffer)), sizeof(*meta));
	UnlockReleaseBuffer(buffer);
	if (meta->magic != ZL_MAGIC)
		return ZL_META_BAD_MAGIC;
	if (meta->format_version != ZL_FORMAT_VERSION)
		return ZL_META_OTHER_FORMAT;
	return ZL_META_OK;
}

/* the storage id of the relation's current relfilenode (cached) */
uint64
zl_storage_id(Relation rel)
{
	ZLMetaPageData meta;

	if (rel->rd_amcache != NULL)
		return *(uint64 *) rel->rd_amcache;

	switch (read_metapage(rel, &meta))
	{
		case ZL_META_OK:
			break;
		case ZL_META_MISSING:
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("zipper_lake table \"%s\" has no metapage",
							RelationGetRelationName(rel))));
			break;
		case ZL_META_BAD_MAGIC:
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("zipper_lake table \"%s\" has a bad metapage",
							RelationGetRelationName(rel)),
					 errdetail("Magic number is %08X, expected %08X.",
							   meta.magic, ZL_MAGIC)));
			break;
		case ZL_META_OTHER_FORMAT:
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("zipper_lake table \"%s\" has storage format %u",
							RelationGetRelationName(rel), meta.format_version),
					 errdetail("This build reads format %u.", ZL_FORMAT_VERSION),
					 errhint("Install the zipper_lake version that wrote the table.")));
			break;
	}

	rel->rd_amcache = MemoryContextAlloc(CacheMemoryContext, sizeof(uint64));
	*(uint64 *) rel->rd_amcache = meta.storage_id;
	return meta.storage_id;
}

/*
 * The storage id, or false when the file has no readable metapage of this
 * format (a damaged table must stay droppable).
 */
bool
zl_storage_try_id(Relation rel, uint64 *storage_id)
{
	ZLMetaPageData meta;

	if (rel->rd_amcache != NULL)
	{
		*storage_id = *(uint64 *) rel->rd_amcache;
		return true;
	}
	if (!smgrexists(RelationGetSmgr(rel), MAIN_FORKNUM) ||
		read_metapage(rel, &meta) != ZL_META_OK)
		return false;
	*storage_id = meta.storage_id;
	return true;
}

/*
 * How many times the storage's sub-group and mask rows changed: read at
 * every scan start, so one pin of a buffer every backend keeps hot.
 */
uint64
zl_storage_metadata_changes(Relation rel)
{
	Buffer		buffer = ReadBuffer(rel, ZL_METAPAGE_BLKNO);
	uint64		changes;

	LockBuffer(buffer, BUFFER_LOCK_SHARE);
	changes = ((ZLMetaPageData *) PageGetContents(BufferGetPage(buffer)))->metadata_changes;
	UnlockReleaseBuffer(buffer);
	return changes;
}

typedef enum MetaCounter
{
	COUNT_METADATA_CHANGE,
	COUNT_SCRUB_REQUEST,
	SET_SCRUBBED,
	SET_NEXT_TID_BLOCK
} MetaCounter;

/* change a counter of the metapage (WAL-logged, not transactional) */
static void
update_metapage(Relation rel, MetaCounter counter, uint64 value)
{
	Buffer		buffer = ReadBuffer(rel, ZL_METAPAGE_BLKNO);
	GenericXLogState *state;
	Page		page;
	ZLMetaPageData *meta;

	LockBuffer(buffer, BUFFER_LOCK_EXCLUSIVE);
	state = GenericXLogStart(rel);
	page = GenericXLogRegisterBuffer(state, buffer, 0);
	meta = (ZLMetaPageData *) PageGetContents(page);
	if (counter == COUNT_METADATA_CHANGE)
		meta->metadata_changes++;
	else if (counter == COUNT_SCRUB_REQUEST)
		meta->scrub_requests++;
	else if (counter == SET_SCRUBBED)
		meta->scrubbed = value;
	else
		meta->next_tid_block = value;
	/* older metapages end before the counters (the rest of the page is zero) */
	((PageHeader) page)->pd_lower = Max(((PageHeader) page)->pd_lower,
										(char *) (meta + 1) - (char *) page);
	GenericXLogFinish(state);
	UnlockReleaseBuffer(buffer);
}

/* count a change of the storage's sub-group or mask rows, just written */
void
zl_storage_count_metadata_change(Relation rel)
{
	update_metapage(rel, COUNT_METADATA_CHANGE, 0);
}

/*
 * Ask VACUUM to wipe erased bytes (zl_scrub.c).  Not transactional: an
 * erase that rolls back leaves a request that costs one needless wipe.
 */
void
zl_storage_request_scrub(Relation rel)
{
	update_metapage(rel, COUNT_SCRUB_REQUEST, 0);
}

/* the requests so far if some are not wiped yet, else 0 */
uint64
zl_storage_scrub_due(Relation rel)
{
	Buffer		buffer = ReadBuffer(rel, ZL_METAPAGE_BLKNO);
	ZLMetaPageData *meta;
	uint64		due;

	LockBuffer(buffer, BUFFER_LOCK_SHARE);
	meta = (ZLMetaPageData *) PageGetContents(BufferGetPage(buffer));
	due = ((PageHeader) BufferGetPage(buffer))->pd_lower >=
		(char *) (meta + 1) - (char *) BufferGetPage(buffer) &&
		meta->scrub_requests != meta->scrubbed ? meta->scrub_requests : 0;
	UnlockReleaseBuffer(buffer);
	return due;
}

/* the requests up to this many are wiped */
void
zl_storage_scrub_done(Relation rel, uint64 requests)
{
	update_metapage(rel, SET_SCRUBBED, requests);
}

/*
 * A writer of one run: appended at the end of the relation, or (blocks > 0)
 * written into the free blocks [first_block, first_block + blocks), which
 * it must fill exactly (zl_page_counter_begin() tells how many).
 */
ZLPageWriter *
zl_page_writer_begin(Relation rel, BlockNumber first_block, BlockNumber blocks)
{
	ZLPageWriter *writer = palloc0(sizeof(ZLPageWriter));

	writer->rel = rel;
	if (blocks > 0)
	{
		writer->first_block = first_block;
		writer->end_block = first_block + blocks;
	}
	else
	{
		writer->first_block = RelationGetNumberOfBlocks(rel);
		writer->end_block = InvalidBlockNumber;
	}
	writer->next_block = writer->first_block;
	PageInit((Page) writer->page.data, BLCKSZ, 0);
	return writer;
}

/* a writer that only counts the pages its rows would fill */
ZLPageWriter *
zl_page_counter_begin(void)
{
	ZLPageWriter *counter = palloc0(sizeof(ZLPageWriter));

	counter->end_block = InvalidBlockNumber;
	PageInit((Page) counter->page.data, BLCKSZ, 0);
	return counter;
}

/* the buffer, exclusively locked, that the next page goes to */
static Buffer
page_writer_next_buffer(ZLPageWriter *writer)
{
	Relation	rel = writer->rel;
	Buffer		buffer;

	if (writer->end_block != InvalidBlockNumber)
	{
		if (writer->next_block >= writer->end_block)
			elog(ERROR, "zipper_lake run outgrew its %u free blocks at block %u",
				 writer->end_block - writer->first_block, writer->first_block);
		return ReadBufferExtended(rel, MAIN_FORKNUM, writer->next_block,
								  RBM_ZERO_AND_LOCK, NULL);
	}

	LockRelationForExtension(rel, ExclusiveLock);
	buffer = ReadBufferExtended(rel, MAIN_FORKNUM, P_NEW, RBM_NORMAL, NULL);
	UnlockRelationForExtension(rel, ExclusiveLock);

	if (BufferGetBlockNumber(buffer) != writer->next_block)
		elog(ERROR, "zipper_lake table \"%s\" was extended concurrently (block %u, expected %u)",
			 RelationGetRelationName(rel), BufferGetBlockNumber(buffer),
			 writer->next_block);
	LockBuffer(buffer, BUFFER_LOCK_EXCLUSIVE);
	return buffer;
}

/* write the filled page to the relation, WAL-logged (a counter just counts) */
static void
page_writer_flush_page(ZLPageWriter *writer)
{
	Relation	rel = writer->rel;

	if (rel != NULL)
	{
		Buffer		buffer = page_writer_next_buffer(writer);

		zl_remember_block(rel, BufferGetBlockNumber(buffer), buffer);
		START_CRIT_SECTION();
		memcpy(BufferGetPage(buffer), writer->page.data, BLCKSZ);
		MarkBufferDirty(buffer);
		if (RelationNeedsWAL(rel))
			log_newpage_buffer(buffer, true);
		END_CRIT_SECTION();
		UnlockReleaseBuffer(buffer);
	}

	writer->next_block++;
	writer->page_has_rows = false;
	PageInit((Page) writer->page.data, BLCKSZ, 0);
}

/* add a row; returns its position in the run (see zl_subgroup_read.c) */
int32
zl_page_writer_add(ZLPageWriter *writer, HeapTuple tuple)
{
	Page		page = (Page) writer->page.data;
	HeapTupleHeader stored;
	OffsetNumber offnum;

	if (tuple->t_len > MaxHeapTupleSize)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("row is too big: size %zu, maximum size %zu",
						(size_t) tuple->t_len, (size_t) MaxHeapTupleSize)));

	if (PageGetHeapFreeSpace(page) < MAXALIGN(tuple->t_len))
		page_writer_flush_page(writer);

	offnum = PageAddItem(page, (Item) tuple->t_data, tuple->t_len,
						 InvalidOffsetNumber, false, true);
	if (offnum == InvalidOffsetNumber)
		elog(ERROR, "failed to add row to zipper_lake page");

	/* frozen header: visibility comes from the sub-group's metadata */
	stored = (HeapTupleHeader) PageGetItem(page, PageGetItemId(page, offnum));
	stored->t_infomask &= ~HEAP_XACT_MASK;
	stored->t_infomask2 &= ~HEAP2_XACT_MASK;
	stored->t_infomask |= HEAP_XMIN_FROZEN | HEAP_XMAX_INVALID;
	HeapTupleHeaderSetXmin(stored, FrozenTransactionId);
	HeapTupleHeaderSetXmax(stored, InvalidTransactionId);
	HeapTupleHeaderSetCmin(stored, FirstCommandId);
	ItemPointerSet(&stored->t_ctid, writer->next_block, offnum);
	writer->page_has_rows = true;
	return (int32) ((writer->next_block - writer->first_block) * MaxHeapTuplesPerPage +
					(offnum - 1));
}

/*
 * Count a row of len bytes as zl_page_writer_add would place it, without
 * its data: writers decide where a sub-group goes from its rows' lengths.
 */
void
zl_page_counter_add_length(ZLPageWriter *counter, uint32 len)
{
	static const PGAlignedBlock zeros;
	HeapTupleData tuple;

	Assert(counter->rel == NULL);
	tuple.t_len = len;
	tuple.t_data = (HeapTupleHeader) zeros.data;
	(void) zl_page_writer_add(counter, &tuple);
}

/*
 * Append bytes of a columnar sub-group's stream (zl_columnar_write.c):
 * each page holds ZL_STREAM_PAGE_BYTES of it after its header, pd_lower
 * marking the end.  A run is either rows or a stream, never both.
 */
void
zl_page_writer_add_bytes(ZLPageWriter *writer, const char *data, Size len)
{
	while (len > 0)
	{
		PageHeader	header = (PageHeader) writer->page.data;
		Size		used = header->pd_lower - SizeOfPageHeaderData;
		Size		take = Min(len, ZL_STREAM_PAGE_BYTES - used);

		memcpy(writer->page.data + header->pd_lower, data, take);
		header->pd_lower += take;
		writer->page_has_rows = true;
		data += take;
		len -= take;
		if (header->pd_lower == BLCKSZ)
			page_writer_flush_page(writer);
	}
}

/* pages the rows added so far fill, the one being filled included */
BlockNumber
zl_page_writer_pages(const ZLPageWriter *writer)
{
	return writer->next_block - writer->first_block + (writer->page_has_rows ? 1 : 0);
}

void
zl_page_writer_finish(ZLPageWriter *writer, BlockNumber *first_block, int32 *blocks)
{
	if (writer->page_has_rows)
		page_writer_flush_page(writer);
	if (writer->end_block != InvalidBlockNumber && writer->next_block != writer->end_block)
		elog(ERROR, "zipper_lake run filled %u of its %u free blocks at block %u",
			 writer->next_block - writer->first_block,
			 writer->end_block - writer->first_block, writer->first_block);
	*first_block = writer->first_block;
	*blocks = (int32) (writer->next_block - writer->first_block);
	pfree(writer);
}

/* ---------- row identifiers ---------- */

/*
 * The first TID block no sub-group or placeholder has taken yet: what
 * zl_storage_take_tid_blocks gives next (while the caller holds the
 * writer lock, every later taker gets blocks from here on).
 */
int64
zl_storage_next_tid_block(Relation rel, int64 (*counted_before) (uint64 storage_id))
{
	Buffer		buffer = ReadBuffer(rel, ZL_METAPAGE_BLKNO);
	int64		next;

	LockBuffer(buffer, BUFFER_LOCK_SHARE);
	next = (int64) ((ZLMetaPageData *) PageGetContents(BufferGetPage(buffer)))->next_tid_block;
	UnlockReleaseBuffer(buffer);
	return next != 0 ? next : counted_before(zl_storage_id(rel));
}

/*
 * Take n TID blocks for a sub-group about to be written (README "Row
 * identifiers"), from the metapage's counter: WAL-logged and not
 * transactional, so blocks taken by a write that rolls back are never
 * given again and no index entry it left can name a later row.  Writers
 * are serialized (zl_write_lock_table).  A metapage written before the
 * counter has none: counted_before, the first block after every
 * sub-group's in the catalog, is where it starts.
 */
int64
zl_storage_take_tid_blocks(Relation rel, int64 n, int64 (*counted_before) (uint64 storage_id))
{
	int64		first = zl_storage_next_tid_block(rel, counted_before);

	if (first + n > (int64) MaxBlockNumber)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("zipper_lake table \"%s\" has no row identifiers left",
						RelationGetRelationName(rel)),
				 errdetail("A sub-group of " INT64_FORMAT " TID blocks would end past block %u.",
						   n, MaxBlockNumber),
				 errhint("VACUUM FULL writes the table into a new file, whose rows are numbered from the start.")));
	update_metapage(rel, SET_NEXT_TID_BLOCK, (uint64) (first + n));
	return first;
}

/* ---------- the writer lock ---------- */

/* distinguishes our advisory locks from user ones (which use 1 and 2) */
#define ZL_ADVISORY_LOCK_CLASS	0x5A4C

static void
writer_lock_tag(LOCKTAG *tag, uint64 storage_id)
{
	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, (uint32) (storage_id >> 32),
						 (uint32) storage_id, ZL_ADVISORY_LOCK_CLASS);
}

/*
 * Serialize the writers of a table (and reclaim, VACUUM's truncation) until
 * the end of the transaction; with nowait, false if another holds it.
 */
bool
zl_write_lock_table(uint64 storage_id, bool nowait)
{
	LOCKTAG		tag;

	writer_lock_tag(&tag, storage_id);
	return LockAcquire(&tag, ExclusiveLock, false, nowait) != LOCKACQUIRE_NOT_AVAIL;
}

/*
 * Does a writer wait for the table's writer lock we hold?  VACUUM's
 * optional work gives way to it, as heap's truncation does to a waiting
 * lock (lazy_truncate_heap).
 */
bool
zl_write_lock_has_waiters(uint64 storage_id)
{
	LOCKTAG		tag;

	writer_lock_tag(&tag, storage_id);
	return LockHasWaiters(&tag, ExclusiveLock, false);
}

/* does this transaction hold the table's writer lock? */
bool
zl_write_lock_held(uint64 storage_id)
{
	LOCKTAG		tag;

	writer_lock_tag(&tag, storage_id);
	return LockHeldByMe(&tag, ExclusiveLock);
}

/* before the end of the transaction: only for what wrote nothing */
void
zl_write_unlock_table(uint64 storage_id)
{
	LOCKTAG		tag;

	writer_lock_tag(&tag, storage_id);
	(void) LockRelease(&tag, ExclusiveLock, false);
}
