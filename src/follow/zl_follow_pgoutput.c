/*-------------------------------------------------------------------------
 *
 * zl_follow_pgoutput.c
 *	  A batch of the slot's messages, decoded and staged.
 *
 * The slot is read with pg_logical_slot_peek_binary_changes(slot,
 * upto_lsn, batch_changes, 'proto_version', '1', 'publication_names',
 * pub): PostgreSQL's own output plugin, pgoutput, writes each source
 * transaction as BEGIN (its commit LSN, commit time and xid), RELATION
 * messages (a relation's columns, which precede its first change in a
 * decoding session and follow every schema change), INSERT, UPDATE,
 * DELETE and TRUNCATE, and COMMIT; decoding stops after the transaction
 * in which batch_changes messages were reached, or at upto_lsn, so a
 * batch holds whole transactions.  Peeking consumes nothing: the slot
 * is advanced only after the batch is committed here (zl_follow_worker.c),
 * so a crash between the two shows the same transactions again, and
 * those whose commit LSN is not past the applied one are skipped: each
 * source transaction is applied exactly once.
 *
 * The followed table is known by its oid on the source (a rename there
 * changes nothing).  Of every transaction, its changes are staged
 * (zl_follow_stage.c) at its commit time with the change's own LSN as
 * seq: an insert or update as an upsert (an update that changes the key
 * also as a delete of the old key), a delete as a delete of the key (the
 * replica identity's columns, which follow() checked cover the key), a
 * TRUNCATE of the table as a truncate.  Messages are read as the
 * protocol (PostgreSQL's "Logical Replication Message Formats") lays
 * them out; anything that does not is an error naming the LSN.
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "follow/zl_follow_internal.h"

#include "port/pg_bswap.h"
#include "utils/builtins.h"
#include "utils/pg_lsn.h"

/* what a batch knows of the followed table */
typedef struct FollowedRelation
{
	bool		known;			/* a RELATION message of it was seen */
	uint32		relid;			/* its oid on the source */
	int			natts;
	char	  **names;
	bool	   *identity;
	char		replident;
} FollowedRelation;

typedef struct Batch
{
	const ZLFollower *f;
	ZLStage    *stage;
	ZLDecoded  *out;
	FollowedRelation rel;
	bool		in_transaction;
	bool		skip;			/* applied before: its commit LSN is not past the applied one */
	XLogRecPtr	final_lsn;
	TimestampTz commit_time;
	XLogRecPtr	lsn;			/* of the message being read */
	const char *data;
	int			len;
	int			pos;
	MemoryContext keep;			/* where the relation's columns live */
} Batch;

static void
malformed(Batch *b, const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_PROTOCOL_VIOLATION),
			 errmsg("malformed pgoutput message at %X/%X", LSN_FORMAT_ARGS(b->lsn)),
			 errdetail("%s (byte %d of %d).", what, b->pos, b->len),
			 errhint("The follower stops; nothing after the last transaction applied is lost.")));
}

static const char *
take(Batch *b, int n)
{
	const char *p = b->data + b->pos;

	if (n < 0 || b->len - b->pos < n)
		malformed(b, "the message ends early");
	b->pos += n;
	return p;
}

static uint8
get8(Batch *b)
{
	return (uint8) *take(b, 1);
}

static uint16
get16(Batch *b)
{
	uint16		v;

	memcpy(&v, take(b, 2), 2);
	return pg_ntoh16(v);
}

static uint32
get32(Batch *b)
{
	uint32		v;

	memcpy(&v, take(b, 4), 4);
	return pg_ntoh32(v);
}

static uint64
get64(Batch *b)
{
	uint64		v;

	memcpy(&v, take(b, 8), 8);
	return pg_ntoh64(v);
}

static char *
get_string(Batch *b)
{
	const char *start = b->data + b->pos;
	const char *end = memchr(start, '\0', b->len - b->pos);

	if (end == NULL)
		malformed(b, "a string is not terminated");
	b->pos += end - start + 1;
	return pstrdup(start);
}

