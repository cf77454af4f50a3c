#include "clients/testing/test_pki.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace quadsock::testing {

namespace {
std::string Env(const char* name, const char* otherwise) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : otherwise;
}
}  // namespace

absl::StatusOr<TestPki> MakeTestPki(const std::string& folder) {
  TestPki pki{absl::StrCat(Env("TEST_TMPDIR", "/tmp"), "/", folder)};
  // The script is a runfile of every test that links this library.
  const std::string script = absl::StrCat(Env("TEST_SRCDIR", "."), "/",
                                          Env("TEST_WORKSPACE", "quadsock"),
                                          "/clients/testing/make_test_pki.sh");
  const std::string command = absl::StrCat("'", script, "' '", pki.dir, "'");
  if (std::system(command.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("making the test PKI failed: ", command));
  }
  return pki;
}

}  // namespace quadsock::testing
