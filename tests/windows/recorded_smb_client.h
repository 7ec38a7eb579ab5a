// The SMB client's WMI (ROOT\Microsoft\Windows\SMB) as recorded answers for recorded_wmi.h: MSFT_SmbGlobalMapping
// instances and what Create and Remove do to them, as Microsoft documents the class (MSFT_SmbGlobalMapping,
// MSFT_SmbMapping's Status values) and upstream reads it (pkg/wmi/smb.go). A failure is what the real client
// returns when the SMB provider posts a Win32 error: ExecMethod's HRESULT_FROM_WIN32 of it. Portable: the SMB
// group's Windows logic runs against it on Linux, and the Windows tests use it under Wine.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "recorded_wmi.h"

namespace csi_proxy::testing {

class RecordedSmbClient {
 public:
  static constexpr const char* kClass = "MSFT_SmbGlobalMapping";

  explicit RecordedSmbClient(RecordedWmi& wmi) : wmi_(wmi) {
    wmi_.AddClass(wmi::kSmbNamespace, kClass);
    wmi_.OnMethod(wmi::kSmbNamespace, kClass, "Create",
                  [this](wmi::Object*, const wmi::Arguments& in) -> StatusOr<wmi::MethodResult> {
                    if (auto failure = TakeFailure(create_failure_)) return *failure;
                    if (!create_makes_nothing_) Map(String(RecordedWmi::Argument(in, "RemotePath")));
                    return Answer(0);
                  });
    wmi_.OnMethod(wmi::kSmbNamespace, kClass, "Remove",
                  [this](wmi::Object* mapping, const wmi::Arguments&) -> StatusOr<wmi::MethodResult> {
                    if (auto failure = TakeFailure(remove_failure_)) return *failure;
                    const std::string path = mapping->path();
                    wmi_.Remove(wmi::kSmbNamespace, kClass, [&](const wmi::Object& o) { return o.path() == path; });
                    return Answer(0);
                  });
  }

  // A global mapping that exists, with its Status (0 OK, 2 Disconnected, ...).
  void Map(const std::string& remote_path, int64_t status = 0) {
    wmi_.Add(wmi::kSmbNamespace,
             wmi::Object(kClass, kClass + std::string(".RemotePath=\"") + Escaped(remote_path) + "\"",
                         {{"RemotePath", remote_path},
                          {"LocalPath", std::string()},
                          {"Status", status},
                          {"RequirePrivacy", true},
                          {"RequireIntegrity", false},
                          {"UseWriteThrough", false}}));
  }

  // Whether a global mapping of `remote_path` exists (compared as WQL compares strings: without regard to case).
  bool IsMapped(const std::string& remote_path) {
    auto session = wmi_.Connector()(wmi::kSmbNamespace);
    auto found = (*session)->Execute(wmi::Query{kClass, {}, {{"RemotePath", "=", remote_path}}});
    return found.ok() && !found->empty();
  }

  // The next Create or Remove fails with this HRESULT (0x8007052E: ERROR_LOGON_FAILURE, ...).
  void FailNextCreate(uint32_t hresult) { create_failure_ = hresult; }
  void FailNextRemove(uint32_t hresult) { remove_failure_ = hresult; }
  // Create answers success and makes nothing: the client must not believe it.
  void CreateMakesNothing() { create_makes_nothing_ = true; }

 private:
  static std::string String(const wmi::Value& v) {
    return std::holds_alternative<std::string>(v) ? std::get<std::string>(v) : "";
  }
  // A key value in an object path: backslashes and quotes escaped.
  static std::string Escaped(const std::string& value) {
    std::string out;
    for (char c : value) {
      if (c == '\\' || c == '"') out += '\\';
      out += c;
    }
    return out;
  }
  static std::optional<Status> TakeFailure(std::optional<uint32_t>& failure) {
    if (!failure) return std::nullopt;
    Status status = wmi::HresultStatus(*failure, "WMI MSFT_SmbGlobalMapping method");
    failure.reset();
    return status;
  }

  RecordedWmi& wmi_;
  std::optional<uint32_t> create_failure_;
  std::optional<uint32_t> remove_failure_;
  bool create_makes_nothing_ = false;
};

}  // namespace csi_proxy::testing
