// The WMI client over COM; see wmi_windows.h.
#define _WIN32_DCOM
#include "wmi_windows.h"

#include <windows.h>

#include <objbase.h>
#include <oleauto.h>
#include <wbemcli.h>

#include <mutex>
#include <set>
#include <string>
#include <utility>

#include "text.h"
#include "win32_windows.h"

namespace csi_proxy::common {
namespace {

using wmi::Value;

// A query waits this long for each object; a provider that takes longer is treated as hung.
constexpr long kNextTimeoutMs = 120 * 1000;
// Embedded objects nest this deep at most (MSFT_StorageExtendedStatus holds none).
constexpr int kMaxNesting = 4;

// Owns one COM interface pointer.
template <typename T>
class ComPtr {
 public:
  ComPtr() = default;
  ComPtr(const ComPtr&) = delete;
  ComPtr& operator=(const ComPtr&) = delete;
  ~ComPtr() { Reset(); }
  T* get() const { return p_; }
  T* operator->() const { return p_; }
  T** Out() {
    Reset();
    return &p_;
  }
  void Reset() {
    if (p_ != nullptr) p_->Release();
    p_ = nullptr;
  }

 private:
  T* p_ = nullptr;
};

class Bstr {
 public:
  explicit Bstr(std::wstring_view text) : b_(::SysAllocStringLen(text.data(), static_cast<UINT>(text.size()))) {}
  Bstr(const Bstr&) = delete;
  Bstr& operator=(const Bstr&) = delete;
  ~Bstr() { ::SysFreeString(b_); }
  BSTR get() const { return b_; }

 private:
  BSTR b_;
};

class Variant {
 public:
  Variant() { ::VariantInit(&v_); }
  Variant(const Variant&) = delete;
  Variant& operator=(const Variant&) = delete;
  ~Variant() { ::VariantClear(&v_); }
  VARIANT* get() { return &v_; }
  const VARIANT& operator*() const { return v_; }

 private:
  VARIANT v_;
};

std::wstring Wide(std::string_view ascii_or_utf8) {
  auto wide = Utf8ToWide(ascii_or_utf8);
  return wide.ok() ? *wide : std::wstring();
}

// A CIM string holds no NUL; Wine's __RELPATH comes in a BSTR longer than its text, padded with NULs, which would
// otherwise end up in object paths.
std::string Narrow(BSTR b) {
  if (b == nullptr) return std::string();
  std::wstring_view text(b, ::SysStringLen(b));
  return WideToUtf8(text.substr(0, text.find(L'\0')));
}

// COM for the calling thread while a session lives.
class ComApartment {
 public:
  ComApartment() {
    HRESULT hr = ::CoInitializeEx(nullptr, COINIT_MULTITHREADED);
    // RPC_E_CHANGED_MODE: the thread is in a single-threaded apartment already; COM works there too, and that
    // initialization is not ours to undo.
    owned_ = SUCCEEDED(hr);
    status_ = owned_ || hr == RPC_E_CHANGED_MODE ? Status::Ok()
                                                 : wmi::HresultStatus(static_cast<uint32_t>(hr), "initializing COM");
  }
  ComApartment(const ComApartment&) = delete;
  ComApartment& operator=(const ComApartment&) = delete;
  ~ComApartment() {
    if (owned_) ::CoUninitialize();
  }
  const Status& status() const { return status_; }

