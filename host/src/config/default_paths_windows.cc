// See default_paths.h: the Windows conventions, as upstream csi-proxy has them (C:\var\lib\kubelet, the pipes
// \\.\pipe\csi-proxy-<group>-<version>) and as the release zip lays the files out (csi-proxy.exe, its
// configuration and the group DLLs in one directory).
#include <filesystem>

#include "config/default_paths.h"
#include "config/win32_windows.h"

namespace csi_proxy::host {

namespace fs = std::filesystem;

OperatingSystem ThisSystem() { return OperatingSystem::kWindows; }

// libstdc++ does not take \\.\ (the device namespace, where the pipes are) for a root.
bool IsAbsolutePath(const std::string& path) {
  return fs::path(path).is_absolute() || path.rfind(R"(\\.\)", 0) == 0 || path.rfind(R"(\\?\)", 0) == 0;
}

std::string ExecutableDirectory() {
  std::wstring exe = ExecutablePath();
  if (exe.empty()) return ".";
  return Narrow(exe.substr(0, exe.find_last_of(L"\\/")));
}

std::string DefaultConfigPath(const std::string& executable_dir) {
  return (fs::path(executable_dir) / "csi-proxy.toml").string();
}

std::string DefaultPluginDir(const std::string& executable_dir) { return executable_dir; }

std::string DefaultEndpointDir() { return R"(\\.\pipe)"; }
std::string DefaultKubeletPath() { return R"(C:\var\lib\kubelet)"; }
// Under ProgramData, whose default DACL lets users add entries but change none of another's: the trusted-file
// checks pass there on a stock node, where a directory made under C:\ (C:\var) lets every user change it.
std::string DefaultStateDir() {
  wchar_t program_data[MAX_PATH + 1];
  DWORD n = GetEnvironmentVariableW(L"ProgramData", program_data, MAX_PATH + 1);
  std::string root = n > 0 && n <= MAX_PATH ? Narrow(std::wstring(program_data, n)) : R"(C:\ProgramData)";
  return root + R"(\csi-proxy)";
}

std::string DefaultAdminSocket(const std::string& endpoint_dir) {
  return EndpointPath(endpoint_dir, "csi-proxy-admin");
}

std::string EndpointPath(const std::string& endpoint_dir, const std::string& name) {
  std::string dir = endpoint_dir;
  while (!dir.empty() && (dir.back() == '\\' || dir.back() == '/')) dir.pop_back();
  return dir + "\\" + name;
}

// SYSTEM and the Administrators group, nobody else: stricter than upstream's default (the named-pipe file
// system's default DACL, which also lets Everyone and Anonymous open the pipe for reading).
std::string DefaultPipeSecurity() { return "D:P(A;;GA;;;SY)(A;;GA;;;BA)"; }

std::string GroupLibraryFileName(const std::string& name) { return "csi-proxy-" + name + ".dll"; }

}  // namespace csi_proxy::host
