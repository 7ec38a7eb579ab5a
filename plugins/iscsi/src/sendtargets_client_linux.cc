// In-process iSCSI SendTargets discovery; see sendtargets_client_linux.h.
#include "sendtargets_client_linux.h"

#include "csi_proxy/call_scope.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <set>

#include "iscsi_validation.h"

namespace csi_proxy::iscsi {
namespace {

using Clock = std::chrono::steady_clock;

// Opcodes (RFC 7143 section 11.1.1); requests have bit 0x40 set when sent as immediate.
constexpr uint8_t kOpNopOut = 0x00;
constexpr uint8_t kOpLoginRequest = 0x03;
constexpr uint8_t kOpTextRequest = 0x04;
constexpr uint8_t kOpLogoutRequest = 0x06;
constexpr uint8_t kOpNopIn = 0x20;
constexpr uint8_t kOpLoginResponse = 0x23;
constexpr uint8_t kOpTextResponse = 0x24;
constexpr uint8_t kOpLogoutResponse = 0x26;
constexpr uint8_t kOpAsyncMessage = 0x32;
constexpr uint8_t kOpReject = 0x3f;
constexpr uint8_t kImmediate = 0x40;

constexpr uint8_t kFlagFinal = 0x80;     // F (text) / T (login: transit)
constexpr uint8_t kFlagContinue = 0x40;  // C: the key=value text continues in the next PDU

// Login stages.
constexpr int kSecurityStage = 0;
constexpr int kOperationalStage = 1;
constexpr int kFullFeaturePhase = 3;

constexpr size_t kBhsSize = 48;
constexpr uint32_t kReservedTag = 0xffffffff;
constexpr size_t kMaxTextBytes = 4u << 20;  // all SendTargets text we accept
constexpr size_t kMaxPduData = 1u << 20;    // one PDU's data segment
constexpr uint32_t kOurMaxRecvDataSegment = 65536;

void Put16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}
void Put32(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v >> 24);
  p[1] = static_cast<uint8_t>(v >> 16);
  p[2] = static_cast<uint8_t>(v >> 8);
  p[3] = static_cast<uint8_t>(v);
}
uint32_t Get32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

struct Pdu {
  std::array<uint8_t, kBhsSize> bhs{};
  std::string data;

  uint8_t opcode() const { return bhs[0] & 0x3f; }
  uint8_t flags() const { return bhs[1]; }
  uint32_t itt() const { return Get32(&bhs[16]); }
  uint32_t ttt() const { return Get32(&bhs[20]); }
  uint32_t stat_sn() const { return Get32(&bhs[24]); }
};

