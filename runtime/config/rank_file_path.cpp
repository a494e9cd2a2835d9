#include "runtime/config/rank_file_path.h"

namespace dtrain::clip {

std::string RankFilePath(const std::string& path, int rank, int world_size) {
  if (world_size <= 1 || path.empty()) return path;
  const size_t name = path.find_last_of('/');
  const size_t start = name == std::string::npos ? 0 : name + 1;
  size_t dot = path.find_last_of('.');
  // No extension: a dot only in a folder's name, or a leading dot (".trace").
  if (dot == std::string::npos || dot <= start) dot = path.size();
  return path.substr(0, dot) + ".rank-" + std::to_string(rank) + path.substr(dot);
}

}  // namespace dtrain::clip
