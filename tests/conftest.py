"""Fixtures shared by the whole suite: import paths, a fresh simulated machine per test, peers.

Every test that boots a machine gets the firmware's leak ledger checked at teardown: once the
test has torn down what it made, the firmware must hold no events, pool, children or tokens
for it, and no firmware-side fault (``FIRMWARE.crashes``) may have happened.
"""

from __future__ import print_function

import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for _path in (ROOT, os.path.join(ROOT, "tools"), os.path.join(ROOT, "tools", "efisim", "boot_python")):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from efisim import machine as _machine  # noqa: E402


def pytest_configure(config):
    config.addinivalue_line("markers", "machine(**options): MachineConfig options for the `machine` fixture")
    config.addinivalue_line("markers", "smoke: the subset run on the oldest supported Python 3")
    config.addinivalue_line("markers", "leaks_ok: the test deliberately leaves firmware objects behind")


@pytest.fixture
def machine(request):
    """A freshly booted simulated machine (options from @pytest.mark.machine(...))."""
    marker = request.node.get_closest_marker("machine") if hasattr(request.node, "get_closest_marker") \
        else request.node.get_marker("machine")
    options = dict(marker.kwargs) if marker else {}
    booted = _machine.boot(_machine.MachineConfig(**options))
    yield booted
    firmware = booted.firmware
    crashes = list(firmware.crashes)
    ledger = firmware.ledger()
    booted.shutdown()
    assert not crashes, "firmware faults:\n" + "\n".join(crashes)
    if not request.node.get_closest_marker("leaks_ok"):
        leaked = dict((k, v) for k, v in ledger.items() if v)
        assert not leaked, "firmware still holds %r after the test" % leaked
