#include "planner/service/logging.h"

#include <atomic>
#include <memory>

#include "google/protobuf/stubs/logging.h"
#include "grpc/support/log.h"
#include "spdlog/sinks/stdout_sinks.h"

namespace remat {
namespace {

std::atomic<bool> g_json{false};

std::shared_ptr<spdlog::logger> Logger() {
  static std::shared_ptr<spdlog::logger> logger = [] {
    auto l = spdlog::stderr_logger_mt("rematd");
    l->set_pattern("%Y-%m-%dT%H:%M:%S.%eZ %L %v",
                   spdlog::pattern_time_type::utc);
    l->flush_on(spdlog::level::debug);
    return l;
  }();
  return logger;
}

// Lines that libprotobuf and gRPC write themselves (e.g. a string field
// with invalid UTF-8) go through LogEvent too, so a JSON log stays one JSON
// object per line.
void ProtobufLog(google::protobuf::LogLevel level, const char* file, int line,
                 const std::string& message) {
  spdlog::level::level_enum to = spdlog::level::err;
  switch (level) {
    case google::protobuf::LOGLEVEL_INFO:
      to = spdlog::level::info;
      break;
    case google::protobuf::LOGLEVEL_WARNING:
      to = spdlog::level::warn;
      break;
    default:
      break;
  }
  LogEvent(to, "protobuf",
           {{"file", file != nullptr ? file : ""},
            {"line", line},
            {"message", message}});
}

void GrpcLog(gpr_log_func_args* args) {
  spdlog::level::level_enum to = spdlog::level::err;
  if (args->severity == GPR_LOG_SEVERITY_DEBUG) to = spdlog::level::debug;
  if (args->severity == GPR_LOG_SEVERITY_INFO) to = spdlog::level::info;
  LogEvent(to, "grpc",
           {{"file", args->file != nullptr ? args->file : ""},
            {"line", args->line},
            {"message", args->message != nullptr ? args->message : ""}});
}

}  // namespace

void InitLogging(const std::string& format, const std::string& level) {
  google::protobuf::SetLogHandler(&ProtobufLog);
  gpr_set_log_function(&GrpcLog);
  auto logger = Logger();
  g_json = format == "json";
  if (g_json) {
    // The body is a JSON object's members; the pattern adds the braces.
    logger->set_pattern(R"({"time":"%Y-%m-%dT%H:%M:%S.%eZ","level":"%l",%v})",
                        spdlog::pattern_time_type::utc);
  } else {
    logger->set_pattern("%Y-%m-%dT%H:%M:%S.%eZ %L %v",
                        spdlog::pattern_time_type::utc);
  }
  logger->set_level(spdlog::level::from_str(level));
}

std::string FormatLogBody(bool json, const std::string& msg,
                          const LogFields& fields) {
  if (json) {
    nlohmann::json obj = nlohmann::json::object();
    obj["msg"] = msg;
    for (const auto& kv : fields) obj[kv.first] = kv.second;
    std::string s =
        obj.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    return s.substr(1, s.size() - 2);  // members only
  }
  std::string line = msg;
  for (const auto& kv : fields) {
    line += ' ';
    line += kv.first;
    line += '=';
    line += kv.second.dump(-1, ' ', false,
                           nlohmann::json::error_handler_t::replace);
  }
  return line;
}

bool LogEnabled(spdlog::level::level_enum level) {
  return Logger()->should_log(level);
}

void LogEvent(spdlog::level::level_enum level, const std::string& msg,
              const LogFields& fields) {
  auto logger = Logger();
  if (!logger->should_log(level)) return;
  logger->log(level, "{}", FormatLogBody(g_json, msg, fields));
}

}  // namespace remat
