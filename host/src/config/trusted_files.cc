// See trusted_files.h.
#include "config/trusted_files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>

namespace csi_proxy::host {
namespace {

std::atomic<bool> g_allow_untrusted{false};

std::string Mode(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

// Why `st` is not to be trusted, or "" when it is.
std::string Untrusted(const struct stat& st, bool directory) {
  if (st.st_uid != 0 && st.st_uid != geteuid()) return "is owned by uid " + std::to_string(st.st_uid);
  bool writable_by_others = (st.st_mode & (S_IWGRP | S_IWOTH)) != 0;
  // A sticky directory owned by root (/tmp) lets nobody replace another user's file in it.
  if (directory && (st.st_mode & S_ISVTX) && st.st_uid == 0) writable_by_others = false;
  if (writable_by_others) return "is writable by its group or by others (mode " + Mode(st.st_mode) + ")";
  return "";
}

}  // namespace

void AllowUntrustedFiles() { g_allow_untrusted = true; }

Status CheckTrustedFile(const std::string& path, const std::string& what) {
  if (g_allow_untrusted) return Status::Ok();
  std::error_code ec;
  std::filesystem::path real = std::filesystem::canonical(path, ec);
  if (ec) return Status::Ok();  // a missing file is reported by whoever opens it
  struct stat st {};
  if (stat(real.c_str(), &st) != 0) return Status::Ok();
  if (std::string why = Untrusted(st, false); !why.empty()) {
    return PermissionDenied(what + " " + real.string() + " " + why +
                            "; only root may be able to change what a root host runs (--allow-untrusted-files "
                            "turns this check off for development)");
  }
  struct stat dir {};
  if (stat(real.parent_path().c_str(), &dir) == 0) {
    if (std::string why = Untrusted(dir, true); !why.empty()) {
      return PermissionDenied(what + " " + real.string() + " lies in " + real.parent_path().string() + ", which " +
                              why + "; anyone who can write there can replace it");
    }
  }
  return Status::Ok();
}

Status CheckTrustedDirectory(const std::string& path, const std::string& what) {
  if (g_allow_untrusted) return Status::Ok();
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) return Status::Ok();  // created by the host itself
  if (!S_ISDIR(st.st_mode)) return FailedPrecondition(what + " " + path + " is not a directory");
  if (std::string why = Untrusted(st, true); !why.empty()) {
    return PermissionDenied(what + " " + path + " " + why +
                            "; another user could replace the sockets in it (--allow-untrusted-files turns this "
                            "check off for development)");
  }
  return Status::Ok();
}

}  // namespace csi_proxy::host
