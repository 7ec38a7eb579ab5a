// See trusted_files.h: what does not depend on the system (the handle's ownership, the development switch).
#include "config/trusted_files.h"

#include <atomic>
#include <utility>

namespace csi_proxy::host {
namespace {

std::atomic<bool> g_allow_untrusted{false};

}  // namespace

TrustedFile::TrustedFile(TrustedFile&& other) noexcept
    : path_(std::move(other.path_)), handle_(std::exchange(other.handle_, -1)) {}

TrustedFile& TrustedFile::operator=(TrustedFile&& other) noexcept {
  if (this != &other) {
    if (handle_ != -1) CloseFileHandle(handle_);
    path_ = std::move(other.path_);
    handle_ = std::exchange(other.handle_, -1);
  }
  return *this;
}

TrustedFile::~TrustedFile() {
  if (handle_ != -1) CloseFileHandle(handle_);
}

intptr_t TrustedFile::Release() { return std::exchange(handle_, -1); }

void AllowUntrustedFiles() { g_allow_untrusted = true; }

bool UntrustedFilesAllowed() { return g_allow_untrusted; }

}  // namespace csi_proxy::host
