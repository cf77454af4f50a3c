// quadsockd: quadsock's UDP stack on an AF_XDP interface, controlled over gRPC.
//
//   quadsockd --interface=veth0 --address=10.1.0.2/24,fd00:1::2/64
//             --listen=unix:/run/quadsock/quadsock.sock      (one command line)
//
// Starts the data plane (XDP program, AF_XDP sockets, poll threads), then the gRPC server, and
// says SERVING on grpc.health.v1 once both are up. SIGTERM or SIGINT: streams end with
// UNAVAILABLE, sockets close, the XDP program is detached, exit 0 within 5 seconds. SIGKILL
// leaves nothing behind: the program is attached as a bpf_link and dies with the process.
#include <signal.h>
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <iostream>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/flags/flag.h"
#include "absl/flags/internal/parse.h"
#include "absl/flags/internal/usage.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/did_you_mean.h"
#include "service/build_info.h"
#include "service/channel_broker.h"
#include "service/checksum_hint.h"
#include "service/metrics.h"
#include "service/metrics_http.h"
#include "service/server.h"
#include "stack/afxdp_stack.h"
#include "stack/link/errno_status.h"
#include "stack/link/interface_watch.h"
#include "stack/link/kernel_addresses.h"
#include "stack/link/nic_features.h"
#include "stack/neighbors.h"
#include "stack/net/ethernet.h"
#include "stack/xdp/library_log.h"

ABSL_FLAG(std::string, interface, "", "The network interface to run on (required), e.g. eth0.");
ABSL_FLAG(uint32_t, queues, 0,
          "RX queues to serve, 0..N-1: one AF_XDP socket and poll thread each. 0 (the default): "
          "all of the interface's (ethtool -l). Fewer than it has are refused, since the NIC "
          "spreads the stack's frames over all of them, unless --allow_unserved_queues.");
ABSL_FLAG(bool, allow_unserved_queues, false,
          "Start with --queues below the interface's RX queue count: for an interface whose "
          "ntuple rules (ethtool -N) steer all traffic for the stack's addresses, ARP and NDP "
          "too, to the served queues. Frames for the stack that reach another queue go to the "
          "kernel and are counted (redirect_no_xsk).");
ABSL_FLAG(std::vector<std::string>, address, {},
          "The stack's own addresses with prefix lengths (required), comma-separated or "
          "repeated on the command line (in a --flagfile, one line with the list): "
          "10.1.0.2/24,fd00:1::2/64. The kernel must not have them; all UDP, ICMP, ARP and NDP "
          "for them goes to quadsock. One that the kernel holds, on any interface, is refused "
          "unless --allow_kernel_address.");
ABSL_FLAG(bool, allow_kernel_address, false,
          "Start even if the kernel holds one of the --address values: on --interface both "
          "then answer for it and the kernel's traffic to it goes to quadsock; on another "
          "interface the host's own traffic to it stays in the kernel. Without it quadsockd "
          "refuses to start and names the kernel's address and interface (ip addr del ...).");
ABSL_FLAG(bool, verbose, false,
          "Log libbpf's and libxdp's own messages (\"libbpf: ...\") too, which quadsockd "
          "otherwise drops: its own errors say what failed.");
ABSL_FLAG(uint32_t, vlan, 0,
          "The 802.1Q VLAN id (1-4094) the addresses are on: only frames with that one tag are "
          "the stack's, and all it sends carry it. 0: untagged (the default): frames with a tag "
          "of another VLAN are not the stack's. XDP must see the tags: the interface's VLAN tag "
          "stripping on receive is turned off while quadsockd runs, whatever --vlan (ethtool -K "
          "IF rxvlan off, and rx-vlan-stag-hw-parse off), and back on at a clean exit (not "
          "after SIGKILL).");
ABSL_FLAG(std::vector<std::string>, gateway, {},
          "Default gateways, at most one per family, on a connected network: 10.1.0.1");
ABSL_FLAG(uint32_t, max_unresolved_neighbors, 256,
          "Neighbours being resolved at once (ARP or NDP asked, no answer yet), over every "
          "client: a datagram that would start one more is dropped and counted "
          "(neighbor_unresolved_full). Bounds what sending to many on-link addresses puts in the "
          "neighbour table; the gateway's entry is never evicted.");
ABSL_FLAG(uint32_t, max_unresolved_neighbors_per_client, 64,
          "Neighbours being resolved at once for one client session's datagrams; more are "
          "dropped and counted (neighbor_owner_unresolved_full). Not given: 64, or "
          "--max_unresolved_neighbors where that is lower.");
ABSL_FLAG(uint32_t, max_unresolved_neighbors_per_peer, 0,
          "Neighbours being resolved at once for the datagrams of one peer's (as "
          "--max_sessions_per_peer) sessions together; more are dropped and counted "
          "(neighbor_owner_unresolved_full), while the rest stays the others'. 0: half of "
          "--max_unresolved_neighbors.");
ABSL_FLAG(uint32_t, neighbor_probes_per_second, 256,
          "ARP requests and neighbour solicitations per second, all together, in bursts of up "
          "to one second's worth: a new resolution past it is refused (its datagram dropped) "
          "and a retransmission put off, both counted (neighbor_probes_rate_limited).");
