#!/usr/bin/env python3
"""Checks that no C function of src/ is long without a reason written.

A newcomer reads a function whole; one of more than MAX_LINES lines is
split, or says why it is not.  A function's body is the lines from its
opening "{" at column 0 to its closing "}" at column 0, both counted (the
layout pgindent gives every function of src/).  A longer one passes only
when its comment block, or the line right above that block, holds the
marker

    Long because

followed by the reason, e.g. "Long because the states of the scan are
one switch; cut, each piece would need them all."  The check reads every
.c and .h file below src/ (static inline functions in headers included)
and fails on:

  * a function longer than MAX_LINES lines without the marker;
  * a "{" at column 0 after a function's declarator with no "}" at
    column 0 to close it (the layout the count relies on is broken).

    test/check_functions.py [SRC_DIR]    check the tree (default: src/ here)
    test/check_functions.py --self-test  check the check, on small files

Exits 0 when everything holds, 1 with one line per problem otherwise.
Only the standard library; "make check-layers" runs both forms.
"""
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_layers import run, self_test_case, sources  # noqa: E402

MAX_LINES = 150
MARKER = 'Long because'

# the line of a declarator that names the function: "name(" at column 0,
# or "type name(" (one-line definitions)
NAME = re.compile(r'^(?:[A-Za-z_][\w \t*()]*?[\s*])?([A-Za-z_]\w*)\s*\(')


def header_start(lines, brace):
    """(the function's name, the index of the first line of its definition), or None"""
    i = brace - 1
    # the declarator: back over its continued argument lines to the name
    while i >= 0 and lines[i][:1] in (' ', '\t'):
        i -= 1
    if i < 0 or not lines[i].strip():
        return None
    match = NAME.match(lines[i])
    if not match:
        return None
    start = i
    # the return type on the line above ("static int64"), as PostgreSQL writes it
    above = lines[i - 1] if i > 0 else ''
    if (above.strip() and above[:1] not in (' ', '\t', '#', '/', '*', '}') and
            not above.rstrip().endswith((';', '*/', '{', '}'))):
        start = i - 1
    return match.group(1), start


def comment_above(lines, start):
    """the lines of the comment block right above line start, and the line above it"""
    i = start - 1
    if i < 0 or not lines[i].rstrip().endswith('*/'):
        return lines[i:i + 1] if i >= 0 else []
    end = i
    while i >= 0 and not lines[i].lstrip().startswith('/*'):
        i -= 1
    return lines[max(i - 1, 0):end + 1]


def functions(text):
    """(name, first line of the body, lines of the body, comment lines) of each function"""
    lines = text.split('\n')
    found = []
    problems = []
    i = 0
    while i < len(lines):
        if lines[i] != '{' or i == 0 or not lines[i - 1].rstrip().endswith(')'):
            i += 1
            continue
        head = header_start(lines, i)
        if head is None:
            i += 1
            continue
        name, start = head
        close = i + 1
        while close < len(lines) and not (lines[close].startswith('}') and
                                          lines[close].rstrip() == '}'):
            if lines[close] == '{':
                break
            close += 1
        if close >= len(lines) or lines[close] != '}':
            problems.append((i + 1, 'function %s opens at column 0 and is not closed at column 0' % name))
            i += 1
            continue
        found.append((name, i + 1, close - i + 1, comment_above(lines, start)))
        i = close + 1
    return found, problems


def check(src):
    """the problems of the tree at src, as lines"""
    problems = []
    for path in sources(src):
        with open(os.path.join(src, path), encoding='utf-8') as f:
            found, broken = functions(f.read())
        for lineno, what in broken:
            problems.append('%s:%d: %s' % (path, lineno, what))
        for name, lineno, length, comment in found:
            if length > MAX_LINES and not any(MARKER in line for line in comment):
                problems.append('%s:%d: %s() is %d lines (over %d) and its comment does not say '
                                '"%s ..."' % (path, lineno, name, length, MAX_LINES, MARKER))
    return problems


def self_test():
    """each case on a small file made for it"""
    def body(n):
        return '{\n' + '\tx++;\n' * (n - 2) + '}\n'

    cases = [
        ('a short function', 'static int\nshort_one(int x)\n' + body(10), None),
        ('a function of exactly the limit', 'int\nat_limit(int x)\n' + body(MAX_LINES), None),
        ('a long function', '/* does things */\nstatic void\nlong_one(int x,\n\t\t int y)\n' +
         body(MAX_LINES + 1), 'long_one() is %d lines' % (MAX_LINES + 1)),
        ('a long function with its reason', '/*\n * Does things.\n *\n * Long because it must.\n'
         ' */\nstatic void\nlong_one(int x)\n' + body(MAX_LINES + 5), None),
        ('a reason on the line above the comment', '/* Long because it must. */\n/* does */\n'
         'void\nlong_one(void)\n' + body(MAX_LINES + 5), None),
        ('a reason of another function does not count',
         '/* Long because it must. */\nvoid\nfirst(void)\n' + body(3) +
         '\nvoid\nsecond(void)\n' + body(MAX_LINES + 1), 'second() is'),
        ('structs and tables are no functions', 'typedef struct X\n{\n' + '\tint a;\n' * 200 +
         '} X;\n\nstatic const int t[] =\n{\n' + '\t1,\n' * 200 + '};\n', None),
        ('a function not closed at column 0', 'void\nbroken(void)\n{\n\tx++;\n  }\n',
         'not closed at column 0'),
    ]
    failed = 0
    for name, text, expect in cases:
        with tempfile.TemporaryDirectory(prefix='check_functions.') as root:
            with open(os.path.join(root, 'zl_x.c'), 'w', encoding='utf-8') as f:
                f.write(text)
            failed += self_test_case(name, check(root), expect)
    return 1 if failed else 0


def main(argv):
    return run(argv, check, self_test,
               'no function of src/ is over %d lines without a reason' % MAX_LINES,
               'function', 'over %d lines without a reason' % MAX_LINES)


if __name__ == '__main__':
    sys.exit(main(sys.argv))