std::string KeyValues(const std::vector<std::pair<std::string, std::string>>& kvs) {
  std::string out;
  for (const auto& [k, v] : kvs) {
    out += k;
    out += '=';
    out += v;
    out.push_back('\0');
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> ParseKeyValues(const std::string& data) {
  std::vector<std::pair<std::string, std::string>> out;
  size_t start = 0;
  while (start < data.size()) {
    size_t end = data.find('\0', start);
    if (end == std::string::npos) end = data.size();
    std::string item = data.substr(start, end - start);
    size_t eq = item.find('=');
    if (!item.empty()) {
      if (eq == std::string::npos) {
        out.emplace_back(item, "");
      } else {
        out.emplace_back(item.substr(0, eq), item.substr(eq + 1));
      }
    }
    start = end + 1;
  }
  return out;
}

// How long one wait for the portal lasts before the deadline and the call's cancellation are looked at again.
constexpr long long kWaitSliceMs = 100;

// When an exchange must stop: its own deadline, or the call it is for cancelled (or past the call's deadline).
struct Limits {
  Clock::time_point deadline;
  std::function<bool()> cancelled;

  // DEADLINE_EXCEEDED when one of them is reached, naming which.
  Status Check(const std::string& where) const {
    if (cancelled && cancelled()) {
      return DeadlineExceeded("the call was cancelled or reached its deadline while discovering iSCSI portal " + where);
    }
    if (Clock::now() >= deadline) return DeadlineExceeded("iSCSI portal " + where + " did not answer in time");
    return Status::Ok();
  }
  int SliceMs() const {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    return static_cast<int>(std::max<long long>(0, std::min<long long>(left, kWaitSliceMs)));
  }
};

class Connection {
 public:
  Connection(int fd, Limits limits, std::string where)
      : fd_(fd), limits_(std::move(limits)), where_(std::move(where)) {}
  ~Connection() { close(fd_); }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  Status Send(const Pdu& pdu) {
    std::array<uint8_t, kBhsSize> bhs = pdu.bhs;
    uint32_t len = static_cast<uint32_t>(pdu.data.size());
    bhs[4] = 0;  // no additional header segments
    bhs[5] = static_cast<uint8_t>(len >> 16);
    bhs[6] = static_cast<uint8_t>(len >> 8);
    bhs[7] = static_cast<uint8_t>(len);
    std::string wire(reinterpret_cast<const char*>(bhs.data()), bhs.size());
    wire += pdu.data;
    wire.append((4 - pdu.data.size() % 4) % 4, '\0');
    size_t off = 0;
    while (off < wire.size()) {
      CSI_PROXY_RETURN_IF_ERROR(Wait(POLLOUT));
      ssize_t n = send(fd_, wire.data() + off, wire.size() - off, MSG_NOSIGNAL);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n < 0) return Unavailable("sending to iSCSI portal " + where_ + " failed: " + std::strerror(errno));
      off += static_cast<size_t>(n);
    }
    return Status::Ok();
  }

  StatusOr<Pdu> Receive() {
    Pdu pdu;
    std::string header;
    CSI_PROXY_RETURN_IF_ERROR(ReadExact(kBhsSize, header));
    std::memcpy(pdu.bhs.data(), header.data(), kBhsSize);
    size_t ahs = size_t{pdu.bhs[4]} * 4;
    size_t len = (size_t{pdu.bhs[5]} << 16) | (size_t{pdu.bhs[6]} << 8) | size_t{pdu.bhs[7]};
    if (len > kMaxPduData) {
      return Internal("iSCSI portal " + where_ + " sent a " + std::to_string(len) + "-byte data segment");
    }
    std::string skip;
    if (ahs > 0) CSI_PROXY_RETURN_IF_ERROR(ReadExact(ahs, skip));
    std::string data;
    CSI_PROXY_RETURN_IF_ERROR(ReadExact(len + (4 - len % 4) % 4, data));
    data.resize(len);
    pdu.data = std::move(data);
    return pdu;
  }

 private:
  Status Wait(short events) {
    for (;;) {
      CSI_PROXY_RETURN_IF_ERROR(limits_.Check(where_));
      pollfd pfd{fd_, events, 0};
      int rc = poll(&pfd, 1, limits_.SliceMs());
      if (rc < 0 && errno == EINTR) continue;
      if (rc < 0) return Internal(std::string("poll: ") + std::strerror(errno));
      if (rc > 0) return Status::Ok();
    }
  }

  Status ReadExact(size_t n, std::string& out) {
    out.clear();
    out.reserve(n);
    char buf[8192];
    while (out.size() < n) {
      CSI_PROXY_RETURN_IF_ERROR(Wait(POLLIN));
      ssize_t got = recv(fd_, buf, std::min(sizeof buf, n - out.size()), 0);
      if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (got < 0) return Unavailable("reading from iSCSI portal " + where_ + " failed: " + std::strerror(errno));
      if (got == 0) return Unavailable("iSCSI portal " + where_ + " closed the connection");
      out.append(buf, static_cast<size_t>(got));
    }
    return Status::Ok();
  }

  int fd_;
  Limits limits_;
  std::string where_;
};

// Connects to the first address of the portal that accepts, within the deadline.
StatusOr<std::unique_ptr<Connection>> Dial(const Portal& portal, const Limits& limits, std::string& peer_address) {
  const Clock::time_point deadline = limits.deadline;
  std::string where = PortalToString(portal);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* result = nullptr;
  int rc = getaddrinfo(portal.address.c_str(), std::to_string(portal.port).c_str(), &hints, &result);
  if (rc != 0) return Unavailable("cannot resolve iSCSI portal " + where + ": " + gai_strerror(rc));
  std::string last_error = "no address";
  std::unique_ptr<Connection> conn;
  for (addrinfo* ai = result; ai != nullptr && conn == nullptr; ai = ai->ai_next) {
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      last_error = std::strerror(errno);
      continue;
    }
    int err = 0;
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
      err = errno;
      if (err == EINPROGRESS) {
        for (;;) {
          if (!limits.Check(where).ok()) {
            err = ETIMEDOUT;
            break;
          }
          pollfd pfd{fd, POLLOUT, 0};
          int pr = poll(&pfd, 1, limits.SliceMs());
          if (pr < 0 && errno == EINTR) continue;
          if (pr == 0) continue;
          socklen_t len = sizeof err;
          if (pr < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
          break;
        }
      }
    }
    if (err != 0) {
      last_error = std::strerror(err);
      close(fd);
      if (err == ETIMEDOUT && !limits.Check(where).ok()) break;
      continue;
    }
    char host[NI_MAXHOST] = {0};
    if (getnameinfo(ai->ai_addr, ai->ai_addrlen, host, sizeof host, nullptr, 0, NI_NUMERICHOST) == 0) {
      peer_address = host;
    }
    conn = std::make_unique<Connection>(fd, limits, where);
  }
  freeaddrinfo(result);
  if (conn == nullptr) {
    if (Status reached = limits.Check(where); !reached.ok()) {
      return DeadlineExceeded("cannot connect to iSCSI portal " + where + ": " + reached.message());
    }
    if (Clock::now() >= deadline) return DeadlineExceeded("cannot connect to iSCSI portal " + where + ": timed out");
    return Unavailable("cannot connect to iSCSI portal " + where + ": " + last_error);
  }
  return conn;
}