ABSL_FLAG(std::string, xdp_mode, "auto",
          "auto: native XDP and zero-copy where the driver has them, else generic and copy; "
          "zerocopy: native XDP, zero-copy only; copy: native XDP, copy mode; skb: generic XDP "
          "(any interface, slowest).");
ABSL_FLAG(bool, hash4, true,
          "Demultiplex connected sockets with the 4-tuple hash (false: score them in hash2, "
          "as before Linux 6.13; for comparisons).");
ABSL_FLAG(uint32_t, umem_frames, 0,
          "UMEM frames in all (split over the queues). 0: 8192, or 4096 per queue (at least "
          "twice --ring_size per queue) where that is more.");
ABSL_FLAG(uint32_t, frame_size, 4096, "UMEM frame size: 2048 or 4096.");
ABSL_FLAG(uint32_t, ring_size, 2048, "Size of each AF_XDP ring (a power of two).");
ABSL_FLAG(bool, busy_poll, false,
          "Preferred busy polling: each poll thread runs its queue's NAPI itself (recvfrom on the "
          "AF_XDP socket, SO_PREFER_BUSY_POLL) and spins for 1 ms after the last frame. Also set "
          "the interface's napi_defer_hard_irqs (2) and gro_flush_timeout (200000). A queue whose "
          "socket has no NAPI id (veth in copy mode) stops busy polling at its first frames and "
          "reports busy_poll_unavailable in `quadctl --json iface`.");
constexpr uint32_t kMaxPollSpinUs = 1'000'000;
ABSL_FLAG(uint32_t, poll_spin_us, 0,
          "Microseconds each poll thread keeps polling its queue and the data channels after the "
          "last frame it received, yielding its CPU between turns, before it sleeps (at most "
          "1000000). 0: it sleeps at once. Spinning saves the wake-ups of a request and its "
          "answer, for the CPU it burns; give the poll threads CPUs of their own.");
ABSL_FLAG(uint32_t, max_sockets, 1 << 20, "Sockets in all, over every client.");
ABSL_FLAG(uint32_t, max_sockets_per_client, 65536, "Sockets one client session may hold.");
ABSL_FLAG(uint32_t, max_clients, 1024,
          "Client sessions at once, and connections to a Unix --listen socket at once (more are "
          "closed on arrival, logged and counted: connections_refused).");
ABSL_FLAG(uint32_t, max_streams_per_client, 16,
          "Session, Receive and Exchange streams one client session may have open at once; "
          "more are RESOURCE_EXHAUSTED.");
ABSL_FLAG(uint32_t, max_sessions_per_peer, 0,
          "Client sessions one peer may hold at once: a peer is an mTLS identity; without mTLS "
          "a client's user (uid) on a Unix socket, or its host on TCP (IPv6: its /64); more are "
          "RESOURCE_EXHAUSTED. 0: half of --max_clients. On a Unix socket it caps a user's "
          "connections too. A session on a Unix socket is its user's: another user's calls with "
          "its token are PERMISSION_DENIED (root's are not).");
ABSL_FLAG(uint32_t, max_streams_per_peer, 0,
          "Session, Receive and Exchange streams one peer (as --max_sessions_per_peer) may have "
          "open at once, over all its sessions; more are RESOURCE_EXHAUSTED. 0: half of "
          "--max_grpc_threads.");
ABSL_FLAG(uint32_t, max_sockets_per_peer, 0,
          "Sockets one peer (as --max_sessions_per_peer) may hold over all its sessions; more "
          "are RESOURCE_EXHAUSTED. 0: half of --max_sockets.");
ABSL_FLAG(uint32_t, max_grpc_threads, 1024,
          "gRPC's threads for calls in all: each open stream holds one; calls beyond them fail "
          "with RESOURCE_EXHAUSTED.");
ABSL_FLAG(uint32_t, receive_queue_depth, 256, "Datagrams a socket keeps unless Open asks.");
ABSL_FLAG(uint32_t, max_receive_queue_depth, 65536, "The most a client may ask for.");
ABSL_FLAG(uint32_t, max_receive_mib, 512,
          "MiB that all sockets' receive queues may hold together, over every client: each "
          "queue's cells (16 bytes per datagram of its depth, taken at Open for the socket's "
          "life: an Open past it is RESOURCE_EXHAUSTED) and the datagrams queued (payloads and "
          "their records: past it they are dropped and counted, receive_budget_full, like a full "
          "queue). At the default depth of 256 a socket takes 4 KiB: a million sockets need "
          "4096.");
ABSL_FLAG(uint32_t, max_receive_mib_per_peer, 0,
          "MiB of --max_receive_mib one peer (as --max_sessions_per_peer) may take with its "
          "sockets' queues and datagrams, over all its sessions: past it its Opens are "
          "RESOURCE_EXHAUSTED and its datagrams dropped (receive_budget_full), while the rest "
          "stays the others'. 0: half of --max_receive_mib.");
ABSL_FLAG(uint32_t, reassembly_kib, 4096,
          "KiB that IP fragments waiting for the rest of their datagram may hold in all (as "
          "Linux's ipfrag_high_thresh, 4 MiB), shared by the RX queues' poll threads; one source "
          "(an IPv6 /64) holds at most a sixteenth of a poll thread's share, and at least one "
          "largest datagram. Past it the oldest datagrams are dropped (reassembly_evicted).");
