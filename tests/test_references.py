"""Every reference in the repository resolves inside it (docs/README.md, "Citations").

Scanned: every text file under bitsnet/, tools/ and tests/, README.rst and docs/*.md.

* ``docs/NAME.md`` names an existing file; ``docs/NAME.md section 3.3`` (the form in code, which
  is ASCII), ``docs/NAME.md sections 3.3, 3.4``, ``docs/NAME.md sections 2-5``, and in README.rst
  and docs/ the same with the section sign before each number, name headings that exist in it: a
  heading whose text starts with the sign and the number (or, older, ``## 3.`` / ``### 3.3``).
  Inside docs/, a Markdown link to NAME.md followed by the sign and a number is checked the same
  way. A reference may be wrapped across lines, comment markers and all.
* Nothing cites what is not in the repository: the ``../shared`` folder, its files
  (``efi-network-facts.md``, ``bits-efi-api.md``, ``stdlib-surface.md``, ``DESIGN.md``,
  ``STYLE.md``) or their old short forms ("facts 3.3", "bits-efi-api item 2"), nor an internal
  issue number. An internal issue number is "issue N" / "issue #N" (any case, N a number); the
  word in other senses -- issuer, issued, "issues a call" -- has no number after it and is fine.
  A line that names another tracker (CPython's bpo, GitHub, TianoCore's bugzilla) may cite its
  issues by number.
"""

from __future__ import print_function

import io
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCAN = ("bitsnet", "tools", "tests")
SKIP_DIRS = {"__pycache__", ".venv", "build", ".pytest_cache", ".mypy_cache", "node_modules"}
BINARY = (".png", ".jpg", ".gz", ".xz", ".img", ".efi", ".so", ".o", ".pyc", ".zip", ".bin")
THIS = os.path.join("tests", "test_references.py")

NUM = r"\d+(?:\.\d+)*"
ITEM = r"(?:\d+\.\d+(?:\.\d+)*|\d+(?=[)\],;:.]|$))"  # a later item: dotted, or ending the list
SEP = r"(?:, | and |, and |/| / |-)"
ASCII_LIST = r"sections? (?P<ascii>" + NUM + r"(?:" + SEP + ITEM + r")*)"
SIGN_LIST = u"\u00a7(?P<sign>" + NUM + r"(?:" + SEP + u"\u00a7?" + NUM + r")*)"
DOC_REF = re.compile(u"docs/(?P<name>[A-Za-z0-9_-]+\\.md)(?:,? (?:" + ASCII_LIST + "|" + SIGN_LIST + "))?")
LINK_REF = re.compile(u"\\]\\((?P<name>[A-Za-z0-9_-]+\\.md)\\)(?: " + SIGN_LIST + ")?")
HEADING = re.compile(u"^#{1,6}\\s+\u00a7?(" + NUM + r")\.?(?:\s|$)", re.M)
# A line break, the indentation after it and a comment marker: a reference may be wrapped.
WRAP = re.compile(r"[ \t]*\r?\n[ \t]*(?:#+|\*|//)?[ \t]*")

FORBIDDEN = [
    ("a path outside the repository", re.compile(r"\.\./shared")),
    ("a file of ../shared", re.compile(r"efi-network-facts|bits-efi-api|stdlib-surface|bits-python-env|"
                                       r"\bDESIGN\.md|\bSTYLE\.md")),
    ("an old short citation", re.compile(r"(?<![\w-])facts (?:sections? )?\d|\b(?:DESIGN|STYLE) rules? \d")),
    ("an internal issue number", re.compile(r"\b[Ii]ssues? #?\d+")),
]
OTHER_TRACKER = re.compile(r"bpo-|bugs\.python\.org|CPython issue|github\.com|GitHub issue|bugzilla|upstream",
                           re.I)


