#!/usr/bin/env python3
"""Checks that the #include lines of src/ follow its layers.

src/ is cut into folders, each a layer that may use only the layers
below it (each folder's README.md says what it holds):

    common < storage, remote < catalog < write < lifecycle < access, apply
           < planner, follow < api < hooks < the files at src/'s root (_PG_init)

access/ and apply/ share a rank and never include each other, and so do
storage/ and remote/, and planner/ and follow/.  A folder's
zl_<folder>.h is what the folders above it may include; a header named
*_internal.h may be included only from its own folder (and its
subfolders).  The check reads every #include "..." of src/**/*.c and
src/**/*.h that names a file of src/ (by folder path, as the Makefile's
-I src resolves it, or beside the including file), and fails on:

  * an include of a higher folder, or between access/ and apply/;
  * an include of another folder's *_internal.h;
  * a cycle in the graph of folders or in the graph of headers;
  * a source file in a folder this table does not rank (a new folder
    must be given its place here).

    test/check_layers.py [SRC_DIR]    check the tree (default: src/ here)
    test/check_layers.py --self-test  check that each rule catches what it
                                      should, on small trees made for it

Exits 0 when everything holds, 1 with one line per violation otherwise.
Only the standard library; test/run_tests.sh runs both forms.
"""
import os
import re
import sys
import tempfile

# rank of each top-level folder of src/; TOP stands for src/'s own files
TOP = '.'
RANKS = {
    'common': 0,
    'storage': 1,
    'remote': 1,
    'catalog': 2,
    'write': 3,
    'lifecycle': 4,
    'access': 5,
    'apply': 5,
    'planner': 6,
    'follow': 6,
    'api': 7,
    'hooks': 8,
    TOP: 9,
}
# folders of one rank that must not use each other
SIBLINGS_APART = {frozenset(('access', 'apply')), frozenset(('storage', 'remote')),
                  frozenset(('planner', 'follow'))}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def folder_of(path):
    """the top-level folder of a path relative to src/ (TOP for src/'s own files)"""
    parts = path.split('/')
    return parts[0] if len(parts) > 1 else TOP


def sources(src):
    """every .c and .h below src, relative to it, sorted"""
    found = []
    for dirpath, _, files in os.walk(src):
        for name in files:
            if name.endswith(('.c', '.h')):
                found.append(os.path.relpath(os.path.join(dirpath, name), src))
    return sorted(found)


def resolve(src, including, target):
    """the file of src/ an include names, relative to src, or None (a PostgreSQL or system header)"""
    beside = os.path.normpath(os.path.join(os.path.dirname(including), target))
    if os.path.isfile(os.path.join(src, beside)):
        return beside
    if os.path.isfile(os.path.join(src, target)):
        return os.path.normpath(target)
    return None


def find_cycle(graph):
    """a cycle of the graph (a list of its nodes, first one repeated at the end), or None"""
    WHITE, GREY, BLACK = 0, 1, 2
    color = {node: WHITE for node in graph}
    stack = []

    def visit(node):
        color[node] = GREY
        stack.append(node)
        for succ in sorted(graph.get(node, ())):
            if color.get(succ, WHITE) == GREY:
                return stack[stack.index(succ):] + [succ]
            if color.get(succ, WHITE) == WHITE:
                cycle = visit(succ)
                if cycle:
                    return cycle
        stack.pop()
        color[node] = BLACK
        return None

    for node in sorted(graph):
        if color[node] == WHITE:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def check(src):
    """the violations of the tree at src, as lines"""
    problems = []
    folder_graph = {}
    header_graph = {}
    for path in sources(src):
        folder = folder_of(path)
        if folder not in RANKS:
            problems.append('%s: folder %s/ has no rank in test/check_layers.py' % (path, folder))
            continue
        folder_graph.setdefault(folder, set())
        with open(os.path.join(src, path), encoding='utf-8') as f:
            text = f.read()
        for match in INCLUDE.finditer(text):
            lineno = text.count('\n', 0, match.start()) + 1
            target = resolve(src, path, match.group(1))
            if target is None:
                continue
            where = '%s:%d: #include "%s"' % (path, lineno, match.group(1))
            tfolder = folder_of(target)
            if tfolder not in RANKS:
                problems.append('%s: folder %s/ has no rank in test/check_layers.py' % (where, tfolder))
                continue
            if path.endswith('.h'):
                header_graph.setdefault(path, set()).add(target)
            if tfolder == folder:
                continue
            folder_graph[folder].add(tfolder)
            if frozenset((folder, tfolder)) in SIBLINGS_APART:
                problems.append('%s: %s/ and %s/ must not use each other' % (where, folder, tfolder))
            elif RANKS[tfolder] > RANKS[folder]:
                problems.append('%s: %s/ may not use %s/, a higher layer' % (where, folder, tfolder))
            if target.endswith('_internal.h'):
                problems.append('%s: %s belongs to %s/ alone' % (where, target, tfolder))
    cycle = find_cycle(folder_graph)
    if cycle:
        problems.append('folders include each other in a cycle: %s' % ' -> '.join(c + '/' for c in cycle))
    cycle = find_cycle(header_graph)
    if cycle:
        problems.append('headers include each other in a cycle: %s' % ' -> '.join(cycle))
    return problems


