/*-------------------------------------------------------------------------
 *
 * zl_remote_conn.c
 *	  libpq connections to shards and the foreign tables naming them.
 *
 * A shard of a zipper parent is a postgres_fdw foreign table over a
 * zipper table on another server (README "Scaling out").  Reads go
 * through postgres_fdw; the extension's own calls (the apply functions,
 * the lifecycle functions, settling prepared transactions) go through
 * libpq connections made here from the same foreign server and user
 * mapping, as postgres_fdw makes its own: the server's and the mapping's
 * options that are libpq's, and, for a role that is not a superuser, a
 * password that the shard really asked for (else a role could borrow the
 * operating-system identity of this server).  PostgreSQL 15's
 * postgres_fdw refuses PREPARE TRANSACTION, which the calls need
 * (zl_remote_xact.c); hence connections of our own.
 *
 * Every wait for a shard sleeps on the latch and the socket: a cancel
 * of the caller's statement cancels the shard's, and the error that
 * follows is the caller's cancel; waits that must not throw (finishing
 * prepared transactions after commit) have a timeout instead.  Errors of
 * a shard are raised here with their SQLSTATE, message, detail and hint,
 * and the shard named in the context.
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "remote/zl_remote_internal.h"

#include "access/xlog.h"
#include "catalog/pg_class.h"
#include "catalog/pg_user_mapping.h"
#include "commands/defrem.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

/* is relid a postgres_fdw foreign table (a shard of a zipper parent)? */
bool
zl_remote_is_shard(Oid relid)
{
	ForeignTable *table;
	ForeignServer *server;

	if (get_rel_relkind(relid) != RELKIND_FOREIGN_TABLE)
		return false;
	table = GetForeignTable(relid);
	server = GetForeignServer(table->serverid);
	return strcmp(GetForeignDataWrapper(server->fdwid)->fdwname, "postgres_fdw") == 0;
}

/* a foreign table's option (schema_name, table_name), or NULL */
static char *
table_option(Oid relid, const char *name)
{
	ListCell   *lc;

	foreach(lc, GetForeignTable(relid)->options)
	{
		DefElem    *option = lfirst_node(DefElem, lc);

		if (strcmp(option->defname, name) == 0)
			return defGetString(option);
	}
	return NULL;
}

/* the schema of the zipper table a shard's foreign table stands for, quoted */
char *
zl_remote_schema_name(Oid relid)
{
	char	   *schema = table_option(relid, "schema_name");

	return (char *) quote_identifier(schema ? schema : get_namespace_name(get_rel_namespace(relid)));
}

/* the zipper table a shard's foreign table stands for, schema-qualified and quoted */
char *
zl_remote_table_name(Oid relid)
{
	char	   *table = table_option(relid, "table_name");

	return psprintf("%s.%s", zl_remote_schema_name(relid),
					quote_identifier(table ? table : get_rel_name(relid)));
}

/*
 * The zipper table relid stands for, qualified and quoted: a shard's table
 * on its server, or relid itself here (zl_remote_query_where's terms).
 */
char *
zl_remote_where_name(Oid relid)
{
	if (zl_remote_is_shard(relid))
		return zl_remote_table_name(relid);
	return quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
									  get_rel_name(relid));
}

static bool
is_libpq_option(const PQconninfoOption *defaults, const char *keyword)
{
	for (const PQconninfoOption *o = defaults; o->keyword != NULL; o++)
		if (strcmp(o->keyword, keyword) == 0)
			return strcmp(keyword, "replication") != 0 && strcmp(keyword, "client_encoding") != 0;
	return false;
}

/*
 * Where a connection leads, for messages: a shard's foreign server, or a
 * follower's source (its connection string, the password hidden).
 */
typedef struct ConnTarget
{
	const char *what;			/* "shard server \"s\"", "source \"host=...\"" */
	const char *nothing_done;	/* the hint when it cannot be reached */
	const char *password_hint;
	const char *password_missing;	/* "Non-superusers must give a password in ..." */
} ConnTarget;

static void
refuse_without_password(const ConnTarget *target, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_S_R_E_PROHIBITED_SQL_STATEMENT_ATTEMPTED),
			 errmsg("password is required to reach %s", target->what),
			 errdetail("%s", detail),
			 errhint("%s", target->password_hint)));
}

/*
 * Open a connection with libpq's keywords and values (NULL-terminated,
 * room for two more): search_path, DateStyle, IntervalStyle,
 * extra_float_digits and TimeZone (UTC) fixed, so that every value
 * travels as text both ways exactly and compares as text.  A role that is
 * not a superuser must have given a password the server really asked for.
 */
