// The project's own small WMI client: what the groups ask of WMI on Windows (instances of a class, their
// properties, methods called with in-parameters), as plain values behind one interface, so that each group's
// Windows logic runs against recorded answers in tests. This part is portable (values, WQL, the meaning of
// HRESULTs and of the Storage Management API's return values) and unit-tested on Linux; wmi_windows.h connects
// the real client over COM.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "csi_proxy/status.hpp"

namespace csi_proxy::common::wmi {

// Namespaces the groups use.
inline constexpr const char* kCimV2Namespace = "ROOT\\CIMV2";
inline constexpr const char* kStorageNamespace = "ROOT\\Microsoft\\Windows\\Storage";
inline constexpr const char* kSmbNamespace = "ROOT\\Microsoft\\Windows\\SMB";

class Object;

// A property or parameter value as WMI carries it: null, a boolean, an integer (every CIM integer type but the
// 64-bit ones), a string, a string array, or an embedded object. CIM uint64 and sint64 travel as decimal strings
// (WMI's rule for VARIANTs), so a 64-bit value is put as one (Decimal()) and read with Object::GetUint.
using Value =
    std::variant<std::monostate, bool, int64_t, std::string, std::vector<std::string>, std::shared_ptr<const Object>>;

// A 64-bit CIM value as WMI takes it.
inline Value Decimal(uint64_t n) { return Value(std::to_string(n)); }

// WMI's names compare without regard to ASCII case (Wine's Win32_DiskDrive calls DeviceID "DeviceId").
struct NameLess {
  using is_transparent = void;
  bool operator()(std::string_view a, std::string_view b) const;
};

using Properties = std::map<std::string, Value, NameLess>;

// One instance (or a method's out-parameters): its class, the path methods name it by, and its properties.
class Object {
 public:
  Object() = default;
  Object(std::string class_name, std::string path, Properties properties)
      : class_name_(std::move(class_name)), path_(std::move(path)), properties_(std::move(properties)) {}

  const std::string& class_name() const { return class_name_; }
  // __RELPATH: empty for a partial instance whose key properties were not selected (its methods cannot be called).
  const std::string& path() const { return path_; }
  const Properties& properties() const { return properties_; }

  // The value of a property; nullptr when the object has no such property.
  const Value* Find(std::string_view name) const;
  // False for a missing or null property.
  bool Has(std::string_view name) const;

  // Typed reads. INTERNAL naming the class and property when it is missing, null or of another type: the
  // groups read only properties that Microsoft documents for the class.
  StatusOr<std::string> GetString(std::string_view name) const;
  // An integer, or a decimal string (CIM's 64-bit types); negative values are refused.
  StatusOr<uint64_t> GetUint(std::string_view name) const;
  StatusOr<bool> GetBool(std::string_view name) const;
  StatusOr<std::vector<std::string>> GetStrings(std::string_view name) const;

  // Puts a property's value (on this copy; nothing goes to WMI: method in-parameters are Arguments).
  void Set(std::string_view name, Value value) { properties_.insert_or_assign(std::string(name), std::move(value)); }

 private:
  Status Missing(std::string_view name, const char* wanted) const;

  std::string class_name_;
  std::string path_;
  Properties properties_;
};

// One condition of a WHERE clause: `property op value`, with op one of = <> < > <= >=.
struct Condition {
  std::string property;
  std::string op;
  Value value;
};

// SELECT <properties> FROM <class_name> WHERE <conditions joined by AND>.
struct Query {
  std::string class_name;
  // Empty selects every property, which also gives each object its path: select all of an object whose
  // methods are called (a partial instance without its key properties has none).
  std::vector<std::string> properties;
  std::vector<Condition> where;
};

// The WQL text of a query. Class and property names must be identifiers; string values are quoted with WQL's
// escapes (a backslash before '\' and '\''), so request data can never change the query's shape. INTERNAL for a
// name that is not an identifier or an operator that is not one of the six, INVALID_ARGUMENT for a string with a
// NUL or a control character.
StatusOr<std::string> ToWql(const Query& query);

// ASSOCIATORS OF {<source's path>} WHERE AssocClass = <association> ResultClass = <result_class> [Role = <role>]
// [ResultRole = <result_role>]: the instances an association class links to `source` (upstream's
// SWbemObject.Associators_). Empty role and result_role are left out.
struct Associators {
  std::string association;
  std::string result_class;
  std::string role;         // the property of the association that refers to the source
  std::string result_role;  // the property of the association that refers to the results
};

// The WQL text of an associators query. INTERNAL for names that are not identifiers, a source without a path, and a
// path that could end the braces around it (a '}' outside its quoted key values) or holds control characters: paths
// come from WMI, never from a request, so such a path is this code's mistake.
StatusOr<std::string> ToWql(const Object& source, const Associators& associators);

// A method's in-parameters, put in this order.
using Arguments = std::vector<std::pair<std::string, Value>>;

// What a method answered: its ReturnValue and its out-parameters (ExtendedStatus, FormattedVolume, ...).
struct MethodResult {
  uint32_t return_value = 0;
  Object out;
};

// A connection to one WMI namespace. A session belongs to the thread that made it (COM is initialized for that
// thread while the session lives).
class Session {
 public:
  virtual ~Session() = default;

