#include "launcher/env_file.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include <fmt/format.h>

#include "launcher/error.h"
#include "launcher/shell_quote.h"
#include "launcher/ssh/ssh_session.h"

namespace dtrain {

std::map<std::string, std::string> ReadEnvFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    throw UsageError(fmt::format("{}: cannot read the env file: {}", path, std::strerror(errno)));
  }
  std::map<std::string, std::string> env;
  int line_number = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const size_t first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;
    const size_t eq = line.find('=');
    const std::string name = eq == std::string::npos ? "" : line.substr(0, eq);
    if (!IsShellVariableName(name)) {
      throw UsageError(fmt::format(
          "{}:{}: expected NAME=VALUE (NAME: letters, digits and _, not starting with a digit), "
          "got '{}'",
          path, line_number, line));
    }
    env[name] = line.substr(eq + 1);
  }
  return env;
}

std::string DefaultEnvFile() {
  struct stat st;
  if (::stat(".dtrain_env", &st) == 0) return ".dtrain_env";
  const char* home = std::getenv("HOME");
  if (home && *home) {
    const std::string path = std::string(home) + "/.dtrain_env";
    if (::stat(path.c_str(), &st) == 0) return path;
  }
  return "";
}

std::string ApplyEnvFile(ClusterSpec& spec) {
  const std::string path = spec.env_file.empty() ? DefaultEnvFile() : ExpandHome(spec.env_file);
  if (path.empty()) return path;
  std::map<std::string, std::string> env = ReadEnvFile(path);
  for (const auto& [name, value] : spec.env) env[name] = value;
  spec.env = std::move(env);
  return path;
}

}  // namespace dtrain
