// AF_XDP links through libxdp's xsk API: a UMEM per port, one AF_XDP socket per RX queue.
//
// XskPort owns the UMEM (frame size and count configurable) and hands out one XskLink per queue;
// the first queue's socket is created with xsk_socket__create, further ones share the UMEM
// (xsk_socket__create_shared) with fill and completion rings of their own. Each queue owns a
// disjoint slice of the UMEM's frames, so its poll thread keeps its own ledger and free pool
// and no two threads ever touch one frame list.
//
// The XDP program is not libxdp's: sockets are created with XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD
// and the caller puts each socket's fd in its own XSKMAP (stack/xdp). need_wakeup is always on.
//
// Jumbo frames (an interface MTU larger than a UMEM frame holds) need multi_buffer: the sockets
// bind with XDP_USE_SG, the kernel chains a long frame over several UMEM frames (XDP_PKT_CONTD
// on all but the last descriptor), and the XDP program must be loaded for frags. Under the Link
// seam a frame stays one buffer: a received chain is gathered into a large buffer of the link's
// own (its UMEM frames go straight back), and a frame longer than a UMEM frame is built in a
// large buffer and scattered into a chain at Transmit. One copy of each jumbo frame, none of any
// other.
//
//   XskPort::Options o{.interface = "veth0", .frames = 4096};
//   std::unique_ptr<XskPort> port = XskPort::Create(o).value();
//   std::unique_ptr<XskLink> q0 = port->OpenQueue(0).value();
//   xdp_program.SetXsk(0, q0->socket_fd());  // stack/xdp/xdp_program.h
//   LOG: q0->info().mode is "zerocopy" or "copy"
#ifndef QUADSOCK_STACK_LINK_XSK_LINK_H_
#define QUADSOCK_STACK_LINK_XSK_LINK_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "stack/link/frame_ledger.h"
#include "stack/link/link.h"

struct xsk_umem;
struct xsk_socket;
struct xsk_ring_prod;
struct xsk_ring_cons;

namespace quadsock::link {

enum class XskBindMode { kAuto, kZeroCopy, kCopy };

// The largest IP MTU whose frames fit a UMEM chunk of `frame_size` bytes as the kernel receives
// them (after its 256-byte headroom): a queue's LinkInfo::mtu is at most this.
uint32_t MaxMtu(uint32_t frame_size);
// The interface's MTU (SIOCGIFMTU).
absl::StatusOr<uint32_t> InterfaceMtu(const std::string& name);

// The error for a UMEM registration (XDP_UMEM_REG) of `umem_bytes` that failed with `err`. The
// kernel charges the UMEM to RLIMIT_MEMLOCK unless the process has CAP_IPC_LOCK, and refuses it
// past the limit with ENOBUFS (EPERM where no limit may be raised): those say how to fix it.
absl::Status UmemRegistrationError(int err, size_t umem_bytes);

class XskLink;

class XskPort {
 public:
  struct Options {
    std::string interface;
    uint32_t frames = 4096;        // UMEM frames in all, split evenly over the queues
    uint32_t frame_size = 4096;    // a power of two, 2048 or 4096
    uint32_t ring_size = 2048;     // each of fill, completion, RX and TX; a power of two
    uint32_t queues = 1;           // queues that will be opened (for splitting the frames)
    XskBindMode bind_mode = XskBindMode::kAuto;
    // Preferred busy polling: SO_PREFER_BUSY_POLL, SO_BUSY_POLL and SO_BUSY_POLL_BUDGET on each
    // socket, and Receive runs the device's NAPI in the caller's thread (a recvfrom). With the
    // interface's napi_defer_hard_irqs and gro_flush_timeout set, the kernel then leaves the
    // receive work to that thread while it keeps polling (no interrupts, no NAPI thread).
    // A socket that receives its first frames without a NAPI id (veth in copy mode) cannot be
    // busy-polled: the link then stops and counts busy_poll_unavailable.
    bool busy_poll = false;
    // Chain UMEM frames for frames longer than one (AF_XDP multi-buffer, Linux 6.6+): the
    // interface's whole MTU becomes the queues'. Without it, a queue's MTU is cut to MaxMtu.
    bool multi_buffer = false;
  };

  // FAILED_PRECONDITION when the interface does not exist; INVALID_ARGUMENT for bad sizes;
  // RESOURCE_EXHAUSTED when the UMEM cannot be registered (locked memory).
  static absl::StatusOr<std::unique_ptr<XskPort>> Create(const Options& options);
  ~XskPort();  // all XskLinks of the port must be gone first

  // Opens the AF_XDP socket of `queue`. In kAuto, tries zero-copy, then copy. The mode the
  // kernel bound (read back with XDP_OPTIONS: a queue that shares the UMEM takes the first
  // queue's mode, whatever it asked) is in the link's info().mode. PERMISSION_DENIED without
  // CAP_NET_RAW/CAP_BPF; FAILED_PRECONDITION in kZeroCopy where the driver has no zero-copy
  // or the kernel bound copy mode.
  absl::StatusOr<std::unique_ptr<XskLink>> OpenQueue(uint32_t queue);

