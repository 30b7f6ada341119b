"""raw_http_get.py without the teardown: for the leak-ledger test.

    raw_leaky.py PORT [PATH]

Does the same exchange but never closes the connection, never destroys the TCP4 child and
never closes its events -- what a careless script leaves in the firmware. Run under
``tools/efirun.py --ledger``, the ledger line must show the child and the events.
"""

from __future__ import print_function

import os
import sys
import types


def load_sibling(name):
    """The module ``name`` from this script's directory. BITS puts no script directory on
    sys.path, so ``import raw_http_get`` would fail there: run its source as execfile would."""
    path = os.path.join(os.path.dirname(__file__), name + ".py")
    module = types.ModuleType(name)
    module.__file__ = path
    with open(path) as f:
        source = f.read()
    exec(compile(source, path, "exec"), module.__dict__)
    return module


raw_http_get = load_sibling("raw_http_get")

if __name__ == "__main__":
    sys.exit(raw_http_get.main(sys.argv, teardown=False))
