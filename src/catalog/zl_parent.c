/*-------------------------------------------------------------------------
 *
 * zl_parent.c
 *	  Zipper parents: hash-partitioned tables whose leaves are zipper tables.
 *
 * A table PARTITION BY HASH of key columns, whose partitions are zipper
 * tables, is registered as a whole (README "Scaling out"): the parent has
 * a registration row of its own, the options every leaf gets, and each
 * leaf one with the same options.  Every version of a key lives in the
 * leaf its key hashes to, and keys are independent, so each leaf is a
 * zipper table of its own and the functions of the extension called on
 * the parent call them leaf by leaf.
 *
 * This file opens and checks such a parent (zl_parent_open) and routes a
 * key to its leaf (zl_parent_leaf_of) as PostgreSQL's tuple routing does:
 * the partition key's hash support functions, combined, modulo the
 * greatest modulus of the bounds, name the partition.  Nothing relies on
 * the routing being right for safety: every row written to a leaf is
 * checked against the leaf's partition constraint.
 *
 * Only one level: a partition that is itself partitioned, or a leaf that
 * is not a zipper table, is refused when the parent is opened (and when
 * it is created or attached: src/hooks/zl_ddl.c).
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "catalog/zl_catalog.h"
#include "remote/zl_remote.h"

#include "access/table.h"
#include "catalog/partition.h"
#include "catalog/pg_class.h"
#include "partitioning/partbounds.h"
#include "partitioning/partdesc.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/partcache.h"
#include "utils/rel.h"

struct ZLParent
{
	Relation	rel;			/* the parent, locked */
	int			nleaves;
	Oid		   *leaves;			/* in the order of the partition descriptor */
	bool	   *shards;			/* is the leaf a shard (a foreign table)? */
	int			partnatts;
	FmgrInfo   *hash_functions; /* the partition key's hash support */
	Oid		   *collations;
	char	  **key_names;		/* the partition key's columns */
	int			modulus;		/* greatest modulus of the bounds */
	int		   *leaf_of_remainder;	/* remainder -> leaf, -1: none */
	AttrNumber *attnums;		/* key columns in the routed rows' descriptor */
};

/* is relid a partitioned table (which may be a zipper parent)? */
bool
zl_is_partitioned_table(Oid relid)
{
	return get_rel_relkind(relid) == RELKIND_PARTITIONED_TABLE;
}

static void
refuse_parent(Relation rel, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("table %s cannot be a zipper parent", zl_qualified_name(rel)),
			 errdetail("%s", detail),
			 errhint("Partition the table BY HASH of key columns, one level, with zipper_lake partitions (CREATE TABLE ... PARTITION OF ... USING zipper_lake), or use zipper_lake.create_table(..., partitions => n).")));
}

/*
 * Check that a partitioned table can be a zipper parent: BY HASH of plain
 * columns, one level, every partition a zipper table.  key_names (NULL:
 * not checked) are the key columns the partition key must be among.
 */
void
zl_parent_check(Relation rel, char **key_names, int nkeys)
{
	PartitionKey key = RelationGetPartitionKey(rel);
	PartitionDesc pd = RelationGetPartitionDesc(rel, true);

	if (key->strategy != PARTITION_STRATEGY_HASH)
		refuse_parent(rel, "It is not partitioned BY HASH.");
	for (int i = 0; i < key->partnatts; i++)
	{
		const char *column;
		bool		is_key = (key_names == NULL);

		if (key->partattrs[i] == 0)
			refuse_parent(rel, "Its partition key holds an expression.");
		column = get_attname(RelationGetRelid(rel), key->partattrs[i], false);
		for (int k = 0; k < nkeys && !is_key; k++)
			is_key = strcmp(key_names[k], column) == 0;
		if (!is_key)
			refuse_parent(rel, psprintf("Its partition key column \"%s\" is not a key column: the versions of a key could land in different partitions.",
										column));
	}
	for (int i = 0; i < pd->nparts; i++)
	{
		Relation	leaf;

		if (!pd->is_leaf[i])
			refuse_parent(rel, psprintf("Its partition %s is partitioned itself.",
										get_rel_name(pd->oids[i])));
		if (zl_remote_is_shard(pd->oids[i]))
			continue;			/* a shard, checked when attached */
		leaf = table_open(pd->oids[i], AccessShareLock);
		if (!zl_is_zipper_relation(leaf))
			refuse_parent(rel, psprintf("Its partition %s does not use the zipper_lake access method.",
										zl_qualified_name(leaf)));
		table_close(leaf, AccessShareLock);
	}
}

