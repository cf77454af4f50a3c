#include "stack/link/errno_status.h"

#include <cerrno>
#include <string>

#include "absl/strings/str_cat.h"

namespace quadsock::link {

absl::Status ErrnoStatus(int error, absl::string_view what, absl::string_view permission_hint) {
  if (error < 0) error = -error;
  absl::Status status = absl::ErrnoToStatus(error, what);
  absl::StatusCode code = status.code();
  switch (error) {  // the exceptions in the header, and why
    case ENODEV:
    case ENXIO:
    case EOPNOTSUPP:
      code = absl::StatusCode::kFailedPrecondition;
      break;
    case EBUSY:
      code = absl::StatusCode::kAlreadyExists;
      break;
    default:
      break;
  }
  if (code == absl::StatusCode::kPermissionDenied && !permission_hint.empty()) {
    return absl::Status(code, absl::StrCat(status.message(), " ", permission_hint));
  }
  if (code == status.code()) return status;
  return absl::Status(code, status.message());
}

}  // namespace quadsock::link
