"""bitsnet.errors: the one EFI status -> errno table and the exception classes' inheritance."""

from __future__ import print_function

import errno
import sys

import efi
import pytest

from bitsnet import errors


def test_exception_hierarchy_matches_cpython():
    if sys.version_info[0] >= 3:
        assert errors.error is OSError
    else:
        assert issubclass(errors.error, IOError) and errors.error is not IOError
    assert issubclass(errors.herror, errors.error)
    assert issubclass(errors.gaierror, errors.error)
    assert issubclass(errors.timeout, errors.error)
    if sys.version_info >= (3, 10):
        assert errors.timeout is TimeoutError


@pytest.mark.parametrize("status,op,expected", [
    (efi.EFI_CONNECTION_RESET, "connect", errno.ECONNREFUSED),  # EDK2's answer to RST-to-SYN
    (efi.EFI_CONNECTION_RESET, "recv", errno.ECONNRESET),
    (efi.EFI_INVALID_PARAMETER, "bind", errno.EADDRINUSE),  # TcpBind port clash
    (efi.EFI_INVALID_PARAMETER, "connect", errno.EINVAL),
    (efi.EFI_ACCESS_DENIED, "udp-bind", errno.EADDRINUSE),
    (efi.EFI_TIMEOUT, None, errno.ETIMEDOUT),
    (efi.EFI_NO_MAPPING, None, errno.EADDRNOTAVAIL),
    (efi.EFI_NETWORK_UNREACHABLE, None, errno.ENETUNREACH),
    (efi.EFI_UNSUPPORTED, None, errno.ENOPROTOOPT),
    (efi.EFI_VOLUME_FULL, None, errno.EIO),  # anything unexpected is still an errno, never a status
])
def test_errno_for(status, op, expected):
    assert errors.errno_for(status, op) == expected


def test_raise_for_status_raises_error_with_errno_and_the_status_name():
    errors.raise_for_status(efi.EFI_SUCCESS, "connect")  # no exception
    with pytest.raises(errors.error) as info:
        errors.raise_for_status(efi.EFI_CONNECTION_RESET, "connect")
    assert info.value.errno == errno.ECONNREFUSED
    assert "EFI_CONNECTION_RESET in connect" in str(info.value)
    assert not isinstance(info.value, efi.EFIException)


def test_efi_timeout_status_is_not_socket_timeout():
    # socket.timeout means *our* deadline; EDK2 giving up is ETIMEDOUT like a kernel's.
    with pytest.raises(errors.error) as info:
        errors.raise_for_status(efi.EFI_TIMEOUT, "connect")
    assert info.value.errno == errno.ETIMEDOUT
    if sys.version_info < (3, 10):
        assert not isinstance(info.value, errors.timeout)


def test_status_names_and_error_bit():
    assert errors.status_name(efi.EFI_CONNECTION_FIN) == "EFI_CONNECTION_FIN"
    assert errors.status_name(efi.EFI_ERROR | 0x7777).startswith("EFI status 0x")
    assert errors.is_error(efi.EFI_NOT_READY) and not errors.is_error(efi.EFI_SUCCESS)
    assert not errors.is_error(4)  # EFI_WARN_BUFFER_TOO_SMALL is a warning
