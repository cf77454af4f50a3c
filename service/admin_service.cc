#include "service/admin_service.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "service/channel_broker.h"
#include "service/convert.h"
#include "service/unix_listener.h"
#include "common/status.h"

namespace quadsock::service {
namespace {

void ToProto(const link::LinkCounters& c, v1::QueueCounters* out) {
  out->set_rx_frames(c.rx_frames);
  out->set_tx_frames(c.tx_frames);
  out->set_tx_ring_full(c.tx_ring_full);
  out->set_no_tx_buffer(c.no_tx_buffer);
  out->set_fill_ring_empty(c.fill_ring_empty);
  out->set_rx_dropped(c.rx_dropped);
  out->set_wakeups(c.wakeups);
  out->set_busy_polls(c.busy_polls);
  out->set_busy_poll_unavailable(c.busy_poll_unavailable != 0);
  out->set_rx_ring_fill(c.rx_ring_fill);
  out->set_rx_chained(c.rx_chained);
  out->set_tx_chained(c.tx_chained);
  out->set_rx_chains_dropped(c.rx_chains_dropped);
  out->set_tx_kicks_failed(c.tx_kicks_failed);
}

}  // namespace

absl::Status AdminServiceImpl::Admit(grpc::ServerContext* ctx) {
  if (access_.administration_listener) return c_.Admit(ctx);
  return c_.Session(ctx).status();
}

absl::Status AdminServiceImpl::AdmitChange(grpc::ServerContext* ctx, absl::string_view method) {
  if (access_.administration_listener) return c_.Admit(ctx);
  // The session first, as for every call here: UNAVAILABLE while shutting down, UNAUTHENTICATED
  // without a session, before the question of who the caller is.
  if (absl::Status s = c_.Session(ctx).status(); !s.ok()) return s;
  const std::string identity = ServiceContext::Identity(ctx);
  if (identity.empty() || !identities_.contains(identity)) {
    const std::string where =
        access_.admin_listen.empty()
            ? "this server has no administration listener: start quadsockd with --admin_listen "
              "and call it there"
            : absl::StrCat("call it on the administration listener ", access_.admin_listen,
                           " (quadctl --admin)");
    const std::string who =
        identity.empty() ? "the caller has no mTLS identity"
                         : absl::StrCat("the caller is \"", absl::CHexEscape(identity), "\"");
    return absl::PermissionDeniedError(absl::StrCat(
        method, " changes the neighbour table that all clients' traffic goes by, so it needs an "
        "administrator: ", where, ", or over mTLS as one of quadsockd's --admin_identities (",
        who, ")"));
  }
  return absl::OkStatus();
}

grpc::Status AdminServiceImpl::ListInterfaces(grpc::ServerContext* ctx,
                                              const v1::ListInterfacesRequest*,
                                              v1::ListInterfacesResponse* resp) {
  if (absl::Status s = Admit(ctx); !s.ok()) return ToGrpc(s);
  const std::vector<link::LinkInfo> links = c_.stack.Links();
  const std::vector<link::LinkCounters> counters = c_.stack.LinkCounters();
  // Links are queues; queues of one interface share its name.
  for (size_t i = 0; i < links.size(); ++i) {
    v1::Interface* iface = nullptr;
    for (v1::Interface& existing : *resp->mutable_interfaces()) {
      if (existing.name() == links[i].name) iface = &existing;
    }
    if (iface == nullptr) {
      iface = resp->add_interfaces();
      iface->set_name(links[i].name);
      iface->set_ifindex(links[i].ifindex);
      iface->set_mac(links[i].mac.ToString());
      iface->set_mtu(links[i].mtu);
      iface->set_xdp_mode(info_.xdp_mode);
      iface->set_bind_mode(links[i].mode);
    }
    if (iface->bind_mode() != links[i].mode) iface->set_bind_mode("mixed");
    v1::Queue* q = iface->add_queues();
    q->set_queue(links[i].queue);
    q->set_mode(links[i].mode);
    ToProto(counters[i], q->mutable_counters());
  }
  return grpc::Status::OK;
}

grpc::Status AdminServiceImpl::ListAddresses(grpc::ServerContext* ctx,
                                             const v1::ListAddressesRequest*,
                                             v1::ListAddressesResponse* resp) {
  if (absl::Status s = Admit(ctx); !s.ok()) return ToGrpc(s);
  for (const net::IpPrefix& p : c_.stack.Addresses()) resp->add_prefixes(p.ToString());
  return grpc::Status::OK;
}

grpc::Status AdminServiceImpl::ListRoutes(grpc::ServerContext* ctx, const v1::ListRoutesRequest*,
                                          v1::ListRoutesResponse* resp) {
  if (absl::Status s = Admit(ctx); !s.ok()) return ToGrpc(s);
  for (const net::IpPrefix& p : c_.stack.Addresses()) {
    // The connected network of each address.
    v1::Route* r = resp->add_routes();
    r->set_destination(p.Network().ToString());
    r->set_source(p.address().ToString());
  }
  for (net::Family f : {net::Family::kV4, net::Family::kV6}) {
    if (std::optional<net::IpAddress> gw = c_.stack.Gateway(f)) {
      v1::Route* r = resp->add_routes();
      r->set_destination(f == net::Family::kV4 ? "0.0.0.0/0" : "::/0");
      r->set_gateway(gw->ToString());
    }
  }
  return grpc::Status::OK;
}

grpc::Status AdminServiceImpl::ListNeighbors(grpc::ServerContext* ctx,
                                             const v1::ListNeighborsRequest*,
                                             v1::ListNeighborsResponse* resp) {
  if (absl::Status s = Admit(ctx); !s.ok()) return ToGrpc(s);
  for (const stack::NeighborInfo& n : c_.stack.Neighbors()) {
    v1::Neighbor* out = resp->add_neighbors();
    out->set_address(n.address.ToString());
    if (n.mac.has_value()) out->set_mac(n.mac->ToString());
    out->set_state(stack::NeighborStateName(n.state));
    out->set_pending(static_cast<uint32_t>(n.pending));
  }
  return grpc::Status::OK;
}

grpc::Status AdminServiceImpl::SetNeighbor(grpc::ServerContext* ctx,
                                           const v1::SetNeighborRequest* req,
                                           v1::SetNeighborResponse*) {
  if (absl::Status s = AdmitChange(ctx, "SetNeighbor"); !s.ok()) return ToGrpc(s);
  absl::StatusOr<net::IpAddress> ip = ParseAddress(req->address(), "address");
  if (!ip.ok()) return ToGrpc(ip.status());
  absl::StatusOr<net::MacAddress> mac = net::MacAddress::Parse(req->mac());
  if (!mac.ok()) return ToGrpc(absl::InvalidArgumentError(absl::StrCat("mac: ", mac.status().message())));
  return ToGrpc(c_.stack.SetNeighbor(*ip, *mac));
}

grpc::Status AdminServiceImpl::RemoveNeighbor(grpc::ServerContext* ctx,
                                              const v1::RemoveNeighborRequest* req,
                                              v1::RemoveNeighborResponse*) {
  if (absl::Status s = AdmitChange(ctx, "RemoveNeighbor"); !s.ok()) return ToGrpc(s);
  absl::StatusOr<net::IpAddress> ip = ParseAddress(req->address(), "address");
  if (!ip.ok()) return ToGrpc(ip.status());
  return ToGrpc(c_.stack.RemoveNeighbor(*ip));
}

v1::Counters AdminServiceImpl::Collect() const {
  v1::Counters out;
  const stack::StackCounters s = c_.stack.Counters();
  v1::StackCounters* sc = out.mutable_stack();
  for (int i = 1; i < net::kParseErrorCount; ++i) {
    if (s.parse_errors[i] != 0) {
      (*sc->mutable_parse_errors())[net::ParseErrorName(static_cast<net::ParseError>(i))] =
          s.parse_errors[i];
    }
  }
  // Every other field by its name: the API's StackCounters has a field for each entry of the
  // stack's counter list (admin_service_test checks that it does).
  const google::protobuf::Descriptor* d = sc->GetDescriptor();
  for (const stack::CounterInfo& i : stack::kStackCounterInfo) {
    if (const google::protobuf::FieldDescriptor* f = d->FindFieldByName(i.name)) {
      sc->GetReflection()->SetUInt64(sc, f, s.*i.field);
    }
  }

  const demux::TableStats t = c_.stack.TableStats();
  v1::TableCounters* tc = out.mutable_table();
  tc->set_lookups(t.lookups);
  tc->set_misses(t.misses);
  tc->set_hash4_hits(t.hash4_hits);
  tc->set_hash4_misses(t.hash4_misses);
  tc->set_hash2_lookups(t.hash2_lookups);
  tc->set_chain_steps(t.chain_steps);
  for (uint64_t b : t.chain_histogram) tc->add_chain_histogram(b);
  tc->set_resizes(t.resizes);
  tc->set_slots(t.slots);
  tc->set_sockets(t.sockets);
  tc->set_hash4_entries(t.hash4_entries);
  tc->set_memory_bytes(c_.stack.TableMemoryBytes());
  tc->set_hash4_enabled(c_.stack.hash4_enabled());

  const std::vector<link::LinkInfo> links = c_.stack.Links();
  const std::vector<link::LinkCounters> counters = c_.stack.LinkCounters();
  for (size_t i = 0; i < links.size(); ++i) {
    v1::Queue* q = out.add_queues();
    q->set_queue(links[i].queue);
    q->set_mode(links[i].mode);
    ToProto(counters[i], q->mutable_counters());
  }
  if (info_.xdp_counters) {
    if (std::optional<v1::XdpCounters> x = info_.xdp_counters()) *out.mutable_xdp() = *x;
  }
  if (info_.interface != nullptr) {
    out.set_interface_down(info_.interface->down());
    out.set_interface_mtu_changes(info_.interface->mtu_changes());
  }
  out.set_sessions(c_.sessions.size());
  out.set_sockets(t.sockets);
  uint64_t refused = 0, failures = 0;
  if (c_.unix_peers != nullptr) {
    refused += c_.unix_peers->refused();
    failures += c_.unix_peers->accept_failures();
  }
  if (c_.channels != nullptr) {
    refused += c_.channels->refused();
    failures += c_.channels->accept_failures();
  }
  out.set_stream_credit_waits(c_.stream_credit_waits.load(std::memory_order_acquire));
  out.set_stream_datagrams(c_.stream_datagrams.load(std::memory_order_relaxed));
  out.set_connections_refused(refused);
  out.set_accept_failures(failures);
  return out;
}

grpc::Status AdminServiceImpl::GetCounters(grpc::ServerContext* ctx,
                                           const v1::GetCountersRequest*, v1::Counters* resp) {
  if (absl::Status s = Admit(ctx); !s.ok()) return ToGrpc(s);
  *resp = Collect();
  return grpc::Status::OK;
}

grpc::Status AdminServiceImpl::CheckFrameAccounting(grpc::ServerContext* ctx,
                                                    const v1::CheckFrameAccountingRequest*,
                                                    v1::CheckFrameAccountingResponse* resp) {
  if (absl::Status s = Admit(ctx); !s.ok()) return ToGrpc(s);
  // Poll threads keep moving frames; the ledger and the rings agree exactly only at rest, so
  // this is checked as the rings see it now (the stack documents the tolerance).
  absl::Status s = c_.stack.CheckFrameAccounting();
  resp->set_ok(s.ok());
  return ToGrpc(s);
}

}  // namespace quadsock::service