static PGconn *
open_connection(const char **keywords, const char **values, int n, Oid userid,
				bool has_password, const ConnTarget *target)
{
	PGconn	   *conn;
	PGresult   *res;

	keywords[n] = "fallback_application_name";
	values[n++] = "zipper_lake";
	keywords[n] = "client_encoding";
	values[n++] = GetDatabaseEncodingName();
	keywords[n] = values[n] = NULL;
	if (!superuser_arg(userid) && !has_password)
		refuse_without_password(target, target->password_missing);
	conn = PQconnectdbParams(keywords, values, false);
	if (conn == NULL || PQstatus(conn) != CONNECTION_OK)
	{
		char	   *message = conn ? pchomp(PQerrorMessage(conn)) : "out of memory";

		PQfinish(conn);
		ereport(ERROR,
				(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
				 errmsg("could not connect to %s", target->what),
				 errdetail_internal("%s", message),
				 errhint("%s", target->nothing_done)));
	}
	if (!superuser_arg(userid) && !PQconnectionUsedPassword(conn))
	{
		PQfinish(conn);
		refuse_without_password(target, "The server did not ask for the password, so the connection would not be the role's own.");
	}
	res = zl_remote_exec(conn, "SET search_path = pg_catalog; SET datestyle = ISO;"
						 " SET intervalstyle = postgres; SET extra_float_digits = 3; SET timezone = 'UTC';"
						 " SET bytea_output = hex", 0, NULL, true, 0);
	if (!zl_remote_ok(res))
	{
		char	   *message = pchomp(res ? PQresultErrorMessage(res) : PQerrorMessage(conn));

		PQclear(res);
		PQfinish(conn);
		ereport(ERROR,
				(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
				 errmsg("could not set up the connection to %s", target->what),
				 errdetail_internal("%s", message),
				 errhint("%s", target->nothing_done)));
	}
	PQclear(res);
	return conn;
}

/*
 * Connect to the server of a user mapping with its options and the
 * server's that are libpq's (open_connection).
 */
PGconn *
zl_remote_connect(UserMapping *mapping)
{
	ForeignServer *server = GetForeignServer(mapping->serverid);
	PQconninfoOption *defaults = PQconndefaults();
	List	   *options = list_concat(list_copy(server->options), mapping->options);
	const char **keywords = palloc(sizeof(char *) * (list_length(options) + 3));
	const char **values = palloc(sizeof(char *) * (list_length(options) + 3));
	bool		has_password = false;
	int			n = 0;
	ListCell   *lc;
	ConnTarget	target;

	foreach(lc, options)
	{
		DefElem    *option = lfirst_node(DefElem, lc);

		if (!is_libpq_option(defaults, option->defname))
			continue;
		keywords[n] = option->defname;
		values[n++] = defGetString(option);
		has_password |= strcmp(option->defname, "password") == 0 &&
			list_member_ptr(mapping->options, option);
	}
	PQconninfoFree(defaults);
	target.what = psprintf("shard server \"%s\"", server->servername);
	target.nothing_done = "Nothing was applied; retry when the shard is up (README \"Scaling out\").";
	target.password_hint = "Give the user mapping a password the shard asks for, as for postgres_fdw.";
	target.password_missing = "Non-superusers must give a password in the user mapping.";
	return open_connection(keywords, values, n, mapping->userid, has_password, &target);
}

/*
 * A connection string with its password hidden (NULL if it does not
 * parse), for messages and views.
 */
char *
zl_remote_connection_shown(const char *conninfo)
{
	PQconninfoOption *options = PQconninfoParse(conninfo, NULL);
	StringInfoData shown;

	if (options == NULL)
		return NULL;
	initStringInfo(&shown);
	for (PQconninfoOption *o = options; o->keyword != NULL; o++)
	{
		if (o->val == NULL)
			continue;
		appendStringInfo(&shown, "%s%s=", shown.len > 0 ? " " : "", o->keyword);
		/* libpq marks secrets ("*"): password, sslpassword */
		if (o->dispchar != NULL && o->dispchar[0] == '*')
			appendStringInfoString(&shown, "********");
		else
		{
			appendStringInfoChar(&shown, '\'');
			for (const char *c = o->val; *c; c++)
			{
				if (*c == '\'' || *c == '\\')
					appendStringInfoChar(&shown, '\\');
				appendStringInfoChar(&shown, *c);
			}
			appendStringInfoChar(&shown, '\'');
		}
	}
	PQconninfoFree(options);
	return shown.data;
}

