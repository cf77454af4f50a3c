// The test PKI of make_test_pki.sh (next to this file), for C++ tests: one CA, a stranger CA,
// a server certificate for localhost and 127.0.0.1, and the clients alice and bob.
//
//   static void SetUpTestSuite() { pki_ = MakeTestPki().value(); }
//   options.tls_cert = pki_.Cert("server");  options.tls_key = pki_.Key("server");
#ifndef QUADSOCK_CLIENTS_TESTING_TEST_PKI_H_
#define QUADSOCK_CLIENTS_TESTING_TEST_PKI_H_

#include <string>

#include "absl/status/statusor.h"

namespace quadsock::testing {

struct TestPki {
  std::string dir;
  // PEM files of "ca", "stranger", "server", "alice" or "bob".
  std::string Cert(const std::string& name) const { return dir + "/" + name + ".pem"; }
  std::string Key(const std::string& name) const { return dir + "/" + name + ".key"; }
};

// Makes a fresh PKI in $TEST_TMPDIR/`folder`. INTERNAL when openssl fails.
absl::StatusOr<TestPki> MakeTestPki(const std::string& folder = "pki");

}  // namespace quadsock::testing

#endif  // QUADSOCK_CLIENTS_TESTING_TEST_PKI_H_
