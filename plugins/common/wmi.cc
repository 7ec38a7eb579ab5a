// The portable part of the WMI client; see wmi.h.
#include "wmi.h"

#include <algorithm>
#include <cstdio>

#include "text.h"

namespace csi_proxy::common::wmi {
namespace {

bool IsIdentifier(std::string_view name) {
  if (name.empty() || name.size() > 256) return false;
  if (!(name[0] == '_' || (name[0] >= 'A' && name[0] <= 'Z') || (name[0] >= 'a' && name[0] <= 'z'))) return false;
  return std::all_of(name.begin(), name.end(), [](char c) { return c == '_' || IsAsciiAlnum(c); });
}

std::string Hex32(uint32_t n) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08X", static_cast<unsigned>(n));
  return buf;
}

StatusOr<std::string> Literal(const Value& value) {
  if (const auto* b = std::get_if<bool>(&value)) return std::string(*b ? "TRUE" : "FALSE");
  if (const auto* n = std::get_if<int64_t>(&value)) return std::to_string(*n);
  if (const auto* s = std::get_if<std::string>(&value)) {
    std::string out = "'";
    for (char c : *s) {
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
        return InvalidArgument("a WMI query value may not hold control characters: " + QuoteValue(*s));
      }
      if (c == '\\' || c == '\'') out += '\\';
      out += c;
    }
    return out + "'";
  }
  if (std::holds_alternative<std::monostate>(value)) return std::string("NULL");
  return Internal("a WMI query condition compares a property with a list or an object");
}

// What each documented return value means and the status it stands for.
struct ReturnValueInfo {
  uint32_t value;
  Code code;
  const char* meaning;
};

