"""The pythonic wrapper over quadsockd's gRPC API (see quadsock/__init__.py for an example)."""

import collections
import queue
import threading
import time

import grpc

from quadsock.packed import unpack as unpack_batch
from quadsock.std import health_pb2, health_pb2_grpc, reflection_pb2, reflection_pb2_grpc
from quadsock.v1 import admin_pb2, admin_pb2_grpc, common_pb2, socket_pb2, socket_pb2_grpc

# What quadsockd and its clients agree on beyond the .proto files (common/protocol.h for C++):
# the metadata that carries the session token, and the clients' HTTP/2 keepalive in seconds.
SESSION_HEADER = "quadsock-session"
KEEPALIVE = 20.0
KEEPALIVE_TIMEOUT = 10.0

Datagram = collections.namedtuple("Datagram", "payload peer local arrival_unix_nanos sequence")


class QuadsockError(Exception):
    """A call failed; `code` is the grpc.StatusCode, `message` the server's explanation."""

    def __init__(self, code, message):
        super().__init__("%s: %s" % (code.name, message))
        self.code = code
        self.message = message


class PartialSendError(QuadsockError):
    """SendBatch failed at one of its datagrams: `queued` of them went before it, so a retry
    sends only the rest (`code` and `message` say what failed)."""

    def __init__(self, code, message, queued):
        super().__init__(code, message)
        self.queued = queued


def _details(e):
    """The messages a failed call carries in its details (grpc-status-details-bin, an
    ErrorStatus), unpacked where this client knows their type."""
    metadata = e.trailing_metadata() if hasattr(e, "trailing_metadata") else None
    for key, value in metadata or ():
        if key != "grpc-status-details-bin":
            continue
        status = socket_pb2.ErrorStatus.FromString(value)
        for any_detail in status.details:
            batch = socket_pb2.SendBatchResponse()
            if any_detail.Unpack(batch):
                yield batch


def _error(e):
    """A failed call's grpc.RpcError as a QuadsockError (a PartialSendError when the details
    say how many datagrams went)."""
    for detail in _details(e):
        return PartialSendError(e.code(), e.details(), detail.queued)
    return QuadsockError(e.code(), e.details())


def _status_of(m):
    """The code (a grpc.StatusCode) and message a response carries inside (StreamEnd, SendResult,
    SocketOpResult: an `int32 code`, google.rpc.Code, and a `string message`)."""
    return _STATUS_CODES[m.code], m.message