  const Options& options() const { return options_; }
  uint32_t ifindex() const { return ifindex_; }
  const net::MacAddress& mac() const { return mac_; }
  uint32_t interface_mtu() const { return mtu_; }  // the queues' may be less: see MaxMtu

 private:
  friend class XskLink;
  XskPort() = default;

  Options options_;
  uint32_t ifindex_ = 0;
  net::MacAddress mac_;
  uint32_t mtu_ = 1500;
  void* area_ = nullptr;
  size_t area_size_ = 0;  // the mapping (whole 2 MiB units); the UMEM is frames * frame_size
  xsk_umem* umem_ = nullptr;
  std::unique_ptr<xsk_ring_prod> umem_fill_;
  std::unique_ptr<xsk_ring_cons> umem_comp_;
  bool umem_rings_used_ = false;
  std::vector<bool> queue_open_;
};

class XskLink : public Link {
 public:
  ~XskLink() override;

  const LinkInfo& info() const override { return info_; }
  size_t Receive(std::span<FrameBuffer> out) override;
  void Release(std::span<const FrameBuffer> frames) override;
  std::optional<FrameBuffer> AllocateTx(uint32_t length) override;
  size_t Transmit(std::span<const FrameBuffer> frames) override;
  void Poll() override;
  int wait_fd() const override { return fd_; }
  absl::Status CheckFrameAccounting() const override;
  LinkCounters counters() const override;
  bool IsBusyPolling() const override { return busy_poll_; }
  // The NAPI id the kernel recorded for the socket (SO_INCOMING_NAPI_ID): set when the queue's
  // frames arrive through a NAPI that busy polling can run; 0 before the first frame or when
  // there is none.
  uint32_t napi_id() const;

  // The AF_XDP socket, for the XSKMAP.
  int socket_fd() const { return fd_; }

 private:
  friend class XskPort;
  XskLink() = default;

  uint64_t ChunkOf(uint64_t addr) const;
  uint32_t IndexOf(uint64_t addr) const;
  FrameBuffer Buffer(uint64_t addr, uint32_t length) const;
  // Large buffers, for frames longer than a UMEM frame (multi_buffer); their handles are
  // kLargeHandle | index, outside any UMEM address.
  static constexpr uint64_t kLargeHandle = uint64_t{1} << 63;
  static bool IsLarge(uint64_t handle) { return (handle & kLargeHandle) != 0; }
  std::optional<FrameBuffer> TakeLarge();
  void ReleaseLarge(uint64_t handle);
  // The received chain of `count` descriptors from ring index `idx`, gathered into a large
  // buffer; nothing (counted) when none is free or the chain is longer than one. Its UMEM
  // frames go back to the free pool either way.
  std::optional<FrameBuffer> Gather(uint32_t idx, uint32_t count);
  // A received descriptor's UMEM frame, straight back to the free pool.
  void ReturnChunk(uint64_t addr);
  // Puts `frame` (a large buffer) on the TX ring as a chain of `chunks` UMEM frames from
  // ring index `idx`, and frees the large buffer.
  // A UMEM frame the caller holds into TX ring slot `idx` (reserved): the kernel's now.
  void PutTxDescriptor(const FrameBuffer& frame, uint32_t idx);
  void Scatter(const FrameBuffer& frame, uint32_t idx, uint32_t chunks);
  // Transmit for a batch of UMEM frames only (no jumbo frame to scatter, the common case): one
  // reservation of the TX ring for them all.
  size_t TransmitFrames(std::span<const FrameBuffer> frames);
  void Refill();
  void ReapCompletions();
  void Kick();
  bool IsTxRingDrained();
  void BusyPoll();

  XskPort* port_ = nullptr;
  LinkInfo info_;
  xsk_socket* xsk_ = nullptr;
  int fd_ = -1;
  std::unique_ptr<xsk_ring_cons> rx_;
  std::unique_ptr<xsk_ring_prod> tx_;
  xsk_ring_prod* fill_ = nullptr;  // the port's (first queue) or this link's own
  xsk_ring_cons* comp_ = nullptr;
  std::unique_ptr<xsk_ring_prod> own_fill_;
  std::unique_ptr<xsk_ring_cons> own_comp_;
  uint8_t* area_ = nullptr;
  uint32_t frame_size_ = 0;
  uint64_t first_addr_ = 0;  // this queue's slice of the UMEM
  FrameLedger ledger_{0};
  std::vector<uint64_t> free_;
  uint32_t tx_pending_kick_ = 0;
  uint32_t tx_reserve_ = 0;  // frames Refill keeps back for sending
  bool busy_poll_ = false;
  bool holds_queue_ = false;  // this link marked its queue open in the port (and clears it)
  bool multi_buffer_ = false;
  bool dropping_chain_ = false;  // the rest of a received chain that could not be taken
  std::vector<uint8_t> large_area_;
  uint32_t large_size_ = 0;  // bytes of each large buffer
  FrameLedger large_ledger_{0};
  std::vector<uint32_t> large_free_;
  LiveLinkCounters counters_;
};

}  // namespace quadsock::link

#endif  // QUADSOCK_STACK_LINK_XSK_LINK_H_