// Standard CIM values, the extended CIM values and the Storage Management API's common return codes (Microsoft's
// "Storage Management API Common Return Codes"; the MSFT_* methods' pages list which each method returns).
constexpr ReturnValueInfo kReturnValues[] = {
    {1, Code::kUnimplemented, "Not supported"},
    {2, Code::kInternal, "Unspecified error"},
    {3, Code::kDeadlineExceeded, "Timeout"},
    {4, Code::kInternal, "Failed"},
    {5, Code::kInvalidArgument, "Invalid parameter"},
    {6, Code::kFailedPrecondition, "The disk is in use"},
    {7, Code::kInternal, "Not supported for an x86 process on x64"},
    {8, Code::kNotFound, "Object not found"},
    {4096, Code::kInternal, "A job was started (this client does not wait for jobs)"},
    {4097, Code::kOutOfRange, "Size not supported"},
    {4098, Code::kInternal, "Timeout not supported"},
    {4099, Code::kUnavailable, "The device is busy"},
    {40000, Code::kResourceExhausted, "Not enough available capacity"},
    {40001, Code::kPermissionDenied, "Access denied"},
    {40002, Code::kResourceExhausted, "Not enough resources to complete the operation"},
    {40003, Code::kUnavailable, "Cache out of date"},
    {40004, Code::kInternal, "An unexpected I/O error occurred"},
    {40005, Code::kInvalidArgument, "Exactly one of Size and UseMaximumSize must be given"},
    {40006, Code::kNotFound, "The object or object type is not in the cache"},
    {40007, Code::kInternal, "A fatal device hardware error"},
    {40018, Code::kFailedPrecondition, "The object is managed by Failover Clustering"},
    {41000, Code::kFailedPrecondition, "The disk has not been initialized"},
    {41001, Code::kFailedPrecondition, "The disk has already been initialized"},
    {41002, Code::kFailedPrecondition, "The disk is read only"},
    {41003, Code::kFailedPrecondition, "The disk is offline"},
    {41004, Code::kFailedPrecondition, "The disk's partition limit has been reached"},
    {41005, Code::kInvalidArgument, "The partition alignment is not a multiple of the disk's sector size"},
    {41006, Code::kInvalidArgument, "A parameter is not valid for this type of partition"},
    {41007, Code::kFailedPrecondition, "OEM partitions are present"},
    {41008, Code::kFailedPrecondition, "Data partitions are present"},
    {41009, Code::kFailedPrecondition, "Not supported on a critical disk"},
    {41010, Code::kInvalidArgument, "The partition type is not valid"},
    {41011, Code::kOutOfRange, "Only the first 2 TB are usable on MBR disks"},
    {41012, Code::kInvalidArgument, "The offset is not valid"},
    {41013, Code::kFailedPrecondition, "The disk holds partitions, so its style cannot change"},
    {41014, Code::kFailedPrecondition, "The disk is too small for the GPT partition style"},
    {41018, Code::kFailedPrecondition, "The object is managed by Failover Clustering"},
    {42000, Code::kInternal, "The partition was deleted, its access paths were not"},
    {42001, Code::kFailedPrecondition, "The extended partition still holds partitions"},
    {42002, Code::kAlreadyExists, "The access path is already in use"},
    {42004, Code::kFailedPrecondition, "Hidden partitions take no access paths"},
    {42005, Code::kFailedPrecondition, "A volume GUID path cannot be removed"},
    {42006, Code::kFailedPrecondition, "The drive letter of a boot or paging file partition cannot be removed"},
    {42007, Code::kInvalidArgument, "The access path is not valid"},
    {42008, Code::kFailedPrecondition, "A partition holding a volume with errors cannot shrink"},
    {42009, Code::kFailedPrecondition, "A partition holding an unknown file system cannot be resized"},
    {42010, Code::kFailedPrecondition, "Not allowed on a system or critical partition"},
    {42011, Code::kFailedPrecondition, "Only supported on data partitions"},
    {42012, Code::kFailedPrecondition, "A partition takes one drive letter only"},
    {42013, Code::kFailedPrecondition, "This type of partition takes no drive letter"},
    {43000, Code::kInvalidArgument, "The cluster size is not valid"},
    {43001, Code::kFailedPrecondition, "The file system is not supported"},
    {43002, Code::kFailedPrecondition, "The volume cannot be quick formatted"},
    {43003, Code::kInvalidArgument, "The number of clusters exceeds 32 bits"},
    {43004, Code::kInvalidArgument, "The UDF version is not supported"},
    {43005, Code::kInvalidArgument, "The cluster size must be a multiple of the disk's physical sector size"},
    {43006, Code::kFailedPrecondition, "The drive is read only"},
    {43007, Code::kInternal, "The repair failed"},
    {43008, Code::kInternal, "The scan failed"},
    {43013, Code::kFailedPrecondition, "The drive cannot be opened for direct access (in use?)"},
    {43014, Code::kFailedPrecondition, "The file system of the drive cannot be determined"},
    {46000, Code::kUnavailable, "The storage provider cannot be reached"},
    {46001, Code::kUnavailable, "The storage provider cannot reach the storage subsystem"},
};

struct HresultInfo {
  uint32_t hresult;
  Code code;
  const char* name;
};