def self_test_case(name, problems, expect):
    """print how a case of a self-test went; 1 if it failed.  expect is a
    piece of the problem the case must give, or None: it must give none"""
    ok = not problems if expect is None else any(expect in p for p in problems)
    print('%s: %s%s' % ('ok' if ok else 'FAILED', name,
                        '' if ok else ' -- got: %s' % (problems or 'nothing')))
    return 0 if ok else 1


def self_test():
    """each rule on a tree made to break it, and a tree that keeps them all"""
    def check_tree(files):
        with tempfile.TemporaryDirectory(prefix='check_layers.') as root:
            for path, text in files.items():
                full = os.path.join(root, path)
                os.makedirs(os.path.dirname(full), exist_ok=True)
                with open(full, 'w', encoding='utf-8') as f:
                    f.write(text)
            return check(root)

    good = {
        'common/zl_common.h': '#include "postgres.h"\n',
        'common/zl_time.c': '#include "common/zl_common.h"\n',
        'storage/zl_storage.h': '#include "common/zl_common.h"\n',
        'storage/zl_storage_internal.h': '#include "storage/zl_storage.h"\n',
        'storage/columnar/zl_columnar.c': '#include "storage/zl_storage_internal.h"\n',
        'access/zl_scan.c': '#include "storage/zl_storage.h"\n#include "access/relscan.h"\n',
        'apply/zl_apply.c': '#include "zl_apply_internal.h"\n',
        'apply/zl_apply_internal.h': '#include "storage/zl_storage.h"\n',
        'zl_init.c': '#include "storage/zl_storage.h"\n',
    }
    cases = [
        ('a tree that keeps the rules', {}, None),
        ('an include of a higher layer',
         {'storage/zl_keys.c': '#include "access/zl_access.h"\n', 'access/zl_access.h': ''},
         'a higher layer'),
        ('access/ using apply/',
         {'access/zl_x.c': '#include "apply/zl_apply.h"\n', 'apply/zl_apply.h': ''},
         'must not use each other'),
        ('apply/ using access/',
         {'apply/zl_x.c': '#include "access/zl_access.h"\n', 'access/zl_access.h': ''},
         'must not use each other'),
        ('another folder\'s internal header',
         {'access/zl_x.c': '#include "storage/zl_storage_internal.h"\n'},
         'belongs to storage/ alone'),
        ('headers that include each other',
         {'common/zl_a.h': '#include "common/zl_b.h"\n', 'common/zl_b.h': '#include "common/zl_a.h"\n'},
         'headers include each other in a cycle'),
        ('a folder with no rank',
         {'extra/zl_x.c': '#include "common/zl_common.h"\n'},
         'has no rank'),
    ]
    failed = 0
    for name, extra, expect in cases:
        files = dict(good)
        files.update(extra)
        failed += self_test_case(name, check_tree(files), expect)
    # a cycle of folders needs a rank broken first: check the search itself
    cycle = find_cycle({'write': {'catalog'}, 'catalog': {'write'}})
    ok = cycle is not None and cycle[0] == cycle[-1]
    print('%s: a cycle of folders is found' % ('ok' if ok else 'FAILED'))
    failed += not ok
    return 1 if failed else 0


def run(argv, check, self_test, holds, noun, of):
    """a checker's main: --self-test, or check the tree (argv[1], default
    src/ here) and print its problems and how many ("<n> <noun>s <of>"),
    or what holds"""
    if argv[1:] == ['--self-test']:
        return self_test()
    src = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'src')
    problems = check(os.path.normpath(src))
    for p in problems:
        print(p)
    if problems:
        print('%d %s%s %s' % (len(problems), noun, '' if len(problems) == 1 else 's', of))
        return 1
    print(holds)
    return 0


def main(argv):
    return run(argv, check, self_test, 'the includes of src/ follow its layers',
               'violation', 'of the layers of src/')


if __name__ == '__main__':
    sys.exit(main(sys.argv))
