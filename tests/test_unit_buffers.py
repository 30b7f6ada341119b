"""bitsnet.buffers: ByteQueue and DatagramQueue, pure logic (no simulator)."""

from __future__ import print_function

import ctypes
import random

from bitsnet.buffers import ByteQueue, DatagramQueue

CHUNKS = [b"hello", b" ", b"wor", b"ld", b"!"]
TEXT = b"".join(CHUNKS)


def filled(limit=None):
    q = ByteQueue(limit)
    for chunk in CHUNKS:
        q.append(chunk)
    return q


def test_empty_queue_reads_nothing():
    q = ByteQueue()
    assert len(q) == 0 and not q
    assert q.read() == b"" and q.peek(10) == b"" and q.read(5) == b""
    assert q.readinto(bytearray(4)) == 0
    assert q.discard(3) == 0


def test_read_across_chunks_preserves_order_and_size():
    q = filled()
    assert len(q) == len(TEXT) and q
    assert q.read(3) == b"hel"
    assert q.read(4) == b"lo w"
    assert len(q) == len(TEXT) - 7
    assert q.read() == b"orld!"
    assert len(q) == 0 and not q


def test_peek_does_not_consume():
    q = filled()
    assert q.peek(7) == b"hello w"
    assert q.peek() == TEXT
    assert q.read(2) == b"he"
    assert q.peek(4) == b"llo "
    assert len(q) == len(TEXT) - 2


def test_read_more_than_available_returns_what_there_is():
    q = filled()
    assert q.read(1000) == TEXT and len(q) == 0


def test_whole_chunk_read_returns_the_chunk_itself():
    q = ByteQueue()
    data = b"x" * 100
    q.append(data)
    assert q.read(100) is data


def test_readinto_bytearray_memoryview_and_ctypes_buffer():
    q = filled()
    out = bytearray(6)
    assert q.readinto(out) == 6 and bytes(out) == b"hello "
    view = memoryview(bytearray(10))
    assert q.readinto(view, 3) == 3 and view[:3].tobytes() == b"wor"
    buf = ctypes.create_string_buffer(8)
    assert q.readinto(buf) == 3 and buf.raw[:3] == b"ld!"
    assert len(q) == 0


def test_readinto_without_consuming_is_a_peek():
    q = filled()
    out = bytearray(len(TEXT))
    assert q.readinto(out, consume=False) == len(TEXT) and bytes(out) == TEXT
    assert len(q) == len(TEXT)


def test_append_accepts_bytearray_and_memoryview_and_ignores_empty():
    q = ByteQueue()
    q.append(bytearray(b"ab"))
    q.append(memoryview(b"cd"))
    q.append(b"")
    assert q.read() == b"abcd"


def test_appended_data_is_copied_not_aliased():
    q = ByteQueue()
    source = bytearray(b"abc")
    q.append(source)
    source[0:3] = b"xyz"
    assert q.read() == b"abc"


def test_limit_space_and_full():
    q = ByteQueue(limit=10)
    assert q.space() == 10 and not q.full()
    q.append(b"12345678")
    assert q.space() == 2 and not q.full()
    q.append(b"90ab")  # the owner may overshoot by one delivery; the queue keeps it all
    assert q.full() and q.space() == 0 and len(q) == 12
    q.read(5)
    assert not q.full() and q.space() == 3
    assert ByteQueue().space() > 1 << 40 and not ByteQueue().full()


def test_discard_partial_and_all():
    q = filled()
    assert q.discard(7) == 7 and q.read(3) == b"orl"
    assert q.discard() == 2 and len(q) == 0


def test_random_operations_match_a_reference_bytes_object():
    rng = random.Random(1)
    q = ByteQueue()
    reference = b""
    for _ in range(3000):
        op = rng.randrange(5)
        if op == 0:
            data = bytes(bytearray(rng.randrange(256) for _ in range(rng.randrange(0, 50))))
            q.append(data)
            reference += data
        elif op == 1:
            n = rng.randrange(0, 60)
            assert q.read(n) == reference[:n]
            reference = reference[n:]
        elif op == 2:
            n = rng.randrange(0, 60)
            assert q.peek(n) == reference[:n]
        elif op == 3:
            out = bytearray(rng.randrange(0, 60))
            got = q.readinto(out)
            assert bytes(out[:got]) == reference[:got]
            reference = reference[got:]
        else:
            n = rng.randrange(0, 30)
            assert q.discard(n) == min(n, len(reference))
            reference = reference[n:]
        assert len(q) == len(reference)


def test_large_many_small_chunks_read_in_one_go_is_linear_enough():
    q = ByteQueue()
    for i in range(20000):
        q.append(("%05d" % i).encode("ascii"))
    data = q.read()
    assert len(data) == 100000 and data[:10] == b"0000000001"


def test_datagram_queue_fifo_and_bounds():
    q = DatagramQueue(max_datagrams=2)
    assert not q and len(q) == 0
    assert q.put(b"a", ("1.2.3.4", 5)) and q.put(bytearray(b"b"), ("1.2.3.4", 6))
    assert q.full() and not q.put(b"c", ("x", 1)) and q.dropped == 1
    assert q.peek() == (b"a", ("1.2.3.4", 5))
    assert q.get() == (b"a", ("1.2.3.4", 5))
    assert q.get() == (b"b", ("1.2.3.4", 6))
    assert not q


def test_datagram_queue_byte_bound():
    q = DatagramQueue(max_datagrams=100, max_bytes=10)
    assert q.put(b"x" * 8, None) and q.put(b"y" * 8, None)
    assert q.full() and not q.put(b"z", None)
    q.get()
    assert not q.full()


def test_unread_puts_data_back_in_front():
    q = filled()
    head = q.read(7)
    q.unread(head[4:])
    assert q.read() == b"o world!"
    q.unread(b"x")
    assert q.read() == b"x" and len(q) == 0
