// See fuzz_input.h. A seeded PRNG per input; messages filled field by field through protobuf's reflection.
#include "fuzz_input.h"

#include <google/protobuf/dynamic_message.h>
#include <google/protobuf/message.h>

#include <limits>
#include <memory>
#include <random>

namespace csi_proxy::plugin_check {
namespace {

namespace pb = google::protobuf;
using Rng = std::mt19937_64;

uint64_t Fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

uint64_t Below(Rng& rng, uint64_t n) { return n == 0 ? 0 : rng() % n; }
bool Chance(Rng& rng, int percent) { return static_cast<int>(Below(rng, 100)) < percent; }

std::string RandomBytes(Rng& rng, size_t n) {
  std::string out(n, '\0');
  for (auto& c : out) c = static_cast<char>(rng());
  return out;
}

std::string PrintableString(Rng& rng, size_t n) {
  static const char alphabet[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:\\ $;'\"`*?";
  std::string out;
  for (size_t i = 0; i < n; ++i) out += alphabet[Below(rng, sizeof alphabet - 1)];
  return out;
}

class Generator {
 public:
  Generator(Rng& rng, const std::vector<std::string>& roots, size_t max_bytes)
      : rng_(rng), roots_(roots), max_bytes_(max_bytes) {}

  int64_t Integer() {
    static const int64_t special[] = {0,
                                      1,
                                      -1,
                                      2,
                                      7,
                                      255,
                                      4096,
                                      std::numeric_limits<int32_t>::max(),
                                      std::numeric_limits<int32_t>::min(),
                                      std::numeric_limits<int64_t>::max(),
                                      std::numeric_limits<int64_t>::min()};
    return Chance(rng_, 70) ? special[Below(rng_, std::size(special))] : static_cast<int64_t>(rng_());
  }

  std::string String() {
    switch (Below(rng_, 8)) {
      case 0:
        return "";
      case 1:
      case 2:
        if (!roots_.empty()) {
          std::string path = roots_[Below(rng_, roots_.size())];
          for (uint64_t i = 0, n = Below(rng_, 4); i < n; ++i) {
            path += "/" + (Chance(rng_, 15) ? std::string("..") : PrintableString(rng_, 1 + Below(rng_, 12)));
          }
          return path;
        }
        return "/" + PrintableString(rng_, Below(rng_, 30));
      case 3: {
        static const char* odd[] = {"/",    ".",   "..", "../../..", "/dev/null", "-1", "C:\\", "\\\\?\\Volume{x}\\",
                                    "a\nb", "%s%n"};
        return odd[Below(rng_, std::size(odd))];
      }
      case 4:
        return PrintableString(rng_, 200 + Below(rng_, 5000));
      default:
        return PrintableString(rng_, Below(rng_, 40));
    }
  }

  // A message of `type` with random fields, `depth` levels of nested messages at most.
  void Fill(pb::Message& m, int depth) {
    const pb::Descriptor* d = m.GetDescriptor();
    const pb::Reflection* r = m.GetReflection();
    for (int i = 0; i < d->field_count(); ++i) {
      const pb::FieldDescriptor* f = d->field(i);
      if (Chance(rng_, 25)) continue;
      const int count = f->is_repeated() ? static_cast<int>(Below(rng_, 4)) : 1;
      for (int k = 0; k < count; ++k) SetOne(m, r, f, depth);
    }
  }

  // Well-formed protobuf of no particular message: fields 1 to 20 of every wire type.
  std::string Wire(int depth, bool malformed) {
    std::string out;
    for (uint64_t i = 0, n = 1 + Below(rng_, 6); i < n; ++i) {
      const uint32_t field = 1 + static_cast<uint32_t>(Below(rng_, 20));
      static const uint32_t types[] = {0, 1, 2, 5};
      const uint32_t type = types[Below(rng_, 4)];
      Varint(out, (field << 3) | type);
      switch (type) {
        case 0:
          Varint(out, static_cast<uint64_t>(Integer()));
          break;
        case 1:
          out += RandomBytes(rng_, 8);
          break;
        case 5:
          out += RandomBytes(rng_, 4);
          break;
        default: {
          std::string payload = depth > 0 && Chance(rng_, 40) ? Wire(depth - 1, false) : String();
          // A length that runs past the end: the malformed message a careless decoder reads beyond.
          Varint(out, malformed && i + 1 == n ? payload.size() + 1 + Below(rng_, 1000) : payload.size());
          out += payload;
        }
      }
    }
    return out;
  }

  static void Varint(std::string& out, uint64_t v) {
    while (v >= 0x80) {
      out += static_cast<char>((v & 0x7f) | 0x80);
      v >>= 7;
    }
    out += static_cast<char>(v);
  }

  std::string Mutate(std::string s) {
    for (uint64_t i = 0, n = 1 + Below(rng_, 4); i < n; ++i) {
      const size_t at = static_cast<size_t>(Below(rng_, s.size() + 1));
      switch (Below(rng_, 4)) {
        case 0:
          if (at < s.size()) s[at] = static_cast<char>(s[at] ^ (1 << Below(rng_, 8)));
          break;
        case 1:
          s.insert(at, 1, static_cast<char>(rng_()));
          break;
        case 2:
          if (at < s.size()) s.erase(at, 1);
          break;
        default:
          if (at < s.size()) s[at] = static_cast<char>(rng_());
      }
    }
    return s.substr(0, max_bytes_);
  }

 private:
  void SetOne(pb::Message& m, const pb::Reflection* r, const pb::FieldDescriptor* f, int depth) {
    using T = pb::FieldDescriptor;
    const bool rep = f->is_repeated();
    switch (f->cpp_type()) {
      case T::CPPTYPE_INT32:
        rep ? r->AddInt32(&m, f, static_cast<int32_t>(Integer())) : r->SetInt32(&m, f, static_cast<int32_t>(Integer()));
        break;
      case T::CPPTYPE_INT64:
        rep ? r->AddInt64(&m, f, Integer()) : r->SetInt64(&m, f, Integer());
        break;
      case T::CPPTYPE_UINT32:
        rep ? r->AddUInt32(&m, f, static_cast<uint32_t>(Integer()))
            : r->SetUInt32(&m, f, static_cast<uint32_t>(Integer()));
        break;
      case T::CPPTYPE_UINT64:
        rep ? r->AddUInt64(&m, f, static_cast<uint64_t>(Integer()))
            : r->SetUInt64(&m, f, static_cast<uint64_t>(Integer()));
        break;
      case T::CPPTYPE_DOUBLE:
        rep ? r->AddDouble(&m, f, static_cast<double>(Integer())) : r->SetDouble(&m, f, static_cast<double>(Integer()));
        break;
      case T::CPPTYPE_FLOAT:
        rep ? r->AddFloat(&m, f, static_cast<float>(Integer())) : r->SetFloat(&m, f, static_cast<float>(Integer()));
        break;
      case T::CPPTYPE_BOOL:
        rep ? r->AddBool(&m, f, Chance(rng_, 50)) : r->SetBool(&m, f, Chance(rng_, 50));
        break;
      case T::CPPTYPE_ENUM: {
        const pb::EnumDescriptor* e = f->enum_type();
        // Mostly a declared value; at times a number the enum does not have (an open enum keeps it).
        int value = e->value(static_cast<int>(Below(rng_, e->value_count())))->number();
        if (Chance(rng_, 20) && f->file()->syntax() == pb::FileDescriptor::SYNTAX_PROTO3)
          value = static_cast<int>(Integer());
        rep ? r->AddEnumValue(&m, f, value) : r->SetEnumValue(&m, f, value);
        break;
      }
      case T::CPPTYPE_STRING: {
        std::string v = f->type() == T::TYPE_BYTES && Chance(rng_, 50) ? RandomBytes(rng_, Below(rng_, 64)) : String();
        rep ? r->AddString(&m, f, std::move(v)) : r->SetString(&m, f, std::move(v));
        break;
      }
      case T::CPPTYPE_MESSAGE:
        if (depth <= 0) return;
        Fill(rep ? *r->AddMessage(&m, f) : *r->MutableMessage(&m, f), depth - 1);
        break;
    }
  }

  Rng& rng_;
  const std::vector<std::string>& roots_;
  size_t max_bytes_;
};

}  // namespace

FuzzInputs::FuzzInputs(uint64_t seed, const std::string& method, const pb::Descriptor* request_type, std::string sample,
                       std::vector<std::string> path_roots, size_t max_bytes)
    : base_(seed ^ Fnv1a(method)),
      request_type_(request_type),
      sample_(std::move(sample)),
      path_roots_(std::move(path_roots)),
      max_bytes_(max_bytes) {}

FuzzInput FuzzInputs::Make(uint64_t index) const {
  Rng rng(base_ ^ (index * 0x9e3779b97f4a7c15ull));
  Generator gen(rng, path_roots_, max_bytes_);
  pb::DynamicMessageFactory factory;
  auto valid = [&]() -> std::string {
    if (request_type_ == nullptr) return gen.Wire(2, false);
    std::unique_ptr<pb::Message> m(factory.GetPrototype(request_type_)->New());
    gen.Fill(*m, 3);
    return m->SerializeAsString();
  };
  FuzzInput in;
  switch (index % 7) {
    case 0:
      in.kind = index == 0 || sample_.empty() ? "empty" : "configured request";
      in.bytes = index == 0 ? "" : sample_;
      break;
    case 1:
      in.kind = "random bytes";
      in.bytes = RandomBytes(rng, Below(rng, 256));
      break;
    case 2:
      in.kind = "valid";
      in.bytes = valid();
      break;
    case 3: {
      in.kind = "truncated";
      std::string v = valid();
      in.bytes = v.substr(0, v.empty() ? 0 : Below(rng, v.size()));
      break;
    }
    case 4: {
      // A valid message grown to nearly the largest request by a field the message does not know.
      in.kind = "oversized";
      in.bytes = valid();
      const size_t target = max_bytes_ - Below(rng, 64);
      if (in.bytes.size() + 16 < target) {
        std::string tail;
        Generator::Varint(tail, (1000u << 3) | 2u);
        const size_t payload = target - in.bytes.size() - tail.size() - 5;
        Generator::Varint(tail, payload);
        in.bytes += tail + std::string(payload, 'x');
      }
      in.bytes.resize(std::min(in.bytes.size(), max_bytes_));
      break;
    }
    case 5:
      in.kind = "malformed wire";
      in.bytes = gen.Wire(2, true);
      break;
    default:
      in.kind = "mutated";
      in.bytes = gen.Mutate(!sample_.empty() && Chance(rng, 50) ? sample_ : valid());
  }
  if (in.bytes.size() > max_bytes_) in.bytes.resize(max_bytes_);
  return in;
}

}  // namespace csi_proxy::plugin_check
