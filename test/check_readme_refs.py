#!/usr/bin/env python3
"""
test/check_readme_refs.py -- README sections cited by the tree must exist,
and the top README must stay a short guide.

Code, tests and documents cite README sections by name: an error hint says
(README "Lifecycle"), a comment (README "Storage formats", "Packing").  This
script finds every such citation in README.md, src/** (the layer READMEs
included), sql/**, expected/** and test/** and fails when the README it
cites has no heading of that name:

  README "X"                      the top README.md (from test/D/..., the
                                  nearest test/D/README.md counts too: the
                                  benchmark and randomized-test READMEs)
  src/write/README.md, "X"        that file (a path names the README)
  README "X", "Y"                 every name of the list
  (README, X)                     one unquoted name

A heading matches a name when it reads the same, backquotes aside, or
begins with the name followed by " (".

It also fails when README.md is larger than MAX_README_BYTES or holds
something that looks like a commit hash: the top README is the guide a user
reads in ten minutes, and the history of benchmark runs lives in git.

Exit status 0 when all is well, 1 otherwise (each problem printed).
Python 3 standard library only.
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The top README stays within 30 KB (30,720 bytes): a ten-minute guide.
# Later issues add their user-facing sections concisely and may raise this
# to 40 KB (40,960 bytes) then, never beyond; design notes go to src/*/.
MAX_README_BYTES = 30 * 1024

SCAN = ('README.md', 'src', 'sql', 'expected', 'test')
SKIP_DIRS = {'.git', 'results', 'output', 'tmp_check', 'log'}
SKIP_SUFFIXES = ('.png', '.o', '.so', '.bc', '.pyc')

# "README" or a path ending in README.md, and what may follow it up to the
# first quoted name: 's, ".md", "in this directory", a comma or a colon
CITE = re.compile(r'((?:[\w.-]+/)*README(?:\.md)?)'
                  r"((?:'s)?(?: in this directory)?[,:]?[ ]?)")
QUOTED_LIST = re.compile(r'\s*"([^"\n]{1,100})"((?:\s*(?:,|;|and)\s*"[^"\n]{1,100}")*)')
QUOTED = re.compile(r'"([^"\n]{1,100})"')
# an unquoted name closing a parenthesis: (README, Pruning) or
# (README "Features and how they work", DDL)
UNQUOTED_NAME = r'([A-Z][A-Za-z]*(?: ?/? [A-Za-z]+)*)\)'
UNQUOTED_FIRST = re.compile(r'\s*' + UNQUOTED_NAME)
UNQUOTED_NEXT = re.compile(r'\s*,\s*' + UNQUOTED_NAME)
# comment leaders of continued lines: C, SQL, shell/Perl/Python
CONTINUATION = re.compile(r'\s*\n\s*(?:\*(?!/)|--|#|//)?\s*')
COMMIT_HASH = re.compile(r'(?<![\w./-])(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}(?![\w-])')


def read_text(path):
    try:
        with open(path, encoding='utf-8') as f:
            return f.read()
    except (UnicodeDecodeError, OSError):
        return None


HEADINGS = {}


def headings(path):
    """The set of heading texts of a markdown file (outside code fences),
    backquotes removed; None if the file does not exist."""
    cache = HEADINGS
    if path not in cache:
        text = read_text(path)
        if text is None:
            cache[path] = None
        else:
            found, fence = set(), False
            for line in text.split('\n'):
                if line.startswith('```'):
                    fence = not fence
                elif not fence:
                    m = re.match(r'#{1,6}\s+(.*?)\s*#*\s*$', line)
                    if m:
                        found.add(m.group(1).replace('`', ''))
            cache[path] = found
    return cache[path]


def has_heading(path, name):
    hs = headings(path)
    return hs is not None and any(h == name or h.startswith(name + ' (') for h in hs)


def files():
    me = os.path.abspath(__file__)         # its docstring shows citations
    for top in SCAN:
        p = os.path.join(ROOT, top)
        if os.path.isfile(p):
            yield p
            continue
        for d, dirs, fs in os.walk(p):
            dirs[:] = sorted(x for x in dirs if x not in SKIP_DIRS and not x.startswith('.'))
            for f in sorted(fs):
                if not f.endswith(SKIP_SUFFIXES) and os.path.join(d, f) != me:
                    yield os.path.join(d, f)


def candidates(citing, token):
    """The READMEs a citation may name."""
    rel = os.path.relpath(citing, ROOT)
    if '/' in token:
        for base in (ROOT, os.path.dirname(citing)):
            p = os.path.normpath(os.path.join(base, token))
            if os.path.exists(p):
                return [p]
        return [os.path.join(ROOT, token)]
    found = [os.path.join(ROOT, 'README.md')]
    if rel.startswith('test' + os.sep):
        d = os.path.dirname(citing)
        while d != os.path.join(ROOT, 'test') and d.startswith(ROOT):
            if os.path.exists(os.path.join(d, 'README.md')):
                found.append(os.path.join(d, 'README.md'))
                break
            d = os.path.dirname(d)
    return found


def citations(text):
    """(line, README token, name) of every citation in text."""
    for m in CITE.finditer(text):
        # continued lines read as one, C string escapes undone
        after = CONTINUATION.sub(' ', text[m.end():m.end() + 400]).replace('\\"', '"')
        line = text.count('\n', 0, m.start()) + 1
        names = []
        q = QUOTED_LIST.match(after)
        if q:
            names = QUOTED.findall(q.group(0))
            u = UNQUOTED_NEXT.match(after, q.end())
            if u:
                names.append(u.group(1))
        elif ',' in m.group(2):
            u = UNQUOTED_FIRST.match(after)
            if u:
                names.append(u.group(1))
        for n in names:
            yield line, m.group(1), n


def main():
    problems = []
    checked = 0
    for path in files():
        text = read_text(path)
        if text is None or 'README' not in text:
            continue
        rel = os.path.relpath(path, ROOT)
        for line, token, name in citations(text):
            checked += 1
            cands = candidates(path, token)
            if not any(has_heading(c, name) for c in cands):
                where = ' or '.join(os.path.relpath(c, ROOT) for c in cands)
                problems.append(f'{rel}:{line}: cites {token} "{name}", which {where} has no heading for')
    top = os.path.join(ROOT, 'README.md')
    size = os.path.getsize(top)
    if size > MAX_README_BYTES:
        problems.append(f'README.md: {size} bytes, more than {MAX_README_BYTES}: move design notes '
                        'into the README of their src/ folder')
    text = read_text(top) or ''
    for m in COMMIT_HASH.finditer(text):
        problems.append(f'README.md:{text.count(chr(10), 0, m.start()) + 1}: "{m.group(0)}" looks like a '
                        'commit hash: the README describes this version, git keeps the history')
    for p in problems:
        print(p)
    if problems:
        print(f'check_readme_refs: {len(problems)} problem(s)')
        return 1
    print(f'check_readme_refs: {checked} citations of README sections resolve; README.md {size} bytes '
          f'(limit {MAX_README_BYTES})')
    return 0


if __name__ == '__main__':
    sys.exit(main())