/* unless the connection string says otherwise: give up on a dead peer in about a minute */
static const char *const network_defaults[][2] = {
	{"connect_timeout", "30"},
	{"keepalives_idle", "30"},
	{"keepalives_interval", "10"},
	{"keepalives_count", "3"},
};

/*
 * Connect with a libpq connection string as role userid (the rules of
 * open_connection); what names the source in messages, never with its
 * password.  A string that does not parse is refused, unquoted.
 */
PGconn *
zl_remote_connect_string(const char *conninfo, Oid userid, const char *nothing_done)
{
	char	   *error = NULL;
	PQconninfoOption *options = PQconninfoParse(conninfo, &error);
	PQconninfoOption *defaults = PQconndefaults();
	const char **keywords;
	const char **values;
	bool		has_password = false;
	int			n = 0;
	int			count = 0;
	ConnTarget	target;
	PGconn	   *conn;

	if (options == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid connection string"),
				 errdetail_internal("%s", error ? pchomp(error) : "out of memory"),
				 errhint("Give a libpq connection string such as 'host=core dbname=bank user=zl password=...'.")));
	for (PQconninfoOption *o = options; o->keyword != NULL; o++)
		count++;
	keywords = palloc(sizeof(char *) * (count + 3 + lengthof(network_defaults)));
	values = palloc(sizeof(char *) * (count + 3 + lengthof(network_defaults)));
	for (PQconninfoOption *o = options; o->keyword != NULL; o++)
	{
		if (o->val == NULL || !is_libpq_option(defaults, o->keyword))
			continue;
		keywords[n] = o->keyword;
		values[n++] = o->val;
		has_password |= strcmp(o->keyword, "password") == 0 && o->val[0] != '\0';
	}
	/* a source that went away must not hold the follower for hours */
	for (int i = 0; i < lengthof(network_defaults); i++)
	{
		bool		given = false;

		for (int k = 0; k < n; k++)
			given |= strcmp(keywords[k], network_defaults[i][0]) == 0;
		if (!given)
		{
			keywords[n] = network_defaults[i][0];
			values[n++] = network_defaults[i][1];
		}
	}
	PQconninfoFree(defaults);
	target.what = psprintf("source \"%s\"", zl_remote_connection_shown(conninfo));
	target.nothing_done = nothing_done;
	target.password_hint = "Give the connection string a password the source asks for, as for dblink and postgres_fdw.";
	target.password_missing = "Non-superusers must give a password in the connection string.";
	conn = open_connection(keywords, values, n, userid, has_password, &target);
	PQconninfoFree(options);
	return conn;
}

/*
 * Values sent to a shard as text are written as its connection reads them
 * (zl_remote_connect): zl_remote_fix_output() sets DateStyle ISO,
 * IntervalStyle postgres and extra_float_digits 3 here until
 * zl_remote_restore_output(its result); the caller's own settings (a
 * DateStyle of DMY, say) would otherwise change what a date means there.
 */
