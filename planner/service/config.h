// rematd's configuration: defaults, the JSON config file, command-line flags
// (which override the file field by field), validation, and the mapping
// onto the planning core's options. The schema is proto/config.proto.
//
// Thread safety: pure functions.
#ifndef REMAT_PLANNER_SERVICE_CONFIG_H_
#define REMAT_PLANNER_SERVICE_CONFIG_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "planner/core.h"
#include "proto/config.pb.h"

namespace remat {

// The default gRPC endpoint: loopback only.
inline constexpr char kDefaultListen[] = "127.0.0.1:7421";
inline constexpr int kDefaultMetricsPort = 7422;
inline constexpr char kDefaultMetricsAddress[] = "127.0.0.1";
// core.solve_deadline_ms: below the remote client's 50 ms GetPlan deadline.
inline constexpr double kDefaultSolveDeadlineMs = 40;
// rematd's user and group may connect (connecting needs write permission).
inline constexpr char kDefaultUnixSocketMode[] = "0660";

// Every field of the config set to its default (documented in config.proto).
v1::DaemonConfig DefaultDaemonConfig();

// Parses a JSON config file (protobuf's JSON mapping; unknown fields are
// errors). Only the fields present are set. INVALID_ARGUMENT naming the
// file and what protobuf objected to; NOT_FOUND when it cannot be read.
absl::StatusOr<v1::DaemonConfig> ParseConfigFile(const std::string& path);

// OK, or INVALID_ARGUMENT whose message starts with the offending field
// (e.g. "limits.max_models (--max-models): must be >= 1, got 0").
// `solver_names` are the solvers default_solver may name.
absl::Status ValidateDaemonConfig(const v1::DaemonConfig& config,
                                  const std::vector<std::string>& solver_names);

// True for 127.0.0.0/8, ::1 and "localhost".
bool IsLoopbackHost(const std::string& host);

// Octal permission bits ("0660", "660", "0600"), at most 0777. False for
// anything else (setuid, setgid and sticky bits included).
bool ParseSocketMode(const std::string& octal, uint32_t* mode);

// allow_remote, or its former name allow_non_loopback.
bool AllowRemote(const v1::DaemonConfig& config);

// Splits "host:port" / "[v6]:port". INVALID_ARGUMENT on anything else.
absl::Status SplitHostPort(const std::string& address, std::string* host,
                           int* port);

// "unix:/path" for the configured unix socket (which may omit "unix:").
std::string UnixSocketTarget(const std::string& unix_socket);

CoreOptions ToCoreOptions(const v1::DaemonConfig& config);

// One setting of rematd: a field of proto/config.proto's DaemonConfig, its
// flag, its default and the values it accepts. ConfigSettings() is the one
// table of them: it makes the flags and their help (AddDaemonFlags), the
// defaults (DefaultDaemonConfig), the flags given over the file
// (ResolveDaemonConfig) and the range and choice checks of
// ValidateDaemonConfig, whose errors name the field and the flag. The
// field's type is the proto's.
struct ConfigSetting {
  std::string field;  // "limits.max_models": a path of DaemonConfig fields
  std::string flag;   // "--max-models"; empty: the config file only
  // As written on the command line; a map's default is empty (no entry).
  std::string default_value;
  std::string help;
  // A number's range: min <= value <= max (value < max when
  // max_exclusive). None: any value of the type.
  std::optional<double> min, max;
  bool max_exclusive = false;
  // A string's accepted values. Empty: any (or checked elsewhere).
  std::vector<std::string> choices;
};
const std::vector<ConfigSetting>& ConfigSettings();

// Command-line flags. Register them with AddDaemonFlags, parse, then
// ResolveDaemonConfig: defaults <- --config file <- flags given.
struct DaemonFlags {
  std::string config_file;
  bool validate_config = false;
  std::vector<std::string> import_files;  // --import: profiles to seed
  // The settings given, by field, as written (a map's: "key=value" each).
  std::map<std::string, std::vector<std::string>> given;
};

void AddDaemonFlags(CLI::App* app, DaemonFlags* flags);

// Call after app->parse. INVALID_ARGUMENT for an unreadable config or a
// flag value that is not of its field's type (validation is separate).
absl::StatusOr<v1::DaemonConfig> ResolveDaemonConfig(const DaemonFlags& flags);

}  // namespace remat

#endif  // REMAT_PLANNER_SERVICE_CONFIG_H_
