// The stack's counters, in one list. Each entry is a field of StackCounters here, a field of
// the same name in the API's quadsock.v1.StackCounters (proto/quadsock/v1/admin.proto), and a
// Prometheus metric quadsockd renders from that message. Adding a counter takes a line here and
// a field in admin.proto; service/admin_service_test checks that the two lists agree, and
// service/metrics_http_test that every field of the API is on the metrics page.
//
//   StackCounters c = stack.Counters();
//   c.udp_delivered;                                  // a field per entry
//   for (const CounterInfo& i : kStackCounterInfo) Print(i.name, c.*i.field, i.help);
#ifndef QUADSOCK_STACK_STACK_COUNTERS_H_
#define QUADSOCK_STACK_STACK_COUNTERS_H_

#include <cstdint>

#include "stack/net/parse_error.h"

namespace quadsock::stack {

// Counted by the poll engines, each engine its own, summed when read: X(name, help).
#define QUADSOCK_ENGINE_COUNTERS(X)                                                          \
  X(rx_frames, "Frames received.")                                                           \
  X(not_for_us, "Frames for another host: its MAC or IP address, or another VLAN.")         \
  X(fragments, "IP fragments to us received (each ends as one of reassembly_* or "            \
               "fragments_not_udp, or in a reassembled datagram).")                           \
  X(unhandled, "Frames of other ethertypes, ICMP messages the stack does not answer, and "   \
               "echo requests from a multicast MAC.")                                        \
  X(udp_delivered, "Datagrams delivered to a socket (of which the socket may have dropped "  \
                   "some: udp_queue_full, receive_budget_full).")                            \
  X(udp_queue_full, "Datagrams dropped by their socket: its receive queue or its data "     \
                    "channel's ring was full (each socket counts its own as rx_dropped).")  \
  X(udp_no_socket, "Datagrams to a port with no socket (answered with port unreachable "     \
                   "unless rate-limited).")                                                  \
  X(icmp_echo_replies, "ICMP echo replies sent.")                                            \
  X(icmp_errors_sent, "ICMP errors sent.")                                                   \
  X(icmp_errors_rate_limited, "ICMP errors not sent: over the rate limit.")                  \
  X(icmp_errors_received, "ICMP errors received that quote a datagram of one of our "        \
                          "sockets.")                                                        \
  X(icmp_errors_unmatched, "ICMP errors received that quote no datagram of ours (no such "   \
                           "socket, not UDP, or not from one of our addresses).")            \
  X(arp_replies, "ARP replies sent.")                                                        \
  X(ndp_advertisements, "NDP neighbour advertisements sent.")                                \
  X(neighbor_messages_ignored, "ARP and NDP messages ignored: they speak for no neighbour "   \
                               "(a multicast, broadcast or loopback address, or one of ours) " \
                               "or carry a non-unicast MAC.")                                \
  X(neighbor_messages_off_link, "ARP and NDP messages not learned from: their sender is on "  \
                                "none of the stack's networks (requests for us are answered).") \
  X(tx_no_route, "Datagrams not sent: no route to the destination.")                         \
  X(tx_no_buffer, "Frames not sent: no free transmit buffer.")                              \
  X(udp_sent_connected, "Datagrams handed to the link from connected sockets (the send "  \
                       "counterpart of hash4 hits).")                                       \
  X(udp_sent_unconnected, "Datagrams handed to the link from sockets that are not connected " \
                         "(sendto; the send counterpart of hash2 lookups).")                  \
  X(tx_channel_no_socket, "Datagrams an application queued on a data channel for a socket "  \
                          "index that is not on the channel (dropped).")                     \
  X(tx_channel_bad_length, "Descriptors on a data channel's TX ring whose length passes a "    \
                           "slot's buffer (dropped; charged to the turn like any).")          \
  X(tx_channel_not_bound, "Datagrams queued on a data channel for a socket that is not bound " \
                          "(dropped).")                                                       \
  X(tx_channel_refused, "Datagrams queued on a data channel that their socket may not send " \
                        "as asked (dropped): no destination for an unconnected socket, "     \
                        "another than its connected peer, one it cannot reach, too big, or " \
                        "a source address (IP_PKTINFO) not the stack's.")                    \
  X(martian_source, "IP packets to us from a source no host sends from, dropped unanswered: " \
                    "ours, loopback, unspecified, multicast, broadcast, a network address "  \
                    "of ours, or IPv4-mapped IPv6.")                                         \
  X(rx_too_long, "Frames longer than the link's MTU allows, dropped.")                       \
  X(ip_unknown_protocol, "IP packets to us of a protocol the stack does not speak (all but UDP " \
                         "and ICMP; TCP too), dropped and answered with protocol unreachable " \
                         "(ICMPv6: Parameter Problem, unrecognized Next Header) unless "       \
                         "rate-limited.")                                                      \
  X(reassembled, "Datagrams reassembled from fragments, then delivered as any other.")       \
  X(reassembly_timed_out, "Datagrams whose fragments did not all come in time (30 s IPv4, "  \
                          "60 s IPv6): dropped, and answered with ICMP time exceeded when "  \
                          "the first fragment came.")                                        \
  X(reassembly_overlap, "Fragments that overlap another of their datagram: the datagram is " \
                        "dropped (RFC 5722).")                                               \
  X(reassembly_stale, "Datagrams dropped for falling more than 64 fragments of their source " \
                      "behind (a lost fragment; the identification may come round).")        \
  X(reassembly_duplicate, "Fragments that repeat one held: ignored.")                        \
  X(reassembly_too_big, "Fragments ending past 65,535 bytes of reassembled packet: dropped.") \
  X(reassembly_tiny, "First fragments without the whole UDP header (RFC 1858): dropped.")    \
  X(reassembly_malformed, "Fragments of a bad length (not the last and not a multiple of 8, " \
                          "or past the datagram's end): the datagram is dropped.")           \
  X(reassembly_evicted, "Datagrams being reassembled pushed out, oldest first, to make room " \
                        "in a full reassembly budget.")                                      \
  X(reassembly_source_full, "Datagrams of a source (an IPv6 /64) at its share of the "        \
                            "reassembly budget dropped, its oldest first, to make room for " \
                            "its newer ones.")                                               \
  X(reassembly_budget_full, "Fragments dropped: the reassembly budget was full and held "    \
                            "nothing older to evict.")                                       \
  X(fragments_not_udp, "Fragments of other protocols than UDP: dropped (only UDP is "         \
                       "reassembled).")                                                       \
  X(tx_fragmented, "Datagrams sent in fragments: over the path MTU.")                        \
  X(tx_fragments, "Fragments sent (of tx_fragmented's datagrams).")                          \
  X(tx_over_path_mtu, "Datagrams not sent: over a path MTU that fell after the send was "     \
                      "checked, from a socket that may not fragment (pmtu_discovery DO).")   \
  X(path_mtu_reports, "ICMP fragmentation needed / packet too big messages that lowered a "  \
                      "destination's path MTU (quoting a datagram of one of our sockets).")  \
  X(path_mtu_reports_ignored, "ICMP fragmentation needed / packet too big messages ignored: " \
                              "an MTU below the minimum (IPv6: 1,280) or not below the "     \
                              "link's.")

// Counted elsewhere: by Send's callers, the receive budget and the neighbour table.
#define QUADSOCK_OTHER_STACK_COUNTERS(X)                                                     \
  X(tx_queue_full, "Sends refused: a poll thread's send queue was full.")                   \
  X(receive_budget_full, "Datagrams dropped: all receive queues together held their byte "   \
                         "budget (--max_receive_mib).")                                      \
  X(stream_dropped, "Datagrams taken off a socket's queue by a Receive or Exchange stream "   \
                    "that could not hand them to its client (its Write failed, or it ended " \
                    "holding them); each socket counts its own as rx_dropped.")              \
  X(wait_refused, "Waits for a socket's datagrams (a Receive or Exchange stream's) that found " \
                  "no file descriptor to wait on (EMFILE): the stream ended with "           \
                  "RESOURCE_EXHAUSTED instead of spinning.")                                 \
  X(channel_waits, "Grace periods the control plane waited for after taking sockets off a "   \
                   "data channel: one per socket moved alone, one per channel that ends.")   \
  X(neighbor_probes, "ARP requests and neighbour solicitations sent to resolve a neighbour.") \
  X(neighbor_resolved, "Neighbours resolved.")                                               \
  X(neighbor_failed, "Neighbours that never answered.")                                      \
  X(neighbor_dropped, "Datagrams dropped while waiting for a neighbour: it never answered, " \
                      "or its wait queue was full.")                                         \
  X(neighbor_table_full, "New neighbours refused: the neighbour table was full.")            \
  X(neighbor_owner_unresolved_full, "Datagrams dropped: their session (or its peer, all "    \
                                    "its sessions) had its maximum of neighbours being "     \
                                    "resolved (a new resolution refused).")                  \
  X(neighbor_unresolved_full, "Datagrams dropped: the stack had its maximum of neighbours "  \
                              "being resolved (a new resolution refused).")                  \
  X(neighbor_probes_rate_limited, "ARP requests and solicitations not sent for the probe "   \
                                  "rate limit: a new resolution refused (its datagram "      \
                                  "dropped) or a retransmission put off.")                   \
  X(neighbor_evicted, "Neighbour entries pushed out of a full table (unresolved ones first).") \
  X(neighbor_learn_rate_limited, "Senders of requests for us answered but not learned: past "  \
                                 "the rate of new neighbours learned from the wire.")

// Gauges: values now, not totals.
#define QUADSOCK_STACK_GAUGES(X)                                                             \
  X(receive_bytes_queued, "Bytes of the receive budget (--max_receive_mib) in use now: the "  \
                          "datagrams all receive queues hold, and the queues' cells.")       \
  X(reassembly_held_bytes, "Bytes of the reassembly budget (--reassembly_kib) in use now: "   \
                           "fragments waiting for the rest of their datagram, with their "  \
                           "costs.")

#define QUADSOCK_STACK_COUNTERS(X) \
  QUADSOCK_ENGINE_COUNTERS(X) QUADSOCK_OTHER_STACK_COUNTERS(X) QUADSOCK_STACK_GAUGES(X)

struct StackCounters {
#define QUADSOCK_FIELD(name, help) uint64_t name = 0;
  QUADSOCK_STACK_COUNTERS(QUADSOCK_FIELD)
#undef QUADSOCK_FIELD
  // Frames dropped as malformed, by reason (parse_error.h; kOk's place stays zero).
  uint64_t parse_errors[net::kParseErrorCount] = {};
};

// The poll engines' counters, as indices into each engine's array: EngineCounter::rx_frames.
// (The enumerators keep the counters' own names, so that a grep finds every use.)
enum class EngineCounter : int {
#define QUADSOCK_ENUM(name, help) name,
  QUADSOCK_ENGINE_COUNTERS(QUADSOCK_ENUM)
#undef QUADSOCK_ENUM
};
#define QUADSOCK_ONE(name, help) +1
inline constexpr int kEngineCounterCount = 0 QUADSOCK_ENGINE_COUNTERS(QUADSOCK_ONE);
#undef QUADSOCK_ONE

struct CounterInfo {
  const char* name;
  const char* help;
  uint64_t StackCounters::*field;
  bool gauge;
};

inline constexpr CounterInfo kStackCounterInfo[] = {
#define QUADSOCK_INFO(name, help) {#name, help, &StackCounters::name, false},
    QUADSOCK_ENGINE_COUNTERS(QUADSOCK_INFO) QUADSOCK_OTHER_STACK_COUNTERS(QUADSOCK_INFO)
#undef QUADSOCK_INFO
#define QUADSOCK_INFO(name, help) {#name, help, &StackCounters::name, true},
    QUADSOCK_STACK_GAUGES(QUADSOCK_INFO)
#undef QUADSOCK_INFO
};

}  // namespace quadsock::stack

#endif  // QUADSOCK_STACK_STACK_COUNTERS_H_
