// See log_setup.h.
#include "observe/log_setup.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/rotating_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <exception>
#include <memory>
#include <vector>

#include "observe/audit_log.h"

namespace csi_proxy::host {
namespace {

// One JSON object per line: time, level, group (when the line is about one) and message.
class JsonFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    std::string_view text(msg.payload.data(), msg.payload.size());
    std::string group = GroupOf(text);
    std::string line = "{\"time\":" + JsonQuote(Rfc3339(msg.time)) + ",\"level\":" +
                       JsonQuote(std::string_view(spdlog::level::to_string_view(msg.level).data(),
                                                  spdlog::level::to_string_view(msg.level).size())) +
                       (group.empty() ? "" : ",\"group\":" + JsonQuote(group)) + ",\"msg\":" + JsonQuote(text) + "}\n";
    dest.append(line.data(), line.data() + line.size());
  }
  std::unique_ptr<spdlog::formatter> clone() const override { return std::make_unique<JsonFormatter>(); }

 private:
  // A library's own lines start with "[<group>] "; the host's lines about a group say "group '<name>'".
  static std::string GroupOf(std::string_view text) {
    if (!text.empty() && text[0] == '[') {
      size_t end = text.find("] ");
      if (end != std::string_view::npos && end > 1) return std::string(text.substr(1, end - 1));
    }
    size_t at = text.find("group '");
    if (at == std::string_view::npos) return "";
    size_t start = at + 7, end = text.find('\'', start);
    return end == std::string_view::npos ? "" : std::string(text.substr(start, end - start));
  }
};

}  // namespace

Status SetUpLogging(const std::string& level, const std::string& format, const std::string& file, size_t file_max_bytes,
                    bool to_stderr) {
  std::vector<spdlog::sink_ptr> sinks;
  if (to_stderr || file.empty()) sinks.push_back(std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
  if (!file.empty()) {
    try {
      if (file_max_bytes > 0) {
        sinks.push_back(std::make_shared<spdlog::sinks::rotating_file_sink_mt>(file, file_max_bytes, 1));
      } else {
        sinks.push_back(std::make_shared<spdlog::sinks::basic_file_sink_mt>(file));
      }
    } catch (const spdlog::spdlog_ex& e) {
      return FailedPrecondition("cannot open the log file " + file + ": " + e.what());
    }
  }
  auto logger = std::make_shared<spdlog::logger>("csi-proxy", sinks.begin(), sinks.end());
  if (format == "json") {
    logger->set_formatter(std::make_unique<JsonFormatter>());
  } else {
    logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e%z %^%-5l%$ %v");
  }
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(level));
  spdlog::flush_on(spdlog::level::trace);
  return Status::Ok();
}

void LogFatalErrorsOnTerminate() {
  std::set_terminate([] {
    std::string what = "std::terminate called";
    if (std::exception_ptr e = std::current_exception()) {
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& ex) {
        what = std::string("unhandled exception: ") + ex.what();
      } catch (...) {
        what = "unhandled exception of an unknown type";
      }
    }
    spdlog::critical("exiting: fatal error: {}", what);
    spdlog::shutdown();
    std::abort();
  });
}

}  // namespace csi_proxy::host
