// The interface quadsockd serves, looked at again and again (quadsockd: once a second) for what
// an operator or the kernel may do to it under a running stack: take it down (or lose its
// carrier) and up again, change its MTU, delete it. The stack itself is not told: a down link
// simply brings no frames; quadsockd logs each change, counts it (admin Counters
// interface_down, interface_mtu_changes) and stops when the interface is gone or its MTU fell
// below the one the stack was built for.
//
// It follows the interface by index, as the XDP program and the AF_XDP sockets do: another
// interface made later under the same name is not it, and a renamed one still is.
//
//   std::unique_ptr<InterfaceWatch> w = InterfaceWatch::Start("eth0").value();
//   for (const InterfaceWatch::Change& c : w->Check()) Log(c.text);
#ifndef QUADSOCK_STACK_LINK_INTERFACE_WATCH_H_
#define QUADSOCK_STACK_LINK_INTERFACE_WATCH_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace quadsock::link {

class InterfaceWatch {
 public:
  // NOT_FOUND when there is no such interface; UNAVAILABLE when it cannot be read.
  static absl::StatusOr<std::unique_ptr<InterfaceWatch>> Start(const std::string& name);

  struct Change {
    enum class Kind { kGone, kDown, kUp, kMtu };
    Kind kind;
    std::string text;  // for the log: "eth0 is down (no carrier)"
    uint32_t old_mtu = 0, new_mtu = 0;  // kMtu
  };
  // What changed since the last look (or Start). Once the interface is gone, nothing more.
  std::vector<Change> Check();

  // Read from any thread.
  uint64_t down() const { return down_.load(std::memory_order_relaxed); }
  uint64_t mtu_changes() const { return mtu_changes_.load(std::memory_order_relaxed); }
  uint32_t mtu() const { return mtu_; }

 private:
  struct State {
    bool exists = false;
    std::string name;
    bool up = false;       // IFF_UP: the administrator's
    bool running = false;  // IFF_RUNNING: operationally up (the carrier; set by the kernel a
                           // moment after a change, so a look may see the one before)
    uint32_t mtu = 0;
  };
  explicit InterfaceWatch(unsigned index) : index_(index) {}
  State Read() const;

  const unsigned index_;
  State last_;
  uint32_t mtu_ = 0;
  std::atomic<uint64_t> down_{0};
  std::atomic<uint64_t> mtu_changes_{0};
};

}  // namespace quadsock::link

#endif  // QUADSOCK_STACK_LINK_INTERFACE_WATCH_H_