/*
 * TupleData: the values of a tuple by the source's column index (NULL:
 * SQL NULL or left out), and which were left out as unchanged TOAST.
 */
static void
get_tuple(Batch *b, char ***values, bool **unchanged)
{
	int			natts = get16(b);

	if (natts != b->rel.natts)
		malformed(b, "a tuple has another number of columns than the relation");
	*values = palloc0(sizeof(char *) * Max(natts, 1));
	*unchanged = palloc0(sizeof(bool) * Max(natts, 1));
	for (int a = 0; a < natts; a++)
	{
		char		kind = get8(b);

		if (kind == 'n')
			continue;
		if (kind == 'u')
		{
			(*unchanged)[a] = true;
			continue;
		}
		if (kind != 't')
			malformed(b, "a column is neither null, unchanged nor text");
		{
			int			n = get32(b);
			const char *v = take(b, n);

			(*values)[a] = palloc(n + 1);
			memcpy((*values)[a], v, n);
			(*values)[a][n] = '\0';
		}
	}
}

static void
relation_message(Batch *b)
{
	uint32		relid = get32(b);
	char		replident;
	int			natts;
	MemoryContext old;

	(void) get_string(b);		/* schema */
	(void) get_string(b);		/* name: a rename on the source changes nothing */
	replident = get8(b);
	natts = get16(b);

	if (relid != b->f->source_relid)
		return;					/* another table of the publication */
	old = MemoryContextSwitchTo(b->keep);
	b->rel.known = true;
	b->rel.relid = relid;
	b->rel.natts = natts;
	b->rel.replident = replident;
	b->rel.names = palloc(sizeof(char *) * Max(natts, 1));
	b->rel.identity = palloc(sizeof(bool) * Max(natts, 1));
	MemoryContextSwitchTo(old);
	for (int a = 0; a < natts; a++)
	{
		uint8		flags = get8(b);

		b->rel.identity[a] = (flags & 1) != 0;
		b->rel.names[a] = MemoryContextStrdup(b->keep, get_string(b));
		(void) get32(b);		/* type */
		(void) get32(b);		/* typmod */
	}
	zl_stage_columns(b->stage, natts, b->rel.names,
					 psprintf("source table %s", b->f->source_table));
	for (int k = 0; k < zl_stage_key_count(b->stage); k++)
	{
		int			c = zl_stage_source_column(b->stage, k);

		if (replident != 'f' && !b->rel.identity[c])
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("replica identity of source table %s does not cover key column \"%s\"",
							b->f->source_table, b->rel.names[c]),
					 errdetail("A delete on the source would not say which key it deletes; the follower stops."),
					 errhint("On the source, make the key the primary key or ALTER TABLE ... REPLICA IDENTITY USING INDEX (or FULL); then call zipper_lake.resume().")));
	}
}

static bool
ours(Batch *b, uint32 relid)
{
	return b->rel.known && relid == b->rel.relid;
}

static void
stage(Batch *b, char op, char **values, bool *unchanged, char **held_by)
{
	zl_stage_change(b->stage, op, values, unchanged, held_by, b->commit_time, b->lsn);
	b->out->changes++;
}

static void
change_message(Batch *b, char kind)
{
	uint32		relid = get32(b);
	char	  **values;
	bool	   *unchanged;

	if (!ours(b, relid))
		return;
	if (!b->in_transaction)
		malformed(b, "a change outside a transaction");
	if (b->skip)
		return;
	if (kind == 'I')
	{
		if (get8(b) != 'N')
			malformed(b, "an insert without its new tuple");
		get_tuple(b, &values, &unchanged);
		stage(b, 'I', values, unchanged, NULL);
	}
	else if (kind == 'U')
	{
		char		part = get8(b);
		char	  **old = NULL;
		bool	   *old_unchanged;

		if (part == 'K' || part == 'O')
		{
			get_tuple(b, &old, &old_unchanged);
			part = get8(b);
		}
		if (part != 'N')
			malformed(b, "an update without its new tuple");
		get_tuple(b, &values, &unchanged);
		/* a new key: the old one goes; a value left out is the old row's */
		if (old != NULL && !zl_stage_same_key(b->stage, old, values))
			stage(b, 'D', old, NULL, NULL);
		else
			old = NULL;
		stage(b, 'U', values, unchanged, old);
	}
	else
	{
		char		part = get8(b);

		if (part != 'K' && part != 'O')
			malformed(b, "a delete without its key");
		get_tuple(b, &values, &unchanged);
		stage(b, 'D', values, NULL, NULL);
	}
}