/*
 * Open a registered zipper parent with lockmode (its leaves are opened by
 * the callers, each as the zipper table it is) and check it.
 */
ZLParent *
zl_parent_open(Oid relid, LOCKMODE lockmode)
{
	ZLParent   *p = palloc0(sizeof(ZLParent));
	PartitionKey key;
	PartitionDesc pd;
	PartitionBoundInfo bounds;
	ZLTableOptions opts;
	char	  **key_names;

	p->rel = table_open(relid, lockmode);
	zl_load_registration(p->rel, &opts, true, NULL,
						 "Register the parent with zipper_lake.register(); it registers every partition.");
	key_names = palloc(sizeof(char *) * opts.nkeys);
	for (int k = 0; k < opts.nkeys; k++)
		key_names[k] = get_attname(relid, opts.key_attnums[k], false);
	zl_parent_check(p->rel, key_names, opts.nkeys);

	key = RelationGetPartitionKey(p->rel);
	pd = RelationGetPartitionDesc(p->rel, true);
	p->nleaves = pd->nparts;
	p->leaves = palloc(sizeof(Oid) * Max(1, pd->nparts));
	memcpy(p->leaves, pd->oids, sizeof(Oid) * pd->nparts);
	p->shards = palloc(sizeof(bool) * Max(1, pd->nparts));
	for (int i = 0; i < pd->nparts; i++)
		p->shards[i] = zl_remote_is_shard(pd->oids[i]);
	p->partnatts = key->partnatts;
	p->hash_functions = palloc(sizeof(FmgrInfo) * key->partnatts);
	p->collations = palloc(sizeof(Oid) * key->partnatts);
	p->key_names = palloc(sizeof(char *) * key->partnatts);
	p->attnums = palloc0(sizeof(AttrNumber) * key->partnatts);
	for (int i = 0; i < key->partnatts; i++)
	{
		fmgr_info_copy(&p->hash_functions[i], &key->partsupfunc[i], CurrentMemoryContext);
		p->collations[i] = key->partcollation[i];
		p->key_names[i] = get_attname(relid, key->partattrs[i], false);
	}
	bounds = pd->boundinfo;
	p->modulus = bounds != NULL ? bounds->nindexes : 0;
	p->leaf_of_remainder = palloc(sizeof(int) * Max(1, p->modulus));
	for (int r = 0; r < p->modulus; r++)
		p->leaf_of_remainder[r] = bounds->indexes[r];
	return p;
}

void
zl_parent_close(ZLParent *p)
{
	table_close(p->rel, NoLock);
}

Relation
zl_parent_relation(ZLParent *p)
{
	return p->rel;
}

int
zl_parent_nleaves(ZLParent *p)
{
	return p->nleaves;
}

Oid
zl_parent_leaf(ZLParent *p, int i)
{
	return p->leaves[i];
}

/* is the i-th leaf a shard: a postgres_fdw foreign table (src/remote)? */
bool
zl_parent_leaf_is_shard(ZLParent *p, int i)
{
	return p->shards[i];
}

/* the partition key's columns, by name; returns how many */
int
zl_parent_key_columns(ZLParent *p, char ***names)
{
	*names = p->key_names;
	return p->partnatts;
}

/* the rows zl_parent_leaf_of routes are of this descriptor (a leaf's) */
void
zl_parent_route_rows_of(ZLParent *p, TupleDesc desc)
{
	for (int i = 0; i < p->partnatts; i++)
	{
		p->attnums[i] = InvalidAttrNumber;
		for (int a = 0; a < desc->natts; a++)
		{
			Form_pg_attribute att = TupleDescAttr(desc, a);

			if (!att->attisdropped && strcmp(NameStr(att->attname), p->key_names[i]) == 0)
				p->attnums[i] = att->attnum;
		}
		if (p->attnums[i] == InvalidAttrNumber)
			elog(ERROR, "partition key column \"%s\" not found", p->key_names[i]);
	}
}

/*
 * The leaf (index into the leaves) a row of the descriptor given to
 * zl_parent_route_rows_of belongs to, or -1 when no partition takes it.
 */
int
zl_parent_leaf_of(ZLParent *p, const Datum *values, const bool *isnull)
{
	Datum		key_values[PARTITION_MAX_KEYS];
	bool		key_nulls[PARTITION_MAX_KEYS];
	uint64		hash;

	if (p->modulus == 0)
		return -1;
	for (int i = 0; i < p->partnatts; i++)
	{
		key_values[i] = values[p->attnums[i] - 1];
		key_nulls[i] = isnull[p->attnums[i] - 1];
	}
	hash = compute_partition_hash_value(p->partnatts, p->hash_functions, p->collations,
										key_values, key_nulls);
	return p->leaf_of_remainder[hash % (uint64) p->modulus];
}