ABSL_FLAG(uint32_t, channel_ring_slots, 1024,
          "Datagrams each ring of a session's data channel holds (AttachChannel, StreamChannel) "
          "unless the client asks; a power of two. Past it datagrams are dropped and counted.");
ABSL_FLAG(uint32_t, max_channel_mib, 256,
          "Memory a session's data channel may take, in MiB (its rings: one per queue).");
ABSL_FLAG(uint32_t, max_all_channels_mib, 1024,
          "Memory all sessions' data channels may take together, in MiB: past it a new channel "
          "(AttachChannel, StreamChannel) is RESOURCE_EXHAUSTED until others end.");
ABSL_FLAG(uint32_t, max_channel_mib_per_peer, 0,
          "Memory one peer's (as --max_sessions_per_peer) sessions' data channels may take "
          "together, offered or attached, in MiB; past it its new channel is RESOURCE_EXHAUSTED "
          "while the rest stays the others'. 0: half of --max_all_channels_mib.");
ABSL_FLAG(uint32_t, max_message_bytes, 4 << 20, "Largest gRPC message, in bytes.");
ABSL_FLAG(uint32_t, lease_seconds, 30,
          "Seconds without a call before a client's session and sockets are closed (an open "
          "Receive or Exchange stream renews it; a Session stream holds it).");
ABSL_FLAG(std::string, listen, "unix:/run/quadsock/quadsock.sock",
          "Where clients connect: unix:PATH (mode 0660; each client is known by its uid) or "
          "HOST:PORT (needs --tls_cert, --tls_key and --tls_client_ca, or "
          "--allow_unauthenticated_tcp).");
ABSL_FLAG(std::string, admin_listen, "unix:/run/quadsock-admin/admin.sock",
          "The administration listener: unix:PATH, made with mode 0600 so that only quadsockd's "
          "own user (root) may connect, in a folder made 0700 if missing (keep it out of the "
          "folders client containers mount); empty: none. It serves AdminService, "
          "grpc.health.v1 and server reflection "
          "with no session (`quadctl --admin ...`), and only there may the neighbour table, "
          "which all clients' traffic goes by, be changed (SetNeighbor, RemoveNeighbor: "
          "`quadctl --admin neigh set`). On --listen those are PERMISSION_DENIED unless the "
          "caller's mTLS identity is in --admin_identities; reading (neigh list, stats, ...) "
          "works on both, with a session on --listen.");
ABSL_FLAG(std::string, admin_identities, "",
          "mTLS client identities that may change the neighbour table on --listen too, "
          "separated by ';' (a subject has commas): each the client certificate's subject as "
          "the session log shows it (\"created for ... as CN=ops\"), e.g. "
          "'CN=ops;CN=noc,O=Example'. Needs --tls_client_ca.");
ABSL_FLAG(std::string, tls_cert, "", "Server certificate (PEM), for a TCP listener.");
ABSL_FLAG(std::string, tls_key, "", "Server private key (PEM).");
ABSL_FLAG(std::string, tls_client_ca, "",
          "CA (PEM) that signs client certificates: clients must present one (mTLS), and "
          "sessions belong to its identity. Needed on a TCP --listen unless "
          "--allow_unauthenticated_tcp.");
ABSL_FLAG(bool, allow_unauthenticated_tcp, false,
          "Serve a TCP --listen without client certificates (no --tls_client_ca): anyone who "
          "reaches the port may then open sockets and send UDP from this node's addresses.");
ABSL_FLAG(std::string, metrics_listen, "",
          "HOST:PORT for Prometheus metrics (GET /metrics), e.g. 127.0.0.1:9464; empty: off.");

namespace quadsock {
namespace {

void Log(absl::string_view message) {
  std::fprintf(stderr, "%s quadsockd: %.*s\n",
               absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone()).c_str(),
               static_cast<int>(message.size()), message.data());
}

int Fail(absl::string_view what, const absl::Status& s) {
  Log(absl::StrCat(what, ": ", s.ToString()));
  return 1;
}

// A flag on the command line that quadsockd does not have, with the one meant if it is near:
// absl's own error ("Unknown command line flag 'interfac'") names no other. A --flagfile's
// flags are left to absl, and so is everything when --undefok allows unknown ones.
absl::Status CheckFlagNames(int argc, char** argv) {
  // absl's usage flags, which its registry does not list.
  static constexpr absl::string_view kUsageFlags[] = {
      "help", "helpfull", "helpshort", "helppackage", "helpon", "helpmatch", "version",
      "only_check_args"};
  auto is_flag = [](absl::string_view name) {
    return absl::FindCommandLineFlag(name) != nullptr || absl::c_linear_search(kUsageFlags, name);
  };
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (arg == "--") break;
    if (!absl::ConsumePrefix(&arg, "--") && !absl::ConsumePrefix(&arg, "-")) continue;
    const absl::string_view name = arg.substr(0, arg.find('='));
    if (name == "undefok") return absl::OkStatus();
    absl::string_view negated = name;  // --nohash4
    if (is_flag(name) || (absl::ConsumePrefix(&negated, "no") && is_flag(negated))) continue;
    std::vector<std::string> known(std::begin(kUsageFlags), std::end(kUsageFlags));
    for (const auto& [flag_name, flag] : absl::GetAllFlags()) known.emplace_back(flag_name);
    std::sort(known.begin(), known.end());  // DidYouMean takes the first of equally near ones
    const std::optional<std::string> meant = DidYouMean(name, known);
    return absl::InvalidArgumentError(
        absl::StrCat("unknown flag --", name,
                     meant ? absl::StrCat(" (did you mean --", *meant, "?)") : "",
                     "; --help lists them"));
  }
  return absl::OkStatus();
}

