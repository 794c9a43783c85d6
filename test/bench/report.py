#!/usr/bin/env python3
"""
test/bench/report.py -- run the main benchmarks and write the performance
table and chart of the README.

Runs the benchmarks of this directory one after the other against one
database (libpq environment, or --host/--port/--dbname), each with --json,
and collects their results: zipper_lake's time (or bytes) against its
baseline's -- the indexed heap table and the classic job, or for CDC events
the same changes applied from a typed table -- and the ratio baseline /
zipper_lake (> 1: zipper_lake faster, or smaller).  Then writes, into
--out (default test/bench/results):

  latest.json   every result, with the date, the machine (CPUs, PostgreSQL
                version, settings) and the sizes
  latest.md     the table of every result
  latest.png    a bar chart of the ratios with the 1x line (Debian's
                python3-matplotlib; without it the table only, and a message)

--update-readme replaces the block between <!-- bench:begin --> and
<!-- bench:end --> of the top README.md with the table of the main results.

  PGDATABASE=zl_bench /usr/bin/python3 test/bench/report.py --update-readme
                       # documented sizes: about half an hour on 2 cores
  PGDATABASE=zl_bench_smoke /usr/bin/python3 test/bench/report.py --smoke
                       # CI: tiny sizes, into a temporary directory
  /usr/bin/python3 test/bench/report.py --replot --update-readme
                       # table, chart and README again from latest.json

--smoke runs every benchmark with --smoke (its numbers mean nothing) and,
unless --out is given, prints the table instead of keeping the files (the
chart is still drawn, into a temporary directory); it refuses
--update-readme.  --only apply,read runs some benchmarks (the others keep
their results of latest.json).  A benchmark that fails (its two sides
disagree) fails the report, which then writes nothing.
"""
import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
README = os.path.join(ROOT, 'README.md')
BEGIN, END = '<!-- bench:begin -->', '<!-- bench:end -->'

# benchmark -> (script, options at the documented size, options in smoke mode)
BENCHES = {
    'apply': ('bench_apply.py', ['--no-verify', '--quiet'], ['--smoke', '--quiet']),
    'read': ('bench_read.py', ['--no-rows'], ['--smoke', '--no-rows']),
    'keys': ('bench_keys.py', ['--seconds', '6'], ['--smoke']),
    'snapshot': ('bench_snapshot.py', ['--days', '5'], ['--smoke']),
    'history': ('bench_history.py', [], ['--smoke']),
    'events': ('bench_events.py', [], ['--smoke']),
    'retention': ('bench_retention.py', [], ['--smoke']),
    'users': ('bench_users.py', [], ['--smoke']),
    'indexes': ('bench_indexes.py', ['--no-verify', '--quiet'], ['--smoke', '--quiet']),
    'scaling': ('bench_scaling.py', ['--quiet'], ['--smoke', '--quiet']),
    'shards': ('bench_shards.py', [], ['--smoke']),
    'follow': ('bench_follow.py', [], ['--smoke']),
}

# the results the README's table shows, in this order (latest.md shows all)
README_ROWS = ['apply', 'users_asof_old', 'users_asof_recent', 'users_changes', 'users_current',
               'users_history', 'users_point', 'users_snapshot', 'users_size', 'retention_100',
               'indexes_lookup_big', 'indexes_apply_big', 'scaling_apply_par_vs_one', 'follow_rate']


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--smoke', action='store_true', help='tiny sizes (CI); numbers mean nothing')
    p.add_argument('--only', metavar='LIST', help='comma-separated benchmarks: ' + ', '.join(BENCHES))
    p.add_argument('--out', metavar='DIR', help='where latest.{json,md,png} go (default test/bench/results)')
    p.add_argument('--replot', action='store_true', help='run nothing: write table and chart from latest.json')
    p.add_argument('--update-readme', action='store_true', help='put the table into README.md')
    for opt in ('--host', '--port', '--dbname'):
        p.add_argument(opt)
    a = p.parse_args()
    if a.smoke and a.update_readme:
        p.error('--smoke numbers mean nothing: not for the README')
    if a.smoke and a.replot:
        p.error('--replot runs nothing')
    a.only = a.only.split(',') if a.only else list(BENCHES)
    unknown = [b for b in a.only if b not in BENCHES]
    if unknown:
        p.error(f'unknown benchmark(s): {", ".join(unknown)}')
    a.keep = a.out is not None or not a.smoke
    if a.out is None and not a.smoke:
        a.out = os.path.join(HERE, 'results')
    return a


