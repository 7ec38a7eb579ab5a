// Status and StatusOr: how every layer of a group library reports failure.
// Codes are gRPC's, so a status travels to the client unchanged. Header-only, no dependencies.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

namespace csi_proxy {

// The numeric values are gRPC's status codes (and the C ABI's csi_proxy_status_code).
enum class Code : int32_t {
  kOk = 0,
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kAlreadyExists = 6,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kAborted = 10,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kDataLoss = 15,
  kUnauthenticated = 16,
};

// gRPC's name of a status code ("NOT_FOUND"), or "code N" for a value outside gRPC's range.
inline std::string CodeName(int32_t code) {
  static const char* const kNames[] = {
      "OK",        "CANCELLED",      "UNKNOWN",           "INVALID_ARGUMENT",   "DEADLINE_EXCEEDED",
      "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
      "ABORTED",   "OUT_OF_RANGE",   "UNIMPLEMENTED",     "INTERNAL",           "UNAVAILABLE",
      "DATA_LOSS", "UNAUTHENTICATED"};
  if (code >= 0 && code <= 16) return kNames[code];
  return "code " + std::to_string(code);
}

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }

  // Prefixes the message with context, keeping the code: "formatting /dev/loop3p1: <message>".
  Status WithContext(const std::string& context) const {
    return ok() ? *this : Status(code_, context + ": " + message_);
  }

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return {Code::kInvalidArgument, std::move(m)}; }
inline Status NotFound(std::string m) { return {Code::kNotFound, std::move(m)}; }
inline Status AlreadyExists(std::string m) { return {Code::kAlreadyExists, std::move(m)}; }
inline Status PermissionDenied(std::string m) { return {Code::kPermissionDenied, std::move(m)}; }
inline Status FailedPrecondition(std::string m) { return {Code::kFailedPrecondition, std::move(m)}; }
inline Status Unimplemented(std::string m) { return {Code::kUnimplemented, std::move(m)}; }
inline Status Internal(std::string m) { return {Code::kInternal, std::move(m)}; }
inline Status Unavailable(std::string m) { return {Code::kUnavailable, std::move(m)}; }
inline Status DeadlineExceeded(std::string m) { return {Code::kDeadlineExceeded, std::move(m)}; }

// A value or the status that explains why there is none.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)) {}          // NOLINT: implicit by design
  StatusOr(Status status) : status_(std::move(status)) {}  // NOLINT: implicit by design

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace csi_proxy

// Returns early from the enclosing function when a Status-returning expression fails.
#define CSI_PROXY_RETURN_IF_ERROR(expr)                    \
  do {                                                     \
    ::csi_proxy::Status csi_proxy_status_ = (expr);        \
    if (!csi_proxy_status_.ok()) return csi_proxy_status_; \
  } while (0)

// Declares or assigns `lhs` from a StatusOr-returning expression, or returns its status from the enclosing
// function when it failed:  CSI_PROXY_ASSIGN_OR_RETURN(auto disk, FindDisk(number));
#define CSI_PROXY_ASSIGN_OR_RETURN(lhs, expr) \
  CSI_PROXY_ASSIGN_OR_RETURN_IMPL_(CSI_PROXY_CONCAT_(csi_proxy_statusor_, __LINE__), lhs, expr)
#define CSI_PROXY_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                     \
  if (!tmp.ok()) return tmp.status();                    \
  lhs = std::move(tmp).value()
#define CSI_PROXY_CONCAT_(a, b) CSI_PROXY_CONCAT_INNER_(a, b)
#define CSI_PROXY_CONCAT_INNER_(a, b) a##b