 private:
  bool owned_ = false;
  Status status_;
};

// WBEM's codes are an unsigned enum; HRESULTs are signed.
bool Is(HRESULT hr, WBEMSTATUS code) { return static_cast<uint32_t>(hr) == static_cast<uint32_t>(code); }

Status Failed(HRESULT hr, const std::string& what) { return wmi::HresultStatus(static_cast<uint32_t>(hr), what); }

// Call-level authentication and impersonation on a proxy (WMI refuses the default identify level for many
// providers); what CoInitializeSecurity would set for the process.
HRESULT SetBlanket(IUnknown* proxy) {
  return ::CoSetProxyBlanket(proxy, RPC_C_AUTHN_WINNT, RPC_C_AUTHZ_NONE, nullptr, RPC_C_AUTHN_LEVEL_CALL,
                             RPC_C_IMP_LEVEL_IMPERSONATE, nullptr, EOAC_NONE);
}

StatusOr<wmi::Object> ToObject(IWbemClassObject* object, int depth);

int64_t IntegerOf(const VARIANT& v, CIMTYPE type) {
  const bool is_unsigned = type == CIM_UINT8 || type == CIM_UINT16 || type == CIM_UINT32;
  switch (v.vt) {
    case VT_I1:
      return is_unsigned ? static_cast<uint8_t>(v.cVal) : v.cVal;
    case VT_UI1:
      return v.bVal;
    case VT_I2:
      return is_unsigned ? static_cast<uint16_t>(v.iVal) : v.iVal;
    case VT_UI2:
      return v.uiVal;
    case VT_I4:
    case VT_INT:
      return is_unsigned ? static_cast<uint32_t>(v.lVal) : v.lVal;
    case VT_UI4:
    case VT_UINT:
      return v.ulVal;
    default:
      return 0;
  }
}

bool IsInteger(VARTYPE vt) {
  return vt == VT_I1 || vt == VT_UI1 || vt == VT_I2 || vt == VT_UI2 || vt == VT_I4 || vt == VT_UI4 || vt == VT_INT ||
         vt == VT_UINT;
}

// A SAFEARRAY of strings or integers as strings (integers in decimal: the groups read no integer arrays).
StatusOr<Value> ArrayValue(const VARIANT& v, CIMTYPE type) {
  SAFEARRAY* array = v.parray;
  VARTYPE element = static_cast<VARTYPE>(v.vt & ~VT_ARRAY);
  if (array == nullptr || ::SafeArrayGetDim(array) != 1) return Value(std::vector<std::string>{});
  LONG low = 0, high = -1;
  ::SafeArrayGetLBound(array, 1, &low);
  ::SafeArrayGetUBound(array, 1, &high);
  std::vector<std::string> items;
  for (LONG i = low; i <= high; ++i) {
    if (element == VT_BSTR) {
      BSTR item = nullptr;
      if (FAILED(::SafeArrayGetElement(array, &i, &item))) return Internal("reading a WMI string array");
      items.push_back(Narrow(item));
      ::SysFreeString(item);
    } else if (IsInteger(element)) {
      VARIANT item;
      ::VariantInit(&item);
      item.llVal = 0;  // the element fills its low bytes
      item.vt = element;
      if (FAILED(::SafeArrayGetElement(array, &i, &item.lVal))) return Internal("reading a WMI integer array");
      items.push_back(std::to_string(IntegerOf(item, static_cast<CIMTYPE>(type & ~CIM_FLAG_ARRAY))));
    } else {
      return Value();  // arrays of other kinds: nothing the groups read
    }
  }
  return Value(std::move(items));
}

StatusOr<Value> ToValue(const VARIANT& v, CIMTYPE type, int depth) {
  if (v.vt & VT_ARRAY) return ArrayValue(v, type);
  switch (v.vt) {
    case VT_EMPTY:
    case VT_NULL:
      return Value();
    case VT_BOOL:
      return Value(v.boolVal != VARIANT_FALSE);
    case VT_BSTR:
      return Value(Narrow(v.bstrVal));
    case VT_I8:
      return Value(std::to_string(v.llVal));
    case VT_UI8:
      return Value(std::to_string(v.ullVal));
    case VT_UNKNOWN:
    case VT_DISPATCH: {
      if (depth >= kMaxNesting || v.punkVal == nullptr) return Value();
      ComPtr<IWbemClassObject> embedded;
      if (FAILED(v.punkVal->QueryInterface(IID_IWbemClassObject, reinterpret_cast<void**>(embedded.Out())))) {
        return Value();
      }
      CSI_PROXY_ASSIGN_OR_RETURN(auto object, ToObject(embedded.get(), depth + 1));
      return Value(std::make_shared<const wmi::Object>(std::move(object)));
    }
    default:
      if (IsInteger(v.vt)) return Value(IntegerOf(v, type));
      return Value();  // reals and dates: nothing the groups read
  }
}

std::string StringProperty(IWbemClassObject* object, const wchar_t* name) {
  Variant v;
  if (FAILED(object->Get(name, 0, v.get(), nullptr, nullptr)) || (*v).vt != VT_BSTR) return {};
  return Narrow((*v).bstrVal);
}

StatusOr<wmi::Object> ToObject(IWbemClassObject* object, int depth) {
  wmi::Properties properties;
  HRESULT hr = object->BeginEnumeration(WBEM_FLAG_NONSYSTEM_ONLY);
  if (FAILED(hr)) return Failed(hr, "reading a WMI object");
  for (;;) {
    BSTR name = nullptr;
    Variant value;
    CIMTYPE type = 0;
    hr = object->Next(0, &name, value.get(), &type, nullptr);
    if (hr != WBEM_S_NO_ERROR) {
      ::SysFreeString(name);
      break;
    }
    std::string key = Narrow(name);
    ::SysFreeString(name);
    CSI_PROXY_ASSIGN_OR_RETURN(Value converted, ToValue(*value, type, depth));
    properties.emplace(std::move(key), std::move(converted));
  }
  object->EndEnumeration();
  if (FAILED(hr)) return Failed(hr, "reading a WMI object");
  return wmi::Object(StringProperty(object, L"__CLASS"), StringProperty(object, L"__RELPATH"), std::move(properties));
}

// A Value as the VARIANT IWbemClassObject::Put takes for a parameter: integers as VT_I4 (WMI's form for every CIM
// integer up to 32 bits, unsigned ones by their bits), 64-bit values as decimal strings.
StatusOr<bool> FillVariant(const Value& value, VARIANT& v) {
  if (std::holds_alternative<std::monostate>(value)) {
    v.vt = VT_NULL;
  } else if (const auto* b = std::get_if<bool>(&value)) {
    v.vt = VT_BOOL;
    v.boolVal = *b ? VARIANT_TRUE : VARIANT_FALSE;
  } else if (const auto* n = std::get_if<int64_t>(&value)) {
    if (*n < INT32_MIN || *n > UINT32_MAX) return Internal("a WMI integer parameter beyond 32 bits (pass Decimal())");
    v.vt = VT_I4;
    v.lVal = static_cast<LONG>(static_cast<uint32_t>(*n));
  } else if (const auto* s = std::get_if<std::string>(&value)) {
    CSI_PROXY_ASSIGN_OR_RETURN(std::wstring wide, Utf8ToWide(*s));
    v.vt = VT_BSTR;
    v.bstrVal = ::SysAllocStringLen(wide.data(), static_cast<UINT>(wide.size()));
  } else if (const auto* list = std::get_if<std::vector<std::string>>(&value)) {
    SAFEARRAY* array = ::SafeArrayCreateVector(VT_BSTR, 0, static_cast<ULONG>(list->size()));
    if (array == nullptr) return Internal("out of memory for a WMI string array");
    for (LONG i = 0; i < static_cast<LONG>(list->size()); ++i) {
      Bstr item(Wide((*list)[static_cast<size_t>(i)]));
      ::SafeArrayPutElement(array, &i, item.get());  // copies the string
    }
    v.vt = VT_ARRAY | VT_BSTR;
    v.parray = array;
  } else {
    return Internal("an embedded object as a WMI method parameter");
  }
  return true;
}

// Classes known to exist, per namespace: asked once per process (classes do not go away).
std::mutex known_classes_mutex;
std::set<std::string> known_classes;

class ComSession final : public wmi::Session {
 public:
  ComSession(std::unique_ptr<ComApartment> apartment, std::string namespace_name)
      : apartment_(std::move(apartment)), namespace_(std::move(namespace_name)) {}

