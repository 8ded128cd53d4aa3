// rematd's structured logs: one line per event, as text
// ("2026-01-01T00:00:00.000Z I plan model=\"bert\" budget_bytes=...") or as
// one JSON object per line ({"time":...,"level":...,"msg":"plan",...}).
// Written to stderr through spdlog.
//
// Thread safety: InitLogging once, before other threads log; LogEvent may be
// called concurrently.
#ifndef REMAT_PLANNER_SERVICE_LOGGING_H_
#define REMAT_PLANNER_SERVICE_LOGGING_H_

#include <string>
#include <utility>
#include <vector>

#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"

namespace remat {

// format: "text" or "json"; level: "debug", "info", "warn", "error".
void InitLogging(const std::string& format, const std::string& level);

using LogFields = std::vector<std::pair<std::string, nlohmann::json>>;

void LogEvent(spdlog::level::level_enum level, const std::string& msg,
              const LogFields& fields = {});

// False when LogEvent at `level` would write nothing: lets hot paths skip
// building the fields.
bool LogEnabled(spdlog::level::level_enum level);

// The line LogEvent writes after the time and level, for tests.
std::string FormatLogBody(bool json, const std::string& msg,
                          const LogFields& fields);

}  // namespace remat

#endif  // REMAT_PLANNER_SERVICE_LOGGING_H_
