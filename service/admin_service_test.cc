// The API's StackCounters and the stack's counter list (stack/stack_counters.h) name the same
// counters: AdminService fills the message by name, so a counter missing on either side would
// silently read zero.
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "google/protobuf/descriptor.h"
#include "quadsock/v1/admin.pb.h"
#include "stack/stack_counters.h"

namespace quadsock::service {
namespace {

using google::protobuf::FieldDescriptor;

TEST(StackCountersTest, TheApiHasAFieldForEveryCounterOfTheStack) {
  const google::protobuf::Descriptor* d = v1::StackCounters::descriptor();
  for (const stack::CounterInfo& i : stack::kStackCounterInfo) {
    const FieldDescriptor* f = d->FindFieldByName(i.name);
    ASSERT_NE(f, nullptr) << "admin.proto's StackCounters has no field " << i.name;
    EXPECT_EQ(f->cpp_type(), FieldDescriptor::CPPTYPE_UINT64) << i.name;
    EXPECT_FALSE(f->is_repeated()) << i.name;
  }
}

TEST(StackCountersTest, TheStackHasACounterForEveryFieldOfTheApi) {
  std::set<std::string> listed;
  for (const stack::CounterInfo& i : stack::kStackCounterInfo) listed.insert(i.name);
  const google::protobuf::Descriptor* d = v1::StackCounters::descriptor();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor& f = *d->field(i);
    if (f.name() == "parse_errors") continue;  // by reason, from the parser's own list
    EXPECT_TRUE(listed.contains(f.name()))
        << "StackCounters." << f.name() << " is not in stack/stack_counters.h";
  }
}

}  // namespace
}  // namespace quadsock::service
