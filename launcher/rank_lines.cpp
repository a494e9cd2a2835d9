#include "launcher/rank_lines.h"

namespace dtrain {

void RankLines::Add(int rank, OutputStream stream, std::string_view bytes) {
  std::string& partial = partial_[{rank, stream}];
  size_t start = 0;
  for (size_t nl = bytes.find('\n'); nl != std::string_view::npos; nl = bytes.find('\n', start)) {
    if (partial.empty()) {
      emit_(rank, stream, bytes.substr(start, nl - start));
    } else {
      partial.append(bytes.substr(start, nl - start));
      emit_(rank, stream, partial);
      partial.clear();
    }
    start = nl + 1;
  }
  partial.append(bytes.substr(start));
  if (partial.size() > kMaxPartialLine) {
    emit_(rank, stream, partial);
    partial.clear();
  }
}

void RankLines::Finish(int rank) {
  for (OutputStream stream : {OutputStream::kStdout, OutputStream::kStderr}) {
    auto it = partial_.find({rank, stream});
    if (it == partial_.end() || it->second.empty()) continue;
    emit_(rank, stream, it->second);
    it->second.clear();
  }
}

void RankLines::FinishAll() {
  for (auto& [where, partial] : partial_) {
    if (!partial.empty()) emit_(where.first, where.second, partial);
    partial.clear();
  }
}

}  // namespace dtrain