def _call(fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except grpc.RpcError as e:
        raise _error(e) from None


def parse_endpoint(value):
    """'10.1.0.2:53', '[fd00::2]:53' or ('10.1.0.2', 53) -> common_pb2.Endpoint."""
    if isinstance(value, common_pb2.Endpoint):
        return value
    if isinstance(value, tuple):
        host, port = value
    else:
        text = str(value)
        if text.startswith("["):
            host, _, port = text[1:].partition("]:")
        else:
            host, sep, port = text.rpartition(":")
            if not sep or ":" in host:
                raise ValueError("not an endpoint: %r (use 10.1.0.2:53 or [fd00::2]:53)" % text)
        port = int(port)
    return common_pb2.Endpoint(address=str(host), port=int(port))


def format_endpoint(e):
    return _host_port(e.address, e.port)


def _host_port(address, port):
    return "[%s]:%d" % (address, port) if ":" in address else "%s:%d" % (address, port)


def _add_datagrams(request, datagrams):
    """Adds payloads (to the connected peer) or (payload, destination) pairs to a request's
    repeated `datagrams`."""
    for d in datagrams:
        payload, destination = (d, None) if isinstance(d, (bytes, bytearray)) else d
        item = request.datagrams.add(payload=bytes(payload))
        if destination is not None:
            item.peer.CopyFrom(parse_endpoint(destination))


def _datagram(d):
    """A received socket_pb2.Datagram as a Datagram."""
    return Datagram(d.payload, format_endpoint(d.peer), format_endpoint(d.local),
                    d.arrival_unix_nanos, d.sequence)


# What an Exchange stream reports: datagrams received (a list of Datagram), and for a send
# whose datagrams did not all go, how many did and the first error (else None).
ExchangeEvent = collections.namedtuple("ExchangeEvent", "received send_failure")
SendFailure = collections.namedtuple("SendFailure", "queued code message")

_END = object()  # ends the request iterator


class Exchange:
    """One socket's Exchange stream: send() writes one request of any number of datagrams;
    events() yields what the server reports, as ExchangeEvents. A thread reads the stream into a
    bounded queue (so gRPC's flow control holds the server back when events() is not called).
    The stream ends at close() (or the end of a `with` block); when the socket is closed by
    anyone, events() raises QuadsockError NOT_FOUND, and the server's error otherwise."""

    def __init__(self, client, handle, backlog=1024):
        self._requests = queue.Queue()
        self._requests.put(socket_pb2.ExchangeRequest(socket=handle))  # starts the stream
        self._responses = client.stream("Exchange", iter(self._requests.get, _END))
        self._events = queue.Queue(maxsize=backlog)
        self._ended = None
        self._closed = False
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def send(self, datagrams):
        """datagrams: payloads (to the connected peer), or (payload, destination) pairs."""
        if self._ended is not None:
            raise self._ended
        request = socket_pb2.ExchangeRequest()
        _add_datagrams(request, datagrams)
        if not request.datagrams:
            raise ValueError("no datagrams to send")
        self._requests.put(request)

    def events(self, timeout=None):
        """Yields ExchangeEvents as they come; stops when `timeout` seconds pass without one."""
        while True:
            if self._ended is not None:
                raise self._ended
            try:
                r = self._events.get(timeout=timeout)
            except queue.Empty:
                return
            if isinstance(r, QuadsockError):
                self._ended = r
                raise r
            failure = None
            if r.HasField("send_result"):
                failure = SendFailure(r.send_result.queued, *_status_of(r.send_result))
            yield ExchangeEvent([_datagram(d) for d in r.datagrams], failure)

    def _read(self):
        # A stream the server ends with OK: the socket was closed.
        end = QuadsockError(grpc.StatusCode.NOT_FOUND, "the socket was closed")
        told = False  # the server said why in an `end` message (the call then ends CANCELLED)
        try:
            for r in self._responses:
                if r.HasField("end"):
                    end, told = QuadsockError(*_status_of(r.end)), True
                elif r.datagrams or r.HasField("send_result"):
                    self._events.put(r)
                if self._closed:
                    return
        except grpc.RpcError as e:
            if not told:
                end = _error(e)
        if not self._closed:
            self._events.put(end)

    def close(self):
        self._closed = True
        self._requests.put(_END)
        self._responses.cancel()
        while self._reader.is_alive():  # a reader blocked on a full queue gets room to end
            try:
                self._events.get(timeout=0.05)
            except queue.Empty:
                pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# A datagram that came on the session's data channel: `index` is its socket's index in the
# session, `socket` the Socket object when this client opened it (else None); the rest as in
# Datagram (a gap in a socket's `sequence` shows where datagrams were dropped).
ChannelDatagram = collections.namedtuple(
    "ChannelDatagram", "index socket payload peer local arrival_unix_nanos sequence")


class SendError(QuadsockError):
    """Some datagrams of a channel request did not go: `request` is the number send() or
    send_batch() returned for it, `queued` how many of its datagrams went before the failure
    (`code` and `message` say what failed)."""

    def __init__(self, code, message, request, queued):
        super().__init__(code, "request %d, %d queued: %s" % (request, queued, message))
        self.message = message
        self.request = request
        self.queued = queued


class Channel:
    """The session's data channel on a StreamChannel stream (Client.channel makes one).

    receive() / receive_batch() hand out the datagrams of all the channel's sockets, as
    ChannelDatagrams, and grant the server more credit as they do (half the window at a time),
    so the datagrams the client holds are bounded by the window. send() and send_batch() write
    one request each and return its number; a request whose datagrams did not all go comes back
    from receive() / receive_batch() as a SendError (in order with the datagrams), or, when the
    application does not receive, from send_failures(). When the stream ends otherwise, they
    raise its error: NOT_FOUND when the session ended, UNAVAILABLE when quadsockd stops.
    close() half-closes the stream and waits for the call to end, which it does with OK.
    One thread may receive while others send."""

    def __init__(self, client, sockets, credit, ring_slots, attach_timeout, packed=True):
        if credit < 1:
            raise ValueError("credit: the window must be at least 1 datagram")
        self._client = client
        self._window = int(credit)
        self._grant_at = max(1, self._window // 2)
        self._taken = 0          # datagrams handed to the application since the last grant
        self._lock = threading.Lock()  # orders requests: their numbers are the server's
        self._requests_made = 0
        self._requests = queue.Queue()
        self._ready = collections.deque()  # datagrams and SendErrors not yet handed out
        self._arrivals = queue.Queue()     # lists of them, from the reader thread
        self._failures = collections.deque()
        self.end = None          # why the stream ended: None while open or when it ended OK
        self._ended = False
        self._closing = False
        handles = None
        if sockets is not None:
            handles = [s.handle if isinstance(s, Socket) else str(s) for s in sockets]
            if not handles:
                raise ValueError("sockets: name at least one, or None for every socket")
        self._handles = handles
        # A socket already on a channel: the session has one, and this stream will end
        # ALREADY_EXISTS (or, when that one is ending, attach later).
        taken = attach_timeout and any(s.on_channel for s in self._socket_states())
        first = socket_pb2.ChannelRequest(sockets=handles or [], ring_slots=ring_slots,
                                          credit=self._window, packed=packed)
        self._put(first)
        self._responses = client.stream("StreamChannel", iter(self._requests.get, _END))
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        if attach_timeout:
            try:
                if taken:
                    self._reader.join(attach_timeout)
                self._wait_attached(attach_timeout)
            except BaseException:
                self._responses.cancel()
                raise

    # -- the stream --------------------------------------------------------------------------
    def _put(self, request):
        """Queues a request; returns its number (from 1, as the server counts them)."""
        with self._lock:
            if self._ended:
                raise self.end or QuadsockError(grpc.StatusCode.CANCELLED, "the channel is closed")
            self._requests_made += 1
            self._requests.put(request)
            return self._requests_made

    def _read(self):
        end = None
        try:
            for r in self._responses:
                if r.descriptors or r.payloads:
                    try:
                        items = [self._packed_datagram(*d)
                                 for d in unpack_batch(r.descriptors, r.payloads)]
                    except ValueError as e:  # nothing of the batch is handed out
                        end = QuadsockError(grpc.StatusCode.INTERNAL,
                                            "the data channel stream: %s" % e)
                        self._responses.cancel()
                        break
                else:
                    items = [self._datagram(d) for d in r.datagrams]
                for x in r.send_results:
                    code, message = _status_of(x)
                    items.append(SendError(code, message, x.request, x.queued))
                if items:
                    self._arrivals.put(items)
        except grpc.RpcError as e:
            if not (self._closing and e.code() == grpc.StatusCode.CANCELLED):
                end = _error(e)
        with self._lock:
            self._ended = True
            if end is None and not self._closing:
                end = QuadsockError(grpc.StatusCode.CANCELLED, "the server ended the channel")
            self.end = end
        self._requests.put(_END)  # frees gRPC's thread that waits for the next request
        self._arrivals.put(_END)

    def _datagram(self, d):
        return ChannelDatagram(d.socket, self._client.socket_by_index(d.socket), d.payload,
                               format_endpoint(d.peer), format_endpoint(d.local),
                               d.arrival_unix_nanos, d.sequence)

    def _packed_datagram(self, index, payload, peer, local, arrival, sequence):
        return ChannelDatagram(index, self._client.socket_by_index(index), payload,
                               _host_port(*peer), _host_port(*local), arrival, sequence)

    def _socket_states(self):
        """The channel's sockets as the server has them now (socket_pb2.Socket), those closed
        left out; a socket named but not the session's raises."""
        if self._handles is None:
            return self._client.list()
        mine = {s.socket: s for s in self._client.list()}
        for h in self._handles:
            if h not in mine:
                self._client.call("Get", socket_pb2.GetRequest(socket=h))  # says why
        return [mine[h] for h in self._handles if h in mine]

    def _wait_attached(self, timeout):
        """Until the sockets are on the channel (the server attaches after the first request
        and says nothing when it worked), or the stream's error."""
        deadline = time.monotonic() + timeout
        while True:
            if self._reader_ended():
                raise self.end or QuadsockError(grpc.StatusCode.CANCELLED, "channel closed")
            if all(s.on_channel for s in self._socket_states()):
                return
            if time.monotonic() > deadline:
                raise QuadsockError(grpc.StatusCode.DEADLINE_EXCEEDED,
                                    "the sockets were not on the channel within %gs" % timeout)
            time.sleep(0.01)

    def _reader_ended(self):
        with self._lock:
            return self._ended

    # -- receiving ---------------------------------------------------------------------------
    def _fill(self, timeout):
        """Moves arrivals to _ready, waiting up to `timeout` (None: forever) for the first.
        False when the stream ended and nothing is left."""
        block = not self._ready
        while True:
            try:
                items = self._arrivals.get(block=block, timeout=timeout if block else None)
            except queue.Empty:
                return True
            if items is _END:
                self._arrivals.put(_END)  # every later call sees the end too
                return bool(self._ready)
            self._ready.extend(items)
            block = False

    def _take(self):
        """The next item of _ready, to the application (a SendError is raised)."""
        item = self._ready.popleft()
        if isinstance(item, SendError):
            raise item
        self._taken += 1
        return item

    def _grant(self):
        """Gives the server back the credit of the datagrams taken, once half the window is."""
        if self._taken >= self._grant_at:
            grant, self._taken = self._taken, 0
            try:
                self._put(socket_pb2.ChannelRequest(credit=grant))
            except QuadsockError:
                pass  # the stream ended: the next receive says why

    def _raise_end(self):
        if self.end is not None:
            raise self.end
        raise QuadsockError(grpc.StatusCode.CANCELLED, "the channel is closed")

    def receive(self, timeout=None, count=None):
        """Yields ChannelDatagrams of any of the channel's sockets as they arrive; stops after
        `count` (None or 0: no limit) or when `timeout` seconds have passed in all (None:
        never). Raises SendError for a failed send (in order; receiving again continues) and
        the stream's error when it ends."""
        deadline = None if timeout is None else time.monotonic() + timeout
        seen = 0
        while not count or seen < count:
            if not self._ready:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return
                if not self._fill(left):
                    self._raise_end()
                if not self._ready:
                    return  # the time is up
            item = self._take()
            self._grant()
            yield item
            seen += 1

    def receive_batch(self, max_datagrams=1024, timeout=None):
        """Up to `max_datagrams` ChannelDatagrams: waits up to `timeout` seconds (None:
        forever) for the first, then takes what has already arrived. [] when the time is up.
        Raises as receive() does (a SendError after the datagrams before it were returned)."""
        if not self._fill(timeout):
            self._raise_end()
        out = []
        try:
            while self._ready and len(out) < max_datagrams:
                if isinstance(self._ready[0], SendError) and out:
                    break  # raised by the next call
                out.append(self._take())
                if not self._ready:
                    self._fill(0)
        finally:
            self._grant()  # one grant for the batch
        return out

    def __iter__(self):
        return self.receive()

    # -- sending -----------------------------------------------------------------------------
    def send(self, socket, payload, peer=None):
        """Sends one datagram from `socket` (a Socket or its index) to `peer` (None: the
        connected peer). Returns the request's number (a SendError names it)."""
        return self.send_batch([(socket, payload, peer)])

    def send_batch(self, datagrams):
        """Sends (socket, payload) or (socket, payload, peer) tuples in order, in one request
        (at most the server's batch limit, 1024 by default). Returns the request's number."""
        request = socket_pb2.ChannelRequest()
        for d in datagrams:
            sock, payload = d[0], d[1]
            peer = d[2] if len(d) > 2 else None
            item = request.send.add(socket=sock.index if isinstance(sock, Socket) else int(sock),
                                    payload=bytes(payload))
            if peer is not None:
                item.peer.CopyFrom(parse_endpoint(peer))
        if not request.send:
            raise ValueError("no datagrams to send")
        return self._put(request)

    def send_failures(self):
        """The SendErrors that arrived and have not been raised by receive(), oldest first, for
        an application that sends without receiving; taking them here, receive() no longer
        raises them."""
        self._fill(0)
        kept, failures = collections.deque(), []
        for item in self._ready:
            (failures if isinstance(item, SendError) else kept).append(item)
        self._ready = kept
        return failures

    # -- the end -----------------------------------------------------------------------------
    def close(self, timeout=5.0):
        """Half-closes the stream and waits (up to `timeout` s, then cancels) until the call
        ends; datagrams not yet received are dropped. Returns the stream's error when it ended
        with one (None: it ended OK)."""
        with self._lock:
            self._closing = True
            self._ended = True  # no request after the half-close
            self._requests.put(_END)
        deadline = time.monotonic() + timeout
        self._reader.join(timeout)
        if self._reader.is_alive():
            self._responses.cancel()
            self._reader.join()
        if self.end is None:
            # The server takes the sockets off the channel as the call ends: wait for it, so
            # that the session can have a channel again right away.
            try:
                while (any(s.on_channel for s in self._socket_states()) and
                       time.monotonic() < deadline):
                    time.sleep(0.01)
            except QuadsockError:
                pass  # the session ended meanwhile
        return self.end

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


_STATUS_CODES = {c.value[0]: c for c in grpc.StatusCode}

_FAMILIES = {"ipv4": common_pb2.FAMILY_IPV4, "ipv6": common_pb2.FAMILY_IPV6,
             4: common_pb2.FAMILY_IPV4, 6: common_pb2.FAMILY_IPV6}


def keepalive_options(keepalive=KEEPALIVE, keepalive_timeout=KEEPALIVE_TIMEOUT):
    """The channel options of the client's HTTP/2 keepalive, as the C++ client sets them: ping a
    connection quiet for `keepalive` seconds while a call (a stream) is open, and drop it when
    the ping is not answered within `keepalive_timeout`, so that a stream to a server that
    vanished fails with UNAVAILABLE instead of waiting for hours. quadsockd takes pings down to
    every 5 s. keepalive 0 or None: none (gRPC's default)."""
    if not keepalive:
        return []
    every = int(keepalive * 1000)
    return [
        ("grpc.keepalive_time_ms", every),
        ("grpc.keepalive_timeout_ms", int(keepalive_timeout * 1000)),
        # gRPC would otherwise stop after 2 pings on a quiet stream, and space them 5 min apart.
        ("grpc.http2.max_pings_without_data", 0),
        ("grpc.http2.min_time_between_pings_ms", every),
    ]


class Client:
    """A session with quadsockd. Closing it (or leaving the `with` block) closes its sockets.

    With hold=True (the default) a Session stream keeps the session alive for as long as the
    client lives; otherwise every call renews a lease of `lease_seconds`. With session=False
    there is none: for quadsockd's administration listener (unix:/run/quadsock-admin/admin.sock by
    default, as its user), whose AdminService needs none and is the one place where
    set_neighbor and remove_neighbor are allowed (elsewhere PERMISSION_DENIED). The channel keeps
    itself alive with HTTP/2 pings (see keepalive_options): a Session, Receive or Exchange
    stream to a server that stopped answering ends with UNAVAILABLE within about
    keepalive + keepalive_timeout seconds.
    """

    def __init__(self, target="unix:/run/quadsock/quadsock.sock", name="python",
                 lease_seconds=0, credentials=None, hold=True, keepalive=KEEPALIVE,
                 keepalive_timeout=KEEPALIVE_TIMEOUT, session=True):
        options = keepalive_options(keepalive, keepalive_timeout)
        if credentials is None:
            self._channel = grpc.insecure_channel(target, options=options)
        else:
            self._channel = grpc.secure_channel(target, credentials, options=options)
        self._sockets = socket_pb2_grpc.SocketServiceStub(self._channel)
        self._admin = admin_pb2_grpc.AdminServiceStub(self._channel)
        self._health = health_pb2_grpc.HealthStub(self._channel)
        self._reflection = reflection_pb2_grpc.ServerReflectionStub(self._channel)
        self._holder = None
        self._by_index = {}  # Socket objects this client opened, by their index in the session
        if not session:
            self.session, self.lease_seconds, self._metadata = None, 0, ()
            return
        resp = _call(self._sockets.CreateSession,
                     socket_pb2.CreateSessionRequest(client_name=name,
                                                     lease_seconds=lease_seconds))
        self.session = resp.session
        self.lease_seconds = resp.lease_seconds
        self._metadata = ((SESSION_HEADER, self.session),)
        if hold:
            self._holder = self._sockets.Session(socket_pb2.SessionRequest(),
                                                 metadata=self._metadata)
            next(self._holder)  # the server's hello: the session is held from here on

    # -- plumbing --------------------------------------------------------------------------
    def call(self, method, request, **kwargs):
        """Calls a SocketService method by name with this session's metadata."""
        return _call(getattr(self._sockets, method), request, metadata=self._metadata, **kwargs)

    def admin(self, method, request, **kwargs):
        return _call(getattr(self._admin, method), request, metadata=self._metadata, **kwargs)

    def stream(self, method, request, **kwargs):
        return getattr(self._sockets, method)(request, metadata=self._metadata, **kwargs)

    def close(self):
        if self._channel is None:
            return
        try:
            if self.session is not None:
                self.call("EndSession", socket_pb2.EndSessionRequest())
        except QuadsockError:
            pass  # already gone (lease lapsed, server stopped)
        if self._holder is not None:
            self._holder.cancel()
        self._channel.close()
        self._channel = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- sockets ---------------------------------------------------------------------------
    def open(self, family="ipv4", v6only=False, reuse_port=False, bound_device="",
             receive_queue_depth=0):
        if family not in _FAMILIES:
            raise ValueError("family: 'ipv4' or 'ipv6'")
        resp = self.call("Open", socket_pb2.OpenRequest(
            family=_FAMILIES[family], v6only=v6only, reuse_port=reuse_port,
            bound_device=bound_device, receive_queue_depth=receive_queue_depth))
        sock = Socket(self, resp.socket, resp.index)
        self._by_index[resp.index] = sock
        return sock

    def channel(self, sockets=None, credit=1024, ring_slots=0, attach_timeout=10.0,
                packed=True):
        """Opens the session's data channel as one StreamChannel stream: the datagrams of all
        its sockets (or of `sockets`, Socket objects or handles; None: every socket of the
        session, and those it opens later) on one stream, both ways. `credit` is the window:
        at most that many datagrams are on their way to the application or waiting in the
        client for it; more is granted as the application takes them. Datagrams that arrive
        while the window is full wait in quadsockd's ring (`ring_slots` a poll thread, 0: the
        server's default), and what overflows it is dropped and counted per socket
        (rx_dropped). Returns when the sockets are on the channel; raises QuadsockError (e.g.
        ALREADY_EXISTS: the session has a channel; PERMISSION_DENIED: another session's
        socket). `packed` asks for batches as the rings hold them (descriptors and payloads,
        decoded here), which costs quadsockd less than a message per datagram. Use it as a
        context manager:

            with client.channel() as ch:
                for d in ch.receive(timeout=5):
                    ch.send(d.index, b"echo: " + d.payload, d.peer)
        """
        return Channel(self, sockets, credit, ring_slots, attach_timeout, packed)

    def socket_by_index(self, index):
        """The Socket this client opened with that index in the session, or None."""
        return self._by_index.get(index)

    def list(self, state=0, local_port=0):
        """Every socket of this session (all pages)."""
        out, token = [], ""
        while True:
            resp = self.call("List", socket_pb2.ListRequest(state=state, local_port=local_port,
                                                            page_size=1000, page_token=token))
            out.extend(resp.sockets)
            token = resp.next_page_token
            if not token:
                return out

    # -- administration ----------------------------------------------------------------------
    def counters(self):
        return self.admin("GetCounters", admin_pb2.GetCountersRequest())

    def interfaces(self):
        return list(self.admin("ListInterfaces", admin_pb2.ListInterfacesRequest()).interfaces)

    def addresses(self):
        return list(self.admin("ListAddresses", admin_pb2.ListAddressesRequest()).prefixes)

    def routes(self):
        return list(self.admin("ListRoutes", admin_pb2.ListRoutesRequest()).routes)

    def neighbors(self):
        return list(self.admin("ListNeighbors", admin_pb2.ListNeighborsRequest()).neighbors)

    def set_neighbor(self, address, mac):
        """Needs the administration listener (Client(..., session=False)) or an mTLS identity
        in quadsockd --admin_identities: PERMISSION_DENIED otherwise."""
        self.admin("SetNeighbor", admin_pb2.SetNeighborRequest(address=address, mac=mac))

    def remove_neighbor(self, address):
        """As set_neighbor."""
        self.admin("RemoveNeighbor", admin_pb2.RemoveNeighborRequest(address=address))

    def check_frame_accounting(self):
        return self.admin("CheckFrameAccounting", admin_pb2.CheckFrameAccountingRequest()).ok

    def health(self, service=""):
        """'SERVING', 'NOT_SERVING', ... from the standard grpc.health.v1 service."""
        resp = _call(self._health.Check, health_pb2.HealthCheckRequest(service=service))
        return health_pb2.HealthCheckResponse.ServingStatus.Name(resp.status)

    def services(self):
        """The service names the server lists through reflection."""
        request = reflection_pb2.ServerReflectionRequest(list_services="*")
        for resp in _call(self._reflection.ServerReflectionInfo, iter([request])):
            return sorted(s.name for s in resp.list_services_response.service)
        return []


class Socket:
    """A UDP socket of quadsockd; closes itself when the `with` block ends."""

    def __init__(self, client, handle, index=0):
        self._client = client
        self.handle = handle
        self.index = index  # in the session: it tags the socket's datagrams on the data channel

    def __repr__(self):
        return "Socket(#%d %s)" % (self.index, (self.handle or "closed")[:8])

    def bind(self, local="0.0.0.0:0"):
        resp = self._client.call("Bind", socket_pb2.BindRequest(
            socket=self.handle, local=parse_endpoint(local)))
        return format_endpoint(resp.local)

    def connect(self, peer):
        resp = self._client.call("Connect", socket_pb2.ConnectRequest(
            socket=self.handle, peer=parse_endpoint(peer)))
        return format_endpoint(resp.local)

    def rehash(self, address=None, port=None):
        resp = self._client.call("Rehash", socket_pb2.RehashRequest(
            socket=self.handle, local_address=address or "",
            change_port=port is not None, local_port=port or 0))
        return format_endpoint(resp.local)

    def disconnect(self):
        self._client.call("Disconnect", socket_pb2.DisconnectRequest(socket=self.handle))

    def send(self, payload, destination=None):
        request = socket_pb2.SendRequest(socket=self.handle, payload=bytes(payload))
        if destination is not None:
            request.destination.CopyFrom(parse_endpoint(destination))
        self._client.call("Send", request)

    def send_batch(self, datagrams):
        """datagrams: payloads, or (payload, destination) pairs. Returns how many were queued.
        One that fails raises PartialSendError, whose `queued` says how many went before it."""
        request = socket_pb2.SendBatchRequest(socket=self.handle)
        _add_datagrams(request, datagrams)
        return self._client.call("SendBatch", request).queued

    def receive(self, timeout=None, count=None):
        """Yields Datagrams as they arrive; stops after `count`, or `timeout` seconds in all
        (count None or 0: no limit, as quadctl's --count=0). With a count the server sends no
        more than that, so datagrams past it stay queued on the socket for the next receive."""
        request = socket_pb2.ReceiveRequest(socket=self.handle, max_datagrams=count or 0)
        stream = self._client.stream("Receive", request, timeout=timeout)
        seen = 0
        try:
            for d in stream:
                yield _datagram(d)
                seen += 1
                if count and seen >= count:
                    return
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.DEADLINE_EXCEEDED:
                raise _error(e) from None
        finally:
            stream.cancel()

    def exchange(self):
        """Opens an Exchange stream on the socket: both directions on one call, for high rates.
        Use it as a context manager (leaving it ends the stream):

            with sock.exchange() as x:
                x.send([(b"ping", "10.1.0.1:5000")])
                for event in x.events(timeout=1.0): ...
        """
        return Exchange(self._client, self.handle)

    def receive_one(self, timeout=5.0):
        """The next datagram, or None after `timeout` seconds."""
        for d in self.receive(timeout=timeout, count=1):
            return d
        return None

    def get(self):
        return self._client.call("Get", socket_pb2.GetRequest(socket=self.handle))

    def close(self):
        if self.handle is None:
            return
        try:
            self._client.call("Close", socket_pb2.CloseRequest(socket=self.handle))
        finally:
            self.handle = None
            by_index = getattr(self._client, "_by_index", None)
            if by_index is not None and by_index.get(self.index) is self:
                del by_index[self.index]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