std::string LoginStatusText(uint8_t cls, uint8_t detail) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%02x%02x", cls, detail);
  std::string code = buf;
  if (cls == 1) return "the target moved (login status " + code + ")";
  if (cls == 2) {
    switch (detail) {
      case 1:
        return "authentication failed; the portal may require CHAP for discovery (login status " + code + ")";
      case 2:
        return "this initiator is not authorized (login status " + code + ")";
      case 3:
        return "target not found (login status " + code + ")";
      case 5:
        return "the target does not support this session type (login status " + code + ")";
      default:
        return "the target refused the login (login status " + code + ")";
    }
  }
  return "the target reported an error (login status " + code + ")";
}

// Keys that are declarations, not offers: no answer is expected.
bool IsDeclarative(const std::string& key) {
  static const std::set<std::string> keys = {"TargetAlias",          "TargetAddress",
                                             "TargetPortalGroupTag", "MaxRecvDataSegmentLength",
                                             "TargetName",           "InitiatorAlias"};
  return keys.count(key) != 0;
}

class DiscoverySession {
 public:
  DiscoverySession(Connection& conn, std::string where, std::string initiator_name)
      : conn_(conn), where_(std::move(where)), initiator_name_(std::move(initiator_name)) {
    std::random_device rd;
    isid_[0] = 0x80;  // ISID type "random" (RFC 7143 section 11.12.5)
    for (size_t i = 1; i < isid_.size() - 2; ++i) isid_[i] = static_cast<uint8_t>(rd());
  }

  Status Login() {
    int stage = kSecurityStage;
    bool stage_opened = false;
    std::vector<std::pair<std::string, std::string>> answers;
    for (int round = 0; round < 16; ++round) {
      int next = stage == kSecurityStage ? kOperationalStage : kFullFeaturePhase;
      std::vector<std::pair<std::string, std::string>> keys;
      if (!stage_opened) {
        if (stage == kSecurityStage) {
          keys = {{"InitiatorName", initiator_name_}, {"SessionType", "Discovery"}, {"AuthMethod", "None"}};
        } else {
          keys = {{"HeaderDigest", "None"},
                  {"DataDigest", "None"},
                  {"MaxRecvDataSegmentLength", std::to_string(kOurMaxRecvDataSegment)}};
        }
        stage_opened = true;
      }
      keys.insert(keys.end(), answers.begin(), answers.end());
      answers.clear();

      CSI_PROXY_ASSIGN_OR_RETURN(auto response, Exchange(stage, next, KeyValues(keys)));
      uint8_t cls = response.bhs[36], detail = response.bhs[37];
      if (cls != 0)
        return PermissionDenied("iSCSI portal " + where_ + " refused discovery: " + LoginStatusText(cls, detail));

      for (const auto& [key, value] : ParseKeyValues(response.data)) {
        if (key == "AuthMethod" && value != "None") {
          return PermissionDenied("iSCSI portal " + where_ + " requires authentication (" + QuoteValue(value) +
                                  ") for discovery, which the csi-proxy API cannot supply");
        }
        if ((key == "HeaderDigest" || key == "DataDigest") && value != "None") {
          return Internal("iSCSI portal " + where_ + " insists on " + key + "=" + QuoteValue(value));
        }
        if (IsDeclarative(key) || OurOffer(key)) continue;
        // The target offered a key we did not: answer with our value, or say we do not know it.
        if (key == "ErrorRecoveryLevel") {
          answers.emplace_back(key, "0");
        } else if (key == "IFMarker" || key == "OFMarker") {
          answers.emplace_back(key, "No");
        } else {
          answers.emplace_back(key, "NotUnderstood");
        }
      }
      bool transit = (response.flags() & kFlagFinal) != 0;
      if (transit) {
        int new_stage = response.flags() & 0x03;
        if (new_stage == kFullFeaturePhase) return Status::Ok();
        if (new_stage != stage) stage_opened = false;
        stage = new_stage;
      }
    }
    return Internal("iSCSI portal " + where_ + " did not finish the login negotiation");
  }

