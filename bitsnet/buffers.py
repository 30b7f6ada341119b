"""Byte and datagram queues for the endpoints: pure Python, bounded, no firmware.

``ByteQueue``      a TCP byte stream waiting to be read (or sent): a deque of immutable
                   chunks plus an offset into the first one, so appending is O(1) and
                   consuming n bytes costs O(n) however the data arrived (h11's
                   ``_receivebuffer`` makes the same trade). ``limit`` is the bound the owner
                   respects: ``full()`` tells it to stop refilling.
``DatagramQueue``  a bounded FIFO of ``(data, address)`` pairs for UDP; the oldest is kept
                   and the newest dropped when full, as a kernel drops on a full socket buffer.

Nothing here knows about EFI: an endpoint copies completed Receive data in with ``append``
and serves ``recv``/``recv_into``/``MSG_PEEK`` from it.
"""

import collections


class ByteQueue(object):
    """A FIFO of bytes with O(bytes) read, peek and readinto; see the module docstring."""

    __slots__ = ("limit", "_chunks", "_offset", "size")  # two per connection: see TcpEndpoint

    def __init__(self, limit=None):
        # type: (int) -> None
        self.limit = limit  # None: unbounded
        self._chunks = collections.deque()  # type: collections.deque   # of bytes
        self._offset = 0  # bytes of _chunks[0] already consumed
        self.size = 0  # bytes queued; hot paths read it directly rather than call len()/bool()

    def __len__(self):
        # type: () -> int
        return self.size

    def __bool__(self):
        return self.size > 0

    __nonzero__ = __bool__  # Python 2.7

    def space(self):
        # type: () -> int
        """Bytes that may still be appended before ``limit`` (a large number if unbounded)."""
        if self.limit is None:
            return 1 << 62
        return max(0, self.limit - self.size)

    def full(self):
        # type: () -> bool
        return self.limit is not None and self.size >= self.limit

    def append(self, data):
        # type: (bytes) -> None
        """Queue ``data`` (bytes, bytearray or memoryview; copied unless already bytes)."""
        if not data:
            return
        if not isinstance(data, bytes):
            data = memoryview(data).tobytes()  # bytes(memoryview) is its repr on Python 2.7
        self._chunks.append(data)
        self.size += len(data)

    def unread(self, data):
        # type: (bytes) -> None
        """Put ``data`` back at the front (a Transmit the firmware refused is retried later)."""
        if not data:
            return
        if self._offset:
            self._chunks[0] = self._chunks[0][self._offset:]
            self._offset = 0
        self._chunks.appendleft(data if isinstance(data, bytes) else memoryview(data).tobytes())
        self.size += len(data)

    def peek(self, n=None):
        # type: (int) -> bytes
        """Up to ``n`` bytes from the front (all if None), without consuming them."""
        return self._gather(n, consume=False)

    def read(self, n=None):
        # type: (int) -> bytes
        """Remove and return up to ``n`` bytes from the front (all if None)."""
        chunks = self._chunks
        if len(chunks) == 1 and not self._offset and (n is None or n >= self.size):
            # the request/response case (one received chunk, read whole), without _gather's calls
            self.size = 0
            return chunks.popleft()
        return self._gather(n, consume=True)

    def readinto(self, buffer, n=None, consume=True):
        """Copy up to ``n`` bytes (default: len(buffer)) into ``buffer``; returns the count."""
        view = memoryview(buffer)
        if hasattr(view, "cast") and (view.format != "B" or view.ndim != 1):
            view = view.cast("B")  # Python 3: byte-wise view of e.g. a ctypes array or array('i')
        limit = len(view) if n is None else min(n, len(view))
        limit = min(limit, self.size)
        copied = 0
        offset = self._offset
        index = 0
        while copied < limit:
            chunk = self._chunks[index]
            take = min(len(chunk) - offset, limit - copied)
            view[copied:copied + take] = chunk[offset:offset + take]
            copied += take
            offset += take
            if offset == len(chunk):
                index += 1
                offset = 0
        if consume:
            self.discard(copied)
        return copied

    def discard(self, n=None):
        # type: (int) -> int
        """Drop up to ``n`` bytes from the front (all if None); returns how many were dropped."""
        n = self.size if n is None else min(n, self.size)
        left = n
        while left:
            chunk = self._chunks[0]
            rest = len(chunk) - self._offset
            if left >= rest:
                self._chunks.popleft()
                self._offset = 0
                left -= rest
            else:
                self._offset += left
                left = 0
        self.size -= n
        return n

    def _gather(self, n, consume):
        n = self.size if n is None else max(0, min(n, self.size))
        if not n:
            return b""
        first = self._chunks[0]
        if self._offset == 0 and len(first) == n:  # the common case: one whole chunk
            if consume:
                self._chunks.popleft()
                self.size -= n
            return first
        if len(first) - self._offset >= n:  # inside the first chunk
            data = first[self._offset:self._offset + n]
        else:  # across chunks: one join; a whole chunk sliced whole is the object itself, uncopied
            parts = []
            offset, left = self._offset, n
            for chunk in self._chunks:
                part = chunk[offset:offset + left]
                parts.append(part)
                left -= len(part)
                offset = 0
                if not left:
                    break
            data = b"".join(parts)
        if consume:
            self.discard(n)
        return data


class DatagramQueue(object):
    """A bounded FIFO of ``(data, address)``; ``put`` drops (returns False) when full."""

    def __init__(self, max_datagrams=64, max_bytes=None):
        # type: (int, int) -> None
        self.max_datagrams = max_datagrams
        self.max_bytes = max_bytes
        self._items = collections.deque()  # type: collections.deque
        self._bytes = 0
        self.dropped = 0

    def __len__(self):
        return len(self._items)

    def __bool__(self):
        return bool(self._items)

    __nonzero__ = __bool__

    def full(self):
        # type: () -> bool
        if len(self._items) >= self.max_datagrams:
            return True
        return self.max_bytes is not None and self._bytes >= self.max_bytes

    def put(self, data, address):
        # type: (bytes, object) -> bool
        if self.full():
            self.dropped += 1
            return False
        if not isinstance(data, bytes):
            data = memoryview(data).tobytes()
        self._items.append((data, address))
        self._bytes += len(data)
        return True

    def peek(self):
        """The oldest ``(data, address)`` without removing it (IndexError if empty)."""
        return self._items[0]

    def get(self):
        """Remove and return the oldest ``(data, address)`` (IndexError if empty)."""
        data, address = self._items.popleft()
        self._bytes -= len(data)
        return data, address
