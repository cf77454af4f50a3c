// AdminService over a Stack: interfaces, addresses, routes, neighbours, counters and the
// frame accounting check. The XDP program's counters come from a callback, so the service runs
// the same over a MemoryLink stack (tests, no XDP) and an AF_XDP one.
//
//   AdminServiceImpl admin(ctx, {.xdp_mode = "native", .xdp_counters = [&] {...}});
#ifndef QUADSOCK_SERVICE_ADMIN_SERVICE_H_
#define QUADSOCK_SERVICE_ADMIN_SERVICE_H_

#include <functional>
#include <optional>
#include <string>

#include "quadsock/v1/admin.grpc.pb.h"
#include "service/socket_service.h"

namespace quadsock::service {

struct DataPlaneInfo {
  std::string xdp_mode = "none";  // "native", "generic"; "none" without an XDP program
  std::function<std::optional<v1::XdpCounters>()> xdp_counters;
};

class AdminServiceImpl final : public v1::AdminService::Service {
 public:
  AdminServiceImpl(ServiceContext& context, DataPlaneInfo info)
      : c_(context), info_(std::move(info)) {}

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
  ServiceContext& c_;
  DataPlaneInfo info_;
};

}  // namespace quadsock::service

#endif  // QUADSOCK_SERVICE_ADMIN_SERVICE_H_