  Status Connect() {
    ComPtr<IWbemLocator> locator;
    HRESULT hr = ::CoCreateInstance(CLSID_WbemLocator, nullptr, CLSCTX_INPROC_SERVER, IID_IWbemLocator,
                                    reinterpret_cast<void**>(locator.Out()));
    if (FAILED(hr)) return Failed(hr, "this machine offers no WMI (creating the WbemLocator)");
    Bstr path(Wide(namespace_));
    hr = locator->ConnectServer(path.get(), nullptr, nullptr, nullptr, WBEM_FLAG_CONNECT_USE_MAX_WAIT, nullptr, nullptr,
                                services_.Out());
    if (Is(hr, WBEM_E_INVALID_NAMESPACE)) {
      return Unimplemented("this system has no WMI namespace " + namespace_ + " (HRESULT 0x8004100E)");
    }
    if (FAILED(hr)) return Failed(hr, "connecting to the WMI namespace " + namespace_);
    hr = SetBlanket(services_.get());
    if (FAILED(hr)) return Failed(hr, "setting the security of the WMI connection to " + namespace_);
    return Status::Ok();
  }

  const std::string& namespace_name() const override { return namespace_; }

  StatusOr<std::vector<wmi::Object>> Execute(const wmi::Query& query) override {
    CSI_PROXY_ASSIGN_OR_RETURN(std::string wql, wmi::ToWql(query));
    CSI_PROXY_RETURN_IF_ERROR(RequireClass(query.class_name));
    return Run(wql);
  }

