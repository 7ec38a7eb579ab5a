// See scratch.h.
#include "scratch.h"

#include <stdlib.h>
#include <sys/mount.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <utility>
#include <vector>

#include "cleanup.h"

namespace csi_proxy::bench {
namespace fs = std::filesystem;

namespace {
// Mount targets at or beneath `dir`, innermost first. Octal escapes in mountinfo (\040 for a space) are decoded.
std::vector<std::string> MountsBeneath(const std::string& dir) {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  std::vector<std::string> out;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string id, parent, devno, root, target;
    fields >> id >> parent >> devno >> root >> target;
    std::string decoded;
    for (size_t i = 0; i < target.size(); ++i) {
      if (target[i] == '\\' && i + 3 < target.size()) {
        decoded.push_back(static_cast<char>(std::stoi(target.substr(i + 1, 3), nullptr, 8)));
        i += 3;
      } else {
        decoded.push_back(target[i]);
      }
    }
    if (decoded == dir || decoded.rfind(dir + "/", 0) == 0) out.push_back(decoded);
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.size() > b.size(); });
  return out;
}
}  // namespace

ScratchDir::ScratchDir(const std::string& prefix) {
  std::string templ = "/tmp/" + prefix + "-XXXXXX";
  if (mkdtemp(templ.data()) == nullptr) throw std::runtime_error(std::string("mkdtemp: ") + std::strerror(errno));
  path_ = templ;
  cleanup_slot_ = RegisterPath(path_);
}

ScratchDir::~ScratchDir() {
  // The directory is new and private: whatever is mounted beneath it was mounted by this program.
  bool still_mounted = false;
  for (int round = 0; round < 3; ++round) {
    auto mounts = MountsBeneath(path_);
    if (mounts.empty()) {
      still_mounted = false;
      break;
    }
    still_mounted = true;
    for (const auto& m : mounts) umount2(m.c_str(), MNT_DETACH);
  }
  if (!still_mounted) {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  UnregisterPath(cleanup_slot_);
}

std::string ScratchDir::MakeDir(const std::string& name) const {
  fs::create_directories(Sub(name));
  return Sub(name);
}

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
