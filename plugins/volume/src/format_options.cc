// The allow-lists of FormatVolume's options; see format_options.h.
#include "format_options.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string_view>

#include "text.h"

namespace csi_proxy::volume {
namespace {

using ValueCheck = std::function<bool(std::string_view)>;

constexpr size_t kMaxOptions = 64;
constexpr size_t kMaxOptionBytes = 256;

std::vector<std::string_view> SplitComma(std::string_view text) {
  std::vector<std::string_view> parts;
  for (;;) {
    auto comma = text.find(',');
    parts.push_back(text.substr(0, comma));
    if (comma == std::string_view::npos) return parts;
    text.remove_prefix(comma + 1);
  }
}

bool IsDigits(std::string_view v) {
  return !v.empty() && v.size() <= 19 && std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool DecimalIn(std::string_view v, uint64_t low, uint64_t high) {
  uint64_t n = 0;
  return IsDigits(v) && common::ParseDecimal(v, n) && n >= low && n <= high;
}

ValueCheck Decimal(uint64_t low = 0, uint64_t high = UINT64_MAX) {
  return [=](std::string_view v) { return DecimalIn(v, low, high); };
}

ValueCheck OneOf(std::vector<std::string> values) {
  return [values = std::move(values)](std::string_view v) {
    return std::find(values.begin(), values.end(), v) != values.end();
  };
}

const ValueCheck kBool = OneOf({"0", "1"});

// A size as mkfs takes it: digits and an optional unit (k, m, g, t; xfs also s for sectors, b for blocks).
bool IsSize(std::string_view v) {
  if (v.empty()) return false;
  char last = v.back();
  if (std::string_view("kKmMgGtTsb").find(last) != std::string_view::npos) v.remove_suffix(1);
  return IsDigits(v);
}

bool IsPercent(std::string_view v) {
  auto dot = v.find('.');
  std::string_view whole = v.substr(0, dot);
  if (!DecimalIn(whole, 0, 50)) return false;
  return dot == std::string_view::npos || IsDigits(v.substr(dot + 1));
}

ValueCheck Label(size_t max) {
  return [max](std::string_view v) {
    return !v.empty() && v.size() <= max && std::all_of(v.begin(), v.end(), [](char c) {
      return common::IsAsciiAlnum(c) || c == '.' || c == '_' || c == '-';
    });
  };
}

// Comma-separated names of lowercase letters, digits and '_' ("has_journal,^metadata_csum" with `negatable`).
ValueCheck NameList(bool negatable) {
  return [negatable](std::string_view v) {
    for (std::string_view item : SplitComma(v)) {
      if (negatable && !item.empty() && item.front() == '^') item.remove_prefix(1);
      if (item.empty() || !std::all_of(item.begin(), item.end(), [](char c) {
            return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
          })) {
        return false;
      }
    }
    return true;
  };
}

// Comma-separated `key=value` (or a bare `key` where its check is null) with keys from `keys`.
using SubOptions = std::vector<std::pair<std::string, ValueCheck>>;

struct Flag {
  std::string name;
  ValueCheck value;     // null: the flag takes no value
  SubOptions sub;       // non-empty: the value is a list of these sub-options (and `value` is unused)
  std::string explain;  // what values are allowed, for messages
};

// Checks a sub-option list; on refusal `why` names the refused part.
bool CheckSubOptions(const SubOptions& allowed, std::string_view value, std::string& why) {
  for (std::string_view item : SplitComma(value)) {
    auto eq = item.find('=');
    std::string_view key = item.substr(0, eq);
    auto it = std::find_if(allowed.begin(), allowed.end(), [&](const auto& a) { return a.first == key; });
    if (it == allowed.end()) {
      why = "sub-option " + common::QuoteValue(key) + " is not allowed";
      return false;
    }
    const bool bare = eq == std::string_view::npos;
    if (bare != !it->second || (!bare && !it->second(item.substr(eq + 1)))) {
      why = "sub-option " + common::QuoteValue(item) + " has a value that is not allowed";
      return false;
    }
  }
  return true;
}

std::string Keys(const SubOptions& sub) {
  std::string keys;
  for (const auto& [key, check] : sub) keys += (keys.empty() ? "" : ", ") + key + (check ? "=" : "");
  return keys;
}

const std::vector<Flag>& ExtFlags() {
  static const std::vector<Flag> flags = {
      {"-b", OneOf({"1024", "2048", "4096", "8192", "16384", "32768", "65536"}), {}, "a block size, 1024 to 65536"},
      {"-C", IsSize, {}, "a cluster size"},
      {"-E",
       nullptr,
       {{"stride", Decimal()},
        {"stripe_width", Decimal()},
        {"stripe-width", Decimal()},
        {"resize", Decimal()},
        {"lazy_itable_init", kBool},
        {"lazy_journal_init", kBool},
        {"assume_storage_prezeroed", kBool},
        {"packed_meta_blocks", kBool},
        {"num_backup_sb", Decimal(0, 2)},
        {"discard", nullptr},
        {"nodiscard", nullptr}},
       ""},
      {"-i", Decimal(1024, 67108864), {}, "bytes per inode, 1024 to 67108864"},
      {"-I", OneOf({"128", "256", "512", "1024", "2048", "4096"}), {}, "an inode size, 128 to 4096"},
      {"-j", nullptr, {}, ""},
      {"-J", nullptr, {{"size", Decimal()}}, ""},
      {"-L", Label(16), {}, "a label of up to 16 letters, digits, '.', '_' or '-'"},
      {"-m", IsPercent, {}, "a percentage, 0 to 50"},
      {"-N", Decimal(), {}, "a number of inodes"},
      {"-O", NameList(true), {}, "comma-separated features, '^' to turn one off"},
      {"-T", NameList(false), {}, "comma-separated usage types"},
  };
  return flags;
}

const std::vector<Flag>& XfsFlags() {
  static const std::vector<Flag> flags = {
      {"-b", nullptr, {{"size", IsSize}}, ""},
      {"-d",
       nullptr,
       {{"agcount", Decimal()},
        {"agsize", IsSize},
        {"size", IsSize},
        {"su", IsSize},
        {"sunit", Decimal()},
        {"sw", Decimal()},
        {"swidth", Decimal()}},
       ""},
      {"-i",
       nullptr,
       {{"size", IsSize},
        {"maxpct", Decimal(0, 100)},
        {"align", kBool},
        {"sparse", kBool},
        {"attr", Decimal(1, 2)},
        {"projid32bit", kBool},
        {"nrext64", kBool}},
       ""},
      {"-l",
       nullptr,
       {{"size", IsSize}, {"su", IsSize}, {"sunit", Decimal()}, {"lazy-count", kBool}, {"version", Decimal(1, 2)}},
       ""},
      {"-L", Label(12), {}, "a label of up to 12 letters, digits, '.', '_' or '-'"},
      {"-m",
       nullptr,
       {{"crc", kBool},
        {"finobt", kBool},
        {"reflink", kBool},
        {"rmapbt", kBool},
        {"bigtime", kBool},
        {"inobtcount", kBool}},
       ""},
      {"-n", nullptr, {{"size", IsSize}, {"ftype", kBool}, {"version", OneOf({"2", "ci"})}}, ""},
      {"-s", nullptr, {{"size", IsSize}}, ""},
  };
  return flags;
}

bool IsExt(const std::string& fs_type) { return fs_type == "ext2" || fs_type == "ext3" || fs_type == "ext4"; }
bool IsWindowsFilesystem(const std::string& fs_type) { return fs_type == "ntfs" || fs_type == "refs"; }

// MSFT_Volume.Format's in-parameters a request may set, per Windows file system.
struct Parameter {
  const char* name;
  enum class Kind { kBool, kNumber, kLabel } kind;
  ValueCheck number;  // kNumber: which numbers (as text)
  const char* explain;
};

bool PowerOfTwoIn(std::string_view v, uint64_t low, uint64_t high) {
  uint64_t n = 0;
  return DecimalIn(v, low, high) && common::ParseDecimal(v, n) && (n & (n - 1)) == 0;
}

const std::vector<Parameter>& ParametersOf(const std::string& fs_type) {
  static const std::vector<Parameter> ntfs = {
      {"AllocationUnitSize", Parameter::Kind::kNumber, [](std::string_view v) { return PowerOfTwoIn(v, 512, 2097152); },
       "a power of two, 512 to 2097152"},
      {"FileSystemLabel", Parameter::Kind::kLabel, nullptr, "up to 32 letters, digits, '.', '_' or '-'"},
      {"Compress", Parameter::Kind::kBool, nullptr, "true or false"},
      {"ShortFileNameSupport", Parameter::Kind::kBool, nullptr, "true or false"},
      {"UseLargeFRS", Parameter::Kind::kBool, nullptr, "true or false"},
  };
  static const std::vector<Parameter> refs = {
      {"AllocationUnitSize", Parameter::Kind::kNumber, OneOf({"4096", "65536"}), "4096 or 65536"},
      {"FileSystemLabel", Parameter::Kind::kLabel, nullptr, "up to 32 letters, digits, '.', '_' or '-'"},
      {"SetIntegrityStreams", Parameter::Kind::kBool, nullptr, "true or false"},
  };
  return fs_type == "refs" ? refs : ntfs;
}

std::string ParameterNames(const std::string& fs_type) {
  std::string names;
  for (const auto& p : ParametersOf(fs_type)) names += (names.empty() ? "" : ", ") + std::string(p.name);
  return names;
}

const std::vector<Flag>* FlagsOf(const std::string& fs_type) {
  if (IsExt(fs_type)) return &ExtFlags();
  if (fs_type == "xfs") return &XfsFlags();
  return nullptr;
}

}  // namespace

std::string AllowedMkfsFlags(const std::string& fs_type) {
  if (IsWindowsFilesystem(fs_type)) return ParameterNames(fs_type);
  const auto* flags = FlagsOf(fs_type);
  std::string list;
  if (flags == nullptr) return list;
  for (const auto& flag : *flags) list += (list.empty() ? "" : ", ") + flag.name;
  return list;
}

Status CheckMkfsOptions(const std::string& fs_type, const std::vector<std::string>& options) {
  if (options.empty()) return Status::Ok();
  if (IsWindowsFilesystem(fs_type)) return ParseFormatParameters(fs_type, options).status();
  const auto* flags = FlagsOf(fs_type);
  if (flags == nullptr) return InvalidArgument("mkfs options are not accepted for " + common::QuoteValue(fs_type));
  if (options.size() > kMaxOptions) {
    return InvalidArgument("at most " + std::to_string(kMaxOptions) + " mkfs options are accepted, not " +
                           std::to_string(options.size()));
  }
  for (size_t i = 0; i < options.size(); ++i) {
    const std::string& item = options[i];
    auto flag = std::find_if(flags->begin(), flags->end(), [&](const Flag& f) { return f.name == item; });
    if (flag == flags->end()) {
      return InvalidArgument("mkfs option " + common::QuoteValue(item) + " is not allowed for " + fs_type +
                             " (allowed: " + AllowedMkfsFlags(fs_type) +
                             "; each flag and its value are separate items)");
    }
    const bool takes_value = flag->value || !flag->sub.empty();
    if (!takes_value) continue;
    if (i + 1 == options.size()) return InvalidArgument("mkfs option " + item + " needs a value");
    const std::string& value = options[++i];
    std::string why;
    bool ok = value.size() <= kMaxOptionBytes && !value.empty() && value.front() != '-';
    if (ok) ok = flag->sub.empty() ? flag->value(value) : CheckSubOptions(flag->sub, value, why);
    if (!ok) {
      std::string allowed = flag->sub.empty() ? flag->explain : "comma-separated " + Keys(flag->sub);
      return InvalidArgument("the value " + common::QuoteValue(value) + " of mkfs option " + item +
                             " is not allowed for " + fs_type + (why.empty() ? "" : ": " + why) +
                             " (allowed: " + allowed + ")");
    }
  }
  return Status::Ok();
}

StatusOr<std::vector<FormatParameter>> ParseFormatParameters(const std::string& fs_type,
                                                             const std::vector<std::string>& options) {
  if (!IsWindowsFilesystem(fs_type)) {
    return InvalidArgument("format parameters are not accepted for " + common::QuoteValue(fs_type));
  }
  if (options.size() > kMaxOptions) {
    return InvalidArgument("at most " + std::to_string(kMaxOptions) + " format options are accepted, not " +
                           std::to_string(options.size()));
  }
  std::vector<FormatParameter> parameters;
  for (const std::string& item : options) {
    const auto eq = item.find('=');
    const std::string name = item.substr(0, eq);
    const auto& allowed = ParametersOf(fs_type);
    auto p = std::find_if(allowed.begin(), allowed.end(), [&](const Parameter& a) { return name == a.name; });
    if (eq == std::string::npos || p == allowed.end()) {
      return InvalidArgument("format option " + common::QuoteValue(item) + " is not allowed for " + fs_type +
                             " (allowed: Name=value with Name one of " + ParameterNames(fs_type) + ")");
    }
    if (std::any_of(parameters.begin(), parameters.end(), [&](const auto& q) { return q.name == name; })) {
      return InvalidArgument("format option " + name + " is given twice");
    }
    const std::string value = item.substr(eq + 1);
    FormatParameter parameter{name, false};
    bool ok = value.size() <= kMaxOptionBytes;
    switch (p->kind) {
      case Parameter::Kind::kBool:
        ok = ok && (value == "true" || value == "false");
        parameter.value = value == "true";
        break;
      case Parameter::Kind::kNumber: {
        uint64_t n = 0;
        ok = ok && p->number(value) && common::ParseDecimal(value, n);
        parameter.value = n;
        break;
      }
      case Parameter::Kind::kLabel:
        ok = ok && Label(32)(value);
        parameter.value = value;
        break;
    }
    if (!ok) {
      return InvalidArgument("the value " + common::QuoteValue(value) + " of format option " + name +
                             " is not allowed for " + fs_type + " (allowed: " + p->explain + ")");
    }
    parameters.push_back(std::move(parameter));
  }
  return parameters;
}

}  // namespace csi_proxy::volume
