// See scoped_mount.h.
#include "scoped_mount.h"

#include <sys/mount.h>

#include <utility>

#include "cleanup.h"

namespace csi_proxy::bench {
using namespace ::csi_proxy::testing;  // the support library shared with the tests (tests/support)

ScopedMount::ScopedMount(const std::string& target) : target_(target), slot_(RegisterMount(target)) {}

ScopedMount::~ScopedMount() {
  if (!target_.empty()) umount2(target_.c_str(), MNT_DETACH);
  Release();
}

ScopedMount::ScopedMount(ScopedMount&& other) noexcept
    : target_(std::exchange(other.target_, {})), slot_(std::exchange(other.slot_, -1)) {}

ScopedMount& ScopedMount::operator=(ScopedMount&& other) noexcept {
  if (this != &other) {
    if (!target_.empty()) umount2(target_.c_str(), MNT_DETACH);
    Release();
    target_ = std::exchange(other.target_, {});
    slot_ = std::exchange(other.slot_, -1);
  }
  return *this;
}

void ScopedMount::Release() {
  UnregisterMount(slot_);
  slot_ = -1;
  target_.clear();
}

}  // namespace csi_proxy::bench