// --address may be repeated on the command line as well as comma-separated; absl keeps only
// the last occurrence, so the command line's are collected before parsing. Without any there,
// the parsed value (from a --flagfile, say) is `parsed`.
std::vector<std::string> AllOccurrences(int argc, char** argv, const std::string& flag,
                                        const absl::Flag<std::vector<std::string>>& parsed) {
  std::vector<std::string> out;
  const std::string eq = "--" + flag + "=";
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    if (arg.rfind(eq, 0) == 0) {
      value = arg.substr(eq.size());
    } else if ((arg == "--" + flag) && i + 1 < argc) {
      value = argv[++i];
    } else {
      continue;
    }
    for (absl::string_view v : absl::StrSplit(value, ',', absl::SkipEmpty())) out.emplace_back(v);
  }
  if (out.empty()) {
    for (const std::string& v : absl::GetFlag(parsed)) {
      if (!v.empty()) out.push_back(v);
    }
  }
  return out;
}

// --admin_identities, split at ';' (an identity is a certificate subject: "CN=a,O=b").
std::vector<std::string> AdminIdentities() {
  std::vector<std::string> out;
  for (absl::string_view id :
       absl::StrSplit(absl::GetFlag(FLAGS_admin_identities), ';', absl::SkipWhitespace())) {
    out.emplace_back(absl::StripAsciiWhitespace(id));
  }
  return out;
}

// A TCP --listen: TLS always, and client certificates unless the operator says otherwise, since
// any client may send UDP from the node's NIC.
absl::Status CheckTcpListen() {
  const std::string listen = absl::GetFlag(FLAGS_listen);
  if (absl::StartsWith(listen, "unix:")) return absl::OkStatus();
  if (absl::GetFlag(FLAGS_tls_cert).empty() || absl::GetFlag(FLAGS_tls_key).empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--listen=", listen, " is TCP, which needs TLS: give --tls_cert and --tls_key, and "
        "--tls_client_ca so that clients must present certificates"));
  }
  if (absl::GetFlag(FLAGS_tls_client_ca).empty() &&
      !absl::GetFlag(FLAGS_allow_unauthenticated_tcp)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--listen=", listen, " without --tls_client_ca lets anyone who reaches the port send "
        "UDP from this node: give --tls_client_ca (mTLS), or listen on a Unix socket "
        "(--listen=unix:PATH); --allow_unauthenticated_tcp serves it as it is"));
  }
  return absl::OkStatus();
}

// Whether `name` was given (on the command line or in a --flagfile). (absl 20220623 keeps
// CommandLineFlag::IsSpecifiedOnCommandLine private; this is what it reads.)
bool Given(absl::string_view name) { return absl::flags_internal::WasPresentOnCommandLine(name); }

// The neighbour table's limits, from the flags: the per-client cap follows a lower total unless
// given.
stack::NeighborTable::Options NeighborLimits() {
  stack::NeighborTable::Options o;
  o.max_unresolved = absl::GetFlag(FLAGS_max_unresolved_neighbors);
  o.max_unresolved_per_owner = absl::GetFlag(FLAGS_max_unresolved_neighbors_per_client);
  if (!Given("max_unresolved_neighbors_per_client")) {
    o.max_unresolved_per_owner = std::min(o.max_unresolved_per_owner, o.max_unresolved);
  }
  const uint32_t per_peer = absl::GetFlag(FLAGS_max_unresolved_neighbors_per_peer);
  o.max_unresolved_per_group = per_peer != 0 ? per_peer : std::max<size_t>(1, o.max_unresolved / 2);
  o.probes_per_second = absl::GetFlag(FLAGS_neighbor_probes_per_second);
  o.probe_burst = o.probes_per_second;
  return o;
}

// Zero of these resolves no neighbour at all, and so sends nothing.
absl::Status CheckNeighborFlags() {
  const uint32_t all = absl::GetFlag(FLAGS_max_unresolved_neighbors);
  const uint32_t per_client = absl::GetFlag(FLAGS_max_unresolved_neighbors_per_client);
  if (all == 0) {
    return absl::InvalidArgumentError(
        "--max_unresolved_neighbors must be at least 1: with 0 no neighbour is ever resolved");
  }
  if (per_client == 0) {
    return absl::InvalidArgumentError(
        "--max_unresolved_neighbors_per_client must be at least 1: with 0 no client's "
        "neighbour is ever resolved");
  }
  if (per_client > all && Given("max_unresolved_neighbors_per_client")) {
    return absl::InvalidArgumentError(absl::StrCat("--max_unresolved_neighbors_per_client=",
                                                   per_client,
                                                   " is over --max_unresolved_neighbors=", all));
  }
  if (absl::GetFlag(FLAGS_neighbor_probes_per_second) == 0) {
    return absl::InvalidArgumentError(
        "--neighbor_probes_per_second must be at least 1: with 0 no neighbour is ever asked for");
  }
  return absl::OkStatus();
}

