#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "stack/xdp/pass_object.h"

namespace {

TEST(PassProgramTest, LoadsAndPassesAFrame) {
  std::span<const uint8_t> object = PassBpfObject();
  ASSERT_GT(object.size(), 64u);
  ASSERT_EQ(std::memcmp(object.data(), "\x7f" "ELF", 4), 0) << "not an ELF object";

  bpf_object* obj = bpf_object__open_mem(object.data(), object.size(), nullptr);
  ASSERT_NE(obj, nullptr) << "libbpf cannot open the embedded object: " << std::strerror(errno);
  ASSERT_EQ(bpf_object__load(obj), 0)
      << "cannot load the XDP program (needs root and BPF): " << std::strerror(errno);
  bpf_program* prog = bpf_object__find_program_by_name(obj, "quadsock_pass");
  ASSERT_NE(prog, nullptr);

  std::vector<uint8_t> frame(64, 0);
  LIBBPF_OPTS(bpf_test_run_opts, run, .data_in = frame.data(), .data_size_in = static_cast<__u32>(frame.size()));
  ASSERT_EQ(bpf_prog_test_run_opts(bpf_program__fd(prog), &run), 0) << std::strerror(errno);
  EXPECT_EQ(run.retval, static_cast<uint32_t>(XDP_PASS));
  bpf_object__close(obj);
}

}  // namespace
