// Recorded answers of WMI for tests of the groups' Windows logic (plugins/common/wmi.h): the instances of each
// class as Microsoft documents them (or as a machine answered), what each method answers, and a log of every
// query and call, behind the same wmi::Session interface as the real client. It answers as the real client does
// where that matters to callers: a namespace or class it has no record of is UNIMPLEMENTED, a query that names
// properties returns partial instances with only those properties and no path (so code that calls a method of
// an object it did not select whole fails here as it would on Windows), and a method the class lacks is
// UNIMPLEMENTED.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "text.h"
#include "wmi.h"

namespace csi_proxy::testing {

namespace wmi = ::csi_proxy::common::wmi;

class RecordedWmi {
 public:
  // What a method answers; `target` is the recorded instance (changes to it stay), nullptr for a static method.
  using Method = std::function<StatusOr<wmi::MethodResult>(wmi::Object* target, const wmi::Arguments& in)>;

  struct Call {
    std::string namespace_name;
    std::string class_name;
    std::string path;  // the instance's path; the class name for a static method
    std::string method;
    wmi::Arguments in;
  };

  // A class with no instances (yet).
  void AddClass(const std::string& namespace_name, const std::string& class_name) {
    classes_[Key(namespace_name, class_name)];
  }
  // Adds an instance; its class exists from then on. The reference stays valid while this object lives.
  wmi::Object& Add(const std::string& namespace_name, wmi::Object object) {
    auto& instances = classes_[Key(namespace_name, object.class_name())];
    instances.push_back(std::move(object));
    return instances.back();
  }
  // The recorded instances of a class, to change in place (a method's effect on objects other than its target).
  std::deque<wmi::Object>& Instances(const std::string& namespace_name, const std::string& class_name) {
    return classes_[Key(namespace_name, class_name)];
  }
  // Removes the instances of a class that `match` selects.
  void Remove(const std::string& namespace_name, const std::string& class_name,
              const std::function<bool(const wmi::Object&)>& match) {
    auto& instances = classes_[Key(namespace_name, class_name)];
    for (auto it = instances.begin(); it != instances.end();) it = match(*it) ? instances.erase(it) : it + 1;
  }
  // Links `source` to `result` through the association class `association`, whose properties `role` and
  // `result_role` refer to each (MSFT_iSCSITargetToiSCSITargetPortal: iSCSITarget, iSCSITargetPortal); an
  // associators query from either side finds the other while it is recorded. Both must have paths.
  void Associate(const std::string& namespace_name, const std::string& association, const wmi::Object& source,
                 const std::string& role, const wmi::Object& result, const std::string& result_role) {
    AddClass(namespace_name, association);
    links_.push_back({Key(namespace_name, association), source.class_name(), source.path(), role, result.class_name(),
                      result.path(), result_role});
  }
  void OnMethod(const std::string& namespace_name, const std::string& class_name, const std::string& method,
                Method answer) {
    methods_[Key(namespace_name, class_name) + "." + common::AsciiLower(method)] = std::move(answer);
  }

  // Every WQL text asked, in order, and every call made.
  const std::vector<std::string>& queries() const { return queries_; }
  const std::vector<Call>& calls() const { return calls_; }
  // The calls of one method ("Format"), in order.
  std::vector<Call> CallsOf(const std::string& method) const {
    std::vector<Call> found;
    for (const auto& c : calls_) {
      if (common::AsciiLower(c.method) == common::AsciiLower(method)) found.push_back(c);
    }
    return found;
  }

  // Sessions onto these records, as the real ConnectWmi makes them.
  wmi::Connector Connector() {
    return [this](std::string_view namespace_name) -> StatusOr<std::unique_ptr<wmi::Session>> {
      const std::string prefix = common::AsciiLower(std::string(namespace_name)) + ":";
      for (const auto& [key, instances] : classes_) {
        if (key.rfind(prefix, 0) == 0) return std::unique_ptr<wmi::Session>(new Session(*this, namespace_name));
      }
      return Unimplemented("this system has no WMI namespace " + std::string(namespace_name));
    };
  }

