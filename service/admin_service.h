// AdminService over a Stack: interfaces, addresses, routes, neighbours, counters and the
// frame accounting check. The XDP program's counters come from a callback, so the service runs
// the same over a MemoryLink stack (tests, no XDP) and an AF_XDP one.
//
// Who may do what (AdminAccess): on the ordinary listener every call needs a session, and the
// calls that change the neighbour table (SetNeighbor, RemoveNeighbor), which every client's
// traffic goes by, are PERMISSION_DENIED unless the caller's mTLS identity is an
// administrator's. On the administration listener, whose socket only the server's own user
// may open, calls need no session and may change it.
//
//   AdminServiceImpl admin(ctx, {.xdp_mode = "native", .xdp_counters = [&] {...}},
//                          {.admin_listen = "unix:/run/quadsock-admin/admin.sock"});
//   AdminServiceImpl admin_only(ctx, info, {.administration_listener = true});
#ifndef QUADSOCK_SERVICE_ADMIN_SERVICE_H_
#define QUADSOCK_SERVICE_ADMIN_SERVICE_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"

#include "quadsock/v1/admin.grpc.pb.h"
#include "stack/link/interface_watch.h"
#include "service/socket_service.h"

namespace quadsock::service {

struct DataPlaneInfo {
  std::string xdp_mode = "none";  // "native", "generic"; "none" without an XDP program
  std::function<std::optional<v1::XdpCounters>()> xdp_counters;
  // The served interface's watch (quadsockd's, outliving the server); none in tests.
  const link::InterfaceWatch* interface = nullptr;
};

struct AdminAccess {
  // This instance serves the administration listener: no sessions, and changes allowed.
  bool administration_listener = false;
  // On the ordinary listener: mTLS identities that may change the neighbour table too.
  std::vector<std::string> identities;
  // Where the administration listener is ("unix:PATH", "" for none): refusals point there.
  std::string admin_listen;
};

class AdminServiceImpl final : public v1::AdminService::Service {
 public:
  AdminServiceImpl(ServiceContext& context, DataPlaneInfo info, AdminAccess access = {})
      : c_(context),
        info_(std::move(info)),
        access_(std::move(access)),
        identities_(access_.identities.begin(), access_.identities.end()) {}

  grpc::Status ListInterfaces(grpc::ServerContext* ctx, const v1::ListInterfacesRequest* req,
                              v1::ListInterfacesResponse* resp) override;
  grpc::Status ListAddresses(grpc::ServerContext* ctx, const v1::ListAddressesRequest* req,
                             v1::ListAddressesResponse* resp) override;
  grpc::Status ListRoutes(grpc::ServerContext* ctx, const v1::ListRoutesRequest* req,
                          v1::ListRoutesResponse* resp) override;
  grpc::Status ListNeighbors(grpc::ServerContext* ctx, const v1::ListNeighborsRequest* req,
                             v1::ListNeighborsResponse* resp) override;
  grpc::Status SetNeighbor(grpc::ServerContext* ctx, const v1::SetNeighborRequest* req,
                           v1::SetNeighborResponse* resp) override;
  grpc::Status RemoveNeighbor(grpc::ServerContext* ctx, const v1::RemoveNeighborRequest* req,
                              v1::RemoveNeighborResponse* resp) override;
  grpc::Status GetCounters(grpc::ServerContext* ctx, const v1::GetCountersRequest* req,
                           v1::Counters* resp) override;
  grpc::Status CheckFrameAccounting(grpc::ServerContext* ctx,
                                    const v1::CheckFrameAccountingRequest* req,
                                    v1::CheckFrameAccountingResponse* resp) override;

  // The counters, also for the metrics endpoint.
  v1::Counters Collect() const;

 private:
  // A call that reads: a session on the ordinary listener, none on the administration one.
  absl::Status Admit(grpc::ServerContext* ctx);
  // A call that changes the neighbour table (`method`, for the message): PERMISSION_DENIED on
  // the ordinary listener unless the caller's identity is an administrator's.
  absl::Status AdmitChange(grpc::ServerContext* ctx, absl::string_view method);

  ServiceContext& c_;
  DataPlaneInfo info_;
  const AdminAccess access_;
  const absl::flat_hash_set<std::string> identities_;
};

}  // namespace quadsock::service

#endif  // QUADSOCK_SERVICE_ADMIN_SERVICE_H_
