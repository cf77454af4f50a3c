#include "clients/quadctl/commands.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "clients/cpp/client.h"
#include "clients/cpp/data_channel.h"
#include "common/status.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "google/protobuf/util/json_util.h"
#include "clients/quadctl/output.h"
#include "clients/quadctl/top.h"

namespace quadsock::quadctl {
namespace {

absl::Status SessionNew(Context& c) {
  v1::CreateSessionResponse r;
  r.set_session(c.client().session());
  r.set_lease_seconds(c.client().lease_seconds());
  if (c.json) {
    PrintJson(r);
  } else {
    std::cout << r.session() << "\n";
  }
  return absl::OkStatus();
}

absl::Status SessionKeepAlive(Context& c) {
  if (absl::Status s = c.client().KeepAlive(); !s.ok()) return s;
  if (c.json) PrintJson(v1::KeepAliveResponse());
  return absl::OkStatus();
}

absl::Status SessionEnd(Context& c) {
  absl::StatusOr<uint32_t> n = c.client().EndSession();
  if (!n.ok()) return n.status();
  v1::EndSessionResponse r;
  r.set_sockets_closed(*n);
  if (c.json) {
    PrintJson(r);
  } else {
    std::cout << "session ended, " << *n << " socket(s) closed\n";
  }
  return absl::OkStatus();
}

absl::Status Open(Context& c) {
  OpenOptions o;
  const std::string family = c.args.Get("family", "4");
  if (family == "4" || family == "ipv4") {
    o.family = v1::FAMILY_IPV4;
  } else if (family == "6" || family == "ipv6") {
    o.family = v1::FAMILY_IPV6;
  } else {
    throw UsageError(absl::StrCat("--family=", family, ": expected 4 or 6"));
  }
  o.v6only = c.args.Has("v6only");
  o.reuse_port = c.args.Has("reuse_port");
  o.bound_device = c.args.Get("device");
  o.receive_queue_depth = c.args.GetUint("queue_depth", 0);
  const std::string pmtu = c.args.Get("pmtu", "want");
  if (pmtu == "want") {
    o.pmtu_discovery = v1::PMTU_DISCOVERY_WANT;
  } else if (pmtu == "do") {
    o.pmtu_discovery = v1::PMTU_DISCOVERY_DO;
  } else if (pmtu == "dont") {
    o.pmtu_discovery = v1::PMTU_DISCOVERY_DONT;
  } else {
    throw UsageError(absl::StrCat("--pmtu=", pmtu, ": expected want, do or dont"));
  }
  absl::StatusOr<RemoteSocket> s = c.client().Open(o);
  if (!s.ok()) return s.status();
  v1::OpenResponse r;
  r.set_index(s->index());     // tags its datagrams on the data channel (watch)
  r.set_socket(s->Release());  // it lives on in the session
  if (c.json) {
    PrintJson(r);
  } else {
    std::cout << r.socket() << "\n";
  }
  return absl::OkStatus();
}

// bind, connect, rehash: print the local endpoint (JSON: {"local": {...}}).
absl::Status PrintLocal(Context& c, const absl::StatusOr<Endpoint>& local) {
  if (!local.ok()) return local.status();
  v1::BindResponse r;  // BindResponse, ConnectResponse and RehashResponse all are {local}
  *r.mutable_local() = local->ToProto();
  if (c.json) {
    PrintJson(r);
  } else {
    std::cout << local->ToString() << "\n";
  }
  return absl::OkStatus();
}

absl::Status Bind(Context& c) {
  const Endpoint local = ParseEndpointArg(c.Arg(1));
  RemoteSocket s = c.client().Attach(c.Arg(0));
  absl::StatusOr<Endpoint> r = s.Bind(local);
  s.Release();
  return PrintLocal(c, r);
}

absl::Status ConnectCmd(Context& c) {
  const Endpoint peer = ParseEndpointArg(c.Arg(1));
  RemoteSocket s = c.client().Attach(c.Arg(0));
  absl::StatusOr<Endpoint> r = s.Connect(peer);
  s.Release();
  return PrintLocal(c, r);
}

absl::Status Rehash(Context& c) {
  std::optional<uint16_t> port;
  if (c.args.Has("port")) port = static_cast<uint16_t>(c.args.GetUint("port", 0, 65535));
  const std::string address = c.args.Get("address");
  if (address.empty() && !port.has_value()) {
    throw UsageError("rehash: give --address, --port or both");
  }
  RemoteSocket s = c.client().Attach(c.Arg(0));
  absl::StatusOr<Endpoint> r = s.Rehash(address, port);
  s.Release();
  return PrintLocal(c, r);
}

template <typename Response>
absl::Status PrintEmpty(Context& c, absl::Status s) {
  if (s.ok() && c.json) PrintJson(Response());
  return s;
}

absl::Status Disconnect(Context& c) {
  RemoteSocket s = c.client().Attach(c.Arg(0));
  absl::Status st = s.Disconnect();
  s.Release();
  return PrintEmpty<v1::DisconnectResponse>(c, st);
}

absl::Status Close(Context& c) {
  RemoteSocket s = c.client().Attach(c.Arg(0));
  return PrintEmpty<v1::CloseResponse>(c, s.Close());
}

absl::Status Send(Context& c) {
  std::optional<Endpoint> to;
  if (c.args.Has("to")) to = ParseEndpointArg(c.args.Get("to"));
  const uint32_t repeat = c.args.GetUint("repeat", 1, 1024);
  // The server takes at most 1024 datagrams in one SendBatch: say so before connecting.
  const size_t payloads = c.args.positional.size() - 1;
  if (repeat * payloads > 1024) {
    throw UsageError(absl::StrCat("--repeat=", repeat, " with ", payloads, " payloads makes ",
                                  repeat * payloads, " datagrams: at most 1024 in one call"));
  }
  std::vector<Datagram> batch;
  for (uint32_t i = 0; i < repeat; ++i) {
    for (size_t a = 1; a < c.args.positional.size(); ++a) {
      Datagram d;
      if (c.args.Has("hex")) {
        const std::string& h = c.Arg(a);
        if (h.size() % 2 != 0 || !std::all_of(h.begin(), h.end(), ::isxdigit)) {
          throw UsageError(absl::StrCat("--hex: \"", h, "\" is not hex"));
        }
        d.payload = absl::HexStringToBytes(h);
      } else {
        d.payload = c.Arg(a);
      }
      if (to.has_value()) d.peer = *to;
      batch.push_back(std::move(d));
    }
  }
  RemoteSocket s = c.client().Attach(c.Arg(0));
  v1::SendBatchResponse r;
  absl::Status st;
  if (batch.size() == 1) {
    st = s.Send(batch[0].payload, to);
    if (st.ok()) r.set_queued(1);
  } else {
    absl::StatusOr<uint32_t> n = s.SendBatch(batch);
    st = n.status();
    if (n.ok()) r.set_queued(*n);
  }
  s.Release();
  if (std::optional<uint32_t> n = SendBatchQueued(st); n.has_value()) {
    // Part of the batch went: say how much, so that only the rest is sent again.
    return absl::Status(st.code(), absl::StrCat(st.message(), " (", *n, " of ", batch.size(),
                                                " datagrams queued before it)"));
  }
  if (!st.ok()) return st;
  if (c.json) {
    PrintJson(r);
  } else {
    std::cout << "queued " << r.queued() << "\n";
  }
  return absl::OkStatus();
}

absl::Status Recv(Context& c) {
  const uint32_t count = c.args.GetUint("count", 1);
  // Not --timeout: that is the global option, each call's deadline, and the two collided.
  const absl::Duration timeout = c.args.GetDuration("wait", absl::Seconds(5));
  const absl::Time deadline = absl::Now() + timeout;
  RemoteSocket s = c.client().Attach(c.Arg(0));
  auto print = [&c](const Datagram& d) {
    v1::Datagram out;
    out.set_payload(d.payload);
    *out.mutable_peer() = d.peer.ToProto();
    *out.mutable_local() = d.local.ToProto();
    out.set_arrival_unix_nanos(absl::ToUnixNanos(d.arrival));
    out.set_sequence(d.sequence);
    if (c.json) {
      PrintJson(out);
    } else {
      std::cout << DatagramLine(out, c.args.Has("hex")) << "\n";
    }
    std::cout.flush();
  };
  absl::Status result;
  if (count > 0) {
    // A stream the server ends after `count`: datagrams beyond them stay queued for the next
    // recv instead of being streamed here and dropped.
    absl::StatusOr<std::vector<Datagram>> got = s.ReceiveUpTo(count, timeout);
    if (got.ok()) {
      for (const Datagram& d : *got) print(d);
      if (got->size() < count) {
        result = absl::DeadlineExceededError(absl::StrCat("received ", got->size(), " of ", count,
                                                          " datagram(s) within ",
                                                          absl::FormatDuration(timeout)));
      }
    } else {
      result = got.status();
    }
  } else {
    // Until the timeout: what the server has streamed but not been printed then is lost.
    for (;;) {
      absl::StatusOr<Datagram> d =
          s.Receive(std::max(deadline - absl::Now(), absl::ZeroDuration()));
      if (!d.ok()) {
        if (d.status().code() != absl::StatusCode::kDeadlineExceeded) result = d.status();
        break;
      }
      print(*d);
    }
  }
  s.Release();
  return result;
}

// One datagram of the data channel, as watch prints it.
void PrintChannelDatagram(const Context& c, const v1::ChannelDatagram& d) {
  if (c.json) {
    PrintJson(d);
  } else {
    v1::Datagram line;
    line.set_payload(d.payload());
    *line.mutable_peer() = d.peer();
    *line.mutable_local() = d.local();
    line.set_sequence(d.sequence());
    std::cout << "socket " << d.socket() << ": " << DatagramLine(line, c.args.Has("hex")) << "\n";
  }
}

// What quadsockd has taken from a channel's TX ring for the session's sockets (or those named):
// their datagrams sent and refused, added up.
absl::StatusOr<uint64_t> SendsTaken(Client& client, const std::vector<std::string>& named) {
  absl::StatusOr<std::vector<v1::Socket>> sockets = client.List();
  if (!sockets.ok()) return sockets.status();
  uint64_t n = 0;
  for (const v1::Socket& s : *sockets) {
    if (named.empty() || std::find(named.begin(), named.end(), s.socket()) != named.end()) {
      n += s.counters().tx_datagrams() + s.counters().tx_dropped();
    }
  }
  return n;
}

// watch --shm: the same datagrams over the session's data channel in shared memory (the memfd
// and eventfds that Client::AttachChannel takes from the side socket beside quadsockd's Unix
// listener), a batch at a time. --echo sends each back to its sender, from the socket it came
// to, through the channel's TX ring: the smallest application (docker/README.md runs it in a
// container of its own).
absl::Status WatchSharedMemory(Context& c) {
  constexpr size_t kBatch = 64;
  const uint32_t count = c.args.GetUint("count", 0);
  const absl::Duration wait = c.args.GetDuration("wait", absl::ZeroDuration());
  const absl::Time deadline =
      wait > absl::ZeroDuration() ? absl::Now() + wait : absl::InfiniteFuture();
  const bool echo = c.args.Has("echo");
  const std::vector<std::string>& named = c.args.positional;
  Client& client = c.client();
  uint64_t taken_before = 0;
  if (echo) {
    absl::StatusOr<uint64_t> n = SendsTaken(client, named);
    if (!n.ok()) return n.status();
    taken_before = *n;
  }
  absl::StatusOr<std::unique_ptr<DataChannel>> attached = client.AttachChannel(
      {.sockets = named, .transport = ChannelTransport::kSharedMemory});
  if (!attached.ok()) return attached.status();
  DataChannel& ch = **attached;
  std::cerr << "quadctl: attached the data channel over shared memory\n";
  channel::ReceivedView batch[kBatch];
  uint64_t printed = 0, echoed = 0, not_echoed = 0;
  absl::Status status;
  // Nothing on shared memory renews the session's lease (a stream's call would): a KeepAlive
  // every second does, as quadctl does not know how short the lease is.
  absl::Time renew = absl::Now() + absl::Seconds(1);
  while ((count == 0 || printed < count) && absl::Now() < deadline) {
    if (absl::Now() >= renew) {
      status = client.KeepAlive();
      if (!status.ok()) break;
      renew = absl::Now() + absl::Seconds(1);
    }
    // With --count, no more than remain: what is not taken stays for the next reader.
    const size_t want = count == 0 ? kBatch : std::min<uint64_t>(kBatch, count - printed);
    const size_t n = ch.Receive(std::span(batch, want),
                                std::min(deadline - absl::Now(), absl::Milliseconds(200)));
    if (n == 0) {
      status = ch.ended();
      if (!status.ok()) break;
      continue;
    }
    for (size_t i = 0; i < n; ++i) {
      const channel::ReceivedView& d = batch[i];
      if (echo && ch.Send(d.socket, d.payload, d.peer)) {
        ++echoed;
      } else if (echo) {
        ++not_echoed;
      }
      v1::ChannelDatagram out;
      out.set_socket(d.socket);
      out.set_payload(d.payload.data(), d.payload.size());
      *out.mutable_peer() = Endpoint{d.peer.address.ToString(), d.peer.port}.ToProto();
      *out.mutable_local() = Endpoint{d.local.address.ToString(), d.local.port}.ToProto();
      out.set_arrival_unix_nanos(absl::ToUnixNanos(d.arrival));
      out.set_sequence(d.sequence);
      PrintChannelDatagram(c, out);
    }
    ch.Release();
    std::cout.flush();
    printed += n;
  }
  if (not_echoed > 0) {
    std::cerr << "quadctl: " << not_echoed << " answer(s) not sent: the TX ring was full\n";
  }
  // Answers still on the TX ring would end with the channel: stay attached until quadsockd has
  // taken them (the sockets' counters say so), for a few seconds at most.
  const absl::Time linger = absl::Now() + absl::Seconds(5);
  while (echoed > 0 && absl::Now() < linger) {
    absl::StatusOr<uint64_t> n = SendsTaken(client, named);
    if (!n.ok() || *n >= taken_before + echoed) break;
    absl::SleepFor(absl::Milliseconds(10));
  }
  if (!status.ok()) return status;
  if (count > 0 && printed < count) {
    return absl::DeadlineExceededError(absl::StrCat(
        "received ", printed, " of ", count, " datagram(s) within ", absl::FormatDuration(wait)));
  }
  return absl::OkStatus();
}

// watch: the datagrams of every socket of the session (or of those named) at once, on the
// session's data channel as one StreamChannel stream, granting credit as they are printed
// (--shm: in shared memory).
absl::Status Watch(Context& c) {
  if (c.args.Has("shm")) return WatchSharedMemory(c);
  if (c.args.Has("echo")) throw UsageError("--echo needs --shm");
  // Credit the server may use at once: what it sends beyond the printed lines is bounded.
  constexpr uint64_t kWindow = 256;
  const uint32_t count = c.args.GetUint("count", 0);
  const absl::Duration wait = c.args.GetDuration("wait", absl::ZeroDuration());
  Client& client = c.client();
  grpc::ClientContext ctx;
  if (wait > absl::ZeroDuration()) ctx.set_deadline(absl::ToChronoTime(absl::Now() + wait));
  auto stream = client.StreamChannel(&ctx);
  uint64_t printed = 0;
  uint64_t granted = 0;
  // The credit that keeps kWindow (with --count: no more than remain) on its way; when there
  // is nothing worth a request yet (less than half the window), none.
  auto grant = [&](bool first) -> uint32_t {
    const uint64_t target = count > 0 ? std::min<uint64_t>(kWindow, count - printed) : kWindow;
    const uint64_t more = target - std::min(target, granted - printed);
    if (!first && more < kWindow / 2 && (count == 0 || more == 0)) return 0;
    granted += more;
    return static_cast<uint32_t>(more);
  };
  v1::ChannelRequest request;
  for (const std::string& handle : c.args.positional) request.add_sockets(handle);
  request.set_credit(grant(true));
  bool open = stream->Write(request);
  v1::ChannelResponse r;
  while (open && (count == 0 || printed < count) && stream->Read(&r)) {
    for (const v1::ChannelDatagram& d : r.datagrams()) {
      PrintChannelDatagram(c, d);
      ++printed;
    }
    std::cout.flush();
    request.Clear();
    if (const uint32_t more = grant(false); more > 0) {
      request.set_credit(more);
      open = stream->Write(request);
    }
  }
  if (count > 0 && printed >= count) {
    // Done: half-close, and the server ends the call OK.
    stream->WritesDone();
    while (stream->Read(&r)) {
    }
  }
  absl::Status status = FromGrpc(stream->Finish());
  if (status.code() == absl::StatusCode::kDeadlineExceeded) {
    // The --wait is up: the end of the watch, unless --count datagrams were due.
    if (count == 0) return absl::OkStatus();
    return absl::DeadlineExceededError(absl::StrCat(
        "received ", printed, " of ", count, " datagram(s) within ", absl::FormatDuration(wait)));
  }
  return status;
}

absl::Status List(Context& c) {
  ListOptions o;
  const std::string state = c.args.Get("state");
  if (state == "open") {
    o.state = v1::SOCKET_STATE_OPEN;
  } else if (state == "bound") {
    o.state = v1::SOCKET_STATE_BOUND;
  } else if (state == "connected") {
    o.state = v1::SOCKET_STATE_CONNECTED;
  } else if (!state.empty()) {
    throw UsageError(absl::StrCat("--state=", state, ": expected open, bound or connected"));
  }
  o.local_port = static_cast<uint16_t>(c.args.GetUint("port", 0, 65535));
  absl::StatusOr<std::vector<v1::Socket>> sockets = c.client().List(o);
  if (!sockets.ok()) return sockets.status();
  if (c.json) {
    v1::ListResponse r;
    for (const v1::Socket& s : *sockets) *r.add_sockets() = s;
    PrintJson(r);
    return absl::OkStatus();
  }
  std::vector<std::vector<std::string>> rows;
  for (const v1::Socket& s : *sockets) {
    rows.push_back({s.socket(), s.family() == v1::FAMILY_IPV6 ? "ipv6" : "ipv4",
                    StateName(s.state()), Ep(s.local()), Ep(s.peer()),
                    s.in_hash4() ? "yes" : "no", absl::StrCat(s.counters().rx_datagrams()),
                    absl::StrCat(s.counters().tx_datagrams()),
                    absl::StrCat(s.counters().rx_dropped() + s.counters().tx_dropped()),
                    absl::StrCat(s.counters().queued())});
  }
  PrintTable({"SOCKET", "FAMILY", "STATE", "LOCAL", "PEER", "HASH4", "RX", "TX", "DROPPED",
              "QUEUED"},
             rows);
  return absl::OkStatus();
}

absl::Status Get(Context& c) {
  RemoteSocket s = c.client().Attach(c.Arg(0));
  absl::StatusOr<v1::Socket> info = s.Get();
  s.Release();
  if (!info.ok()) return info.status();
  if (c.json) {
    PrintJson(*info);
  } else {
    PrintFlat(*info);
  }
  return absl::OkStatus();
}

absl::Status Stats(Context& c) {
  absl::StatusOr<v1::Counters> counters = c.client().Counters();
  if (!counters.ok()) return counters.status();
  if (c.json) {
    PrintJson(*counters);
  } else {
    PrintFlat(*counters);
  }
  return absl::OkStatus();
}

absl::Status NeighList(Context& c) {
  absl::StatusOr<std::vector<v1::Neighbor>> n = c.client().Neighbors();
  if (!n.ok()) return n.status();
  if (c.json) {
    v1::ListNeighborsResponse r;
    for (const v1::Neighbor& x : *n) *r.add_neighbors() = x;
    PrintJson(r);
    return absl::OkStatus();
  }
  std::vector<std::vector<std::string>> rows;
  for (const v1::Neighbor& x : *n) {
    rows.push_back({x.address(), x.mac().empty() ? "-" : x.mac(), x.state(),
                    absl::StrCat(x.pending())});
  }
  PrintTable({"ADDRESS", "MAC", "STATE", "PENDING"}, rows);
  return absl::OkStatus();
}

absl::Status NeighSet(Context& c) {
  return PrintEmpty<v1::SetNeighborResponse>(c, c.client().SetNeighbor(c.Arg(0), c.Arg(1)));
}

absl::Status NeighDel(Context& c) {
  return PrintEmpty<v1::RemoveNeighborResponse>(c, c.client().RemoveNeighbor(c.Arg(0)));
}

absl::Status Routes(Context& c) {
  absl::StatusOr<std::vector<v1::Route>> routes = c.client().Routes();
  if (!routes.ok()) return routes.status();
  if (c.json) {
    v1::ListRoutesResponse r;
    for (const v1::Route& x : *routes) *r.add_routes() = x;
    PrintJson(r);
    return absl::OkStatus();
  }
  std::vector<std::vector<std::string>> rows;
  for (const v1::Route& x : *routes) {
    rows.push_back({x.destination(), x.gateway().empty() ? "connected" : x.gateway(),
                    x.source().empty() ? "-" : x.source()});
  }
  PrintTable({"DESTINATION", "GATEWAY", "SOURCE"}, rows);
  return absl::OkStatus();
}

absl::Status Addresses(Context& c) {
  absl::StatusOr<std::vector<std::string>> a = c.client().Addresses();
  if (!a.ok()) return a.status();
  if (c.json) {
    v1::ListAddressesResponse r;
    for (const std::string& p : *a) r.add_prefixes(p);
    PrintJson(r);
  } else {
    for (const std::string& p : *a) std::cout << p << "\n";
  }
  return absl::OkStatus();
}

absl::Status Interfaces(Context& c) {
  absl::StatusOr<std::vector<v1::Interface>> ifs = c.client().Interfaces();
  if (!ifs.ok()) return ifs.status();
  if (c.json) {
    v1::ListInterfacesResponse r;
    for (const v1::Interface& x : *ifs) *r.add_interfaces() = x;
    PrintJson(r);
    return absl::OkStatus();
  }
  std::vector<std::vector<std::string>> rows;
  for (const v1::Interface& x : *ifs) {
    rows.push_back({x.name(), absl::StrCat(x.ifindex()), x.mac(), absl::StrCat(x.mtu()),
                    x.xdp_mode(), x.bind_mode(), absl::StrCat(x.queues_size())});
  }
  PrintTable({"NAME", "IFINDEX", "MAC", "MTU", "XDP", "BIND", "QUEUES"}, rows);
  std::vector<std::vector<std::string>> queues;
  for (const v1::Interface& x : *ifs) {
    for (const v1::Queue& q : x.queues()) {
      const v1::QueueCounters& k = q.counters();
      // Busy polling: the recvfroms made to run the queue's NAPI, or why there are none.
      const std::string busy = k.busy_poll_unavailable() ? "unavailable"
                               : k.busy_polls() > 0     ? absl::StrCat(k.busy_polls())
                                                        : "off";
      queues.push_back({x.name(), absl::StrCat(q.queue()), q.mode(), absl::StrCat(k.rx_frames()),
                        absl::StrCat(k.tx_frames()), absl::StrCat(k.rx_dropped()),
                        absl::StrCat(k.tx_ring_full()), absl::StrCat(k.wakeups()), busy});
    }
  }
  if (!queues.empty()) {
    std::cout << "\n";
    PrintTable({"INTERFACE", "QUEUE", "MODE", "RX", "TX", "RX_DROPPED", "TX_RING_FULL", "WAKEUPS",
                "BUSY_POLLS"},
               queues);
  }
  return absl::OkStatus();
}

absl::Status Health(Context& c) {
  absl::StatusOr<HealthStatus> h = c.client().Health(c.args.Get("service"));
  if (!h.ok()) return h.status();
  const std::string name(HealthStatusName(*h));
  if (c.json) {
    std::cout << "{\"status\":\"" << name << "\"}\n";
  } else {
    std::cout << name << "\n";
  }
  if (*h != HealthStatus::kServing) c.exit_code = 1;
  return absl::OkStatus();
}

absl::Status Check(Context& c) {
  absl::Status s = c.client().CheckFrameAccounting();
  if (!s.ok()) return s;
  v1::CheckFrameAccountingResponse r;
  r.set_ok(true);
  if (c.json) {
    PrintJson(r);
  } else {
    std::cout << "frame accounting ok\n";
  }
  return absl::OkStatus();
}

}  // namespace

const std::vector<Command>& Commands() {
  using S = SessionUse;
  static const auto* commands = new std::vector<Command>{
      {"session new", "", "Start a session that outlives quadctl; prints its token", 0, 0, S::kCreate,
       {{"lease", true, "Seconds without a call before it ends (default: the server's)"},
        {"name", true, "A name for the server's logs (default quadctl)"}},
       SessionNew},
      {"session keepalive", "", "Renew the --session's lease", 0, 0, S::kRequired, {},
       SessionKeepAlive},
      {"session end", "", "End the --session now, closing its sockets", 0, 0, S::kRequired, {},
       SessionEnd},
      {"open", "", "Open a UDP socket in the session; prints its handle", 0, 0, S::kRequired,
       {{"family", true, "4 (default) or 6"},
        {"v6only", false, "IPv6 only (no v4-mapped traffic)"},
        {"reuse_port", false, "May share its address and port with other reuse_port sockets"},
        {"device", true, "Bind to this interface"},
        {"queue_depth", true, "Datagrams kept for recv (default: the server's)"},
        {"pmtu", true,
         "Over the path MTU: want (default: fragments; DF when it fits), do (refuse), dont "
         "(fragments; never DF)"}},
       Open},
      {"bind", "SOCKET ADDRESS:PORT", "Bind (0.0.0.0 / [::] for any address, port 0: ephemeral)",
       2, 2, S::kRequired, {}, Bind},
      {"connect", "SOCKET ADDRESS:PORT", "Connect to a peer (enters hash4); prints the local end",
       2, 2, S::kRequired, {}, ConnectCmd},
      {"rehash", "SOCKET", "Move a live socket to a new local address and/or port", 1, 1,
       S::kRequired,
       {{"address", true, "The new local address"},
        {"port", true, "The new local port (0: ephemeral)"}},
       Rehash},
      {"disconnect", "SOCKET", "Undo connect", 1, 1, S::kRequired, {}, Disconnect},
      {"send", "SOCKET PAYLOAD...", "Send datagrams (several: one SendBatch call)", 2, 1024,
       S::kRequired,
       {{"to", true, "Destination ADDRESS:PORT (required unless connected)"},
        {"hex", false, "Payloads are hex"},
        {"repeat", true, "Send the payloads this many times (at most 1024 datagrams in all)"}},
       Send},
      {"recv", "SOCKET", "Print received datagrams; fails if fewer than --count came in time", 1,
       1, S::kRequired,
       {{"count", true, "How many (default 1; 0: until --wait ends)"},
        {"wait", true, "How long to wait in all (default 5s)"},
        {"hex", false, "Print payloads as hex"}},
       Recv},
      {"watch", "[SOCKET...]",
       "Print the datagrams of every socket of the session (or those named) at once, through "
       "the session's data channel; fails if fewer than --count came in time",
       0, 1024, S::kRequired,
       {{"count", true, "Stop after this many (default 0: no limit)"},
        {"wait", true, "How long to watch in all (default: until interrupted)"},
        {"hex", false, "Print payloads as hex"},
        {"shm", false, "Over shared memory (quadsockd's Unix listener, same host) instead"},
        {"echo", false, "With --shm: send each datagram back to its sender"}},
       Watch},
      {"close", "SOCKET", "Close a socket", 1, 1, S::kRequired, {}, Close},
      {"list", "", "The session's sockets", 0, 0, S::kRequired,
       {{"state", true, "open, bound or connected"}, {"port", true, "Only this local port"}},
       List},
      {"get", "SOCKET", "One socket in detail, with its counters", 1, 1, S::kRequired, {}, Get},
      {"stats", "", "The server's counters (stack, socket table, queues, XDP)", 0, 0, S::kOwn, {},
       Stats},
      {"top", "",
       "A live view of the counters that moved since the last refresh, with rates per second "
       "(a refreshing screen on a terminal, a block of lines per refresh otherwise)",
       0, 0, S::kOwn,
       {{"interval", true, "Time between refreshes (default 1s)"},
        {"count", true, "Stop after this many refreshes (default 0: until interrupted)"}},
       Top},
      {"neigh list", "", "The neighbour cache (ARP/NDP)", 0, 0, S::kOwn, {}, NeighList},
      {"neigh set", "ADDRESS MAC", "Add a permanent neighbour entry (with --admin)", 2, 2,
       S::kOwn, {}, NeighSet},
      {"neigh del", "ADDRESS", "Remove a neighbour entry (with --admin)", 1, 1, S::kOwn, {},
       NeighDel},
      {"route", "", "The routes", 0, 0, S::kOwn, {}, Routes},
      {"addr", "", "The stack's own addresses", 0, 0, S::kOwn, {}, Addresses},
      {"iface", "", "Interfaces, XDP and bind modes, per-queue counters", 0, 0, S::kOwn, {},
       Interfaces},
      {"check", "", "Check that every UMEM frame is accounted for", 0, 0, S::kOwn, {}, Check},
      {"health", "", "grpc.health.v1: SERVING (exit 0) or not (exit 1); needs no session", 0, 0,
       S::kNone, {{"service", true, "A service name (default: the whole server)"}}, Health},
  };
  return *commands;
}

}  // namespace quadsock::quadctl