def files():
    """(relative path, text) of every file the references live in."""
    found = [os.path.join(ROOT, "README.rst")]
    for top in SCAN:
        for dirpath, dirnames, filenames in os.walk(os.path.join(ROOT, top)):
            dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
            found.extend(os.path.join(dirpath, name) for name in sorted(filenames)
                         if not name.endswith(BINARY))
    docs = os.path.join(ROOT, "docs")
    found.extend(os.path.join(docs, name) for name in sorted(os.listdir(docs)) if name.endswith(".md"))
    for path in found:
        with io.open(path, encoding="utf-8", errors="replace") as f:
            yield os.path.relpath(path, ROOT), f.read()


_HEADINGS = {}  # type: dict


def headings(name):
    """The section numbers of docs/NAME ({"3", "3.3", ...}); None if there is no such file."""
    cache = _HEADINGS
    if name not in cache:
        path = os.path.join(ROOT, "docs", name)
        if not os.path.isfile(path):
            cache[name] = None
        else:
            with io.open(path, encoding="utf-8") as f:
                cache[name] = set(HEADING.findall(f.read()))
    return cache[name]


def numbers(listed):
    """'3.3, 3.4' -> ['3.3', '3.4']; '2-5' -> ['2', '5'] (the ends of a range)."""
    return re.findall(NUM, listed)


def check_references(relative, text):
    problems = []
    flat = WRAP.sub(" ", text)
    found = [(m, m.group("name"), m.group("ascii") or m.group("sign")) for m in DOC_REF.finditer(flat)]
    if relative.startswith("docs" + os.sep):
        found += [(m, m.group("name"), m.group("sign")) for m in LINK_REF.finditer(flat)]
    for m, name, listed in found:
        known = headings(name)
        if known is None:
            problems.append("%s: %r: there is no docs/%s" % (relative, m.group(0), name))
            continue
        for number in numbers(listed or ""):
            if number not in known:
                problems.append("%s: %r: docs/%s has no section %s" % (relative, m.group(0), name, number))
    return problems


def check_forbidden(relative, text):
    problems = []
    for number, line in enumerate(text.splitlines(), 1):
        for what, pattern in FORBIDDEN:
            m = pattern.search(line)
            if m and not (what == "an internal issue number" and OTHER_TRACKER.search(line)):
                problems.append("%s:%d: %s (%r): %s" % (relative, number, what, m.group(0), line.strip()[:100]))
    return problems


def test_docs_references_resolve():
    problems = []
    for relative, text in files():
        if relative != THIS:  # its docstring shows the forms with made-up names
            problems.extend(check_references(relative, text))
    assert not problems, "%d references do not resolve:\n%s" % (len(problems), "\n".join(problems[:60]))


def test_nothing_cites_outside_the_repository():
    problems = []
    for relative, text in files():
        if relative != THIS:
            problems.extend(check_forbidden(relative, text))
    assert not problems, "%d citations point outside the repository:\n%s" % (len(problems), "\n".join(problems[:60]))


def test_the_checks_themselves():
    """The patterns catch what they must and let the rest through."""
    good = u"x (docs/edk2.md section 3.3 Receive; docs/edk2.md sections 3.3, 3.4) docs/tls.md \u00a72.3"
    refs = [(m.group("name"), m.group("ascii") or m.group("sign")) for m in DOC_REF.finditer(good)]
    assert refs == [("edk2.md", "3.3"), ("edk2.md", "3.3, 3.4"), ("tls.md", "2.3")]
    wrapped = WRAP.sub(" ", u"see docs/edk2.md\n    # section 5.2: more")
    assert [m.group("ascii") for m in DOC_REF.finditer(wrapped)] == ["5.2"]
    assert numbers("2-5") == ["2", "5"]
    bad = ["(facts 3.3)", "../shared/x", "bits-efi-api item 2", "(issue 20 item 1)", "Issue 5's", "DESIGN rule 5"]
    for line in bad:
        assert check_forbidden("x", line), line
    fine = ["the issuer certificate", "Close() issues a FIN", "CPython issue 12345 (bpo-12345)", "the facts are"]
    for line in fine:
        assert not check_forbidden("x", line), line
    assert HEADING.findall(u"## \u00a73 TCP\n### \u00a73.3 Receive\n## 4. UDP\n### 4.1 Structures\n") == \
        ["3", "3.3", "4", "4.1"]
