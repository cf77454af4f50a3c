// Two stacks on one in-memory wire (a MemoryLink pair), what frames one sends the other
// receives: the base of the two-host fixtures of every layer's tests and benchmarks (the
// stack's TwoStacksTest, which polls by hand on a clock it moves; the service's TwoStacks,
// whose stacks run their own poll threads under a server).
//
//   absl::StatusOr<StackPair> p = StackPair::Create(
//       {.link = {.name = "a", .mac = mac_a}, .options = options_a},
//       {.link = {.name = "b", .mac = mac_b}, .options = options_b});
//   p->a->Send(...);  p->a->PollOnce();  p->b->PollOnce();  p->b->Receive(...);
#ifndef QUADSOCK_STACK_TESTING_STACK_PAIR_H_
#define QUADSOCK_STACK_TESTING_STACK_PAIR_H_

#include <memory>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "stack/link/memory_link.h"
#include "stack/stack.h"

namespace quadsock::stack::testing_fixtures {

struct StackPair {
  // One host: its end of the wire and its stack's options.
  struct Host {
    link::MemoryLinkOptions link;
    StackOptions options;
  };

  // Both stacks, made but not started; the status of the first Stack::Create that fails.
  static absl::StatusOr<StackPair> Create(Host a, Host b) {
    auto [link_a, link_b] = link::MemoryLink::CreatePair(std::move(a.link), std::move(b.link));
    auto stack_a = OnLink(std::move(a.options), std::move(link_a));
    if (!stack_a.ok()) return stack_a.status();
    auto stack_b = OnLink(std::move(b.options), std::move(link_b));
    if (!stack_b.ok()) return stack_b.status();
    return StackPair{std::move(*stack_a), std::move(*stack_b)};
  }

  std::unique_ptr<Stack> a;
  std::unique_ptr<Stack> b;

 private:
  static absl::StatusOr<std::unique_ptr<Stack>> OnLink(StackOptions options,
                                                       std::unique_ptr<link::MemoryLink> link) {
    std::vector<std::unique_ptr<link::Link>> links;
    links.push_back(std::move(link));
    return Stack::Create(std::move(options), std::move(links));
  }
};

}  // namespace quadsock::stack::testing_fixtures

#endif  // QUADSOCK_STACK_TESTING_STACK_PAIR_H_