  // The argument of a recorded call (or of in-parameters), or null.
  static wmi::Value Argument(const wmi::Arguments& in, const std::string& name) {
    for (const auto& [key, value] : in) {
      if (common::AsciiLower(key) == common::AsciiLower(name)) return value;
    }
    return wmi::Value();
  }
  static wmi::Value Argument(const Call& call, const std::string& name) { return Argument(call.in, name); }

 private:
  static std::string Key(std::string_view namespace_name, std::string_view class_name) {
    return common::AsciiLower(std::string(namespace_name)) + ":" + common::AsciiLower(std::string(class_name));
  }

  // WQL's comparison of a property with a literal: strings without regard to case, integers by value whether
  // they are kept as numbers or decimal strings.
  static bool Matches(const wmi::Object& object, const wmi::Condition& c) {
    const wmi::Value* have = object.Find(c.property);
    const wmi::Value null;
    if (have == nullptr) have = &null;
    int order = 0;
    bool comparable = true;
    uint64_t a = 0, b = 0;
    auto as_number = [](const wmi::Value& v, uint64_t& out) {
      if (const auto* n = std::get_if<int64_t>(&v)) return *n >= 0 && (out = static_cast<uint64_t>(*n), true);
      if (const auto* s = std::get_if<std::string>(&v)) return common::ParseDecimal(*s, out);
      return false;
    };
    if (std::holds_alternative<int64_t>(c.value) && as_number(*have, a) && as_number(c.value, b)) {
      order = a < b ? -1 : a > b ? 1 : 0;
    } else if (std::holds_alternative<std::string>(c.value) && std::holds_alternative<std::string>(*have)) {
      std::string x = common::AsciiLower(std::get<std::string>(*have));
      std::string y = common::AsciiLower(std::get<std::string>(c.value));
      order = x < y ? -1 : x > y ? 1 : 0;
    } else if (std::holds_alternative<bool>(c.value) && std::holds_alternative<bool>(*have)) {
      order = std::get<bool>(*have) == std::get<bool>(c.value) ? 0 : 1;
    } else {
      comparable = false;  // null on either side: WQL compares nothing with null
    }
    if (c.op == "=") return comparable && order == 0;
    if (c.op == "<>") return comparable && order != 0;
    if (c.op == "<") return comparable && order < 0;
    if (c.op == ">") return comparable && order > 0;
    if (c.op == "<=") return comparable && order <= 0;
    return comparable && order >= 0;
  }

  class Session final : public wmi::Session {
   public:
    Session(RecordedWmi& records, std::string_view namespace_name) : records_(records), namespace_(namespace_name) {}
    const std::string& namespace_name() const override { return namespace_; }

    StatusOr<std::vector<wmi::Object>> Execute(const wmi::Query& query) override {
      CSI_PROXY_ASSIGN_OR_RETURN(std::string wql, wmi::ToWql(query));
      records_.queries_.push_back(wql);
      auto found = records_.classes_.find(Key(namespace_, query.class_name));
      if (found == records_.classes_.end()) {
        return Unimplemented("this system has no WMI class " + query.class_name + " in " + namespace_);
      }
      std::vector<wmi::Object> answer;
      for (const auto& object : found->second) {
        bool all = true;
        for (const auto& c : query.where) all = all && Matches(object, c);
        if (!all) continue;
        if (query.properties.empty()) {
          answer.push_back(object);
          continue;
        }
        wmi::Properties selected;
        for (const auto& name : query.properties) {
          if (const wmi::Value* v = object.Find(name)) selected.emplace(name, *v);
        }
        answer.emplace_back(object.class_name(), "", std::move(selected));
      }
      return answer;
    }

