"""raw_http_get.py without the teardown: for the leak-ledger test.

    raw_leaky.py PORT [PATH]

Does the same exchange but never closes the connection, never destroys the TCP4 child and
never closes its events -- what a careless script leaves in the firmware. Run under
``tools/efirun.py --ledger``, the ledger line must show the child and the events.
"""

from __future__ import print_function

import sys

import raw_http_get  # the script's own directory is first on sys.path, as Python sets it

if __name__ == "__main__":
    sys.exit(raw_http_get.main(sys.argv, teardown=False))
