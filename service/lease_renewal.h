// Renews a session's lease while one of its streams is open: the lease counts time without a
// call, and a stream is one call however long it lasts. Without it a `quadctl recv` longer than
// the lease lost the session and every socket in it, the streamed one too.
//
//   LeaseRenewal lease(sessions, token, identity);
//   while (streaming) { lease.Tick(); ... }   // cheap: renews at most once a wait slice
#ifndef QUADSOCK_SERVICE_LEASE_RENEWAL_H_
#define QUADSOCK_SERVICE_LEASE_RENEWAL_H_

#include <string>

#include "absl/time/time.h"
#include "service/service_context.h"
#include "service/sessions.h"
#include "stack/monotonic_clock.h"

namespace quadsock::service {

class LeaseRenewal {
 public:
  LeaseRenewal(Sessions& sessions, std::string token, std::string identity)
      : sessions_(sessions), token_(std::move(token)), identity_(std::move(identity)) {}
  // Cheap when called often: renews at most once a wait slice (leases are whole seconds).
  void Tick() {
    // Monotonic: a step back of the wall clock must not stop the renewals for as long.
    const absl::Time now = stack::MonotonicNow();
    if (now < next_) return;
    next_ = now + kWaitSlice;
    (void)sessions_.Touch(token_, identity_);  // a session ended meanwhile stays ended
  }

 private:
  Sessions& sessions_;
  const std::string token_;
  const std::string identity_;
  absl::Time next_ = absl::InfinitePast();
};

}  // namespace quadsock::service

#endif  // QUADSOCK_SERVICE_LEASE_RENEWAL_H_
