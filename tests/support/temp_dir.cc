// See temp_dir.h.
#include "temp_dir.h"

#include <ftw.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <vector>

#include "cleanup.h"
#include "mount_table_linux.h"

namespace csi_proxy::testing {

TempDir::TempDir(const std::string& prefix) {
  std::string templ = "/tmp/" + prefix + "-XXXXXX";
  if (::mkdtemp(templ.data()) == nullptr) throw std::runtime_error(std::string("mkdtemp: ") + std::strerror(errno));
  path_ = templ;
  cleanup_slot_ = RegisterPath(path_);
}

TempDir::~TempDir() {
  // Deepest first, a few rounds: a mount may hide another one beneath the same point.
  for (int round = 0; round < 3; ++round) {
    auto mounts = common::ReadMountTable();
    if (!mounts.ok()) break;
    std::vector<std::string> beneath;
    for (const auto& m : *mounts) {
      if (m.target == path_ || m.target.rfind(path_ + "/", 0) == 0) beneath.push_back(m.target);
    }
    if (beneath.empty()) break;
    std::sort(beneath.begin(), beneath.end(), [](auto& a, auto& b) { return a.size() > b.size(); });
    for (const auto& target : beneath) ::umount2(target.c_str(), MNT_DETACH);
  }
  ::nftw(
      path_.c_str(),
      [](const char* p, const struct stat* sb, int, struct FTW*) {
        if (S_ISDIR(sb->st_mode)) {
          ::rmdir(p);
        } else {
          ::unlink(p);
        }
        return 0;
      },
      16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
  UnregisterPath(cleanup_slot_);
}

std::string TempDir::MakeDir(const std::string& name) const {
  std::filesystem::create_directories(Sub(name));
  return Sub(name);
}

std::string TempDir::Write(const std::string& name, const std::string& content) const {
  const std::string file = Sub(name);
  std::filesystem::create_directories(std::filesystem::path(file).parent_path());
  std::ofstream(file, std::ios::binary) << content;
  return file;
}

}  // namespace csi_proxy::testing
