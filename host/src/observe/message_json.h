// Requests and answers as JSON, from the descriptors a group library hands over (Endpoint::file_descriptors):
// the audit log renders requests with it, csi-proxyctl builds requests and prints answers with it.
#pragma once

#include <google/protobuf/descriptor.h>
#include <google/protobuf/dynamic_message.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "csi_proxy/status.hpp"

namespace csi_proxy::host {

// A field whose value is a secret (a password, a CHAP secret, a token, key material): the audit log never shows it.
bool IsSecretField(std::string_view field_name);

class MessageJson {
 public:
  // Builds a pool from serialized FileDescriptorProtos, imports first.
  static StatusOr<std::unique_ptr<MessageJson>> Build(const std::vector<std::string>& file_descriptors);

  // A method by its full path (/<package>.<Service>/<Method>); null when unknown.
  const google::protobuf::MethodDescriptor* FindMethod(std::string_view path) const;
  // Every method of every service in the pool.
  std::vector<const google::protobuf::MethodDescriptor*> Methods() const;

  // `bytes` as a message of `type`, printed as JSON (fields at their defaults included). With `redact`, every
  // secret field that is set reads "(redacted)".
  StatusOr<std::string> ToJson(const google::protobuf::Descriptor* type, std::string_view bytes, bool redact,
                               bool pretty) const;
  // JSON into the serialized message of `type`.
  StatusOr<std::string> FromJson(const google::protobuf::Descriptor* type, const std::string& json) const;

  // The method path of `method`: /<package>.<Service>/<Method>.
  static std::string PathOf(const google::protobuf::MethodDescriptor* method);

 private:
  MessageJson() = default;
  google::protobuf::DescriptorPool pool_;
  mutable google::protobuf::DynamicMessageFactory factory_{&pool_};
  std::vector<std::string> files_;  // the files the pool was built from, by name
};

}  // namespace csi_proxy::host