int
zl_remote_fix_output(void)
{
	int			nest = NewGUCNestLevel();

	(void) set_config_option("DateStyle", "ISO", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE,
							 true, 0, false);
	(void) set_config_option("IntervalStyle", "postgres", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	(void) set_config_option("extra_float_digits", "3", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	return nest;
}

void
zl_remote_restore_output(int nest)
{
	AtEOXact_GUC(true, nest);
}

/* the deadline's remaining milliseconds, at least 0; -1: no deadline */
static long
remaining_ms(TimestampTz deadline)
{
	long		secs;
	int			usecs;

	if (deadline == 0)
		return -1;
	TimestampDifference(GetCurrentTimestamp(), deadline, &secs, &usecs);
	return secs * 1000 + usecs / 1000;
}

static void
cancel_remote(PGconn *conn)
{
	PGcancel   *cancel = PQgetCancel(conn);
	char		message[256];

	if (cancel != NULL)
	{
		(void) PQcancel(cancel, message, sizeof(message));
		PQfreeCancel(cancel);
	}
}

/*
 * Wait for the results of what was sent: the first error, else the last
 * result, or a COPY IN result to go on with.  NULL when the connection
 * broke or the timeout (ms, 0: none) passed.  An interruptible wait
 * cancels the shard's statement on an interrupt and then serves the
 * interrupt, once the shard has answered.
 */
PGresult *
zl_remote_wait(PGconn *conn, bool interruptible, int timeout_ms)
{
	PGresult   *kept = NULL;
	PGresult   *res;
	bool		canceled = false;
	TimestampTz deadline = timeout_ms > 0 ?
		TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeout_ms) : 0;

	for (;;)
	{
		while (PQisBusy(conn))
		{
			long		wait = remaining_ms(deadline);
			int			rc;

			if (wait == 0)
			{
				PQclear(kept);
				return NULL;
			}
			rc = WaitLatchOrSocket(MyLatch,
								   WL_LATCH_SET | WL_SOCKET_READABLE | WL_EXIT_ON_PM_DEATH |
								   (wait > 0 ? WL_TIMEOUT : 0),
								   PQsocket(conn), wait, PG_WAIT_EXTENSION);
			if (rc & WL_LATCH_SET)
			{
				ResetLatch(MyLatch);
				if (interruptible && InterruptPending && !canceled)
				{
					cancel_remote(conn);
					canceled = true;
				}
			}
			if ((rc & WL_SOCKET_READABLE) && !PQconsumeInput(conn))
			{
				PQclear(kept);
				return NULL;
			}
		}
		res = PQgetResult(conn);
		if (res == NULL)
			break;
		if (PQresultStatus(res) == PGRES_COPY_IN)
		{
			PQclear(kept);
			return res;
		}
		if (kept != NULL && !zl_remote_ok(kept))
			PQclear(res);		/* the first error is the one to report */
		else
		{
			PQclear(kept);
			kept = res;
		}
	}
	if (canceled)
		CHECK_FOR_INTERRUPTS();
	return kept;
}

/* send a query (with text parameters) and wait for its results (zl_remote_wait) */
PGresult *
zl_remote_exec(PGconn *conn, const char *sql, int nparams, const char *const *params,
			   bool interruptible, int timeout_ms)
{
	if (!(nparams > 0 ? PQsendQueryParams(conn, sql, nparams, NULL, params, NULL, NULL, 0) :
		  PQsendQuery(conn, sql)))
		return NULL;
	return zl_remote_wait(conn, interruptible, timeout_ms);
}

bool
zl_remote_ok(PGresult *res)
{
	ExecStatusType status = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;

	return status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK || status == PGRES_COPY_IN;
}

static char *
error_field(PGresult *res, int field)
{
	char	   *value = res ? PQresultErrorField(res, field) : NULL;

	return value ? pstrdup(value) : NULL;
}

/*
 * Raise a remote error (res may be NULL: the connection's), clearing res;
 * where names the server in the context ("source \"...\"").
 */
void
zl_remote_raise_at(PGresult *res, PGconn *conn, const char *where)
{
	char	   *sqlstate = error_field(res, PG_DIAG_SQLSTATE);
	char	   *message = error_field(res, PG_DIAG_MESSAGE_PRIMARY);
	char	   *detail = error_field(res, PG_DIAG_MESSAGE_DETAIL);
	char	   *hint = error_field(res, PG_DIAG_MESSAGE_HINT);
	int			code = ERRCODE_CONNECTION_FAILURE;

	if (message == NULL)
		message = pchomp(PQerrorMessage(conn));
	if (sqlstate != NULL && strlen(sqlstate) == 5)
		code = MAKE_SQLSTATE(sqlstate[0], sqlstate[1], sqlstate[2], sqlstate[3], sqlstate[4]);
	PQclear(res);
	ereport(ERROR,
			(errcode(code),
			 errmsg_internal("%s", message),
			 detail ? errdetail_internal("%s", detail) : 0,
			 hint ? errhint("%s", hint) : 0,
			 errcontext("on %s", where)));
}

/* raise a shard's error (zl_remote_raise_at) */
void
zl_remote_raise(PGresult *res, PGconn *conn, const char *server_name)
{
	zl_remote_raise_at(res, conn, psprintf("shard server \"%s\"", server_name));
}

/* a result's rows as text, clearing res */
ZLRemoteRows *
zl_remote_rows(PGresult *res)
{
	ZLRemoteRows *rows = palloc(sizeof(ZLRemoteRows));

	rows->nrows = PQntuples(res);
	rows->ncols = PQnfields(res);
	rows->names = palloc(sizeof(char *) * Max(rows->ncols, 1));
	rows->values = palloc(sizeof(char *) * Max(rows->nrows * rows->ncols, 1));
	for (int c = 0; c < rows->ncols; c++)
		rows->names[c] = pstrdup(PQfname(res, c));
	for (int r = 0; r < rows->nrows; r++)
		for (int c = 0; c < rows->ncols; c++)
			rows->values[r * rows->ncols + c] =
				PQgetisnull(res, r, c) ? NULL : pstrdup(PQgetvalue(res, r, c));
	PQclear(res);
	return rows;
}

/* a value of a row by its column's name (NULL: SQL NULL) */
const char *
zl_remote_value(const ZLRemoteRows *rows, int row, const char *column)
{
	for (int c = 0; c < rows->ncols; c++)
		if (strcmp(rows->names[c], column) == 0)
			return rows->values[row * rows->ncols + c];
	elog(ERROR, "shard returned no column \"%s\"", column);
	return NULL;				/* keep compiler quiet */
}

/*
 * Put a shard's rows into a function's result, each column taken from
 * the shard's column of the same name (text, through its type's input
 * function); column local_column (NULL: none) gets local_value instead.
 */
void
zl_remote_put_rows(ReturnSetInfo *rsinfo, const ZLRemoteRows *rows, const char *local_column,
				   Datum local_value)
{
	TupleDesc	desc = rsinfo->setDesc;
	Datum	   *values = palloc(sizeof(Datum) * desc->natts);
	bool	   *nulls = palloc(sizeof(bool) * desc->natts);
	FmgrInfo   *inputs = palloc(sizeof(FmgrInfo) * desc->natts);
	Oid		   *ioparams = palloc(sizeof(Oid) * desc->natts);
	int		   *columns = palloc(sizeof(int) * desc->natts);

	for (int a = 0; a < desc->natts; a++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, a);
		Oid			input;

		columns[a] = -1;
		if (att->attisdropped)
			continue;
		getTypeInputInfo(att->atttypid, &input, &ioparams[a]);
		fmgr_info(input, &inputs[a]);
		for (int c = 0; c < rows->ncols; c++)
			if (strcmp(rows->names[c], NameStr(att->attname)) == 0)
				columns[a] = c;
	}
	for (int r = 0; r < rows->nrows; r++)
	{
		for (int a = 0; a < desc->natts; a++)
		{
			Form_pg_attribute att = TupleDescAttr(desc, a);
			const char *text = columns[a] >= 0 ? rows->values[r * rows->ncols + columns[a]] : NULL;

			if (local_column != NULL && strcmp(NameStr(att->attname), local_column) == 0)
			{
				values[a] = local_value;
				nulls[a] = false;
				continue;
			}
			nulls[a] = text == NULL;
			values[a] = att->attisdropped ? (Datum) 0 :
				InputFunctionCall(&inputs[a], (char *) text, ioparams[a], att->atttypmod);
		}
		tuplestore_putvalues(rsinfo->setResult, desc, values, nulls);
	}
}

