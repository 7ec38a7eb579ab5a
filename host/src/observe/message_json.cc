// See message_json.h.
#include "observe/message_json.h"

#include <google/protobuf/descriptor.pb.h>
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cctype>

namespace csi_proxy::host {

namespace pb = google::protobuf;

bool IsSecretField(std::string_view field_name) {
  std::string name(field_name);
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  for (const char* word : {"secret", "password", "passwd", "credential", "token", "privatekey", "private_key"}) {
    if (name.find(word) != std::string::npos) return true;
  }
  return false;
}

namespace {

constexpr const char* kRedacted = "(redacted)";

void Redact(pb::Message& message) {
  const pb::Reflection* r = message.GetReflection();
  std::vector<const pb::FieldDescriptor*> fields;
  r->ListFields(message, &fields);
  for (const pb::FieldDescriptor* f : fields) {
    if (IsSecretField(f->name())) {
      if (f->type() == pb::FieldDescriptor::TYPE_STRING && !f->is_repeated()) {
        r->SetString(&message, f, kRedacted);
      } else if (f->type() == pb::FieldDescriptor::TYPE_STRING) {
        for (int i = 0; i < r->FieldSize(message, f); ++i) r->SetRepeatedString(&message, f, i, kRedacted);
      } else {
        r->ClearField(&message, f);  // bytes, numbers, whole messages: nothing of it shows
      }
      continue;
    }
    if (f->cpp_type() != pb::FieldDescriptor::CPPTYPE_MESSAGE) continue;
    if (f->is_repeated()) {
      for (int i = 0; i < r->FieldSize(message, f); ++i) Redact(*r->MutableRepeatedMessage(&message, f, i));
    } else {
      Redact(*r->MutableMessage(&message, f));
    }
  }
}

}  // namespace

StatusOr<std::unique_ptr<MessageJson>> MessageJson::Build(const std::vector<std::string>& file_descriptors) {
  if (file_descriptors.empty()) return NotFound("no descriptors");
  std::unique_ptr<MessageJson> out(new MessageJson());
  for (const auto& bytes : file_descriptors) {
    pb::FileDescriptorProto file;
    if (!file.ParseFromString(bytes)) return InvalidArgument("a file descriptor does not parse");
    if (out->pool_.FindFileByName(file.name()) != nullptr) continue;
    if (out->pool_.BuildFile(file) == nullptr)
      return InvalidArgument("file descriptor " + file.name() + " does not build");
    out->files_.push_back(file.name());
  }
  return out;
}

std::string MessageJson::PathOf(const pb::MethodDescriptor* method) {
  return "/" + method->service()->full_name() + "/" + method->name();
}

const pb::MethodDescriptor* MessageJson::FindMethod(std::string_view path) const {
  // /<service>/<method>
  if (path.size() < 4 || path[0] != '/') return nullptr;
  size_t slash = path.find('/', 1);
  if (slash == std::string_view::npos) return nullptr;
  const pb::ServiceDescriptor* service = pool_.FindServiceByName(std::string(path.substr(1, slash - 1)));
  return service != nullptr ? service->FindMethodByName(std::string(path.substr(slash + 1))) : nullptr;
}

std::vector<const pb::MethodDescriptor*> MessageJson::Methods() const {
  std::vector<const pb::MethodDescriptor*> out;
  for (const auto& name : files_) {
    const pb::FileDescriptor* file = pool_.FindFileByName(name);
    for (int s = 0; file != nullptr && s < file->service_count(); ++s) {
      for (int m = 0; m < file->service(s)->method_count(); ++m) out.push_back(file->service(s)->method(m));
    }
  }
  return out;
}

StatusOr<std::string> MessageJson::ToJson(const pb::Descriptor* type, std::string_view bytes, bool redact,
                                          bool pretty) const {
  std::unique_ptr<pb::Message> message(factory_.GetPrototype(type)->New());
  if (!message->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return InvalidArgument("the bytes are not a " + type->full_name());
  }
  if (redact) Redact(*message);
  pb::util::JsonPrintOptions options;
  options.add_whitespace = pretty;
  options.always_print_primitive_fields = true;
  std::string json;
  auto status = pb::util::MessageToJsonString(*message, &json, options);
  if (!status.ok()) return Internal("cannot print a " + type->full_name() + " as JSON: " + status.ToString());
  if (!pretty) return json;
  while (!json.empty() && json.back() == '\n') json.pop_back();
  return json;
}

StatusOr<std::string> MessageJson::FromJson(const pb::Descriptor* type, const std::string& json) const {
  std::unique_ptr<pb::Message> message(factory_.GetPrototype(type)->New());
  auto status = pb::util::JsonStringToMessage(json, message.get());
  if (!status.ok()) {
    return InvalidArgument("not a valid " + type->full_name() + " in JSON: " + std::string(status.message()));
  }
  return message->SerializeAsString();
}

}  // namespace csi_proxy::host
