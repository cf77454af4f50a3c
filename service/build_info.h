// What build of quadsock this is: its version (the top-level VERSION file) and the git commit
// it was built from (Bazel's workspace status, scripts/workspace_status.sh: "" when it was
// built outside a git checkout). Generated at build time into build_info.cc.
//
//   page.BuildInfo(BuildVersion(), BuildCommit());
#ifndef QUADSOCK_SERVICE_BUILD_INFO_H_
#define QUADSOCK_SERVICE_BUILD_INFO_H_

namespace quadsock::service {

const char* BuildVersion();
const char* BuildCommit();

}  // namespace quadsock::service

#endif  // QUADSOCK_SERVICE_BUILD_INFO_H_
