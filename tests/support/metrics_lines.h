// Reading dtrain-clip's metrics files in end-to-end tests: the end line of every rank and one
// field of a JSON line (the lines are flat objects that dtrain-clip writes itself); and a rank's
// heartbeat file.
#pragma once

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

namespace dtrain::test {

// The last {"event":"end"...} line of every rank's metrics file under `dir`, by file name.
inline std::map<std::string, std::string> EndLines(const std::string& dir) {
  std::map<std::string, std::string> ends;
  for (auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    if (entry.path().extension() != ".jsonl") continue;
    std::ifstream in(entry.path());
    for (std::string line; std::getline(in, line);) {
      if (line.find("\"event\":\"end\"") != std::string::npos) {
        ends[entry.path().filename()] = line;
      }
    }
  }
  return ends;
}

// The raw text of `key`'s value in a flat JSON line ("" when absent).
inline std::string Field(const std::string& line, const std::string& key) {
  size_t at = line.find("\"" + key + "\":");
  if (at == std::string::npos) return "";
  size_t start = at + key.size() + 3;
  size_t end = line.find_first_of(",}", start);
  return line.substr(start, end - start);
}

// A dtrain-clip heartbeat file's "key value" lines (the value is the rest of the line), by key;
// empty when the file is not there yet.
inline std::map<std::string, std::string> HeartbeatFields(const std::string& path) {
  std::ifstream in(path);
  std::map<std::string, std::string> fields;
  for (std::string line; std::getline(in, line);) {
    const size_t space = line.find(' ');
    if (space != std::string::npos) fields[line.substr(0, space)] = line.substr(space + 1);
  }
  return fields;
}

}  // namespace dtrain::test