  StatusOr<std::string> SendTargets() {
    Pdu request;
    request.bhs[0] = kOpTextRequest;
    request.bhs[1] = kFlagFinal;
    Put32(&request.bhs[16], kTextTag);
    Put32(&request.bhs[20], kReservedTag);
    request.data = KeyValues({{"SendTargets", "All"}});
    std::string text;
    for (int pdus = 0; pdus < 4096; ++pdus) {
      Put32(&request.bhs[24], cmd_sn_++);
      Put32(&request.bhs[28], exp_stat_sn_);
      CSI_PROXY_RETURN_IF_ERROR(conn_.Send(request));
      for (;;) {
        CSI_PROXY_ASSIGN_OR_RETURN(auto pdu, conn_.Receive());
        if (pdu.opcode() == kOpNopIn) {
          CSI_PROXY_RETURN_IF_ERROR(AnswerNopIn(pdu));
          continue;
        }
        if (pdu.opcode() == kOpAsyncMessage) continue;
        if (pdu.opcode() == kOpReject) return Internal("iSCSI portal " + where_ + " rejected the SendTargets request");
        if (pdu.opcode() != kOpTextResponse || pdu.itt() != kTextTag) {
          return Internal("iSCSI portal " + where_ + " sent an unexpected PDU (opcode " + std::to_string(pdu.opcode()) +
                          ") during discovery");
        }
        exp_stat_sn_ = pdu.stat_sn() + 1;
        text += pdu.data;
        if (text.size() > kMaxTextBytes) return Internal("iSCSI portal " + where_ + " sent more than 4 MiB of targets");
        if ((pdu.flags() & kFlagFinal) && !(pdu.flags() & kFlagContinue)) return text;
        // More to come: ask for it with the target's transfer tag and an empty request.
        request.bhs[1] = kFlagFinal;
        Put32(&request.bhs[20], pdu.ttt());
        request.data.clear();
        break;
      }
    }
    return Internal("iSCSI portal " + where_ + " never finished its SendTargets answer");
  }

  // Best effort: the answer is already in hand, so a target that drops the connection here is not an error.
  void Logout() {
    Pdu request;
    request.bhs[0] = kImmediate | kOpLogoutRequest;
    request.bhs[1] = kFlagFinal;  // reason 0: close the session
    Put32(&request.bhs[16], kLogoutTag);
    Put32(&request.bhs[24], cmd_sn_);
    Put32(&request.bhs[28], exp_stat_sn_);
    if (!conn_.Send(request).ok()) return;
    for (int i = 0; i < 8; ++i) {
      auto pdu = conn_.Receive();
      if (!pdu.ok() || pdu->opcode() == kOpLogoutResponse) return;
    }
  }

 private:
  static constexpr uint32_t kLoginTag = 0;
  static constexpr uint32_t kTextTag = 1;
  static constexpr uint32_t kLogoutTag = 2;

  static bool OurOffer(const std::string& key) {
    return key == "InitiatorName" || key == "SessionType" || key == "AuthMethod" || key == "HeaderDigest" ||
           key == "DataDigest";
  }

  Pdu LoginPdu(int stage, int next, bool transit, const std::string& data) const {
    Pdu pdu;
    pdu.bhs[0] = kImmediate | kOpLoginRequest;
    pdu.bhs[1] = static_cast<uint8_t>((transit ? kFlagFinal : 0) | (stage << 2) | (transit ? next : 0));
    pdu.bhs[2] = 0x00;  // Version-max
    pdu.bhs[3] = 0x00;  // Version-min
    std::memcpy(&pdu.bhs[8], isid_.data(), isid_.size() - 2);
    Put16(&pdu.bhs[14], 0);  // TSIH 0: a new session
    Put32(&pdu.bhs[16], kLoginTag);
    Put32(&pdu.bhs[24], cmd_sn_);
    Put32(&pdu.bhs[28], exp_stat_sn_);
    pdu.data = data;
    return pdu;
  }