// Flags that contradict each other or do not fit where they go, refused before anything starts:
// left to run, each fails later and blames someone else (a lease over the maximum made every
// default CreateSession INVALID_ARGUMENT, as if the client had asked for it).
absl::Status CheckFlags() {
  const uint32_t lease = absl::GetFlag(FLAGS_lease_seconds);
  const int64_t max_lease = absl::ToInt64Seconds(service::SessionLimits().max_lease);
  if (lease == 0) return absl::InvalidArgumentError("--lease_seconds must be at least 1");
  if (lease > max_lease) {
    return absl::InvalidArgumentError(absl::StrCat("--lease_seconds=", lease,
                                                   " is over the maximum lease of ", max_lease,
                                                   " s"));
  }
  if (const uint32_t spin = absl::GetFlag(FLAGS_poll_spin_us); spin > kMaxPollSpinUs) {
    return absl::InvalidArgumentError(absl::StrCat("--poll_spin_us=", spin, " is over ",
                                                   kMaxPollSpinUs, " (one second)"));
  }
  const uint32_t depth = absl::GetFlag(FLAGS_receive_queue_depth);
  const uint32_t max_depth = absl::GetFlag(FLAGS_max_receive_queue_depth);
  if (depth == 0) return absl::InvalidArgumentError("--receive_queue_depth must be at least 1");
  if (depth > max_depth) {
    return absl::InvalidArgumentError(absl::StrCat("--receive_queue_depth=", depth,
                                                   " is over --max_receive_queue_depth=",
                                                   max_depth));
  }
  if (absl::GetFlag(FLAGS_max_receive_mib) == 0) {
    return absl::InvalidArgumentError("--max_receive_mib must be at least 1");
  }
  if (absl::GetFlag(FLAGS_reassembly_kib) < 64) {
    return absl::InvalidArgumentError(
        "--reassembly_kib must be at least 64 (one largest datagram's fragments)");
  }
  if (const uint32_t slots = absl::GetFlag(FLAGS_channel_ring_slots);
      slots == 0 || (slots & (slots - 1)) != 0 || slots > (1u << 20)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--channel_ring_slots=", slots, ": expected a power of two from 1 to 1048576"));
  }
  if (absl::GetFlag(FLAGS_max_channel_mib) == 0) {
    return absl::InvalidArgumentError("--max_channel_mib must be at least 1");
  }
  if (absl::GetFlag(FLAGS_max_all_channels_mib) == 0) {
    return absl::InvalidArgumentError("--max_all_channels_mib must be at least 1");
  }
  // gRPC takes these as int.
  constexpr uint32_t kMaxInt = std::numeric_limits<int32_t>::max();
  const uint32_t message = absl::GetFlag(FLAGS_max_message_bytes);
  if (message < 65536 || message > kMaxInt) {
    return absl::InvalidArgumentError(absl::StrCat("--max_message_bytes=", message,
                                                   ": expected 65536..", kMaxInt));
  }
  const uint32_t threads = absl::GetFlag(FLAGS_max_grpc_threads);
  if (threads == 0 || threads > kMaxInt) {
    return absl::InvalidArgumentError(absl::StrCat("--max_grpc_threads=", threads,
                                                   ": expected 1..", kMaxInt));
  }
  if (const uint32_t vlan = absl::GetFlag(FLAGS_vlan); vlan > net::kMaxVlanId) {
    return absl::InvalidArgumentError(
        absl::StrCat("--vlan=", vlan, ": expected 1..", net::kMaxVlanId, ", or 0 for untagged"));
  }
  if (absl::GetFlag(FLAGS_max_streams_per_client) == 0) {
    return absl::InvalidArgumentError("--max_streams_per_client must be at least 1");
  }
  // Zero of any of these leaves a server that refuses every client.
  if (absl::GetFlag(FLAGS_max_clients) == 0) {
    return absl::InvalidArgumentError("--max_clients must be at least 1");
  }
  if (absl::Status s = service::CheckAdminListen(absl::GetFlag(FLAGS_admin_listen),
                                                 absl::GetFlag(FLAGS_listen));
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckTcpListen(); !s.ok()) return s;
  if (!AdminIdentities().empty() && absl::GetFlag(FLAGS_tls_client_ca).empty()) {
    return absl::InvalidArgumentError(
        "--admin_identities needs --tls_client_ca: without mTLS no client has an identity");
  }
  const uint32_t sockets = absl::GetFlag(FLAGS_max_sockets);
  const uint32_t per_client = absl::GetFlag(FLAGS_max_sockets_per_client);
  if (sockets == 0) return absl::InvalidArgumentError("--max_sockets must be at least 1");
  if (per_client == 0) {
    return absl::InvalidArgumentError("--max_sockets_per_client must be at least 1");
  }
  if (per_client > sockets) {
    return absl::InvalidArgumentError(absl::StrCat("--max_sockets_per_client=", per_client,
                                                   " is over --max_sockets=", sockets));
  }
  return CheckNeighborFlags();
}