/* the partition key's columns, for messages: "(a, b)" */
char *
zl_parent_key_text(ZLParent *p)
{
	StringInfoData buf;

	initStringInfo(&buf);
	for (int i = 0; i < p->partnatts; i++)
		appendStringInfo(&buf, "%s%s", i > 0 ? ", " : "(", quote_identifier(p->key_names[i]));
	appendStringInfoChar(&buf, ')');
	return buf.data;
}

/*
 * Register a leaf of a registered parent as the parent is registered (a
 * copy of its registration row, which places rows the leaf already holds),
 * or, when the leaf is registered already, check that it is registered
 * the same way.  Its writers wait for the registration, as register()'s.
 */
static void
refuse_registered_otherwise(Relation parent, Relation leaf)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("partition %s is registered otherwise than its parent %s",
					zl_qualified_name(leaf), zl_qualified_name(parent)),
			 errdetail("Its key, period columns, options or history cut differ from the parent's registration."),
			 errhint("Every partition of a zipper parent is registered with the parent's options: attach a table registered the same way, or an unregistered one.")));
}

/*
 * A shard (a postgres_fdw foreign table) joins a zipper parent when the
 * zipper table it stands for is registered on its server exactly as the
 * parent is here: the same columns, options and history cut.
 */
/*
 * The registration of a shard's zipper table on its server, as
 * zl_meta_registration_text() gives a local one; NULL if none.
 */
char *
zl_shard_registration_text(Oid shard)
{
	const char *params[1] = {zl_remote_table_name(shard)};
	ZLRemoteRows *rows = zl_remote_query(zl_remote_shard(shard),
										 "SELECT (pg_catalog.to_jsonb(r) OPERATOR(pg_catalog.-) 'tbl'::pg_catalog.text)::pg_catalog.text AS registration"
										 " FROM zipper_lake.registration r WHERE tbl = $1::pg_catalog.regclass",
										 1, params);

	return rows->nrows == 0 ? NULL : pstrdup(zl_remote_value(rows, 0, "registration"));
}

static void
check_shard_registration(Relation parent, Relation shard)
{
	char	   *registration = zl_shard_registration_text(RelationGetRelid(shard));

	if (registration == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("shard %s of zipper parent %s is not a registered zipper table",
						zl_qualified_name(shard), zl_qualified_name(parent)),
				 errdetail("Table %s on its server is not registered with zipper_lake.",
						   zl_remote_table_name(RelationGetRelid(shard))),
				 errhint("Create it there with zipper_lake.create_table() or register() and the parent's options.")));
	if (strcmp(registration, zl_meta_registration_text(RelationGetRelid(parent))) != 0)
		refuse_registered_otherwise(parent, shard);
}

/* the table-wide part of a leaf's record: 3 texts (newest, instants, seqs) or NULL */
static const char **
leaf_record_head(Oid leaf, bool *empty)
{
	char	   *name = zl_remote_where_name(leaf);
	const char *params[1] = {name};
	ZLRemoteRows *rows = zl_remote_query_where(leaf, false,
											   psprintf("SELECT NOT EXISTS (SELECT FROM %s) AS empty, h.newest,"
														" h.table_instants, h.table_seqs FROM (SELECT) x"
														" LEFT JOIN zipper_lake._record_rows($1::pg_catalog.regclass) h"
														" ON h.piece IS NULL", name),
											   1, params);
	const char **head = palloc(sizeof(char *) * 3);

	*empty = strcmp(zl_remote_value(rows, 0, "empty"), "t") == 0;
	head[0] = zl_remote_value(rows, 0, "newest");
	head[1] = zl_remote_value(rows, 0, "table_instants");
	head[2] = zl_remote_value(rows, 0, "table_seqs");
	return head[0] == NULL ? NULL : head;
}

/*
 * A new, empty leaf (or shard) of a zipper parent takes the table-wide
 * part of a sibling's record: the newest change (the late horizon) and
 * the instants of every key (snapshots with deletes, truncates), which a
 * key first seen in the new leaf is subject to, as in one table.
 */