  // Sends one login request and returns the target's answer, collecting answers split with the C bit.
  StatusOr<Pdu> Exchange(int stage, int next, const std::string& data) {
    CSI_PROXY_RETURN_IF_ERROR(conn_.Send(LoginPdu(stage, next, true, data)));
    std::string text;
    for (int parts = 0; parts < 64; ++parts) {
      CSI_PROXY_ASSIGN_OR_RETURN(auto pdu, conn_.Receive());
      if (pdu.opcode() == kOpReject) return Internal("iSCSI portal " + where_ + " rejected the login request");
      if (pdu.opcode() != kOpLoginResponse) {
        return Internal("iSCSI portal " + where_ + " answered the login with opcode " + std::to_string(pdu.opcode()));
      }
      exp_stat_sn_ = pdu.stat_sn() + 1;
      text += pdu.data;
      if (!(pdu.flags() & kFlagContinue) || pdu.bhs[36] != 0) {
        pdu.data = std::move(text);
        return pdu;
      }
      CSI_PROXY_RETURN_IF_ERROR(conn_.Send(LoginPdu(stage, next, false, "")));
    }
    return Internal("iSCSI portal " + where_ + " sent a login answer in too many parts");
  }

  Status AnswerNopIn(const Pdu& nop_in) {
    if (nop_in.ttt() == kReservedTag) return Status::Ok();  // no answer wanted
    Pdu out;
    out.bhs[0] = kImmediate | kOpNopOut;
    out.bhs[1] = kFlagFinal;
    std::memcpy(&out.bhs[8], &nop_in.bhs[8], 8);  // LUN
    Put32(&out.bhs[16], kReservedTag);
    Put32(&out.bhs[20], nop_in.ttt());
    Put32(&out.bhs[24], cmd_sn_);
    Put32(&out.bhs[28], exp_stat_sn_);
    return conn_.Send(out);
  }

  Connection& conn_;
  std::string where_;
  std::string initiator_name_;
  std::array<uint8_t, 8> isid_{};  // 6 bytes of ISID (the last two are unused padding)
  uint32_t cmd_sn_ = 1;
  uint32_t exp_stat_sn_ = 0;
};

}  // namespace

SendTargetsResult ParseSendTargets(const std::string& text) {
  SendTargetsResult result;
  std::map<std::string, size_t> index;
  size_t current = SIZE_MAX;
  for (const auto& [key, value] : ParseKeyValues(text)) {
    if (key == "TargetName") {
      Status valid = ValidateIqn(value);
      if (!valid.ok()) {
        result.dropped.push_back(valid.message());  // quotes at most a bounded, escaped prefix of the name
        current = SIZE_MAX;                         // its TargetAddress lines go with it
        continue;
      }
      auto [it, added] = index.emplace(value, result.targets.size());
      if (added) result.targets.push_back({value, {}});
      current = it->second;
    } else if (key == "TargetAddress" && current != SIZE_MAX) {
      result.targets[current].addresses.push_back(value);
    }
  }
  return result;
}

StatusOr<SendTargetsResult> DiscoverSendTargets(const Portal& portal, const SendTargetsOptions& options) {
  Limits limits{Clock::now() + options.timeout, options.cancelled};
  if (!limits.cancelled) limits.cancelled = [] { return sdk::CallScope::Cancelled(); };
  std::string where = PortalToString(portal);
  SendTargetsResult result;
  CSI_PROXY_ASSIGN_OR_RETURN(auto conn, Dial(portal, limits, result.peer_address));
  DiscoverySession session(*conn, where, options.initiator_name);
  CSI_PROXY_RETURN_IF_ERROR(session.Login());
  CSI_PROXY_ASSIGN_OR_RETURN(auto text, session.SendTargets());
  session.Logout();
  SendTargetsResult parsed = ParseSendTargets(text);
  result.targets = std::move(parsed.targets);
  result.dropped = std::move(parsed.dropped);
  return result;
}

}  // namespace csi_proxy::iscsi