constexpr HresultInfo kHresults[] = {
    {0x80041001, Code::kInternal, "WBEM_E_FAILED"},
    {0x80041002, Code::kNotFound, "WBEM_E_NOT_FOUND"},
    {0x80041003, Code::kPermissionDenied, "WBEM_E_ACCESS_DENIED"},
    {0x80041004, Code::kUnavailable, "WBEM_E_PROVIDER_FAILURE"},
    {0x80041005, Code::kInternal, "WBEM_E_TYPE_MISMATCH"},
    {0x80041006, Code::kResourceExhausted, "WBEM_E_OUT_OF_MEMORY"},
    {0x80041008, Code::kInternal, "WBEM_E_INVALID_PARAMETER"},
    {0x80041009, Code::kUnavailable, "WBEM_E_NOT_AVAILABLE"},
    {0x8004100A, Code::kInternal, "WBEM_E_CRITICAL_ERROR"},
    {0x8004100C, Code::kUnimplemented, "WBEM_E_NOT_SUPPORTED"},
    {0x8004100E, Code::kUnimplemented, "WBEM_E_INVALID_NAMESPACE"},
    {0x80041010, Code::kUnimplemented, "WBEM_E_INVALID_CLASS"},
    {0x80041011, Code::kUnavailable, "WBEM_E_PROVIDER_NOT_FOUND"},
    {0x80041013, Code::kUnavailable, "WBEM_E_PROVIDER_LOAD_FAILURE"},
    {0x80041015, Code::kUnavailable, "WBEM_E_TRANSPORT_FAILURE"},
    {0x80041017, Code::kInternal, "WBEM_E_INVALID_QUERY"},
    {0x80041024, Code::kUnimplemented, "WBEM_E_PROVIDER_NOT_CAPABLE"},
    {0x8004102E, Code::kUnimplemented, "WBEM_E_INVALID_METHOD"},
    {0x8004102F, Code::kInternal, "WBEM_E_INVALID_METHOD_PARAMETERS"},
    {0x80041031, Code::kInternal, "WBEM_E_INVALID_PROPERTY"},
    {0x80041033, Code::kUnavailable, "WBEM_E_SHUTTING_DOWN"},
    {0x8004103A, Code::kInternal, "WBEM_E_INVALID_OBJECT_PATH"},
    {0x80041055, Code::kUnimplemented, "WBEM_E_METHOD_NOT_IMPLEMENTED"},
    {0x80041069, Code::kDeadlineExceeded, "WBEM_E_TIMED_OUT"},
    {0x8004106C, Code::kResourceExhausted, "WBEM_E_QUOTA_VIOLATION"},
    {0x80041081, Code::kUnavailable, "WBEM_E_PROVIDER_SUSPENDED"},
    {0x80041088, Code::kDeadlineExceeded, "WBEM_E_PROVIDER_TIMED_OUT"},
    {0x8004108A, Code::kUnavailable, "WBEM_E_PROVIDER_DISABLED"},
    {0x00040004, Code::kDeadlineExceeded, "WBEM_S_TIMEDOUT"},
    {0x80070005, Code::kPermissionDenied, "E_ACCESSDENIED"},
    {0x8007000E, Code::kResourceExhausted, "E_OUTOFMEMORY"},
    {0x80040154, Code::kUnimplemented, "REGDB_E_CLASSNOTREG"},
    {0x80010108, Code::kUnavailable, "RPC_E_DISCONNECTED"},
    {0x800706BA, Code::kUnavailable, "RPC_S_SERVER_UNAVAILABLE"},
    {0x80080005, Code::kUnavailable, "CO_E_SERVER_EXEC_FAILURE"},
    {0x80070057, Code::kInternal, "E_INVALIDARG"},
    {0x80004001, Code::kUnimplemented, "E_NOTIMPL"},
    // Win32 errors the SMB client's provider (MSFT_SmbGlobalMapping) posts, as HRESULT_FROM_WIN32.
    {0x80070002, Code::kNotFound, "ERROR_FILE_NOT_FOUND"},
    {0x80070003, Code::kNotFound, "ERROR_PATH_NOT_FOUND"},
    {0x80070035, Code::kUnavailable, "ERROR_BAD_NETPATH"},
    {0x80070040, Code::kUnavailable, "ERROR_NETNAME_DELETED"},
    {0x80070043, Code::kNotFound, "ERROR_BAD_NET_NAME"},
    {0x80070055, Code::kAlreadyExists, "ERROR_ALREADY_ASSIGNED"},
    {0x80070056, Code::kPermissionDenied, "ERROR_INVALID_PASSWORD"},
    {0x80070079, Code::kDeadlineExceeded, "ERROR_SEM_TIMEOUT"},
    {0x800704B2, Code::kAlreadyExists, "ERROR_DEVICE_ALREADY_REMEMBERED"},
    {0x800704B3, Code::kUnavailable, "ERROR_NO_NET_OR_BAD_PATH"},
    {0x800704C3, Code::kFailedPrecondition, "ERROR_SESSION_CREDENTIAL_CONFLICT"},
    {0x800704C9, Code::kUnavailable, "ERROR_CONNECTION_REFUSED"},
    {0x800704CF, Code::kUnavailable, "ERROR_NETWORK_UNREACHABLE"},
    {0x800704D0, Code::kUnavailable, "ERROR_HOST_UNREACHABLE"},
    {0x8007051F, Code::kUnavailable, "ERROR_NO_LOGON_SERVERS"},
    {0x8007052E, Code::kPermissionDenied, "ERROR_LOGON_FAILURE"},
    {0x80070532, Code::kPermissionDenied, "ERROR_PASSWORD_EXPIRED"},
    {0x80070533, Code::kPermissionDenied, "ERROR_ACCOUNT_DISABLED"},
    {0x80070775, Code::kPermissionDenied, "ERROR_ACCOUNT_LOCKED_OUT"},
    {0x80070490, Code::kNotFound, "ERROR_NOT_FOUND"},
    {0x800708CA, Code::kNotFound, "ERROR_NOT_CONNECTED"},
    {0x80070961, Code::kFailedPrecondition, "ERROR_OPEN_FILES"},
    {0x80070964, Code::kFailedPrecondition, "ERROR_DEVICE_IN_USE"},
    // The iSCSI initiator's errors (iscsierr.h), which its provider (MSFT_iSCSI*) posts as they are.
    {0xEFFF0001, Code::kInternal, "ISDSC_NON_SPECIFIC_ERROR"},
    {0xEFFF0002, Code::kInternal, "ISDSC_LOGIN_FAILED"},
    {0xEFFF0003, Code::kUnavailable, "ISDSC_CONNECTION_FAILED"},
    {0xEFFF0009, Code::kPermissionDenied, "ISDSC_AUTHENTICATION_FAILURE"},
    {0xEFFF000A, Code::kPermissionDenied, "ISDSC_AUTHORIZATION_FAILURE"},
    {0xEFFF000B, Code::kNotFound, "ISDSC_NOT_FOUND"},
    {0xEFFF000C, Code::kNotFound, "ISDSC_TARGET_REMOVED"},
    {0xEFFF0013, Code::kUnavailable, "ISDSC_SERVICE_UNAVAILABLE"},
    {0xEFFF0016, Code::kAlreadyExists, "ISDSC_SESSION_ALREADY_EXISTS"},
    {0xEFFF001C, Code::kNotFound, "ISDSC_INVALID_SESSION_ID"},
    {0xEFFF001F, Code::kUnavailable, "ISDSC_SESSION_BUSY"},
    {0xEFFF0022, Code::kPermissionDenied, "ISDSC_LOGON_FAILED"},
    {0xEFFF0023, Code::kUnavailable, "ISDSC_SEND_FAILED"},
    {0xEFFF0024, Code::kUnavailable, "ISDSC_TRANSPORT_ERROR"},
    {0xEFFF0029, Code::kNotFound, "ISDSC_TARGET_NOT_FOUND"},
    {0xEFFF0032, Code::kAlreadyExists, "ISDSC_TARGET_PORTAL_ALREADY_EXISTS"},
    {0xEFFF003E, Code::kFailedPrecondition, "ISDSC_SERVICE_NOT_RUNNING"},
    {0xEFFF003F, Code::kAlreadyExists, "ISDSC_TARGET_ALREADY_LOGGED_IN"},
    {0xEFFF0040, Code::kFailedPrecondition, "ISDSC_DEVICE_BUSY_ON_SESSION"},
    {0xEFFF0043, Code::kNotFound, "ISDSC_PORTAL_NOT_FOUND"},
    {0xEFFF004A, Code::kInvalidArgument, "ISDSC_INVALID_CHAP_SECRET"},
    {0xEFFF004B, Code::kInvalidArgument, "ISDSC_INVALID_TARGET_CHAP_SECRET"},
    {0xEFFF004C, Code::kInvalidArgument, "ISDSC_INVALID_INITIATOR_CHAP_SECRET"},
    {0xEFFF004D, Code::kInvalidArgument, "ISDSC_INVALID_CHAP_USER_NAME"},
    {0xEFFF0051, Code::kInvalidArgument, "ISDSC_INVALID_ISCSI_NAME"},
    {0xEFFF005F, Code::kUnavailable, "ISDSC_DNS_NAME_UNRESOLVED"},
};