# ---------------------------------------------------------------------------
# running
# ---------------------------------------------------------------------------

def bench_env(a):
    """The environment of the benchmarks: pgbench on PATH (bench_keys)."""
    env = dict(os.environ)
    if shutil.which('pgbench', path=env.get('PATH')) is None:
        pg_config = env.get('PG_CONFIG') or shutil.which('pg_config') or '/usr/lib/postgresql/15/bin/pg_config'
        try:
            bindir = subprocess.run([pg_config, '--bindir'], capture_output=True, text=True, check=True).stdout.strip()
            env['PATH'] = bindir + os.pathsep + env.get('PATH', '')
        except (OSError, subprocess.CalledProcessError):
            pass
    return env


def connection_args(a):
    return [x for opt in ('host', 'port', 'dbname') if getattr(a, opt)
            for x in ('--' + opt, str(getattr(a, opt)))]


def run_benches(a, work):
    """name -> the JSON document of each benchmark run, or exit on failure."""
    env = bench_env(a)
    docs = {}
    for name in a.only:
        script, full, smoke = BENCHES[name]
        out = os.path.join(work, name + '.json')
        cmd = [sys.executable, os.path.join(HERE, script)] + (smoke if a.smoke else full) \
            + connection_args(a) + ['--json', out]
        print(f'=== report: {name}: {" ".join(os.path.basename(c) if c.endswith(".py") else c for c in cmd[1:])}',
              flush=True)
        rc = subprocess.run(cmd, env=env).returncode
        if rc != 0 or not os.path.exists(out):
            sys.exit(f'report: {script} failed (exit status {rc}); nothing written')
        with open(out) as f:
            docs[name] = json.load(f)
    return docs


def machine(a):
    """CPUs, and the server's version and settings (through psycopg2)."""
    info = {'cpus': os.cpu_count()}
    try:
        import psycopg2
        kw = {k: getattr(a, k) for k in ('host', 'port', 'dbname') if getattr(a, k)}
        conn = psycopg2.connect(**kw)
        cur = conn.cursor()
        cur.execute("SELECT current_setting('server_version'), current_setting('shared_buffers'), "
                    "current_setting('work_mem'), current_setting('max_parallel_workers_per_gather'), "
                    "current_setting('jit'), current_setting('synchronous_commit'), "
                    "current_setting('random_page_cost'), current_setting('shared_preload_libraries')")
        v = cur.fetchone()
        conn.close()
        info.update({'postgres': v[0].split()[0], 'shared_buffers': v[1], 'work_mem': v[2],
                     'max_parallel_workers_per_gather': v[3], 'jit': v[4], 'synchronous_commit': v[5],
                     'random_page_cost': v[6], 'shared_preload_libraries': v[7] or "''"})
    except Exception as e:                          # the report still says what it knows
        info['postgres'] = f'unknown ({str(e).strip().splitlines()[0]})'
    return info


# ---------------------------------------------------------------------------
# writing
# ---------------------------------------------------------------------------

def count(n):
    """1000000 -> 1M, 10000 -> 10k, 6444060 -> 6.44M, 2000 -> 2,000."""
    if n >= 1_000_000:
        return f'{n / 1e6:g}M' if n % 100_000 == 0 else f'{n / 1e6:.2f}M'
    if n >= 10_000:
        return f'{n // 1000}k' if n % 1000 == 0 or n >= 100_000 else f'{n:,}'
    return f'{n:,}'


