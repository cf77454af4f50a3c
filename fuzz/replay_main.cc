// The replay driver of a fuzz target built without libFuzzer (bazel/fuzz.bzl): each file named
// on the command line is read and handed to LLVMFuzzerTestOneInput once. A crash or a failed
// check in the target ends the process, as it would under libFuzzer; otherwise it prints how
// many inputs ran and exits 0 (2 when a file cannot be read, or none was given).
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s INPUT...\n", argv[0]);
    return 2;
  }
  for (int i = 1; i < argc; ++i) {
    std::ifstream in(argv[i], std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "%s: cannot read %s\n", argv[0], argv[i]);
      return 2;
    }
    const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                                     std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
  }
  std::printf("%d inputs ran\n", argc - 1);
  return 0;
}
