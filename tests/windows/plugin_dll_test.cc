// What only the Windows build of a group library must show (the example group's own unit test,
// sdk/examples/echo/echo_plugin_test.cc, runs under Wine beside it): the DLL loads by absolute path with no MinGW
// runtime DLL beside it, and its export table holds exactly the one entry point of the C ABI.
#include <windows.h>

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "csi_proxy/plugin_abi.h"

namespace {

std::wstring Wide(const std::string& s) { return std::wstring(s.begin(), s.end()); }

// The names in a loaded module's export directory; "<unnamed export>" for an export by ordinal only.
std::vector<std::string> ExportedNames(HMODULE module) {
  auto* base = reinterpret_cast<const unsigned char*>(module);
  auto* dos = reinterpret_cast<const IMAGE_DOS_HEADER*>(base);
  auto* nt = reinterpret_cast<const IMAGE_NT_HEADERS*>(base + dos->e_lfanew);
  const auto& dir = nt->OptionalHeader.DataDirectory[IMAGE_DIRECTORY_ENTRY_EXPORT];
  std::vector<std::string> names;
  if (dir.Size == 0) return names;
  auto* exports = reinterpret_cast<const IMAGE_EXPORT_DIRECTORY*>(base + dir.VirtualAddress);
  auto* name_rvas = reinterpret_cast<const DWORD*>(base + exports->AddressOfNames);
  for (DWORD i = 0; i < exports->NumberOfNames; ++i) {
    names.emplace_back(reinterpret_cast<const char*>(base + name_rvas[i]));
  }
  if (exports->NumberOfFunctions != exports->NumberOfNames) names.emplace_back("<unnamed export>");
  return names;
}

TEST(GroupDll, LoadsByAbsolutePathAndExportsOnlyTheNegotiationEntryPoint) {
  HMODULE module = LoadLibraryExW(Wide(ECHO_LIBRARY).c_str(), nullptr, LOAD_WITH_ALTERED_SEARCH_PATH);
  ASSERT_NE(module, nullptr) << "LoadLibraryExW(" << ECHO_LIBRARY << ") failed with error " << GetLastError();
  EXPECT_EQ(ExportedNames(module), std::vector<std::string>{CSI_PROXY_PLUGIN_ENTRY_SYMBOL});
  EXPECT_NE(GetProcAddress(module, CSI_PROXY_PLUGIN_ENTRY_SYMBOL), nullptr);
  FreeLibrary(module);
}

}  // namespace