// Parses the command line as absl::ParseCommandLine does, but a help that was asked for
// (--help, --helpfull, --helpshort, ...) is printed with exit code 0, not absl's 1: asking for
// help is not a failure. The exit code when quadsockd should stop here, nothing otherwise.
// The file descriptors quadsockd may hold at its flags' limits: a few dozen of its own (the
// listeners, BPF, logs), four per RX queue (its AF_XDP socket, poll thread and channel rings),
// per session a connection and a data channel (its memfd, an eventfd per ring and one for
// sends, the side connection), and an eventfd per stream waiting for datagrams. The soft
// RLIMIT_NOFILE is raised to it (up to the hard limit); a hard limit below it is refused,
// naming what to change, rather than failing later, at EMFILE, in the middle of a client's call.
absl::Status EnsureDescriptorLimit() {
  uint64_t queues = absl::GetFlag(FLAGS_queues);
  if (queues == 0) {
    absl::StatusOr<uint32_t> counted = link::RxQueueCount(absl::GetFlag(FLAGS_interface));
    queues = counted.ok() ? *counted : 1;
  }
  const uint64_t clients = absl::GetFlag(FLAGS_max_clients);
  const uint64_t threads = absl::GetFlag(FLAGS_max_grpc_threads);
  const uint64_t need =
      64 + 4 * queues + clients * (2 * queues + 4) + threads + service::ChannelBroker::kMaxUnclaimed;
  rlimit l{};
  if (getrlimit(RLIMIT_NOFILE, &l) != 0) return absl::OkStatus();  // cannot tell: go on
  if (l.rlim_cur == RLIM_INFINITY || l.rlim_cur >= need) return absl::OkStatus();
  if (l.rlim_max != RLIM_INFINITY && l.rlim_max < need) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "up to %u file descriptors may be needed (--max_clients=%u sessions with a connection "
        "and a data channel each, two descriptors per RX queue; --max_grpc_threads=%u streams "
        "waiting; %u RX queues), and "
        "RLIMIT_NOFILE allows %u: raise it (ulimit -n, systemd's LimitNOFILE, a container's "
        "--ulimit nofile) or lower --max_clients or --max_grpc_threads",
        need, clients, threads, queues, l.rlim_max));
  }
  const rlim_t before = l.rlim_cur;
  l.rlim_cur = need;
  if (setrlimit(RLIMIT_NOFILE, &l) != 0) {
    return link::ErrnoStatus(errno, "raising RLIMIT_NOFILE");
  }
  Log(absl::StrFormat("raised the soft RLIMIT_NOFILE from %u to %u, what the flags' limits may "
                      "need", before, need));
  return absl::OkStatus();
}

std::optional<int> ParseFlags(int argc, char** argv) {
  absl::flags_internal::ParseCommandLineImpl(
      argc, argv, absl::flags_internal::ArgvListAction::kRemoveParsedArgs,
      absl::flags_internal::UsageFlagsAction::kIgnoreUsage,
      absl::flags_internal::OnUndefinedFlag::kAbortIfUndefined);
  const int usage =
      absl::flags_internal::HandleUsageFlags(std::cout, absl::ProgramUsageMessage());
  if (usage < 0) return std::nullopt;
  return 0;
}

