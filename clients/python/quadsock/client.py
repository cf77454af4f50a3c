"""The pythonic wrapper over quadsockd's gRPC API (see quadsock/__init__.py for an example)."""

import collections
import queue
import threading

import grpc

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


def _error(e):
    """A failed call's grpc.RpcError as a QuadsockError."""
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
    return "[%s]:%d" % (e.address, e.port) if ":" in e.address else "%s:%d" % (e.address, e.port)


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
        return Socket(self, resp.socket)

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

    def __init__(self, client, handle):
        self._client = client
        self.handle = handle

    def __repr__(self):
        return "Socket(%s)" % self.handle[:8]

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
        """datagrams: payloads, or (payload, destination) pairs. Returns how many were queued."""
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

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