static void
inherit_record_head(Relation parent, Oid leaf)
{
	PartitionDesc pd = RelationGetPartitionDesc(parent, true);
	bool		empty;
	const char **head;

	if (leaf_record_head(leaf, &empty) != NULL || !empty)
		return;
	for (int i = 0; i < pd->nparts; i++)
	{
		bool		sibling_empty;

		if (pd->oids[i] == leaf)
			continue;
		head = leaf_record_head(pd->oids[i], &sibling_empty);
		if (head != NULL)
		{
			const char *params[4] = {zl_remote_where_name(leaf), head[0], head[1], head[2]};

			(void) zl_remote_query_where(leaf, true,
										 "SELECT zipper_lake._record_put($1::pg_catalog.regclass, NULL, NULL, NULL,"
										 " NULL, $2::pg_catalog.timestamptz, NULL, NULL,"
										 " $3::pg_catalog.timestamptz[], $4::pg_catalog.int8[])",
										 4, params);
			return;
		}
	}
}

void
zl_parent_register_leaf(Relation parent, Relation leaf)
{
	ZLTableOptions existing;

	if (zl_remote_is_shard(RelationGetRelid(leaf)))
	{
		check_shard_registration(parent, leaf);
		inherit_record_head(parent, RelationGetRelid(leaf));
		return;
	}

	if (!zl_is_zipper_relation(leaf))
		refuse_parent(parent, psprintf("Its partition %s does not use the zipper_lake access method.",
									   zl_qualified_name(leaf)));
	(void) zl_write_lock_table(zl_storage_id(leaf), false);
	if (zl_meta_load_options(leaf, &existing, true))
	{
		if (!zl_meta_same_registration(RelationGetRelid(parent), RelationGetRelid(leaf)))
			refuse_registered_otherwise(parent, leaf);
		inherit_record_head(parent, RelationGetRelid(leaf));
		return;
	}
	zl_meta_copy_registration(RelationGetRelid(parent), RelationGetRelid(leaf));
	CacheInvalidateRelcache(leaf);
	inherit_record_head(parent, RelationGetRelid(leaf));
}

/* is zl_parent_call_per_leaf calling a function on the leaves? */
static bool calling_leaves = false;

bool
zl_parent_calling(void)
{
	return calling_leaves;
}

/*
 * A function of the extension called on a zipper parent (its first
 * argument) is called on each leaf in turn, with the other arguments as
 * given, after checking the caller owns the parent; returns the sum of
 * the leaves' bigint results (the lifecycle functions: README "Scaling
 * out").
 */
int64
zl_parent_call_per_leaf(FunctionCallInfo fcinfo, PGFunction fn)
{
	ZLParent   *p;
	volatile int64 sum = 0;
	LOCAL_FCINFO(leaf_call, FUNC_MAX_ARGS);

	if (!pg_class_ownercheck(PG_GETARG_OID(0), GetUserId()))
		aclcheck_error(ACLCHECK_NOT_OWNER, OBJECT_TABLE, get_rel_name(PG_GETARG_OID(0)));
	p = zl_parent_open(PG_GETARG_OID(0), RowExclusiveLock);
	calling_leaves = true;
	PG_TRY();
	{
		for (int i = 0; i < p->nleaves; i++)
		{
			Datum		result;

			InitFunctionCallInfoData(*leaf_call, fcinfo->flinfo, fcinfo->nargs,
									 fcinfo->fncollation, NULL, NULL);
			memcpy(leaf_call->args, fcinfo->args, sizeof(NullableDatum) * fcinfo->nargs);
			leaf_call->args[0].value = ObjectIdGetDatum(p->leaves[i]);
			if (p->shards[i])
				result = zl_remote_call(p->leaves[i], leaf_call, &leaf_call->isnull);
			else
				result = fn(leaf_call);
			if (!leaf_call->isnull)
				sum += DatumGetInt64(result);
		}
	}
	PG_FINALLY();
	{
		calling_leaves = false;
	}
	PG_END_TRY();
	zl_parent_close(p);
	return sum;
}

/*
 * Options and the history cut hold for a whole zipper parent: refuse to
 * set one (what, a function's name) on a single leaf of a registered
 * parent.
 */
void
zl_refuse_leaf_of_parent(Relation rel, const char *what)
{
	Oid			parent_relid;
	Relation	parent;
	ZLTableOptions opts;
	bool		registered;

	if (!rel->rd_rel->relispartition)
		return;
	parent_relid = get_partition_parent(RelationGetRelid(rel), true);
	parent = table_open(parent_relid, AccessShareLock);
	registered = zl_meta_load_options(parent, &opts, false);
	if (registered)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table %s is a partition of zipper parent %s", zl_qualified_name(rel),
						zl_qualified_name(parent)),
				 errdetail("What %s() sets holds for the whole parent (README \"Scaling out\").", what),
				 errhint("Call zipper_lake.%s() on %s.", what, zl_qualified_name(parent))));
	table_close(parent, AccessShareLock);
}