int Main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "quadsock's userspace UDP stack on AF_XDP, controlled over gRPC.\n\n"
      "  quadsockd --interface=eth0 --address=10.1.0.2/24,fd00:1::2/64 "
      "--listen=unix:/run/quadsock/quadsock.sock\n\n"
      "Needs root (or CAP_NET_ADMIN, CAP_NET_RAW, CAP_BPF, CAP_PERFMON, and CAP_IPC_LOCK to\n"
      "register the UMEM unless RLIMIT_MEMLOCK covers it). SIGTERM stops it.\n\n"
      "Clients connect to --listen and work in sessions. The administration listener\n"
      "(--admin_listen, default unix:/run/quadsock-admin/admin.sock, mode 0600: quadsockd's\n"
      "own user only, in a folder of its own) takes AdminService calls without a session, and\n"
      "only there may the neighbour table be changed (`quadctl --admin neigh set ADDRESS MAC`);\n"
      "see --admin_identities for administrators over mTLS.");
  if (absl::Status s = CheckFlagNames(argc, argv); !s.ok()) return Fail("bad flags", s);
  if (std::optional<int> exit_code = ParseFlags(argc, argv)) return *exit_code;
  // Debian's Abseil is built with its debug checks: every absl::Mutex (all of gRPC's locks)
  // would also update a process-wide lock graph, a deadlock detector for debugging.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  const std::vector<std::string> addresses = AllOccurrences(argc, argv, "address", FLAGS_address);
  const std::vector<std::string> gateways = AllOccurrences(argc, argv, "gateway", FLAGS_gateway);

  if (absl::Status s = CheckFlags(); !s.ok()) return Fail("bad flags", s);
  if (absl::Status s = EnsureDescriptorLimit(); !s.ok()) return Fail("descriptor limit", s);
  if (absl::GetFlag(FLAGS_interface).empty()) {
    return Fail("bad flags", absl::InvalidArgumentError("--interface is required"));
  }
  stack::AfXdpOptions o;
  o.interface = absl::GetFlag(FLAGS_interface);
  o.queues = absl::GetFlag(FLAGS_queues);
  o.allow_unserved_queues = absl::GetFlag(FLAGS_allow_unserved_queues);
  absl::StatusOr<xdp::XdpMode> mode = xdp::ParseXdpMode(absl::GetFlag(FLAGS_xdp_mode));
  if (!mode.ok()) return Fail("bad --xdp_mode", mode.status());
  o.mode = *mode;
  o.umem_frames = absl::GetFlag(FLAGS_umem_frames);
  o.frame_size = absl::GetFlag(FLAGS_frame_size);
  o.ring_size = absl::GetFlag(FLAGS_ring_size);
  o.busy_poll = absl::GetFlag(FLAGS_busy_poll);
  o.stack.poll_spin = absl::Microseconds(absl::GetFlag(FLAGS_poll_spin_us));
  o.log = Log;
  if (addresses.empty()) {
    return Fail("bad flags", absl::InvalidArgumentError(
                                 "--address is required, such as --address=10.1.0.2/24"));
  }
  for (const std::string& a : addresses) {
    absl::StatusOr<net::IpPrefix> p = net::IpPrefix::Parse(a);
    if (!p.ok()) return Fail("bad --address", p.status());
    o.stack.addresses.push_back(*p);
  }
  if (!absl::GetFlag(FLAGS_allow_kernel_address)) {
    absl::StatusOr<std::vector<link::KernelAddress>> held = link::KernelAddresses();
    if (!held.ok()) return Fail("cannot list the kernel's addresses", held.status());
    if (absl::Status s = link::CheckNotKernelAddresses(o.stack.addresses, *held, o.interface);
        !s.ok()) {
      return Fail("bad --address", s);
    }
  }
  for (const std::string& g : gateways) {
    absl::StatusOr<net::IpAddress> ip = net::IpAddress::Parse(g);
    if (!ip.ok()) return Fail("bad --gateway", ip.status());
    o.stack.gateways.push_back(*ip);
  }
  o.stack.hash4 = absl::GetFlag(FLAGS_hash4);
  o.stack.vlan = static_cast<uint16_t>(absl::GetFlag(FLAGS_vlan));
  o.stack.max_sockets = absl::GetFlag(FLAGS_max_sockets);
  o.stack.receive_queue_depth = absl::GetFlag(FLAGS_receive_queue_depth);
  o.stack.max_receive_queue_depth = absl::GetFlag(FLAGS_max_receive_queue_depth);
  o.stack.max_receive_bytes = size_t{absl::GetFlag(FLAGS_max_receive_mib)} << 20;
  o.stack.reassembly_bytes = size_t{absl::GetFlag(FLAGS_reassembly_kib)} << 10;
  o.stack.neighbors = NeighborLimits();

  // Signals are taken by sigwait below, not by handlers: block them before any thread starts.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  // libbpf's and libxdp's own lines only when asked for: quadsockd's errors say what failed.
  const bool verbose = absl::GetFlag(FLAGS_verbose);
  xdp::RouteLibraryMessages(verbose ? Log : nullptr);
  absl::StatusOr<std::unique_ptr<stack::AfXdpStack>> afxdp = stack::AfXdpStack::Create(o);
  if (!afxdp.ok()) {
    Log(absl::StrCat("cannot start on ", o.interface, ": ", afxdp.status().ToString(),
                     verbose ? "" : " (--verbose adds libbpf's own messages)"));
    return 1;
  }

  service::ServerOptions so;
  so.listen = absl::GetFlag(FLAGS_listen);
  so.tls_cert = absl::GetFlag(FLAGS_tls_cert);
  so.tls_key = absl::GetFlag(FLAGS_tls_key);
  so.tls_client_ca = absl::GetFlag(FLAGS_tls_client_ca);
  so.admin_listen = absl::GetFlag(FLAGS_admin_listen);
  so.admin_identities = AdminIdentities();
  so.sessions.max_sessions = absl::GetFlag(FLAGS_max_clients);
  so.channels.default_slots = absl::GetFlag(FLAGS_channel_ring_slots);
  so.channels.max_slots = std::max<uint32_t>(so.channels.max_slots, so.channels.default_slots);
  so.channels.max_bytes_per_session = size_t{absl::GetFlag(FLAGS_max_channel_mib)} << 20;
  so.channels.max_bytes_total = size_t{absl::GetFlag(FLAGS_max_all_channels_mib)} << 20;
  so.sessions.max_sockets_per_session = absl::GetFlag(FLAGS_max_sockets_per_client);
  so.sessions.max_streams_per_session = absl::GetFlag(FLAGS_max_streams_per_client);
  so.max_threads = static_cast<int>(absl::GetFlag(FLAGS_max_grpc_threads));
  // 0: half of the server's, so that one peer never takes them all.
  const auto half_unless = [](uint32_t flag, uint32_t all) {
    return flag != 0 ? flag : std::max<uint32_t>(1, all / 2);
  };
  so.sessions.max_sessions_per_peer =
      half_unless(absl::GetFlag(FLAGS_max_sessions_per_peer), absl::GetFlag(FLAGS_max_clients));
  so.sessions.max_streams_per_peer = half_unless(absl::GetFlag(FLAGS_max_streams_per_peer),
                                                 absl::GetFlag(FLAGS_max_grpc_threads));
  so.sessions.max_sockets_per_peer = half_unless(absl::GetFlag(FLAGS_max_sockets_per_peer),
                                                 absl::GetFlag(FLAGS_max_sockets));
  so.channels.max_bytes_per_peer =
      size_t{half_unless(absl::GetFlag(FLAGS_max_channel_mib_per_peer),
                         absl::GetFlag(FLAGS_max_all_channels_mib))}
      << 20;
  so.sessions.default_lease = absl::Seconds(absl::GetFlag(FLAGS_lease_seconds));
  so.max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  so.receive_share_bytes = size_t{half_unless(absl::GetFlag(FLAGS_max_receive_mib_per_peer),
                                              absl::GetFlag(FLAGS_max_receive_mib))}
                           << 20;
  so.log = Log;
  stack::AfXdpStack* dp = afxdp->get();
  so.data_plane.xdp_mode = std::string(xdp::XdpAttachName(dp->xdp_mode()));
  so.data_plane.xdp_counters = [dp]() -> std::optional<v1::XdpCounters> {
    absl::StatusOr<xdp::XdpProgramCounters> c = dp->xdp_program().Counters();
    if (!c.ok()) return std::nullopt;
    v1::XdpCounters out;
    out.set_redirect(c->redirect);
    out.set_pass_not_owned(c->pass_not_owned);
    out.set_pass_other(c->pass_other);
    out.set_malformed(c->malformed);
    out.set_redirect_no_xsk(c->redirect_no_xsk);
    return out;
  };
  // What may happen to the interface under us (down, up, MTU, deleted): looked at each second.
  absl::StatusOr<std::unique_ptr<link::InterfaceWatch>> watch =
      link::InterfaceWatch::Start(o.interface);
  if (!watch.ok()) return Fail("cannot watch the interface", watch.status());
  so.data_plane.interface = watch->get();
  absl::StatusOr<std::unique_ptr<service::Server>> server = service::Server::Start(so, dp->stack());
  if (!server.ok()) return Fail("cannot serve gRPC", server.status());
  std::unique_ptr<service::MetricsHttp> metrics;
  if (!absl::GetFlag(FLAGS_metrics_listen).empty()) {
    service::Server* srv = server->get();
    absl::StatusOr<std::unique_ptr<service::MetricsHttp>> m = service::MetricsHttp::Start(
        absl::GetFlag(FLAGS_metrics_listen),
        [srv, labels = service::MetricsLabels{o.interface, service::BuildVersion(),
                                              service::BuildCommit()}] {
          return service::RenderMetrics(srv->admin().Collect(), labels);
        });
    if (!m.ok()) return Fail("cannot serve metrics", m.status());
    metrics = std::move(*m);
    Log(absl::StrCat("metrics on http://", absl::GetFlag(FLAGS_metrics_listen), "/metrics"));
  }
  if (absl::Status s = dp->stack().Start(); !s.ok()) return Fail("cannot start the data plane", s);
  (*server)->SetServing(true);
  std::vector<std::string> prefixes;
  for (const net::IpPrefix& p : o.stack.addresses) prefixes.push_back(p.ToString());
  Log(absl::StrCat("serving ", absl::StrJoin(prefixes, ", "), " on ", dp->Describe(),
                   "; hash4 ", o.stack.hash4 ? "on" : "off", "; gRPC on ",
                   (*server)->listening_on(),
                   (*server)->admin_listening_on().empty()
                       ? "; no administration listener"
                       : absl::StrCat("; administration on ", (*server)->admin_listening_on())));

  // Until SIGTERM or SIGINT, or until the interface is gone or its MTU fell below ours (exit
  // 1: a supervisor starts quadsockd again, on the interface as it is then); meanwhile, once a
  // second, what the counters tell of the peers, and what changed on the interface.
  service::ChecksumHint checksum_hint(Log);
  const timespec second = {.tv_sec = 1, .tv_nsec = 0};
  int signal = 0;
  std::string lost;  // why the interface can no longer be served
  while (lost.empty() && (signal = sigtimedwait(&stop_signals, nullptr, &second)) < 0) {
    checksum_hint.Check(dp->stack().Counters(), absl::Now());
    for (const link::InterfaceWatch::Change& c : (*watch)->Check()) {
      using Kind = link::InterfaceWatch::Change::Kind;
      if (c.kind == Kind::kGone) {
        lost = c.text;
      } else if (c.kind == Kind::kMtu && c.new_mtu < (*watch)->mtu()) {
        lost = absl::StrCat(c.text, ", below the ", (*watch)->mtu(), " quadsockd runs with");
      } else if (c.kind == Kind::kMtu) {
        Log(absl::StrCat(c.text, ": quadsockd keeps to ", (*watch)->mtu(),
                         " until it is started again"));
      } else {
        Log(c.text);
      }
    }
  }
  const absl::Time stopping = absl::Now();
  Log(lost.empty() ? absl::StrCat("got ", strsignal(signal), ": stopping")
                   : absl::StrCat(lost, ": stopping (exit 1; start quadsockd again to serve "
                                        "the interface as it is now)"));
  checksum_hint.Check(dp->stack().Counters(), absl::Now(), /*stopping=*/true);
  (*server)->Shutdown(absl::Seconds(3));
  metrics.reset();
  server->reset();
  afxdp->reset();  // stops the poll threads, closes the AF_XDP sockets, detaches the program
  Log(absl::StrCat("stopped in ", absl::FormatDuration(absl::Now() - stopping)));
  return lost.empty() ? 0 : 1;
}

}  // namespace
}  // namespace quadsock

int main(int argc, char** argv) { return quadsock::Main(argc, argv); }