    StatusOr<std::vector<wmi::Object>> Associated(const wmi::Object& source, const wmi::Associators& which) override {
      CSI_PROXY_ASSIGN_OR_RETURN(std::string wql, wmi::ToWql(source, which));
      records_.queries_.push_back(wql);
      for (const std::string* name : {&which.association, &which.result_class}) {
        if (records_.classes_.count(Key(namespace_, *name)) == 0) {
          return Unimplemented("this system has no WMI class " + *name + " in " + namespace_);
        }
      }
      auto same = [](const std::string& a, const std::string& b) {
        return common::AsciiLower(a) == common::AsciiLower(b);
      };
      std::vector<wmi::Object> answer;
      for (const auto& link : records_.links_) {
        if (link.association != Key(namespace_, which.association)) continue;
        // Either side may be the source.
        for (bool forward : {true, false}) {
          const std::string& from_class = forward ? link.source_class : link.result_class;
          const std::string& from_path = forward ? link.source_path : link.result_path;
          const std::string& from_role = forward ? link.role : link.result_role;
          const std::string& to_class = forward ? link.result_class : link.source_class;
          const std::string& to_path = forward ? link.result_path : link.source_path;
          const std::string& to_role = forward ? link.result_role : link.role;
          if (!same(from_class, source.class_name()) || from_path != source.path()) continue;
          if (!same(to_class, which.result_class)) continue;
          if (!which.role.empty() && !same(which.role, from_role)) continue;
          if (!which.result_role.empty() && !same(which.result_role, to_role)) continue;
          for (const auto& object : records_.classes_[Key(namespace_, to_class)]) {
            if (object.path() == to_path) answer.push_back(object);  // gone objects are no longer associated
          }
        }
      }
      return answer;
    }

    StatusOr<wmi::MethodResult> Call(const wmi::Object& target, std::string_view method,
                                     const wmi::Arguments& in) override {
      if (target.path().empty()) {
        return Internal("the WMI " + target.class_name() +
                        " object has no path (query it with all its properties to call its methods)");
      }
      auto instances = records_.classes_.find(Key(namespace_, target.class_name()));
      if (instances == records_.classes_.end()) {
        return Unimplemented("this system has no WMI class " + target.class_name() + " in " + namespace_);
      }
      for (auto& object : instances->second) {
        if (object.path() == target.path()) return Invoke(target.class_name(), target.path(), &object, method, in);
      }
      return wmi::HresultStatus(0x80041002, "WMI " + target.class_name() + "." + std::string(method));
    }

    StatusOr<wmi::MethodResult> CallStatic(std::string_view class_name, std::string_view method,
                                           const wmi::Arguments& in) override {
      if (records_.classes_.count(Key(namespace_, class_name)) == 0) {
        return Unimplemented("this system has no WMI class " + std::string(class_name) + " in " + namespace_);
      }
      return Invoke(std::string(class_name), std::string(class_name), nullptr, method, in);
    }

   private:
    StatusOr<wmi::MethodResult> Invoke(const std::string& class_name, const std::string& path, wmi::Object* target,
                                       std::string_view method, const wmi::Arguments& in) {
      records_.calls_.push_back(RecordedWmi::Call{namespace_, class_name, path, std::string(method), in});
      auto answer = records_.methods_.find(Key(namespace_, class_name) + "." + common::AsciiLower(std::string(method)));
      if (answer == records_.methods_.end()) {
        return Unimplemented("this system's WMI class " + class_name + " has no method " + std::string(method));
      }
      return answer->second(target, in);
    }

    RecordedWmi& records_;
    std::string namespace_;
  };

  struct Link {
    std::string association;  // Key(namespace, association class)
    std::string source_class, source_path, role, result_class, result_path, result_role;
  };

  std::map<std::string, std::deque<wmi::Object>> classes_;
  std::vector<Link> links_;
  std::map<std::string, Method> methods_;
  std::vector<std::string> queries_;
  std::vector<Call> calls_;
};

// The value of an answer a test expects to succeed; a failed one fails the test instead of being read.
template <typename T>
T Ok(StatusOr<T> answer) {
  EXPECT_TRUE(answer.ok()) << answer.status().message();
  return answer.ok() ? std::move(*answer) : T{};
}

// A method's answer: its ReturnValue and out-parameters.
inline wmi::MethodResult Answer(uint32_t return_value, wmi::Properties out = {}) {
  out.emplace("ReturnValue", static_cast<int64_t>(return_value));
  return wmi::MethodResult{return_value, wmi::Object("__PARAMETERS", "", std::move(out))};
}

}  // namespace csi_proxy::testing
