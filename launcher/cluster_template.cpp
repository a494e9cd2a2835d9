// Looks up the embedded templates and writes one to disk for `dtrain init`.
#include "launcher/cluster_template.h"

#include <fcntl.h>
#include <unistd.h>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "launcher/error.h"
#include "runtime/formats/file_sync.h"

namespace dtrain {

// Generated from templates/cluster-*.yaml by dtrain_embed_text (CMakeLists.txt).
std::string_view ClusterTemplate_local();
std::string_view ClusterTemplate_ssh();
std::string_view ClusterTemplate_slurm();

std::vector<std::string> ClusterTemplateNames() {
  return {"local", "ssh", "slurm"};
}

std::string_view ClusterTemplate(const std::string& name) {
  if (name == "local") return ClusterTemplate_local();
  if (name == "ssh") return ClusterTemplate_ssh();
  if (name == "slurm") return ClusterTemplate_slurm();
  throw UsageError("unknown template '" + name + "'; expected local, ssh or slurm");
}

void WriteClusterTemplate(const std::string& name, const std::string& path, bool force) {
  std::string_view text = ClusterTemplate(name);
  if (path == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return;
  }
  // O_EXCL makes "refuse to overwrite" atomic: no window between the check and the write.
  int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (force ? O_TRUNC : O_EXCL);
  int fd = ::open(path.c_str(), flags, 0644);
  if (fd < 0 && errno == EEXIST) {
    throw UsageError(path + ": already exists; pass --force to replace it, or -o FILE to write another");
  }
  if (fd < 0) throw Error(path + ": cannot create: " + std::strerror(errno));
  std::string error;
  if (clip::WriteWhatTheDiskTakes(fd, text, error) < text.size()) {
    ::close(fd);
    throw Error(path + ": cannot write: " + error);
  }
  if (::close(fd) != 0) throw Error(path + ": cannot write: " + std::strerror(errno));
}

}  // namespace dtrain