  StatusOr<std::vector<wmi::Object>> Associated(const wmi::Object& source,
                                                const wmi::Associators& associators) override {
    CSI_PROXY_ASSIGN_OR_RETURN(std::string wql, wmi::ToWql(source, associators));
    CSI_PROXY_RETURN_IF_ERROR(RequireClass(associators.association));
    CSI_PROXY_RETURN_IF_ERROR(RequireClass(associators.result_class));
    return Run(wql);
  }

  StatusOr<wmi::MethodResult> Call(const wmi::Object& target, std::string_view method,
                                   const wmi::Arguments& in) override {
    if (target.path().empty()) {
      return Internal("the WMI " + target.class_name() +
                      " object has no path (query it with all its properties to call its methods)");
    }
    return Invoke(target.class_name(), target.path(), method, in);
  }

  StatusOr<wmi::MethodResult> CallStatic(std::string_view class_name, std::string_view method,
                                         const wmi::Arguments& in) override {
    return Invoke(std::string(class_name), std::string(class_name), method, in);
  }

 private:
  // UNIMPLEMENTED when the namespace has no such class (where WMI itself would answer a query of it with nothing).
  Status RequireClass(const std::string& class_name) {
    if (IsKnownClass(class_name)) return Status::Ok();
    ComPtr<IWbemClassObject> definition;
    return ClassDefinition(class_name, definition);
  }

  // The objects a WQL query (a SELECT or an ASSOCIATORS OF) answers.
  StatusOr<std::vector<wmi::Object>> Run(const std::string& wql) {
    ComPtr<IEnumWbemClassObject> results;
    Bstr language(L"WQL");
    Bstr text(Wide(wql));
    HRESULT hr = services_->ExecQuery(language.get(), text.get(), WBEM_FLAG_FORWARD_ONLY | WBEM_FLAG_RETURN_IMMEDIATELY,
                                      nullptr, results.Out());
    if (FAILED(hr)) return Failed(hr, "WMI query " + wql);
    // The enumerator is a proxy of its own: without the blanket, a query that went through could still fail here.
    SetBlanket(results.get());
    std::vector<wmi::Object> objects;
    for (;;) {
      ComPtr<IWbemClassObject> item;
      ULONG returned = 0;
      hr = results->Next(kNextTimeoutMs, 1, item.Out(), &returned);
      if (hr == WBEM_S_FALSE || (hr == WBEM_S_NO_ERROR && returned == 0)) break;
      if (hr == WBEM_S_TIMEDOUT) return Failed(hr, "WMI query " + wql + " (no answer within 120 s)");
      if (FAILED(hr)) return Failed(hr, "WMI query " + wql);
      CSI_PROXY_ASSIGN_OR_RETURN(auto object, ToObject(item.get(), 0));
      objects.push_back(std::move(object));
    }
    return objects;
  }