// The message an ExtendedStatus out-parameter carries: an embedded MSFT_StorageExtendedStatus (its Message),
// or text.
std::string ExtendedStatusMessage(const Object& out) {
  const Value* extended = out.Find("ExtendedStatus");
  if (extended == nullptr) return {};
  if (const auto* text = std::get_if<std::string>(extended)) return *text;
  if (const auto* object = std::get_if<std::shared_ptr<const Object>>(extended); object != nullptr && *object) {
    auto message = (*object)->GetString("Message");
    if (message.ok()) return *message;
  }
  return {};
}

}  // namespace

bool NameLess::operator()(std::string_view a, std::string_view b) const {
  return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
    auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
    return lower(x) < lower(y);
  });
}

const Value* Object::Find(std::string_view name) const {
  auto it = properties_.find(name);
  return it == properties_.end() ? nullptr : &it->second;
}

bool Object::Has(std::string_view name) const {
  const Value* v = Find(name);
  return v != nullptr && !std::holds_alternative<std::monostate>(*v);
}

Status Object::Missing(std::string_view name, const char* wanted) const {
  const Value* v = Find(name);
  const char* what = v == nullptr ? "missing" : std::holds_alternative<std::monostate>(*v) ? "null" : "of another type";
  return Internal("WMI " + class_name_ + "." + std::string(name) + " is " + what + " (expected " + wanted + ")");
}