/* "zipper_lake_shard:<system id>:<database>:": this database's transactions */
char *
zl_remote_gid_prefix(void)
{
	return psprintf(ZL_SHARD_GID_PREFIX UINT64_FORMAT ":%u:", GetSystemIdentifier(), MyDatabaseId);
}

char *
zl_remote_gid(FullTransactionId fxid, Oid umid)
{
	return psprintf("%s" UINT64_FORMAT ":%u", zl_remote_gid_prefix(),
					U64FromFullTransactionId(fxid), umid);
}

/*
 * COMMIT or ROLLBACK PREPARED gid on a shard, never throwing: true when
 * it is finished (by us, or before: it no longer exists), false when the
 * shard could not be reached or another session is finishing it.
 */
bool
zl_remote_finish_prepared(PGconn *conn, const char *gid, bool commit)
{
	char	   *sql = psprintf("%s PREPARED %s", commit ? "COMMIT" : "ROLLBACK",
							   quote_literal_cstr(gid));
	PGresult   *res = zl_remote_exec(conn, sql, 0, NULL, false, ZL_SHARD_FINISH_TIMEOUT_MS);
	char	   *sqlstate = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
	bool		finished = zl_remote_ok(res) ||
		(sqlstate != NULL && strcmp(sqlstate, "42704") == 0);	/* no such gid */

	PQclear(res);
	pfree(sql);
	return finished;
}

/*
 * A user mapping by its oid, for the current role when it is PUBLIC's
 * (settling prepared transactions: zl_remote_resolve.c).
 */
UserMapping *
zl_remote_mapping_by_id(Oid umid)
{
	HeapTuple	tuple = SearchSysCache1(USERMAPPINGOID, ObjectIdGetDatum(umid));
	Form_pg_user_mapping form;
	UserMapping *mapping;

	if (!HeapTupleIsValid(tuple))
		return NULL;
	form = (Form_pg_user_mapping) GETSTRUCT(tuple);
	mapping = GetUserMapping(form->umuser, form->umserver);
	if (!OidIsValid(form->umuser))
		mapping->userid = GetUserId();
	ReleaseSysCache(tuple);
	return mapping;
}