def size_text(doc, key=None):
    """What a benchmark measured, in a few words."""
    s, b = doc['size'], doc['bench']
    if key == 'apply_load':
        return f"{count(s['keys'])} open versions"
    if b in ('apply', 'history'):
        return f"{count(s['keys'])} keys, {count(s['batch'])} a batch"
    if b in ('read', 'keys', 'users'):
        return f"{count(s['keys'])} keys x {s['days']} days"
    if b == 'snapshot':
        return f"{count(s['keys'])} keys"
    if b == 'events':
        return f"{count(s['events'])} events"
    if b == 'retention':
        return f"{s['partitions']} days, half dropped"
    if b == 'follow':
        return f"{count(s['keys'])} keys"
    if b in ('scaling', 'shards'):
        return f"{count(s['keys'])} keys, {count(s['batch'])} a batch"
    if b == 'indexes':
        if key and key.startswith('indexes_lookup'):
            n = s['versions_big' if '_big' in key else 'versions_small']
            return f"{count(n)} versions"
        return f"{count(s['keys'])} keys, {count(s['batch'])} a batch"
    return ''


LABELS = {
    'apply': 'apply a batch of changes',
    'apply_load': 'initial load of the open versions',
    'read_size': 'bytes of a deep history',
    'read_asof_recent': 'as of yesterday noon',
    'read_asof_old': 'as of day 2 noon',
    'read_changes': "one day's changes",
    'read_current': 'current versions',
    'read_point': 'one key and its valid_from',
    'keys_history': 'history of one key',
    'keys_asof': 'one key as of a time',
    'keys_point': 'one key and its valid_from',
    'keys_join': 'as-of join, {facts} facts',
    'keys_join_outer': 'as-of join, {outer_rows} outer rows',
    'snapshot': 'end-of-day snapshot',
    'history_small': 'apply with little history',
    'history_big': 'apply with {scale}x the history',
    'events_jsonb': 'CDC events, jsonb (baseline: typed changes)',
    'events_text': 'CDC events, text (baseline: typed changes)',
    'retention_1': 'drop_history, {rows} versions a day',
    'retention_10': 'drop_history, {rows_10} versions a day',
    'retention_100': 'drop_history, {rows_100} versions a day',
    'users_asof_old': 'as of an old day, plain SQL',
    'users_asof_recent': 'as of a recent day, plain SQL',
    'users_asof_recent_new': 'as of a recent day, new connection',
    'users_changes': "one day's changes, plain SQL",
    'users_current': 'current rows, plain SQL',
    'users_history': 'history of a key (WHERE id = $1)',
    'users_point': 'point lookup (key + time)',
    'users_snapshot': 'end-of-day apply_snapshot vs UPDATE + INSERT',
    'users_size': 'bytes: table + catalog rows vs heap table',
    'indexes_lookup_small': 'lookup by a btree column (WHERE iban = $1)',
    'indexes_lookup_small_new': 'lookup by a btree column, new connection',
    'indexes_lookup_big': 'lookup by a btree column, {scale}x the versions',
    'indexes_lookup_big_new': 'lookup by a btree column, {scale}x the versions, new connection',
    'indexes_apply': 'apply with two secondary indexes',
    'indexes_apply_big': 'apply with two secondary indexes, {scale}x the versions',
    'indexes_apply_new': 'apply with two secondary indexes, new connection',
    'indexes_apply_big_new': 'apply with two secondary indexes, {scale}x the versions, new connection',
    'scaling_apply_one': 'apply a batch to one zipper table',
    'scaling_apply_ser': 'apply to a zipper parent of {leaves} leaves, leaf by leaf',
    'scaling_apply_par': 'apply to a zipper parent of {leaves} leaves in {leaves} workers',
    'scaling_apply_ser_vs_one': 'zipper parent of {leaves} leaves, leaf by leaf (baseline: one zipper table)',
    'scaling_apply_par_vs_one': 'zipper parent of {leaves} leaves in {leaves} workers (baseline: one zipper table)',
    'scaling_apply_par_vs_ser': 'zipper parent in {leaves} workers (baseline: leaf by leaf)',
    'scaling_asof_rows': 'as of a time, 1% of rows, through a zipper parent (baseline: one zipper table)',
    'scaling_asof_rows_new': 'as of a time, 1% of rows, through a parent, new connection (baseline: one table)',
    'scaling_current': 'current rows through a zipper parent (baseline: one zipper table)',
    'scaling_current_new': 'current rows through a parent, new connection (baseline: one table)',
    'scaling_asof_agg': 'as-of count and sum through a zipper parent (baseline: one zipper table)',
    'scaling_asof_agg_new': 'as-of count and sum through a parent, new connection (baseline: one table)',
    'scaling_history': 'history of a key through a zipper parent (baseline: one zipper table)',
    'scaling_history_new': 'history of a key through a parent, new connection (baseline: one table)',
    'shards_apply': 'apply through a router to {leaves} shards (baseline: one zipper table)',
    'shards_asof_agg': 'as-of count, sum through a router, {leaves} shards (baseline: one table)',
    'shards_asof_agg_leaves': 'as-of count, sum, a query per shard, {leaves} shards (baseline: one table)',
    'follow_rate': 'follower, time a change (baseline: SCD2 trigger)',
    'follow_lag': 'follower lag at half its rate, median (baseline: time a trigger adds)',
}