static void
truncate_message(Batch *b)
{
	uint32		n = get32(b);

	(void) get8(b);				/* options: CASCADE, RESTART IDENTITY */
	for (uint32 i = 0; i < n; i++)
		if (ours(b, get32(b)) && b->in_transaction && !b->skip)
			stage(b, 'T', NULL, NULL, NULL);
}

/* one message of the slot: its LSN and its bytes as bytea's hex text */
static void
message(void *arg, char **row)
{
	Batch	   *b = arg;
	bytea	   *data = DatumGetByteaPP(DirectFunctionCall1(byteain, CStringGetDatum(row[1])));
	char		kind;

	b->lsn = DatumGetLSN(DirectFunctionCall1(pg_lsn_in, CStringGetDatum(row[0])));
	b->data = VARDATA_ANY(data);
	b->len = VARSIZE_ANY_EXHDR(data);
	b->pos = 0;
	b->out->messages++;
	kind = get8(b);
	switch (kind)
	{
		case 'B':
			b->final_lsn = get64(b);
			b->commit_time = (TimestampTz) get64(b);
			(void) get32(b);	/* xid */
			b->in_transaction = true;
			b->skip = b->final_lsn <= b->f->applied_lsn;
			break;
		case 'C':
			(void) get8(b);		/* flags */
			{
				XLogRecPtr	commit_lsn = get64(b);
				XLogRecPtr	end_lsn = get64(b);

				if (!b->in_transaction || commit_lsn != b->final_lsn)
					malformed(b, "a commit that ends no transaction begun");
				b->in_transaction = false;
				b->out->read_end_lsn = end_lsn;
				if (b->skip)
					break;
				b->out->applied_lsn = commit_lsn;
				b->out->end_lsn = end_lsn;
				b->out->commit_time = b->commit_time;
				b->out->transactions++;
			}
			break;
		case 'R':
			relation_message(b);
			break;
		case 'I':
		case 'U':
		case 'D':
			change_message(b, kind);
			break;
		case 'T':
			truncate_message(b);
			break;
		case 'Y':				/* a type's name */
		case 'O':				/* the origin of a transaction */
		case 'M':				/* a logical decoding message */
			break;
		default:
			malformed(b, psprintf("unknown message type \"%c\"", kind));
	}
}

/*
 * Decode and stage the slot's transactions up to upto (a WAL position
 * the source has flushed), at most about f->batch_changes messages, into
 * *out (zeroed first; out->messages < batch_changes: everything before
 * upto was read).
 */
void
zl_pgoutput_batch(ZLSource *source, const ZLFollower *f, ZLStage *stage_, XLogRecPtr upto,
				  ZLDecoded *out)
{
	Batch		b = {0};
	char	   *upto_text = DatumGetCString(DirectFunctionCall1(pg_lsn_out, LSNGetDatum(upto)));
	char	   *limit = psprintf("%d", f->batch_changes);
	const char *params[4] = {f->slot, upto_text, limit, quote_identifier(f->publication)};

	memset(out, 0, sizeof(*out));
	b.f = f;
	b.stage = stage_;
	b.out = out;
	b.keep = CurrentMemoryContext;
	(void) zl_source_each_row(source,
							  "SELECT lsn::text, data FROM pg_catalog.pg_logical_slot_peek_binary_changes("
							  "$1::name, $2::pg_lsn, $3::int, 'proto_version', '1', 'publication_names', $4)",
							  4, params, 2, message, &b);
	if (b.in_transaction)
		ereport(ERROR,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("the slot's batch ended inside a transaction at %X/%X", LSN_FORMAT_ARGS(b.lsn)),
				 errhint("The follower retries the batch.")));
}