StatusOr<std::string> Object::GetString(std::string_view name) const {
  const Value* v = Find(name);
  if (const auto* s = v ? std::get_if<std::string>(v) : nullptr) return *s;
  return Missing(name, "a string");
}

StatusOr<uint64_t> Object::GetUint(std::string_view name) const {
  const Value* v = Find(name);
  if (const auto* n = v ? std::get_if<int64_t>(v) : nullptr; n != nullptr && *n >= 0) {
    return static_cast<uint64_t>(*n);
  }
  uint64_t parsed = 0;
  if (const auto* s = v ? std::get_if<std::string>(v) : nullptr; s != nullptr && ParseDecimal(*s, parsed)) {
    return parsed;
  }
  return Missing(name, "an unsigned integer");
}

StatusOr<bool> Object::GetBool(std::string_view name) const {
  const Value* v = Find(name);
  if (const auto* b = v ? std::get_if<bool>(v) : nullptr) return *b;
  return Missing(name, "a boolean");
}

StatusOr<std::vector<std::string>> Object::GetStrings(std::string_view name) const {
  const Value* v = Find(name);
  if (const auto* list = v ? std::get_if<std::vector<std::string>>(v) : nullptr) return *list;
  // An empty CIM array arrives as null.
  if (v != nullptr && std::holds_alternative<std::monostate>(*v)) return std::vector<std::string>{};
  return Missing(name, "a string array");
}

StatusOr<std::string> ToWql(const Query& query) {
  if (!IsIdentifier(query.class_name)) return Internal("not a WMI class name: " + QuoteValue(query.class_name));
  std::string wql = "SELECT ";
  if (query.properties.empty()) wql += "*";
  for (size_t i = 0; i < query.properties.size(); ++i) {
    if (!IsIdentifier(query.properties[i])) {
      return Internal("not a WMI property name: " + QuoteValue(query.properties[i]));
    }
    wql += (i == 0 ? "" : ", ") + query.properties[i];
  }
  wql += " FROM " + query.class_name;
  for (size_t i = 0; i < query.where.size(); ++i) {
    const Condition& c = query.where[i];
    static constexpr std::string_view kOperators[] = {"=", "<>", "<", ">", "<=", ">="};
    if (!IsIdentifier(c.property)) return Internal("not a WMI property name: " + QuoteValue(c.property));
    if (std::find(std::begin(kOperators), std::end(kOperators), c.op) == std::end(kOperators)) {
      return Internal("not a WQL comparison: " + QuoteValue(c.op));
    }
    CSI_PROXY_ASSIGN_OR_RETURN(std::string literal, Literal(c.value));
    wql += (i == 0 ? " WHERE " : " AND ") + c.property + " " + c.op + " " + literal;
  }
  return wql;
}