def label(r, doc):
    """The row's name, with the sizes of the run where they matter."""
    s = doc['size']
    sizes = {k: count(v) if isinstance(v, int) else v for k, v in s.items()}
    if 'rows' in s:
        sizes.update(rows_10=count(s['rows'] * 10), rows_100=count(s['rows'] * 100))
    try:
        return LABELS[r['key']].format(**sizes)
    except (KeyError, IndexError):
        return r['what']


def amounts(z, b, unit):
    """zipper_lake's and the baseline's figure in one unit, chosen by the larger."""
    known = [x for x in (z, b) if x is not None]
    if not known:
        return '–', '–'
    if unit == 'bytes':
        return tuple('–' if x is None else f'{x / 2**20:,.1f} MB' for x in (z, b))
    m = max(known)
    if m < 0.01:
        fmt = lambda x: f'{x * 1000:.3f} ms'
    elif m < 1:
        fmt = lambda x: f'{x * 1000:.1f} ms'
    else:
        fmt = lambda x: f'{x:.2f} s'
    return tuple('–' if x is None else fmt(x) for x in (z, b))


def rows(report, keys=None):
    """(label, size, zipper, baseline, ratio) of the results, all or those keys."""
    found = {}
    for doc in report['benches'].values():
        for r in doc['results']:
            if r.get('build'):
                continue
            what = label(r, doc)
            if r.get('ratio_min') is not None and r['ratio_min'] < 0.95 * r['ratio']:
                # several queries measured: the ratio of the sums, and the worst one
                what += f" (worst query {ratio_text(r['ratio_min'])})"
            found[r['key']] = (what, size_text(doc, r['key'])) + amounts(r['zipper'], r['baseline'], r['unit']) \
                + (r['ratio'],)
    order = keys if keys is not None else [k for k in LABELS if k in found] + sorted(set(found) - set(LABELS))
    return [found[k] for k in order if k in found]


def heading(report):
    m = report['machine']
    when = report['date']
    settings = ', '.join(f'{k} {m[k]}' for k in ('shared_buffers', 'work_mem', 'random_page_cost',
                                                  'max_parallel_workers_per_gather', 'jit',
                                                  'shared_preload_libraries') if k in m)
    text = (f"{when}, {m.get('cpus', '?')} CPUs, PostgreSQL {m.get('postgres', '?')}"
            + (f' ({settings})' if settings else ''))
    if report.get('note'):
        text += '; ' + report['note']
    return text


def ratio_text(ratio):
    return '–' if ratio is None else f'{ratio:.3g}x'


def table(rows_):
    out = ['| | size | zipper_lake | baseline | ratio |', '|---|---|--:|--:|--:|']
    for lab, size, z, b, ratio in rows_:
        r = ratio_text(ratio)
        out.append(f'| {lab} | {size} | {z} | {b} | {r} |')
    return '\n'.join(out)


def write_md(report, path):
    text = f"""# Benchmark results

Written by `test/bench/report.py`{' --smoke (tiny sizes: the numbers mean nothing)' if report['smoke'] else ''}: {heading(report)}.
Ratio = baseline / zipper_lake: > 1 means zipper_lake is faster (for
bytes: smaller). The baseline is an indexed heap table and the classic
`UPDATE` + `INSERT` job, for CDC events the same changes applied from a
typed table. What each benchmark does: `test/bench/README.md`.

{table(rows(report))}
"""
    notes = []
    for doc in report['benches'].values():
        for r in doc['results']:
            if 'zipper_growth' in r:
                notes.append(f"Batch time with {r['what'].split(', ')[1]} against the small history: "
                             f"zipper_lake {r['zipper_growth']:.2f}x, heap {r['heap_growth']:.2f}x (1.0 = flat).")
    if notes:
        text += '\n' + '\n'.join(notes) + '\n'
    with open(path, 'w') as f:
        f.write(text)


