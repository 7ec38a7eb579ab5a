// Service-name validation; see service_name.h for the rules.
#include "service_name.h"

#include "text.h"

#include <array>
#include <cstdio>

namespace csi_proxy::system {
namespace {

constexpr std::string_view kServiceSuffix = ".service";

// systemd's unit types other than service.
constexpr std::array<std::string_view, 10> kOtherUnitTypes = {"socket", "target", "device", "mount", "automount",
                                                              "swap",   "timer",  "path",   "slice", "scope"};

bool IsHexDigit(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

bool IsPlainChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == ':' || c == '_' ||
         c == '.' || c == '-';
}

Status Invalid(std::string_view name, const std::string& why) {
  return InvalidArgument("invalid service name " + common::QuoteValue(name) + ": " + why);
}

}  // namespace

StatusOr<std::string> CanonicalServiceUnit(std::string_view name) {
  if (name.empty()) return InvalidArgument("service name is empty");
  if (name.size() > kMaxUnitNameLength) {
    return Invalid(name, "longer than " + std::to_string(kMaxUnitNameLength) + " characters");
  }
  if (name.front() == '.' || name.front() == '-' || name.front() == '@') {
    return Invalid(name, "must not start with '.', '-' or '@'");
  }
  int ats = 0;
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    if (IsPlainChar(c)) continue;
    if (c == '@') {
      ++ats;
      continue;
    }
    if (c == '\\' && i + 3 < name.size() && name[i + 1] == 'x' && IsHexDigit(name[i + 2]) && IsHexDigit(name[i + 3])) {
      i += 3;
      continue;
    }
    return Invalid(name, "only letters, digits, ':', '_', '.', '-', '@' and \\xHH escapes are allowed");
  }
  if (ats > 1) return Invalid(name, "more than one '@'");

  std::string unit(name);
  if (unit.ends_with(kServiceSuffix)) {
    if (unit.size() == kServiceSuffix.size()) return Invalid(name, "the name before \".service\" is empty");
  } else {
    size_t dot = unit.rfind('.');
    if (dot != std::string::npos) {
      std::string_view type = std::string_view(unit).substr(dot + 1);
      for (std::string_view other : kOtherUnitTypes) {
        if (type == other) return Invalid(name, "not a service (only .service units can be managed)");
      }
    }
    unit += kServiceSuffix;
    if (unit.size() > kMaxUnitNameLength) {
      return Invalid(name,
                     "longer than " + std::to_string(kMaxUnitNameLength) + " characters once \".service\" is appended");
    }
  }
  std::string_view stem = std::string_view(unit).substr(0, unit.size() - kServiceSuffix.size());
  if (stem.ends_with('.')) return Invalid(name, "the name must not end with '.' before the suffix");
  if (size_t at = stem.find('@'); at != std::string_view::npos && at + 1 == stem.size()) {
    return Invalid(name, "a template needs an instance (\"name@instance\")");
  }
  return unit;
}

StatusOr<std::string> CanonicalWindowsServiceName(std::string_view name) {
  if (name.empty()) return InvalidArgument("service name is empty");
  if (name.size() > kMaxWindowsServiceNameLength) {
    return Invalid(name, "longer than " + std::to_string(kMaxWindowsServiceNameLength) + " characters");
  }
  for (char c : name) {
    if (common::IsAsciiAlnum(c)) continue;
    if (c == ' ' || c == '_' || c == '-' || c == '.' || c == '$' || c == '@' || c == '+' || c == '{' || c == '}') {
      continue;
    }
    return Invalid(name, "only letters, digits, ' ', '_', '-', '.', '$', '@', '+', '{' and '}' are allowed");
  }
  if (name.front() == ' ' || name.front() == '.' || name.front() == '-') {
    return Invalid(name, "must not start with ' ', '.' or '-'");
  }
  if (name.back() == ' ' || name.back() == '.') return Invalid(name, "must not end with ' ' or '.'");
  return common::AsciiLower(std::string(name));
}

StatusOr<std::string> CanonicalServiceName(std::string_view name, ServiceNaming naming) {
  return naming == ServiceNaming::kWindows ? CanonicalWindowsServiceName(name) : CanonicalServiceUnit(name);
}

}  // namespace csi_proxy::system
