/*-------------------------------------------------------------------------
 *
 * zl_util.c
 *	  Small helpers over arrays and bytes that several layers use.
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_namespace.h"
#include "miscadmin.h"
#include "postmaster/bgworker.h"
#include "utils/resowner.h"
#include "utils/syscache.h"

/* are all these bytes zero? */
bool
zl_bytes_are_zero(const char *bytes, Size len)
{
	for (Size i = 0; i < len; i++)
		if (bytes[i] != 0)
			return false;
	return true;
}

static int
int64_cmp(const void *a, const void *b)
{
	int64		x = *(const int64 *) a;
	int64		y = *(const int64 *) b;

	return x < y ? -1 : (x > y);
}

/* number of distinct values among the first n of an array (sorted in place) */
int
zl_count_distinct(int64 *values, int n)
{
	int			distinct = 0;

	qsort(values, n, sizeof(int64), int64_cmp);
	for (int i = 0; i < n; i++)
		if (i == 0 || values[i] != values[i - 1])
			distinct++;
	return distinct;
}

/*
 * A background worker of this library (type: its bgw_type and, until the
 * caller names it otherwise, its name) connected to a database, running
 * function; a dynamic one (restart_time BGW_NEVER_RESTART) tells this
 * backend when it starts and stops.
 */
void
zl_bgworker_init(struct BackgroundWorker *bgw, const char *type, const char *function,
				 int start_time, int restart_time)
{
	memset(bgw, 0, sizeof(BackgroundWorker));
	snprintf(bgw->bgw_name, BGW_MAXLEN, "%s", type);
	snprintf(bgw->bgw_type, BGW_MAXLEN, "%s", type);
	snprintf(bgw->bgw_library_name, BGW_MAXLEN, "zipper_lake");
	snprintf(bgw->bgw_function_name, BGW_MAXLEN, "%s", function);
	bgw->bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	bgw->bgw_start_time = (BgWorkerStartTime) start_time;
	bgw->bgw_restart_time = restart_time;
	bgw->bgw_notify_pid = restart_time == BGW_NEVER_RESTART ? MyProcPid : 0;
}

static Oid	owner_saved_user;
static int	owner_saved_context;

/*
 * Act as the extension's owner (the owner of schema zipper_lake), whose
 * tables (the shard transaction log, the followers) are not the
 * caller's to read or write; and back.  Not nested; an error in between
 * is undone by the abort.
 */
void
zl_as_extension_owner(bool begin)
{
	HeapTuple	tuple;

	if (!begin)
	{
		SetUserIdAndSecContext(owner_saved_user, owner_saved_context);
		return;
	}
	tuple = SearchSysCache1(NAMESPACEOID, ObjectIdGetDatum(get_namespace_oid("zipper_lake", false)));
	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "schema zipper_lake not found");
	GetUserIdAndSecContext(&owner_saved_user, &owner_saved_context);
	SetUserIdAndSecContext(((Form_pg_namespace) GETSTRUCT(tuple))->nspowner,
						   owner_saved_context | SECURITY_LOCAL_USERID_CHANGE);
	ReleaseSysCache(tuple);
}

/*
 * Run fn(arg) in a subtransaction of its own: NULL if it succeeded, else
 * its error (in the caller's memory), the subtransaction rolled back and
 * the error state cleared, so that the caller goes on.  For work whose
 * failure is only reported: a remote server that cannot be reached, a
 * prepared transaction someone else finishes.
 */
ErrorData *
zl_try_in_subtransaction(void (*fn) (void *arg), void *arg)
{
	MemoryContext caller = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	ErrorData  *volatile error = NULL;

	BeginInternalSubTransaction(NULL);
	PG_TRY();
	{
		fn(arg);
		ReleaseCurrentSubTransaction();
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(caller);
		error = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
	}
	PG_END_TRY();
	MemoryContextSwitchTo(caller);
	CurrentResourceOwner = owner;
	return error;
}