def write_chart(report, path):
    """A bar chart of the ratios (log scale, 1x line); False without matplotlib."""
    try:
        import matplotlib
        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except ImportError:
        print('report: matplotlib is not installed (Debian: python3-matplotlib): '
              'wrote the table only, no chart')
        return False
    data = [(lab, ratio) for lab, _, _, _, ratio in rows(report, README_ROWS) if ratio]
    fig, ax = plt.subplots(figsize=(8, 0.32 * len(data) + 1.5))
    ys = range(len(data))
    ax.barh(list(ys), [r for _, r in data], height=0.6,
            color=['tab:green' if r >= 1 else 'tab:orange' for _, r in data])
    ax.axvline(1, color='black', linewidth=0.8)
    ax.set_xscale('log')
    ax.set_yticks(list(ys))
    ax.set_yticklabels([lab for lab, _ in data])
    ax.invert_yaxis()
    for y, (_, r) in zip(ys, data):
        ax.annotate(ratio_text(r), (r, y), xytext=(3, 0), textcoords='offset points', va='center', fontsize=8)
    ratios = [r for _, r in data]
    ax.set_xlim(min(0.5, min(ratios) / 1.5), max(2, max(ratios)) * 3)
    ax.set_xlabel('baseline / zipper_lake (log scale; > 1: zipper_lake faster or smaller)')
    fig.suptitle(textwrap.fill(heading(report), 110), fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True


def update_readme(report):
    with open(README) as f:
        text = f.read()
    if text.count(BEGIN) != 1 or text.count(END) != 1 or text.index(BEGIN) > text.index(END):
        sys.exit(f'report: README.md must hold one {BEGIN} ... {END} block')
    block = (f"{BEGIN}\n{heading(report)}; ratio = heap (table, job) / zipper_lake:"
             f"\n\n{table(rows(report, README_ROWS))}\n{END}")
    text = text[:text.index(BEGIN)] + block + text[text.index(END) + len(END):]
    with open(README, 'w') as f:
        f.write(text)
    print(f'report: README.md updated ({len(text.encode())} bytes)')


def main():
    a = parse_args()
    if not a.keep:
        with tempfile.TemporaryDirectory(prefix='zl_report_') as a.out:
            make_report(a)
            with open(os.path.join(a.out, 'latest.md')) as f:
                print(f.read())
        return 0
    return make_report(a)


def make_report(a):
    os.makedirs(a.out, exist_ok=True)
    latest = os.path.join(a.out, 'latest.json')
    old = None
    if os.path.exists(latest):
        with open(latest) as f:
            old = json.load(f)
    if a.replot:
        if old is None:
            sys.exit(f'report: no {latest} to replot')
        report = old
    else:
        with tempfile.TemporaryDirectory(prefix='zl_report_') as work:
            docs = run_benches(a, work)
        # with --only, the other benchmarks keep their results of the last full run
        keep_old = old and not a.smoke and not old.get('smoke') and set(a.only) != set(BENCHES)
        benches = dict(old['benches']) if keep_old else {}
        benches.update(docs)
        report = {'date': datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC'),
                  'machine': machine(a), 'smoke': a.smoke, 'benches': benches}
        if set(benches) != set(docs):
            report['note'] = 'earlier runs: ' + ', '.join(sorted(set(benches) - set(docs)))
        with open(latest, 'w') as f:
            json.dump(report, f, indent=1)
            f.write('\n')
    write_md(report, os.path.join(a.out, 'latest.md'))
    charted = write_chart(report, os.path.join(a.out, 'latest.png'))
    print(f"report: wrote {os.path.join(a.out, 'latest.md')}" + (' and latest.png' if charted else ''))
    if a.update_readme:
        update_readme(report)
    return 0


if __name__ == '__main__':
    sys.exit(main())