  virtual const std::string& namespace_name() const = 0;
  // The instances of `query.class_name` that match. UNIMPLEMENTED naming the class and namespace when the
  // namespace has no such class (rather than the empty answer some WMI implementations give, Wine's among them).
  virtual StatusOr<std::vector<Object>> Execute(const Query& query) = 0;
  // The instances `associators.association` links to `source` (queried whole, with their paths). UNIMPLEMENTED
  // naming the class when the namespace lacks the association or the result class.
  virtual StatusOr<std::vector<Object>> Associated(const Object& source, const Associators& associators) = 0;
  // Calls a method of an instance (target.path() names it) with in-parameters. A ReturnValue other than 0 is
  // not a failure here: MethodStatus says what it means for the class and method.
  virtual StatusOr<MethodResult> Call(const Object& target, std::string_view method, const Arguments& in) = 0;
  // Calls a static method of a class.
  virtual StatusOr<MethodResult> CallStatic(std::string_view class_name, std::string_view method,
                                            const Arguments& in) = 0;
};

// Opens a session to a namespace; the real one is ConnectWmi (wmi_windows.h), tests give recorded ones.
using Connector = std::function<StatusOr<std::unique_ptr<Session>>(std::string_view namespace_name)>;

// The status a method's answer stands for: OK for ReturnValue 0; otherwise the code the value's documented
// meaning calls for (the standard CIM values and the Storage Management API's common return codes: "in use" and
// "the disk is offline" FAILED_PRECONDITION, "access denied" PERMISSION_DENIED, "object not found" NOT_FOUND, a
// provider that cannot be reached UNAVAILABLE, ...), its message naming `what`, the class, the method, the
// value and its meaning, and the ExtendedStatus message when the provider gave one. A value that is an error code
// HresultStatus knows (the iSCSI initiator answers with its ISDSC_* codes) means what it means there.
Status MethodStatus(const MethodResult& result, std::string_view class_name, std::string_view method,
                    const std::string& what);

// The documented meaning of a Storage Management API return value ("The disk is offline"); "" when unknown.
std::string_view ReturnValueMeaning(uint32_t value);

// The status of a failed COM or WMI call: WBEM_E_NOT_FOUND NOT_FOUND; access denied PERMISSION_DENIED; a missing
// namespace, class or method, or no WMI at all, UNIMPLEMENTED (the system lacks what was asked for); a provider
// or service that cannot be reached UNAVAILABLE; timeouts DEADLINE_EXCEEDED; out of memory RESOURCE_EXHAUSTED;
// the Win32 errors the SMB client posts and the iSCSI initiator's ISDSC_* codes by their documented meaning (a
// wrong password or CHAP secret PERMISSION_DENIED, a missing share or target NOT_FOUND, an unreachable server
// UNAVAILABLE, files open or a disk in use FAILED_PRECONDITION);
// anything else (a malformed query or parameter: this code's mistake) INTERNAL. The message names `what`, the
// HRESULT in hex and its WBEM_E_* name where it has one.
Status HresultStatus(uint32_t hresult, const std::string& what);

// The symbolic name of an HRESULT this client knows ("WBEM_E_INVALID_CLASS"); "" for others.
std::string_view HresultName(uint32_t hresult);

}  // namespace csi_proxy::common::wmi