StatusOr<std::string> ToWql(const Object& source, const Associators& associators) {
  for (const std::string* name : {&associators.association, &associators.result_class}) {
    if (!IsIdentifier(*name)) return Internal("not a WMI class name: " + QuoteValue(*name));
  }
  for (const std::string* name : {&associators.role, &associators.result_role}) {
    if (!name->empty() && !IsIdentifier(*name)) return Internal("not a WMI property name: " + QuoteValue(*name));
  }
  const std::string& path = source.path();
  if (path.empty()) return Internal("the WMI " + source.class_name() + " object has no path to query associators of");
  // Key values are quoted with backslash escapes; outside them a '}' would end the object path early.
  bool quoted = false;
  for (size_t i = 0; i < path.size(); ++i) {
    const char c = path[i];
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      return Internal("the WMI object path " + QuoteValue(path) + " holds a control character");
    }
    if (quoted && c == '\\') {
      ++i;
    } else if (c == '"') {
      quoted = !quoted;
    } else if (!quoted && (c == '}' || c == '{')) {
      return Internal("the WMI object path " + QuoteValue(path) + " holds a brace outside its key values");
    }
  }
  if (quoted) return Internal("the WMI object path " + QuoteValue(path) + " ends inside a key value");
  std::string wql = "ASSOCIATORS OF {" + path + "} WHERE AssocClass = " + associators.association +
                    " ResultClass = " + associators.result_class;
  if (!associators.role.empty()) wql += " Role = " + associators.role;
  if (!associators.result_role.empty()) wql += " ResultRole = " + associators.result_role;
  return wql;
}

std::string_view ReturnValueMeaning(uint32_t value) {
  if (value == 0) return "Success";
  for (const auto& info : kReturnValues) {
    if (info.value == value) return info.meaning;
  }
  return {};
}

Status MethodStatus(const MethodResult& result, std::string_view class_name, std::string_view method,
                    const std::string& what) {
  if (result.return_value == 0) return Status::Ok();
  Code code = Code::kInternal;
  for (const auto& info : kReturnValues) {
    if (info.value == result.return_value) code = info.code;
  }
  std::string_view meaning = ReturnValueMeaning(result.return_value);
  // Some providers (the iSCSI initiator's) answer with an error code of theirs as the ReturnValue.
  for (const auto& info : kHresults) {
    if (meaning.empty() && info.hresult == result.return_value) {
      code = info.code;
      meaning = info.name;
    }
  }
  std::string message = what + ": " + std::string(class_name) + "." + std::string(method) + " returned " +
                        std::to_string(result.return_value);
  if (!meaning.empty()) message += " (" + std::string(meaning) + ")";
  if (std::string extended = ExtendedStatusMessage(result.out); !extended.empty()) message += ": " + extended;
  return Status(code, std::move(message));
}

std::string_view HresultName(uint32_t hresult) {
  for (const auto& info : kHresults) {
    if (info.hresult == hresult) return info.name;
  }
  return {};
}

Status HresultStatus(uint32_t hresult, const std::string& what) {
  Code code = Code::kInternal;
  for (const auto& info : kHresults) {
    if (info.hresult == hresult) code = info.code;
  }
  std::string message = what + ": HRESULT " + Hex32(hresult);
  if (std::string_view name = HresultName(hresult); !name.empty()) message += " (" + std::string(name) + ")";
  return Status(code, std::move(message));
}

}  // namespace csi_proxy::common::wmi