  std::string ClassKey(const std::string& class_name) const { return AsciiLower(namespace_ + ":" + class_name); }
  bool IsKnownClass(const std::string& class_name) const {
    std::lock_guard<std::mutex> lock(known_classes_mutex);
    return known_classes.count(ClassKey(class_name)) != 0;
  }

  // The class's definition; UNIMPLEMENTED when the namespace has none.
  Status ClassDefinition(const std::string& class_name, ComPtr<IWbemClassObject>& definition) {
    Bstr name(Wide(class_name));
    HRESULT hr = services_->GetObject(name.get(), 0, nullptr, definition.Out(), nullptr);
    if (Is(hr, WBEM_E_NOT_FOUND) || Is(hr, WBEM_E_INVALID_CLASS)) {
      return Unimplemented("this system has no WMI class " + class_name + " in " + namespace_);
    }
    if (FAILED(hr)) return Failed(hr, "reading the WMI class " + class_name);
    std::lock_guard<std::mutex> lock(known_classes_mutex);
    known_classes.insert(ClassKey(class_name));
    return Status::Ok();
  }

  StatusOr<wmi::MethodResult> Invoke(const std::string& class_name, const std::string& path, std::string_view method,
                                     const wmi::Arguments& in) {
    const std::string what = "WMI " + class_name + "." + std::string(method);
    ComPtr<IWbemClassObject> definition;
    CSI_PROXY_RETURN_IF_ERROR(ClassDefinition(class_name, definition));
    std::wstring method_name = Wide(method);
    ComPtr<IWbemClassObject> in_definition;
    HRESULT hr = definition->GetMethod(method_name.c_str(), 0, in_definition.Out(), nullptr);
    if (Is(hr, WBEM_E_NOT_FOUND)) {
      return Unimplemented("this system's WMI class " + class_name + " has no method " + std::string(method));
    }
    if (FAILED(hr)) return Failed(hr, what);
    ComPtr<IWbemClassObject> parameters;
    if (!in.empty()) {
      if (in_definition.get() == nullptr) return Internal(what + " takes no in-parameters");
      hr = in_definition->SpawnInstance(0, parameters.Out());
      if (FAILED(hr)) return Failed(hr, what);
      for (const auto& [name, value] : in) {
        Variant v;
        CSI_PROXY_RETURN_IF_ERROR(FillVariant(value, *v.get()).status());
        std::wstring wide_name = Wide(name);
        hr = parameters->Put(wide_name.c_str(), 0, v.get(), 0);
        if (FAILED(hr)) return Failed(hr, what + " (parameter " + name + ")");
      }
    }
    Bstr object_path(Wide(path));
    Bstr method_bstr(method_name);
    ComPtr<IWbemClassObject> out;
    hr = services_->ExecMethod(object_path.get(), method_bstr.get(), 0, nullptr, parameters.get(), out.Out(), nullptr);
    if (FAILED(hr)) return Failed(hr, what);
    wmi::MethodResult result;
    if (out.get() != nullptr) {
      CSI_PROXY_ASSIGN_OR_RETURN(result.out, ToObject(out.get(), 0));
      auto value = result.out.GetUint("ReturnValue");
      if (value.ok()) result.return_value = static_cast<uint32_t>(*value);
    }
    return result;
  }

  std::unique_ptr<ComApartment> apartment_;  // first in, last out: COM outlives every interface below
  std::string namespace_;
  ComPtr<IWbemServices> services_;
};

}  // namespace

StatusOr<std::unique_ptr<wmi::Session>> ConnectWmi(std::string_view namespace_name) {
  auto apartment = std::make_unique<ComApartment>();
  CSI_PROXY_RETURN_IF_ERROR(apartment->status());
  auto session = std::make_unique<ComSession>(std::move(apartment), std::string(namespace_name));
  CSI_PROXY_RETURN_IF_ERROR(session->Connect());
  return std::unique_ptr<wmi::Session>(std::move(session));
}

}  // namespace csi_proxy::common
